// all_to_all and ragged_all_to_all: each member sends a different chunk of
// its block to every other member.
#include <array>
#include <cstring>
#include <sstream>

#include "meshsim/kernels/dispatch.h"
#include "meshsim/core/strided.h"
#include "meshsim/ir/axis_env.h"
#include "meshsim/primitives/collectives/common.h"
#include "meshsim/primitives/families.h"

namespace meshsim {
namespace {

// --- all_to_all ------------------------------------------------------------------

// The primitive is always the tiled exchange; the wrapper adds and removes
// the unit dimensions of the untiled form, as JAX's does.
Avals all_to_all_eval(const Avals& in, const Params& p) {
  const Aval& x = in.at(0);
  const AxisNames axes = axis_names_param(p);
  const int64_t n = group_size("all_to_all", axes, p);
  const int64_t split = dim_param(p, "split_axis", x.ndim(), "all_to_all");
  const int64_t concat = dim_param(p, "concat_axis", x.ndim(), "all_to_all");
  if (x.shape[split] % n != 0)
    fail<ValueError>("The size of all_to_all split_axis (", x.shape[split],
                     ") has to be divisible by the size of the named axis ", names_str(axes), " (",
                     n, ")");
  Shape shape = x.shape;
  shape[split] /= n;
  shape[concat] *= n;
  return {like(x, shape, x.dtype, false)};
}

// Member j receives chunk j (along split_axis) of every member k's block and
// concatenates them along concat_axis in member order.
std::vector<Tensors> all_to_all_kernel(const MeshContext& ctx, const std::vector<Tensors>& in,
                                       const Params& p, const Avals& out) {
  const Groups groups = replica_groups(ctx, axis_names_param(p), p);
  const int64_t split = p.get<int64_t>("split_axis"), concat = p.get<int64_t>("concat_axis");
  const int64_t n = static_cast<int64_t>(groups[0].size());
  const std::vector<Tensor> x = contiguous_operands(ctx, in);
  const int64_t m = x[0].shape()[split] / n;
  std::vector<Tensors> res(in.size());
  for_each_member(ctx, groups, [&](int64_t g, int64_t j) {
    Tensor o = Tensor::empty(out[0].dtype, out[0].shape);
    for (int64_t k = 0; k < n; ++k) {
      const Tensor chunk = slice_dim(x[groups[g][k]], split, j * m, (j + 1) * m);
      const int64_t c = chunk.shape()[concat];
      copy_into(chunk, slice_dim(o, concat, k * c, (k + 1) * c));
    }
    res[groups[g][j]] = {o};
  });
  return res;
}

// --- ragged_all_to_all ------------------------------------------------------

const char* const kRaggedArgs[] = {"operand", "output", "input_offsets", "send_sizes",
                                   "output_offsets", "recv_sizes"};

Avals ragged_all_to_all_eval(const Avals& in, const Params& p) {
  for (int i = 2; i < 6; ++i)
    if (!is_integer(in[i].dtype))
      fail<ValueError>("ragged_all_to_all ", kRaggedArgs[i], " must be integer type.");
  for (int i = 2; i < 6; ++i)
    if (in[i].ndim() != 1 || in[i].shape[0] < 1)
      fail<ValueError>("ragged_all_to_all ", kRaggedArgs[i],
                       " must be rank 1 with positive dimension size, but got shape ",
                       shape_str(in[i].shape));
  const Aval &operand = in[0], &output = in[1];
  const AxisNames axes = axis_names_param(p);
  const int64_t n = group_size("ragged_all_to_all", axes, p);
  const int64_t k = in[2].shape[0];
  for (int i = 3; i < 6; ++i)
    if (in[i].shape[0] != k)
      fail<ValueError>("ragged_all_to_all input_offsets, send_sizes, output_offsets and "
                       "recv_sizes must have the same length, but got shapes ",
                       shape_str(in[2].shape), ", ", shape_str(in[3].shape), ", ",
                       shape_str(in[4].shape), " and ", shape_str(in[5].shape));
  if (k % n != 0)
    fail<ValueError>("ragged_all_to_all offsets and sizes have ", k,
                     " entries, which is not a multiple of the size ", n, " of axis_name ",
                     names_str(axes));
  if (operand.dtype != output.dtype)
    fail<TypeError>("ragged_all_to_all operand and output must have the same dtype, got ",
                    dtype_name(operand.dtype), " and ", dtype_name(output.dtype));
  if (operand.ndim() < 1 || operand.ndim() != output.ndim() ||
      !std::equal(operand.shape.begin() + 1, operand.shape.end(), output.shape.begin() + 1))
    fail<ValueError>("ragged_all_to_all operand and output must have the same rank (at least 1) "
                     "and the same dimensions after the first, got shapes ",
                     shape_str(operand.shape), " and ", shape_str(output.shape));
  return {like(output, output.shape, output.dtype, false)};
}

std::vector<int64_t> int_values(const Tensor& t) {
  std::vector<int64_t> out(t.size());
  const Tensor c = t.contiguous();
  dispatch_integer(c.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* v = c.data<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(v[i]);
  });
  return out;
}

// Sender s's entry i goes to member i / per (per = entries per member), rows
// operand[input_offsets[i]:][:send_sizes[i]] landing at output_offsets[i] of
// that member's output. Every slice is checked on every device before any
// data moves; a bad one raises once, naming the device, the entry and sizes.
std::vector<Tensors> ragged_all_to_all_kernel(const MeshContext& ctx,
                                              const std::vector<Tensors>& in, const Params& p,
                                              const Avals& out) {
  const AxisNames axes = axis_names_param(p);
  const Groups groups = replica_groups(ctx, axes, p);
  const int64_t n = static_cast<int64_t>(groups[0].size());
  const int64_t devices = static_cast<int64_t>(in.size());
  // idx[d][a]: device d's input_offsets, send_sizes, output_offsets, recv_sizes.
  std::vector<std::array<std::vector<int64_t>, 4>> idx(devices);
  ctx.parallel_for(devices, [&](int64_t d) {
    for (int a = 0; a < 4; ++a) idx[d][a] = int_values(in[d][2 + a]);
  });
  const int64_t k = static_cast<int64_t>(idx[0][0].size()), per = k / n;
  const int64_t row = num_elements(Shape(out[0].shape.begin() + 1, out[0].shape.end()));
  auto where = [&](int64_t pos) {
    std::ostringstream os;
    os << "device " << ctx.mesh().device_ids[pos] << " (index " << ctx.axis_index(pos, axes)
       << " along axis_name " << names_str(axes) << ")";
    return os.str();
  };
  for (const auto& g : groups)
    for (int64_t s = 0; s < n; ++s) {
      const int64_t pos = g[s];
      const auto& [io, ss, oo, rs] = idx[pos];
      const int64_t rows_in = in[pos][0].shape()[0];
      for (int64_t i = 0; i < k; ++i) {
        const int64_t dst = g[i / per], rows_out = in[dst][1].shape()[0];
        const int64_t slot = s * per + i % per;
        if (io[i] < 0 || ss[i] < 0 || io[i] + ss[i] > rows_in)
          fail<ValueError>("ragged_all_to_all: on ", where(pos), ", input_offsets[", i, "] = ",
                           io[i], " and send_sizes[", i, "] = ", ss[i],
                           " select rows outside the operand, which has ", rows_in, " rows");
        if (oo[i] < 0 || oo[i] + ss[i] > rows_out)
          fail<ValueError>("ragged_all_to_all: on ", where(pos), ", output_offsets[", i, "] = ",
                           oo[i], " and send_sizes[", i, "] = ", ss[i],
                           " select rows outside the output of ", where(dst), ", which has ",
                           rows_out, " rows");
        if (idx[dst][3][slot] != ss[i])
          fail<ValueError>("ragged_all_to_all: ", where(pos), " sends ", ss[i],
                           " rows (send_sizes[", i, "]) to ", where(dst),
                           ", which expects ", idx[dst][3][slot], " (recv_sizes[", slot, "])");
      }
    }
  const size_t row_bytes = row * itemsize(out[0].dtype);
  const std::vector<Tensor> operand = contiguous_operands(ctx, in, 0);
  std::vector<Tensors> res(in.size());
  for_each_member(ctx, groups, [&](int64_t g, int64_t j) {
    const int64_t pos = groups[g][j];
    Tensor o = in[pos][1].copy();
    char* dst = static_cast<char*>(o.raw());
    for (int64_t s = 0; s < n; ++s) {
      const int64_t from = groups[g][s];
      const auto& [io, ss, oo, rs] = idx[from];
      const char* src = static_cast<const char*>(operand[from].raw());
      for (int64_t i = j * per; i < (j + 1) * per; ++i)
        std::memcpy(dst + oo[i] * row_bytes, src + io[i] * row_bytes, ss[i] * row_bytes);
    }
    res[pos] = {o};
  });
  return res;
}

Value transpose_all_to_all(const Value& ct, const Params& p) {
  Params q = with(p, "split_axis", p.get<int64_t>("concat_axis"));
  q.set("concat_axis", p.get<int64_t>("split_axis"));
  return ops::bind1("all_to_all", {vary_over(ct, axis_names_param(p))}, q);
}

// JAX's _ragged_all_to_all_transpose: the cotangent travels back along the same
// slices (each receiver learns, by an all_to_all, where its rows came from and
// where they landed); the output buffer's cotangent is ct minus the rows the
// exchange overwrote.
Cotangents ragged_all_to_all_vjp(const VjpArgs& a) {
  const Value& t = *a.ct[0];
  const Params& p = a.params;
  Params exchange{{"axis_index_groups", p.is_none("axis_index_groups")
                                            ? ParamValue{}
                                            : ParamValue{p.get<IntLists>("axis_index_groups")}},
                  {"axis_name", axis_names_param(p)}, {"concat_axis", int64_t{0}},
                  {"split_axis", int64_t{0}}, {"tiled", true}};
  auto swap = [&](const Value& v) {
    return ops::bind1("all_to_all", {vary_over(v, axis_names_param(p))}, exchange);
  };
  const Value output_offsets = swap(a.in[4]);
  Cotangents ct(6);
  if (a.wants[0]) {
    const Value input_offsets = swap(a.in[2]);
    ct[0] = ops::bind1("ragged_all_to_all", {t, ops::zeros(aval_of(a.in[0])), output_offsets,
                                             a.in[5], input_offsets, a.in[3]}, p);
  }
  if (a.wants[1]) {
    // Row r was written iff output_offsets[i] <= r < output_offsets[i] + recv_sizes[i] for some i.
    const Aval ta = aval_of(t);
    const int64_t rows = ta.shape[0], k = aval_of(a.in[4]).shape[0];
    const Value r = ops::iota(DType::Int32, {rows, k}, 0);
    const Value start = ops::broadcast_in_dim(ops::convert(output_offsets, DType::Int32), {rows, k}, {1});
    const Value size = ops::broadcast_in_dim(ops::convert(a.in[5], DType::Int32), {rows, k}, {1});
    const Value hit = ops::logical_and(ops::ge(r, start), ops::lt(r, ops::add(start, size)));
    const Value written = ops::gt(ops::reduce_sum(ops::convert(hit, DType::Int32), {1}),
                                  ops::full({rows}, DType::Int32, 0.0));
    const Value mask = ops::broadcast_in_dim(written, ta.shape, {0});
    ct[1] = ops::select(mask, ops::zeros(ta), t);
  }
  return ct;
}

// Sizes known only at run time: sender s's entries for member j (send_sizes)
// times the row size; what a device keeps for itself does not move. One step
// (every pair exchanges directly).
Traffic ragged_all_to_all_traffic(const MeshContext& ctx, const std::vector<Tensors>& in,
                                  const Params& p, const Avals& out) {
  const AxisNames axes = axis_names_param(p);
  Traffic t = symmetric_traffic(ctx, axes, replica_groups(ctx, axes, p), 0, 1);
  const int64_t n = static_cast<int64_t>(t.groups.front().size());
  const int64_t row_bytes = num_elements(Shape(out[0].shape.begin() + 1, out[0].shape.end())) *
                            static_cast<int64_t>(itemsize(out[0].dtype));
  for (const auto& g : t.groups)
    for (int64_t s = 0; s < n; ++s) {
      const std::vector<int64_t> sizes = int_values(in[g[s]][3]);
      const int64_t per = static_cast<int64_t>(sizes.size()) / n;
      for (int64_t j = 0; j < n; ++j) {
        if (j == s) continue;
        for (int64_t i = j * per; i < (j + 1) * per; ++i) {
          t.sent[g[s]] += sizes[i] * row_bytes;
          t.received[g[j]] += sizes[i] * row_bytes;
        }
      }
    }
  return t;
}

}  // namespace

void register_all_to_all_primitives() {
  Primitive all_to_all;
  all_to_all.name = "all_to_all";
  all_to_all.operands = exactly(1);
  all_to_all.kind = Kind::Collective;
  // A ring: each device keeps 1/n of its block and sends the rest in n-1 steps.
  with_ring_comm(all_to_all, axis_names_param, true,
                              [](int64_t in, int64_t, int64_t n) { return in / n * (n - 1); },
                              [](int64_t n) { return n - 1; });
  lowers_to(all_to_all, "all-to-all");
  all_to_all.abstract_eval = all_to_all_eval;
  all_to_all.vma_rule = [](const Avals& in, const Params& p) {
    return collective_vma("all_to_all", in[0], axis_names_param(p));
  };
  all_to_all.mesh_kernel = all_to_all_kernel;
  register_primitive(with_linear_vjp(all_to_all, transpose_all_to_all));

  // JAX types the result like `output` (no check at all); the result varies
  // over the exchange's axes and with every operand, so meshsim says so.
  Primitive ragged;
  ragged.name = "ragged_all_to_all";
  ragged.operands = exactly(6);  // operand, output, input offsets, send sizes, output offsets, receive sizes
  ragged.kind = Kind::Collective;
  ragged.result_vma_unchecked = true;
  ragged.comm = ragged_all_to_all_traffic;
  ragged.comm_steps = [](int64_t) { return int64_t{1}; };  // every device sends its chunks at once
  // From the types alone: at most the output buffer's share for the others.
  ragged.comm_bytes = [](const Avals&, const Avals& out, int64_t n) { return nbytes(out[0]) * (n - 1) / n; };
  lowers_to(ragged, "ragged-all-to-all");
  ragged.abstract_eval = ragged_all_to_all_eval;
  ragged.vma_rule = [](const Avals& in, const Params& p) {
    if (!vma_checking()) return AxisNames{};
    AxisNames vma = axis_names_param(p);
    for (const Aval& a : in) vma = vma_plus(vma, a.vma);
    return vma_plus(vma, {});
  };
  ragged.mesh_kernel = ragged_all_to_all_kernel;
  ragged.vjp = ragged_all_to_all_vjp;
  register_primitive(std::move(ragged));
}

namespace {
const bool kRegistered = add_primitive_family(register_all_to_all_primitives);  // families.h
}  // namespace

}  // namespace meshsim

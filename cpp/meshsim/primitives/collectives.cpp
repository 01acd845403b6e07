// Collectives and the VMA casts: the primitives that exist only inside a
// shard_map body. Each collective's `mesh_kernel` runs once over all devices'
// blocks (runtime/mesh_executor.h); its groups follow JAX's replica groups:
// devices that differ only along the named axes, members in tuple order.
#include <algorithm>
#include <limits>
#include <map>
#include <cstring>
#include <numeric>
#include <optional>
#include <sstream>

#include "meshsim/ir/axis_env.h"
#include "meshsim/ir/ops.h"
#include "meshsim/kernels/integer_wrap.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/kernels/strided.h"
#include "meshsim/primitives/families.h"
#include "meshsim/runtime/mesh_executor.h"
#include "meshsim/runtime/sharded.h"

namespace meshsim {
namespace {

const StrList& axes_param(const Params& p) { return p.get<StrList>("axes"); }

bool contains(const AxisNames& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

std::string names_str(const AxisNames& names) {
  std::string s = "(";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + (names.size() == 1 ? ",)" : ")");
}

std::string frozenset_str(const AxisNames& names) {
  if (names.empty()) return "frozenset()";
  std::string s = "frozenset({";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + "})";
}

// `names` with `drop` removed / `add` appended, in mesh order.
AxisNames vma_minus(const AxisNames& vma, const AxisNames& drop) {
  AxisNames out;
  for (const auto& n : vma)
    if (!contains(drop, n)) out.push_back(n);
  return out;
}
AxisNames vma_plus(const AxisNames& vma, const AxisNames& add) {
  AxisNames out = vma;
  for (const auto& n : add)
    if (!contains(out, n)) out.push_back(n);
  const AxisEnv* env = current_axis_env();
  return env ? env->mesh->in_mesh_order(out) : out;
}

// An all-reduce: each group's members get one shared tensor holding the
// elementwise reduction of their blocks, combined in member order (so the
// result is the same whatever the thread count).
enum class Reduce { Sum, Max, Min };

// Whether `t` fills exactly size() consecutive elements from raw() in some
// order of its dimensions (contiguous, or a transpose of contiguous).
bool dense(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dimensions longer than 1
  for (int64_t d = 0; d < t.ndim(); ++d)
    if (t.shape()[d] != 1) dims.push_back({t.strides()[d], t.shape()[d]});
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

bool same_layout(const Tensor& a, const Tensor& b) {
  for (int64_t d = 0; d < a.ndim(); ++d)
    if (a.shape()[d] != 1 && a.strides()[d] != b.strides()[d]) return false;
  return true;
}

Tensor reduce_blocks(const std::vector<const Tensor*>& blocks, Reduce op, const MeshContext& ctx) {
  // Blocks laid out alike in dense memory (e.g. all transposed views) reduce
  // over their memory as it is, into a result with their layout: no copies.
  const Tensor& first = *blocks[0];
  bool flat = dense(first);
  for (size_t i = 1; i < blocks.size() && flat; ++i) flat = same_layout(first, *blocks[i]);
  Tensor out;
  std::vector<Tensor> srcs;
  if (flat) {
    Tensor buf = Tensor::empty(first.dtype(), {first.size()});
    std::memcpy(buf.raw(), first.raw(), first.nbytes());
    out = buf.view(first.shape(), first.strides(), 0);
    for (size_t i = 1; i < blocks.size(); ++i) srcs.push_back(*blocks[i]);
  } else {
    out = first.copy();
    for (size_t i = 1; i < blocks.size(); ++i) srcs.push_back(blocks[i]->contiguous());
  }
  if (blocks.size() == 1) return out;
  auto dispatch = [&](auto&& f) {  // bool: any/all of sharded reductions (pmax/pmin)
    if (out.dtype() == DType::Bool) f(bool{});
    else dispatch_numeric(out.dtype(), f);
  };
  dispatch([&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const int64_t n = out.size();
    auto run = [&](int64_t lo, int64_t hi) {
      for (const Tensor& s : srcs) {
        const T* x = s.data<T>();
        switch (op) {
          case Reduce::Sum: for (int64_t i = lo; i < hi; ++i) o[i] = add_op(o[i], x[i]); break;
          // As XLA's CPU all-reduce: a NaN loses to any number (NaN only if all are NaN).
          case Reduce::Max: for (int64_t i = lo; i < hi; ++i) o[i] = x[i] > o[i] || o[i] != o[i] ? x[i] : o[i]; break;
          case Reduce::Min: for (int64_t i = lo; i < hi; ++i) o[i] = x[i] < o[i] || o[i] != o[i] ? x[i] : o[i]; break;
        }
      }
      // All NaN: XLA's identity (-inf for max, +inf for min), as no number was seen.
      if constexpr (std::numeric_limits<T>::has_infinity)
        if (op != Reduce::Sum)
          for (int64_t i = lo; i < hi; ++i)
            if (o[i] != o[i])
              o[i] = op == Reduce::Max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    };
    constexpr int64_t kChunk = 1 << 16;  // elements per task: big blocks reduce in parallel
    if (n <= kChunk) return run(0, n);
    ctx.parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c) {
      const int64_t lo = c * kChunk;
      run(lo, std::min(n, lo + kChunk));
    });
  });
  return out;
}

std::vector<Tensors> all_reduce(const MeshContext& ctx, const std::vector<Tensors>& in,
                                const AxisNames& axes, Reduce op) {
  std::vector<Tensors> out(in.size(), Tensors(in[0].size()));
  const auto groups = ctx.groups(axes);
  for (size_t k = 0; k < in[0].size(); ++k) {
    // Groups holding the same buffers (a value replicated over other axes) reduce once.
    std::map<std::vector<const void*>, int64_t> seen;
    std::vector<int64_t> job_of(groups.size()), jobs;
    for (size_t g = 0; g < groups.size(); ++g) {
      std::vector<const void*> key;
      for (int64_t pos : groups[g]) key.push_back(in[pos][k].raw());
      auto [it, fresh] = seen.emplace(std::move(key), static_cast<int64_t>(jobs.size()));
      if (fresh) jobs.push_back(static_cast<int64_t>(g));
      job_of[g] = it->second;
    }
    std::vector<Tensor> reduced(jobs.size());
    ctx.parallel_for(static_cast<int64_t>(jobs.size()), [&](int64_t j) {
      std::vector<const Tensor*> blocks;
      for (int64_t pos : groups[jobs[j]]) blocks.push_back(&in[pos][k]);
      reduced[j] = reduce_blocks(blocks, op, ctx);
    });
    for (size_t g = 0; g < groups.size(); ++g)
      for (int64_t pos : groups[g]) out[pos][k] = reduced[job_of[g]];  // one buffer per group
  }
  return out;
}

// The rule every variant->invariant reduction shares: the axes must be bound,
// and (with VMA checking) the operand must vary over all of them.
Avals reduction_eval(const std::string& name, const Avals& in, const Params& p) {
  const AxisNames& axes = axes_param(p);
  bound_axis_size(axes, name);
  if (vma_checking())
    for (const Aval& a : in)
      for (const auto& n : axes)
        if (!contains(a.vma, n))
          fail<ValueError>(name, " is a variant->invariant collective. This means that the axis "
                           "names mentioned in `axes` passed to `", name, "` must be present in "
                           "`jax.typeof(inp).mat.varying`. Got axes=", names_str(axes),
                           " and jax.typeof(inp).mat.varying=", frozenset_str(a.vma));
  if (in.empty()) fail<TypeError>(name, " needs at least one operand");
  return in;
}

Primitive all_reduce_primitive(const std::string& name, Reduce op) {
  Primitive p;
  p.name = name;
  p.abstract_eval = [name](const Avals& in, const Params& params) {
    Avals out = reduction_eval(name, in, params);
    for (Aval& a : out) a.weak_type = in[0].weak_type;
    return out;
  };
  p.vma_rule = [](const Avals& in, const Params& params) {
    return vma_checking() ? vma_minus(in[0].vma, axes_param(params)) : AxisNames{};
  };
  p.mesh_kernel = [op](const MeshContext& ctx, const std::vector<Tensors>& in, const Params& params,
                       const Avals&) { return all_reduce(ctx, in, axes_param(params), op); };
  return p;
}

// ---------------------------------------------------------------------------
// Data-moving collectives. Each runs as tasks over (replica group, member):
// a task allocates or fills one member's result with memcpy-style block
// moves, so no two tasks write the same bytes and the result does not depend
// on the thread count.

using Groups = std::vector<std::vector<int64_t>>;

// The named axes of a collective. JAX keeps `axis_name` as the caller gave
// it: one name (all_to_all) or a tuple of names.
AxisNames axis_names_param(const Params& p) {
  for (const auto& [k, v] : p.items()) {
    if (k != "axis_name") continue;
    if (auto* s = std::get_if<std::string>(&v)) return {*s};
    if (auto* l = std::get_if<StrList>(&v)) return *l;
    if (auto* l = std::get_if<IntList>(&v); l && l->empty()) return {};
    fail<TypeError>("axis_name must be an axis name or a tuple of axis names");
  }
  fail<ValueError>("missing parameter 'axis_name'");
}

std::optional<IntLists> index_groups_param(const Params& p) {
  if (p.is_none("axis_index_groups")) return std::nullopt;
  return p.get<IntLists>("axis_index_groups");
}

// The number of devices a collective over `axes` combines: the axes' total
// size, or the size of each of `axis_index_groups`, which must split the
// indices along the axes into equal groups.
int64_t group_size(const std::string& op, const AxisNames& axes, const Params& p) {
  const int64_t n = bound_axis_size(axes, op);
  const auto groups = index_groups_param(p);
  if (!groups) return n;
  std::vector<bool> seen(n, false);
  int64_t count = 0;
  for (const IntList& g : *groups) {
    if (g.size() != groups->front().size()) fail<ValueError>("Replica groups must be equally sized");
    for (int64_t i : g) {
      if (i < 0 || i >= n || seen[i])
        fail<ValueError>("axis_index_groups must cover all indices exactly once");
      seen[i] = true;
      ++count;
    }
  }
  if (count != n) fail<ValueError>("axis_index_groups must cover all indices exactly once");
  return static_cast<int64_t>(groups->front().size());
}

// The replica groups (JAX's `_replica_groups`): members in tuple order, each
// group split further by `axis_index_groups` when given.
Groups replica_groups(const MeshContext& ctx, const AxisNames& axes, const Params& p) {
  Groups base = ctx.groups(axes);
  const auto sub = index_groups_param(p);
  if (!sub) return base;
  Groups out;
  for (const auto& g : base)
    for (const IntList& ig : *sub) {
      std::vector<int64_t> members;
      for (int64_t i : ig) members.push_back(g[i]);
      out.push_back(std::move(members));
    }
  return out;
}

// JAX's `collective_vma_rule`: a varying -> varying collective needs an
// operand varying over every axis it acts on (the wrappers cast it first).
AxisNames collective_vma(const std::string& name, const Aval& x, const AxisNames& axes) {
  if (!vma_checking()) return {};
  for (const auto& n : axes)
    if (!contains(x.vma, n))
      fail<ValueError>("Collective ", name, " must be applied to a device-varying  type, but got ",
                       frozenset_str(x.vma), " for collective acting over axis name ",
                       names_str(axes), ". Please open an issue at "
                       "https://github.com/jax-ml/jax/issues and as a temporary workaround pass "
                       "the check_vma=False argument to `jax.shard_map`");
  return x.vma;
}

int64_t dim_param(const Params& p, const char* name, int64_t bound, const std::string& op) {
  const int64_t d = p.get<int64_t>(name);
  if (d < 0 || d >= bound)
    fail<ValueError>(op, ": ", name, "=", d, " is out of bounds for ", bound, " dimensions");
  return d;
}

Tensor slice_dim(const Tensor& t, int64_t dim, int64_t lo, int64_t hi) {
  std::vector<int64_t> start(t.ndim(), 0), stop(t.shape()), step(t.ndim(), 1);
  start[dim] = lo;
  stop[dim] = hi;
  return t.slice(start, stop, step);
}

// Every device's first operand in row-major layout (the kernels index it directly).
std::vector<Tensor> contiguous_operands(const MeshContext& ctx, const std::vector<Tensors>& in,
                                        size_t k = 0) {
  std::vector<Tensor> out(in.size());
  ctx.parallel_for(static_cast<int64_t>(in.size()), [&](int64_t d) { out[d] = in[d][k].contiguous(); });
  return out;
}

// Runs f(group, member) for every member of every group.
void for_each_member(const MeshContext& ctx, const Groups& groups,
                     const std::function<void(int64_t, int64_t)>& f) {
  const int64_t n = static_cast<int64_t>(groups[0].size());
  ctx.parallel_for(static_cast<int64_t>(groups.size()) * n, [&](int64_t t) { f(t / n, t % n); });
}

}  // namespace

int64_t bytes_sent_per_device(const std::string& name, const Aval& in, const Aval& out, int64_t n) {
  const int64_t in_bytes = num_elements(in.shape) * static_cast<int64_t>(itemsize(in.dtype));
  const int64_t out_bytes = num_elements(out.shape) * static_cast<int64_t>(itemsize(out.dtype));
  if (name == "all_gather" || name == "all_gather_invariant") return in_bytes * (n - 1);
  if (name == "reduce_scatter") return out_bytes * (n - 1);
  if (name == "all_to_all") return in_bytes / n * (n - 1);
  if (name == "ppermute" || name == "pbroadcast") return in_bytes;
  if (name == "psum" || name == "psum_invariant" || name == "pmax" || name == "pmin")
    return 2 * in_bytes / n * (n - 1);
  return 0;  // ragged_all_to_all: depends on the sizes, known at run time
}

namespace {

// --- all_gather / all_gather_invariant --------------------------------------

Avals all_gather_eval(const std::string& name, const Avals& in, const Params& p) {
  const Aval& x = in.at(0);
  const AxisNames axes = axis_names_param(p);
  const int64_t n = group_size(name, axes, p);
  if (p.get<int64_t>("axis_size") != n)
    fail<ValueError>(name, ": axis_size=", p.get<int64_t>("axis_size"), " does not match the size ",
                     n, " of axis_name ", names_str(axes));
  const bool tiled = p.get<bool>("tiled");
  const int64_t dim = dim_param(p, "all_gather_dimension", x.ndim() + (tiled ? 0 : 1), name);
  Shape shape = x.shape;
  if (tiled) shape[dim] *= n;
  else shape.insert(shape.begin() + dim, n);
  return {like(x, shape, x.dtype, x.weak_type)};
}

// Each group's members receive the same value: one buffer, shared by them.
std::vector<Tensors> all_gather_kernel(const MeshContext& ctx, const std::vector<Tensors>& in,
                                       const Params& p, const Avals& out) {
  const Groups groups = replica_groups(ctx, axis_names_param(p), p);
  const bool tiled = p.get<bool>("tiled");
  const int64_t dim = p.get<int64_t>("all_gather_dimension");
  std::vector<Tensor> bufs(groups.size());
  for (auto& b : bufs) b = Tensor::empty(out[0].dtype, out[0].shape);
  for_each_member(ctx, groups, [&](int64_t g, int64_t r) {
    Tensor blk = in[groups[g][r]][0];
    if (!tiled) {
      Shape s = blk.shape();
      s.insert(s.begin() + dim, 1);
      blk = blk.reshape(s);
    }
    const int64_t c = blk.shape()[dim];
    copy_into(blk, slice_dim(bufs[g], dim, r * c, (r + 1) * c));
  });
  std::vector<Tensors> res(in.size());
  for (size_t g = 0; g < groups.size(); ++g)
    for (int64_t pos : groups[g]) res[pos] = {bufs[g]};
  return res;
}

Primitive all_gather_primitive(const std::string& name, bool invariant) {
  Primitive prim;
  prim.name = name;
  prim.abstract_eval = [name](const Avals& in, const Params& p) { return all_gather_eval(name, in, p); };
  prim.vma_rule = [name, invariant](const Avals& in, const Params& p) {
    if (invariant) return vma_checking() ? vma_minus(in[0].vma, axis_names_param(p)) : AxisNames{};
    return collective_vma(name, in[0], axis_names_param(p));
  };
  prim.mesh_kernel = all_gather_kernel;
  return prim;
}

// --- reduce_scatter (psum_scatter) -----------------------------------------

Avals reduce_scatter_eval(const Avals& in, const Params& p) {
  const Aval& x = in.at(0);
  const AxisNames axes = axis_names_param(p);
  const int64_t n = group_size("reduce_scatter", axes, p);
  if (x.dtype == DType::Bool)
    fail<TypeError>("add does not accept dtype bool at position 0. Accepted dtypes at position 0 "
                    "are subtypes of integer, floating, complexfloating.");
  const int64_t dim = dim_param(p, "scatter_dimension", x.ndim(), "reduce_scatter");
  const int64_t size = x.shape[dim];
  Shape shape = x.shape;
  if (p.get<bool>("tiled")) {
    if (size % n != 0)
      fail<ValueError>("tiled reduce_scatter operand scatter dimension size ", size,
                       " must be divisible by shard_count ", n);
    shape[dim] = size / n;
  } else {
    if (size != n)
      fail<ValueError>("reduce_scatter operand scatter dimension size ", size,
                       " must match shard count ", n);
    shape.erase(shape.begin() + dim);
  }
  return {like(x, shape, x.dtype, x.weak_type)};
}

// Member r gets chunk r (along the scatter dimension) of the sum of the
// group's blocks, added in member order.
// The dimensions of `t` from outermost to innermost in memory.
std::vector<int64_t> memory_order(const Tensor& t) {
  std::vector<int64_t> perm(t.ndim());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int64_t a, int64_t b) { return t.strides()[a] > t.strides()[b]; });
  return perm;
}

// A fresh dense tensor of `shape` whose dimensions lie in memory in `perm`'s order.
Tensor empty_in_order(DType dtype, const Shape& shape, const std::vector<int64_t>& perm) {
  Shape s;
  for (int64_t d : perm) s.push_back(shape[d]);
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return Tensor::empty(dtype, s).transpose(inverse);
}

std::vector<Tensors> reduce_scatter_kernel(const MeshContext& ctx, const std::vector<Tensors>& in,
                                           const Params& p, const Avals& out) {
  const Groups groups = replica_groups(ctx, axis_names_param(p), p);
  const int64_t dim = p.get<int64_t>("scatter_dimension");
  const int64_t n = static_cast<int64_t>(groups[0].size());
  std::vector<Tensors> res(in.size());
  bool contiguous = true;
  for (const Tensors& t : in) contiguous &= t[0].is_contiguous();
  if (!contiguous) {
    // Strided operands (e.g. transposed gradients) are read where they lie,
    // into results laid out as the first member's block, in memory order.
    for_each_member(ctx, groups, [&](int64_t g, int64_t r) {
      const Tensor& first = in[groups[g][0]][0];
      const int64_t c = first.shape()[dim] / n;
      const std::vector<int64_t> perm = memory_order(first);
      Tensor o = empty_in_order(out[0].dtype, out[0].shape, perm);
      const Tensor dst = o.transpose(perm);  // o's memory in row-major order
      copy_into(slice_dim(first, dim, r * c, (r + 1) * c).transpose(perm), dst);
      dispatch_numeric(o.dtype(), [&](auto tag) {
        using T = decltype(tag);
        T* pd = dst.data<T>();
        for (int64_t m = 1; m < n; ++m) {
          const Tensor src = slice_dim(in[groups[g][m]][0], dim, r * c, (r + 1) * c).transpose(perm);
          const T* ps = src.data<T>();
          for_each_offsets<2>(dst.shape(), {&dst.strides(), &src.strides()},
                              [&](const std::array<int64_t, 2>& o2) { pd[o2[0]] = add_op(pd[o2[0]], ps[o2[1]]); });
        }
      });
      res[groups[g][r]] = {o};
    });
    return res;
  }
  const std::vector<Tensor> x = contiguous_operands(ctx, in);
  const Shape& s = x[0].shape();
  int64_t outer = 1, chunk = s[dim] / n;
  for (int64_t d = 0; d < dim; ++d) outer *= s[d];
  for (int64_t d = dim + 1; d < x[0].ndim(); ++d) chunk *= s[d];
  for_each_member(ctx, groups, [&](int64_t g, int64_t r) {
    Tensor o = Tensor::empty(out[0].dtype, out[0].shape);
    dispatch_numeric(o.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* dst = o.data<T>();
      for (int64_t m = 0; m < n; ++m) {
        const T* src = x[groups[g][m]].data<T>();
        for (int64_t i = 0; i < outer; ++i) {
          const T* a = src + (i * n + r) * chunk;
          T* b = dst + i * chunk;
          if (m == 0) std::memcpy(b, a, chunk * sizeof(T));
          else for (int64_t e = 0; e < chunk; ++e) b[e] = add_op(b[e], a[e]);
        }
      }
    });
    res[groups[g][r]] = {o};
  });
  return res;
}

// --- ppermute -----------------------------------------------------------------

// `perm` as (src, dst) pairs with negative indices wrapped (as JAX indexes
// the group); raises for pairs out of range or not unique.
std::vector<std::pair<int64_t, int64_t>> perm_pairs(const Params& p, const AxisNames& axes,
                                                    int64_t n) {
  IntLists perm;
  for (const auto& [k, v] : p.items())
    if (k == "perm") {
      if (auto* l = std::get_if<IntLists>(&v)) perm = *l;
      else if (auto* e = std::get_if<IntList>(&v); !e || !e->empty())
        fail<TypeError>("ppermute perm must be a sequence of (source, destination) pairs");
    }
  std::vector<std::pair<int64_t, int64_t>> pairs;
  std::vector<bool> src_seen(n, false), dst_seen(n, false);
  bool unique = true;
  for (const IntList& pr : perm) {
    if (pr.size() != 2)
      fail<ValueError>("ppermute perm entries must be (source, destination) pairs, got ",
                       param_value_str(pr), " in perm ", param_value_str(perm));
    for (int64_t i : pr)
      if (i < -n || i >= n)
        fail<ValueError>("ppermute index ", i, " in perm entry ", param_value_str(pr),
                         " is out of range for axis_name ", names_str(axes), " of size ", n,
                         ": indices must be in [0, ", n, ")");
    const int64_t src = (pr[0] + n) % n, dst = (pr[1] + n) % n;
    unique = unique && !src_seen[src] && !dst_seen[dst];
    src_seen[src] = dst_seen[dst] = true;
    pairs.emplace_back(src, dst);
  }
  if (!unique)
    fail<ValueError>("ppermute sources and destinations must be unique, got ",
                     param_value_str(perm), ".");
  return pairs;
}

// Indices in `perm` refer to the group's devices in mesh order, whatever the
// order of the names in `axis_name` (JAX <= 0.11 sorts the replica groups).
std::vector<Tensors> ppermute_kernel(const MeshContext& ctx, const std::vector<Tensors>& in,
                                     const Params& p, const Avals& out) {
  const AxisNames axes = axis_names_param(p);
  const Groups groups = ctx.groups(ctx.mesh().in_mesh_order(axes));
  const int64_t n = static_cast<int64_t>(groups[0].size());
  std::vector<int64_t> src_of(n, -1);
  for (auto [src, dst] : perm_pairs(p, axes, n)) src_of[dst] = src;
  std::vector<Tensors> res(in.size());
  for_each_member(ctx, groups, [&](int64_t g, int64_t r) {
    Tensor o = Tensor::empty(out[0].dtype, out[0].shape);
    if (src_of[r] >= 0) copy_into(in[groups[g][src_of[r]]][0], o);
    else std::memset(o.raw(), 0, o.nbytes());
    res[groups[g][r]] = {o};
  });
  return res;
}

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
  if (in.size() != 6) fail<TypeError>("ragged_all_to_all takes 6 operands, got ", in.size());
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

// --- pbroadcast ----------------------------------------------------------------

std::vector<Tensors> pbroadcast_kernel(const MeshContext& ctx, const std::vector<Tensors>& in,
                                       const Params& p, const Avals&) {
  const Groups groups = ctx.groups(axis_names_param(p));
  const int64_t source = p.get<int64_t>("source");
  std::vector<Tensor> bufs(groups.size());
  ctx.parallel_for(static_cast<int64_t>(groups.size()),
                   [&](int64_t g) { bufs[g] = in[groups[g][source]][0].copy(); });
  std::vector<Tensors> res(in.size());
  for (size_t g = 0; g < groups.size(); ++g)
    for (int64_t pos : groups[g]) res[pos] = {bufs[g]};
  return res;
}


// --- transposes (reverse-mode autodiff) --------------------------------------
// JAX's rules (reference §2): psum <-> pvary, all_gather <-> reduce_scatter,
// all_gather_invariant -> a dynamic slice at this device's index, ppermute ->
// the inverse permutation, all_to_all -> split and concat axes swapped.

// A rule that maps the one operand's cotangent through `transpose`.
Primitive& with_linear_vjp(Primitive& p, std::function<Value(const Value& ct, const Params&)> transpose) {
  p.vjp = [transpose](const VjpArgs& a) -> Cotangents {
    if (!a.ct[0] || !a.wants[0]) return {std::nullopt};
    return {transpose(*a.ct[0], a.params)};
  };
  return p;
}

Params with(Params p, const std::string& key, ParamValue v) {
  p.set(key, std::move(v));
  return p;
}

Value transpose_psum(const Value& ct, const Params& p) {
  return vary_over(ct, axes_param(p));  // invariant -> varying: free
}

Value transpose_pvary(const Value& ct, const Params& p) {
  const AxisNames& axes = axes_param(p);
  return ops::bind1("psum_invariant", {vary_over(ct, axes)}, {{"axes", axes}});
}

Value transpose_all_gather(const Value& ct, const Params& p) {
  return ops::bind1("reduce_scatter", {vary_over(ct, axis_names_param(p))},
                    {{"axis_index_groups", p.is_none("axis_index_groups") ? ParamValue{}
                                                                          : ParamValue{p.get<IntLists>("axis_index_groups")}},
                     {"axis_name", axis_names_param(p)},
                     {"axis_size", p.get<int64_t>("axis_size")},
                     {"scatter_dimension", p.get<int64_t>("all_gather_dimension")},
                     {"tiled", p.get<bool>("tiled")}});
}

Value transpose_reduce_scatter(const Value& ct, const Params& p) {
  return ops::bind1("all_gather", {vary_over(ct, axis_names_param(p))},
                    {{"all_gather_dimension", p.get<int64_t>("scatter_dimension")},
                     {"axis_index_groups", p.is_none("axis_index_groups") ? ParamValue{}
                                                                          : ParamValue{p.get<IntLists>("axis_index_groups")}},
                     {"axis_name", axis_names_param(p)},
                     {"axis_size", p.get<int64_t>("axis_size")},
                     {"tiled", p.get<bool>("tiled")}});
}

// The invariant gathered cotangent: each device keeps its own chunk.
Value transpose_all_gather_invariant(const Value& ct, const Params& p) {
  const AxisNames axes = axis_names_param(p);
  const Aval& a = aval_of(ct);
  const int64_t dim = p.get<int64_t>("all_gather_dimension");
  const int64_t n = p.get<int64_t>("axis_size");
  const bool tiled = p.get<bool>("tiled");
  const int64_t chunk = tiled ? a.shape[dim] / n : 1;
  std::optional<Value> index;
  for (const auto& axis : axes) {
    Value i = ops::bind1("axis_index", {}, {{"axis_name", axis}});
    index = index ? ops::add(ops::mul(*index, ops::full({}, DType::Int32, double(current_axis_env()->mesh->axis_size(axis)))), i) : i;
  }
  Values starts;
  for (int64_t d = 0; d < a.ndim(); ++d)
    starts.push_back(d == dim ? ops::mul(*index, ops::full({}, DType::Int32, double(chunk)))
                              : ops::full({}, DType::Int32, 0.0));
  Shape sizes = a.shape;
  sizes[dim] = chunk;
  Value slice = ops::dynamic_slice(ct, starts, sizes);
  return tiled ? slice : ops::squeeze(slice, {dim});
}

Value transpose_ppermute(const Value& ct, const Params& p) {
  const AxisNames axes = axis_names_param(p);
  IntLists inverse;
  for (const auto& [src, dst] : perm_pairs(p, axes, bound_axis_size(axes, "ppermute")))
    inverse.push_back({dst, src});
  return ops::bind1("ppermute", {vary_over(ct, axis_names_param(p))},
                    with(p, "perm", inverse));
}

Value transpose_all_to_all(const Value& ct, const Params& p) {
  Params q = with(p, "split_axis", p.get<int64_t>("concat_axis"));
  q.set("concat_axis", p.get<int64_t>("split_axis"));
  return ops::bind1("all_to_all", {vary_over(ct, axis_names_param(p))}, q);
}

Value transpose_plain_psum(const Value& ct, const Params& p) {
  return ops::bind1("psum", {ct}, {{"axes", axes_param(p)}});
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
}  // namespace

// The rows each device sends to and receives from the other members of its
// group (send_sizes / recv_sizes entries addressed to itself move nothing).
CollectiveRecord ragged_all_to_all_record(const Mesh& mesh, const AxisNames& axes, Groups groups,
                                          const std::vector<Tensors>& values, const Aval& out) {
  CollectiveRecord r = symmetric_collective("ragged_all_to_all", mesh, axes, 0, groups);
  const int64_t n = static_cast<int64_t>(groups.front().size());
  const int64_t row_bytes = num_elements(Shape(out.shape.begin() + 1, out.shape.end())) *
                            static_cast<int64_t>(itemsize(out.dtype));
  for (const auto& g : groups)
    for (int64_t member = 0; member < n; ++member) {
      const int64_t pos = g[member];
      const std::vector<int64_t> send = int_values(values[pos][3]), recv = int_values(values[pos][5]);
      const int64_t per = static_cast<int64_t>(send.size()) / n;
      for (size_t i = 0; i < send.size(); ++i) {
        if (static_cast<int64_t>(i) / per == member) continue;
        r.sent[pos] += send[i] * row_bytes;
        r.received[pos] += recv[i] * row_bytes;
      }
    }
  r.bytes_per_device = *std::max_element(r.received.begin(), r.received.end());
  return r;
}

std::optional<CollectiveRecord> collective_record(const Equation& e, const Mesh& mesh,
                                                  const Avals& in, const Avals& out,
                                                  const std::vector<Tensors>* values) {
  const std::string& name = e.prim->name;
  AxisNames axes;
  if (e.params.has("axes")) {
    axes = axes_param(e.params);
  } else if (e.params.has("axis_name")) {
    axes = axis_names_param(e.params);
  } else {
    return std::nullopt;
  }
  Groups groups = replica_groups(MeshContext(mesh), axes, e.params);
  const int64_t n = static_cast<int64_t>(groups.front().size());
  if (name == "ragged_all_to_all" && values != nullptr)
    return ragged_all_to_all_record(mesh, axes, std::move(groups), *values, out.at(0));
  int64_t bytes = 0;
  for (size_t i = 0; i < in.size() && i < out.size(); ++i)
    bytes += bytes_sent_per_device(name, in[i], out[i], n);
  if (bytes == 0) return std::nullopt;
  CollectiveRecord r = symmetric_collective(name, mesh, axes, bytes, std::move(groups));
  if (name == "ppermute") {  // only sources send and destinations receive
    std::fill(r.sent.begin(), r.sent.end(), 0);
    std::fill(r.received.begin(), r.received.end(), 0);
    for (const auto& [src, dst] : perm_pairs(e.params, axes, n))
      for (const auto& g : r.groups) {
        r.sent[g[src]] += bytes;
        r.received[g[dst]] += bytes;
      }
  }
  return r;
}

void register_collective_primitives() {
  // psum over manual axes: psum_invariant with VMA checking (varying ->
  // invariant), plain psum without, as JAX names them.
  Primitive psum_invariant = all_reduce_primitive("psum_invariant", Reduce::Sum);
  register_primitive(with_linear_vjp(psum_invariant, transpose_psum));
  Primitive psum = all_reduce_primitive("psum", Reduce::Sum);
  register_primitive(with_linear_vjp(psum, transpose_plain_psum));
  register_primitive(all_reduce_primitive("pmax", Reduce::Max));
  register_primitive(all_reduce_primitive("pmin", Reduce::Min));

  // pvary: invariant -> varying. Only the type changes; at run time it is the
  // identity (the devices along the axes already hold equal values).
  Primitive pvary;
  pvary.name = "pvary";
  pvary.abstract_eval = [](const Avals& in, const Params& p) {
    const AxisNames& axes = axes_param(p);
    bound_axis_size(axes, "pvary");
    for (const Aval& a : in)
      for (const auto& n : axes)
        if (contains(a.vma, n))
          fail<ValueError>("pvary is a invariant->variant collective. This means that the axis "
                           "names mentioned in `axes` passed to `pvary` must not be present in "
                           "`jax.typeof(inp).mat.varying`. Got axes=", names_str(axes),
                           " and jax.typeof(inp)=", a.str_short());
    return in;
  };
  pvary.vma_rule = [](const Avals& in, const Params& p) { return vma_plus(in[0].vma, axes_param(p)); };
  pvary.kernel = [](const Tensors& in, const Params&, const Avals&) { return in; };
  register_primitive(with_linear_vjp(pvary, transpose_pvary));

  // axis_index: this device's coordinate along one manual axis (int32, varying over it).
  Primitive axis_index;
  axis_index.name = "axis_index";
  axis_index.abstract_eval = [](const Avals&, const Params& p) {
    bound_axis_size({p.get<std::string>("axis_name")}, "axis_index");
    Aval a;
    a.dtype = DType::Int32;
    return Avals{a};
  };
  axis_index.vma_rule = [](const Avals&, const Params& p) {
    return vma_checking() ? AxisNames{p.get<std::string>("axis_name")} : AxisNames{};
  };
  axis_index.mesh_kernel = [](const MeshContext& ctx, const std::vector<Tensors>&, const Params& p,
                              const Avals&) {
    const AxisNames axes{p.get<std::string>("axis_name")};
    std::vector<Tensors> out(ctx.num_devices());
    for (int64_t pos = 0; pos < ctx.num_devices(); ++pos)
      out[pos].push_back(Tensor::scalar<int32_t>(static_cast<int32_t>(ctx.axis_index(pos, axes))));
    return out;
  };
  register_primitive(std::move(axis_index));

  Primitive all_gather = all_gather_primitive("all_gather", false);
  register_primitive(with_linear_vjp(all_gather, transpose_all_gather));
  Primitive all_gather_invariant = all_gather_primitive("all_gather_invariant", true);
  register_primitive(with_linear_vjp(all_gather_invariant, transpose_all_gather_invariant));

  Primitive reduce_scatter;
  reduce_scatter.name = "reduce_scatter";
  reduce_scatter.abstract_eval = reduce_scatter_eval;
  reduce_scatter.vma_rule = [](const Avals& in, const Params& p) {
    return collective_vma("reduce_scatter", in[0], axis_names_param(p));
  };
  reduce_scatter.mesh_kernel = reduce_scatter_kernel;
  register_primitive(with_linear_vjp(reduce_scatter, transpose_reduce_scatter));

  Primitive ppermute;
  ppermute.name = "ppermute";
  ppermute.abstract_eval = [](const Avals& in, const Params& p) {
    const AxisNames axes = axis_names_param(p);
    perm_pairs(p, axes, bound_axis_size(axes, "ppermute"));
    return Avals{in.at(0)};
  };
  ppermute.vma_rule = [](const Avals& in, const Params& p) {
    return collective_vma("ppermute", in[0], axis_names_param(p));
  };
  ppermute.mesh_kernel = ppermute_kernel;
  register_primitive(with_linear_vjp(ppermute, transpose_ppermute));

  Primitive all_to_all;
  all_to_all.name = "all_to_all";
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

  // pbroadcast: every member gets member `source`'s block (typed varying, as JAX).
  Primitive pbroadcast;
  pbroadcast.name = "pbroadcast";
  pbroadcast.abstract_eval = [](const Avals& in, const Params& p) {
    const AxisNames axes = axis_names_param(p);
    const int64_t n = bound_axis_size(axes, "pbroadcast"), source = p.get<int64_t>("source");
    if (source < 0 || source >= n)
      fail<ValueError>("pbroadcast source ", source, " is out of range for axis_name ",
                       names_str(axes), " of size ", n);
    return Avals{in.at(0)};
  };
  pbroadcast.vma_rule = [](const Avals& in, const Params& p) {
    return collective_vma("pbroadcast", in[0], axis_names_param(p));
  };
  pbroadcast.mesh_kernel = pbroadcast_kernel;
  register_primitive(std::move(pbroadcast));
}

}  // namespace meshsim

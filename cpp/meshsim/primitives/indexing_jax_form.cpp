// JAX's gather/scatter form (indexing_jax_form.h): each rule translates the
// equation to our form and runs that form's rule, mapping what comes back
// (operand specs, factors, cotangents) to JAX's operands.
#include "meshsim/primitives/indexing_jax_form.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <memory>

#include "meshsim/ir/donated_operands.h"
#include "meshsim/ir/ops.h"
#include "meshsim/ir/printing.h"
#include "meshsim/kernels/cast.h"
#include "meshsim/primitives/indexing_common.h"
#include "meshsim/transforms/batching.h"

namespace meshsim::indexing {
namespace {

constexpr const char* kJaxKeys[] = {"dimension_numbers", "slice_sizes", "indices_are_sorted",
                                    "unique_indices", "mode", "numpy_dims"};

// One JAX-form equation in our form. Our index array i reads column
// columns[i] of JAX's indices, or is B's dim -1 - columns[i] (a batching
// dim: an iota, not read). A negative index becomes negative_as[i]: 0 where
// out-of-range indices are clamped, past the end where they are filled or
// dropped.
struct Translation {
  Params params;
  IntList columns;
  IntList negative_as;
  Shape batch;
};

// `whole_operand`: `operand` is the shape the equation was typed with (not a
// device's block, whose dims are smaller than the slice sizes).
Translation translate(const std::string& prim, const Shape& operand, const Shape& indices,
                      const Params& p, bool scatter, bool whole_operand = true) {
  const IntLists& dn = p.get<IntLists>("dimension_numbers");
  if (dn.size() != 5) fail<TypeError>(prim, " dimension_numbers must hold five tuples, got ", dn.size());
  const IntList &window = dn[0], &collapsed = dn[1], &index_map = dn[2], &obatch = dn[3], &ibatch = dn[4];
  if (indices.empty())
    fail<TypeError>(prim, " indices must have at least one dimension, the index vectors' (got shape ())");
  const int64_t k = indices.back();
  if (k != static_cast<int64_t>(index_map.size()))
    fail<TypeError>(prim, " ", scatter ? "scatter_dims_to_operand_dims" : "start_index_map",
                    " length (", index_map.size(), ") must equal the index vector dimension size (", k, ")");
  Translation t;
  t.batch.assign(indices.begin(), indices.end() - 1);
  const int64_t ndim = static_cast<int64_t>(operand.size());
  const int64_t nb = static_cast<int64_t>(t.batch.size());
  auto refuse = [&](const char* why) {
    fail<NotImplementedError>(prim, " with dimension numbers ", param_value_str(dn), " on an operand of shape ",
                              shape_str(operand), ": ", why);
  };
  if (obatch != ibatch) refuse("operand and indices batching dims must be the same dims");
  IntList axes = obatch;
  axes.insert(axes.end(), index_map.begin(), index_map.end());
  for (int64_t a : axes)
    if (a < 0 || a >= ndim) fail<ValueError>(prim, " dimension ", a, " is out of range for an operand of rank ", ndim);
  IntList sorted_map = index_map, sorted_collapsed = collapsed;
  std::sort(sorted_map.begin(), sorted_map.end());
  std::sort(sorted_collapsed.begin(), sorted_collapsed.end());
  if (sorted_map != sorted_collapsed) refuse("every indexed dim must be collapsed");
  if (!scatter && whole_operand) {
    const IntList& sizes = p.get<IntList>("slice_sizes");
    if (static_cast<int64_t>(sizes.size()) != ndim)
      fail<TypeError>(prim, " slice_sizes must have the operand's rank ", ndim, ", got ", param_value_str(sizes));
    for (int64_t d = 0; d < ndim; ++d)
      if (sizes[d] != (in_list(axes, d) ? 1 : operand[d])) refuse("slices must be whole dims or one element");
  }
  // The result's (updates') dims that are not window dims hold B, together.
  const int64_t rank = nb + ndim - static_cast<int64_t>(axes.size());
  if (static_cast<int64_t>(window.size()) + nb != rank || !std::is_sorted(window.begin(), window.end()))
    refuse("the window dims must be the operand's other dims, in order");
  IntList batch_at;
  for (int64_t d = 0; d < rank; ++d)
    if (!in_list(window, d)) batch_at.push_back(d);
  const int64_t at = batch_at.empty() ? 0 : batch_at.front();
  if (!batch_at.empty() && batch_at.back() - at + 1 != nb) refuse("the index dims must be adjacent in the result");
  const std::string& mode = p.get<std::string>("mode");
  if (mode != "promise_in_bounds" && mode != "clip" && mode != "fill_or_drop")
    fail<ValueError>(prim, ": unknown mode '", mode, "'");
  const bool clamps = mode == "clip" || (!scatter && mode == "promise_in_bounds");
  for (const auto& [key, value] : p.items())
    if (std::find(std::begin(kJaxKeys), std::end(kJaxKeys), key) == std::end(kJaxKeys)) t.params.set(key, value);
  t.params.set("axes", axes);
  t.params.set("index_dims_at", at);
  t.params.set("mode", std::string(clamps ? "clip" : scatter ? "drop" : "fill"));
  if (!obatch.empty()) t.params.set("batch_axes", obatch);
  for (int64_t d : obatch) t.columns.push_back(-1 - d), t.negative_as.push_back(0);
  for (size_t j = 0; j < index_map.size(); ++j) {
    t.columns.push_back(static_cast<int64_t>(j));
    t.negative_as.push_back(clamps ? 0 : operand[index_map[j]]);
  }
  return t;
}

// translate() for a kernel call on blocks of these shapes. A loop's body or a
// device's run applies the same few equations over and over, and translating
// builds a new Params each time: each thread keeps the last few translations,
// found again by equal params and shapes (the kept params hold their
// sub-programs alive, so equal pointers are the same programs). Shared, so
// that a kernel calling another gather keeps the one it holds.
std::shared_ptr<const Translation> kernel_translation(const std::string& prim, const Shape& operand,
                                                      const Shape& indices, const Params& p, bool scatter) {
  struct Kept {
    std::string prim;
    Params params;
    Shape operand, indices;
    std::shared_ptr<const Translation> translation;
  };
  constexpr size_t kKept = 8;
  thread_local std::array<Kept, kKept> kept;
  thread_local size_t next = 0;
  for (const Kept& k : kept)
    if (k.translation && k.prim == prim && k.operand == operand && k.indices == indices &&
        k.params.items() == p.items())
      return k.translation;
  auto made = std::make_shared<const Translation>(translate(prim, operand, indices, p, scatter, /*whole_operand=*/false));
  kept[next++ % kKept] = Kept{prim, p, operand, indices, made};
  return made;
}

// Our operands from JAX's: (operand, indices) -> (operand, *split) for a
// gather; (operand, indices, updates) -> (operand, updates, *split) for a scatter.
template <class V>
std::vector<V> ours(const std::vector<V>& in, std::vector<V> split, bool scatter) {
  std::vector<V> out{in[0]};
  if (scatter) out.push_back(in[2]);
  out.insert(out.end(), split.begin(), split.end());
  return out;
}

Avals split_avals(const Aval& indices, const Translation& t) {
  Aval a = indices;
  a.shape = t.batch;
  if (a.spec.size() > a.shape.size()) a.spec.resize(a.shape.size());
  return Avals(t.columns.size(), a);
}

Tensors split_tensors(const Tensor& indices, const Translation& t) {
  const Tensor all = cast(indices, DType::Int64).contiguous();
  const int64_t* src = all.data<int64_t>();
  const int64_t k = indices.shape().back(), n = num_elements(t.batch);
  Tensors out;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    if (t.columns[i] < 0) {  // a batching dim: our kernels do not read it
      out.push_back(Tensor::zeros(DType::Int64, t.batch));
      continue;
    }
    Tensor col = Tensor::empty(DType::Int64, t.batch);
    int64_t* dst = col.data<int64_t>();
    const int64_t c = t.columns[i];
    const int64_t negative = t.negative_as[i] ? std::numeric_limits<int64_t>::max() : 0;
    for (int64_t b = 0; b < n; ++b) dst[b] = src[b * k + c] < 0 ? negative : src[b * k + c];
    out.push_back(std::move(col));
  }
  return out;
}

// The split as traced values (`indices` may carry a batch dim at 0).
Values split_values(const Value& indices, const Translation& t) {
  const Aval a = aval_of(indices);
  const int64_t last = static_cast<int64_t>(a.shape.size()) - 1;
  const Shape shape(a.shape.begin(), a.shape.end() - 1);
  Values out;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    if (t.columns[i] < 0) {
      out.push_back(ops::iota(a.dtype, t.batch, -1 - t.columns[i]));
      continue;
    }
    const Value col = ops::reshape(ops::slice_in_dim(indices, t.columns[i], t.columns[i] + 1, last), shape);
    const Value zero = ops::full_like(col, 0.0);
    out.push_back(ops::select(ops::lt(col, zero), ops::full_like(col, static_cast<double>(t.negative_as[i])), col));
  }
  return out;
}

Shape without(Shape s, int64_t dim) {
  if (dim != kNotBatched) s.erase(s.begin() + dim);
  return s;
}

Shape batched_front(const Shape& s, int64_t dim, int64_t size) {
  Shape out = without(s, dim);
  out.insert(out.begin(), size);
  return out;
}

// Dimension numbers with, per entry, whether JAX holds it as an np.int64 (its
// batching rules shift dims with np.add, and the printed jaxpr shows them so).
struct JaxDims {
  IntLists dims;
  IntLists numpy;

  explicit JaxDims(const Params& p) : dims(p.get<IntLists>("dimension_numbers")) {
    if (p.has("numpy_dims")) numpy = p.get<IntLists>("numpy_dims");
    numpy.resize(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) numpy[i].resize(dims[i].size(), 0);
  }
  // Field i as np.add(1, field): every entry one higher, all np.int64.
  void shift(size_t i) {
    for (int64_t& d : dims[i]) ++d;
    numpy[i].assign(dims[i].size(), 1);
  }
  // (0,) + field i, the 0 a Python int.
  void lead_with_zero(size_t i) {
    dims[i].insert(dims[i].begin(), 0);
    numpy[i].insert(numpy[i].begin(), 0);
  }
  void store(Params& p) const {
    p.set("dimension_numbers", dims);
    bool any = false;
    for (const IntList& l : numpy)
      for (int64_t f : l) any |= f != 0;
    Params kept;  // without a stale numpy_dims
    for (const auto& [key, value] : p.items())
      if (key != "numpy_dims") kept.set(key, value);
    if (any) kept.set("numpy_dims", numpy);
    p = std::move(kept);
  }
};

// The fields of GatherDimensionNumbers and ScatterDimensionNumbers, by position.
enum Field : size_t { kWindow = 0, kCollapsed = 1, kIndexMap = 2, kOperandBatch = 3, kIndexBatch = 4 };

bool expressible(const std::string& prim, const Shape& operand, const Shape& indices, const Params& p,
                 bool scatter) {
  try {
    translate(prim, operand, indices, p, scatter);
    return true;
  } catch (const NotImplementedError&) {
    return false;
  }
}

// JAX's _gather_transpose_rule: a scatter-add of the cotangent into zeros,
// with the gather's dimension numbers, mode and flags.
Cotangents jax_gather_transpose(const VjpArgs& a) {
  Cotangents ct(a.in.size());
  if (!a.wants[0]) return ct;
  Params p;
  JaxDims(a.params).store(p);
  for (const auto& [key, value] : a.params.items())
    if (key == "indices_are_sorted" || key == "unique_indices" || key == "mode") p.set(key, value);
  ct[0] = ops::bind1("scatter_add", {ops::zeros_like(a.in[0]), a.in[1], *a.ct[0]}, p);
  return ct;
}

// JAX's _scatter_addsub_transpose_rule: the operand's cotangent passes
// through; the updates' is the gather (fill 0) of it, negated for scatter_sub.
Cotangents jax_scatter_addsub_transpose(const VjpArgs& a, bool sub) {
  Cotangents ct(a.in.size());
  const Value& g = *a.ct[0];
  if (a.wants[0]) ct[0] = g;
  if (!a.wants[2]) return ct;
  const JaxDims jd(a.params);
  const IntLists& dn = jd.dims;
  const Shape& updates = aval_of(a.in[2]).shape;
  IntList sizes;
  size_t pos = 0;
  for (int64_t d = 0; d < static_cast<int64_t>(aval_of(g).shape.size()); ++d) {
    if (in_list(dn[kCollapsed], d) || in_list(dn[kOperandBatch], d)) sizes.push_back(1);
    else sizes.push_back(updates[dn[kWindow][pos++]]);
  }
  Params p;
  jd.store(p);
  const std::string& mode = a.params.get<std::string>("mode");
  p.set("slice_sizes", sizes);
  p.set("mode", mode);
  if (mode == "fill_or_drop") p.set("fill_value", int64_t{0});
  else p.set("fill_value", ParamValue{});
  p.set("indices_are_sorted", false);
  p.set("unique_indices", false);
  Value u = ops::bind1("gather", {g, a.in[1]}, p);
  ct[2] = sub ? ops::neg(u) : u;
  return ct;
}

// JAX's _gather_batching_rule (its three cases); nullopt when our form cannot
// take the batched dimension numbers (the caller then batches our form).
std::optional<Batched> jax_gather_batch(const BatchArgs& a, const std::string& name) {
  const bool xb = a.dims[0] != kNotBatched, ib = a.dims[1] != kNotBatched;
  JaxDims jd(a.params);
  Params p = a.params;
  IntList sizes = p.get<IntList>("slice_sizes");
  Shape xs = aval_of(a.in[0]).shape, is = aval_of(a.in[1]).shape;
  if (xb) xs = batched_front(xs, a.dims[0], a.size);
  if (ib) is = batched_front(is, a.dims[1], a.size);
  if (xb && !ib) {
    sizes.insert(sizes.begin(), a.size);
    for (size_t f : {kWindow, kCollapsed, kOperandBatch, kIndexMap}) jd.shift(f);
    jd.lead_with_zero(kWindow);
  } else if (!xb) {
    for (int64_t& d : jd.dims[kWindow]) ++d;  // 1 + d keeps each entry's type
    jd.shift(kIndexBatch);
    p.set("unique_indices", false);
    p.set("indices_are_sorted", false);
  } else {
    sizes.insert(sizes.begin(), a.size == 0 ? 0 : 1);
    for (size_t f : {kWindow, kCollapsed, kIndexMap, kOperandBatch, kIndexBatch}) jd.shift(f);
    jd.lead_with_zero(kOperandBatch);
    jd.lead_with_zero(kIndexBatch);
  }
  p.set("slice_sizes", sizes);
  jd.store(p);
  if (!expressible(name, xs, is, p, false)) return std::nullopt;
  const Value x = xb ? batch_at(a.in[0], a.dims[0], 0, a.size) : a.in[0];
  const Value i = ib ? batch_at(a.in[1], a.dims[1], 0, a.size) : a.in[1];
  return Batched{{ops::bind1(name, {x, i}, p)}, {0}};
}

// JAX's _scatter_batching_rule: operand and updates batched at the front
// (broadcast when they are not), the indices too when they are batched.
std::optional<Batched> jax_scatter_batch(const BatchArgs& a, const std::string& name) {
  const bool ib = a.dims[1] != kNotBatched;
  JaxDims jd(a.params);
  Params p = a.params;
  const Shape xs = batched_front(aval_of(a.in[0]).shape, a.dims[0], a.size);
  Shape is = aval_of(a.in[1]).shape;
  if (ib) is = batched_front(is, a.dims[1], a.size);
  for (size_t f : {kWindow, kCollapsed, kOperandBatch, kIndexMap}) jd.shift(f);
  if (!ib) {
    jd.lead_with_zero(kWindow);
  } else {
    jd.shift(kIndexBatch);
    jd.lead_with_zero(kOperandBatch);
    jd.lead_with_zero(kIndexBatch);
  }
  jd.store(p);
  if (!expressible(name, xs, is, p, true)) return std::nullopt;
  const Value x = batch_at(a.in[0], a.dims[0], 0, a.size);
  const Value u = batch_at(a.in[2], a.dims[2], 0, a.size);
  const Value i = ib ? batch_at(a.in[1], a.dims[1], 0, a.size) : a.in[1];
  return Batched{{ops::bind1(name, {x, i, u}, p)}, {0}};
}

// GatherDimensionNumbers(...) / ScatterDimensionNumbers(...); `numpy` flags
// the entries JAX holds as np.int64 (shifted by its batching rules).
std::string jax_dims_str(bool scatter, const IntLists& d, const IntLists* numpy) {
  static const char* const gather_names[] = {"offset_dims", "collapsed_slice_dims", "start_index_map",
                                             "operand_batching_dims", "start_indices_batching_dims"};
  static const char* const scatter_names[] = {"update_window_dims", "inserted_window_dims",
                                              "scatter_dims_to_operand_dims", "operand_batching_dims",
                                              "scatter_indices_batching_dims"};
  std::string s = scatter ? "ScatterDimensionNumbers(" : "GatherDimensionNumbers(";
  for (size_t i = 0; i < 5; ++i)
    s += std::string(i ? ", " : "") + (scatter ? scatter_names[i] : gather_names[i]) + "=" +
         numpy_tuple_str(d[i], numpy && i < numpy->size() ? &(*numpy)[i] : nullptr);
  return s + ")";
}

// A combining scatter's update_jaxpr: its combining primitive (scatter_add's
// add) on two scalars, as JAX's scatters carry it.
ProgramPtr update_program(const std::string& combine, DType dtype) {
  auto p = std::make_shared<Program>();
  Aval scalar;
  scalar.dtype = dtype;
  const int x = p->new_var(scalar), y = p->new_var(scalar), z = p->new_var(scalar);
  p->invars = {x, y};
  p->outvars = {z};
  p->eqns.push_back(Equation{&primitive(combine), {}, {x, y}, {z}});
  return p;
}

// How JAX prints a gather or scatter: its dimension numbers and mode as JAX's
// types, fill_value as a Python float; the combining scatters as scatter-add
// etc., with their update program in JAX's form.
void print_indexing(PrintedEquation& e, const std::string& name, bool scatter) {
  const bool jax_form = is_jax_form(e.eqn.params);
  const std::string combine = scatter && name != "scatter" ? name.substr(std::string("scatter_").size()) : "";
  if (!combine.empty()) e.name = "scatter-" + combine;
  for (PrintedParam& q : e.params) {
    const auto* dims = std::get_if<IntLists>(&q.value);
    if (q.key == "dimension_numbers" && dims && dims->size() == 5)
      q.text = jax_dims_str(scatter, *dims, e.eqn.params.has("numpy_dims") ? &e.eqn.params.get<IntLists>("numpy_dims")
                                                                            : nullptr);
    if (const auto* fill = std::get_if<double>(&q.value); fill && q.key == "fill_value" && !scatter)
      q.text = python_float_repr(*fill);
    if (const auto* mode = std::get_if<std::string>(&q.value); mode && q.key == "mode" && jax_form) {
      std::string upper = *mode;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      q.text = "GatherScatterMode." + upper;
    }
  }
  if (scatter && jax_form) {
    e.add("update_consts", IntList{});
    e.add("update_jaxpr", combine.empty() ? ParamValue{}
                                          : ParamValue{update_program(combine, e.program.avals[e.eqn.inputs[0]].dtype)});
  }
}

}  // namespace

bool is_jax_form(const Params& params) { return params.has("dimension_numbers"); }

void accept_jax_form(Primitive& p, bool scatter) {
  const std::string name = p.name;
  p.print_rule = [name, scatter](PrintedEquation& e) { print_indexing(e, name, scatter); };
  const size_t first = scatter ? 2 : 1;
  auto of_avals = [name, scatter](const Avals& in, const Params& params) {
    return translate(name, in[0].shape, in[1].shape, params, scatter);
  };
  p.abstract_eval = [inner = p.abstract_eval, of_avals, scatter](const Avals& in, const Params& params) {
    if (!is_jax_form(params)) return inner(in, params);
    const Translation t = of_avals(in, params);
    return inner(ours(in, split_avals(in[1], t), scatter), t.params);
  };
  p.kernel = [inner = p.kernel, name, scatter](const Tensors& in, const Params& params, const Avals& out) {
    if (!is_jax_form(params)) return inner(in, params, out);
    const std::shared_ptr<const Translation> kept = kernel_translation(name, in[0].shape(), in[1].shape(), params, scatter);
    const Translation& t = *kept;
    Tensors split = split_tensors(in[1], t);
    // The operand our kernel gets is given up as the caller gave it up, so that a scatter
    // may still update it in place (ir/donated_operands.h).
    const bool given_up = donated(in, 0);
    Tensors operands{given_up ? std::move(const_cast<Tensor&>(in[0])) : in[0]};
    if (scatter) operands.push_back(in[2]);
    for (Tensor& s : split) operands.push_back(std::move(s));
    std::vector<char> last_read(operands.size(), 0);
    last_read[0] = given_up;
    const DonatedOperands note(operands, last_read);
    return inner(operands, t.params, out);
  };
  p.sharding_rule = [inner = p.sharding_rule, of_avals, scatter](const Avals& in, const Params& params,
                                                                 const Avals& out) {
    if (!is_jax_form(params)) return inner(in, params, out);
    const Translation t = of_avals(in, params);
    return inner(ours(in, split_avals(in[1], t), scatter), t.params, out);
  };
  p.local_plan = [inner = p.local_plan, of_avals, scatter, first](
                     const Avals& in, const Params& params, const Avals& out) -> std::optional<LocalPlan> {
    if (!is_jax_form(params)) return inner(in, params, out);
    const Translation t = of_avals(in, params);
    std::optional<LocalPlan> plan = inner(ours(in, split_avals(in[1], t), scatter), t.params, out);
    if (!plan) return plan;
    Spec indices = plan->in_specs[first];
    indices.push_back(AxisNames{});
    std::vector<Spec> specs{plan->in_specs[0], indices};
    if (scatter) specs.push_back(plan->in_specs[1]);
    Params kept = params;  // JAX's params, and what the plan added (partitioned blocks)
    for (const auto& [key, value] : plan->params.items())
      if (!t.params.has(key)) kept.set(key, value);
    plan->in_specs = std::move(specs);
    plan->params = std::move(kept);
    return plan;
  };
  p.factors = [inner = p.factors, of_avals, scatter, first](const Avals& in, const Params& params,
                                                            const Avals& out) -> std::optional<FactorMap> {
    if (!is_jax_form(params)) return inner(in, params, out);
    const Translation t = of_avals(in, params);
    std::optional<FactorMap> m = inner(ours(in, split_avals(in[1], t), scatter), t.params, out);
    if (!m) return m;
    std::vector<int> indices = m->in[first];
    indices.push_back(kNoFactor);
    std::vector<std::vector<int>> mapped{m->in[0], indices};
    if (scatter) mapped.push_back(m->in[1]);
    m->in = std::move(mapped);
    return m;
  };
  p.batch = [inner = p.batch, name, scatter](const BatchArgs& a) -> Batched {
    if (!is_jax_form(a.params)) return inner(a);
    if (auto b = scatter ? jax_scatter_batch(a, name) : jax_gather_batch(a, name)) return *b;
    const Translation t = translate(name, without(aval_of(a.in[0]).shape, a.dims[0]),
                                    without(aval_of(a.in[1]).shape, a.dims[1]), a.params, scatter);
    Value indices = a.in[1];
    const bool batched = a.dims[1] != kNotBatched;
    if (batched) indices = batch_at(indices, a.dims[1], 0, a.size);
    const Values split = split_values(indices, t);
    BatchDims split_dims;
    for (int64_t c : t.columns) split_dims.push_back(c < 0 || !batched ? kNotBatched : 0);
    const Values in = ours(a.in, split, scatter);
    const BatchDims dims = ours(a.dims, split_dims, scatter);
    return inner(BatchArgs{a.prim, in, dims, t.params, a.size});
  };
  if (p.vjp)
    p.vjp = [inner = p.vjp, name, scatter](const VjpArgs& a) -> Cotangents {
      if (!is_jax_form(a.params)) return inner(a);
      if (name == "gather") return jax_gather_transpose(a);
      if (name == "scatter_add" || name == "scatter_sub") return jax_scatter_addsub_transpose(a, name == "scatter_sub");
      // A PROMISE_IN_BOUNDS gather reads clamped indices, but its transpose, a scatter-add of
      // the same mode, drops what falls outside (XLA's scatter), as FILL_OR_DROP's does.
      Params params = a.params;
      if (!scatter && params.get<std::string>("mode") == "promise_in_bounds")
        params.set("mode", std::string("fill_or_drop"));
      const Translation t = translate(name, aval_of(a.in[0]).shape, aval_of(a.in[1]).shape, params, scatter);
      const Values in = ours(a.in, split_values(a.in[1], t), scatter);
      const std::vector<bool> wants = ours(a.wants, std::vector<bool>(t.columns.size(), false), scatter);
      const Cotangents ct = inner(VjpArgs{in, a.out, a.ct, t.params, wants});
      Cotangents out(a.in.size());
      out[0] = ct[0];
      if (scatter) out[2] = ct[1];
      return out;
    };
}

}  // namespace meshsim::indexing

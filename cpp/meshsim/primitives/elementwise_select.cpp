// Selection and conversion: select_n, clamp, convert_element_type and
// bitcast_convert_type.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <cstring>
#include <string>
#include <vector>
#include "meshsim/ir/printing.h"
#include "meshsim/ir/unreduced.h"
#include "meshsim/kernels/scalar_math.h"
#include "meshsim/primitives/elementwise_family.h"
#include "meshsim/sharding/rules.h"
#include "meshsim/transforms/batching.h"
#include "meshsim/ir/kernel_results.h"
#include "meshsim/runtime/xla_rewrites.h"

namespace meshsim {
namespace {
using namespace elementwise;

// pick the nearest case, as XLA's tree of selects does.
Avals select_n_aval(const Avals& in) {
  const Aval& which = in[0];
  if (!is_bool(which.dtype) && !is_integer(which.dtype))
    fail<TypeError>("select `which` must be boolean or integer type, got ", dtype_name(which.dtype), ".");
  if (is_bool(which.dtype) && in.size() > 3)
    fail<TypeError>("select with boolean `which` cannot have > 2 cases.");
  bool weak = true;
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].shape != in[1].shape) {
      std::string shapes;
      for (size_t j = 1; j < in.size(); ++j) shapes += (j > 1 ? ", " : "") + shape_str(in[j].shape);
      fail<TypeError>("select cases must have the same shapes, got [", shapes, "].");
    }
    weak = weak && in[i].weak_type;
  }
  for (size_t i = 2; i < in.size(); ++i)
    if (in[i].dtype != in[1].dtype) {
      std::string dtypes;  // every case's, as JAX names them
      for (size_t j = 1; j < in.size(); ++j) dtypes += (j > 1 ? ", " : "") + std::string(dtype_name(in[j].dtype));
      fail<TypeError>("lax.select requires arguments to have the same dtypes, got ", dtypes, ".");
    }
  if (!which.shape.empty() && which.shape != in[1].shape)
    fail<TypeError>("select `which` must be scalar or have the same shape as cases, got `which` shape ",
                    shape_str(which.shape), " but case shape ", shape_str(in[1].shape), ".");
  return Avals{like(in[1], in[1].shape, in[1].dtype, weak)};
}

// A case read either contiguously (step 1) or as one broadcast value (step 0).
template <class U>
struct CaseSource {
  const U* data;
  int64_t step;
};

// The case `w` picks among last + 1 cases (an out-of-range index picks the nearest).
template <class W>
int64_t select_case_index(W w, int64_t last) {
  if constexpr (std::is_same_v<W, bool>) {
    return w ? std::min<int64_t>(1, last) : 0;
  } else {
    if (w <= 0) return 0;
    return static_cast<uint64_t>(w) > static_cast<uint64_t>(last) ? last : static_cast<int64_t>(w);
  }
}

Tensor select_n_kernel(const Tensors& in, const Avals& out) {
  const int64_t last = static_cast<int64_t>(in.size()) - 2;
  auto clamp_index = [last](auto w) -> int64_t { return select_case_index(w, last); };
  const Tensor& which = in[0];
  if (which.ndim() == 0) {  // one case wins everywhere: return it as is
    const int64_t w = dispatch_bitwise(which.dtype(), [&](auto tag) {
      using W = decltype(tag);
      return clamp_index(*which.data<W>());
    });
    return in[1 + w];
  }
  // A contiguous bool `which` over two cases (jnp.where) is read as is;
  // anything else becomes a contiguous int32 index first.
  const bool direct = is_bool(which.dtype()) && which.is_contiguous() && in.size() == 3;
  const Tensor index = direct ? which : dispatch_bitwise(which.dtype(), [&](auto tag) {
    using W = decltype(tag);
    return map_unary<W, int32_t>(which, DType::Int32, [&](W w) { return static_cast<int32_t>(clamp_index(w)); });
  });
  // Elements are moved as raw bits of their width: one instantiation per itemsize.
  auto select_bits = [&](auto bits_tag) {
    using U = decltype(bits_tag);
    std::vector<Tensor> keep;
    std::vector<CaseSource<U>> cases;
    for (size_t i = 1; i < in.size(); ++i) {
      bool broadcast = true;
      for (int64_t s : in[i].strides()) broadcast = broadcast && s == 0;
      keep.push_back(broadcast ? in[i] : in[i].contiguous());
      cases.push_back({keep.back().template data<U>(), broadcast ? 0 : 1});
    }
    Tensor result = Tensor::empty(out[0].dtype, out[0].shape);
    U* o = result.data<U>();
    const int64_t n = result.size();
    if (direct) {
      const bool* w = index.data<bool>();
      const CaseSource<U> c0 = cases[0], c1 = cases[1];
      for (int64_t i = 0; i < n; ++i) o[i] = w[i] ? c1.data[i * c1.step] : c0.data[i * c0.step];
      return result;
    }
    const int32_t* w = index.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) {
      const CaseSource<U>& c = cases[w[i]];
      o[i] = c.data[i * c.step];
    }
    return result;
  };
  return dispatch_word(itemsize(out[0].dtype), select_bits);
}

// ---- sharding in types: rules and local plans (sharding/rules.h) ----------------

std::vector<Spec> select_n_rule(const Avals& in, const Params&, const Avals&) {
  const Avals cases(in.begin() + 1, in.end());
  const Aval* first = nullptr;
  for (const Aval& c : cases) {
    if (!c.mesh) continue;
    if (!first) first = &c;
    else if (spec_of(c) != spec_of(*first))
      fail<ShardingTypeError>("select cases must have the same shardings, got [", sharding_list(cases), "].");
  }
  if (!first) return {spec_of(in[1])};
  if (in[0].ndim() > 0 && in[0].mesh && spec_of(in[0]) != spec_of(*first))
    fail<ShardingTypeError>("select `which` must be scalar or have the same sharding as cases, got "
                            "`which` sharding ", type_sharding_repr(in[0]), " but case sharding ",
                            type_sharding_repr(in[1]), ".");
  return {spec_of(*first)};
}

std::vector<Spec> clamp_rule(const Avals& in, const Params&, const Avals&) { return {spec_of(in[1])}; }

void select_n_primitive() {
  Primitive p;
  p.name = "select_n";
  p.operands = at_least(2);  // the selector and at least one case
  p.bf16_widened_once = false;  // moves values as they are
  p.ur_rule = keep_operand_ur(1);  // as the cases
  p.sharding_rule = select_n_rule;
  p.local_plan = elementwise_like();
  p.elementwise = true;
  p.batch = batch_elementwise_of_one_shape;  // cases of one shape: a 0-d case is batched too
  // Case i gets g where it was selected, 0 elsewhere; `which` has no cotangent.
  // As JAX transposes it: one zeros operand shared by the cases' cotangents, and
  // an integer `which` compared with each case's index.
  p.vjp = [](const VjpArgs& a) {
    const Value& g = *a.ct[0];
    const Value zeros = op::zeros_like(g);
    const DType which_dtype = aval_of(a.in[0]).dtype;
    Cotangents ct(a.in.size());
    for (size_t i = 1; i < a.in.size(); ++i) {
      if (!a.wants[i]) continue;
      if (which_dtype == DType::Bool)
        ct[i] = op::select_n(a.in[0], i == 1 ? Values{g, zeros} : Values{zeros, g});
      else
        ct[i] = op::select(op::eq(a.in[0], op::full({}, which_dtype, static_cast<double>(i - 1))), g, zeros);
    }
    return ct;
  };
  p.abstract_eval = [](const Avals& in, const Params&) { return select_n_aval(in); };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    return as_tensors(select_n_kernel(in, out));
  };
  // On 0-d operands (a bool `which` reads as 0 or 1, which picks the same case).
  p.int_scalar_op = {-1, /*selection=*/true, [](const int32_t* in, int arity) {
    return in[1 + select_case_index(in[0], int64_t{arity} - 2)];
  }};
  register_primitive(std::move(p));
}

// clamp(min, x, max) = min(max(x, min), max); the bounds may be scalars.
void clamp_primitive() {
  Primitive p;
  p.name = "clamp";
  p.operands = exactly(3);
  p.bf16_widened_once = false;  // moves values as they are
  p.sharding_rule = clamp_rule;
  p.local_plan = elementwise_like();
  p.elementwise = true;
  // As JAX: x gets g strictly inside (min, max); a bound gets it where it won.
  // Scalar bounds sum their cotangent.
  p.vjp = [](const VjpArgs& a) {
    const Value &g = *a.ct[0], &x = a.in[1];
    const Shape& shape = aval_of(x).shape;
    const Value lo = op::broadcast_in_dim(a.in[0], shape, {}), hi = op::broadcast_in_dim(a.in[2], shape, {});
    const Value zero = op::zeros_like(g);
    auto to_bound = [&](const Value& ct, const Value& bound) {
      return aval_of(bound).shape.empty() ? op::sum_to_operand(ct, {}, {}) : ct;
    };
    Cotangents ct(3);
    if (a.wants[0])
      ct[0] = to_bound(op::select(op::logical_and(op::gt(lo, x), op::lt(lo, hi)), g, zero), a.in[0]);
    if (a.wants[1])
      ct[1] = op::select(op::logical_and(op::gt(x, lo), op::lt(x, hi)), g, zero);
    if (a.wants[2]) ct[2] = to_bound(op::select(op::lt(hi, x), g, zero), a.in[2]);
    return ct;
  };
  p.abstract_eval = [](const Avals& in, const Params&) {
    const Aval &lo = in[0], &x = in[1], &hi = in[2];
    check_same_dtypes("clamp", lo, x, hi);
    for (const auto& [bound, name] : {std::pair{&lo, "min"}, std::pair{&hi, "max"}}) {
      if (!bound->shape.empty() && bound->shape != x.shape)
        fail<TypeError>("clamp requires ", name, ".shape == operand.shape or ", name, ".shape == (), got ",
                        name, ".shape=", shape_str(bound->shape), ", operand.shape=", shape_str(x.shape), ".");
    }
    return Avals{like(x, x.shape, x.dtype, lo.weak_type && x.weak_type && hi.weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals&) {
    const Tensor& x = in[1];
    const Tensor lo = in[0].broadcast_to(x.shape()), hi = in[2].broadcast_to(x.shape());
    return dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      return as_tensors(map_ternary<T>(lo, x, hi, [](T l, T v, T h) {
        using C = compute_type_t<T>;
        return T(min_op(max_op(C(v), C(l)), C(h)));
      }));
    });
  };
  register_primitive(std::move(p));
}

// XLA computes a bfloat16 elementwise op as its float32 function rounded once
// (the op declares `bf16_widened_once`), so a convert to float32 right after it
// reads the unrounded value: the op again, on its operands widened to float32,
// straight into the convert's result. Its other readers still see the rounded value.
bool reads_unrounded(const XlaRewriteSite& site) {
  const Program& traced = site.traced;
  const Equation& e = site.eqn;
  if (e.inputs.size() != 1 || traced.avals[e.outputs[0]].dtype != DType::Float32 ||
      traced.avals[e.inputs[0]].dtype != DType::BFloat16)
    return false;
  const int k = site.producers[e.inputs[0]];
  if (k < 0) return false;
  const Equation& op = traced.eqns[k];
  if (op.outputs.size() != 1 || !op.prim->elementwise || !op.prim->bf16_widened_once) return false;
  for (int v : op.inputs)
    if (traced.avals[v].dtype != DType::BFloat16) return false;
  if (!site.compiled) return true;
  Program& p = *site.compiled;
  std::vector<int> widened;
  for (int v : op.inputs) {
    Aval aval = traced.avals[v];
    aval.dtype = DType::Float32;
    aval.weak_type = false;
    const int w = p.new_var(aval);
    Params params = e.params;
    params.set("weak_type", false);
    p.eqns.push_back(Equation{e.prim, params, {v}, {w}});
    widened.push_back(w);
  }
  p.eqns.push_back(Equation{op.prim, op.params, widened, e.outputs});
  return true;
}

void convert_element_type_primitive() {
  Primitive p;
  p.name = "convert_element_type";
  p.operands = exactly(1);
  p.elementwise = true;
  p.bf16_widened_once = false;  // a conversion, read by the rewrite itself
  p.ur_rule = keep_operand_ur();  // linear: a cast of partial sums
  p.vjp = [](const VjpArgs& a) {
    const Aval& x = aval_of(a.in[0]);
    if (!is_inexact(x.dtype)) return Cotangents(1);
    return Cotangents{op::cast_like(*a.ct[0], x)};
  };
  p.abstract_eval = [](const Avals& in, const Params& params) {
    return Avals{like(in[0], in[0].shape, params.get<DType>("new_dtype"),
                      params.get_or<bool>("weak_type", false))};
  };
  // Equal dtypes (only the weak type changes) pass the operand through.
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) { return as_tensors(cast(in[0], out[0].dtype)); };
  p.xla_rewrite = reads_unrounded;
  p.print_rule = [](PrintedEquation& e) { e.hide("sharding"); };  // the result's type shows it
  register_primitive(std::move(p));
}

// Reinterprets the bits. A narrower result gains a trailing dimension of the
// size ratio; a wider one consumes a trailing dimension of that size.
Shape bitcast_shape(const Aval& x, DType to) {
  const size_t from_size = itemsize(x.dtype), to_size = itemsize(to);
  if (x.dtype != to && (is_bool(x.dtype) || is_bool(to)))
    fail<TypeError>("lax.bitcast_convert_type does not support bool or complex values unless the operand "
                    "and destination types match. Got operand dtype=", dtype_name(x.dtype),
                    ", new_dtype=dtype('", dtype_name(to), "'). Consider using the arr.view() method instead.");
  Shape shape = x.shape;
  if (to_size < from_size) {
    shape.push_back(static_cast<int64_t>(from_size / to_size));
  } else if (to_size > from_size) {
    const int64_t last = shape.empty() ? 1 : shape.back();
    if (shape.empty() || last * from_size != to_size)
      fail<ValueError>("Attempting to convert array of shape ", shape_str(x.shape), " from ",
                       dtype_name(x.dtype), " of size ", from_size * kBitsPerByte, " bits to ", dtype_name(to),
                       " of size ", to_size * kBitsPerByte, ", bits but ", last, " * ", from_size * kBitsPerByte,
                       " != ", to_size * kBitsPerByte);
    shape.pop_back();
  }
  return shape;
}

void bitcast_convert_type_primitive() {
  Primitive p;
  p.name = "bitcast_convert_type";
  p.operands = exactly(1);
  p.elementwise = true;
  p.bf16_widened_once = false;  // works on the bits
  // JAX's rule: a reinterpretation of bits has a zero derivative, not a missing one.
  p.vjp = zero_vjp;
  p.zero_derivative = true;
  p.abstract_eval = [](const Avals& in, const Params& params) {
    const DType to = params.get<DType>("new_dtype");
    return Avals{like(in[0], bitcast_shape(in[0], to), to)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    const Tensor packed = in[0].contiguous();  // a zero-copy view of its bytes
    return as_tensors(Tensor::wrap(packed.raw(), out[0].dtype, out[0].shape, contiguous_strides(out[0].shape),
                                packed.storage()));
  };
  register_primitive(std::move(p));
}

}  // namespace

void elementwise::register_select_convert_primitives() {
  select_n_primitive();
  clamp_primitive();
  convert_element_type_primitive();
  bitcast_convert_type_primitive();
}

}  // namespace meshsim

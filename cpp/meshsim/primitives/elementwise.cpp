// Elementwise primitives: unary math, binary arithmetic, comparisons, casts.
// lax semantics: binary operands have equal shapes and dtypes (the numpy
// layer broadcasts and promotes first, and broadcasting is a zero-copy view).
#include <cmath>

#include "meshsim/ir/primitive.h"
#include "meshsim/kernels/dispatch.h"
#include "meshsim/kernels/elementwise.h"
#include "meshsim/primitives/families.h"

namespace meshsim {
namespace {

enum class Accepts { Float, Numeric, Bitwise, Any };

bool accepts(Accepts a, DType dt) {
  switch (a) {
    case Accepts::Float: return is_floating(dt);
    case Accepts::Numeric: return !is_bool(dt);
    case Accepts::Bitwise: return is_bool(dt) || is_integer(dt);
    case Accepts::Any: return true;
  }
  return false;
}

template <class F>
decltype(auto) dispatch_accepted(Accepts a, DType dt, F&& f) {
  switch (a) {
    case Accepts::Float: return dispatch_float(dt, std::forward<F>(f));
    case Accepts::Numeric: return dispatch_numeric(dt, std::forward<F>(f));
    case Accepts::Bitwise: return dispatch_bitwise(dt, std::forward<F>(f));
    case Accepts::Any: return dispatch_dtype(dt, std::forward<F>(f));
  }
  return dispatch_dtype(dt, std::forward<F>(f));
}

void check_dtype(const std::string& name, Accepts a, DType dt) {
  if (!accepts(a, dt)) {
    const char* want = a == Accepts::Float ? "floating-point" : a == Accepts::Numeric ? "numeric"
                                                                                       : "integer or boolean";
    fail<TypeError>(name, " does not accept dtype ", dtype_name(dt), ". Accepted dtypes are ", want,
                    " types.");
  }
}

// Op is a generic functor: template <class T> T operator()(T) const.
template <class Op>
void unary(const std::string& name, Accepts a, Op op) {
  Primitive p;
  p.name = name;
  p.abstract_eval = [name, a](const Avals& in, const Params&) {
    check_dtype(name, a, in[0].dtype);
    return Avals{like(in[0], in[0].shape, in[0].dtype, in[0].weak_type)};
  };
  p.kernel = [a, op](const Tensors& in, const Params&, const Avals& out) {
    return dispatch_accepted(a, in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Tensors{map_unary<T, T>(in[0], out[0].dtype, [&](T x) { return static_cast<T>(op(x)); })};
    });
  };
  register_primitive(std::move(p));
}

Aval binary_aval(const std::string& name, const Avals& in, DType out_dtype) {
  const Aval &x = in[0], &y = in[1];
  if (x.dtype != y.dtype)
    fail<TypeError>(name, " requires arguments to have the same dtypes, got ", dtype_name(x.dtype),
                    ", ", dtype_name(y.dtype), ".");
  if (x.shape != y.shape)
    fail<TypeError>(name, " got incompatible shapes for broadcasting: ", shape_str(x.shape), ", ",
                    shape_str(y.shape), ".");
  return like(x, x.shape, out_dtype, x.weak_type && y.weak_type);
}

template <class Op>
void binary(const std::string& name, Accepts a, Op op) {
  Primitive p;
  p.name = name;
  p.abstract_eval = [name, a](const Avals& in, const Params&) {
    check_dtype(name, a, in[0].dtype);
    return Avals{binary_aval(name, in, in[0].dtype)};
  };
  p.kernel = [a, op](const Tensors& in, const Params&, const Avals& out) {
    return dispatch_accepted(a, in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Tensors{map_binary<T, T>(in[0], in[1], out[0].dtype,
                                      [&](T x, T y) { return static_cast<T>(op(x, y)); })};
    });
  };
  register_primitive(std::move(p));
}

template <class Op>
void comparison(const std::string& name, Op op) {
  Primitive p;
  p.name = name;
  p.abstract_eval = [name](const Avals& in, const Params&) {
    return Avals{binary_aval(name, in, DType::Bool)};
  };
  p.kernel = [op](const Tensors& in, const Params&, const Avals& out) {
    return dispatch_dtype(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      return Tensors{map_binary<T, bool>(in[0], in[1], DType::Bool, op)};
    });
  };
  register_primitive(std::move(p));
}

void convert_element_type() {
  Primitive p;
  p.name = "convert_element_type";
  p.abstract_eval = [](const Avals& in, const Params& params) {
    return Avals{like(in[0], in[0].shape, params.get<DType>("new_dtype"),
                      params.get_or<bool>("weak_type", false))};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    return dispatch_dtype(in[0].dtype(), [&](auto from) {
      using In = decltype(from);
      return dispatch_dtype(out[0].dtype, [&](auto to) {
        using Out = decltype(to);
        return Tensors{map_unary<In, Out>(in[0], out[0].dtype, [](In x) {
          if constexpr (std::is_same_v<Out, bool>) return x != In(0);
          else return static_cast<Out>(x);
        })};
      });
    });
  };
  register_primitive(std::move(p));
}

}  // namespace

void register_elementwise_primitives() {
  unary("neg", Accepts::Numeric, [](auto x) { return -x; });
  unary("sin", Accepts::Float, [](auto x) { return std::sin(x); });
  unary("cos", Accepts::Float, [](auto x) { return std::cos(x); });
  unary("exp", Accepts::Float, [](auto x) { return std::exp(x); });
  unary("log", Accepts::Float, [](auto x) { return std::log(x); });
  unary("tanh", Accepts::Float, [](auto x) { return std::tanh(x); });
  unary("sqrt", Accepts::Float, [](auto x) { return std::sqrt(x); });

  binary("add", Accepts::Any, [](auto x, auto y) { return x + y; });
  binary("sub", Accepts::Numeric, [](auto x, auto y) { return x - y; });
  binary("mul", Accepts::Any, [](auto x, auto y) { return x * y; });
  binary("max", Accepts::Any, [](auto x, auto y) { return x > y ? x : y; });
  binary("min", Accepts::Any, [](auto x, auto y) { return x < y ? x : y; });

  comparison("eq", [](auto x, auto y) { return x == y; });
  comparison("ne", [](auto x, auto y) { return x != y; });
  comparison("lt", [](auto x, auto y) { return x < y; });
  comparison("le", [](auto x, auto y) { return x <= y; });
  comparison("gt", [](auto x, auto y) { return x > y; });
  comparison("ge", [](auto x, auto y) { return x >= y; });

  convert_element_type();
}

}  // namespace meshsim

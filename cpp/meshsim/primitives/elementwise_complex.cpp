// Elementwise primitives that take complex numbers apart or build them, and
// abs, whose result is real for a complex operand. VJPs follow JAX: the
// transpose of each linear map, with no conjugation (so grad of a real
// function of z is the conjugate of its Wirtinger derivative times two).
#include <cmath>
#include <complex>

#include "meshsim/kernels/scalar_math.h"
#include "meshsim/primitives/elementwise_family.h"
#include "meshsim/ir/kernel_results.h"

namespace meshsim {
namespace {
using namespace elementwise;

Value real_part(const Value& x) { return op::bind1("real", {x}); }
Value imag_part(const Value& x) { return op::bind1("imag", {x}); }
Value make_complex(const Value& re, const Value& im) { return op::bind1("complex", {re, im}); }
Value strong_zeros_like(const Value& x) { return op::convert(op::zeros_like(x), aval_of(x).dtype, false); }
Value as_complex(const Value& x) { return op::convert(x, complex_dtype(aval_of(x).dtype)); }

void check_complex(const std::string& name, DType dt) {
  if (!is_complex(dt))
    fail<TypeError>(name, " does not accept dtype ", dtype_name(dt),
                    ". Accepted dtypes are subtypes of complexfloating.");
}

// A complex operand mapped to a real result (real, imag, abs).
template <class Part>
Tensor complex_to_real(const Tensor& x, DType out, Part part) {
  return dispatch_complex(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using R = typename T::value_type;
    return map_unary<T, R>(x, out, [&](T z) { return static_cast<R>(part(z)); });
  });
}

template <class Part>
void part_primitive(const std::string& name, Part part, VjpRule vjp) {
  Primitive p;
  p.name = name;
  p.operands = exactly(1);
  p.elementwise = true;
  p.vjp = std::move(vjp);
  p.abstract_eval = [name](const Avals& in, const Params&) {
    check_complex(name, in[0].dtype);
    return Avals{like(in[0], in[0].shape, real_dtype(in[0].dtype), in[0].weak_type)};
  };
  p.kernel = [part](const Tensors& in, const Params&, const Avals& out) {
    return as_tensors(complex_to_real(in[0], out[0].dtype, part));
  };
  register_primitive(std::move(p));
}

// complex(x, y) = x + i y, from float32 or float64 parts of one dtype.
void complex_primitive() {
  Primitive p;
  p.name = "complex";
  p.operands = exactly(2);
  p.elementwise = true;
  p.vjp = d2([](auto& g, auto&, auto&, auto&) { return real_part(g); },
             [](auto& g, auto&, auto&, auto&) { return imag_part(op::neg(g)); });
  p.batch = batch_broadcasting;
  p.abstract_eval = [](const Avals& in, const Params&) {
    for (int i = 0; i < 2; ++i)
      if (in[i].dtype != DType::Float32 && in[i].dtype != DType::Float64)
        fail<TypeError>("complex does not accept dtype ", dtype_name(in[i].dtype), " at position ", i,
                        ". Accepted dtypes at position ", i, " are subtypes of float32, float64.");
    Aval out = binary_aval("complex", Accepts::Float, in, in[0].dtype);
    out.dtype = complex_dtype(in[0].dtype);
    return Avals{out};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    return dispatch_wide_float(in[0].dtype(), [&](auto tag) {
      using R = decltype(tag);
      using T = std::complex<R>;
      return as_tensors(map_binary<R, T>(in[0], in[1], out[0].dtype, [](R x, R y) { return T(x, y); }));
    });
  };
  register_primitive(std::move(p));
}

// conj: a complex result for a float32/float64 operand too (its imaginary
// part +0.0, as XLA's), as lax.conj gives.
void conj_primitive() {
  Primitive p;
  p.name = "conj";
  p.operands = exactly(1);
  p.elementwise = true;
  p.vjp = [](const VjpArgs& a) {
    const Value& g = *a.ct[0];
    if (is_complex(aval_of(a.in[0]).dtype)) return Cotangents{op::bind1("conj", {g}, a.params)};
    return Cotangents{real_part(g)};
  };
  p.abstract_eval = [](const Avals& in, const Params&) {
    const DType dt = in[0].dtype;
    if (!is_complex(dt) && dt != DType::Float32 && dt != DType::Float64)
      fail<TypeError>("conj does not accept dtype ", dtype_name(dt),
                      ". Accepted dtypes are subtypes of float32, float64, complexfloating.");
    return Avals{like(in[0], in[0].shape, complex_dtype(dt), in[0].weak_type)};
  };
  p.kernel = [](const Tensors& in, const Params&, const Avals& out) {
    if (!is_complex(in[0].dtype())) return as_tensors(cast(in[0], out[0].dtype));
    return dispatch_complex(in[0].dtype(), [&](auto tag) {
      using T = decltype(tag);
      return as_tensors(map_unary<T, T>(in[0], out[0].dtype, [](T z) { return std::conj(z); }));
    });
  };
  register_primitive(std::move(p));
}

// |x|: a real result for complex x (hypot of the parts, as XLA computes it).
void abs_primitive() {
  Primitive p;
  p.name = "abs";
  p.operands = exactly(1);
  p.elementwise = true;
  p.vjp = d1([](auto& g, auto& x, auto& y) {
    if (!is_complex(aval_of(x).dtype)) return op::select(op::ge(x, c(x, 0.0)), g, op::neg(g));
    // JAX's jvp real(t conj(x) / |x|), transposed.
    return op::mul(as_complex(g), op::div(op::bind1("conj", {x}, {{"input_dtype", aval_of(x).dtype}}),
                                          replace_zero(as_complex(y))));
  });
  p.abstract_eval = [](const Avals& in, const Params&) {
    check_dtype("abs", Accepts::SignedNumber, in[0].dtype);
    if (in[0].dtype == DType::Int4)  // JAX's abs alone refuses the narrow integers
      fail<TypeError>("abs does not accept dtype int4. Support for narrow-width integers is platform-dependent "
                      "and limited to a few specific operations, e.g. basic arithmetic and type casting.");
    return Avals{like(in[0], in[0].shape, real_dtype(in[0].dtype), in[0].weak_type)};
  };
  p.kernel = [](const Tensors& in_, const Params&, const Avals& out_) {
    if (is_complex(in_[0].dtype()))
      return as_tensors(complex_to_real(in_[0], out_[0].dtype, [](auto z) { return complex_abs(z); }));
    auto run = [](const Tensors& in, const Avals& out) {
      return dispatch_numeric(in[0].dtype(), [&](auto tag) {
        using T = decltype(tag);
        return as_tensors(map_unary<T, T>(in[0], out[0].dtype, [](T x) { return static_cast<T>(abs_op(compute_type_t<T>(x))); }));
      });
    };
    if (is_int4(in_[0].dtype())) return widened(in_, out_, run);
    return run(in_, out_);
  };
  register_primitive(std::move(p));
}

}  // namespace

void elementwise::register_complex_elementwise_primitives() {
  // The zero part is strongly typed (JAX transposes with a NumPy zero), so the cotangent of
  // real/imag is a strong complex even when the output cotangent is weak.
  part_primitive("real", [](auto z) { return z.real(); },
                 d1([](auto& g, auto&, auto&) { return make_complex(g, strong_zeros_like(g)); }));
  part_primitive("imag", [](auto z) { return z.imag(); },
                 d1([](auto& g, auto&, auto&) { return make_complex(strong_zeros_like(g), op::neg(g)); }));
  complex_primitive();
  conj_primitive();
  abs_primitive();
}

}  // namespace meshsim

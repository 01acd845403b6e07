"""meshsim.lax: elementwise operations, one primitive each (as jax.lax).

As in JAX, operands must have equal dtypes (Python scalars take their own
weakly typed default dtype, they are not converted), and shapes must be equal
up to rank-0 operands and size-1 dimensions, which are broadcast here as
zero-copy views so that the primitives see equal shapes."""
from __future__ import annotations

import enum

import numpy as np

from meshsim._src import core

__all__ = [
    "RoundingMethod",
    # unary arithmetic and math
    "neg", "abs", "sign", "square", "reciprocal", "floor", "ceil", "round", "integer_pow", "exp", "exp2",
    "log", "log1p", "expm1", "sqrt", "rsqrt", "cbrt", "tanh", "logistic", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erf_inv", "is_finite",
    "lgamma", "digamma", "bessel_i0e", "bessel_i1e",
    # binary arithmetic and math
    "add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter", "polygamma", "zeta",
    "igamma", "igammac", "igamma_grad_a",
    # bits
    "bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right_logical",
    "shift_right_arithmetic", "population_count", "clz",
    # comparisons, selection, casts
    "eq", "ne", "lt", "le", "gt", "ge", "select", "select_n", "clamp", "convert_element_type",
    "bitcast_convert_type",
    # complex numbers
    "real", "imag", "conj", "complex",
]


class RoundingMethod(enum.IntEnum):
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def _operand(x, prim: str, position: int):
    if isinstance(x, (list, tuple)):
        raise TypeError(f"Error interpreting argument to {prim} as a JAX value. The problematic value "
                        f"is of type {type(x)} and was passed to {prim} at position {position}.")
    return core.asarray_value(x)


def _broadcast_shape(prim: str, shapes):
    """The common shape of lax operands (rank 0, or equal ranks with size-1 dimensions); JAX's
    TypeError, checked before the dtypes, when they do not fit."""
    ranked = [s for s in shapes if s]
    if not ranked:
        return ()
    if len({len(s) for s in ranked}) != 1:
        raise TypeError(f"{prim}: arrays must have the same number of dimensions, got "
                        f"{ {len(s) for s in ranked} }")
    out = []
    for sizes in zip(*ranked):
        big = set(sizes) - {1}
        if len(big) > 1:
            raise TypeError(f"{prim} got incompatible shapes for broadcasting: "
                            f"{', '.join(str(tuple(s)) for s in ranked)}.")
        out.append(big.pop() if big else 1)
    return tuple(out)


def _broadcast_in_dim(x, shape):
    if x.shape == shape:
        return x
    lead = len(shape) - len(x.shape)
    return core.bind1("broadcast_in_dim", x, shape=shape, broadcast_dimensions=tuple(range(lead, len(shape))))


# Binary primitives that take a scalar operand next to an array as is
# (`mul a 2.0:f32[]`), as JAX's lax does.
_SCALAR_OPERANDS = frozenset({
    "add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter", "and", "or", "xor",
    "shift_left", "shift_right_logical", "shift_right_arithmetic", "eq", "ne", "lt", "le", "gt", "ge",
    "polygamma", "zeta", "igamma", "igammac", "igamma_grad_a",
})


# The jnp function that promotes where a lax op requires equal dtypes, keyed by the
# name the op's same-dtype TypeError gives it: JAX adds it to that error as a tip.
# The bit operations ("and", "or", "xor") and the ordering comparisons get none in JAX.
_PROMOTING_JNP_FUNCTION = {
    "add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "max": "maximum", "min": "minimum",
    "atan2": "arctan2", "nextafter": "nextafter", "eq": "equal", "ne": "not_equal", "select": "where",
    "shift_left": "left_shift", "shift_right_logical": "right_shift", "shift_right_arithmetic": "right_shift",
    "concatenate": "concatenate",
}
_SAME_DTYPES = " requires arguments to have the same dtypes, got "


def bind_suggesting_promotion(prim: str, *vals, **params):
    """core.bind1, naming the promoting jnp function after the op's same-dtype TypeError,
    as JAX's lax does (the primitive's abstract evaluation raises the error itself)."""
    try:
        return core.bind1(prim, *vals, **params)
    except TypeError as err:
        text = str(err)
        name = text[len("lax."):text.find(_SAME_DTYPES)] if text.startswith("lax.") else ""
        if name not in _PROMOTING_JNP_FUNCTION:
            raise
        raise TypeError(f"{text} (Tip: jnp.{_PROMOTING_JNP_FUNCTION[name]} is a similar function that does "
                        "automatic type promotion on inputs).") from None


def _nary(prim: str, *args):
    """The op on its operands as they are: the primitive broadcasts size-1 dims (and
    scalars, where it takes them) itself, as JAX's lax ops do."""
    vals = [_operand(a, prim, i) for i, a in enumerate(args)]
    shape = _broadcast_shape(prim, [v.shape for v in vals])
    keep_scalars = prim in _SCALAR_OPERANDS
    vals = [_broadcast_in_dim(v, shape) if v.ndim == 0 and not keep_scalars else v for v in vals]
    return bind_suggesting_promotion(prim, *vals)


def _unary_op(prim: str, name: str | None = None):
    def op(x, /):
        return core.bind1(prim, _operand(x, prim, 0))
    op.__name__ = op.__qualname__ = name or prim
    return op


def _binary_op(prim: str, name: str | None = None):
    def op(x, y, /):
        return _nary(prim, x, y)
    op.__name__ = op.__qualname__ = name or prim
    return op


neg = _unary_op("neg")
abs = _unary_op("abs")  # noqa: A001 (jax.lax.abs)
sign = _unary_op("sign")
square = _unary_op("square")
floor = _unary_op("floor")
ceil = _unary_op("ceil")
exp = _unary_op("exp")
exp2 = _unary_op("exp2")
log = _unary_op("log")
log1p = _unary_op("log1p")
expm1 = _unary_op("expm1")
sqrt = _unary_op("sqrt")
rsqrt = _unary_op("rsqrt")
cbrt = _unary_op("cbrt")
tanh = _unary_op("tanh")
logistic = _unary_op("logistic")
sin = _unary_op("sin")
cos = _unary_op("cos")
tan = _unary_op("tan")
asin = _unary_op("asin")
acos = _unary_op("acos")
atan = _unary_op("atan")
sinh = _unary_op("sinh")
cosh = _unary_op("cosh")
asinh = _unary_op("asinh")
acosh = _unary_op("acosh")
atanh = _unary_op("atanh")
erf = _unary_op("erf")
erfc = _unary_op("erfc")
erf_inv = _unary_op("erf_inv")
is_finite = _unary_op("is_finite")
lgamma = _unary_op("lgamma")
digamma = _unary_op("digamma")
bessel_i0e = _unary_op("bessel_i0e")
bessel_i1e = _unary_op("bessel_i1e")
bitwise_not = _unary_op("not", "bitwise_not")
population_count = _unary_op("population_count")
clz = _unary_op("clz")

add = _binary_op("add")
sub = _binary_op("sub")
mul = _binary_op("mul")
div = _binary_op("div")
rem = _binary_op("rem")
pow = _binary_op("pow")  # noqa: A001 (jax.lax.pow)
max = _binary_op("max")  # noqa: A001 (jax.lax.max)
min = _binary_op("min")  # noqa: A001 (jax.lax.min)
atan2 = _binary_op("atan2")
nextafter = _binary_op("nextafter")
polygamma = _binary_op("polygamma")
zeta = _binary_op("zeta")
igamma = _binary_op("igamma")
igammac = _binary_op("igammac")
igamma_grad_a = _binary_op("igamma_grad_a")
bitwise_and = _binary_op("and", "bitwise_and")
bitwise_or = _binary_op("or", "bitwise_or")
bitwise_xor = _binary_op("xor", "bitwise_xor")
shift_left = _binary_op("shift_left")
shift_right_logical = _binary_op("shift_right_logical")
shift_right_arithmetic = _binary_op("shift_right_arithmetic")
eq = _binary_op("eq")
ne = _binary_op("ne")
lt = _binary_op("lt")
le = _binary_op("le")
gt = _binary_op("gt")
ge = _binary_op("ge")
real = _unary_op("real")
imag = _unary_op("imag")
complex = _binary_op("complex")  # noqa: A001 (jax.lax.complex)


def conj(x):
    """The complex conjugate; a complex result for a real operand too."""
    x = _operand(x, "conj", 0)
    return core.bind1("conj", x, input_dtype=x.dtype)


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):  # noqa: A001 (jax.lax.round)
    """Rounds to integral values; halves away from zero unless TO_NEAREST_EVEN."""
    return core.bind1("round", _operand(x, "round", 0), rounding_method=int(RoundingMethod(rounding_method)))


def integer_pow(x, y: int):
    """x ** y for a static Python int y, as a chain of multiplies."""
    return core.bind1("integer_pow", _operand(x, "integer_pow", 0), y=int(y))


def reciprocal(x):
    return integer_pow(x, -1)


def select_n(which, *cases):
    """cases[which] elementwise; `which` is bool (two cases) or integer, scalar or of the cases' shape."""
    if not cases:
        raise ValueError("select_n() must have at least one case")
    vals = [_operand(a, "select_n", i) for i, a in enumerate((which, *cases))]
    return bind_suggesting_promotion("select_n", *vals)


def select(pred, on_true, on_false):
    """on_true where pred, else on_false (pred is scalar or of the operands' shape)."""
    return select_n(pred, on_false, on_true)


def clamp(min, x, max):  # noqa: A002 (jax.lax.clamp's argument names)
    """min(max(x, min), max); the bounds are scalars or of x's shape."""
    return core.bind1("clamp", *(_operand(a, "clamp", i) for i, a in enumerate((min, x, max))))


def convert_element_type(operand, new_dtype):
    if type(operand) is not int:  # a Python int is cast as NumPy casts it (2**100 -> float32)
        operand = _operand(operand, "convert_element_type", 0)
    return core.convert_element_type(operand, new_dtype)


def bitcast_convert_type(operand, new_dtype):
    """Reinterprets the bits; a narrower dtype adds a trailing dimension, a wider one consumes it."""
    new_dtype = core.canonicalize_dtype(np.dtype(new_dtype))
    return core.bind1("bitcast_convert_type", _operand(operand, "bitcast_convert_type", 0), new_dtype=new_dtype)

"""Elementwise functions of meshsim.numpy: NumPy semantics, JAX dtypes.

Each function promotes its operands as jax.numpy does (`promotion`), then
composes strict lax operations. Where JAX builds a function from several lax
operations (floor_divide, remainder, logaddexp, hypot, ...) we follow the same
recipe, so results agree with JAX bit for bit wherever the primitives do."""
from __future__ import annotations

import functools
import operator

import numpy as np

from meshsim import _core
from meshsim._src import dtype_kinds
from meshsim._src import api, core, ref
from meshsim._src.ad import custom_jvp
from meshsim._src.lax import elementwise as lax
from meshsim._src.lax import structural as lax_structural
from meshsim._src.sharding.named_sharding import PartitionSpec, check_no_duplicate_axes
from meshsim._src.numpy.promotion import (broadcast_shapes, broadcast_to_rank, broadcast_to_shape, promote_args,
                                          promote_args_inexact, promote_args_numeric, result_type)

__all__ = [
    # arithmetic
    "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "mod", "remainder", "fmod",
    "divmod", "power", "pow", "float_power", "negative", "positive", "abs", "absolute", "fabs", "sign",
    "square", "reciprocal", "maximum", "minimum", "fmax", "fmin", "clip", "heaviside", "gcd", "lcm",
    # exponentials, logarithms, trigonometry
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "logaddexp", "logaddexp2", "sqrt", "cbrt",
    "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "arcsinh",
    "arccosh", "arctanh", "asin", "acos", "atan", "atan2", "asinh", "acosh", "atanh", "deg2rad",
    "rad2deg", "degrees", "radians", "hypot", "sinc",
    # rounding
    "floor", "ceil", "round", "around", "rint", "trunc", "modf",
    # comparisons and logic
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
    "logical_xor", "logical_not", "where", "isclose", "allclose", "array_equal", "array_equiv",
    # bits
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_invert", "invert", "left_shift",
    "right_shift", "bitwise_left_shift", "bitwise_right_shift", "bitwise_count",
    # floating-point classification
    "isnan", "isinf", "isposinf", "isneginf", "isfinite", "signbit", "copysign", "nextafter", "nan_to_num",
    # real numbers seen as complex
    "real", "imag", "conj", "conjugate", "isreal", "iscomplexobj", "isrealobj",
    # floating-point decomposition, scalars, bit packing
    "frexp", "ldexp", "spacing", "isscalar", "iterable", "packbits", "unpackbits",
]


# --- helpers -----------------------------------------------------------------

def _check_arraylike(name, *args, jitted: bool = False):
    """JAX's errors for non-arrays; `jitted`: JAX's own function is a jitted one."""
    for i, a in enumerate(args):
        if isinstance(a, ref.Ref):
            raise ref.operand_error(name, i, jitted)
        if isinstance(a, (list, tuple)):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(a)} at position {i}.")


def _asarray(name, x):
    _check_arraylike(name, x)
    return core.asarray_value(x)


def _const(x, value):
    """A rank-0 constant of x's dtype that keeps x's weak type (JAX's lax._const)."""
    return core.Array.from_numpy(np.asarray(value, dtype=x.dtype), weak_type=x.weak_type)


def _constant_like(x, value):
    """A strongly typed rank-0 constant of x's dtype (JAX's jnp.array(value, x.dtype))."""
    return core.Array.from_numpy(np.asarray(value, dtype=x.dtype), weak_type=False)


def _full_like(x, value, dtype=None):
    """`value` in x's shape; weakly typed when x is and `dtype` is not given (as lax.full_like)."""
    weak = dtype is None and x.weak_type
    fill = core.Array.from_numpy(np.asarray(value, dtype=dtype or x.dtype), weak_type=weak)
    return broadcast_to_shape(fill, x.shape)


def _is_integral(dtype) -> bool:
    return dtype_kinds.issubdtype(dtype, np.integer) or dtype == np.bool_


def _is_floating(dtype) -> bool:
    return dtype_kinds.issubdtype(dtype, np.floating)


def _to_bool(x):
    return x if x.dtype == np.bool_ else lax.ne(x, _const(x, 0))


def _promoted(promote, name, jitted: bool = False):
    def promote_checked(*args):
        _check_arraylike(name, *args, jitted=jitted)
        return promote(*args)
    return promote_checked


def _jit_form(fn, inline_jit):
    """`fn` as JAX writes it: a `jit(inline=True)` function (True), a plain `jit` one whose
    call is an equation of its own ("call", arccosh), or not jitted (False, the jnp.ufunc
    objects)."""
    if inline_jit == "call":
        return api.jitted_when_traced(fn)
    return api.jitted_when_traced(fn, inline=True) if inline_jit else fn


def _unary(name, lax_op, promote=promote_args_inexact, inline_jit=True):
    """jnp's `name`: JAX writes most as `jit(inline=True)` functions (their repr is a
    PjitFunction's; traced, their operations are written in place); see `_jit_form`."""
    promote = _promoted(promote, name, jitted=True)

    def fn(x, /):
        return lax_op(*promote(x))
    fn.__name__ = fn.__qualname__ = name
    return _jit_form(fn, inline_jit)


def _binary(name, lax_op, promote=promote_args, keep_scalars=True, inline_jit=True):
    promote = _promoted(functools.partial(promote, keep_scalars=keep_scalars), name)

    def fn(x1, x2, /):
        return lax_op(*promote(x1, x2))
    fn.__name__ = fn.__qualname__ = name
    return _jit_form(fn, inline_jit)


def _alias(name, fn):
    """An array-API name (`acos`, `abs`, ...) as JAX writes it: its own `jit(inline=True)`
    function of that name, calling the NumPy-named one (a plain jit one stays a call, acosh's
    arccosh)."""
    called_as_jit = isinstance(fn, api.JittedWhenTraced) and not fn._inline
    target = fn if called_as_jit else getattr(fn, "__wrapped__", fn)

    @functools.wraps(target)
    def alias(*args, **kwargs):
        return target(*args, **kwargs)
    alias.__name__ = alias.__qualname__ = name
    return api.jitted_when_traced(alias, inline=True)


@api.jitted_when_traced
def _where(condition, x, y):
    """select(condition, x, y) with x and y promoted and everything broadcast."""
    condition = _to_bool(core.asarray_value(condition))
    dtype, weak = result_type(x, y)
    x, y = (core.convert_element_type(v, dtype, weak) for v in (x, y))
    if condition.ndim == 0:  # lax.select takes a scalar predicate as is
        shape = broadcast_shapes(x.shape, y.shape)
    else:
        shape = broadcast_shapes(condition.shape, x.shape, y.shape)
    operands = (condition, x, y) if condition.ndim else (x, y)
    mesh, spec = (None, None) if all(v.shape == shape for v in operands) else \
        _broadcast_sharding([v.aval for v in operands], len(shape))

    def broadcast(v):
        # Laid out as JAX's jitted `where` types its broadcasts, since select needs its cases
        # laid out alike: JAX broadcasts into that sharding, meshsim reshards after.
        out = broadcast_to_shape(v, shape)
        if mesh is None or [tuple(e) for e in out.aval.spec] == spec:
            return out
        return core.bind1("reshard", out, mesh=mesh, spec=[list(e) for e in spec])
    if condition.ndim:
        condition = broadcast(condition)
    return lax.select(condition, broadcast(x), broadcast(y))


def _broadcast_sharding(avals, ndim: int):
    """(mesh, spec) of operands broadcast together, as JAX's lax.broadcast_shardings gives
    them: per dimension (ranks aligned at the right) the one mesh-axis entry the operands
    give it; (None, None) when none is sharded in its type."""
    mesh = next((a.mesh for a in avals if a.mesh is not None and any(a.spec)), None)
    if mesh is None:
        return None, None
    padded = [[()] * (ndim - len(a.shape)) + [tuple(e) for e in a.spec] if a.mesh is not None
              else [()] * ndim for a in avals]
    spec = []
    for entries in zip(*padded):
        named = {e for e in entries if e}
        if len(named) > 1:
            specs = ", ".join(str(tuple(_spec_entry(e) for e in p)) for p in padded if len(p))
            raise _core.ShardingTypeError(f"broadcast_shardings got incompatible shardings for broadcasting: {specs}.")
        spec.append(named.pop() if named else ())
    check_no_duplicate_axes(PartitionSpec(*(_spec_entry(e) for e in spec)))
    return mesh, spec


def _spec_entry(entry: tuple):
    """A spec entry as PartitionSpec prints it: None, a name, or a tuple of names."""
    return None if not entry else entry[0] if len(entry) == 1 else entry


# --- arithmetic ----------------------------------------------------------------

def add(x1, x2, /):
    x1, x2 = _promoted(functools.partial(promote_args, keep_scalars=True), "add")(x1, x2)
    return lax.bitwise_or(x1, x2) if x1.dtype == np.bool_ else lax.add(x1, x2)


def multiply(x1, x2, /):
    x1, x2 = _promoted(functools.partial(promote_args, keep_scalars=True), "multiply")(x1, x2)
    return lax.bitwise_and(x1, x2) if x1.dtype == np.bool_ else lax.mul(x1, x2)


subtract = _binary("subtract", lax.sub, inline_jit=False)
true_divide = _binary("true_divide", lax.div, promote_args_inexact)
maximum = _binary("maximum", lax.max, inline_jit=False)
minimum = _binary("minimum", lax.min, inline_jit=False)
float_power = _binary("float_power", lax.pow, promote_args_inexact, keep_scalars=False)
arctan2 = _binary("arctan2", lax.atan2, promote_args_inexact)
atan2 = _alias("atan2", arctan2)
nextafter = _binary("nextafter", lax.nextafter, promote_args_inexact)
negative = _unary("negative", lax.neg, promote_args, inline_jit=False)
positive = _unary("positive", lambda x: x, promote_args)
sign = _unary("sign", lax.sign, promote_args)
square = _unary("square", lax.square, promote_args_numeric)
reciprocal = _unary("reciprocal", lambda x: lax.integer_pow(x, -1))
fabs = _unary("fabs", lax.abs)


def divide(x1, x2, /):
    return true_divide(x1, x2)


@api.jitted_when_traced(inline=True)
def absolute(x, /):
    x = _asarray("absolute", x)
    return x if x.dtype == np.bool_ or dtype_kinds.issubdtype(x.dtype, np.unsignedinteger) else lax.abs(x)


abs = _alias("abs", absolute)  # noqa: A001 (jnp.abs)


@api.jitted_when_traced
def floor_divide(x1, x2, /):
    """Python's floor division: rounds toward -inf (integers and floats)."""
    x1, x2 = _promoted(promote_args_numeric, "floor_divide")(x1, x2)
    if dtype_kinds.issubdtype(x1.dtype, np.unsignedinteger):
        return lax.div(x1, x2)
    if dtype_kinds.issubdtype(x1.dtype, np.integer):
        quotient = lax.div(x1, x2)
        inexact = logical_and(not_equal(lax.sign(x1), lax.sign(x2)), not_equal(lax.rem(x1, x2), 0))
        return _where(inexact, subtract(quotient, 1), quotient)
    return _float_divmod(x1, x2)[0]


def _float_divmod(x1, x2):
    mod = lax.rem(x1, x2)
    x1_corrected = _where(equal(x2, 0), x1, lax.sub(x1, mod))
    div = lax.div(x1_corrected, x2)
    ind = lax.bitwise_and(not_equal(mod, 0), not_equal(lax.sign(x2), lax.sign(mod)))
    mod = lax.select(ind, add(mod, x2), mod)
    div = lax.select(ind, subtract(div, 1.0), div)
    return lax.round(div), mod


@api.jitted_when_traced
def remainder(x1, x2, /):
    """x1 - floor(x1 / x2) * x2: the result has the sign of the divisor."""
    x1, x2 = _promoted(promote_args_numeric, "remainder")(x1, x2)
    zero = _constant_like(x1, 0)
    if dtype_kinds.issubdtype(x2.dtype, np.integer):
        x2 = _where(equal(x2, 0), _full_like(x2, 1), x2)
    trunc_mod = lax.rem(x1, x2)
    do_plus = lax.bitwise_and(lax.ne(lax.lt(trunc_mod, zero), lax.lt(x2, zero)), lax.ne(trunc_mod, zero))
    return lax.select(do_plus, lax.add(trunc_mod, x2), trunc_mod)


def mod(x1, x2, /):
    return remainder(x1, x2)


@api.jitted_when_traced
def fmod(x1, x2, /):
    """C's remainder: the result has the sign of the dividend."""
    _check_arraylike("fmod", x1, x2)
    if dtype_kinds.issubdtype(result_type(x1, x2)[0], np.integer):
        x2 = _asarray("fmod", x2)
        x2 = _where(equal(x2, 0), _full_like(x2, 1), x2)
    return lax.rem(*promote_args_numeric(x1, x2))


@api.jitted_when_traced
def divmod(x1, x2, /):  # noqa: A001 (jnp.divmod)
    x1, x2 = _promoted(promote_args_numeric, "divmod")(x1, x2)
    if dtype_kinds.issubdtype(x1.dtype, np.integer):
        return floor_divide(x1, x2), remainder(x1, x2)
    return _float_divmod(x1, x2)


def _static_int(x):
    """x as a Python int when it is a concrete integer scalar, else None."""
    if isinstance(x, core.Tracer):
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


def power(x1, x2, /):
    """x1 ** x2; a concrete integer exponent takes lax.integer_pow."""
    _check_arraylike("power", x1, x2)
    exponent = _static_int(x2)
    if exponent is not None:
        return lax.integer_pow(promote_args_numeric(x1)[0], exponent)
    x1, x2 = core.asarray_value(x1), core.asarray_value(x2)
    if x1.ndim and x2.ndim:  # broadcast to the common rank; lax.pow broadcasts size-1 dims
        rank = len(broadcast_shapes(x1.shape, x2.shape))
        x1, x2 = broadcast_to_rank(x1, rank), broadcast_to_rank(x2, rank)
    x1_, x2_ = promote_args_numeric(x1, x2, keep_scalars=True)
    if _is_integral(x1_.dtype):
        return _pow_int_int(x1_, x2_)
    if _is_floating(x1.dtype) and dtype_kinds.issubdtype(x2.dtype, np.integer):
        return lax.pow(x1, x2)  # lax.pow takes an integer exponent as is
    return lax.pow(x1_, x2_)


def pow(x1, x2, /):  # noqa: A001 (jnp.pow)
    return power(x1, x2)


def _pow_int_int(x1, x2):
    """Square-and-multiply over the exponent's low 6 bits (more always overflows)."""
    zero, one = _constant_like(x2, 0), _constant_like(x2, 1)
    acc = _where(lax.bitwise_and(lax.eq(x1, zero), lax.ne(x2, zero)), zero, one)
    for _ in range(6):
        acc = _where(_to_bool(lax.bitwise_and(x2, one)), lax.mul(acc, x1), acc)
        x1 = lax.mul(x1, x1)
        x2 = lax.shift_right_logical(x2, one)
    return acc


@api.jitted_when_traced
def clip(arr=None, /, min=None, max=None):  # noqa: A002 (jnp.clip's argument names)
    """Limits values to [min, max]; either bound may be None."""
    if arr is None:
        raise ValueError("No input was provided to the clip function.")
    _check_arraylike("clip", arr)
    if any(iscomplexobj(t) for t in (arr, min, max)):
        raise ValueError(
            "Clip received a complex value either through the input or the min/max keywords. Complex values "
            "have no ordering and cannot be clipped. Please convert to a real value or array by taking the "
            "real or imaginary components via jax.numpy.real/imag respectively.")
    if min is not None:
        arr = maximum(min, arr)
    if max is not None:
        arr = minimum(max, arr)
    return core.asarray_value(arr)


@api.jitted_when_traced
def fmax(x1, x2):
    """maximum that ignores NaNs."""
    return _where(logical_or(greater(x1, x2), isnan(x2)), x1, x2)


@api.jitted_when_traced
def fmin(x1, x2):
    """minimum that ignores NaNs."""
    return _where(logical_or(less(x1, x2), isnan(x2)), x1, x2)


@api.jitted_when_traced
def heaviside(x1, x2, /):
    x1, x2 = _promoted(promote_args_inexact, "heaviside")(x1, x2)
    zero = _const(x1, 0)
    return _where(lax.lt(x1, zero), zero, _where(lax.gt(x1, zero), _const(x1, 1), _where(isnan(x1), x1, x2)))


def _euclid_steps(dtype) -> int:
    """Euclid's algorithm on b-bit integers ends within ~1.44 b + 2 steps."""
    return int(1.45 * 8 * np.dtype(dtype).itemsize) + 2


def gcd(x1, x2):
    x1, x2 = _promoted(promote_args, "gcd")(x1, x2)
    if not dtype_kinds.issubdtype(x1.dtype, np.integer):
        raise ValueError("Arguments to jax.numpy.gcd must be integers.")
    a, b = absolute(x1), absolute(x2)
    for _ in range(_euclid_steps(a.dtype)):
        if not isinstance(b, core.Tracer) and not np.asarray(b).any():
            break  # concrete values: stop as soon as every pair is done
        nonzero = lax.ne(b, _const(b, 0))
        a, b = _where(nonzero, b, a), _where(nonzero, lax.rem(a, b), _const(b, 0))
        swap = lax.lt(a, b)
        a, b = _where(swap, b, a), _where(swap, a, b)
    return a


def lcm(x1, x2):
    x1, x2 = _promoted(promote_args, "lcm")(x1, x2)
    x1, x2 = absolute(x1), absolute(x2)
    if not dtype_kinds.issubdtype(x1.dtype, np.integer):
        raise ValueError("Arguments to jax.numpy.lcm must be integers.")
    d = gcd(x1, x2)
    return _where(equal(d, 0), _const(d, 0), multiply(x1, floor_divide(x2, d)))


# --- exponentials, logarithms, trigonometry --------------------------------------

exp = _unary("exp", lax.exp)
exp2 = _unary("exp2", lax.exp2)
expm1 = _unary("expm1", lax.expm1)
log = _unary("log", lax.log)
log1p = _unary("log1p", lax.log1p)
sqrt = _unary("sqrt", lax.sqrt)
cbrt = _unary("cbrt", lax.cbrt)
sin = _unary("sin", lax.sin)
cos = _unary("cos", lax.cos)
tan = _unary("tan", lax.tan)
arcsin = _unary("arcsin", lax.asin)
arccos = _unary("arccos", lax.acos)
arctan = _unary("arctan", lax.atan)
sinh = _unary("sinh", lax.sinh)
cosh = _unary("cosh", lax.cosh)
tanh = _unary("tanh", lax.tanh)
arcsinh = _unary("arcsinh", lax.asinh)
arccosh = _unary("arccosh", lax.acosh, inline_jit="call")
arctanh = _unary("arctanh", lax.atanh)
asin, acos, atan = (_alias(n, f) for n, f in [("asin", arcsin), ("acos", arccos), ("atan", arctan)])
asinh, acosh, atanh = (_alias(n, f) for n, f in [("asinh", arcsinh), ("acosh", arccosh),
                                                 ("atanh", arctanh)])


@api.jitted_when_traced(inline=True)
def log2(x, /):
    (x,) = _promoted(promote_args_inexact, "log2")(x)
    return lax.div(lax.log(x), lax.log(_constant_like(x, 2)))


@api.jitted_when_traced(inline=True)
def log10(x, /):
    (x,) = _promoted(promote_args_inexact, "log10")(x)
    return lax.mul(lax.log(x), _constant_like(x, 0.4342944819032518))  # 1 / ln(10)


def _logaddexp_with(x1, x2, exp_op, scale):
    """max + scale * log1p(exp_op(-|x1 - x2|)), stable for large inputs; NaN
    deltas (NaNs, or infinities of one sign) fall back to x1 + x2 (in JAX's order of
    operations)."""
    amax = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    is_nan, both = lax.ne(delta, delta), lax.add(x1, x2)
    tail = lax.log1p(exp_op(lax.neg(lax.abs(delta))))
    if scale is not None:
        tail = lax.mul(_const(amax, scale), tail)
    return lax.select(is_nan, both, lax.add(amax, tail))


def _without_inf(x):
    """x with +inf replaced by 0 (so that inf - inf does not make the derivative NaN)."""
    return lax.select(lax.eq(x, _const(x, np.inf)), lax_structural.full_like(x, 0), x)


def _logaddexp_rule(exp_op, primal):
    """The JVP of log(exp_op(x1) + exp_op(x2)): t1 * exp_op(x1 - out) + t2 * exp_op(x2 - out)."""
    def rule(primals, tangents):
        (x1, x2), (t1, t2) = primals, tangents
        out = primal(x1, x2)
        return out, lax.add(lax.mul(t1, exp_op(lax.sub(_without_inf(x1), _without_inf(out)))),
                            lax.mul(t2, exp_op(lax.sub(_without_inf(x2), _without_inf(out)))))
    return rule


def _custom_logaddexp(name, exp_op, scale):
    """The custom_jvp function `name` of promoted operands (JAX's lax-level logaddexp and
    logaddexp2: their derivative stays finite where both operands are infinite)."""
    def primal(x1, x2):
        return _logaddexp_with(x1, x2, exp_op, scale)

    primal.__name__ = primal.__qualname__ = name
    fun = custom_jvp(primal)
    rule = _logaddexp_rule(exp_op, fun)
    rule.__name__ = rule.__qualname__ = f"_{name}_jvp"
    fun.defjvp(rule)
    return fun


_lax_logaddexp = _custom_logaddexp("logaddexp", lax.exp, None)
_lax_logaddexp2 = _custom_logaddexp("logaddexp2", lax.exp2, 1 / np.log(2))


def logaddexp(x1, x2, /):
    """log(exp(x1) + exp(x2))."""
    x1, x2 = _promoted(functools.partial(promote_args_inexact, keep_scalars=True), "logaddexp")(x1, x2)
    return _lax_logaddexp(x1, x2)


def logaddexp2(x1, x2, /):
    """log2(2**x1 + 2**x2)."""
    x1, x2 = _promoted(functools.partial(promote_args_inexact, keep_scalars=True), "logaddexp2")(x1, x2)
    return _lax_logaddexp2(x1, x2)


@api.jitted_when_traced(inline=True)
def deg2rad(x, /):
    (x,) = _promoted(promote_args_inexact, "deg2rad")(x)
    return lax.mul(x, _const(x, np.pi / 180))


@api.jitted_when_traced(inline=True)
def rad2deg(x, /):
    (x,) = _promoted(promote_args_inexact, "rad2deg")(x)
    return lax.mul(x, _const(x, 180 / np.pi))


def radians(x, /):
    return deg2rad(x)


def degrees(x, /):
    return rad2deg(x)


@api.jitted_when_traced
def hypot(x1, x2, /):
    """sqrt(x1**2 + x2**2) without overflow: max * sqrt(1 + (min/max)**2)."""
    x1, x2 = _promoted(promote_args_inexact, "hypot")(x1, x2)
    x1, x2 = lax.abs(x1), lax.abs(x2)
    idx_inf = lax.bitwise_or(isposinf(x1), isposinf(x2))
    x1, x2 = maximum(x1, x2), minimum(x1, x2)
    one = _const(x1, 1)
    safe_x1 = _where(equal(x1, 0), one, x1)
    x = _where(equal(x1, 0), x1, lax.mul(x1, lax.sqrt(lax.add(one, lax.square(lax.div(x2, safe_x1))))))
    return _where(idx_inf, _const(x, np.inf), x)


def _sinc_maclaurin(k, x):
    """The k-th derivative of sin(t)/t at t = 0, (-1)**(k/2) / (k + 1) for even k and 0 for
    odd k, shaped as x; its own derivative is the next one, so that sinc differentiates any
    number of times at 0."""
    zero = lax.mul(x, _const(x, 0))
    return lax.add(zero, _const(x, (-1) ** (k // 2) / (k + 1))) if k % 2 == 0 else zero


def _sinc_maclaurin_jvp(k, primals, tangents):
    (x,), (t,) = primals, tangents
    return _sinc_maclaurin(k, x), lax.mul(_sinc_maclaurin(k + 1, x), t)


_sinc_maclaurin = custom_jvp(_sinc_maclaurin, nondiff_argnums=(0,))
_sinc_maclaurin.defjvp(_sinc_maclaurin_jvp)


@api.jitted_when_traced
def sinc(x, /):
    """sin(pi x) / (pi x), with sinc(0) = 1 (and its derivatives there from its series)."""
    (x,) = _promoted(promote_args_inexact, "sinc")(x)
    eq_zero = lax.eq(x, _const(x, 0))
    pi_x = lax.mul(_const(x, np.pi), x)
    safe_pi_x = _where(eq_zero, _const(x, 1), pi_x)
    return _where(eq_zero, _sinc_maclaurin(0, pi_x), lax.div(lax.sin(safe_pi_x), safe_pi_x))


# --- rounding ------------------------------------------------------------------

@api.jitted_when_traced(inline=True)
def floor(x, /):
    x = _asarray("floor", x)
    return x if _is_integral(x.dtype) else lax.floor(*promote_args_inexact(x))


@api.jitted_when_traced(inline=True)
def ceil(x, /):
    x = _asarray("ceil", x)
    return x if _is_integral(x.dtype) else lax.ceil(*promote_args_inexact(x))


@api.jitted_when_traced
def trunc(x):
    """Rounds toward zero."""
    x = _asarray("trunc", x)
    if _is_integral(x.dtype):
        return x
    return _where(lax.lt(x, _const(x, 0)), ceil(x), floor(x))


@api.jitted_when_traced
def rint(x, /):
    """Rounds half to even; integers become the default float."""
    x = _asarray("rint", x)
    if _is_integral(x.dtype):
        return lax.convert_element_type(x, core.canonicalize_dtype(np.float64))
    return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


@api.jitted_when_traced(static_argnames=('decimals',))
def round(a, decimals=0, out=None):  # noqa: A001 (jnp.round)
    """Rounds half to even at `decimals` places (by scaling, as JAX does)."""
    a = _asarray("round", a)
    decimals = operator.index(decimals)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.round is not supported.")
    if a.dtype == np.bool_:
        raise ValueError("jnp.round does not accept boolean inputs (data type bool is not inexact)")
    if dtype_kinds.issubdtype(a.dtype, np.integer):
        if decimals < 0:
            raise NotImplementedError("integer np.round not implemented for decimals < 0")
        return a
    if decimals == 0:
        return lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN)
    if _is_floating(a.dtype) and decimals > np.log10(dtype_kinds.finfo(a.dtype).max):
        return a  # finer than the dtype can represent
    factor = _const(a, 10 ** decimals)
    return lax.div(lax.round(lax.mul(a, factor), lax.RoundingMethod.TO_NEAREST_EVEN), factor)


def around(a, decimals=0, out=None):
    return round(a, decimals, out)


@api.jitted_when_traced
def modf(x, /, out=None):
    """(fractional part, integral part), both with x's sign."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.modf is not supported.")
    (x,) = _promoted(promote_args_inexact, "modf")(x)
    whole = _where(lax.ge(x, _const(x, 0)), floor(x), ceil(x))
    return subtract(x, whole), whole


# --- comparisons and logic --------------------------------------------------------

def _ordered(lax_op):
    """An order comparison; complex numbers compare lexicographically (real part
    first), as jnp does."""
    def compare(x1, x2):
        if not _is_complex(x1.dtype):
            return lax_op(x1, x2)
        re1, re2 = lax.real(x1), lax.real(x2)
        return lax.select(lax.eq(re1, re2), lax_op(lax.imag(x1), lax.imag(x2)), lax_op(re1, re2))
    return compare


equal = _binary("equal", lax.eq)
not_equal = _binary("not_equal", lax.ne)
less = _binary("less", _ordered(lax.lt))
less_equal = _binary("less_equal", _ordered(lax.le))
greater = _binary("greater", _ordered(lax.gt))
greater_equal = _binary("greater_equal", _ordered(lax.ge))
logical_and = _binary("logical_and", lambda x, y: lax.bitwise_and(_to_bool(x), _to_bool(y)), inline_jit=False)
logical_or = _binary("logical_or", lambda x, y: lax.bitwise_or(_to_bool(x), _to_bool(y)), inline_jit=False)
logical_xor = _binary("logical_xor", lambda x, y: lax.bitwise_xor(_to_bool(x), _to_bool(y)), inline_jit=False)
logical_not = _unary("logical_not", lambda x: lax.bitwise_not(_to_bool(x)), promote_args)


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """x where condition else y; with one argument, the indices of nonzero elements."""
    if x is None and y is None:
        from meshsim._src.numpy import selection
        return selection.nonzero(condition, size=size, fill_value=fill_value)
    if size is not None or fill_value is not None:
        raise ValueError("size and fill_value arguments cannot be used in three-term where function.")
    if x is None or y is None:
        raise ValueError("Either both or neither of the x and y arguments should be provided to "
                         f"jax.numpy.where, got {x} and {y}.")
    _check_arraylike("where", condition, x, y)
    return _where(condition, x, y)


@api.jitted_when_traced(static_argnames=('equal_nan',))
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b|, elementwise (infinities must match exactly)."""
    a, b = _promoted(promote_args_inexact, "isclose")(a, b)
    # the tolerances compare with |a - b|, real for complex a
    real = np.finfo(a.dtype).dtype if a.dtype.kind == "c" else a.dtype
    rtol = lax.convert_element_type(rtol, real)
    atol = lax.convert_element_type(atol, real)
    in_range = lax.le(lax.abs(lax.sub(a, b)), lax.add(atol, lax.mul(rtol, lax.abs(b))))
    out = logical_or(lax.eq(a, b), logical_and(isfinite(b), in_range))
    return logical_or(out, logical_and(isnan(a), isnan(b))) if equal_nan else out


def _all(x):
    from meshsim._src.numpy import reductions
    return reductions.all(x)


@api.jitted_when_traced(static_argnames=('equal_nan',))
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element is close (a bool scalar Array)."""
    _check_arraylike("allclose", a, b)
    return _all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan=False):
    """Same shape and equal elements (a bool scalar Array)."""
    a1, a2 = core.asarray_value(a1), core.asarray_value(a2)
    if a1.shape != a2.shape:
        return core.asarray_value(np.bool_(False))
    eq = equal(a1, a2)
    if equal_nan:
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return _all(eq)


def array_equiv(a1, a2):
    """Equal after broadcasting (a bool scalar Array; False if they do not broadcast)."""
    a1, a2 = core.asarray_value(a1), core.asarray_value(a2)
    try:
        broadcast_shapes(a1.shape, a2.shape)
    except ValueError:
        return core.asarray_value(np.bool_(False))
    return _all(equal(a1, a2))


# --- bits ----------------------------------------------------------------------

bitwise_and = _binary("bitwise_and", lax.bitwise_and, inline_jit=False)
bitwise_or = _binary("bitwise_or", lax.bitwise_or, inline_jit=False)
bitwise_xor = _binary("bitwise_xor", lax.bitwise_xor, inline_jit=False)
bitwise_not = _unary("bitwise_not", lax.bitwise_not, promote_args)
bitwise_invert, invert = _alias("bitwise_invert", bitwise_not), _alias("invert", bitwise_not)
left_shift = _binary("left_shift", lax.shift_left, promote_args_numeric)
bitwise_left_shift = _alias("bitwise_left_shift", left_shift)


@api.jitted_when_traced(inline=True)
def right_shift(x1, x2, /):
    """Arithmetic shift for signed integers, logical for unsigned ones (not uint4: NumPy does
    not count it as unsigned, so JAX shifts it arithmetically)."""
    x1, x2 = _promoted(promote_args_numeric, "right_shift")(x1, x2)
    if np.issubdtype(x1.dtype, np.unsignedinteger):
        return lax.shift_right_logical(x1, x2)
    return lax.shift_right_arithmetic(x1, x2)


bitwise_right_shift = _alias("bitwise_right_shift", right_shift)


def bitwise_count(x, /):
    """The number of 1 bits in |x|, as uint8."""
    (x,) = _promoted(promote_args_numeric, "bitwise_count")(x)
    return lax.convert_element_type(lax.population_count(absolute(x)), np.uint8)


# --- floating-point classification ---------------------------------------------------

@api.jitted_when_traced(inline=True)
def isnan(x, /):
    x = _asarray("isnan", x)
    if _is_complex(x.dtype):
        return logical_or(isnan(lax.real(x)), isnan(lax.imag(x)))
    return lax.ne(x, x)


@api.jitted_when_traced
def isinf(x, /):
    x = _asarray("isinf", x)
    if _is_complex(x.dtype):
        return logical_or(isinf(lax.real(x)), isinf(lax.imag(x)))
    if _is_floating(x.dtype):
        return lax.eq(lax.abs(x), _constant_like(x, np.inf))
    return _full_like(x, False, np.bool_)


def _is_signed_inf(name, x, infinity):
    x = _asarray(name, x)
    if _is_floating(x.dtype):
        return lax.eq(x, _constant_like(x, infinity))
    return _full_like(x, False, np.bool_)


def isposinf(x, /):
    return _is_signed_inf("isposinf", x, np.inf)


def isneginf(x, /):
    return _is_signed_inf("isneginf", x, -np.inf)


@api.jitted_when_traced(inline=True)
def isfinite(x, /):
    x = _asarray("isfinite", x)
    if _is_complex(x.dtype):
        return logical_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    if _is_floating(x.dtype):
        return lax.is_finite(x)
    return _full_like(x, True, np.bool_)


_SAME_WIDTH_INT = {2: np.int16, 4: np.int32, 8: np.int64}


@api.jitted_when_traced
def signbit(x, /):
    """Whether the sign bit is set (also for -0.0 and negative NaNs)."""
    (x,) = _promoted(promote_args, "signbit")(x)
    if dtype_kinds.issubdtype(x.dtype, np.integer):
        return lax.lt(x, _constant_like(x, 0))
    if x.dtype == np.bool_:
        return _full_like(x, False, np.bool_)
    bits = lax.bitcast_convert_type(x, _SAME_WIDTH_INT[x.dtype.itemsize])
    # The sign bit shifted over every other bit (0 or -1), as JAX computes it.
    sign = lax.shift_right_arithmetic(bits, _constant_like(bits, 8 * x.dtype.itemsize - 1))
    return lax.convert_element_type(sign, np.bool_)


@api.jitted_when_traced
def copysign(x1, x2, /):
    x1, x2 = _promoted(promote_args_inexact, "copysign")(x1, x2)
    return _where(signbit(x2), lax.neg(lax.abs(x1)), lax.abs(x1))


@api.jitted_when_traced
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN -> nan, +inf -> posinf (default: the largest float), -inf -> neginf."""
    del copy
    x = _asarray("nan_to_num", x)
    if not _is_floating(x.dtype):
        return x
    info = dtype_kinds.finfo(x.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    from meshsim._src.numpy.creation import asarray  # (creation imports this module)
    out = _where(isnan(x), asarray(nan, dtype=x.dtype), x)
    out = _where(isposinf(out), asarray(posinf, dtype=x.dtype), out)
    return _where(isneginf(out), asarray(neginf, dtype=x.dtype), out)


# --- complex numbers ----------------------------------------------------------------

def _is_complex(dtype) -> bool:
    return dtype_kinds.issubdtype(dtype, np.complexfloating)


@api.jitted_when_traced(inline=True)
def real(val, /):
    val = _asarray("real", val)
    return lax.real(val) if _is_complex(val.dtype) else val


@api.jitted_when_traced(inline=True)
def imag(val, /):
    val = _asarray("imag", val)
    return lax.imag(val) if _is_complex(val.dtype) else _full_like(val, 0)


@api.jitted_when_traced(inline=True)
def conjugate(x, /):
    x = _asarray("conjugate", x)
    return lax.conj(x) if _is_complex(x.dtype) else x


def conj(x, /):
    return conjugate(x)



# --- floating-point decomposition ------------------------------------------------

def _normalize_float(x):
    """x's bits as a signed integer, subnormals scaled up by 2**nmant (and that
    exponent offset, to add back)."""
    info = dtype_kinds.finfo(x.dtype)
    int_type = np.dtype(f"int{info.bits}")
    cond = lax.lt(lax.abs(x), _const(x, info.tiny))
    x1 = _where(cond, lax.mul(x, _const(x, 1 << info.nmant)), x)
    x2 = _where(cond, np.array(-info.nmant, int_type), np.array(0, int_type))
    return lax.bitcast_convert_type(x1, int_type), x2


def frexp(x, /):
    """(mantissa, exponent) with x == mantissa * 2**exponent and 0.5 <= |mantissa| < 1."""
    (x,) = _promoted(promote_args_inexact, "frexp")(x)
    info = dtype_kinds.finfo(x.dtype)
    mask = (1 << info.nexp) - 1
    bias = 1 - info.minexp
    x1, x2 = _normalize_float(x)
    c = lambda v: _constant_like(x1, v)  # noqa: E731
    x2 = lax.add(x2, lax.add(lax.sub(lax.bitwise_and(lax.shift_right_arithmetic(x1, c(info.nmant)), c(mask)),
                                     c(bias)), c(1)))
    x1 = lax.bitwise_and(x1, c(~(mask << info.nmant)))
    x1 = lax.bitwise_or(x1, c((bias - 1) << info.nmant))
    x1 = lax.bitcast_convert_type(x1, x.dtype)
    cond = logical_or(logical_or(isinf(x), isnan(x)), lax.eq(x, _const(x, 0)))
    x2 = _where(cond, _constant_like(x2, 0), x2)
    return _where(cond, x, x1), lax.convert_element_type(x2, np.int32)


def ldexp(x1, x2, /):
    """x1 * 2**x2, through frexp so that small x1 with large x2 does not overflow early."""
    x1, x2 = _asarray("ldexp", x1), _asarray("ldexp", x2)
    if dtype_kinds.issubdtype(x2.dtype, np.inexact):
        raise ValueError(f"ldexp not supported for input types {(x1.dtype, x2.dtype)}")
    (x1,) = promote_args_inexact(x1)
    x2 = lax.convert_element_type(x2, x1.dtype)
    m, e = frexp(x1)
    e = lax.convert_element_type(lax.add(lax.convert_element_type(e, x2.dtype), x2), x1.dtype)
    # the exponent may overflow by one and still give a finite result
    positive = lax.gt(e, _const(e, 0))
    m = _where(positive, lax.mul(m, _const(m, 2)), m)
    e = _where(positive, lax.sub(e, _const(e, 1)), e)
    x = multiply(m, power(2, lax.convert_element_type(e, m.dtype)))
    return _where(logical_or(isinf(x1), lax.eq(x1, _const(x1, 0))), x1, x)


@api.jitted_when_traced(inline=True)
def spacing(x, /):
    """The distance from x to the next representable value away from zero."""
    (x,) = _promoted(promote_args_inexact, "spacing")(x)
    inf = _const(x, np.inf)
    result = lax.sub(lax.nextafter(x, copysign(inf, x)), x)
    return _where(lax.eq(result, _const(result, 0)), copysign(_const(x, dtype_kinds.finfo(x.dtype).smallest_subnormal), x),
                  result)


@api.jitted_when_traced
def isreal(x, /):
    """True where x has no imaginary part (everywhere, for real arrays)."""
    i = imag(x)
    return lax.eq(i, _const(i, 0))


def iscomplexobj(x) -> bool:
    """Whether x has a complex dtype."""
    if isinstance(x, (complex, np.complexfloating)):
        return True
    if x is None or isinstance(x, (bool, int, float, str, np.generic)):
        return False
    try:
        typ = x.dtype.type
    except AttributeError:
        typ = np.asarray(x).dtype.type
    return dtype_kinds.issubdtype(typ, np.complexfloating)


def isrealobj(x) -> bool:
    return not iscomplexobj(x)


def isscalar(element) -> bool:
    """Whether element is a scalar: a Python/NumPy scalar or a rank-0 array."""
    if np.isscalar(element):
        return True
    if isinstance(element, np.ndarray) or core.is_value(element):
        return element.ndim == 0
    if getattr(element, "__jax_array__", None) is not None:
        return core.asarray_value(element).ndim == 0
    return False


iterable = np.iterable


# --- packing bits -------------------------------------------------------------------

def packbits(a, axis=None, bitorder="big"):
    """The nonzero-ness of a's elements packed eight to a uint8, along `axis` (flattened if None)."""
    from meshsim._src.numpy import namespace as jnp
    a = _asarray("packbits", a)
    if not _is_integral(a.dtype):
        raise TypeError("Expected an input array of integer or boolean data type")
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    a = lax.convert_element_type(_to_bool(a), np.uint8)
    bits = jnp.arange(8, dtype="uint8")
    if bitorder == "big":
        bits = bits[::-1]
    if axis is None:
        a, axis = jnp.ravel(a), 0
    a = jnp.swapaxes(a, axis, -1)
    remainder = a.shape[-1] % 8
    if remainder:
        a = jnp.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, 8 - remainder)])
    a = jnp.reshape(a, a.shape[:-1] + (a.shape[-1] // 8, 8))
    packed = jnp.sum(left_shift(a, bits), -1).astype("uint8")
    return jnp.swapaxes(packed, axis, -1)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """The bits of uint8 array `a`, one uint8 0/1 per bit, along `axis` (flattened if None)."""
    from meshsim._src.numpy import namespace as jnp
    a = _asarray("unpackbits", a)
    if a.dtype != np.uint8:
        raise TypeError("Expected an input array of unsigned byte data type")
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    bits = left_shift(np.uint8(1), jnp.arange(8, dtype="uint8"))
    if bitorder == "big":
        bits = bits[::-1]
    if axis is None:
        a, axis = jnp.ravel(a), 0
    a = jnp.swapaxes(a, axis, -1)
    unpacked = (bitwise_and(a[..., None], bits) > 0).astype("uint8")
    unpacked = jnp.reshape(unpacked, unpacked.shape[:-2] + (-1,))
    if count is not None:
        if count > unpacked.shape[-1]:
            unpacked = jnp.pad(unpacked, [(0, 0)] * (unpacked.ndim - 1) + [(0, count - unpacked.shape[-1])])
        else:
            unpacked = unpacked[..., :count]
    return jnp.swapaxes(unpacked, axis, -1)

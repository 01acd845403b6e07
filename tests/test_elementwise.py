"""Elementwise operations through every layer: the lax primitives, the
jax.numpy ufuncs with NumPy semantics and JAX dtypes, weak-type promotion.
NumPy is the value oracle; the installed JAX is the oracle for dtypes, weak
types, XLA-specific integer semantics and errors."""
import math
import warnings

import numpy as np
import pytest

import meshsim
import meshsim.numpy as jnp
from meshsim import lax

SHAPE_PAIRS = [((), ()), ((), (3,)), ((4,), ()), ((0,), (1,)), ((1,), (5,)), ((2, 3), (3,)),
               ((4, 1, 3), (2, 1)), ((2, 0, 3), (1, 3)), ((3, 4), (3, 4))]
SHAPES = [(), (0,), (1,), (7,), (3, 4), (2, 0, 3)]


def sample(rng, dtype, shape, low=-9, high=10):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(low, info.min), min(high, info.max + 1), shape).astype(dtype)
    return rng.uniform(low, high, shape).astype(dtype)


def assert_close(actual, expected, rtol=0.0, atol=0.0):
    actual = np.asarray(actual)
    expected = np.asarray(expected).astype(actual.dtype)
    assert actual.shape == expected.shape
    if actual.dtype.kind == "f" and (rtol or atol):
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)


def numpy_ref(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args)


# --- unary math vs NumPy ---------------------------------------------------------

# name -> (NumPy function, input range, rtol on float32)
UNARY_FLOAT = {
    "exp": (np.exp, (-5, 5), 2e-6), "exp2": (np.exp2, (-5, 5), 2e-6), "expm1": (np.expm1, (-5, 5), 2e-6),
    "log": (np.log, (0.01, 50), 2e-6), "log2": (np.log2, (0.01, 50), 2e-6),
    "log10": (np.log10, (0.01, 50), 2e-6), "log1p": (np.log1p, (-0.9, 50), 2e-6),
    "sqrt": (np.sqrt, (0, 50), 0), "cbrt": (np.cbrt, (-50, 50), 2e-6), "tanh": (np.tanh, (-5, 5), 2e-6),
    "sin": (np.sin, (-6, 6), 2e-6), "cos": (np.cos, (-6, 6), 2e-6), "tan": (np.tan, (-1.5, 1.5), 2e-6),
    "arcsin": (np.arcsin, (-1, 1), 2e-6), "arccos": (np.arccos, (-1, 1), 2e-6),
    "arctan": (np.arctan, (-9, 9), 2e-6), "sinh": (np.sinh, (-5, 5), 2e-6), "cosh": (np.cosh, (-5, 5), 2e-6),
    "arcsinh": (np.arcsinh, (-9, 9), 2e-6), "arccosh": (np.arccosh, (1, 9), 2e-6),
    "arctanh": (np.arctanh, (-0.99, 0.99), 2e-6), "deg2rad": (np.deg2rad, (-360, 360), 2e-7),
    "rad2deg": (np.rad2deg, (-7, 7), 2e-7), "reciprocal": (np.reciprocal, (0.5, 9), 0),
    "sinc": (np.sinc, (-3, 3), 2e-6), "rint": (np.rint, (-9, 9), 0), "floor": (np.floor, (-9, 9), 0),
    "ceil": (np.ceil, (-9, 9), 0), "trunc": (np.trunc, (-9, 9), 0), "negative": (np.negative, (-9, 9), 0),
    "abs": (np.abs, (-9, 9), 0), "sign": (np.sign, (-9, 9), 0), "square": (np.square, (-9, 9), 0),
}


@pytest.mark.parametrize("name", sorted(UNARY_FLOAT))
def test_unary_float_matches_numpy(name):
    fn, (low, high), rtol = UNARY_FLOAT[name]
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        x = sample(rng, np.float32, shape, low, high)
        out = getattr(jnp, name)(jnp.asarray(x))
        assert out.dtype == np.float32 and out.shape == shape
        assert_close(out, numpy_ref(fn, x.astype(np.float64)), rtol=rtol, atol=1e-6 if rtol else 0)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int8, np.bool_])
@pytest.mark.parametrize("name", ["sin", "exp", "sqrt", "log1p", "tanh", "arctan"])
def test_unary_math_of_integers_promotes_to_float32(name, dtype):
    x = sample(np.random.default_rng(1), dtype, (3, 4), 0, 10)
    out = getattr(jnp, name)(jnp.asarray(x))
    assert out.dtype == np.float32 and not out.weak_type
    assert_close(out, numpy_ref(getattr(np, name), x.astype(np.float64)), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int8, np.bool_])
def test_integer_unary_ops_keep_their_dtype(dtype):
    x = sample(np.random.default_rng(2), dtype, (4, 5))
    ms = jnp.asarray(x)
    names = ["abs", "absolute", "floor", "ceil", "trunc", "positive"] + (["round"] if dtype != np.bool_ else [])
    for name in names:
        out = getattr(jnp, name)(ms)
        assert out.dtype == dtype, name
        assert_close(out, np.abs(x) if name.startswith("abs") else x)
    if dtype != np.bool_:
        assert_close(jnp.negative(ms), np.negative(x))
        assert_close(jnp.sign(ms), np.sign(x))
        assert_close(jnp.square(ms), np.square(x))
    assert_close(jnp.invert(ms), np.invert(x))
    assert_close(jnp.logical_not(ms), np.logical_not(x))
    assert jnp.square(jnp.asarray(np.array([True]))).dtype == np.int32  # bools square as ints


def test_rounding_halves_to_even_and_decimals():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.25, -3.75, 2.675], np.float32)
    assert_close(jnp.round(jnp.asarray(x)), np.round(x))
    assert_close(jnp.around(jnp.asarray(x)), np.around(x))
    assert_close(jnp.rint(jnp.asarray(x)), np.rint(x))
    assert_close(jnp.round(jnp.asarray(x), 1), np.round(x, 1), rtol=1e-6)
    assert_close(jnp.round(jnp.asarray(x), decimals=-1), np.round(x, -1), rtol=1e-6)
    assert_close(lax.round(jnp.asarray(x)), np.sign(x) * np.floor(np.abs(x) + 0.5))  # away from zero
    assert_close(lax.round(jnp.asarray(x), lax.RoundingMethod.TO_NEAREST_EVEN), np.rint(x))
    assert jnp.rint(jnp.asarray(np.arange(3))).dtype == np.float32
    with pytest.raises(NotImplementedError):
        jnp.round(jnp.asarray(np.arange(3)), -1)


def test_floating_point_classification():
    x = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, -np.nan], np.float32)
    ms = jnp.asarray(x)
    for name in ["isnan", "isinf", "isfinite", "isposinf", "isneginf", "signbit"]:
        out = getattr(jnp, name)(ms)
        assert out.dtype == np.bool_
        assert_close(out, getattr(np, name)(x))
    ints = jnp.asarray(np.array([-3, 0, 4], np.int32))
    assert_close(jnp.isnan(ints), [False] * 3)
    assert_close(jnp.isinf(ints), [False] * 3)
    assert_close(jnp.isfinite(ints), [True] * 3)
    assert_close(jnp.signbit(ints), [True, False, False])
    assert_close(jnp.nan_to_num(ms), np.nan_to_num(x))
    assert_close(jnp.nan_to_num(ms, nan=-1.0, posinf=9.0, neginf=-9.0),
                 np.nan_to_num(x, nan=-1.0, posinf=9.0, neginf=-9.0))
    assert_close(jnp.copysign(jnp.asarray(np.float32([1, 2, 3])), ms[:3]), np.copysign([1, 2, 3], x[:3]))


# --- binary ops vs NumPy -----------------------------------------------------------

# name -> (NumPy function, dtypes to try, input range)
BINARY = {
    "add": (np.add, "f i u b s", (-9, 10)), "subtract": (np.subtract, "f i u s", (-9, 10)),
    "multiply": (np.multiply, "f i u b s", (-9, 10)), "true_divide": (np.true_divide, "f i", (1, 10)),
    "divide": (np.divide, "f i", (1, 10)), "floor_divide": (np.floor_divide, "f i u s", (1, 10)),
    "mod": (np.mod, "f i u s", (1, 10)), "remainder": (np.remainder, "f i u s", (1, 10)),
    "fmod": (np.fmod, "f i u s", (1, 10)), "maximum": (np.maximum, "f i u b s", (-9, 10)),
    "minimum": (np.minimum, "f i u b s", (-9, 10)), "fmax": (np.fmax, "f i", (-9, 10)),
    "fmin": (np.fmin, "f i", (-9, 10)), "arctan2": (np.arctan2, "f i", (-9, 10)),
    "hypot": (np.hypot, "f i", (-9, 10)), "equal": (np.equal, "f i u b s", (-3, 3)),
    "not_equal": (np.not_equal, "f i u b s", (-3, 3)), "less": (np.less, "f i u b s", (-3, 3)),
    "less_equal": (np.less_equal, "f i u b s", (-3, 3)), "greater": (np.greater, "f i u b s", (-3, 3)),
    "greater_equal": (np.greater_equal, "f i u b s", (-3, 3)),
    "logical_and": (np.logical_and, "f i b", (-2, 2)), "logical_or": (np.logical_or, "f i b", (-2, 2)),
    "logical_xor": (np.logical_xor, "f i b", (-2, 2)), "bitwise_and": (np.bitwise_and, "i u b s", (-9, 10)),
    "bitwise_or": (np.bitwise_or, "i u b s", (-9, 10)), "bitwise_xor": (np.bitwise_xor, "i u b s", (-9, 10)),
    "left_shift": (np.left_shift, "i u s", (0, 7)), "right_shift": (np.right_shift, "i u s", (0, 7)),
    "copysign": (np.copysign, "f", (-9, 10)), "heaviside": (np.heaviside, "f", (-2, 3)),
    "logaddexp": (np.logaddexp, "f", (-20, 20)), "logaddexp2": (np.logaddexp2, "f", (-20, 20)),
    "nextafter": (np.nextafter, "f", (-2, 2)), "float_power": (np.float_power, "f", (0.5, 3)),
    "gcd": (np.gcd, "i s", (-30, 30)), "lcm": (np.lcm, "i s", (-12, 12)),
}
KIND_DTYPES = {"f": np.float32, "i": np.int32, "u": np.uint32, "b": np.bool_, "s": np.int8}
FLOAT_RTOL = {"arctan2": 2e-6, "hypot": 2e-6, "logaddexp": 2e-6, "logaddexp2": 2e-6, "float_power": 2e-6,
              "true_divide": 1e-7, "divide": 1e-7}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_numpy_with_broadcasting(name):
    fn, kinds, (low, high) = BINARY[name]
    rng = np.random.default_rng(3)
    for kind in kinds.split():
        dtype = KIND_DTYPES[kind]
        for xs, ys in SHAPE_PAIRS:
            x, y = sample(rng, dtype, xs, low, high), sample(rng, dtype, ys, low, high)
            out = getattr(jnp, name)(jnp.asarray(x), jnp.asarray(y))
            assert out.shape == np.broadcast_shapes(xs, ys)
            # NumPy in the dtype meshsim computes in (its float results are float64).
            work = np.float64 if out.dtype == np.float32 and name != "nextafter" else dtype
            expected = numpy_ref(fn, x.astype(work), y.astype(work))
            rtol = FLOAT_RTOL.get(name, 0) if out.dtype == np.float32 else 0
            assert_close(out, expected, rtol=rtol, atol=1e-6 if rtol else 0)


def test_floor_division_and_modulo_follow_python_for_all_signs():
    a = np.array([7, -7, 7, -7, 0, 6, -6, 5], np.int32)
    b = np.array([2, 2, -2, -2, 3, -4, 4, 5], np.int32)
    for dtype in [np.int32, np.int8, np.float32]:
        x, y = jnp.asarray(a.astype(dtype)), jnp.asarray(b.astype(dtype))
        assert_close(jnp.floor_divide(x, y), a.astype(dtype) // b.astype(dtype))
        assert_close(jnp.mod(x, y), np.mod(a.astype(dtype), b.astype(dtype)))
        assert_close(jnp.fmod(x, y), np.fmod(a.astype(dtype), b.astype(dtype)))
        q, r = jnp.divmod(x, y)
        assert_close(q, a.astype(dtype) // b.astype(dtype))
        assert_close(r, a.astype(dtype) % b.astype(dtype))
        assert_close(x // y, a.astype(dtype) // b.astype(dtype))
        assert_close(x % y, a.astype(dtype) % b.astype(dtype))
    assert_close(lax.div(jnp.asarray(a), jnp.asarray(b)), np.trunc(a / b))  # C semantics
    assert_close(lax.rem(jnp.asarray(a), jnp.asarray(b)), np.fmod(a, b))


def test_integer_division_by_zero_does_not_crash():
    x = jnp.asarray(np.array([7, -7, 0], np.int32))
    zero = jnp.asarray(np.zeros(3, np.int32))
    assert_close(lax.div(x, zero), [-1, -1, -1])  # XLA on CPU: all bits set
    assert_close(lax.rem(x, zero), [7, -7, 0])
    assert_close(lax.div(jnp.asarray(np.array([5], np.uint8)), jnp.asarray(np.array([0], np.uint8))), [255])
    int_min = jnp.asarray(np.array([np.iinfo(np.int32).min], np.int32))
    minus_one = jnp.asarray(np.array([-1], np.int32))
    assert_close(lax.div(int_min, minus_one), [np.iinfo(np.int32).min])  # wraps, no SIGFPE
    assert_close(lax.rem(int_min, minus_one), [0])
    assert_close(jnp.floor_divide(x, zero), [-2, -2, -1])  # what JAX computes from lax.div
    assert_close(jnp.mod(x, zero), [0, 0, 0])


def test_integer_division_by_zero_matches_jax(real_jax):
    a = np.array([7, -7, 0, 5, -128], np.int8)
    b = np.array([0, 0, 0, -1, -1], np.int8)
    for name in ["floor_divide", "remainder", "fmod"]:
        ours = getattr(jnp, name)(jnp.asarray(a), jnp.asarray(b))
        theirs = getattr(real_jax.numpy, name)(a, b)
        assert_close(ours, np.asarray(theirs))
    for name in ["div", "rem"]:
        assert_close(getattr(lax, name)(jnp.asarray(a), jnp.asarray(b)),
                     np.asarray(getattr(real_jax.lax, name)(a, b)))


def test_power_integer_and_float_exponents():
    rng = np.random.default_rng(4)
    base = sample(rng, np.int32, (3, 4), -5, 6)
    assert_close(jnp.power(jnp.asarray(base), 3), base ** 3)
    assert_close(jnp.asarray(base) ** 2, base ** 2)
    assert jnp.power(jnp.asarray(base), 3).dtype == np.int32
    exps = sample(rng, np.int32, (4,), 0, 8)
    assert_close(jnp.power(jnp.asarray(base), jnp.asarray(exps)), base ** exps)
    fbase = sample(rng, np.float32, (3, 4), 0.5, 3)
    assert_close(jnp.power(jnp.asarray(fbase), -2), fbase.astype(np.float64) ** -2, rtol=2e-6)
    assert_close(jnp.power(jnp.asarray(fbase), jnp.asarray(exps)), fbase.astype(np.float64) ** exps, rtol=4e-6)
    assert_close(jnp.power(jnp.asarray(fbase), 0.5), np.sqrt(fbase), rtol=2e-6)
    assert_close(jnp.power(2.0, jnp.asarray(exps)), 2.0 ** exps, rtol=1e-6)
    assert_close(jnp.power(jnp.asarray(np.float32([-8, 0])), jnp.asarray(np.float32(1 / 3))),
                 [np.nan, 0.0])
    assert_close(lax.integer_pow(jnp.asarray(np.float32([np.nan, 2])), 0), [1, 1])
    with pytest.raises(TypeError, match="Integers cannot be raised to negative powers"):
        lax.integer_pow(jnp.asarray(base), -1)


def test_clip_where_isclose():
    rng = np.random.default_rng(5)
    x = sample(rng, np.float32, (4, 5))
    ms = jnp.asarray(x)
    assert_close(jnp.clip(ms, -2, 3), np.clip(x, -2, 3))
    assert_close(jnp.clip(ms, max=1.5), np.minimum(x, 1.5))
    assert_close(jnp.clip(ms, min=jnp.asarray(np.float32([0, 1, 2, 3, 4]))), np.maximum(x, [0, 1, 2, 3, 4]))
    assert_close(ms.clip(0, 1), np.clip(x, 0, 1))
    assert jnp.clip(jnp.asarray(np.arange(5)), 1, 3).dtype == np.int32
    with pytest.raises(ValueError, match="No input"):
        jnp.clip()
    cond = x > 0
    y = sample(rng, np.int32, (5,))
    out = jnp.where(jnp.asarray(cond), ms, jnp.asarray(y))
    assert out.dtype == np.float32
    assert_close(out, np.where(cond, x, y))
    assert_close(jnp.where(True, ms, 0), x)
    assert_close(jnp.where(jnp.asarray(np.arange(3)), 1, -1), [-1, 1, 1])  # nonzero ints are true
    with pytest.raises(ValueError, match="Either both or neither"):
        jnp.where(cond, ms)
    a = np.array([1.0, 1.0, np.inf, np.nan, 1e-9, 0.0], np.float32)
    b = np.array([1.0 + 1e-6, 1.1, np.inf, np.nan, 0.0, 1e-7], np.float32)
    assert_close(jnp.isclose(jnp.asarray(a), jnp.asarray(b)), np.isclose(a, b))
    assert_close(jnp.isclose(jnp.asarray(a), jnp.asarray(b), equal_nan=True), np.isclose(a, b, equal_nan=True))
    assert_close(jnp.isclose(jnp.asarray(a), jnp.asarray(b), rtol=0.2, atol=0.0),
                 np.isclose(a, b, rtol=0.2, atol=0.0))


def test_allclose_and_array_equal_return_bool_scalars():
    x = jnp.asarray(np.float32([1, 2, 3]))
    result = jnp.allclose(x, x + 1e-7)
    assert isinstance(result, meshsim.Array) and result.dtype == np.bool_ and result.shape == ()
    assert bool(result) and not bool(jnp.allclose(x, x + 1))
    assert bool(jnp.array_equal(x, np.float32([1, 2, 3])))
    assert not bool(jnp.array_equal(x, x[:2]))
    nan = jnp.asarray(np.float32([np.nan, 1]))
    assert not bool(jnp.array_equal(nan, nan)) and bool(jnp.array_equal(nan, nan, equal_nan=True))
    assert bool(jnp.array_equiv(x, jnp.asarray(np.float32([[1, 2, 3], [1, 2, 3]]))))
    assert not bool(jnp.array_equiv(x, x[:2]))


def test_operators_on_arrays():
    a, b = np.int32([5, -3, 8]), np.int32([2, 2, -3])
    x, y = jnp.asarray(a), jnp.asarray(b)
    assert_close(x + y, a + b)
    assert_close(x - 1, a - 1)
    assert_close(2 * x, 2 * a)
    assert_close(x / y, a / b, rtol=1e-7)
    assert_close(x // y, a // b)
    assert_close(x % y, a % b)
    assert_close(x ** 2, a ** 2)
    assert_close(-x, -a)
    assert_close(abs(x), abs(a))
    assert_close(~x, ~a)
    assert_close(x & y, a & b)
    assert_close(x | y, a | b)
    assert_close(x ^ y, a ^ b)
    assert_close(x << 2, a << 2)
    assert_close(x >> 1, a >> 1)
    assert_close(x < y, a < b)
    assert_close(x == y, a == b)
    assert_close(x != 5, a != 5)


# --- dtype promotion and weak types vs JAX ----------------------------------------------

@pytest.mark.parametrize(("x", "y", "dtype", "weak"), [
    (np.int32, 2.5, np.float32, True), (np.float32, 2, np.float32, False),
    (np.int8, 3, np.int8, False), (np.uint8, 300, np.uint8, False), (np.bool_, 2, np.int32, True),
    (np.int8, np.int16, np.int16, False), (np.uint8, np.int8, np.int16, False),
    (np.uint32, np.int32, np.int32, False), (np.int32, np.float32, np.float32, False),
    (np.bool_, np.int8, np.int8, False), (np.bool_, 1.5, np.float32, True),
])
def test_weak_type_promotion(x, y, dtype, weak):
    xv = jnp.asarray(np.ones(3, x))
    yv = y if isinstance(y, (int, float)) else jnp.asarray(np.ones(3, y))
    for out in [xv + yv, yv + xv, jnp.add(xv, yv)]:
        assert out.dtype == dtype and out.weak_type == weak


def test_python_scalars_alone_stay_weak():
    assert jnp.add(2, 3).weak_type and jnp.add(2, 3).dtype == np.int32
    assert jnp.sin(2).dtype == np.float32 and jnp.sin(2).weak_type
    assert jnp.multiply(2.0, 3).weak_type
    assert not jnp.add(True, True).weak_type  # Python bools are not weak in JAX


UNARY_NAMES = ["negative", "positive", "abs", "sign", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
               "sqrt", "cbrt", "square", "reciprocal", "tanh", "sin", "cos", "tan", "arcsin", "arccos",
               "arctan", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg", "floor",
               "ceil", "rint", "trunc", "round", "logical_not", "bitwise_not", "isnan", "isinf",
               "isfinite", "signbit", "sinc", "nan_to_num", "bitwise_count"]
BINARY_NAMES = ["add", "subtract", "multiply", "divide", "floor_divide", "mod", "fmod", "power",
                "float_power", "maximum", "minimum", "fmax", "fmin", "arctan2", "equal", "not_equal",
                "less", "less_equal", "greater", "greater_equal", "bitwise_and", "bitwise_or",
                "bitwise_xor", "left_shift", "right_shift", "copysign", "logaddexp", "nextafter"]

def _compare_with_jax(real_jax, name, ms_call, jax_call, check_weak=True):
    """Same error type, or same dtype, weak type, shape and values."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = jax_call()
        except (TypeError, ValueError) as e:
            with pytest.raises(type(e)):
                ms_call()
            return
    out = ms_call()
    expected_np = np.asarray(expected)
    assert out.dtype == expected_np.dtype, name
    if check_weak:
        assert out.weak_type == expected.weak_type, name
    assert_close(out, expected_np, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", UNARY_NAMES)
def test_unary_dtypes_and_values_match_jax(real_jax, name):
    rng = np.random.default_rng(6)
    for dtype in [np.float32, np.int32, np.uint8, np.bool_]:
        x = sample(rng, dtype, (2, 3), -3, 4)
        _compare_with_jax(real_jax, f"{name}({np.dtype(dtype)})", lambda: getattr(jnp, name)(jnp.asarray(x)),
                          lambda: getattr(real_jax.numpy, name)(x))
    for scalar in [3, 0.5]:
        _compare_with_jax(real_jax, f"{name}({scalar!r})", lambda: getattr(jnp, name)(scalar),
                          lambda: getattr(real_jax.numpy, name)(scalar))


# Pairs that cover each promotion rule once (same type, signed/unsigned mix,
# int width mix, int/float, bool with others), and Python scalars.
DTYPE_PAIRS = [(np.float32, np.float32), (np.uint32, np.int32), (np.int8, np.bool_), (np.bool_, np.bool_),
               (np.int32, np.float32)]
SCALAR_CASES = [(np.float32, 2), (np.int32, 1.5), (np.bool_, 2)]


@pytest.mark.parametrize("name", BINARY_NAMES)
def test_binary_dtypes_and_values_match_jax(real_jax, name):
    rng = np.random.default_rng(7)
    for d1, d2 in DTYPE_PAIRS:
        if name in ("divide", "floor_divide", "mod", "fmod") and np.bool_ in (d1, d2):
            continue  # XLA folds bool 0/0 to 0 under broadcasting; NaN is right
        x, y = sample(rng, d1, (2, 3), 1, 5), sample(rng, d2, (3,), 1, 5)
        _compare_with_jax(real_jax, f"{name}({np.dtype(d1)}, {np.dtype(d2)})",
                          lambda: getattr(jnp, name)(jnp.asarray(x), jnp.asarray(y)),
                          lambda: getattr(real_jax.numpy, name)(x, y))
    for dtype, scalar in SCALAR_CASES:
        x = sample(rng, dtype, (3,), 1, 5)
        _compare_with_jax(real_jax, f"{name}({np.dtype(dtype)}, {scalar!r})",
                          lambda: getattr(jnp, name)(jnp.asarray(x), scalar),
                          lambda: getattr(real_jax.numpy, name)(x, scalar))
        _compare_with_jax(real_jax, f"{name}({scalar!r}, {np.dtype(dtype)})",
                          lambda: getattr(jnp, name)(scalar, jnp.asarray(x)),
                          lambda: getattr(real_jax.numpy, name)(scalar, x))


# --- lax: strict operands, XLA semantics, errors -------------------------------------------

def test_lax_requires_equal_dtypes_and_compatible_shapes():
    f32 = jnp.asarray(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="lax.add requires arguments to have the same dtypes, got float32, int32"):
        lax.add(f32, jnp.asarray(np.ones((2, 3), np.int32)))
    with pytest.raises(TypeError, match="same dtypes, got float32, int32"):
        lax.mul(f32, 2)  # a Python int is a weak int32, as in JAX
    with pytest.raises(TypeError, match="incompatible shapes"):
        lax.add(f32, jnp.asarray(np.ones((3, 2), np.float32)))
    with pytest.raises(TypeError, match="sin does not accept dtype int32"):
        lax.sin(jnp.asarray(np.ones(2, np.int32)))
    with pytest.raises(TypeError, match="add does not accept dtype bool at position 0"):
        lax.add(jnp.asarray(np.ones(2, bool)), jnp.asarray(np.ones(2, bool)))
    with pytest.raises(TypeError, match="and does not accept dtype float32"):
        lax.bitwise_and(f32, f32)
    with pytest.raises(TypeError):
        lax.add(f32, [1.0, 2.0])
    # Rank-0 operands and size-1 dimensions broadcast; Python floats are weak float32.
    assert_close(lax.add(f32, 2.0), np.full((2, 3), 3.0))
    assert_close(lax.add(f32, jnp.asarray(np.float32([[1], [2]]))), [[2] * 3, [3] * 3])
    out = lax.add(2.0, 3.0)
    assert out.weak_type and out.dtype == np.float32
    assert not lax.add(f32, 2.0).weak_type


def test_lax_select_n_and_clamp():
    x, y, z = (jnp.asarray(np.full(4, v, np.float32)) for v in (0, 1, 2))
    assert_close(lax.select(jnp.asarray(np.array([True, False, True, False])), y, x), [1, 0, 1, 0])
    assert_close(lax.select(True, y, x), [1] * 4)
    which = jnp.asarray(np.int32([0, 1, 2, 7]))
    assert_close(lax.select_n(which, x, y, z), [0, 1, 2, 2])  # out of range picks the last case
    assert_close(lax.select_n(jnp.asarray(np.uint8([1, 0, 1, 0])), x, y), [1, 0, 1, 0])
    assert_close(lax.select_n(jnp.asarray(np.int32(1)), x, y), [1] * 4)
    assert_close(lax.select_n(jnp.asarray(np.array([True, False, True, False])), x), [0] * 4)  # one case
    strided = jnp.asarray(_read_only(np.array([True, False] * 4)[::2]))
    assert_close(lax.select(strided, y, x), [1] * 4)
    ints = jnp.asarray(np.int8([1, 2, 3, 4]))
    assert_close(lax.select_n(which, ints, ints * 2, ints * 3), [1, 4, 9, 12])
    with pytest.raises(TypeError, match="must be boolean or integer"):
        lax.select_n(x, x, y)
    with pytest.raises(TypeError, match="boolean `which` cannot have > 2 cases"):
        lax.select_n(jnp.asarray(np.ones(4, bool)), x, y, z)
    with pytest.raises(TypeError, match="same shapes"):
        lax.select_n(True, x, jnp.asarray(np.ones(3, np.float32)))
    with pytest.raises(TypeError, match="same dtypes"):
        lax.select(True, x, ints)
    with pytest.raises(ValueError, match="at least one case"):
        lax.select_n(True)
    r = jnp.asarray(np.float32([-1, 0.5, 3, np.nan]))
    assert_close(lax.clamp(0.0, r, 1.0), [0, 0.5, 1, np.nan])
    assert_close(lax.clamp(jnp.asarray(np.float32([0, 1, 2, 3])), r, 2.5), [0, 1, 2.5, np.nan])
    with pytest.raises(TypeError, match="clamp requires min.shape == operand.shape"):
        lax.clamp(jnp.asarray(np.zeros(3, np.float32)), r, 1.0)
    with pytest.raises(TypeError, match="same dtypes"):
        lax.clamp(0, r, 1.0)


def test_lax_casts():
    x = np.float32([1.7, -1.7, np.nan, np.inf, -np.inf, 3e9, -3e9, 0.5])
    ms = jnp.asarray(x)
    assert_close(lax.convert_element_type(ms, np.int32),
                 [1, -1, 0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 0])  # saturating, NaN -> 0
    assert_close(lax.convert_element_type(ms, np.uint8), [1, 0, 0, 255, 0, 255, 0, 0])
    assert_close(lax.convert_element_type(ms, np.bool_), [True] * 7 + [True])
    assert_close(lax.convert_element_type(jnp.asarray(np.int32([300, -1])), np.uint8), [44, 255])
    assert lax.convert_element_type(2.5, np.int32).dtype == np.int32
    bits = lax.bitcast_convert_type(jnp.asarray(np.float32([1.0, -2.0])), np.int32)
    assert_close(bits, np.float32([1.0, -2.0]).view(np.int32))
    as_bytes = lax.bitcast_convert_type(jnp.asarray(np.float32([1.0])), np.uint8)
    assert as_bytes.shape == (1, 4)
    assert_close(as_bytes, np.float32([1.0]).view(np.uint8).reshape(1, 4))
    assert_close(lax.bitcast_convert_type(as_bytes, np.float32), [1.0])
    with pytest.raises(ValueError, match="3 \\* 8 != 32"):
        lax.bitcast_convert_type(jnp.asarray(np.ones((2, 3), np.uint8)), np.int32)
    with pytest.raises(TypeError, match="does not support bool"):
        lax.bitcast_convert_type(jnp.asarray(np.ones(2, np.int8)), np.bool_)


def test_lax_bit_operations():
    i32 = lambda v: jnp.asarray(np.int32(v))  # noqa: E731
    assert_close(lax.shift_left(i32([1, 1, 1, 3]), i32([31, 32, -1, 2])), [-2**31, 0, 0, 12])
    assert_close(lax.shift_right_logical(i32([-8, -8, -8]), i32([1, 32, -1])), [2147483644, 0, 0])
    assert_close(lax.shift_right_arithmetic(i32([-8, -8, 8]), i32([1, 32, 40])), [-4, -1, 0])
    u32 = jnp.asarray(np.uint32([0x80000000]))
    assert_close(lax.shift_right_arithmetic(u32, jnp.asarray(np.uint32([1]))), [0xC0000000])
    assert_close(lax.population_count(jnp.asarray(np.int8([-1, 7, 0]))), [8, 3, 0])
    assert_close(lax.clz(jnp.asarray(np.int8([0, 1, -1]))), [8, 7, 0])
    assert_close(lax.clz(jnp.asarray(np.uint32([0, 1]))), [32, 31])
    assert_close(jnp.bitwise_count(i32([-1, 5, -7])), [1, 2, 3])  # bits of |x|
    with pytest.raises(TypeError, match="population_count does not accept dtype float32"):
        lax.population_count(jnp.asarray(np.float32([1])))


def test_lax_float_semantics():
    nan, inf = np.nan, np.inf
    a = jnp.asarray(np.float32([nan, 1, -0.0, 0.0]))
    b = jnp.asarray(np.float32([1, nan, 0.0, -0.0]))
    assert_close(lax.max(a, b), [nan, nan, 0.0, 0.0])
    assert np.signbit(np.asarray(lax.min(a, b))[2:]).all()  # -0 < +0
    assert_close(lax.sign(jnp.asarray(np.float32([-0.0, 0.0, nan, -3]))), [-0.0, 0.0, nan, -1])
    assert_close(lax.nextafter(jnp.asarray(np.float32([0, 1])), jnp.asarray(np.float32([1, 0]))),
                 np.nextafter(np.float32([0, 1]), np.float32([1, 0])))
    x = np.float32([-30, -1, 0, 1, 30])
    assert_close(lax.logistic(jnp.asarray(x)), 1 / (1 + np.exp(-x.astype(np.float64))), rtol=2e-6)
    assert_close(lax.rsqrt(jnp.asarray(np.float32([4, 0.25]))), [0.5, 2])
    assert_close(lax.erf(jnp.asarray(x / 10)), [math.erf(v / 10) for v in x], rtol=2e-6)
    assert_close(lax.is_finite(jnp.asarray(np.float32([1, inf, nan]))), [True, False, False])
    assert_close(lax.pow(jnp.asarray(np.float32([2])), jnp.asarray(np.int32([-3]))), [0.125])
    assert_close(lax.reciprocal(jnp.asarray(np.float32([4]))), [0.25])


def test_erf_inv_is_bit_exact_with_jax(real_jax):
    rng = np.random.default_rng(8)
    near_one = (1 - rng.uniform(0, 1e-3, 20_000)).astype(np.float32)
    x = np.concatenate([rng.uniform(-1, 1, 200_000).astype(np.float32), near_one, -near_one,
                        np.float32([-1, 1, 0, -0.0, 0.99999994, -0.99999994, 1e-30, 2, np.nan])])
    ours = np.asarray(lax.erf_inv(jnp.asarray(x)))
    theirs = np.asarray(real_jax.lax.erf_inv(x))
    same = (ours.view(np.int32) == theirs.view(np.int32)) | (np.isnan(ours) & np.isnan(theirs))
    assert same.all(), x[~same][:5]


def test_erf_inv_float64_inverts_erf(x64):
    y = np.linspace(-0.999, 0.999, 101)
    out = lax.erf_inv(jnp.asarray(y))
    assert out.dtype == np.float64
    np.testing.assert_allclose([math.erf(v) for v in np.asarray(out)], y, rtol=1e-14, atol=1e-15)


# --- kernels: strided and broadcast operands --------------------------------------------

def _read_only(a):
    a.flags.writeable = False  # meshsim then wraps the NumPy memory as is (a strided view)
    return a


def test_kernels_on_strided_and_broadcast_views():
    rng = np.random.default_rng(9)
    base = rng.normal(size=(6, 8)).astype(np.float32)
    views = [base[::2, 1::3], base.T, base[:, ::-1], base[2:3]]
    for v in views:
        v = _read_only(v)
        ms = jnp.asarray(v)
        assert_close(jnp.exp(ms), np.exp(v.astype(np.float64)), rtol=2e-6)
        assert_close(ms * 2.0, v * 2)
        assert_close(ms + ms, v + v)
        assert_close(jnp.maximum(ms, jnp.asarray(np.float32(0))), np.maximum(v, 0))
        assert_close(lax.convert_element_type(ms, np.int32), v.astype(np.int32))
        row = _read_only(rng.normal(size=v.shape[-1:]).astype(np.float32))
        assert_close(ms - row, v - row)
        assert_close(jnp.where(ms > 0, ms, row), np.where(v > 0, v, row))
    big = rng.normal(size=(64, 33)).astype(np.float32)
    col = rng.normal(size=(64, 1)).astype(np.float32)
    assert_close(jnp.asarray(big) * jnp.asarray(col), big * col)
    assert_close(jnp.asarray(col) / jnp.asarray(big), col / big, rtol=1e-7)


def test_elementwise_ops_trace_under_jit():
    f = meshsim.jit(lambda x, y: jnp.where(x > y, jnp.sin(x) * 2, jnp.floor_divide(x, 1.5) + y))
    x = np.float32([0.5, -2, 3, 4])
    y = np.float32([1, -3, 5, 0])
    expected = np.where(x > y, np.sin(x.astype(np.float64)) * 2, np.floor_divide(x, 1.5) + y)
    assert_close(f(jnp.asarray(x), jnp.asarray(y)), expected, rtol=2e-6)
    jaxpr = str(meshsim.make_jaxpr(lambda x: lax.select(x > 0.0, x, lax.neg(x)))(jnp.asarray(x)))
    assert "select_n" in jaxpr and "neg" in jaxpr and "gt" in jaxpr


# --- a scalar operand of a binary operation ---------------------------------------

@pytest.mark.parametrize("seed", range(3))
def test_scalar_operands_broadcast_without_copies_and_differentiate(real_jax, seed):
    """lax binary operations take a rank-0 operand next to an array (as JAX's do);
    values and both operands' gradients match JAX, eagerly and under jit."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in rng.integers(1, 5, int(rng.integers(1, 4))))
    x = rng.standard_normal(shape).astype(np.float32)
    s = np.float32(rng.standard_normal())

    def f(jax, x, s):
        L = jax.lax
        return (L.mul(x, s) + L.sub(s, x) + L.max(x, s) - L.min(s, x) + L.div(x, s + 3.0)
                + L.atan2(s, x + 2.0)).sum() + L.lt(x, s).sum()

    jax = meshsim
    for fn in (lambda jax: jax.jit(jax.value_and_grad(lambda x, s: f(jax, x, s), argnums=(0, 1))),
               lambda jax: jax.value_and_grad(lambda x, s: f(jax, x, s), argnums=(0, 1))):
        (v, (gx, gs)), (jv, (jgx, jgs)) = fn(jax)(x, s), fn(real_jax)(x, s)
        np.testing.assert_allclose(v, jv, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gx, jgx, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gs, jgs, rtol=1e-5, atol=1e-5)
        assert np.shape(gs) == () and np.shape(gx) == shape
    with pytest.raises(TypeError, match=r"mul got incompatible shapes for broadcasting: \(3,\), \(2,\)"):
        lax.mul(jnp.ones(3), jnp.ones(2))

"""Reductions, statistics, arg-reductions and cumulative ops: lax primitives and
meshsim.numpy, against NumPy (values) and JAX (dtypes, weak types, errors)."""
import itertools
import warnings

import numpy as np
import pytest

import meshsim as jax
import meshsim.numpy as jnp
from meshsim import lax

RNG = np.random.default_rng(20240601)

SHAPES = [(), (0,), (1,), (7,), (3, 4), (2, 0, 3), (1, 5, 1), (4, 3, 5), (2, 3, 1, 4)]
DTYPES = [np.float32, np.int32, np.int8, np.uint8, np.bool_]


def _random(shape, dtype):
    if dtype == np.bool_:
        return RNG.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        lo = 0 if np.issubdtype(dtype, np.unsignedinteger) else -5
        return RNG.integers(lo, 6, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _axis_forms(ndim):
    """None, every single axis (positive and negative) and every tuple of axes."""
    forms = [None]
    for d in range(ndim):
        forms += [d, d - ndim]
    for r in range(2, ndim + 1):
        forms += list(itertools.combinations(range(ndim), r))
    if ndim >= 2:
        forms.append((-1, 0))
    return forms


def _np(x):
    return np.asarray(x)


def _close(got, want, rtol=1e-5, atol=1e-5):
    got = _np(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol)


# --- sums, products, extrema, logical reductions vs NumPy --------------------------

@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_reductions_match_numpy(shape, dtype):
    x = _random(shape, dtype)
    for axis in _axis_forms(len(shape)):
        for keepdims in (False, True):
            kw = dict(axis=axis, keepdims=keepdims)
            ref64 = x.astype(np.float64)
            _close(jnp.sum(x, **kw), ref64.sum(**kw).astype(jnp.sum(x).dtype), rtol=1e-5)
            _close(jnp.all(x, **kw), np.all(x, **kw))
            _close(jnp.any(x, **kw), np.any(x, **kw))
            _close(jnp.count_nonzero(x, **kw), np.count_nonzero(x, **kw))
            if x.size and dtype != np.bool_:
                _close(jnp.mean(x, **kw), ref64.mean(**kw), rtol=1e-5)
            if dtype != np.bool_ and dtype != np.uint8:
                # Integer products wrap around (as in JAX): int64 wraps modulo 2**64 and
                # the cast keeps the low bits, where a float64 product would not.
                prod = np.prod(x.astype(np.int64) if np.issubdtype(dtype, np.integer) else ref64, **kw)
                _close(jnp.prod(x, **kw), prod.astype(jnp.prod(x).dtype), rtol=1e-4)
            empty_axis = any(shape[a] == 0 for a in np.atleast_1d(range(len(shape)) if axis is None else axis))
            if not empty_axis:
                _close(jnp.max(x, **kw), np.max(x, **kw))
                _close(jnp.min(x, **kw), np.min(x, **kw))
                _close(jnp.amax(x, **kw), np.amax(x, **kw))
                if dtype != np.bool_:
                    _close(jnp.ptp(x, **kw), np.ptp(x, **kw))


@pytest.mark.parametrize("shape", [(5,), (3, 4), (4, 1, 6), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("ddof", [0, 1])
def test_var_std_match_numpy(shape, ddof):
    x = _random(shape, np.float32)
    for axis in _axis_forms(len(shape)):
        for keepdims in (False, True):
            kw = dict(axis=axis, keepdims=keepdims, ddof=ddof)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                _close(jnp.var(x, **kw), np.var(x.astype(np.float64), **kw), rtol=1e-4)
                _close(jnp.std(x, **kw), np.std(x.astype(np.float64), **kw), rtol=1e-4)
    assert np.isnan(_np(jnp.var(np.ones(3, np.float32), ddof=3)))


def test_method_forms_delegate():
    x = jnp.asarray(_random((3, 4), np.float32))
    xn = _np(x)
    _close(x.sum(axis=0), xn.sum(axis=0))
    _close(x.mean(1, keepdims=True), xn.mean(1, keepdims=True))
    _close(x.max(), xn.max())
    _close(x.min(axis=-1), xn.min(axis=-1))
    _close(x.prod(0), xn.prod(0), rtol=1e-4)
    _close(x.argmax(), xn.argmax())
    _close(x.argmin(axis=0), xn.argmin(axis=0))
    _close(x.var(ddof=1), xn.var(ddof=1), rtol=1e-4)
    _close(x.std(), xn.std(), rtol=1e-4)
    _close(x.cumsum(1), xn.cumsum(1))
    assert bool(x.any()) and not bool((x > 100).all())


# --- accuracy and layouts of the kernels -----------------------------------------

@pytest.mark.parametrize("shape,axis", [((1_000_003,), 0), ((3001, 257), 0), ((257, 3001), 1),
                                        ((100_000, 7), 1), ((7, 40_000), 0), ((40, 50, 60), (0, 2))])
def test_float32_sum_accumulates_accurately(shape, axis):
    x = RNG.random(shape, dtype=np.float32)
    exact = x.astype(np.float64).sum(axis=axis)
    got = _np(jnp.sum(x, axis=axis)).astype(np.float64)
    assert np.max(np.abs(got - exact) / np.abs(exact)) < 1e-6


def test_strided_and_broadcast_operands():
    base = RNG.standard_normal((20, 30)).astype(np.float32)
    views = {"transposed": jnp.transpose(jnp.asarray(base)),
             "broadcast": jnp.broadcast_to(jnp.asarray(base[:, None, :]), (20, 4, 30)),
             "reversed": jnp.flip(jnp.asarray(base), 1)}
    for name, v in views.items():
        ref = _np(v).astype(np.float64)
        for axis in _axis_forms(v.ndim):
            _close(jnp.sum(v, axis=axis), ref.sum(axis=axis), rtol=1e-5, atol=1e-4)
            _close(jnp.max(v, axis=axis), ref.max(axis=axis))
            _close(jnp.argmin(v, axis=axis if isinstance(axis, int) else None),
                   ref.argmin(axis=axis if isinstance(axis, int) else None))


def test_nan_propagates_through_max_min_and_first_nan_wins_argmax():
    x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 0.0, -1.0, 5.0]], np.float32)
    np.testing.assert_array_equal(_np(jnp.max(x, axis=1)), [np.nan, 5.0])
    np.testing.assert_array_equal(_np(jnp.min(x, axis=1)), [np.nan, -1.0])
    np.testing.assert_array_equal(_np(jnp.max(x, axis=0)), np.max(x, axis=0))
    np.testing.assert_array_equal(_np(jnp.argmax(x, axis=1)), [1, 3])
    np.testing.assert_array_equal(_np(jnp.argmin(x, axis=1)), [1, 2])
    np.testing.assert_array_equal(_np(jnp.argmax(x, axis=0)), np.argmax(x, axis=0))
    long = RNG.standard_normal(10_000).astype(np.float32)
    long[7777] = np.nan
    assert np.isnan(_np(jnp.max(long))) and np.isnan(_np(jnp.min(long)))
    assert int(jnp.argmax(long)) == 7777


# --- argmax / argmin -----------------------------------------------------------

@pytest.mark.parametrize("shape", [(1,), (7,), (3, 4), (1, 5, 1), (4, 3, 5)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_argmax_argmin_match_numpy(shape, dtype):
    x = _random(shape, dtype)
    for axis in [None] + list(range(-len(shape), len(shape))):
        for keepdims in (False, True):
            for name in ("argmax", "argmin"):
                got = getattr(jnp, name)(x, axis=axis, keepdims=keepdims)
                assert got.dtype == np.int32
                np.testing.assert_array_equal(_np(got), getattr(np, name)(x, axis=axis, keepdims=keepdims))


def test_lax_argmax_index_dtypes():
    x = _random((4, 6), np.float32)
    for index_dtype in (np.int32, np.int8, np.uint16):
        got = lax.argmax(x, 1, index_dtype)
        assert got.dtype == index_dtype
        np.testing.assert_array_equal(_np(got), x.argmax(1))
    np.testing.assert_array_equal(_np(lax.argmin(x, 0, np.int32)), x.argmin(0))


# --- cumulative ------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), (0,), (1,), (9,), (3, 4), (2, 0, 3), (3, 1, 5)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8, np.bool_], ids=lambda d: np.dtype(d).name)
def test_cumsum_cumprod_match_numpy(shape, dtype):
    x = _random(shape, dtype)
    for axis in [None] + list(range(-len(shape), len(shape))):
        for name in ("cumsum", "cumprod"):
            got = getattr(jnp, name)(x, axis=axis)
            want = getattr(np, name)(x.astype(np.float64), axis=axis)
            _close(got, want.astype(got.dtype), rtol=1e-4)


def test_lax_cumulative_reverse():
    x = _random((4, 5), np.float32)
    for axis in (0, 1):
        flip = lambda a: np.flip(a, axis)  # noqa: E731
        _close(lax.cumsum(x, axis, reverse=True), flip(np.cumsum(flip(x), axis)))
        _close(lax.cumprod(x, axis, reverse=True), flip(np.cumprod(flip(x), axis)), rtol=1e-4)
        _close(lax.cummax(x, axis, reverse=True), flip(np.maximum.accumulate(flip(x), axis)))
        _close(lax.cummin(x, axis), np.minimum.accumulate(x, axis))
    y = np.array([1, 3, np.nan, 2], np.float32)
    np.testing.assert_array_equal(_np(lax.cummax(y)), [1, 3, np.nan, np.nan])


# --- where, initial, dtype -------------------------------------------------------

def test_where_and_initial():
    x = _random((3, 4), np.float32)
    mask = RNG.random((3, 4)) > 0.3
    _close(jnp.sum(x, axis=1, where=mask), np.sum(x, axis=1, where=mask))
    _close(jnp.prod(x, where=mask), np.prod(x, where=mask), rtol=1e-4)
    _close(jnp.max(x, axis=0, where=mask, initial=-10.0), np.max(x, axis=0, where=mask, initial=-10.0))
    _close(jnp.min(x, initial=-100.0), np.min(x, initial=-100.0))
    _close(jnp.sum(x, initial=2.5), np.sum(x, initial=2.5))
    _close(jnp.mean(x, axis=0, where=mask), np.mean(x, axis=0, where=mask))
    _close(jnp.var(x, axis=1, where=mask), np.var(x.astype(np.float64), axis=1, where=mask), rtol=1e-4)
    _close(jnp.all(x > 0, where=mask), np.all(x > 0, where=mask))
    _close(jnp.max(np.zeros((0, 3), np.float32), axis=0, initial=-1.0), [-1.0, -1.0, -1.0])
    _close(jnp.max(np.zeros((0, 3), np.int32), axis=1), np.zeros((0,)))


def test_explicit_dtype():
    x = _random((3, 4), np.int8)
    assert jnp.sum(x, dtype=np.int8).dtype == np.int8
    assert jnp.sum(x, dtype=np.float32).dtype == np.float32
    assert jnp.sum(x, promote_integers=False).dtype == np.int8
    assert jnp.mean(x, dtype=np.int32).dtype == np.int32
    assert jnp.cumsum(x, dtype=np.float32).dtype == np.float32
    got = jnp.cumsum(np.array([0, -1, 1, 0], np.int32), dtype=bool)
    np.testing.assert_array_equal(_np(got), [False, True, True, True])


def test_empty_reductions_give_the_identity():
    e = np.zeros((2, 0), np.float32)
    np.testing.assert_array_equal(_np(jnp.sum(e, axis=1)), [0, 0])
    np.testing.assert_array_equal(_np(jnp.prod(e, axis=1)), [1, 1])
    np.testing.assert_array_equal(_np(jnp.all(e, axis=1)), [True, True])
    np.testing.assert_array_equal(_np(jnp.any(e, axis=1)), [False, False])
    np.testing.assert_array_equal(_np(lax.reduce_max(e, (1,))), [-np.inf, -np.inf])
    np.testing.assert_array_equal(_np(lax.reduce_min(e, (1,))), [np.inf, np.inf])
    np.testing.assert_array_equal(_np(lax.reduce_max(np.zeros((0,), np.int8), (0,))), -128)
    np.testing.assert_array_equal(_np(lax.reduce_and(np.zeros((0,), np.uint8), (0,))), 255)
    assert np.isnan(_np(jnp.mean(e)))



@pytest.mark.parametrize("seed", range(6))
def test_empty_sums_over_long_dims_give_the_identity(real_jax, seed):
    """A reduced dim longer than 32 is folded in windows of 32 (XLA's tree
    reduction) and an empty one has no windows: sums and products of such
    arrays (float32, float64 and bfloat16) still give the identity, as JAX's do."""
    rng = np.random.default_rng(seed)
    ndim = int(rng.integers(2, 4))
    shape = [int(rng.integers(1, 5)) for _ in range(ndim)]
    long_dim, empty_dim = rng.choice(ndim, size=2, replace=False)
    shape[long_dim] = int(rng.integers(33, 100))
    shape[empty_dim] = 0
    axes = {int(long_dim), int(empty_dim)} | {d for d in range(ndim) if rng.random() < 0.5}
    axes = tuple(sorted(axes))
    for dtype in (np.float32, np.float64, jnp.bfloat16):
        x = np.zeros(shape, dtype)
        for name in ("sum", "prod"):
            want = np.asarray(getattr(real_jax.numpy, name)(x, axis=axes))
            got = np.asarray(getattr(jnp, name)(x, axis=axes))
            assert got.dtype == want.dtype and got.shape == want.shape, (name, shape, axes)
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {shape} {axes} {dtype}")

def test_lax_bitwise_reductions():
    x = RNG.integers(-100, 100, size=(5, 6)).astype(np.int32)
    for axis in (0, 1):
        np.testing.assert_array_equal(_np(lax.reduce_and(x, (axis,))), np.bitwise_and.reduce(x, axis))
        np.testing.assert_array_equal(_np(lax.reduce_or(x, (axis,))), np.bitwise_or.reduce(x, axis))
        np.testing.assert_array_equal(_np(lax.reduce_xor(x, (axis,))), np.bitwise_xor.reduce(x, axis))
    b = x > 0
    np.testing.assert_array_equal(_np(lax.reduce_xor(b, (1,))), np.logical_xor.reduce(b, 1))
    assert lax.reduce_max(b, (0,)).dtype == np.bool_


# --- NaN-ignoring variants and statistics ----------------------------------------

def test_nan_functions_match_numpy():
    x = _random((4, 5), np.float32)
    x[RNG.random((4, 5)) > 0.6] = np.nan
    x[2] = np.nan  # an all-NaN row
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for axis in (None, 0, 1):
            for name in ("nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd"):
                got, want = getattr(jnp, name)(x, axis=axis), getattr(np, name)(x.astype(np.float64), axis=axis)
                _close(got, want, rtol=1e-4)
            _close(jnp.nancumsum(x, axis=axis), np.nancumsum(x, axis=axis), rtol=1e-5)
            _close(jnp.nancumprod(x, axis=axis), np.nancumprod(x, axis=axis), rtol=1e-4)
        np.testing.assert_array_equal(_np(jnp.nanargmax(x, axis=1)), [*np.nanargmax(x[:2], 1), -1,
                                                                     *np.nanargmax(x[3:], 1)])
        np.testing.assert_array_equal(_np(jnp.nanargmin(x, axis=0)),
                                      np.where(np.isnan(x).all(0), -1, np.nanargmin(np.where(np.isnan(x), np.inf, x), 0)))
    i = _random((3, 4), np.int32)
    _close(jnp.nansum(i), i.sum())
    _close(jnp.nanmax(i, axis=0), i.max(0))


@pytest.mark.parametrize("shape", [(5,), (4, 6), (3, 1, 4)], ids=str)
def test_median_and_average(shape):
    x = _random(shape, np.float32)
    for axis in _axis_forms(len(shape)):
        for keepdims in (False, True):
            _close(jnp.median(x, axis=axis, keepdims=keepdims), np.median(x, axis=axis, keepdims=keepdims))
            _close(jnp.average(x, axis=axis, keepdims=keepdims), np.average(x, axis=axis, keepdims=keepdims))
    w = RNG.random(shape).astype(np.float32) + 0.1
    _close(jnp.average(x, weights=w), np.average(x, weights=w))
    w1 = RNG.random(shape[-1]).astype(np.float32) + 0.1
    avg, total = jnp.average(x, axis=-1, weights=w1, returned=True)
    want_avg, want_total = np.average(x, axis=-1, weights=w1, returned=True)
    _close(avg, want_avg)
    _close(total, want_total)
    y = x.copy().reshape(-1)
    y[0] = np.nan
    assert np.isnan(_np(jnp.median(y)))
    _close(jnp.median(np.arange(6, dtype=np.int32)), 2.5)


# --- dtypes and weak types vs JAX --------------------------------------------------

FUNCTIONS = ["sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin", "cumsum",
             "cumprod", "all", "any", "nansum", "nanmean", "nanmax", "median", "average",
             "count_nonzero"]


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int16, np.uint32, np.int32, np.float32],
                         ids=lambda d: np.dtype(d).name)
def test_result_dtypes_match_jax(real_jax, dtype):
    rjnp = real_jax.numpy
    x = _random((2, 3), dtype)
    for name in FUNCTIONS:
        want = getattr(rjnp, name)(x)
        got = getattr(jnp, name)(x)
        assert got.dtype == want.dtype, name
        assert got.shape == want.shape, name


@pytest.mark.parametrize("value", [2.0, 3, True])
def test_python_scalar_results_are_strong_like_jax(real_jax, value):
    rjnp = real_jax.numpy
    for name in ("sum", "max", "mean", "cumsum", "argmax", "prod", "var"):
        want = real_jax.typeof(getattr(rjnp, name)(value))
        got = jax.typeof(getattr(jnp, name)(value))
        assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, want.weak_type), name


def test_lax_result_types_match_jax(real_jax):
    rlax = real_jax.lax
    x = _random((3, 4), np.int8)
    for name in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "reduce_xor"):
        want = getattr(rlax, name)(x, (1,))
        got = getattr(lax, name)(x, (1,))
        assert (got.dtype, got.shape) == (want.dtype, want.shape)
    want = rlax.reduce_sum(2.0, ())
    got = lax.reduce_sum(2.0, ())
    assert jax.typeof(got).weak_type == real_jax.typeof(want).weak_type


# --- errors ------------------------------------------------------------------------

def test_axis_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        jnp.sum(x, axis=2)
    with pytest.raises(ValueError, match="axis -3 is out of bounds"):
        jnp.max(x, axis=-3)
    with pytest.raises(ValueError, match="duplicate value in 'axis'"):
        jnp.sum(x, axis=(0, -2))
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        jnp.cumsum(x, axis=2)
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        jnp.argmax(x, axis=2)
    with pytest.raises(ValueError, match=r"reduction axes \(2,\) contains out-of-bounds"):
        lax.reduce_sum(x, (2,))
    with pytest.raises(ValueError, match="duplicate value in 'axes'"):
        lax.reduce_sum(x, (0, 0))
    with pytest.raises(ValueError, match="Invalid axis 2"):
        lax.argmax(x, 2, np.int32)
    with pytest.raises(ValueError, match="negative axes"):
        lax.cumsum(x, -1)


def test_empty_and_dtype_errors():
    e = np.zeros((0, 3), np.float32)
    with pytest.raises(ValueError, match="zero-size array to reduction operation max which has no identity"):
        jnp.max(e, axis=0)
    with pytest.raises(ValueError, match="zero-size array to reduction operation min"):
        jnp.min(e)
    with pytest.raises(ValueError, match="attempt to get argmax of an empty sequence"):
        jnp.argmax(e, axis=0)
    with pytest.raises(ValueError, match="argmin and argmax require non-empty reduced dimension"):
        lax.argmin(e, 0, np.int32)
    with pytest.raises(ValueError, match="to use a where mask one has to specify 'initial'"):
        jnp.max(np.ones(3, np.float32), where=np.array([True, False, True]))
    with pytest.raises(ValueError, match="where must be None or a boolean array"):
        jnp.sum(np.ones(3, np.float32), where=np.ones(3, np.int32))
    with pytest.raises(TypeError, match="reduce_sum does not accept dtype bool"):
        lax.reduce_sum(np.ones(3, bool), (0,))
    with pytest.raises(TypeError, match="logical reduction requires operand dtype bool or int"):
        lax.reduce_and(np.ones(3, np.float32), (0,))
    with pytest.raises(TypeError, match="cummax does not accept dtype bool"):
        lax.cummax(np.ones(3, bool))
    with pytest.raises(TypeError, match="index_dtype must be an integer type"):
        lax.argmax(np.ones(3, np.float32), 0, np.float32)
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        jnp.sum([1, 2, 3])
    with pytest.raises(NotImplementedError, match="'out' argument"):
        jnp.sum(np.ones(3), out=np.ones(()))
    with pytest.raises(ValueError, match="ddof and correction can't be provided simultaneously"):
        jnp.var(np.ones(3), ddof=1, correction=1)


# --- under jit ----------------------------------------------------------------------

def test_reductions_trace_under_jit():
    x = _random((4, 5), np.float32)

    @jax.jit
    def stats(a):
        return jnp.sum(a, axis=0), jnp.mean(a, axis=1, keepdims=True), jnp.argmax(a, axis=1), jnp.cumsum(a, 0)

    s, m, am, cs = stats(x)
    _close(s, x.sum(0))
    _close(m, x.mean(1, keepdims=True))
    np.testing.assert_array_equal(_np(am), x.argmax(1))
    _close(cs, x.cumsum(0))
    jaxpr = str(jax.make_jaxpr(lambda a: jnp.sum(a, axis=1))(x))
    assert "reduce_sum" in jaxpr and "axes=(1,)" in jaxpr

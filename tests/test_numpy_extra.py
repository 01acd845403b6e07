"""The further meshsim.numpy functions (differences, index helpers, inserting and
deleting, quantiles, covariance, set operations, polynomials, binning, bit packing,
frexp/ldexp, ...) against jax.numpy on random inputs: values, dtypes, weak types,
shapes, behaviour under jit where JAX allows it, and errors for bad arguments."""
import numpy as np
import pytest

import meshsim
import meshsim.numpy as jnp

F32, I32 = np.float32, np.int32


@pytest.fixture(scope="module")
def J(real_jax):
    import jax.numpy
    return jax.numpy


def assert_same(ours, theirs, rtol=1e-5, atol=1e-6):
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            assert_same(o, t, rtol, atol)
        return
    assert tuple(ours.shape) == tuple(theirs.shape), (ours.shape, theirs.shape)
    assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    assert getattr(ours, "weak_type", False) == getattr(theirs, "weak_type", False)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=rtol, atol=atol, equal_nan=True)


def _cases(rng):
    """name -> (args, kwargs) on fresh random inputs."""
    a = rng.normal(size=(3, 4, 5)).astype(F32)
    m = rng.normal(size=(4, 6)).astype(F32)
    v = rng.normal(size=5).astype(F32)
    i = rng.integers(-5, 6, size=(3, 4)).astype(I32)
    nan = a.copy()
    nan[0, 1, 2] = nan[2, 0, 0] = np.nan
    q = F32([0.0, 0.25, 0.5, 0.9, 1.0])
    return [
        ("diff", (a,), {}), ("diff", (a, 2, 1), {}), ("diff", (i,), dict(prepend=0, append=i[:, :1])),
        ("diff", (i > 0,), {}), ("ediff1d", (i,), dict(to_begin=F32(-1), to_end=I32([7, 8]))),
        ("trapezoid", (a,), {}), ("trapezoid", (a,), dict(dx=0.5, axis=0)),
        ("trapezoid", (m,), dict(x=np.sort(rng.normal(size=6)).astype(F32))),
        ("cumulative_sum", (i,), dict(axis=1, include_initial=True)),
        ("cumulative_prod", (v,), dict(include_initial=True)),
        ("cumulative_sum", (i > 0,), dict(axis=0)),
        ("logspace", (0.5, 2.0, 7), {}), ("logspace", (F32(1), F32(3), 4), dict(base=2.0, endpoint=False)),
        ("geomspace", (1.0, 1000.0, 4), {}), ("geomspace", (F32([-1, 2]), F32([-100, 50]), 5), dict(axis=1)),
        ("vander", (v,), {}), ("vander", (i[0],), dict(N=3, increasing=True)),
        ("tril_indices", (4,), dict(k=-1, m=5)), ("triu_indices", (3, 1), {}),
        ("tril_indices_from", (m,), {}), ("triu_indices_from", (m,), dict(k=2)),
        ("diag_indices", (3, 3), {}), ("diag_indices_from", (np.ones((4, 4)),), {}),
        ("diagflat", (m[:2, :2],), dict(k=-1)), ("ix_", (I32([0, 2]), I32([1, 3, 0])), {}),
        ("append", (a, a[:1]), dict(axis=0)), ("append", (i, 7), {}),
        ("insert", (m, I32([1, 3, 3]), F32(9)), dict(axis=1)), ("insert", (m, 2, v[:4]), dict(axis=1)),
        ("insert", (i, slice(0, 4, 2), 5), {}), ("delete", (m, I32([0, 2]), 1), {}),
        ("delete", (m, slice(1, 3)), dict(axis=0)), ("delete", (i, 3), {}),
        ("delete", (m, I32([1, 3])), dict(axis=1, assume_unique_indices=True)),
        ("rollaxis", (a, 2), {}), ("rollaxis", (a, 0, 3), {}), ("resize", (m, (5, 7)), {}),
        ("trim_zeros", (I32([0, 0, 3, 0, 1, 0]),), {}), ("trim_zeros", (I32([0, 0, 3, 0, 1, 0]),), dict(trim="b")),
        ("quantile", (a, q), {}), ("quantile", (a, F32(0.3)), dict(axis=1, method="lower")),
        ("quantile", (nan, q), dict(axis=(0, 2), keepdims=True, method="midpoint")),
        ("quantile", (i, 0.75), dict(axis=0, method="nearest")),
        ("nanquantile", (nan, q), dict(axis=2, method="higher")), ("percentile", (a, F32([10, 50, 95])), dict(axis=0)),
        ("nanpercentile", (nan, 30.0), dict(axis=1, keepdims=True)), ("nanmedian", (nan,), dict(axis=0)),
        ("nanmedian", (nan,), {}),
        ("cov", (m,), {}), ("cov", (m, m[:2]), {}), ("cov", (m.T, m[:2].T), dict(rowvar=False)), ("cov", (m,), dict(bias=True)),
        ("cov", (m,), dict(fweights=I32([1, 2, 1, 3, 1, 1]), aweights=np.abs(v[:1].repeat(6)) + F32(0.5))),
        ("cov", (v,), {}), ("corrcoef", (m,), {}), ("corrcoef", (m, m[1:3]), {}),
        ("kron", (m[:2, :3], i[:2]), {}), ("kron", (v, I32([1, 2])), {}),
        ("cross", (a[..., :3], v[:3]), {}), ("cross", (m[:, :2], m[:, 2:4]), {}),
        ("cross", (a[:, :3, :2], a[:, 1:, :2]), dict(axisa=1, axisb=1, axisc=1)),
        ("trace", (a,), {}), ("trace", (a, 1, 1, 2), {}), ("trace", (i,), dict(offset=-1, dtype=F32)),
        ("matvec", (a[..., :4], m[:, 0]), {}), ("vecmat", (a[0, :, 0], a), {}), ("vecdot", (a, v), {}),
        ("vecdot", (m, m), dict(axis=0)),
        ("unravel_index", (I32([0, 7, 19, -1, 25]), (4, 5)), {}),
        ("ravel_multi_index", ((I32([0, 3, 2]), I32([4, 0, 1])), (4, 5)), {}),
        ("ravel_multi_index", ((I32([0, 9, -2]), I32([4, 0, 1])), (4, 5)), dict(mode="wrap", order="F")),
        ("fill_diagonal", (m, F32(7)), dict(inplace=False)),
        ("fill_diagonal", (np.zeros((3, 3, 3), F32), v[:2]), dict(inplace=False)),
        ("choose", (I32([[0, 1, 2], [2, 1, 0]]), [m[0, :3], m[1, :3], F32(9)]), {}),
        ("choose", (I32([0, 4, -1]), [v[:3], v[1:4]]), dict(mode="wrap")),
        ("compress", (I32([1, 0, 1, 1]), m), dict(axis=0)), ("compress", (v > 0, v), dict(size=4, fill_value=-1)),
        ("extract", (i > 0, i), {}), ("extract", (i > 0, i), dict(size=5)),
        ("place", (m, m > 0, F32([-1, -2, -3])), dict(inplace=False)),
        ("put", (m, I32([0, 5, 30]), F32([1, 2])), dict(inplace=False, mode="clip")),
        ("put", (m, I32([0, 5, 30]), F32([1, 2])), dict(inplace=False, mode="wrap")),
        ("put", (m, I32([0, 5, 30]), F32([1, 2])), dict(inplace=False)),
        ("partition", (v, 2), {}), ("partition", (i, 1), dict(axis=0)), ("argpartition", (v, 3), {}),
        ("argpartition", (i, 2), dict(axis=1)), ("partition", (np.uint8([5, 0, 2, 9]), 1), {}),
        ("digitize", (v, F32([-1, 0, 1])), {}), ("digitize", (v, F32([1, 0, -1])), dict(right=True)),
        ("histogram", (a,), dict(bins=6)), ("histogram", (v, F32([-2, 0, 0.5, 2])), dict(density=True)),
        ("histogram", (v,), dict(bins=3, range=(-1, 1), weights=np.abs(v))),
        ("histogram_bin_edges", (i,), dict(bins=4)),
        ("interp", (np.linspace(-3, 3, 11).astype(F32), np.sort(v), v), {}),
        ("interp", (np.linspace(-3, 3, 11).astype(F32), np.sort(v), v), dict(left=-9.0, right="extrapolate")),
        ("interp", (np.linspace(-3, 7, 11).astype(F32), F32([0, 1, 2.5]), F32([1, -1, 2])), dict(period=3.0)),
        ("isin", (i, I32([1, -3, 4])), {}), ("isin", (i, I32([1, -3, 4])), dict(invert=True)),
        ("union1d", (i, I32([9, 1])), {}), ("intersect1d", (i, I32([9, 1, 2, 2])), dict(return_indices=True)),
        ("setdiff1d", (i, I32([1, 2])), {}), ("setxor1d", (i[0], i[1]), {}),
        ("unique_values", (i,), {}), ("unique_counts", (i,), {}), ("unique_inverse", (i,), {}),
        ("unique_all", (i,), {}),
        ("polyval", (v, m), {}), ("polyval", (I32([1, 2, 3]), 2), {}), ("polyadd", (v, v[:2]), {}),
        ("polysub", (v[:2], v), {}), ("polymul", (v, m[0, :3]), {}), ("polymul", (I32([1, 2]), I32([3, 0])), {}),
        ("polyder", (v, 2), {}), ("polyint", (v,), dict(m=2, k=F32([1, 2]))), ("polyint", (i[0],), {}),
        ("convolve", (v, m[0]), {}), ("convolve", (v, m[0, :3]), dict(mode="same")),
        ("convolve", (i[0], i[1, :2]), dict(mode="valid")), ("correlate", (v, m[0, :3]), {}),
        ("correlate", (m[0, :3], v), dict(mode="full")), ("correlate", (v, m[0]), dict(mode="same")),
        ("frexp", (a * F32(100),), {}), ("ldexp", (v, I32([1, -3, 0, 20, -130])), {}),
        ("spacing", (F32([0, 1, -2.5, 1e30, np.inf]),), {}), ("isreal", (m,), {}),
        ("packbits", (i > 0,), {}), ("packbits", (i,), dict(axis=1, bitorder="little")),
        ("unpackbits", (np.uint8([[3, 200], [255, 0]]),), dict(axis=1)),
        ("unpackbits", (np.uint8([3, 200]),), dict(count=12, bitorder="little")),
    ]


# need concrete values in JAX (data-dependent shapes or checks): called eagerly
_EAGER = {"trim_zeros", "ravel_multi_index", "choose", "compress", "extract", "union1d", "intersect1d", "setdiff1d",
          "setxor1d", "unique_values", "unique_counts", "unique_inverse", "unique_all"}


def test_functions_match_jax(J, real_jax):
    rng = np.random.default_rng(0)
    for name, args, kwargs in _cases(rng):
        # JAX compiles one program per case instead of one per operation: much faster
        theirs = (getattr(J, name)(*args, **kwargs) if name in _EAGER
                  else real_jax.jit(lambda: getattr(J, name)(*args, **kwargs))())
        try:
            assert_same(getattr(jnp, name)(*args, **kwargs), theirs)
        except AssertionError as e:
            raise AssertionError(f"{name}{args} {kwargs}: {e}") from None


def test_static_answers(J):
    for name, arg in [("isscalar", 1.0), ("isscalar", F32([1])), ("isscalar", F32(2)), ("iscomplexobj", F32(1)),
                      ("iscomplexobj", 1j), ("isrealobj", I32([1])), ("iterable", [1]), ("iterable", 3)]:
        assert getattr(jnp, name)(arg) == getattr(J, name)(arg), name
    assert jnp.isscalar(jnp.asarray(3.0)) and not jnp.isscalar(jnp.ones(2))
    x = np.arange(24).reshape(4, 6)
    for idx in [jnp.s_[1:3, ::2], jnp.index_exp[..., 1], jnp.s_[::-1]]:
        np.testing.assert_array_equal(jnp.asarray(x)[idx], x[idx])


def test_traceable_with_size(J, real_jax):
    """Under jit the data-dependent ones take size= (and fill_value=), as in JAX."""
    rng = np.random.default_rng(1)
    for trial in range(2):
        a = rng.integers(0, 9, int(rng.integers(1, 9))).astype(I32)
        b = rng.integers(0, 9, int(rng.integers(1, 9))).astype(I32)
        cases = [("unique", dict(size=6, return_index=True, return_inverse=True, return_counts=True)),
                 ("union1d", dict(size=10)), ("intersect1d", dict(size=5, return_indices=True)),
                 ("setdiff1d", dict(size=6)), ("setxor1d", dict(size=7)), ("unique_all", dict(size=5))]
        if trial:
            cases = [("unique", dict(size=3, fill_value=-1)), ("union1d", dict(size=4, fill_value=0)),
                     ("intersect1d", dict(size=3, fill_value=-1)), ("setxor1d", dict(size=4, fill_value=-1)),
                     ("unique_counts", dict(size=4, fill_value=99))]
        for name, kw in cases:
            binary = name not in ("unique", "unique_all", "unique_counts")
            args = (a, b) if binary else (a,)
            ours = meshsim.jit(lambda *x: getattr(jnp, name)(*x, **kw))(*args)
            theirs = real_jax.jit(lambda *x: getattr(J, name)(*x, **kw))(*args)
            assert_same(tuple(ours) if isinstance(ours, tuple) else ours,
                        tuple(theirs) if isinstance(theirs, tuple) else theirs)
    f = meshsim.jit(lambda x: (jnp.compress(x > 0, x, size=3), jnp.extract(x < 0, x, size=2, fill_value=9),
                               jnp.insert(x, 1, 5.0), jnp.delete(x, jnp.asarray(I32([0])), assume_unique_indices=True),
                               jnp.quantile(x, 0.3), jnp.tril_indices(3), jnp.diff(x), jnp.interp(0.5, x, x)))
    x = F32([3, -1, 2, -4, 5])
    jf = real_jax.jit(lambda x: (J.compress(x > 0, x, size=3), J.extract(x < 0, x, size=2, fill_value=9),
                                 J.insert(x, 1, 5.0), J.delete(x, J.asarray(I32([0])), assume_unique_indices=True),
                                 J.quantile(x, 0.3), J.tril_indices(3), J.diff(x), J.interp(0.5, x, x)))
    for o, t in zip(f(x), jf(x)):
        assert_same(o if not isinstance(o, tuple) else tuple(o), t if not isinstance(t, tuple) else tuple(t))
    with pytest.raises(TypeError):
        meshsim.jit(lambda x: jnp.union1d(x, x))(I32([1, 2]))


def test_errors_match_jax(J):
    m = np.ones((3, 4), F32)
    cases = [
        (ValueError, "order must be non-negative but got -1", "diff", (m, -1), {}),
        (ValueError, "diff requires input that is at least one dimensional", "diff", (F32(1),), {}),
        (ValueError, "The input must be non-scalar to take a cumulative sum", "cumulative_sum", (F32(1),), {}),
        (ValueError, "The input array has rank 2, however axis was not set", "cumulative_sum", (m,), {}),
        (ValueError, "x must be a one-dimensional array", "vander", (m,), {}),
        (ValueError, "Only 2-D inputs are accepted", "tril_indices_from", (np.ones(3),), {}),
        (ValueError, "input array must be at least 2-d", "diag_indices_from", (np.ones(3),), {}),
        (ValueError, "All dimensions of input must be of equal length", "diag_indices_from", (m,), {}),
        (ValueError, "Arguments to jax.numpy.ix_ must be 1-dimensional", "ix_", (m,), {}),
        (ValueError, "must satisfy -2<=start<=2", "rollaxis", (m, 0, 5), {}),
        (ValueError, "all elements of `new_shape` must be non-negative", "resize", (m, (-1, 2)), {}),
        (ValueError, "method can only be 'linear'", "quantile", (m, 0.5), dict(method="cubic")),
        (ValueError, r"q must be have rank <= 1, got shape \(1, 1\)", "quantile", (m, F32([[0.5]])), {}),
        (ValueError, "m has more than 2 dimensions", "cov", (np.ones((2, 2, 2)),), {}),
        (ValueError, "Dimension must be either 2 or 3 for cross product", "cross", (m, m), {}),
        (ValueError, "axis1 and axis2 can not be same", "trace", (m, 0, 1, 1), {}),
        (ValueError, r"axes must match; got shapes \(3, 4\) and \(4, 3\) with axis=-1", "vecdot", (m, m.T), {}),
        (NotImplementedError, "JAX arrays are immutable, must use inplace=False", "fill_diagonal", (m, 1.0), {}),
        (ValueError, "array must be at least 2-d", "fill_diagonal", (np.ones(3), 1.0), dict(inplace=False)),
        (ValueError, "invalid entry in choice array", "choose", (I32([0, 3]), [F32([1, 2]), F32([3, 4])]), {}),
        (ValueError, "condition must be a 1D array", "compress", (m > 0, m), {}),
        (ValueError, "jax.numpy.place cannot modify arrays in-place", "place", (m, m > 0, F32(1)), {}),
        (ValueError, "jax.numpy.put cannot modify arrays in-place", "put", (m, I32([0]), F32(1)), {}),
        (ValueError, "invalid entry in coordinates array", "ravel_multi_index", ((I32([5]), I32([0])), (3, 4)), {}),
        (ValueError, "with 1 condition\\(s\\), either 1 or 2 functions are expected; got 3", "piecewise",
         (F32([1, 2]), [F32([1, 2]) > 1], [1.0, 2.0, 3.0]), {}),
        (TypeError, "Expected an input array of unsigned byte data type", "unpackbits", (I32([1]),), {}),
        (TypeError, "Expected an input array of integer or boolean data type", "packbits", (F32([1]),), {}),
        (ValueError, "convolve\\(\\) only support 1-dimensional inputs.", "convolve", (m, m), {}),
        (ValueError, "mode must be one of \\['full', 'same', 'valid'\\]", "correlate", (F32([1]), F32([1])),
         dict(mode="x")),
        (ValueError, "Order of derivative must be positive", "polyder", (F32([1, 2]), -1), {}),
        (ValueError, "digitize: bins must be a 1-dimensional array", "digitize", (F32([1]), m), {}),
        (ValueError, "xp and fp must be one-dimensional arrays of equal size", "interp",
         (F32([1]), F32([1, 2]), F32([1])), {}),
        (ValueError, "weights should have the same shape as a.", "histogram", (F32([1, 2]),), dict(weights=F32([1]))),
    ]
    for exc, msg, name, args, kwargs in cases:
        for mod in (jnp, J):
            with pytest.raises(exc, match=msg):
                getattr(mod, name)(*args, **kwargs)

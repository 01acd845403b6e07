"""x.at[idx].apply(func), .divide(values) and .power(values) against JAX: random shapes,
index forms (integers, negative integers, slices, integer arrays with repeated entries,
out-of-range entries under each mode), dtypes, eagerly and under jit."""
import numpy as np
import pytest

import meshsim
import meshsim.numpy as mnp

jax = pytest.importorskip("jax")


def _random_index(rng, shape):
    n = shape[0]
    kind = rng.integers(0, 5)
    if kind == 0:
        return int(rng.integers(-n, n))
    if kind == 1:
        start, stop = sorted(rng.integers(-n, n + 1, 2))
        return slice(int(start), int(stop), int(rng.choice([1, 2, -1])) if start < stop else 1)
    if kind == 2:  # repeated entries: apply runs once per mention
        return rng.integers(-n, n, int(rng.integers(1, 2 * n + 1)))
    if kind == 3 and len(shape) > 1:
        return (rng.integers(0, n, 3), slice(None), *([0] if len(shape) > 2 else []))
    return (Ellipsis, int(rng.integers(0, shape[-1])))


def _both(rng, dtype):
    shape = tuple(int(d) for d in rng.integers(1, 5, int(rng.integers(1, 4))))
    if np.issubdtype(dtype, np.integer):
        x = rng.integers(1, 5, shape).astype(dtype)
    else:
        x = rng.uniform(0.5, 2.0, shape).astype(dtype)
    return x, _random_index(rng, shape)


FUNCS = {"sin": lambda np_: np_.sin, "double": lambda np_: (lambda v: v * 2),
         "negative": lambda np_: np_.negative, "square_plus_one": lambda np_: (lambda v: v * v + 1)}


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("jitted", [False, True])
def test_apply_matches_jax(seed, jitted):
    rng = np.random.default_rng(seed)
    name = list(FUNCS)[seed % len(FUNCS)]
    dtype = np.int32 if name in ("double", "negative") and seed % 2 else np.float32
    x, idx = _both(rng, dtype)
    mode = [None, "clip", "drop", "promise_in_bounds"][seed % 4]
    if mode == "promise_in_bounds":
        mode = None

    def run(jnp, jit):
        f = lambda a: a.at[idx].apply(FUNCS[name](jnp), mode=mode)  # noqa: E731
        return np.asarray((jit(f) if jitted else f)(jnp.asarray(x)))

    ours, theirs = run(mnp, meshsim.jit), run(jax.numpy, jax.jit)
    assert ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("method", ["divide", "power"])
def test_divide_and_power_match_jax(seed, method):
    rng = np.random.default_rng(100 + seed)
    dtype = [np.float32, np.int32][seed % 2]
    x, idx = _both(rng, dtype)
    values = rng.integers(1, 3, np.shape(np.asarray(x)[idx])).astype(dtype) if seed % 3 else dtype(2)
    jitted = seed % 4 == 1

    def run(jnp, jit):
        f = lambda a, v: getattr(a.at[idx], method)(v)  # noqa: E731
        return np.asarray((jit(f) if jitted else f)(jnp.asarray(x), values))

    ours, theirs = run(mnp, meshsim.jit), run(jax.numpy, jax.jit)
    assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_divide_gradient_matches_jax():
    """The operand's gradient as JAX's; the divisor's needs unique indices, as in JAX."""
    x = np.linspace(0.5, 2.0, 6).astype(np.float32)
    v = np.float32(3.0)

    def make(jnp, where):
        return lambda a, b: jnp.sum(jnp.asarray(a).at[jnp.array(where)].divide(b) ** 2)

    for where in ([1, 1, 4], [1, 2, 4]):
        ours = meshsim.grad(make(mnp, where))(x, v)
        theirs = jax.grad(make(jax.numpy, where))(x, v)
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5)
        with pytest.raises(NotImplementedError) as info:
            meshsim.grad(make(mnp, where), argnums=1)(x, v)
        with pytest.raises(NotImplementedError) as jax_info:
            jax.grad(make(jax.numpy, where), argnums=1)(x, v)
        assert str(info.value) == str(jax_info.value)


@pytest.mark.parametrize("seed", range(16))
def test_wrap_negative_indices_false_matches_jax(seed):
    """Negative entries are not counted from the end: out of range, so clipped to 0 under
    'clip' and filled or dropped otherwise; for every .at method, eagerly and under jit."""
    rng = np.random.default_rng(200 + seed)
    kind = seed % 4
    shape = tuple(int(d) for d in rng.integers(2, 5, 2 if kind == 3 else int(rng.integers(1, 3))))
    x = rng.uniform(0.5, 2.0, shape).astype(np.float32)
    n = shape[0]
    if kind == 0:
        idx = int(rng.integers(-n, 0))
    elif kind == 1:
        idx = rng.integers(-n, n, 4)
    elif kind == 2:
        idx = (Ellipsis, int(rng.integers(-shape[-1], 0)))
    else:
        idx = (rng.integers(-n, n, 3), slice(None))
    method = ["get", "set", "add", "multiply", "min", "max", "divide", "power", "apply"][seed % 9]
    mode = [None, "clip", "drop", "fill"][(seed // 4) % 4]
    jitted = seed % 2 == 1
    if method == "get" and mode == "drop":
        mode = "fill"

    def run(jnp, jit):
        def f(a, traced_index):
            index = traced_index if kind in (1, 3) and jitted else idx
            if kind == 3 and jitted:
                index = (traced_index, slice(None))
            ref = a.at[index]
            if method == "get":
                return ref.get(mode=mode, fill_value=7.0 if mode == "fill" else None, wrap_negative_indices=False)
            if method == "apply":
                return ref.apply(jnp.sin, mode=mode, wrap_negative_indices=False)
            return getattr(ref, method)(np.float32(3.0), mode=mode, wrap_negative_indices=False)
        operand = idx if kind == 1 else idx[0] if kind == 3 else np.int32(0)
        return np.asarray((jit(f) if jitted else f)(jnp.asarray(x), operand))

    ours, theirs = run(mnp, meshsim.jit), run(jax.numpy, jax.jit)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, err_msg=f"{method} {mode} {idx}")

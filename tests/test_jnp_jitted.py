"""The jax.numpy, jax.nn and jax.random functions JAX 0.10.2 writes under jit (roll, rot90, pad,
trace, diagonal, atleast_*d, var/std, the NaN-ignoring reductions, searchsorted, linspace,
one_hot, the normal and uniform samplers): traced, each is one `jit` equation named as JAX names
it, printed as JAX prints it, and it computes, differentiates and batches as JAX does."""
import re

import numpy as np
import pytest

import meshsim

RNG = np.random.default_rng(17)


def _arr(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _exact_cases(J):
    jnp = J.numpy
    X, SQ, V = np.ones((4, 6), np.float32), np.ones((3, 3, 2), np.float32), np.ones(5, np.float32)
    return {
        "roll_axis": (lambda a: jnp.roll(a, 2, axis=1), (X,)),
        "roll_negative": (lambda a: jnp.roll(a, -1, axis=0), (X,)),
        "roll_zero": (lambda a: jnp.roll(a, 0, axis=1), (X,)),
        "roll_flat": (lambda a: jnp.roll(a, 5), (X,)),
        "roll_tuples": (lambda a: jnp.roll(a, (1, -2), axis=(0, 1)), (X,)),
        "rot90": (jnp.rot90, (X,)),
        "rot90_k2": (lambda a: jnp.rot90(a, 2), (X,)),
        "rot90_k3_axes": (lambda a: jnp.rot90(a, 3, axes=(2, 0)), (SQ,)),
        "rot90_k0": (lambda a: jnp.rot90(a, 4), (X,)),
        "atleast_1d_scalar": (lambda v: jnp.atleast_1d(v[0]), (V,)),
        "atleast_2d": (jnp.atleast_2d, (V,)),
        "atleast_2d_many": (lambda v, a: jnp.atleast_2d(v, a, v[0]), (V, X)),
        "atleast_3d": (lambda v, a: jnp.atleast_3d(v, a, v[0], SQ), (V, X)),
        "trace": (jnp.trace, (X,)),
        "eye_matmul": (lambda a: jnp.eye(4, 6, k=1) * a, (X,)),
        "nansum": (jnp.nansum, (X,)),
        "nansum_axis": (lambda a: jnp.nansum(a, axis=1, keepdims=True), (X,)),
        "nanprod": (lambda a: jnp.nanprod(a, axis=0), (X,)),
        "nanmax": (jnp.nanmax, (X,)),
        "nanmin_axis": (lambda a: jnp.nanmin(a, axis=1), (X,)),
        "nanmean": (lambda a: jnp.nanmean(a, axis=0), (X,)),
        "nancumsum": (lambda a: jnp.nancumsum(a, axis=1), (X,)),
        "nancumprod": (jnp.nancumprod, (X,)),
    }


# Programs whose bodies differ from JAX's only where a lax binary op meets a size-1 operand
# (JAX's lax broadcasts it inside the op, meshsim writes a broadcast_in_dim): the nested jit
# equations, their names and nesting, are JAX's.
def _structure_cases(J):
    jnp = J.numpy
    X, V = np.ones((4, 6), np.float32), np.linspace(-1, 1, 7, dtype=np.float32)
    key = np.array([0, 5], np.uint32)
    return {
        "var": (jnp.var, (X,)),
        "var_axis_ddof": (lambda a: jnp.var(a, axis=1, ddof=1), (X,)),
        "std": (lambda a: jnp.std(a, axis=0, keepdims=True), (X,)),
        "nanvar": (jnp.nanvar, (X,)),
        "nanstd": (lambda a: jnp.nanstd(a, axis=1), (X,)),
        "pad": (lambda a: jnp.pad(a, 1), (X,)),
        "pad_edge": (lambda a: jnp.pad(a, ((1, 0), (0, 2)), mode="edge"), (X,)),
        "pad_values": (lambda a: jnp.pad(a, (2, 1), constant_values=3.0), (X,)),
        "diagonal": (lambda a: jnp.diagonal(a, 1), (X,)),
        "linspace": (lambda a: jnp.linspace(0.0, a[0, 0], 5), (X,)),
        "linspace_ints": (lambda a: jnp.linspace(0, 1, 4) + a[0, :4], (X,)),
        "one_hot": (lambda n: J.nn.one_hot(n, 5), (np.arange(4, dtype=np.int32),)),
        "one_hot_axis0": (lambda n: J.nn.one_hot(n, 3, axis=0), (np.arange(4, dtype=np.int32),)),
        "searchsorted": (lambda v: jnp.searchsorted(v, v[::2], side="right"), (V,)),
        "normal": (lambda k: J.random.normal(k, (3,)), (key,)),
        "uniform": (lambda k: J.random.uniform(k, (2, 3), minval=-1.0), (key,)),
    }


def _jit_names(text: str) -> list[str]:
    return re.findall(r"\bname=(\w+)", text)


@pytest.mark.parametrize("name", list(_exact_cases(meshsim)))
def test_jaxpr_text_matches_jax(real_jax, name):
    f, args = _exact_cases(real_jax)[name]
    g, _ = _exact_cases(meshsim)[name]
    assert str(meshsim.make_jaxpr(g)(*args)) == str(real_jax.make_jaxpr(f)(*args))


@pytest.mark.parametrize("name", list(_structure_cases(meshsim)))
def test_jit_equations_match_jax(real_jax, name):
    f, args = _structure_cases(real_jax)[name]
    g, _ = _structure_cases(meshsim)[name]
    want = _jit_names(str(real_jax.make_jaxpr(f)(*args)))
    # JAX's searchsorted nests its scan implementation in two more jits of its own.
    # and its scan body divides by floor_divide; meshsim's searchsorted is one primitive.
    want = [n for n in want if n not in ("_searchsorted_scan_impl", "floor_divide")]
    assert _jit_names(str(meshsim.make_jaxpr(g)(*args))) == want


def _value_cases(J, rng):
    jnp = J.numpy
    shift, k = int(rng.integers(-7, 8)), int(rng.integers(-3, 5))
    offset, ddof = int(rng.integers(-2, 3)), int(rng.integers(0, 2))
    roll_axis = int(rng.integers(0, 2)) if shift % 2 else None
    widths = tuple((int(a), int(b)) for a, b in rng.integers(0, 3, size=(2, 2)))
    mode = str(rng.choice(["constant", "edge", "wrap", "reflect", "symmetric"]))
    return {
        "roll": lambda a: jnp.roll(a, shift, axis=roll_axis),
        "rot90": lambda a: jnp.rot90(a, k),
        "pad": lambda a: jnp.pad(a, widths, mode=mode),
        "trace": lambda a: jnp.trace(a, offset),
        "diagonal": lambda a: jnp.diagonal(a, offset),
        "atleast_3d": lambda a: jnp.atleast_3d(a[0]) * 2.0,
        "var": lambda a: jnp.var(a, axis=0, ddof=ddof),
        "std": lambda a: jnp.std(a, ddof=ddof),
        "nansum": lambda a: jnp.nansum(a, axis=1),
        "nanmean": lambda a: jnp.nanmean(a),
        "nanmax": lambda a: jnp.nanmax(a, axis=0),
        "nanstd": lambda a: jnp.nanstd(a, axis=1, ddof=ddof),
        "nancumsum": lambda a: jnp.nancumsum(a, axis=0),
        "linspace": lambda a: jnp.linspace(a[0, 0], a[-1, -1], a.shape[1]),
    }


@pytest.mark.parametrize("seed", range(4))
def test_values_grads_vmap_against_jax(real_jax, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(2, 7, size=2))
    x = _arr(shape)
    if seed % 2:
        x[0, -1] = np.nan  # the NaN-ignoring reductions skip it; the others carry it
    ours = _value_cases(meshsim, np.random.default_rng(seed))
    theirs = _value_cases(real_jax, np.random.default_rng(seed))
    for name, f in theirs.items():
        g = ours[name]
        want = np.asarray(f(x))
        for got in (g(x), meshsim.jit(g)(x)):
            np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=1e-6, err_msg=name)
        finite = np.nan_to_num(x)
        grad_want = real_jax.grad(lambda a, f=f: f(a).sum())(finite)
        grad_got = meshsim.grad(lambda a, g=g: g(a).sum())(finite)
        np.testing.assert_allclose(np.asarray(grad_got), np.asarray(grad_want), rtol=2e-5, atol=1e-5,
                                   err_msg=name)
        stacked = np.stack([finite, 2 * finite])
        np.testing.assert_allclose(np.asarray(meshsim.vmap(g)(stacked)),
                                   np.asarray(real_jax.vmap(f)(stacked)), rtol=2e-5, atol=1e-5,
                                   err_msg=name)


@pytest.mark.parametrize("seed", range(3))
def test_samplers_one_hot_searchsorted_against_jax(real_jax, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(1, 6, size=int(rng.integers(1, 3))))
    raw = rng.integers(0, 2**32, size=2, dtype=np.uint32)
    sorted_v = np.sort(_arr(9))
    queries = _arr(5)
    classes = rng.integers(-1, 6, size=7).astype(np.int32)
    results = []
    for J in (meshsim, real_jax):
        key = J.random.key_data(J.random.PRNGKey(int(raw[0])))

        def program(k, v, q, n, J=J):
            return (J.random.normal(k, shape), J.random.uniform(k, shape, minval=-2.0, maxval=3.0),
                    J.numpy.searchsorted(v, q), J.numpy.searchsorted(v, q, side="right"),
                    J.nn.one_hot(n, 5), J.nn.one_hot(n, 4, axis=0, dtype=J.numpy.int8))
        results.append([np.asarray(r) for r in J.jit(program)(key, sorted_v, queries, classes)]
                       + [np.asarray(r) for r in program(key, sorted_v, queries, classes)])
    for i, (got, want) in enumerate(zip(*results)):
        assert got.dtype == want.dtype
        if i % 6 == 0:  # normal: within 1 ulp (erf_inv)
            np.testing.assert_array_max_ulp(got, want, maxulp=1)
        elif i % 6 == 1:  # uniform on [-2, 3): XLA fuses the scaling's multiply-add into one FMA
            np.testing.assert_allclose(got, want, rtol=0, atol=2.5e-7)
        else:
            np.testing.assert_array_equal(got, want)


def test_static_argument_errors_match_jax(real_jax):
    x = _arr((3, 4))
    for J in (meshsim, real_jax):
        with pytest.raises(ValueError, match="Non-hashable static arguments"):
            J.jit(lambda a: J.numpy.nansum(a, axis=[0]))(x)
        with pytest.raises(ValueError, match="Axes must be different"):
            J.jit(lambda a: J.numpy.rot90(a, axes=(1, 1)))(x)


@pytest.mark.parametrize("seed", range(3))
def test_roll_by_traced_shift_matches_jax(real_jax, seed):
    rng = np.random.default_rng(seed)
    x = _arr(tuple(int(n) for n in rng.integers(1, 6, size=2)))
    shift = np.int32(rng.integers(-9, 10))
    shifts = rng.integers(-9, 10, size=2).astype(np.int32)
    got, want = [], []
    for J, out in ((meshsim, got), (real_jax, want)):
        jnp = J.numpy
        out.append(J.jit(lambda a, s: jnp.roll(a, s))(x, shift))
        out.append(J.jit(lambda a, s: jnp.roll(a, s, axis=(1, 0)))(x, shifts))
        out.append(jnp.roll(x, jnp.asarray(shift), axis=-1))
        out.append(J.grad(lambda a, s: (jnp.roll(a, s, axis=0) * x).sum())(x, shift))
        out.append(J.vmap(lambda a, s: jnp.roll(a, s), in_axes=(None, 0))(x, shifts))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    texts = [str(J.make_jaxpr(lambda a, s: J.numpy.roll(a, s, 1))(x, shift)) for J in (meshsim, real_jax)]
    # the same jit equations (JAX's longer body is printed once at the top, so in another order)
    assert sorted(_jit_names(texts[0])) == sorted(_jit_names(texts[1]))

"""vmap of `jax.pure_callback` by its `vmap_method`, against JAX 0.10.2: the values, the shapes
the function is called with (once per example, or once with the batch expanded, broadcast or
left alone on unbatched operands), eagerly, under jit and in nested vmaps; JAX's errors for a
missing and an unknown vmap_method."""
import zlib

import numpy as np
import pytest

import meshsim

METHODS = ["sequential", "sequential_unrolled", "expand_dims", "broadcast_all", "legacy_vectorized"]


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


def _data(shape, name):
    return np.random.default_rng(zlib.crc32(name.encode())).uniform(-2, 2, shape).astype(np.float32)


def _run(jax, method, in_axes, args, nest=False, jitted=False):
    """(results, the shapes of every call's operands)."""
    calls = []

    def host(x, y):
        calls.append((np.shape(x), np.shape(y)))
        return (np.sin(np.asarray(x)) * np.asarray(y)).astype(np.float32)

    def f(x, y):
        shape = np.broadcast_shapes(np.shape(x), np.shape(y))
        return jax.pure_callback(host, jax.ShapeDtypeStruct(shape, np.float32), x, y, vmap_method=method)

    g = jax.vmap(f, in_axes=in_axes)
    if nest:
        g = jax.vmap(g, in_axes=in_axes)
    if jitted:
        g = jax.jit(g)
    out = g(*args)
    return np.asarray(out), calls


CASES = {
    # name: (in_axes, shapes of the operands, nested)
    "batched_and_unbatched": ((0, None), ((3, 4), (4,)), False),
    "both_batched": ((0, 0), ((3, 4), (3, 4)), False),
    "batch_at_1": ((1, None), ((4, 3), (4,)), False),
    "unbatched_first": ((None, 0), ((4,), (5, 4)), False),
    "nested": ((0, None), ((2, 3, 4), (4,)), True),
}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_vmapped_pure_callback(libs, method, name, jitted):
    in_axes, shapes, nest = CASES[name]
    args = [_data(s, f"{name}{i}") for i, s in enumerate(shapes)]
    (ours, our_calls), (theirs, their_calls) = (_run(lib, method, in_axes, args, nest, jitted)
                                                for lib in libs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    assert ours.shape == theirs.shape
    assert our_calls == their_calls


@pytest.mark.parametrize("method", [None, "bogus"])
def test_vmap_method_errors(libs, method):
    args = [_data((3, 4), "a"), _data((4,), "b")]
    errors = []
    for lib in libs:
        with pytest.raises(Exception) as info:
            _run(lib, method, (0, None), args)
        errors.append((type(info.value).__name__, str(info.value)))
    assert errors[0] == errors[1]
    assert errors[0][0] == ("NotImplementedError" if method is None else "ValueError")


def test_unbatched_callback_needs_no_vmap_method(libs):
    x = _data((4,), "plain")
    outs = [np.asarray(lib.jit(lambda v, lib=lib: lib.pure_callback(
        np.cos, lib.ShapeDtypeStruct((4,), np.float32), v))(x)) for lib in libs]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6)

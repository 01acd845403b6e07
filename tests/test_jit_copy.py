"""Copying jitted functions as JAX 0.10.2 copies them: `copy.copy`/`copy.deepcopy` of a `jit`
(or of a jax.numpy function JAX jits) give a new function with the same options and results,
printed `<PjitFunction>`, as libraries that deep-copy models holding them see. Real JAX is the
oracle."""
import copy
import re

import numpy as np
import pytest

import meshsim
import meshsim.numpy as mnp

COPIES = {"copy": copy.copy, "deepcopy": copy.deepcopy}


def _scale_by(x, n):
    return x * n + 1


def _sum_squares(x, y):
    return (x * x).sum() + y


def _functions(lib):
    """Jitted functions with different options, built the same way under either library."""
    return {
        "plain": lib.jit(_sum_squares),
        "static_argnums": lib.jit(_scale_by, static_argnums=1),
        "static_argnames": lib.jit(_scale_by, static_argnames="n"),
        "donate_argnums": lib.jit(_sum_squares, donate_argnums=0),
    }


def _arguments(name, rng, lib):
    x = lib.numpy.asarray(rng.standard_normal(int(rng.integers(1, 7))).astype(np.float32))
    if name.startswith("static"):
        n = int(rng.integers(-3, 4))
        return (x,), {"n": n} if name == "static_argnames" else {}, n
    return (x, np.float32(rng.standard_normal())), {}, None


@pytest.mark.parametrize("how", sorted(COPIES))
@pytest.mark.parametrize("name", ["plain", "static_argnums", "static_argnames", "donate_argnums"])
def test_a_copied_jit_computes_and_prints_as_jaxs(real_jax, how, name):
    seed = sum(map(ord, name + how))
    results = []
    for lib in (meshsim, real_jax):
        rng = np.random.default_rng(seed)
        original = _functions(lib)[name]
        copied = COPIES[how](original)
        args, kwargs, n = _arguments(name, rng, lib)
        if n is not None and name == "static_argnums":
            args = args + (n,)
        assert copied is not original
        results.append((np.asarray(copied(*args, **kwargs)), repr(copied),
                        re.sub(r" at 0x[0-9a-f]+", "", repr(original)),
                        str(lib.make_jaxpr(lambda *a: copied(*a, **kwargs))(*args))
                        if name == "plain" else None))
    (ours, our_repr, our_original, our_jaxpr), (theirs, their_repr, their_original,
                                                their_jaxpr) = results
    np.testing.assert_array_equal(ours, theirs)
    assert our_repr == their_repr == "<PjitFunction>"
    assert our_original == their_original
    assert our_jaxpr == their_jaxpr


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_copied_jit_keeps_its_static_arguments(real_jax, how):
    """A static argument stays static in the copy: a Python int reaches the function as an
    int (a traced one could not choose a shape)."""
    for lib in (meshsim, real_jax):
        copied = COPIES[how](lib.jit(lambda n: lib.numpy.zeros(n), static_argnums=0))
        assert copied(3).shape == (3,)
        assert copied(5).shape == (5,)


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_model_holding_jnp_functions_deep_copies(real_jax, how):
    """A model (a pytree of parameters and activations, as equinox and flax hold them) copied
    whole: its jax.numpy activations stay usable and print as JAX's copies do."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    results = []
    for lib, jnp in ((meshsim, mnp), (real_jax, real_jax.numpy)):
        model = {"w": jnp.asarray(w), "activation": jnp.tanh, "pool": jnp.mean}
        copied = COPIES[how](model)
        out = copied["pool"](copied["activation"](jnp.asarray(x) @ copied["w"]), axis=0)
        # A shallow copy of the model shares its functions: their reprs name the function.
        results.append((np.asarray(out), re.sub(r" at 0x[0-9a-f]+", "", repr(copied["activation"])),
                        str(lib.make_jaxpr(copied["activation"])(x))))
    (ours, our_repr, our_jaxpr), (theirs, their_repr, their_jaxpr) = results
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    assert our_repr == their_repr
    assert our_jaxpr == their_jaxpr

"""jax.nn functions as a user's program meets them beyond their values, against
JAX 0.10.2: derivatives at the kinks where JAX defines its own (relu, relu6,
log1mexp), and the objects themselves (equinox prints a model's activation by
its repr; `.lower`/`.eval_shape` exist on JAX's jitted functions)."""
import re

import numpy as np
import pytest

import meshsim
import meshsim.numpy as jnp
import meshsim.nn as nn

KINKED = ["relu", "relu6", "log1mexp"]


def _points(name, rng, dtype):
    kinks = {"relu": [0.0], "relu6": [0.0, 6.0], "log1mexp": [0.0, np.log(2.0)]}[name]
    scattered = rng.uniform(-2, 8, 5) if name != "log1mexp" else rng.uniform(1e-3, 5, 5)
    return np.asarray(kinks + list(scattered) + [-1.0, 7.0], dtype)


@pytest.mark.parametrize("name", KINKED)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_derivatives_at_kinks_match_jax(real_jax, name, dtype):
    rng = np.random.default_rng(sum(map(ord, name)))
    x = _points(name, rng, dtype)
    ours_fn, theirs_fn = getattr(nn, name), getattr(real_jax.nn, name)
    for transform in [lambda f: f, meshsim.jit]:
        ours = transform(meshsim.vmap(meshsim.grad(ours_fn)))(jnp.asarray(x))
        theirs = real_jax.vmap(real_jax.grad(theirs_fn))(x)
        assert ours.dtype == theirs.dtype
        np.testing.assert_allclose(np.asarray(ours, np.float64), np.asarray(theirs, np.float64),
                                   rtol=2e-3 if dtype == np.float16 else 2e-6, err_msg=name)
    ours_tangent = meshsim.jvp(ours_fn, (jnp.asarray(x),), (jnp.ones_like(jnp.asarray(x)),))[1]
    theirs_tangent = real_jax.jvp(theirs_fn, (x,), (np.ones_like(x),))[1]
    np.testing.assert_allclose(np.asarray(ours_tangent, np.float64),
                               np.asarray(theirs_tangent, np.float64), rtol=2e-3, err_msg=name)


def test_relu_second_derivative_and_integer_input_match_jax(real_jax):
    for x in [0.0, 2.0, -3.0]:
        assert float(meshsim.grad(meshsim.grad(nn.relu))(x)) == \
            float(real_jax.grad(real_jax.grad(real_jax.nn.relu))(x))
    for x in [3, -4]:
        ours, theirs = nn.relu(x), real_jax.nn.relu(x)
        assert (int(ours), ours.dtype, ours.weak_type) == (int(theirs), theirs.dtype, theirs.weak_type)


def _masked(text):
    return re.sub(r"0x[0-9a-f]+", "0x", text)


def test_activation_objects_print_and_stage_as_jax(real_jax):
    names = [n for n in dir(real_jax.nn) if not n.startswith("_") and callable(getattr(real_jax.nn, n))
             and "PjitFunction" in repr(getattr(real_jax.nn, n))]
    assert {"sigmoid", "silu", "tanh", "standardize"} <= set(names)
    for name in names:
        assert _masked(repr(getattr(nn, name))) == _masked(repr(getattr(real_jax.nn, name))), name
    for name in ["relu", "relu6", "log1mexp"]:
        assert type(getattr(nn, name)) is meshsim.custom_jvp
        assert _masked(repr(getattr(nn, name).__wrapped__)) == \
            _masked(repr(getattr(real_jax.nn, name).__wrapped__))
    out = nn.silu.eval_shape(meshsim.ShapeDtypeStruct((3, 2), np.float32))
    assert (out.shape, out.dtype) == ((3, 2), np.float32)


def _top_level_primitives(jaxpr):
    return [str(e.primitive) for e in jaxpr.jaxpr.eqns]


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "silu", "standardize", "logmeanexp"])
def test_staged_forms_inline_or_nest_as_jax(real_jax, name):
    x = np.random.default_rng(1).normal(size=(2, 3)).astype(np.float32)
    ours = meshsim.make_jaxpr(getattr(nn, name))(jnp.asarray(x))
    theirs = real_jax.make_jaxpr(getattr(real_jax.nn, name))(x)
    assert _top_level_primitives(ours) == _top_level_primitives(theirs)


def test_standardize_and_logmeanexp_static_options_match_jax(real_jax):
    x = np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32)
    for axis in [0, -1, (0, 1)]:
        for fn in ["standardize", "logmeanexp"]:
            kwargs = {"axis": axis} if fn == "standardize" else {"axis": axis, "keepdims": True}
            ours = meshsim.jit(lambda v, f=fn, k=kwargs: getattr(nn, f)(v, **k))(jnp.asarray(x))
            theirs = getattr(real_jax.nn, fn)(x, **kwargs)
            assert ours.shape == theirs.shape
            np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-6)
    ours = nn.standardize(jnp.asarray(x), algorithm="stable")
    np.testing.assert_allclose(np.asarray(ours), real_jax.nn.standardize(x, algorithm="stable"),
                               rtol=1e-5, atol=1e-6)

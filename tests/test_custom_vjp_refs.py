"""custom_vjp rules that write Refs, against JAX 0.10.2: a primal function or fwd rule writing
a Ref made outside it (the write happens when that program runs: the primal's on a call, the
fwd rule's in a forward pass), a Ref argument written by the fwd rule, a Ref passed on as a
residual, and JAX's error for a Ref made inside fwd and returned as a residual. Values, the
Refs' final contents and error texts."""
import re

import numpy as np
import pytest

import meshsim

SEEDS = [0, 1, 2]


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


def _outcome(run):
    try:
        return "ok", [np.asarray(v) for v in run()]
    except Exception as e:  # noqa: BLE001 - the class name and text are compared
        return type(e).__name__, re.sub(r" at 0x[0-9a-f]+", " at 0x", str(e).splitlines()[0])


def _sin_rule(jax, write_in: str, target):
    """sin with its cotangent from a residual cos; `write_in` ('primal' or 'fwd') stores the
    argument into `target` (a Ref, or None: the Ref is the rule's second argument)."""
    jnp = jax.numpy

    def body(x, r):
        if write_in == "primal":
            r[...] = x
        return jnp.sin(x)

    def rule(x, r):
        if write_in == "fwd":
            r[...] = x * 2
        return jnp.sin(x), jnp.cos(x)

    if target is None:
        f = jax.custom_vjp(body)
        f.defvjp(rule, lambda res, g: (res * g, None))
    else:
        f = jax.custom_vjp(lambda x: body(x, target))
        f.defvjp(lambda x: rule(x, target), lambda res, g: (res * g,))
    return f


CASES = ["fwd_grad", "fwd_grad_of_jit", "fwd_jit_of_grad", "fwd_vjp", "fwd_call", "primal_call",
         "primal_jit_call", "primal_grad", "argument_fwd_grad", "argument_primal_call"]


def _run(jax, name, seed):
    jnp = jax.numpy
    rng = np.random.default_rng(seed)
    x = rng.normal(size=tuple(rng.integers(1, 4, size=rng.integers(1, 3)))).astype(np.float32)
    r = jax.new_ref(jnp.zeros(x.shape))
    where, how = name.split("_", 1)
    if where == "argument":
        f = _sin_rule(jax, "fwd" if how.startswith("fwd") else "primal", None)
        call = lambda v: f(v, r)  # noqa: E731
    else:
        f = _sin_rule(jax, where, r)
        call = f
    loss = lambda v: jnp.sum(call(v))  # noqa: E731
    how = how.removeprefix("fwd_").removeprefix("primal_")
    if how == "grad":
        out = jax.grad(loss)(x)
    elif how == "grad_of_jit":
        out = jax.grad(jax.jit(loss))(x)
    elif how == "jit_of_grad":
        out = jax.jit(jax.grad(loss))(x)
    elif how == "vjp":
        y, pullback = jax.vjp(call, x)
        out = (y, *pullback(jnp.ones_like(y)))
    elif how == "jit_call":
        out = jax.jit(call)(x)
    else:
        out = call(x)
    return [*jax.tree.leaves(out), jax.freeze(r)]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", CASES)
def test_rules_writing_refs_match_jax(libs, name, seed):
    ours, theirs = (_outcome(lambda: _run(lib, name, seed)) for lib in libs)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] != "ok":
        assert ours == theirs
        return
    assert len(ours[1]) == len(theirs[1])
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)


def _ref_residual(jax, made_inside: bool, path: str):
    jnp = jax.numpy
    outside = jax.new_ref(jnp.ones(3))

    @jax.custom_vjp
    def f(x, r):
        return jnp.sin(x)

    def fwd(x, r):
        res = jax.new_ref(jnp.cos(x)) if made_inside else r
        return jnp.sin(x), {"flat": res, "nested": (x, res)}[path]

    def bwd(res, g):
        ref = res if path == "flat" else res[1]
        return ref[...] * g, None

    f.defvjp(fwd, bwd)
    return [jax.grad(lambda v: jnp.sum(f(v, outside)))(jnp.arange(3.0))]


@pytest.mark.parametrize("made_inside", [True, False], ids=["made_in_fwd", "argument"])
@pytest.mark.parametrize("path", ["flat", "nested"])
def test_ref_residuals(libs, made_inside, path):
    """A Ref returned as a residual must be one of the arguments: JAX's ValueError (naming the
    fwd rule and the residual's tree path) otherwise; an argument Ref reaches bwd as it is."""
    ours, theirs = (_outcome(lambda: _ref_residual(lib, made_inside, path)) for lib in libs)
    assert ours[0] == theirs[0]
    if ours[0] != "ok":
        assert ours == theirs
    else:
        np.testing.assert_allclose(ours[1][0], theirs[1][0], rtol=1e-6)

"""Gradients over Explicit-sharded arrays follow the primal's shardings, as in JAX: for each op
family of the explicit-sharding sweep, `jax.grad` (eager and under `jit`) of a scalar loss through
the op gives the cotangent JAX gives (type, or error class and text) and JAX's values."""
import re

import numpy as np
import pytest

import meshsim
from test_explicit_sharding import Lib, outcome
from test_explicit_sharding_sweep import OPS, _random_type

# Families whose result is not differentiable (integers) or not a function of x's values.
NOT_DIFFERENTIABLE = {"astype", "argmax0", "argmax_keepdims", "argmin_flat", "argsort0", "zeros_like",
                      "full_like"}


def _loss(m, op):
    return lambda x: m.jnp.sum(m.jnp.sin(op(m, x)))


def _refusal(outcome):
    """An outcome with the refused slice's primitive left unnamed: JAX differentiates an eager
    `x[...]` through either dynamic_slice or slice (depending on what it has cached; its message
    may then show sizes as NumPy ints), meshsim always through slice."""
    kind, text = outcome
    text = re.sub(r"np\.int64\((\d+)\)", r"\1", text)
    return kind, re.sub(r"^(dynamic_)?slic(e|ing) on sharded dims", "slicing on sharded dims", text)


def _cases():
    rng = np.random.default_rng(1226)
    for name, op in OPS.items():
        if name in NOT_DIFFERENTIABLE:
            continue
        for k in range(2):
            shape, spec = _random_type(rng)
            yield f"{name}-{k}", op, shape, spec


CASES = {name: (op, shape, spec) for name, op, shape, spec in _cases()}


@pytest.fixture(scope="module")
def libs(real_jax):
    return Lib(meshsim), Lib(real_jax)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_type_and_value_match_jax(libs, name, jitted):
    op, shape, spec = CASES[name]
    a = np.random.default_rng(len(name)).standard_normal(shape).astype(np.float32)
    results = []

    def case(m):
        g = m.jax.grad(_loss(m, op))
        g = m.jax.jit(g) if jitted else g
        y = g(m.put(a, *spec))
        results.append(y)
        return y

    ours, theirs = (outcome(lib, case) for lib in libs)
    assert _refusal(ours) == _refusal(theirs), (shape, spec)
    if ours[0] == "ok":
        np.testing.assert_allclose(np.asarray(results[0]), np.asarray(results[1]), rtol=1e-5, atol=1e-5)


def _compare(libs, case):
    """Runs `case` with meshsim and JAX: same type (or error), same values; the outcome."""
    results = []
    for lib in libs:
        try:
            value = case(lib)
            results.append(("ok", str(lib.typeof(value)), np.asarray(value)))
        except Exception as e:  # noqa: BLE001 - the class name is compared
            results.append((type(e).__name__, str(e), None))
    (k1, t1, v1), (k2, t2, v2) = results
    assert (k1, t1) == (k2, t2)
    if v1 is not None:
        np.testing.assert_allclose(v1, v2, rtol=1e-5, atol=1e-5)
    return k1


@pytest.fixture(scope="module")
def mods(real_jax):
    return meshsim, real_jax


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_dense_layer_grad_over_a_batch_sharded_input(mods, jitted):
    """The weight's cotangent contracts the batch-sharded dimension: replicated, as the weight."""
    rng = np.random.default_rng(0)
    xs, ws = rng.standard_normal((8, 16), np.float32), rng.standard_normal((16, 4), np.float32)

    def case(jax):
        P = jax.sharding.PartitionSpec
        mesh = jax.make_mesh((8,), ("batch",))
        x = jax.device_put(xs, jax.sharding.NamedSharding(mesh, P("batch")))
        grad = jax.grad(lambda W, x: jax.numpy.sum(jax.numpy.dot(x, W) ** 2))
        with jax.set_mesh(mesh):
            return (jax.jit(grad) if jitted else grad)(jax.numpy.asarray(ws), x)

    assert _compare(mods, case) == "ok"


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_matmul_grads_on_a_2d_mesh(mods, argnums):
    """FSDP+TP shapes: both cotangents take their primal's sharding."""
    rng = np.random.default_rng(1)
    xs, ws = rng.standard_normal((8, 4), np.float32), rng.standard_normal((4, 6), np.float32)

    def case(jax):
        P, NS = jax.sharding.PartitionSpec, jax.sharding.NamedSharding
        mesh = jax.make_mesh((4, 2), ("dp", "tp"))
        x = jax.device_put(xs, NS(mesh, P("dp", "tp")))
        w = jax.device_put(ws, NS(mesh, P("tp", None)))
        f = jax.grad(lambda x, w: jax.numpy.sum(jax.numpy.tanh(x @ w)), argnums=argnums)
        with jax.set_mesh(mesh):
            g = jax.jit(f)(x, w)
        return g if argnums != (0, 1) else jax.numpy.concatenate([g[0].sum(1), g[1].sum(1)])

    _compare(mods, case)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("blocked", ["stop_gradient", "floor"])
def test_collective_on_a_non_differentiated_path_is_a_symbolic_zero(mods, jitted, blocked):
    """A stable softmax over a vocab-parallel axis: the pmax of a stop_gradient'ed (or floored,
    piecewise constant) max is never differentiated, as in JAX."""
    xs = (np.arange(16, dtype=np.float32) / 4) ** 1.5

    def case(jax):
        lax, jnp, P = jax.lax, jax.numpy, jax.sharding.PartitionSpec
        mesh = jax.make_mesh((8,), ("tp",))

        def body(x):
            m = lax.stop_gradient(x.max()) if blocked == "stop_gradient" else jnp.floor(x.max())
            e = jnp.exp(x - lax.pmax(m, "tp"))
            return e / lax.psum(e.sum(), "tp")

        f = jax.shard_map(body, mesh=mesh, in_specs=P("tp"), out_specs=P("tp"))
        grad = jax.grad(lambda x: jnp.sum(f(x) * jnp.arange(16.0)))
        x = jax.device_put(xs, jax.sharding.NamedSharding(mesh, P("tp")))
        with jax.set_mesh(mesh):
            return (jax.jit(grad) if jitted else grad)(x)

    assert _compare(mods, case) == "ok"


def test_collective_without_a_rule_on_a_differentiated_path_still_raises():
    mesh = meshsim.make_mesh((8,), ("tp",))
    P = meshsim.sharding.PartitionSpec
    f = meshsim.shard_map(lambda x: meshsim.lax.pmax(x.max(), "tp"), mesh=mesh, in_specs=P("tp"),
                          out_specs=P())
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'pmax' not implemented"):
        meshsim.grad(f)(meshsim.numpy.arange(16.0))

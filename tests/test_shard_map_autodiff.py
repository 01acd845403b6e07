"""Reverse-mode autodiff through shard_map: the transposes of the collectives
and of the shard_map boundary, checked structurally against JAX's own tests,
numerically against NumPy and real JAX, and by the dot-product identity
<t, VJP(c)> = <JVP(t), c> for every linear collective."""
import re

import numpy as np
import pytest

import meshsim as jax
import meshsim.numpy as jnp
from meshsim.sharding import AxisType, PartitionSpec as P
from jaxpr_text import inline_shared_programs

AUTO = AxisType.Auto


def body_primitives(text: str, which: int = -1) -> list[str]:
    """Primitive names of the `which`-th shard_map body printed in `text`."""
    bodies = re.findall(r"jaxpr=\{ lambda [^.]*\. let(.*?)\s+in \(", inline_shared_programs(text), re.S)
    return re.findall(r"= (\w+)", bodies[which]) if bodies[which].strip() else []


def pullback_program(f, x):
    y = f(x)
    return str(jax.make_jaxpr(lambda a, c: jax.vjp(f, a)[1](c))(x, np.ones(y.shape, np.float32)))


@pytest.fixture
def mesh1d():
    return jax.make_mesh((4,), ("x",), axis_types=(AUTO,))


# --- the shard_map boundary transposes as JAX's tests say ----------------------

def test_fanout_specs_transpose_to_psum(mesh1d):
    f = jax.shard_map(lambda v: v, mesh=mesh1d, in_specs=P(), out_specs=P("x"))
    assert body_primitives(pullback_program(f, np.arange(4.0, dtype=np.float32))) == ["psum_invariant"]


def test_fanin_psum_transposes_to_fanout(mesh1d):
    f = jax.shard_map(lambda v: jax.lax.psum(v, "x"), mesh=mesh1d, in_specs=P("x"), out_specs=P())
    assert body_primitives(pullback_program(f, np.arange(4.0, dtype=np.float32))) == ["pvary"]


def test_psum_with_implicit_fanout_self_transposes(mesh1d):
    f = jax.shard_map(lambda v: jax.lax.psum(v, "x"), mesh=mesh1d, in_specs=P("x"), out_specs=P("x"))
    prims = body_primitives(pullback_program(f, np.arange(4.0, dtype=np.float32)))
    assert prims == ["psum_invariant", "pvary"]


def test_transpose_identity(mesh1d):
    f = jax.shard_map(lambda v: v, mesh=mesh1d, in_specs=P(), out_specs=P())
    assert body_primitives(pullback_program(f, np.arange(4.0, dtype=np.float32))) == []


# --- gradients of the parallelism strategies against NumPy ---------------------

def _reference(x, w):
    h = x @ w
    t = np.tanh(h)
    g = 2 * t * (1 - t * t)
    return np.sum(t * t), g @ w.T, x.T @ g


@pytest.fixture
def mesh2d():
    return jax.make_mesh((4, 2), ("dp", "tp"))


def _strategies(mesh):
    def dp(xb, w):
        return jax.lax.psum(jnp.sum(jnp.tanh(xb @ w) ** 2), "dp")

    def tp(x, wb):  # Megatron column-parallel: replicated x, its gradient needs a psum
        return jax.lax.psum(jnp.sum(jnp.tanh(x @ wb) ** 2), "tp")

    def fsdp(xb, wb):
        w = jax.lax.all_gather(wb, "dp", axis=0, tiled=True)
        return jax.lax.psum(jnp.sum(jnp.tanh(xb @ w) ** 2), "dp")

    def fsdp_invariant(xb, wb):
        w = jax.lax.all_gather_invariant(wb, "dp", axis=0, tiled=True)
        return jax.lax.psum(jnp.sum(jnp.tanh(xb @ w) ** 2), "dp")

    def fsdp_tp(xb, wb):
        w = jax.lax.all_gather(wb, "dp", axis=0, tiled=True)  # rows over dp, columns over tp
        return jax.lax.psum(jnp.sum(jnp.tanh(xb @ w) ** 2), ("dp", "tp"))

    return {
        "dp": (dp, (P("dp"), P())),
        "tp": (tp, (P(), P(None, "tp"))),
        "fsdp": (fsdp, (P("dp"), P("dp"))),
        "fsdp_invariant": (fsdp_invariant, (P("dp"), P("dp"))),
        "fsdp_tp": (fsdp_tp, (P("dp"), P("dp", "tp"))),
    }


@pytest.mark.parametrize("name", ["dp", "tp", "fsdp", "fsdp_invariant", "fsdp_tp"])
@pytest.mark.parametrize("check_vma", [True, False])
def test_strategy_gradients_match_numpy(mesh2d, name, check_vma):
    if name == "fsdp_invariant" and not check_vma:
        pytest.skip("an invariant gather's transpose needs VMA types to know to sum (as in JAX)")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    w = rng.standard_normal((16, 4)).astype(np.float32) * 0.5
    body, in_specs = _strategies(mesh2d)[name]
    f = jax.shard_map(body, mesh=mesh2d, in_specs=in_specs, out_specs=P(), check_vma=check_vma)
    loss, (gx, gw) = jax.jit(jax.value_and_grad(f, argnums=(0, 1)))(x, w)
    ref_loss, ref_gx, ref_gw = _reference(x, w)
    np.testing.assert_allclose(float(loss), ref_loss, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(gx), ref_gx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(gw), ref_gw, rtol=1e-4, atol=1e-5)


def test_megatron_backward_all_reduce_is_automatic(mesh2d):
    _, (tp_in, tp_w) = _strategies(mesh2d)["tp"]
    f = jax.shard_map(_strategies(mesh2d)["tp"][0], mesh=mesh2d, in_specs=(tp_in, tp_w),
                      out_specs=P())
    x = np.ones((8, 16), np.float32)
    w = np.ones((16, 4), np.float32) * 0.1
    text = str(jax.make_jaxpr(jax.grad(f, argnums=0))(x, w))
    backward = body_primitives(text, -1)
    assert backward[-1] == "psum_invariant"  # the replicated input's cotangent is summed over tp


def test_checkpoint_recomputes_all_gather_instead_of_saving_it(mesh2d):
    from functools import partial

    @partial(jax.checkpoint, policy=lambda p, *_, **__: p.name != "all_gather")
    def layer(xb, wb):
        return jnp.tanh(xb @ jax.lax.all_gather(wb, "dp", axis=0, tiled=True))

    f = jax.shard_map(lambda xb, wb: jax.lax.psum(jnp.sum(layer(xb, wb) ** 2), "dp"),
                      mesh=mesh2d, in_specs=(P("dp"), P("dp")), out_specs=P())
    x = np.random.default_rng(2).standard_normal((8, 16)).astype(np.float32)
    w = np.random.default_rng(3).standard_normal((16, 4)).astype(np.float32)
    text = str(jax.make_jaxpr(jax.grad(f, argnums=(0, 1)))(x, w))
    # The forward body prints first, inline or (over 10 equations) as `let jaxpr = ... in`.
    forward_outputs = re.search(r"\s+in \(([^)]*)\) \}\s+(?:mesh|in\b)", text).group(1).split(", ")
    gathered = re.search(r"(\w+):f32\[16,4\]\{V:dp\} = all_gather", text).group(1)
    assert gathered not in forward_outputs  # not a residual ...
    assert body_primitives(text, -1).count("all_gather") == 1  # ... gathered again backward
    _, gx, gw = _reference(x, w)
    with jax.set_mesh(mesh2d):  # eager grad over an Explicit mesh: JAX needs the context mesh
        got_gx, got_gw = jax.grad(f, argnums=(0, 1))(x, w)
    np.testing.assert_allclose(np.asarray(got_gx), gx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got_gw), gw, rtol=1e-4, atol=1e-5)
    assert abs(float(f(x, w)) - _reference(x, w)[0]) < 1e-3  # forward alone runs too


# --- every linear collective: <t, VJP(c)> == <f(t), c> ------------------------

LINEAR = {
    "psum": (lambda v: jax.lax.psum(v, "x"), P("x"), P()),
    "pvary": (lambda v: jax.lax.pcast(v, "x", to="varying"), P(), P("x")),
    "all_gather": (lambda v: jax.lax.all_gather(v, "x", axis=1, tiled=True), P("x"), P("x")),
    "all_gather_untiled": (lambda v: jax.lax.all_gather(v, "x", axis=0), P("x"), P("x")),
    "all_gather_invariant": (lambda v: jax.lax.all_gather(v, "x", tiled=True, to="invarying"),
                             P("x"), P()),
    "psum_scatter": (lambda v: jax.lax.psum_scatter(v, "x", scatter_dimension=1, tiled=True),
                     P("x"), P("x")),
    "ppermute": (lambda v: jax.lax.ppermute(v, "x", [(0, 1), (1, 2), (2, 0)]), P("x"), P("x")),
    "all_to_all": (lambda v: jax.lax.all_to_all(v, "x", 1, 0, tiled=True), P("x"), P("x")),
}


@pytest.mark.parametrize("name", sorted(LINEAR))
def test_collective_transpose_dot_product_identity(mesh1d, name):
    body, in_spec, out_spec = LINEAR[name]
    f = jax.shard_map(body, mesh=mesh1d, in_specs=in_spec, out_specs=out_spec)
    rng = np.random.default_rng(4)
    t = rng.standard_normal((8, 8)).astype(np.float32)
    y, pull = jax.vjp(f, t)
    c = rng.standard_normal(y.shape).astype(np.float32)
    lhs = float(np.vdot(t, np.asarray(pull(c)[0])))
    rhs = float(np.vdot(np.asarray(f(t)), c))
    assert lhs == pytest.approx(rhs, rel=1e-4, abs=1e-4)


@pytest.mark.parametrize("name", sorted(LINEAR))
def test_collective_gradients_match_jax(real_jax, name):
    mesh = jax.make_mesh((4,), ("x",), axis_types=(AUTO,))
    jmesh = real_jax.make_mesh((4,), ("x",), axis_types=(real_jax.sharding.AxisType.Auto,))
    body, in_spec, out_spec = LINEAR[name]
    t = np.random.default_rng(5).standard_normal((8, 8)).astype(np.float32)

    def loss(mod, m, spec):
        g = mod.shard_map(_rebind(body, mod), mesh=m, in_specs=spec(*in_spec),
                          out_specs=spec(*out_spec))
        return lambda a: (g(a) ** 2).sum()

    ours = np.asarray(jax.grad(loss(jax, mesh, P))(t))
    theirs = np.asarray(real_jax.grad(loss(real_jax, jmesh, real_jax.sharding.PartitionSpec))(t))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def _rebind(fn, module):
    """`fn` with its `jax` global pointing at `module` (to run the same body under real JAX)."""
    import types
    return types.FunctionType(fn.__code__, {**fn.__globals__, "jax": module}, fn.__name__,
                              fn.__defaults__, fn.__closure__)


@pytest.mark.parametrize("seed", range(6))
def test_eager_grad_through_jitted_shard_map_matches_jax(real_jax, seed):
    """grad of a loss calling a jitted shard_map, outside any jit: autodiff keeps
    the nested jit a call (a forward and a transposed jit), and each call,
    bound eagerly, must run its shard_map over the mesh."""
    rng = np.random.default_rng(seed)
    n = int(rng.choice([2, 4, 8]))
    axis_type = [AxisType.Explicit, AUTO][seed % 2]
    shape = (n * int(rng.integers(1, 4)), int(rng.integers(1, 5)))
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(shape[1:]).astype(np.float32)

    def grads(mod, spec):
        mesh = mod.make_mesh((n,), ("i",), axis_types=(getattr(mod.sharding.AxisType, axis_type.name),))
        body = mod.jit(mod.shard_map(lambda a, b: mod.numpy.sin(a) * b, mesh=mesh,
                                     in_specs=(spec("i"), spec()), out_specs=spec("i")))
        on = [mod.device_put(v, mod.sharding.NamedSharding(mesh, s)) for v, s in ((x, spec("i")), (w, spec()))]
        with mod.set_mesh(mesh):  # the scalar loss is typed over an Explicit mesh (JAX's rule)
            return mod.grad(lambda a, b: (body(a, b) ** 2).sum(), argnums=(0, 1))(*on)

    ours = grads(jax, P)
    theirs = grads(real_jax, real_jax.sharding.PartitionSpec)
    for a, b in zip(ours, theirs):
        assert tuple(a.sharding.spec) == tuple(b.sharding.spec)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-5)


def test_eager_grad_through_pmap_matches_jax(real_jax):
    """pmap is a jitted shard_map over an Auto mesh: its gradient outside jit."""
    n = jax.device_count()
    x = np.arange(float(n), dtype=np.float32)
    ours = jax.grad(lambda v: jax.pmap(lambda y: jnp.sin(y) * 2)(v).sum())(x)
    theirs = real_jax.grad(lambda v: real_jax.pmap(lambda y: real_jax.numpy.sin(y) * 2)(v).sum())(x)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)

"""`vmap(f, axis_name=...)` with collectives over the vmapped axis (psum, pmean, pmax, pmin,
axis_index, all_gather, ppermute, all_to_all), under jit and grad (per-example gradients), with
nested vmaps and inside shard_map bodies, against JAX 0.10.2 (8 CPU devices)."""
import numpy as np
import pytest

import meshsim


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


def _same(libs, case, rtol=1e-5):
    ours, theirs = (case(lib) for lib in libs)
    ours_leaves, theirs_leaves = meshsim.tree.leaves(ours), meshsim.tree.leaves(theirs)
    assert len(ours_leaves) == len(theirs_leaves)
    for a, b in zip(ours_leaves, theirs_leaves):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-5)


def _x(shape=(4, 3), seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(np.float32)


BODIES = {
    "psum": lambda lax, jnp: lambda v: lax.psum(v, "b"),
    "pmean_normalise": lambda lax, jnp: lambda v: v / lax.pmean(jnp.abs(v).sum() + 1, "b"),
    "pmax_pmin": lambda lax, jnp: lambda v: lax.pmax(v, "b") - lax.pmin(v, "b"),
    "axis_index": lambda lax, jnp: lambda v: lax.axis_index("b") * 10 + v,
    "axis_size": lambda lax, jnp: lambda v: v * lax.axis_size("b"),
    "psum_constant": lambda lax, jnp: lambda v: v + lax.psum(1, "b"),
    "psum_bool": lambda lax, jnp: lambda v: lax.psum(v > 0, "b"),
    "all_gather": lambda lax, jnp: lambda v: lax.all_gather(v, "b"),
    "all_gather_axis1": lambda lax, jnp: lambda v: lax.all_gather(v, "b", axis=1),
    "all_gather_tiled": lambda lax, jnp: lambda v: lax.all_gather(v, "b", tiled=True),
    "ppermute_ring": lambda lax, jnp: lambda v: lax.ppermute(v, "b", [(i, (i + 1) % 4) for i in range(4)]),
    "ppermute_swap": lambda lax, jnp: lambda v: lax.ppermute(v, "b", [(0, 3), (3, 0), (1, 2), (2, 1)]),
    "pytree": lambda lax, jnp: lambda v: lax.psum({"a": v, "b": (v * 2,)}, "b"),
}


@pytest.mark.parametrize("name", sorted(BODIES))
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_collective_over_the_vmapped_axis(libs, name, jitted):
    x = _x()

    def case(jax):
        f = jax.vmap(BODIES[name](jax.lax, jax.numpy), axis_name="b")
        return (jax.jit(f) if jitted else f)(x)

    _same(libs, case)


@pytest.mark.parametrize("split,concat,tiled", [(0, 1, False), (1, 0, False), (0, 1, True),
                                                (1, 0, True), (0, 0, True)])
def test_all_to_all_over_the_vmapped_axis(libs, split, concat, tiled):
    shape = [4, 4] if not tiled else [8, 4]
    if tiled and split == 1:
        shape = [2, 8]
    x = _x((4, *shape, 2), seed=split + 2 * concat)

    def case(jax):
        return jax.vmap(lambda v: jax.lax.all_to_all(v, "b", split, concat, tiled=tiled), axis_name="b")(x)

    _same(libs, case)


GRAD_BODIES = {
    "pmean_of_grads": lambda lax, jnp, jax: lambda v: lax.pmean(jax.grad(lambda w: jnp.sum((v * w) ** 2))(jnp.ones(3)), "b"),
    "grad_through_psum": lambda lax, jnp, jax: jax.grad(lambda v: jnp.sum(lax.psum(v * v, "b") * v)),
    "grad_through_all_gather": lambda lax, jnp, jax: jax.grad(
        lambda v: jnp.sum(lax.all_gather(v, "b") * jnp.arange(4.0)[:, None])),
    "grad_through_tiled_gather": lambda lax, jnp, jax: jax.grad(
        lambda v: jnp.sum(jnp.sin(lax.all_gather(v, "b", tiled=True)))),
    "grad_through_ppermute": lambda lax, jnp, jax: jax.grad(
        lambda v: jnp.sum(lax.ppermute(v, "b", [(i, (i + 1) % 4) for i in range(4)]) * jnp.arange(3.0))),
    "grad_through_pmean": lambda lax, jnp, jax: jax.grad(lambda v: jnp.sum(jnp.tanh(v - lax.pmean(v, "b")))),
}


@pytest.mark.parametrize("name", sorted(GRAD_BODIES))
def test_per_example_gradients_with_collectives(libs, name):
    x = _x(seed=3)

    def case(jax):
        return jax.vmap(GRAD_BODIES[name](jax.lax, jax.numpy, jax), axis_name="b")(x)

    _same(libs, case)


def test_grad_of_a_vmapped_function_with_collectives(libs):
    x = _x(seed=4)

    def case(jax):
        lax, jnp = jax.lax, jax.numpy

        def loss(x):
            per = jax.vmap(lambda v: jnp.sum(lax.all_gather(v, "b") ** 2 * (lax.axis_index("b") + 1))
                           + lax.pmean(v, "b").sum(), axis_name="b")(x)
            return per.sum()
        return jax.grad(loss)(x), jax.jit(jax.grad(loss))(x)

    _same(libs, case)


def test_all_to_all_gradient(libs):
    x = _x((4, 8, 2), seed=5)

    def case(jax):
        lax, jnp = jax.lax, jax.numpy
        return jax.vmap(jax.grad(lambda v: jnp.sum(jnp.cos(lax.all_to_all(v, "b", 0, 1, tiled=True)))),
                        axis_name="b")(x)

    _same(libs, case)


def test_nested_vmaps(libs):
    x = _x((4, 3), seed=6)

    def case(jax):
        lax = jax.lax
        return (
            jax.vmap(jax.vmap(lambda v: lax.psum(v, "i") + 2 * lax.psum(v, "j"), axis_name="j"),
                     axis_name="i")(x),
            jax.vmap(jax.vmap(lambda v: lax.psum(v, ("i", "j")), axis_name="j"), axis_name="i")(x),
            jax.vmap(jax.vmap(lambda v: lax.axis_index("i") * 100 + lax.axis_index("j"), axis_name="j"),
                     axis_name="i")(x),
            jax.vmap(lambda r: jax.vmap(lambda v: lax.all_gather(v, "i"))(r), axis_name="i")(x),
            jax.vmap(lambda r: jax.vmap(lambda v: lax.ppermute(v, "i", [(0, 1), (1, 2), (2, 3), (3, 0)]),
                                        in_axes=0)(r), axis_name="i")(x),
        )

    _same(libs, case)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_inside_shard_map_with_mesh_axes(libs, jitted):
    """check_vma=False: with check_vma=True JAX 0.10.2 fails on these with a bare AssertionError,
    where meshsim computes the same values."""
    x = np.arange(16.0, dtype=np.float32).reshape(4, 4)

    def case(jax):
        lax, jnp = jax.lax, jax.numpy
        P = jax.sharding.PartitionSpec
        mesh = jax.make_mesh((2,), ("d",))
        xs = jax.device_put(x, jax.sharding.NamedSharding(mesh, P("d")))
        outs = []
        for body in (lambda v: lax.psum(v, "d") + lax.psum(v, "b") + lax.axis_index("b"),
                     lambda v: lax.psum(v, ("b", "d")),
                     lambda v: lax.all_gather(v, "b").sum(0) * lax.axis_index("d"),
                     lambda v: jax.grad(lambda w: lax.pmean(jnp.sum(w * v), "b"))(v)):
            f = jax.shard_map(lambda blk, body=body: jax.vmap(body, axis_name="b")(blk), mesh=mesh,
                              in_specs=P("d"), out_specs=P("d"), check_vma=False)
            outs.append((jax.jit(f) if jitted else f)(xs))
        return outs

    _same(libs, case)


def test_errors():
    jax = meshsim
    x = _x()
    with pytest.raises(NameError, match="unbound axis name: c"):
        jax.vmap(lambda v: jax.lax.psum(v, "c"), axis_name="b")(x)
    with pytest.raises(ValueError, match="needs a permutation of all 4 indices"):
        jax.vmap(lambda v: jax.lax.ppermute(v, "b", [(0, 1)]), axis_name="b")(x)
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'pmax'"):
        jax.vmap(jax.grad(lambda v: jax.lax.pmax(v, "b").sum()), axis_name="b")(x)

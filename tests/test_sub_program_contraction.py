"""Products contracted into fused multiply-adds inside sub-programs, as XLA compiles them:
the bodies of scan, fori_loop and while_loop, cond and switch branches (called eagerly or
under jit: JAX compiles a control-flow primitive either way). shard_map bodies under jit are
contracted by XLA too, not yet by meshsim (an eager shard_map runs its body operation by
operation, uncontracted, in both). Bit for bit with JAX over random shapes, trip counts and
dtypes."""
import numpy as np
import pytest

import x64_mode
from test_fma_contraction import assert_same_bits, differing

RNG = np.random.default_rng(0)


def loop_programs(lib):
    lax = lib.lax

    def scan(a, b, c, n):
        return lax.scan(lambda carry, x: (carry * x + a, carry - x * c), b, lib.numpy.stack([c] * n))

    def fori(a, b, c, n):
        return lax.fori_loop(0, n, lambda i, x: x * c + a, b)

    def while_(a, b, c, n):
        return lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * c - a), (0, b))[1]

    def cond(a, b, c, n):
        return lax.cond(n % 2 == 0, lambda x: x * c + a, lambda x: a - x * c, b)

    def switch(a, b, c, n):
        return lax.switch(n % 3, [lambda x: x * c + a, lambda x: x - c * a, lambda x: (x + a) * c], b)

    return {"scan": scan, "fori_loop": fori, "while_loop": while_, "cond": cond, "switch": switch}


def _args(rng, shape, dtype):
    return [rng.standard_normal(shape).astype(dtype) for _ in range(3)]


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", ["scan", "fori_loop", "while_loop", "cond", "switch"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_loop_and_branch_bodies_contract_as_jax(real_jax, name, dtype, jitted):
    import meshsim
    with x64_mode.x64(meshsim, real_jax, enabled=dtype == "float64"):
        contracted = 0
        for trial in range(3):
            rng = np.random.default_rng([len(name), trial, jitted])
            shape = tuple(int(v) for v in rng.integers(1, 40, rng.integers(1, 3)))
            args = _args(rng, shape, dtype)
            n = int(rng.integers(1, 6))
            ours_f, theirs_f = loop_programs(meshsim)[name], loop_programs(real_jax)[name]
            if jitted:
                ours_f = meshsim.jit(ours_f, static_argnums=3)
                theirs_f = real_jax.jit(theirs_f, static_argnums=3)
            ours, theirs = ours_f(*args, n), theirs_f(*args, n)
            for o, t in zip(real_jax.tree.leaves(ours), real_jax.tree.leaves(theirs)):
                assert_same_bits(o, t)
            # The cases tell contraction apart: unfused arithmetic gives other bits.
            with meshsim.disable_jit(), real_jax.disable_jit():
                unfused = real_jax.tree.leaves(loop_programs(real_jax)[name](*args, n))
            contracted += sum(differing(u, t) for u, t in zip(unfused, real_jax.tree.leaves(theirs)))
        assert contracted > 0


def _shard_map_case(lib, mesh_shape):
    from functools import partial
    P = lib.sharding.PartitionSpec
    mesh = lib.make_mesh(mesh_shape, ("x",), axis_types=(lib.sharding.AxisType.Explicit,))
    sharding = lib.sharding.NamedSharding(mesh, P("x"))

    @partial(lib.shard_map, mesh=mesh, in_specs=P("x"), out_specs=(P("x"), P()))
    def body(a, b, c):
        y = a * b + c
        return y, lib.lax.psum(c * a - b, "x")

    return body, sharding


@pytest.mark.parametrize("jitted", [False, pytest.param(True, marks=pytest.mark.xfail(
    strict=True, reason="the shard_map bodies of jitted programs run uncontracted"))], ids=["eager", "jit"])
def test_shard_map_bodies_contract_under_jit_only(real_jax, jitted):
    import meshsim
    for trial in range(3):
        rng = np.random.default_rng([trial, jitted])
        devices = int(rng.choice([2, 4, 8]))
        shape = (devices * int(rng.integers(1, 9)),)
        host = _args(rng, shape, np.float32)
        results = []
        for lib in (meshsim, real_jax):
            body, sharding = _shard_map_case(lib, (devices,))
            args = [lib.device_put(a, sharding) for a in host]
            results.append((lib.jit(body) if jitted else body)(*args))
        for o, t in zip(*results):
            assert_same_bits(o, t)
        unfused = host[0] * host[1] + host[2]
        assert (differing(unfused, results[1][0]) > 0) == (jitted and differing(
            unfused, (host[0].astype(np.float64) * host[1] + host[2]).astype(np.float32)) > 0)

"""Explicit sharding, the notebook's workload: a jitted `x @ w` with
x: float32[1024@dp,4096] and w: float32[4096,256@tp] on a (4, 2) mesh (each
device multiplies its own blocks), and the two reshards of its result
(to P(): an all-gather; to P('tp', 'dp'): an all-to-all), meshsim vs JAX CPU
with 8 host devices, interleaved in one run. Prints medians and the ratio
meshsim / JAX (the goal is <= 0.7x)."""
from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # idle BLAS pools must not steal the cores

import numpy as np  # noqa: E402

M, K, N = 1024, 4096, 256


def setup(jax):
    """The notebook's inputs and three jitted programs for library `jax`."""
    P = jax.sharding.PartitionSpec
    NamedSharding = jax.sharding.NamedSharding
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.standard_normal((M, K), dtype=np.float32), NamedSharding(mesh, P("dp", None)))
    w = jax.device_put(rng.standard_normal((K, N), dtype=np.float32), NamedSharding(mesh, P(None, "tp")))
    with jax.set_mesh(mesh):
        matmul = jax.jit(lambda a, b: a @ b)
        y = matmul(x, w)
        gather = jax.jit(lambda a: jax.sharding.reshard(a, P()))
        swap = jax.jit(lambda a: jax.sharding.reshard(a, P("tp", "dp")))
        gather(y), swap(y)  # compile
    return mesh, {"matmul": lambda: matmul(x, w), "reshard P()": lambda: gather(y),
                  "reshard P(tp,dp)": lambda: swap(y)}, (x, w, y, gather, swap)


def timed(fn, jax, mesh, inner: int) -> float:
    with jax.set_mesh(mesh):
        start = time.perf_counter()
        for _ in range(inner):
            out = fn()
        jax.block_until_ready(out)
    return (time.perf_counter() - start) / inner


def main(repeats: int = 15):
    import jax
    import meshsim

    libs = {"meshsim": meshsim, "jax": jax}
    setups = {name: setup(lib) for name, lib in libs.items()}
    # Both compute the same values.
    (_, _, (mx, mw, my, mg, ms)), (_, _, (jx, jw, jy, jg, js)) = setups["meshsim"], setups["jax"]
    np.testing.assert_allclose(np.asarray(my), np.asarray(jy), rtol=1e-3, atol=1e-2)
    with meshsim.set_mesh(setups["meshsim"][0]):
        np.testing.assert_array_equal(np.asarray(mg(my)), np.asarray(my))
        np.testing.assert_array_equal(np.asarray(ms(my)), np.asarray(my))
        with meshsim.debug.record_collectives() as log:
            meshsim.block_until_ready((mg(my), ms(my), setups["meshsim"][1]["matmul"]()))
    print("meshsim collectives (matmul, reshard P(), reshard P(tp,dp)):")
    for c in log:
        print(f"  {c.name} over {c.axes}: {c.bytes / 1024:.0f} KiB per device")

    workloads = list(setups["meshsim"][1])
    samples = {(lib, w): [] for lib in libs for w in workloads}
    inner = {"matmul": 3, "reshard P()": 20, "reshard P(tp,dp)": 20}
    for _ in range(repeats):
        for w in workloads:
            for lib in libs:  # interleaved: noise hits both alike
                mesh, fns, _ = setups[lib]
                samples[(lib, w)].append(timed(fns[w], libs[lib], mesh, inner[w]))

    print(f"\n{'workload':<20}{'meshsim (ms)':>14}{'jax (ms)':>12}{'meshsim/jax':>14}")
    for w in workloads:
        ms_t = statistics.median(samples[("meshsim", w)]) * 1e3
        jx_t = statistics.median(samples[("jax", w)]) * 1e3
        print(f"{w:<20}{ms_t:>14.3f}{jx_t:>12.3f}{ms_t / jx_t:>13.2f}x")


if __name__ == "__main__":
    main()

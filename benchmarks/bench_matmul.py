"""`x @ w` for float32 1024x4096 @ 4096x256 (the notebook's layer size):
meshsim eager and jitted vs NumPy (and JAX's jit when installed), side by side
in one run, interleaved so that machine noise hits every contender alike.
Prints the median of the repeats and the ratios to NumPy and JAX; also reports which
BLAS libraries are loaded (meshsim links the system OpenBLAS, NumPy bundles its own)."""
from __future__ import annotations

import os

from _timing import configure_jax_cpu, interleaved, median, print_table

configure_jax_cpu()
# NumPy's wheel bundles its own OpenBLAS, so this process holds two BLAS thread
# pools. An idle OpenBLAS pool spins for a while after each call; on a 2-core
# machine the pool of whichever library ran last then steals the cores of the
# next one (meshsim measured 1.5x slower interleaved than alone; NumPy suffers
# likewise). A short spin makes the side-by-side comparison fair. Both
# libraries read the variable when they load; set it to "" to see the effect.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402  (after the environment it reads)

M, K, N = 1024, 4096, 256


def loaded_blas() -> list[str]:
    """The BLAS shared objects mapped into this process (Linux), e.g. libopenblas."""
    try:
        with open("/proc/self/maps") as maps:
            libs = {line.split()[-1] for line in maps if "blas" in line.lower()}
    except OSError:
        return ["(unknown: no /proc/self/maps)"]
    return sorted(os.path.basename(p) for p in libs if p.startswith("/"))


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((M, K), dtype=np.float32)
    w = rng.standard_normal((K, N), dtype=np.float32)

    import meshsim
    import meshsim.numpy as mnp
    mx, mw = mnp.asarray(x), mnp.asarray(w)
    matmul = meshsim.jit(lambda a, b: a @ b)
    contenders = {
        "numpy": lambda: x @ w,
        "meshsim eager": lambda: (mx @ mw).block_until_ready(),
        "meshsim jit": lambda: matmul(mx, mw).block_until_ready(),
    }
    try:
        import jax
        import jax.numpy as jjnp
        jx, jw = jjnp.asarray(x), jjnp.asarray(w)
        jmatmul = jax.jit(lambda a, b: a @ b)
        contenders["jax jit"] = lambda: jmatmul(jx, jw).block_until_ready()
    except ImportError:
        pass

    np.testing.assert_allclose(np.asarray(mx @ mw), x @ w, rtol=1e-3, atol=1e-2)
    samples = interleaved(contenders, repeats=15)
    medians = {name: median(ts) for name, ts in samples.items()}
    flops = 2 * M * K * N
    extra = {name: {"GFLOP/s": f"{flops / t / 1e9:.1f}"} for name, t in medians.items()}
    print(f"BLAS libraries loaded: {', '.join(loaded_blas())}; "
          f"OPENBLAS_THREAD_TIMEOUT={os.environ['OPENBLAS_THREAD_TIMEOUT']!r}")
    print_table(f"float32 [{M},{K}] @ [{K},{N}] (median of 15, interleaved)", medians,
                unit="ms", scale=1e3, baselines=("numpy", "jax jit"), extra=extra)

if __name__ == "__main__":
    main()

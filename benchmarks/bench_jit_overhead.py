"""Per-call overhead of a jitted 20-op elementwise/reduction function on
small (64x64) arrays: meshsim vs JAX's jit on CPU, side by side in one run."""
from __future__ import annotations

import os
import time

import numpy as np

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


def twenty_ops(jnp):
    def f(x, y):
        a = x * y + x          # 2
        b = jnp.sin(a) - y     # 4
        c = jnp.exp(-b * b)    # 7
        d = jnp.maximum(c, x)  # 8
        e = d * 0.5 + y * 2.0  # 12
        g = jnp.tanh(e) * a    # 14
        h = g - jnp.sqrt(jnp.abs(d) + 1.0)  # 18
        return h.sum() + h.max()           # 20
    return f


def best_time(fn, *args, repeats=7, number=200) -> float:
    fn(*args).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            out = fn(*args)
        out.block_until_ready()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def main():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 64), dtype=np.float32)
    y = rng.standard_normal((64, 64), dtype=np.float32)
    results = {}

    import meshsim
    import meshsim.numpy as mnp
    f = meshsim.jit(twenty_ops(mnp))
    results["meshsim"] = best_time(f, mnp.asarray(x), mnp.asarray(y))

    try:
        import jax
        import jax.numpy as jjnp
        g = jax.jit(twenty_ops(jjnp))
        results["jax"] = best_time(g, jjnp.asarray(x), jjnp.asarray(y))
    except ImportError:
        pass

    for name, t in results.items():
        print(f"{name:8s} {t * 1e6:8.1f} us/call")
    if "jax" in results:
        print(f"ratio meshsim/jax: {results['meshsim'] / results['jax']:.2f}")


if __name__ == "__main__":
    main()

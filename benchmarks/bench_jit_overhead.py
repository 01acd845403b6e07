"""Per-call time of a jitted 20-op elementwise/reduction function on small
(64x64 float32) arrays: meshsim's jit vs JAX's jit on CPU vs NumPy running the
same 20 ops eagerly, side by side in one run.

At this size the arithmetic itself takes microseconds, so the numbers measure
what a call costs around it: argument handling, cache look-up and dispatch
(meshsim: Python, then the C++ interpreter running one kernel per equation;
JAX: its C++ dispatch, then one fused XLA executable). "meshsim program.run"
is meshsim's C++ part alone; the difference to "meshsim jit" is the Python
side of a call.

Two tables: calls in a row with only the last one waited for (JAX dispatches
asynchronously, so its calls overlap), and every call waited for (latency)."""
from __future__ import annotations

import numpy as np

from _timing import configure_jax_cpu, interleaved, median, print_table, wait

configure_jax_cpu()


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


def table(title: str, contenders: dict, repeats: int, number: int) -> dict[str, float]:
    samples = interleaved(contenders, repeats, number)
    best = {name: min(s) for name, s in samples.items()}
    extra = {name: {"median": f"{median(s) * 1e6:.2f}"} for name, s in samples.items()}
    print_table(f"{title} (best and median of {repeats} x {number} calls, interleaved)", best,
                unit="us", scale=1e6, baselines=("jax jit", "numpy"), extra=extra)
    return best


def main(repeats: int = 15, number: int = 200):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 64), dtype=np.float32)
    y = rng.standard_normal((64, 64), dtype=np.float32)
    expected = twenty_ops(np)(x, y)

    import meshsim
    import meshsim.numpy as mnp
    mx, my = mnp.asarray(x), mnp.asarray(y)
    f = meshsim.jit(twenty_ops(mnp))
    program = f.lower(mx, my).compiler_ir()  # the C++ program, run without jit's Python side
    contenders = {
        "meshsim jit": lambda: f(mx, my),
        "meshsim program.run": lambda: program.run([mx, my]),
        "numpy": lambda: twenty_ops(np)(x, y),
    }
    try:
        import jax
        import jax.numpy as jjnp
        g = jax.jit(twenty_ops(jjnp))
        jx, jy = jjnp.asarray(x), jjnp.asarray(y)
        contenders["jax jit"] = lambda: g(jx, jy)
    except ImportError:
        print("(JAX is not installed: no JAX column)")
    for name, fn in contenders.items():
        out = fn()
        np.testing.assert_allclose(np.asarray(out[0] if isinstance(out, list) else out), expected,
                                   rtol=1e-4, err_msg=name)

    versions = [f"meshsim {meshsim.__version__}", f"numpy {np.__version__}"]
    if "jax jit" in contenders:
        versions.append(f"jax {jax.__version__}")
    print(", ".join(versions))
    best = table("20 ops on float32[64,64], calls in a row", contenders, repeats, number)
    print(f"meshsim Python side of a call (jit - program.run): "
          f"{(best['meshsim jit'] - best['meshsim program.run']) * 1e6:.2f} us\n")
    waited = {name: (lambda fn=fn: wait(fn())) for name, fn in contenders.items()}
    table("the same, every call waited for", waited, repeats, number)


if __name__ == "__main__":
    main()

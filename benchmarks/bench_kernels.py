"""Kernel benchmarks, meshsim vs NumPy vs JAX side by side: an elementwise chain,
XLA's own transcendental functions (exp, log, tanh, erf), reductions, transposes and the notebook's matmul. Each meshsim and JAX case is one
jitted function on one device (meshsim dispatching synchronously, so a call is its
kernels on the calling thread); NumPy runs the same operations eagerly. Prints the
medians of wall and CPU milliseconds per call (CPU time, every thread's, is the
steadier figure on a loaded machine) and meshsim's ratios to NumPy and JAX, the
contenders interleaved so that machine noise hits them alike. Every contender's
result is checked against NumPy's first."""
from __future__ import annotations

import argparse

from _timing import configure_jax_cpu, interleaved_wall_and_cpu, load_average, median

configure_jax_cpu()

import numpy as np  # noqa: E402  (after the environment it reads)


def cases(rng):
    """name -> (operands, function of (numpy-like module, lax-like module, *operands))."""
    f32 = lambda *shape: rng.standard_normal(shape, dtype=np.float32)
    x, y = f32(1024, 1024), f32(1024, 1024)
    square, cube = f32(2048, 2048), f32(64, 256, 256)
    bytes_ = rng.integers(0, 255, (4096, 4096), dtype=np.uint8)
    acts, weights = f32(1024, 4096), f32(4096, 256) / np.float32(64)
    small = f32(64, 63)  # under 4096 elements: XLA's own loops, not YNNPACK
    c64 = (f32(1024, 1024) + 1j * f32(1024, 1024)).astype(np.complex64)
    long = f32(1 << 22)  # bench_low_precision's elementwise operand

    def chain(m, _, a, b):
        return m.tanh(a * np.float32(1.5) + b) * m.exp(-(a * a)) + m.sin(b) - m.sqrt(m.abs(a))

    def chain_with_multiply_adds(m, _, a):
        # Under jit, both products are contracted with the sums reading them (as XLA's CPU code does).
        return m.tanh(a * np.float32(0.5) + np.float32(1.0)) * a - a * a + np.float32(2.0)

    def transpose(perm):
        # meshsim's lax.copy lays the result out inside the call (a transpose alone is a view
        # there); XLA always lays out a jitted function's result, and jax.lax has no copy.
        def run(m, lax, a):
            if lax is None:
                return np.ascontiguousarray(a.transpose(perm))
            out = lax.transpose(a, perm)
            return lax.copy(out) if hasattr(lax, "copy") else out
        return run

    def erf(m, lax, a):
        if lax is None:
            from scipy.special import erf as scipy_erf
            return scipy_erf(a)
        return lax.erf(a)

    positive = np.abs(x) + np.float32(0.01)
    return {
        "elementwise chain (8 ops) f32[1024,1024]": ((x, y), chain),
        "elementwise chain (7 ops, 2 multiply-adds) f32[4194304]": ((long,), chain_with_multiply_adds),
        "x * x - x (a multiply-add) f32[4194304]": ((long,), lambda m, _, a: a * a - a),
        "x + x f32[4194304]": ((long,), lambda m, _, a: a + a),
        "exp f32[1024,1024]": ((x,), lambda m, _, a: m.exp(a)),
        "log f32[1024,1024]": ((positive,), lambda m, _, a: m.log(a)),
        "tanh f32[1024,1024]": ((x,), lambda m, _, a: m.tanh(a)),
        "erf f32[1024,1024]": ((x,), erf),
        "sum axis 0 f32[2048,2048]": ((square,), lambda m, _, a: m.sum(a, axis=0)),
        "sum axis 1 f32[2048,2048]": ((square,), lambda m, _, a: m.sum(a, axis=1)),
        "sum axis 0 f32[64,63]": ((small,), lambda m, _, a: m.sum(a, axis=0)),
        "sum axis 1 f32[64,63]": ((small,), lambda m, _, a: m.sum(a, axis=1)),
        "sum axis 0 c64[1024,1024]": ((c64,), lambda m, _, a: m.sum(a, axis=0)),
        "sum axis 1 c64[1024,1024]": ((c64,), lambda m, _, a: m.sum(a, axis=1)),
        "max axis 1 f32[2048,2048]": ((square,), lambda m, _, a: m.max(a, axis=1)),
        "mean all f32[2048,2048]": ((square,), lambda m, _, a: m.mean(a)),
        "transpose f32[2048,2048]": ((square,), transpose((1, 0))),
        "transpose (0,2,1) f32[64,256,256]": ((cube,), transpose((0, 2, 1))),
        "transpose u8[4096,4096]": ((bytes_,), transpose((1, 0))),
        "matmul f32[1024,4096] @ [4096,256]": ((acts, weights), lambda m, _, a, b: m.matmul(a, b)),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--only", default="", help="run only the cases whose name contains this")
    args = parser.parse_args()

    import meshsim
    import meshsim.numpy as mnp
    from meshsim import lax as mlax
    meshsim.config.update("jax_cpu_enable_async_dispatch", False)
    try:
        import jax
        import jax.numpy as jnp
        from jax import lax as jlax
    except ImportError:
        jax = None

    rng = np.random.default_rng(0)
    rows = []
    for name, (operands, fn) in cases(rng).items():
        if args.only not in name:
            continue
        want = fn(np, None, *operands)
        contenders = {"numpy": lambda: fn(np, None, *operands)}
        ms_program = meshsim.jit(lambda *xs, fn=fn: fn(mnp, mlax, *xs))
        ms_operands = [mnp.asarray(v) for v in operands]
        contenders["meshsim"] = lambda: ms_program(*ms_operands)
        if jax is not None:
            jax_program = jax.jit(lambda *xs, fn=fn: fn(jnp, jlax, *xs))
            jax_operands = [jax.device_put(v) for v in operands]
            contenders["jax"] = lambda: jax_program(*jax_operands)
        for who, call in contenders.items():
            np.testing.assert_allclose(np.asarray(call()), want, rtol=2e-3, atol=2e-3, err_msg=f"{name}: {who}")
        samples = interleaved_wall_and_cpu(contenders, repeats=args.repeats)
        rows.append((name, {who: tuple(median([s[k] for s in samples[who]]) for k in (0, 1))
                            for who in contenders}))

    who_all = [w for w in ("numpy", "meshsim", "jax") if w in rows[0][1]]
    print(f"Kernels: median ms per call of {args.repeats} interleaved repeats ({load_average()})")
    width = max(len(r[0]) for r in rows) + 2
    for k, kind in ((0, "wall"), (1, "cpu")):
        heads = [f"{w} {kind}" for w in who_all] + [f"ms / {w}" for w in who_all if w != "meshsim"]
        print(" " * width + "".join(f"{h:>13s}" for h in heads))
        for name, times in rows:
            cells = [f"{times[w][k] * 1e3:.2f}" for w in who_all]
            cells += [f"{times['meshsim'][k] / times[w][k]:.2f}x" for w in who_all if w != "meshsim"]
            print(f"{name:{width}s}" + "".join(f"{c:>13s}" for c in cells))


if __name__ == "__main__":
    main()

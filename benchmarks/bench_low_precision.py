"""bfloat16 against float32, side by side with JAX on CPU: an elementwise chain
over 4M elements and the notebook's 1024x4096 @ 4096x256 matmul. meshsim
computes bfloat16 in float32 and rounds back to nearest even (as XLA on CPU
does); the goal is a bf16 elementwise op at most 1.5x its float32 time and a
bf16 matmul at most 1.3x. Prints the medians of interleaved repeats, wall and
CPU ms per call (CPU time, every thread's, is the steadier figure on a loaded
machine), and the load average."""
from __future__ import annotations

import os

from _timing import configure_jax_cpu, interleaved_wall_and_cpu, load_average, median, print_table

configure_jax_cpu()
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # see bench_matmul.py

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}


def chain(m, x):
    """Seven elementwise ops, one of them transcendental."""
    return m.tanh(x * 0.5 + 1.0) * x - x * x + 2.0


def run(title, make_args, fn_of):
    import jax
    import meshsim

    contenders, args = {}, {}
    for tag, dtype in DTYPES.items():
        host = make_args(dtype)
        margs = [meshsim.numpy.asarray(a) for a in host]
        jargs = [jax.numpy.asarray(a) for a in host]
        mf, jf = meshsim.jit(fn_of(meshsim.numpy)), jax.jit(fn_of(jax.numpy))
        contenders[f"meshsim jit {tag}"] = lambda mf=mf, a=margs: mf(*a)
        contenders[f"jax jit {tag}"] = lambda jf=jf, a=jargs: jf(*a)
        args[tag] = (margs, jargs)
    samples = interleaved_wall_and_cpu(contenders, repeats=11)
    for k, kind in ((0, "wall"), (1, "cpu")):
        rows = {name: median([s[k] for s in runs]) for name, runs in samples.items()}
        print_table(f"{title}, {kind} ({load_average()})", rows, unit="ms", scale=1e3,
                    baselines=("meshsim jit f32", "jax jit f32"))
        for who in ("meshsim", "jax"):
            print(f"  {who}: bf16 / f32 = {rows[f'{who} jit bf16'] / rows[f'{who} jit f32']:.2f}x ({kind})")
    print()


def main():
    rng = np.random.default_rng(0)
    run("elementwise chain, 4M elements",
        lambda d: [rng.standard_normal(1 << 22).astype(np.float32).astype(d)],
        lambda m: lambda x: chain(m, x))
    run("matmul 1024x4096 @ 4096x256",
        lambda d: [rng.standard_normal((1024, 4096)).astype(np.float32).astype(d),
                   rng.standard_normal((4096, 256)).astype(np.float32).astype(d)],
        lambda m: lambda a, b: a @ b)


if __name__ == "__main__":
    main()

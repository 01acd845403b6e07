"""One training step (loss and every gradient) of the GPT of examples/gpt.py
for each strategy of the mesh zoo on 8 devices — the single-device step,
pipeline schedules over "pp", context parallelism over "cp", Megatron
sequence parallelism over "tp" and their products with DP/FSDP — meshsim
against JAX on CPU with 8 host devices, the same code under both, inputs
placed once, calls interleaved so machine noise hits both alike. Each side's
wall and CPU time (all its threads) per step, the best of the samples: on a
shared machine the best is the steadier figure, and a wall time far above the
CPU time means time spent waiting for a core rather than computing.

Run: PYTHONPATH=python python3 benchmarks/bench_mesh_zoo.py [--repeats N] [--only TEXT]"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

from _timing import (  # noqa: E402
    configure_jax_cpu,
    interleaved_wall_and_cpu,
    load_average,
    print_wall_and_cpu,
)

configure_jax_cpu(8)
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

import ex_zoo_pipeline  # noqa: E402
import gpt  # noqa: E402
import zoo_parallel  # noqa: E402

STRATEGIES = {
    "pp8 gpipe, 8 microbatches": ("pipeline", dict(name="gpipe", stages=8, microbatches=8)),
    "pp8 1f1b, 8 microbatches": ("pipeline", dict(name="1f1b", stages=8, microbatches=8)),
    "pp4 interleaved x2, 4 mb": ("pipeline", dict(name="interleaved", stages=4, microbatches=4)),
    "dp2 x cp4 ring, balanced": ("mesh", ((2, 4), ("dp", "cp"), dict(attention="ring"))),
    "dp2 x cp4 all-gather KV": ("mesh", ((2, 4), ("dp", "cp"), dict(attention="allgather"))),
    "dp2 x tp4 sequence par.": ("mesh", ((2, 4), ("dp", "tp"), {})),
    "dp2 x cp2 x tp2": ("mesh", ((2, 2, 2), ("dp", "cp", "tp"), {})),
    "fsdp2 x cp2 x tp2": ("mesh", ((2, 2, 2), ("fsdp", "cp", "tp"), {})),
}


def thunk(jax, kind, spec):
    """(step thunk, its result as NumPy leaves)."""
    if kind == "single":
        model = gpt.build(jax)
        args = (gpt.init_params(jax), *gpt.init_batch(jax))
        f = jax.jit(jax.value_and_grad(model["loss"]))
    elif kind == "pipeline":
        env = ex_zoo_pipeline.build(jax, **spec)
        f, args = env["train_step"], env["args"]
    else:
        shape, names, kwargs = spec
        env = zoo_parallel.build(jax, shape, names, **kwargs)
        f, args = env["loss_and_grads"], env["args"]
    return lambda: f(*args)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=3, help="calls per sample")
    parser.add_argument("--only", default="", help="only the strategies whose name contains this")
    args = parser.parse_args()

    import jax as real_jax
    import meshsim

    rows = {name: row for name, row in {"single device": ("single", None), **STRATEGIES}.items()
            if args.only in name}
    calls = {}
    for name, (kind, spec) in rows.items():
        calls[("meshsim", name)] = thunk(meshsim, kind, spec)
        calls[("jax", name)] = thunk(real_jax, kind, spec)
        ours = [np.asarray(x) for x in meshsim.tree.leaves(calls[("meshsim", name)]())]
        theirs = [np.asarray(x) for x in real_jax.tree.leaves(calls[("jax", name)]())]
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, atol=3e-5, rtol=3e-5, err_msg=name)

    load_before = load_average()
    samples = interleaved_wall_and_cpu(calls, args.repeats, args.number)
    cfg = gpt.CONFIG
    print(f"one training step of the GPT (vocab {cfg.vocab}, seq {cfg.seq}, dim {cfg.dim}, "
          f"{cfg.heads} heads, batch {cfg.batch}; pipelines {2} layers per chunk) per strategy on 8 "
          f"devices; best of {args.repeats} interleaved samples of {args.number} calls; "
          f"{load_before} before, {load_average()} after\n")
    print_wall_and_cpu(samples, rows, label="strategy", width=28, per="step")


if __name__ == "__main__":
    main()

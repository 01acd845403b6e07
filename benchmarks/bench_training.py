"""One training step (`jit(value_and_grad(...))`: loss and every gradient) of
the seed notebook's MLP (32-128-256-128-4, batch 16) for each strategy of
examples/ex_training.py — baseline, DP, FSDP (two weight layouts), TP,
FSDP+TP — meshsim vs JAX on CPU with 8 host devices, the same code under both,
interleaved so machine noise hits both alike. Inputs are placed once as each
strategy's in_specs say. Also the first call (trace + compile + run) of a
freshly built step, meshsim vs JAX.

Run: PYTHONPATH=python python3 benchmarks/bench_training.py [--repeats N]"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

from _timing import configure_jax_cpu, interleaved, median, print_table, wait  # noqa: E402

configure_jax_cpu(8)
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

import ex_training  # noqa: E402

NAMES = ("baseline",) + ex_training.STRATEGIES


def step_thunk(env, name):
    """A thunk running one step of `name` on inputs placed beforehand."""
    if name == "baseline":
        f, args = env["loss_baseline"], (env["model"], env["batch"])
    else:
        f, (mspec, bspec) = env["strategies"][name]
        args = (env["place"](env["model"], mspec), env["place"](env["batch"], bspec))
    return lambda: f(*args)


def leaves(jax, out):
    return [np.asarray(x) for x in jax.tree.leaves(out)]


def first_calls(module, names):
    """Seconds of the first call of each strategy's step, freshly built (so
    jit traces, differentiates and compiles it), inputs already placed."""
    env = ex_training.build(module)
    times = {}
    for name in names:
        thunk = step_thunk(env, name)
        t0 = time.perf_counter()
        wait(thunk())
        times[name] = time.perf_counter() - t0
    return times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--number", type=int, default=20, help="calls per sample")
    args = parser.parse_args()

    import jax as real_jax
    import meshsim

    # First calls before anything else has warmed either side's caches
    # (imports and the PRNG/init programs are outside the timed region).
    first = {"meshsim": first_calls(meshsim, NAMES), "jax": first_calls(real_jax, NAMES)}

    ours, theirs = ex_training.build(meshsim), ex_training.build(real_jax)
    calls = {}
    for name in NAMES:
        calls[("meshsim", name)] = step_thunk(ours, name)
        calls[("jax", name)] = step_thunk(theirs, name)
        for a, b in zip(leaves(meshsim, calls[("meshsim", name)]()),
                        leaves(real_jax, calls[("jax", name)]())):
            np.testing.assert_allclose(a, b, atol=1e-5, rtol=0, err_msg=name)

    samples = interleaved(calls, args.repeats, args.number)
    med = {k: median(v) for k, v in samples.items()}
    print(f"one value_and_grad step of the notebook's MLP (32-128-256-128-4, batch 16) on a "
          f"('dp': 4, 'tp': 2) mesh; median of {args.repeats} interleaved samples of "
          f"{args.number} calls; {os.cpu_count()} cores\n")
    print(f"{'strategy':12s}{'meshsim us':>12s}{'JAX us':>10s}{'meshsim/JAX':>13s}"
          f"{'1st call: meshsim ms':>22s}{'JAX ms':>10s}{'meshsim/JAX':>13s}")
    for name in NAMES:
        m, j = med[("meshsim", name)], med[("jax", name)]
        fm, fj = first["meshsim"][name], first["jax"][name]
        print(f"{name:12s}{m * 1e6:12.0f}{j * 1e6:10.0f}{m / j:12.2f}x"
              f"{fm * 1e3:22.1f}{fj * 1e3:10.1f}{fm / fj:12.3f}x")
    print()
    print_table("steady-state step, all contenders (ratios to the JAX baseline step)",
                {f"{who} {name}": med[(who, name)] for name in NAMES for who in ("meshsim", "jax")},
                unit="us", scale=1e6, baselines=("jax baseline",))


if __name__ == "__main__":
    main()

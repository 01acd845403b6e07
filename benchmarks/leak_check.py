"""Resident memory over long runs: 10^5 jitted calls, 10^5 eager ops and 10^3
mesh + jit creations (each jitting a shard_map with a collective), each phase
sampled in tenths. Prints the RSS and the thread count after each tenth, the RSS
growth from the second tenth (after caches and pools warm up) to the last, and the
threads left once idle dispatch streams have ended. Asserts nothing about speed;
exits non-zero if a phase grows by more than --limit MiB.

    PYTHONPATH=python python3 benchmarks/leak_check.py [--scale 1.0] [--limit 32]
"""
import argparse
import gc
import os
import sys
import time

import numpy as np

import meshsim as jax
import meshsim.numpy as jnp
from meshsim import _core, lax
from meshsim.sharding import Mesh, PartitionSpec as P


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def phase(name, n, step, limit):
    samples, counts = [], []
    tenth = max(1, n // 10)
    for i in range(n):
        step(i)
        if (i + 1) % tenth == 0:
            jax.block_until_ready(jnp.zeros(()))
            gc.collect()
            samples.append(rss_mib())
            counts.append(threads())
    growth = samples[-1] - samples[1] if len(samples) > 1 else 0.0
    print(f"{name:<28} n={n:<7} RSS MiB by tenth: {' '.join(f'{s:.0f}' for s in samples)}  "
          f"growth after warm-up: {growth:+.1f} MiB\n{'':<38} threads by tenth: {' '.join(map(str, counts))}")
    return growth <= limit


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--limit", type=float, default=32.0)
    args = ap.parse_args()
    mesh = Mesh(np.array(jax.devices()), ("x",))
    step = jax.jit(lambda w, x: w - 0.01 * jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w) ** 2))(w))
    w, x = jnp.ones((16, 16)), jnp.ones((8, 16))
    state = {"w": w}

    def jitted(i):
        state["w"] = step(state["w"], x)
        if i % 1000 == 0:
            jax.block_until_ready(state["w"])

    a = jnp.arange(64.0)

    def eager(i):
        jnp.sum(jnp.sin(a) * 2.0 + a)

    devices = np.array(jax.devices())

    def creations(i):
        ids = [(i + k) % 8 for k in range(2 + i % 7)]
        m = Mesh(devices[sorted(set(ids))], ("x",))
        f = jax.jit(jax.shard_map(lambda v: lax.psum(v, "x"), mesh=m, in_specs=P("x"), out_specs=P()))
        np.asarray(f(jnp.arange(float(m.size))))

    baseline_threads = threads()
    ok = True
    ok &= phase("jitted training steps", int(1e5 * args.scale), jitted, args.limit)
    ok &= phase("eager ops", int(1e5 * args.scale), eager, args.limit)
    ok &= phase("mesh + jit creations", int(1e3 * args.scale), creations, args.limit)
    # Streams of device sets no longer used end after a while: wait for the idle ones.
    idle_wait = time.monotonic() + 30
    while threads() > baseline_threads and time.monotonic() < idle_wait:
        time.sleep(0.5)
    print(f"threads: {baseline_threads} before the phases, {threads()} at the end "
          f"({_core.num_dispatch_streams()} dispatch streams)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

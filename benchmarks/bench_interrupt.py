"""Ctrl-C latency: a long program of each kind (jitted fori_loop, jitted and
eager shard_map, eager products that are single huge BLAS calls) is started
in a fresh process, which sends itself SIGINT 0.5 s later
(tests/stress/interrupted_program.py). Prints, per kind, the milliseconds
from the signal to KeyboardInterrupt in the waiting read, and to every device
having unwound (nothing dispatched still running). JAX raises within ~100 ms.

    PYTHONPATH=python python3 benchmarks/bench_interrupt.py [--repeats 5]
"""
import argparse
import os
import statistics
import subprocess
import sys

import meshsim

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "stress", "interrupted_program.py")
KINDS = ("jit", "shard_map", "eager_shard_map", "blas")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(meshsim.__file__)))
    print(f"{'kind':<16} {'interrupt ms (median / max)':>28} {'unwound ms (median / max)':>28}")
    for kind in KINDS:
        lat, unw = [], []
        for _ in range(args.repeats):
            p = subprocess.run([sys.executable, SCRIPT, kind], capture_output=True, text=True,
                               env=env, timeout=300)
            if p.returncode != 0:
                sys.exit(f"{kind}: {p.stdout[-500:]}{p.stderr[-2000:]}")
            _, a, b = p.stdout.split()
            lat.append(1000 * float(a))
            unw.append(1000 * float(b))
        print(f"{kind:<16} {statistics.median(lat):>19.0f} / {max(lat):<6.0f} "
              f"{statistics.median(unw):>19.0f} / {max(unw):<6.0f}")


if __name__ == "__main__":
    main()

"""Runs random shard_map programs (programs.py) on JAX and meshsim and
reports the programs whose outcomes differ (values beyond float32 rounding,
or one raising where the other does not, or a different exception type).

    PYTHONPATH=python python3 tests/fuzz/differential.py [--seed S] [--count N] [--batch B]

A long run (--count 10000) takes a while; it prints each mismatch's program."""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "hostile"))
import programs  # noqa: E402
import sweep  # noqa: E402


def _close(a, b) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x[0] != y[0] or x[1] != y[1]:
            return False
        vx = np.array([np.nan if v is None else v for v in x[2]], dtype=float)
        vy = np.array([np.nan if v is None else v for v in y[2]], dtype=float)
        # float32 rounding, scaled to the array's magnitude (a gradient through a
        # saturated tanh cancels digits of values near 1).
        scale = max(1.0, float(np.nanmax(np.abs(vy)))) if vy.size and not np.isnan(vy).all() else 1.0
        if not np.allclose(vx, vy, rtol=2e-4, atol=5e-5 * scale, equal_nan=True):
            return False
    return True


def differ(j: dict, m: dict) -> str | None:
    if "crash" in m:
        return f"meshsim crashed: {m['detail']}"
    if "ok" in j and "ok" in m:
        return None if _close(j["ok"], m["ok"]) else "values differ"
    if "error" in j and "error" in m:
        return None if j["type"] == m["type"] or j["error"] in m["bases"] else \
            f"jax {j['type']}: {j['message'][:100]} / meshsim {m['type']}: {m['message'][:100]}"
    if "error" in j:
        return f"meshsim accepts; jax raises {j['type']}: {j['message'][:150]}"
    if "crash" in j:
        return None
    return f"meshsim raises {m['type']}: {m['message'][:150]}; jax accepts"


def run(seed: int, count: int, batch: int = 250):
    found = []
    for start in range(0, count, batch):
        progs = programs.programs(seed * 1_000_003 + start, min(batch, count - start))
        jr = sweep.run_cases("jax", progs, timeout=3600)
        mr = sweep.run_cases("meshsim", progs, timeout=3600)
        for p, j, m in zip(progs, jr, mr):
            d = differ(j, m)
            if d:
                found.append((p, d))
    return found


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=250)
    args = ap.parse_args()
    found = run(args.seed, args.count, args.batch)
    for p, d in found:
        print(f"--- {d}\n{p}")
    print(f"{args.count} programs, {len(found)} mismatches")

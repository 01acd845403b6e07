"""Runs random shard_map programs (programs.py) on JAX and meshsim and
reports the programs whose outcomes differ (values beyond float32 rounding,
or one raising where the other does not, or a different exception type).

    PYTHONPATH=python python3 tests/fuzz/differential.py [--seed S] [--count N] [--batch B] [--log F]

A long run (--count 10000) takes hours on a loaded 2-core machine; it prints
each mismatch's program. With --log, each finished batch is appended to F as
a JSON line (its programs' range, time, mismatches) and a rerun with the same
arguments skips the batches F already holds, so the run can be stopped and
resumed (scripts/fuzz-long does this in the background)."""
import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

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


def _logged_batches(log: str | None) -> dict:
    if not log or not os.path.exists(log):
        return {}
    with open(log) as f:
        entries = [json.loads(line) for line in f if line.startswith("{")]
    return {(e["seed"], e["start"], e["count"]): e for e in entries}


def oracle_form(program: str) -> str:
    """The program as JAX runs it: an eager shard_map call is made under jit.
    JAX gives the same values and errors either way, and its eager shard_map
    compiles each operation for the mesh separately (seconds per program,
    tens of seconds for a gradient), which made JAX most of a run's time.
    meshsim still runs the eager form."""
    return program.replace("\ng = f\n", "\ng = jax.jit(f)\n")


class Pair:
    """Long-lived JAX and meshsim workers (tests/hostile/sweep.Worker) running
    the same batches side by side."""

    def __init__(self, timeout: float = 600, jax_eager: bool = False):
        self.jax, self.meshsim = sweep.Worker("jax", timeout), sweep.Worker("meshsim", timeout)
        self.jax_eager = jax_eager

    def run(self, progs: list[str]) -> list[tuple[str, dict, dict]]:
        oracle = progs if self.jax_eager else [oracle_form(p) for p in progs]
        with ThreadPoolExecutor(2) as pool:
            jr = pool.submit(self.jax.run, oracle)
            mr = pool.submit(self.meshsim.run, progs)
            return list(zip(progs, jr.result(), mr.result()))

    def close(self):
        self.jax.close()
        self.meshsim.close()


def check(progs: list[str], timeout: float = 600) -> tuple[list, list]:
    """Runs the programs on both; returns (JAX outcomes, [(program, difference)])."""
    pair = Pair(timeout)
    try:
        outcomes = pair.run(progs)
    finally:
        pair.close()
    return [j for _, j, _ in outcomes], [(p, d) for p, j, m in outcomes if (d := differ(j, m))]


def check_oracle_form(seed: int, count: int) -> tuple[int, list]:
    """Runs the eager programs among `count` on JAX as written and under jit
    (oracle_form); returns how many were compared and those that differ."""
    eager = [p for p in programs.programs(seed * 1_000_003, count) if oracle_form(p) != p]
    worker = sweep.Worker("jax")
    try:
        as_written, jitted = worker.run(eager), worker.run([oracle_form(p) for p in eager])
    finally:
        worker.close()
    return len(eager), [(p, d) for p, a, b in zip(eager, as_written, jitted) if (d := differ(a, b))]


def run(seed: int, count: int, batch: int = 100, log: str | None = None, jax_eager: bool = False):
    found = []
    done = _logged_batches(log)
    pair = Pair(jax_eager=jax_eager)
    try:
        for start in range(0, count, batch):
            n = min(batch, count - start)
            if (seed, start, n) in done:
                found.extend((p, d) for p, d in done[(seed, start, n)]["mismatches"])
                continue
            began = time.monotonic()
            outcomes = pair.run(programs.programs(seed * 1_000_003 + start, n))
            batch_found = [(p, d) for p, j, m in outcomes if (d := differ(j, m))]
            found.extend(batch_found)
            if log:
                entry = dict(seed=seed, start=start, count=n, seconds=round(time.monotonic() - began, 1),
                             valid=sum("ok" in j for _, j, _ in outcomes), mismatches=batch_found,
                             restarts=pair.jax.restarts + pair.meshsim.restarts,
                             oracle="eager" if jax_eager else "jit")
                with open(log, "a") as f:
                    f.write(json.dumps(entry) + "\n")
    finally:
        pair.close()
    return found


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--jax-eager", action="store_true",
                    help="run eager programs eagerly on JAX too (slow; checks oracle_form)")
    ap.add_argument("--log", help="append finished batches here; skip those already there")
    ap.add_argument("--summary", action="store_true",
                    help="only report what --log holds so far (programs, rate, mismatches)")
    ap.add_argument("--check-oracle", action="store_true",
                    help="only compare JAX's eager and jitted runs of the eager programs among --count")
    args = ap.parse_args()
    if args.check_oracle:
        n, differing = check_oracle_form(args.seed, args.count)
        for p, d in differing:
            print(f"--- {d}\n{p}")
        print(f"{n} eager programs, {len(differing)} differ under jit")
        sys.exit(1 if differing else 0)
    if args.summary:
        entries = list(_logged_batches(args.log).values())
        n, secs = sum(e["count"] for e in entries), sum(e["seconds"] for e in entries)
        for e in entries:
            for p, d in e["mismatches"]:
                print(f"--- {d}\n{p}")
        print(f"{n} programs in {secs / 3600:.2f} h ({n / max(secs, 1e-9):.2f}/s), "
              f"{sum(e['valid'] for e in entries)} valid under JAX, "
              f"{sum(len(e['mismatches']) for e in entries)} mismatches")
        sys.exit(0)
    found = run(args.seed, args.count, args.batch, args.log, args.jax_eager)
    for p, d in found:
        print(f"--- {d}\n{p}")
    print(f"{args.count} programs, {len(found)} mismatches")

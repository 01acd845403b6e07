"""The concurrency stress test at full size: many threads x thousands of
mixed calls (eager, jitted, shard_map with collectives, donation, reads of
pending results, shared and disjoint meshes), every result checked against
NumPy, under a faulthandler watchdog that dumps all stacks on a hang.

    PYTHONPATH=python python3 benchmarks/stress_concurrency.py [THREADS] [CALLS] [SEEDS]
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "stress"))
import concurrent_calls  # noqa: E402

if __name__ == "__main__":
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    seeds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    for seed in range(seeds):
        start = time.monotonic()
        rc = concurrent_calls.main(threads, calls, seed, watchdog=1800)
        print(f"seed {seed}: {threads} threads x {calls} calls in {time.monotonic() - start:.1f} s")
        if rc:
            sys.exit(rc)

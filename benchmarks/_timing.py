"""What the benchmarks share: the environment JAX must see before it is
imported, interleaved timing (machine noise hits every contender alike) and
the side-by-side table."""
from __future__ import annotations

import os
import statistics
import time
from typing import Callable


def configure_jax_cpu(num_devices: int = 8) -> None:
    """JAX on CPU with `num_devices` host devices, as meshsim simulates; must run
    before `import jax`."""
    os.environ["JAX_PLATFORMS"] = "cpu"
    flag = f"--xla_force_host_platform_device_count={num_devices}"
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()


def interleaved(contenders: dict[str, Callable[[], object]], repeats: int,
                number: int = 1) -> dict[str, list[float]]:
    """Seconds per call of each contender, `repeats` samples of `number` calls,
    the contenders taking turns; each is called once first (traces, caches).
    A sample ends when the last call's result is ready, so asynchronous
    dispatch may overlap the calls within a sample."""
    for fn in contenders.values():
        wait(fn())
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            for _ in range(number):
                out = fn()
            wait(out)
            samples[name].append((time.perf_counter() - t0) / number)
    return samples


def interleaved_wall_and_cpu(contenders: dict[str, Callable[[], object]], repeats: int,
                             number: int = 1) -> dict[str, list[tuple[float, float]]]:
    """As `interleaved`, but each sample is (wall seconds, CPU seconds) per
    call, the CPU time being the whole process's (every thread's) while the
    sample ran. On a loaded machine the wall time also counts the waits for a
    core (a thread handing work to another waits for it to be scheduled), the
    CPU time only the work: reading both tells the two apart."""
    for fn in contenders.values():
        wait(fn())
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(number):
                out = fn()
            wait(out)
            samples[name].append(((time.perf_counter() - t0) / number,
                                  (time.process_time() - c0) / number))
    return samples


def print_wall_and_cpu(samples: dict, names, *, label: str, width: int, per: str) -> None:
    """The meshsim-vs-JAX table of `interleaved_wall_and_cpu` samples keyed
    (contender, name): per name, the best wall and CPU ms of each side and
    meshsim's ratios to JAX."""
    best = {k: tuple(min(s[i] for s in v) for i in range(2)) for k, v in samples.items()}
    print(f"{label:{width}s}{'meshsim wall':>14s}{'cpu':>8s}{'JAX wall':>10s}{'cpu':>8s}"
          f"{'wall ratio':>12s}{'cpu ratio':>11s}   (ms per {per})")
    for name in names:
        (mw, mc), (jw, jc) = best[("meshsim", name)], best[("jax", name)]
        print(f"{name:{width}s}{mw * 1e3:14.2f}{mc * 1e3:8.2f}{jw * 1e3:10.2f}{jc * 1e3:8.2f}"
              f"{mw / jw:11.2f}x{mc / jc:10.2f}x")


def load_average() -> str:
    """The machine's 1-minute load average and core count, as a benchmark's
    table states them (its times depend on them)."""
    try:
        one = os.getloadavg()[0]
    except OSError:
        return f"{os.cpu_count()} cores"
    return f"load average {one:.1f} on {os.cpu_count()} cores"


def wait(out):
    """Blocks until `out` (an array, a tuple of them, or anything else) is ready."""
    for x in out if isinstance(out, (list, tuple)) else (out,):
        if hasattr(x, "block_until_ready"):
            x.block_until_ready()
    return out


def print_table(title: str, rows: dict[str, float], *, unit: str, scale: float,
                baselines: tuple[str, ...], extra: dict[str, dict[str, str]] | None = None) -> None:
    """One row a contender: its time in `unit` (seconds * `scale`), any extra
    columns, and its ratio to each baseline present (time / baseline time)."""
    baselines = tuple(b for b in baselines if b in rows)
    extra = extra or {}
    extra_cols = sorted({c for cols in extra.values() for c in cols})
    header = [f"{unit}/call", *extra_cols, *(f"/ {b}" for b in baselines)]
    width = max(len(n) for n in rows) + 2
    print(title)
    print(" " * width + "".join(f"{h:>14s}" for h in header))
    for name, t in rows.items():
        cells = [f"{t * scale:.2f}"]
        cells += [extra.get(name, {}).get(c, "") for c in extra_cols]
        cells += [f"{t / rows[b]:.2f}x" for b in baselines]
        print(f"{name:{width}s}" + "".join(f"{c:>14s}" for c in cells))


def median(samples: list[float]) -> float:
    return statistics.median(samples)

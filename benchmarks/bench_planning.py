"""A dry run at real scale: one Llama-3-70B-shaped training step (80 layers,
hidden 8192, grouped-query attention, SwiGLU, every layer rematerialised,
Adam; examples/ex_planning.py) with FSDP x TP over the 4,096 chips of a TPU
v5p slice (16x16x16), lowered on ShapeDtypeStructs and compiled abstractly.
Prints how long the dry run takes and how much memory this process used, and
the plan's per-device memory and predicted step with its breakdown, for two
mesh shapes. JAX cannot compile this without the TPUs (or a TPU compiler).

Mixed precision in the program's own types: float32 parameters and Adam
moments, bfloat16 weights (cast per layer before the FSDP all-gather),
activations and matmuls; memory, bytes moved and matmul rates follow them.

Run: PYTHONPATH=python python3 benchmarks/bench_planning.py"""
from __future__ import annotations

import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

import meshsim as jax  # noqa: E402
from meshsim.experimental import topologies  # noqa: E402
from meshsim.profiler import estimate  # noqa: E402

import ex_planning  # noqa: E402


def main():
    start = time.perf_counter()
    topo = topologies.get_topology_desc("v5p:16x16x16")
    print(f"{topo}: {topo.num_devices} devices in {time.perf_counter() - start:.2f} s")
    for shape in ((512, 8), (1024, 4)):
        t0 = time.perf_counter()
        mesh = jax.make_mesh(shape, ("fsdp", "tp"), devices=topo.devices)
        step, args = ex_planning.llama_step(jax, ex_planning.LLAMA3_70B, mesh)
        t1 = time.perf_counter()
        compiled = step.lower(*args).compile()
        t2 = time.perf_counter()
        est = estimate(compiled)
        t3 = time.perf_counter()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"\nmesh fsdp={shape[0]} x tp={shape[1]}: mesh + arguments {t1 - t0:.2f} s, "
              f"trace + lower + compile {t2 - t1:.2f} s, estimate {t3 - t2:.2f} s; "
              f"peak RSS of this process {rss:.0f} MiB")
        stats = compiled.memory_analysis()
        print(stats.summary())
        print("live at the peak:")
        for label, n in list(stats.live_at_peak.items())[:6]:
            print(f"  {n / 2 ** 30:7.2f} GiB  {label}")
        cost = compiled.cost_analysis()
        print(f"flops per device {cost['flops']:.3e}; "
              + ", ".join(f"{k} {v / 2 ** 30:.1f} GiB" for k, v in cost.items()
                          if k.startswith("collective bytes (")))
        print(est)


if __name__ == "__main__":
    main()

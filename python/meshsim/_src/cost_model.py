"""The cost model: what a program run on the simulated mesh would take on real
hardware (`meshsim.profiler.estimate`).

The function is run once with the profiler's timeline recording (nothing is
written): every primitive each device ran comes with its flops and bytes
accessed (the `cost` hook of its primitive, ir/primitive.h), every collective
with its axes, replica group and the bytes each device sends and receives (as
ring schedules move them: an all-gather or reduce-scatter (n-1)/n of the
full value, an all-reduce twice that, an all-to-all (n-1)/n of the operand, a
ppermute the operand). Each is then timed on the chosen hardware:

- compute, a roofline per primitive: max(flops / peak flop/s, bytes accessed /
  HBM bandwidth), "compute" or "memory" bound;
- communication, alpha-beta per mesh axis: steps * alpha + bytes / bandwidth,
  with the steps of the collective's algorithm as its primitive's
  communication model gives them (ring all-reduce 2(n-1), all-gather,
  reduce-scatter and all-to-all n-1, ppermute 1: `Primitive::comm`, next to
  each collective) and the bandwidth of the links the replica group spans.

Assumptions (say them when quoting a number): nothing overlaps (a device's
time is the sum of its ops' and collectives' times) and the step time is the
slowest device's; primitives are not fused (each reads its operands from and
writes its results to HBM, so chains of elementwise ops are pessimistic);
every dtype runs at the chip's dense bf16 matmul rate (XLA's default precision
on TPU); a ring along a TPU torus axis uses both directions of its links
(wraparound) and a collective over k axes k axes' links; GPU devices fill
nodes of `devices_per_node` consecutive ids, and a replica group spanning
nodes goes at the network's (InfiniBand) bandwidth, otherwise NVLink's. Ops
the simulator runs on whole values (primitives without a sharded plan) count
in full on the device that ran them. Devices holding equal values compute
once in the simulator; the device that computed (the first of its group) is
charged, and the step time is the slowest device's."""
from __future__ import annotations

import dataclasses
from typing import Callable

from meshsim import _core
from meshsim._src import tree_util


@dataclasses.dataclass(frozen=True)
class Hardware:
    """One chip and its links. Bandwidths in bytes/s, latencies in seconds.

    `link_bandwidth` is what a ring along one mesh axis moves per device and
    second; `network_*` apply to replica groups spanning more than
    `devices_per_node` consecutive device ids (None: one network, the links)."""
    name: str
    peak_flops: float
    hbm_bandwidth: float
    link_bandwidth: float
    link_latency: float
    multi_axis_links: bool = False
    devices_per_node: int | None = None
    network_bandwidth: float | None = None
    network_latency: float | None = None


# Public numbers. TPUs: cloud.google.com/tpu/docs/v5e and /v5p (peak bf16
# flop/s, HBM bandwidth) and "How to Scale Your Model" (jax-ml.github.io/
# scaling-book, "How to think about TPUs": ICI one-way bandwidth per link
# 4.5e10 B/s on v5e, 9e10 on v5p; about 1 us per hop); a ring along a torus
# axis sends both ways, so twice that. H100 SXM: NVIDIA's datasheet (989 TFLOP/s
# dense bf16, 3.35 TB/s HBM3, NVLink 4 900 GB/s total = 450 GB/s each way;
# 8 GPUs per HGX node, one 400 Gb/s NDR InfiniBand NIC per GPU = 50 GB/s). The
# NVLink and InfiniBand latencies are assumed orders of magnitude (NCCL's per
# step latency), not measurements.
HARDWARE: dict[str, Hardware] = {
    "tpu-v5e": Hardware("tpu-v5e", peak_flops=1.97e14, hbm_bandwidth=8.1e11,
                        link_bandwidth=2 * 4.5e10, link_latency=1e-6, multi_axis_links=True),
    "tpu-v5p": Hardware("tpu-v5p", peak_flops=4.59e14, hbm_bandwidth=2.765e12,
                        link_bandwidth=2 * 9e10, link_latency=1e-6, multi_axis_links=True),
    "gpu-h100": Hardware("gpu-h100", peak_flops=9.89e14, hbm_bandwidth=3.35e12,
                         link_bandwidth=4.5e11, link_latency=2e-6, devices_per_node=8,
                         network_bandwidth=5e10, network_latency=5e-6),
}

def _hardware(hardware) -> Hardware:
    if isinstance(hardware, Hardware):
        return hardware
    try:
        return HARDWARE[hardware]
    except (KeyError, TypeError):
        raise ValueError(f"Unknown hardware {hardware!r}: pass a meshsim.profiler.Hardware or "
                         f"one of {sorted(HARDWARE)}") from None


def collective_time(hw: Hardware, steps: int, axes: tuple, group: tuple, bytes_moved: float):
    """Predicted seconds of one collective on one device taking `steps`
    latency terms: (time, link name)."""
    per_node = hw.devices_per_node
    if per_node and hw.network_bandwidth and len({d // per_node for d in group}) > 1:
        bandwidth, latency, link = hw.network_bandwidth, hw.network_latency, "network"
    else:
        bandwidth, latency, link = hw.link_bandwidth, hw.link_latency, "links"
        if hw.multi_axis_links:
            bandwidth *= max(len(axes), 1)
    return steps * latency + bytes_moved / bandwidth, link


def compute_time(hw: Hardware, flops: float, bytes_accessed: float):
    """Roofline time of one primitive: (time, "compute" or "memory")."""
    t_flops, t_memory = flops / hw.peak_flops, bytes_accessed / hw.hbm_bandwidth
    return (t_flops, "compute") if t_flops >= t_memory else (t_memory, "memory")


@dataclasses.dataclass
class OpEstimate:
    """One primitive or collective one device ran, timed on the hardware.
    `bound`: "compute" or "memory" for primitives; "links" or "network" for
    collectives."""
    name: str
    kind: str  # "compute" or "communication"
    time: float
    bound: str
    flops: float = 0.0
    bytes_accessed: float = 0.0
    bytes_sent: int = 0
    bytes_received: int = 0
    axes: tuple = ()
    group_size: int = 1
    count: int = 1  # executions (the trip count of loops around it); `time` is their total


@dataclasses.dataclass
class CostEstimate:
    """The predicted step time of a program on `hardware`: the slowest
    device's (`device`), split into compute and communication, with that
    device's ops in the order it ran them (`ops`) and every device's time."""
    hardware: Hardware  # or a TopologyDescription (estimates of compiled programs)
    device: int
    ops: list
    per_device: dict
    overlap: bool = False  # communication overlapped with independent compute
    scheduled_time: float | None = None  # the step as scheduled with overlap, when known

    @property
    def compute_time(self) -> float:
        return sum(o.time for o in self.ops if o.kind == "compute")

    @property
    def communication_time(self) -> float:
        return sum(o.time for o in self.ops if o.kind == "communication")

    @property
    def step_time(self) -> float:
        if self.scheduled_time is not None:
            return self.scheduled_time
        if self.overlap:
            return max(self.compute_time, self.communication_time)
        return self.compute_time + self.communication_time

    @property
    def flops(self) -> float:
        return sum(o.flops for o in self.ops)

    def communication_by_axes(self) -> dict:
        """Bytes the device receives, by the mesh axes of the collectives."""
        out: dict = {}
        for o in self.ops:
            if o.kind == "communication":
                out[o.axes] = out.get(o.axes, 0) + o.bytes_received
        return out

    def by_primitive(self) -> dict:
        """name -> (count, total seconds), slowest first."""
        out: dict = {}
        for o in self.ops:
            count, time = out.get(o.name, (0, 0.0))
            out[o.name] = (count + o.count, time + o.time)
        return dict(sorted(out.items(), key=lambda kv: -kv[1][1]))

    def __str__(self) -> str:
        lines = [f"{self.hardware.name}: step {_fmt(self.step_time)} on device {self.device} "
                 f"(compute {_fmt(self.compute_time)}, communication "
                 f"{_fmt(self.communication_time)})"]
        for name, (count, time) in self.by_primitive().items():
            lines.append(f"  {name:<22} x{count:<6} {_fmt(time)}")
        for axes, sent in self.communication_by_axes().items():
            lines.append(f"  sent over {', '.join(axes) or '-':<12} {sent / 2 ** 20:,.1f} MiB")
        return "\n".join(lines)

    __repr__ = __str__


def _fmt(seconds: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def estimate_events(events: list, hardware="tpu-v5e") -> CostEstimate:
    """The estimate of a recorded timeline (`_core.pop_timeline` tuples)."""
    hw = _hardware(hardware)
    per_device: dict[int, list] = {}
    for (name, category, device, _, _, flops, bytes_accessed, axes, group, sent, received,
         args) in events:
        if category == "op":
            time, bound = compute_time(hw, flops, bytes_accessed)
            op = OpEstimate(name, "compute", time, bound, flops=flops, bytes_accessed=bytes_accessed)
        elif category == "collective":
            time, bound = collective_time(hw, args["steps"], axes, group, max(sent, received))
            op = OpEstimate(name, "communication", time, bound, bytes_sent=sent,
                            bytes_received=received, axes=tuple(axes), group_size=len(group))
        else:
            continue
        per_device.setdefault(device, []).append(op)
    totals = {d: sum(o.time for o in ops) for d, ops in sorted(per_device.items())}
    device = max(totals, key=lambda d: (totals[d], -d)) if totals else 0
    return CostEstimate(hw, device, per_device.get(device, []), totals)


def estimate(fn: Callable, *args, hardware="tpu-v5e", topology=None, overlap: bool = False,
             as_dtype=None, **kwargs) -> CostEstimate:
    """Runs `fn(*args, **kwargs)` once on the simulated mesh and predicts its
    time on `hardware` (a name in `HARDWARE` or a `Hardware`). Tracing runs
    no kernels, so a jitted `fn` may be called here for the first time.

    `estimate(compiled)` of a `jit(f).lower(...).compile()` runs nothing: it
    times the abstract compilation's per-device ops on the topology its mesh's
    devices come from (or `topology`), with `_src/step_time.py`'s model; so
    does `estimate(fn, *args, topology="h100:8x1")` (device i of the mesh is
    the topology's device i)."""
    from meshsim._src.stages import Compiled
    from meshsim._src.step_time import estimate_compiled
    if isinstance(fn, Compiled):
        return estimate_compiled(fn, topology=topology, overlap=overlap, as_dtype=as_dtype)
    if topology is not None:  # the step-time model, on the program compiled abstractly
        from meshsim._src.api import jit
        staged = fn if hasattr(fn, "lower") else jit(fn)
        return estimate_compiled(staged.lower(*args, **kwargs).compile(), topology=topology,
                                 overlap=overlap, as_dtype=as_dtype)
    hw = _hardware(hardware)
    _core.push_timeline()
    try:
        out = fn(*args, **kwargs)
        for leaf in tree_util.tree_leaves(out):
            if hasattr(leaf, "block_until_ready"):
                leaf.block_until_ready()
    finally:
        events = _core.pop_timeline()
    return estimate_events(events, hw)


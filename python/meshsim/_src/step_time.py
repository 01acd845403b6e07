"""Step time of an abstractly compiled program on a topology
(`meshsim.profiler.estimate(compiled)`).

Each op of the per-device analysis (`_src/planning.py`) is timed on the
topology's chip and links, times its count (the trip count of the scans
around it); the device's step is their sum, or with `overlap=True` the
length of a two-stream schedule (`schedule`): collectives run on their own
stream, overlapping compute that does not read their results (and that they
do not wait for), as XLA's asynchronous collectives and Megatron-LM's
overlapped tensor-parallel communication do. Pipeline bubbles are
not added: a pipelined program's schedule (a scan over microbatches + stages
- 1 steps, every stage working at every step) holds them, so they are timed
like any other work. SPMD: every device runs the same ops, so this is every
device's time.

Compute, per primitive (a roofline with achievable, not peak, rates):
  time = max(flops / (peak(dtype) * matmul efficiency), bytes accessed /
  (HBM bandwidth * MEMORY_EFFICIENCY)) + OP_OVERHEAD for ops that write a
  buffer (fused ops only add their flops). Non-matmul flops run at the chip's
  vector rate. Matmul efficiency = MATMUL_EFFICIENCY[platform] x tile
  utilisation: the matrix unit computes whole tiles (`ChipSpec.matmul_tile`),
  so a dimension of 200 on a 128 tile computes 256; on GPUs the tiles are also
  spread in waves over the streaming multiprocessors, and a last partial wave
  idles the rest (wave quantisation). TPUs pad the contraction and the output
  columns to the MXU's size and stream the rows.

Communication, per collective (its ring bytes per device from the analysis;
its steps and XLA instruction as the primitive declares them,
`_core.collective_steps` and `_core.collective_instruction`):
  - NVLink through NVSwitch (a GPU node): NCCL's ring (Simple protocol); time
    = steps * (alpha + min(slice, NCCL_CHUNK) / B) + bytes / B, B = NVLink
    one-way bandwidth *
    NCCL_BUS_EFFICIENCY, slice = what one step forwards; the first chunk of
    each step waits for the step before (pipeline fill), which is what makes
    mid-size messages slow. All-to-all goes direct (one step).
  - between nodes (a group spanning nodes): the NIC per GPU at
    NETWORK_EFFICIENCY; all-reduces take the faster of a ring and NCCL's
    double binary tree (2 log2 n steps of latency, the same bytes);
  - TPU ICI: the group's torus dimensions are found from its devices'
    coordinates; each dimension's ring runs both ways when it wraps around
    (2 x link bandwidth) and one way otherwise; a collective over several
    dimensions runs them together (their bandwidths add, 2D/3D torus), with
    one hop of latency per ring step along each dimension.

Constants and their sources:
  MATMUL_EFFICIENCY: large bf16 GEMMs reach about 85% of dense peak with
    cuBLAS on A100 (NVIDIA's cuBLAS performance figures: ~265 of 312 TFLOP/s)
    and H100/B200 (~800 of 989); XLA on TPU MXUs about 85% (scaling-book,
    "Roofline" chapter: large matmuls run close to peak).
  MEMORY_EFFICIENCY: streaming kernels reach ~85-90% of HBM peak (STREAM-like
    measurements: ~1.75 of 2.04 TB/s on A100-80GB, ~2.9 of 3.35 on H100).
  OP_OVERHEAD: a GPU kernel's launch and tail, ~2 us (CUDA launch latency);
    an XLA TPU op ~0.5 us (assumed).
  NCCL: NCCL_BUS_EFFICIENCY 0.83 = 370 GB/s bus bandwidth / 450 GB/s NVLink 4
    (nccl-tests all_reduce_perf on 8xH100 at multi-GB messages); alpha 9.7 us
    and NCCL_CHUNK 8 MiB fit its ~150 GB/s at 58 MB (the same test). Slices of
    at most NCCL_LL_MAX_SLICE (64 KiB) go by NCCL's LL protocol: ~1 us a step
    (NCCL's tuning model: LL latencies of about a microsecond per hop), half
    the bandwidth (each 8-byte store carries 4 bytes of data and a flag); up
    to NCCL_LL128_MAX_SLICE (512 KiB) by LL128: ~3 us a step, 120 of every 128
    bytes data. The thresholds are assumptions standing for NCCL's protocol
    choice by size (its tuner picks the fastest protocol it allows).
  NETWORK_EFFICIENCY 0.9: InfiniBand NDR/HDR links run near line rate in
    nccl-tests across nodes (~45 of 50 GB/s per NIC).
  TPU ICI: link bandwidth and ~1 us per hop from the scaling book; no extra
    efficiency factor (XLA's ICI collectives run near link rate there)."""
from __future__ import annotations

import math

import numpy as np

from meshsim import _core
from meshsim._src import cost_model

MATMUL_EFFICIENCY = {"gpu": 0.85, "tpu": 0.85}
MEMORY_EFFICIENCY = {"gpu": 0.85, "tpu": 0.90}
OP_OVERHEAD = {"gpu": 2e-6, "tpu": 0.5e-6}
NCCL_BUS_EFFICIENCY = 0.83
NCCL_ALPHA = 9.7e-6
NCCL_CHUNK = 8 * 2 ** 20
NCCL_LL_ALPHA = 1e-6
NCCL_LL_MAX_SLICE = 64 * 1024
NCCL_LL128_ALPHA = 3e-6
NCCL_LL128_EFFICIENCY = 120 / 128
NCCL_LL128_MAX_SLICE = 512 * 1024
NETWORK_EFFICIENCY = 0.9


def _dtype_name(dtype) -> str:
    if dtype is None:
        return "float32"
    if isinstance(dtype, str):
        return dtype
    return np.dtype(dtype).name


def _peak(chip, dtype) -> float:
    name = _dtype_name(dtype)
    if name in chip.peak_flops:
        return chip.peak_flops[name]
    if name.startswith("float8"):
        return chip.peak_flops.get("float8_e4m3fn", chip.peak_flops["bfloat16"])
    if name.startswith("int") or name.startswith("uint"):
        return chip.peak_flops.get("int8", chip.peak_flops["bfloat16"])
    return chip.peak_flops["bfloat16"]


def _padded(n: int, tile: int) -> int:
    return -(-n // tile) * tile


def matmul_efficiency(chip, dims) -> float:
    """Fraction of peak a (batch, m, n, k) matmul reaches on `chip`."""
    batch, m, n, k = dims
    if min(batch, m, n, k) <= 0:
        return 1.0
    tm, tn = chip.matmul_tile
    base = MATMUL_EFFICIENCY[chip.platform]
    if chip.platform == "tpu":
        # The MXU holds a (k, n) block of tm x tn; rows stream through it.
        return base * (k / _padded(k, tm)) * (n / _padded(n, tn))
    tiles = batch * -(-m // tm) * -(-n // tn)
    waves = -(-tiles // chip.cores)
    util = (m * n * batch) / (tiles * tm * tn) * tiles / (waves * chip.cores)
    return base * util * (k / _padded(k, 64))


def _as(dtype, as_dtype) -> tuple:
    """(dtype to time at, bytes scale): float32 values timed as `as_dtype`."""
    if as_dtype is None or dtype is None or np.dtype(dtype) != np.float32:
        return dtype, 1.0
    return as_dtype, _itemsize(as_dtype) / 4


def _itemsize(dtype) -> int:
    name = _dtype_name(dtype)
    known = {"bfloat16": 2, "float16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1}
    return known[name] if name in known else np.dtype(name).itemsize


def compute_time(chip, op, as_dtype=None):
    """(seconds per execution, bound) of one primitive on one device."""
    platform = chip.platform
    dtype, scale = _as(op.dtype, as_dtype)
    if op.matmul_dims is not None:
        t_flops = op.flops / (_peak(chip, dtype) * matmul_efficiency(chip, op.matmul_dims))
    else:
        t_flops = op.flops / chip.vector_flops
    t_memory = op.bytes_accessed * scale / (chip.hbm_bandwidth * MEMORY_EFFICIENCY[platform])
    overhead = OP_OVERHEAD[platform] if op.bytes_accessed > 0 else 0.0
    if t_flops >= t_memory:
        return t_flops + overhead, "compute"
    return t_memory + overhead, "memory"


def _gpu_collective(topo, c, groups, sent) -> tuple:
    links = topo.links
    n = c.group_size
    nodes = groups // links.devices_per_node
    spans_nodes = bool((nodes.min(axis=1) != nodes.max(axis=1)).any())
    instruction = _core.collective_instruction(c.name)
    # NCCL runs an all-to-all as one group of direct sends; everything else as declared.
    steps = 1 if instruction == "all-to-all" else _core.collective_steps(c.name, n)
    if not spans_nodes:
        bw = links.link_bandwidth * NCCL_BUS_EFFICIENCY
        step_slice = sent / steps if steps else 0.0
        if step_slice <= NCCL_LL_MAX_SLICE:  # NCCL's LL protocol: flags halve the bandwidth
            return steps * NCCL_LL_ALPHA + 2 * sent / bw, "nvlink"
        if step_slice <= NCCL_LL128_MAX_SLICE:  # 120 data bytes in each 128-byte line
            return steps * NCCL_LL128_ALPHA + sent / (bw * NCCL_LL128_EFFICIENCY), "nvlink"
        slice_ = min(step_slice, NCCL_CHUNK)
        return steps * (NCCL_ALPHA + slice_ / bw) + sent / bw, "nvlink"
    bw = links.network_bandwidth * NETWORK_EFFICIENCY
    slice_ = min(sent / steps, NCCL_CHUNK) if steps else 0.0
    ring = steps * (links.network_latency + NCCL_ALPHA + slice_ / bw) + sent / bw
    if instruction == "all-reduce":
        tree_steps = 2 * math.ceil(math.log2(n))
        tree = tree_steps * (links.network_latency + NCCL_ALPHA) + sent / bw
        return min(ring, tree), "network"
    return ring, "network"


def _tpu_collective(topo, c, groups, sent) -> tuple:
    links = topo.links
    coords = topo.coords[groups[0]]
    extents = [len(np.unique(coords[:, d])) for d in range(coords.shape[1])]
    spanned = [d for d, e in enumerate(extents) if e > 1]
    if not spanned:
        return 0.0, "ici"
    bandwidth, hops = 0.0, 0
    for d in spanned:
        wraps = topo.wraps(d, extents[d])
        bandwidth += links.link_bandwidth * (2 if wraps else 1)
        per_ring = _core.collective_steps(c.name, extents[d])
        hops += per_ring // 2 if wraps else per_ring
    return hops * links.link_latency + sent / bandwidth, "ici"


def collective_time(topo, c, as_dtype=None) -> tuple:
    """(seconds per execution, link kind) of a collective on `topo`."""
    sent = float(c.bytes_sent) * _as(c.dtype, as_dtype)[1]
    if c.group_size <= 1 or c.bytes_sent == 0:
        return 0.0, "none"
    groups = c.replica_groups()
    if groups.max() >= topo.num_devices:
        raise ValueError(f"The mesh has device ids up to {groups.max()}, more than the "
                         f"{topo.num_devices} devices of {topo.name}")
    if topo.links.kind == "torus":
        return _tpu_collective(topo, c, groups, sent)
    return _gpu_collective(topo, c, groups, sent)


def estimate_compiled(compiled, topology=None, overlap: bool = False, as_dtype=None):
    """The predicted step of `compiled` on its topology (or `topology`, a name
    or description, for a mesh of CPU devices: device i is its device i).
    `as_dtype="bfloat16"` times float32 values as that type (matmul rate,
    bytes moved and stored): mixed precision for a program typed float32."""
    from meshsim._src import topologies
    topo = compiled.topology
    if topology is not None:
        topo = topology if isinstance(topology, topologies.TopologyDescription) \
            else topologies.get_topology_desc(topology)
    if topo is None:
        raise ValueError(f"{compiled.fun_name} was compiled for the simulated CPU devices: pass "
                         "topology='h100:8x32' (or another) or compile it on a mesh of a "
                         "topology's devices")
    ops = []
    per_run: dict[int, float] = {}  # seconds of one execution, by id(op)
    for op in compiled.analysis.ops:
        if op.collective is not None:
            t, bound = collective_time(topo, op.collective, as_dtype)
            per_run[id(op)] = t
            c = op.collective
            ops.append(cost_model.OpEstimate(
                op.name, "communication", t * op.count, bound, bytes_sent=c.bytes_sent * op.count,
                bytes_received=c.bytes_sent * op.count, axes=c.axes, group_size=c.group_size,
                count=op.count))
        elif op.flops or op.bytes_accessed:
            t, bound = compute_time(topo.chip, op, as_dtype)
            per_run[id(op)] = t
            ops.append(cost_model.OpEstimate(op.name, "compute", t * op.count, bound,
                                             flops=op.flops * op.count,
                                             bytes_accessed=op.bytes_accessed * op.count,
                                             count=op.count))
    total = sum(o.time for o in ops)
    scheduled = None
    if overlap:
        scheduled = schedule(compiled.analysis.top, per_run)
        total = scheduled
    return cost_model.CostEstimate(topo, 0, ops, {0: total}, overlap=overlap,
                                   scheduled_time=scheduled)


def schedule(block: list, per_run: dict) -> float:
    """Seconds to run a program's ops on two streams, compute and
    communication, each in program order: an op starts when the ops whose
    results it reads have finished and its stream is free (XLA's asynchronous
    collectives, NCCL's communication stream). An op running sub-programs
    (a scan over layers, a remat, a shard_map body) waits for both streams and
    takes its bodies' scheduled time per run; iterations do not overlap."""
    compute_free = comm_free = 0.0
    finish: dict[int, float] = {}
    for op in block:
        ready = max((finish.get(id(d), 0.0) for d in op.deps), default=0.0)
        own = per_run.get(id(op), 0.0)
        if op.children:
            start = max(ready, compute_free, comm_free)
            end = start + own + sum(schedule(b, per_run) * runs for b, runs in op.children)
            compute_free = comm_free = end
        elif op.collective is not None:
            start = max(ready, comm_free)
            end = comm_free = start + own
        else:
            start = max(ready, compute_free)
            end = compute_free = start + own
        finish[id(op)] = end
    return max(compute_free, comm_free)

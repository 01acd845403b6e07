"""Hardware descriptions for dry runs: `get_topology_desc("v5p:8x8x16")` gives
the devices of a TPU slice or GPU cluster, with the public specs of its chips
and links. Meshes are built from `topology.devices` (`make_mesh(...,
devices=topo.devices)` or `Mesh(...)`); programs over them can be lowered and
compiled on ShapeDtypeStructs (abstract compilation) but not run.

Sources of the numbers (per chip; bandwidths in bytes/s, one direction unless
said otherwise):
- TPU v4, v5e, v5p, v6e: Google Cloud's system-architecture pages
  (cloud.google.com/tpu/docs/v4, /v5e, /v5p, /v6e: peak bf16 and int8 flop/s,
  HBM capacity and bandwidth) and "How to Scale Your Model" (Austin et al.,
  jax-ml.github.io/scaling-book, "How to Think About TPUs": ICI one-way
  bandwidth per link 4.5e10 (v4, v5e) and 9e10 (v5p, v6e), about 1 us per hop;
  v4 and v5p are 3D tori whose axes wrap around when the slice spans a
  multiple of 4 chips along them (optical switches join 4x4x4 cubes); v5e and
  v6e are 2D tori that wrap around only along a full axis of 16).
- A100-80GB SXM: NVIDIA A100 datasheet (312 TFLOP/s dense bf16/fp16, 156 tf32,
  19.5 fp32; 80 GB HBM2e at 2.039 TB/s; NVLink 3 600 GB/s in total = 300 each
  way, through NVSwitch); DGX A100: 8 GPUs a node, one 200 Gb/s HDR
  InfiniBand NIC per GPU (25 GB/s).
- H100 SXM: NVIDIA H100 datasheet (989 TFLOP/s dense bf16, 1979 fp8, 494.5
  tf32, 67 fp32; 80 GB HBM3 at 3.35 TB/s; NVLink 4 900 GB/s = 450 each way);
  DGX H100: 8 GPUs, one 400 Gb/s NDR NIC per GPU (50 GB/s).
- B200: NVIDIA DGX B200 datasheet (72 PFLOP/s fp8 training for 8 GPUs = 4.5
  dense fp8 each, 2.25 PFLOP/s dense bf16; 1,440 GB of HBM3e = 180 GB each at
  8 TB/s; NVLink 5 1.8 TB/s = 900 GB/s each way); 8 ConnectX-7 400 Gb/s NICs.
Achievable fractions of these peaks (efficiencies) live with the time model,
`_src/step_time.py`."""
from __future__ import annotations

import dataclasses
import math
import re

import numpy as np

from meshsim._src import devices as devices_lib


@dataclasses.dataclass(frozen=True)
class ChipSpec:
    """One accelerator. `peak_flops`: dense matmul flop/s by dtype name
    (float32 is what the platform's default precision runs float32 dots at:
    bf16 passes on TPU, tf32 on NVIDIA GPUs); `vector_flops`: flop/s of
    elementwise work; `matmul_tile`: the (m, n) tile a matrix unit computes;
    `cores`: streaming multiprocessors (GPU) that tiles are spread over."""
    device_kind: str
    platform: str
    peak_flops: dict
    vector_flops: float
    hbm_bytes: int
    hbm_bandwidth: float
    matmul_tile: tuple
    cores: int = 1


@dataclasses.dataclass(frozen=True)
class Interconnect:
    """Links. TPU: ICI links per torus axis, `link_bandwidth` one way per link.
    GPU: NVLink through NVSwitch within a node of `devices_per_node` (one way
    per GPU), `network_bandwidth` the NIC per GPU between nodes."""
    kind: str  # "torus" or "nvswitch"
    link_bandwidth: float
    link_latency: float
    wraparound: str = "none"  # torus: "multiple-of-4", "full-16"
    devices_per_node: int = 0
    network_bandwidth: float = 0.0
    network_latency: float = 0.0


_TiB = 2 ** 40
_GiB = 2 ** 30

CHIPS = {
    "v4": ChipSpec("TPU v4", "tpu", {"bfloat16": 2.75e14, "float32": 2.75e14, "int8": 2.75e14},
                   vector_flops=2.75e13, hbm_bytes=32 * _GiB, hbm_bandwidth=1.2e12,
                   matmul_tile=(128, 128)),
    "v5e": ChipSpec("TPU v5 lite", "tpu", {"bfloat16": 1.97e14, "float32": 1.97e14,
                                           "int8": 3.94e14},
                    vector_flops=1.97e13, hbm_bytes=16 * _GiB, hbm_bandwidth=8.19e11,
                    matmul_tile=(128, 128)),
    "v5p": ChipSpec("TPU v5", "tpu", {"bfloat16": 4.59e14, "float32": 4.59e14, "int8": 9.18e14},
                    vector_flops=4.59e13, hbm_bytes=95 * _GiB, hbm_bandwidth=2.765e12,
                    matmul_tile=(128, 128)),
    "v6e": ChipSpec("TPU v6 lite", "tpu", {"bfloat16": 9.18e14, "float32": 9.18e14,
                                           "int8": 1.836e15},
                    vector_flops=9.18e13, hbm_bytes=32 * _GiB, hbm_bandwidth=1.64e12,
                    matmul_tile=(256, 256)),
    "a100-80gb": ChipSpec("NVIDIA A100-SXM4-80GB", "gpu",
                          {"bfloat16": 3.12e14, "float16": 3.12e14, "float32": 1.56e14,
                           "int8": 6.24e14},
                          vector_flops=1.95e13, hbm_bytes=80 * 10 ** 9, hbm_bandwidth=2.039e12,
                          matmul_tile=(128, 256), cores=108),
    "h100": ChipSpec("NVIDIA H100 80GB HBM3", "gpu",
                     {"bfloat16": 9.89e14, "float16": 9.89e14, "float32": 4.945e14,
                      "float8_e4m3fn": 1.979e15, "int8": 1.979e15},
                     vector_flops=6.7e13, hbm_bytes=80 * 10 ** 9, hbm_bandwidth=3.35e12,
                     matmul_tile=(128, 256), cores=132),
    "b200": ChipSpec("NVIDIA B200", "gpu",
                     {"bfloat16": 2.25e15, "float16": 2.25e15, "float32": 1.1e15,
                      "float8_e4m3fn": 4.5e15, "int8": 4.5e15},
                     vector_flops=8.0e13, hbm_bytes=180 * 10 ** 9, hbm_bandwidth=8.0e12,
                     matmul_tile=(128, 256), cores=148),
}

LINKS = {
    "v4": Interconnect("torus", 4.5e10, 1e-6, wraparound="multiple-of-4"),
    "v5e": Interconnect("torus", 4.5e10, 1e-6, wraparound="full-16"),
    "v5p": Interconnect("torus", 9e10, 1e-6, wraparound="multiple-of-4"),
    "v6e": Interconnect("torus", 9e10, 1e-6, wraparound="full-16"),
    # NVLink per-hop latency and InfiniBand latency: NCCL's tuning model
    # (src/graph/tuning.cc: hardware latencies of a few us per step).
    "a100-80gb": Interconnect("nvswitch", 3.0e11, 1e-6, devices_per_node=8,
                              network_bandwidth=2.5e10, network_latency=5e-6),
    "h100": Interconnect("nvswitch", 4.5e11, 1e-6, devices_per_node=8,
                         network_bandwidth=5e10, network_latency=5e-6),
    "b200": Interconnect("nvswitch", 9.0e11, 1e-6, devices_per_node=8,
                         network_bandwidth=5e10, network_latency=5e-6),
}

_DEFAULT_SHAPES = {"v4": "4x4x4", "v5e": "16x16", "v5p": "8x8x16", "v6e": "16x16",
                   "a100-80gb": "8x64", "h100": "8x32", "b200": "8x16"}
_ALIASES = {"a100": "a100-80gb", "tpu v4": "v4", "v5litepod": "v5e", "v5lite": "v5e",
            "v6": "v6e", "trillium": "v6e", "h100-80gb": "h100"}


class TopologyDevice(devices_lib.MeshDevice):
    """A device of a topology description: it has an id, coordinates and a kind,
    and can be placed in a Mesh, but runs nothing."""

    __slots__ = ("id", "coords", "topology", "process_index")
    core_on_chip = 0

    def __init__(self, id: int, coords: tuple, topology: "TopologyDescription", process_index: int):
        self.id = id
        self.coords = coords
        self.topology = topology
        self.process_index = process_index

    @property
    def platform(self) -> str:
        return self.topology.chip.platform

    @property
    def device_kind(self) -> str:
        return self.topology.chip.device_kind

    @property
    def host_id(self) -> int:
        return self.process_index

    def __repr__(self):
        if self.platform == "tpu":
            return (f"TpuDevice(id={self.id}, process_index={self.process_index}, "
                    f"coords={self.coords}, core_on_chip=0)")
        return f"CudaDevice(id={self.id})"

    def __str__(self):
        return f"{self.platform.upper()}_{self.id}"

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __reduce__(self):
        return _device_of, (self.topology.name, self.id)


class TopologyDescription:
    """A TPU slice or GPU cluster: `.devices` (ordered by id: x fastest on a
    torus, GPUs node by node), `.chip`, `.links`, `.shape`."""

    def __init__(self, name: str, generation: str, shape: tuple):
        self.name = name
        self.generation = generation
        self.shape = shape
        self.chip = CHIPS[generation]
        self.links = LINKS[generation]
        self.platform = self.chip.platform
        self.device_kind = self.chip.device_kind
        n = math.prod(shape)
        if self.links.kind == "torus":
            # ids run over x fastest, then y, then z; a host holds 4 chips (2x2)
            coords = np.stack(np.unravel_index(np.arange(n), shape[::-1]), axis=1)[:, ::-1]
            self.coords = coords
            hosts = np.arange(n) // 4
        else:
            per_node = shape[0]
            self.coords = np.stack([np.arange(n) % per_node, np.arange(n) // per_node], axis=1)
            hosts = np.arange(n) // per_node
        self.devices = [TopologyDevice(i, tuple(int(c) for c in self.coords[i]), self, int(h))
                        for i, h in enumerate(hosts.tolist())]

    @property
    def num_devices(self) -> int:
        return len(self.devices)

    def wraps(self, dim: int, extent: int) -> bool:
        """Whether a ring over `extent` chips along torus dimension `dim` closes."""
        rule = self.links.wraparound
        if extent != self.shape[dim] or extent < 3:
            return False
        if rule == "multiple-of-4":
            return extent % 4 == 0
        if rule == "full-16":
            return extent == 16
        return False

    def __repr__(self):
        return f"TopologyDescription({self.name!r}, {self.num_devices} x {self.device_kind})"


_cache: dict[str, TopologyDescription] = {}


def get_topology_desc(topology_name: str = "", platform: str | None = None,
                      **kwargs) -> TopologyDescription:
    """The topology named like JAX's ("v5p:8x8x16", "v5e:16x16", "h100:8x32"
    = 8 GPUs a node x 32 nodes, or a generation alone for its default shape)."""
    text = topology_name.strip().lower()
    if not text and platform:
        text = platform.lower()
    generation, _, dims = text.partition(":")
    generation = _ALIASES.get(generation, generation)
    if generation not in CHIPS:
        raise ValueError(f"Unknown topology {topology_name!r}: expected one of "
                         f"{sorted(CHIPS)} followed by ':' and a shape such as "
                         f"{', '.join(f'{g}:{s}' for g, s in _DEFAULT_SHAPES.items())}")
    if platform is not None and platform.lower() not in (CHIPS[generation].platform, "cuda",
                                                         "rocm", generation):
        raise ValueError(f"Topology {topology_name!r} is a {CHIPS[generation].platform} "
                         f"topology, not {platform!r}")
    dims = dims or _DEFAULT_SHAPES[generation]
    if not re.fullmatch(r"\d+(x\d+)*", dims):
        raise ValueError(f"Bad topology shape {dims!r} in {topology_name!r}: expected sizes "
                         "joined by 'x', e.g. 8x8x16")
    shape = tuple(int(d) for d in dims.split("x"))
    torus = LINKS[generation].kind == "torus"
    if torus and len(shape) != (3 if generation in ("v4", "v5p") else 2):
        raise ValueError(f"A {generation} slice is a {3 if generation in ('v4', 'v5p') else 2}D "
                         f"torus; got shape {dims!r}")
    if not torus and len(shape) != 2:
        raise ValueError(f"A GPU cluster is GPUs-per-node x nodes, e.g. 8x32; got {dims!r}")
    name = f"{generation}:{'x'.join(map(str, shape))}"
    if name not in _cache:
        _cache[name] = TopologyDescription(name, generation, shape)
    return _cache[name]


def _device_of(name: str, id: int) -> TopologyDevice:
    return get_topology_desc(name).devices[id]


def topology_of_mesh(core_mesh) -> TopologyDescription | None:
    """The topology whose devices a mesh holds (None: the simulated CPU devices)."""
    from meshsim._src.sharding.mesh import Mesh
    mesh = Mesh.by_core(core_mesh)
    if mesh is None or mesh.empty:
        return None
    first = mesh.devices.flat[0]
    return first.topology if isinstance(first, TopologyDevice) else None

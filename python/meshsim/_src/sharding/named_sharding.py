"""Shardings: where the blocks of an array live.

`NamedSharding(mesh, spec)` splits each dimension over the mesh axes its spec
entry names; `SingleDeviceSharding(device)` keeps the whole array on one
device. Each converts to the C++ `ShardingCore` the runtime uses."""
from __future__ import annotations

import functools
import math

from meshsim import _core
from meshsim._src import devices as devices_lib
from meshsim._src.sharding.mesh import AbstractMesh, AxisType, Mesh
from meshsim._src.sharding.partition_spec import UNCONSTRAINED, PartitionSpec


class DuplicateSpecError(ValueError):
    """A PartitionSpec maps one mesh axis to more than one dimension."""


class IndivisibleError(ValueError):
    """A sharded dimension is not divisible by the number of its blocks."""


class Sharding:
    """Where each block of an array lives (the base of every sharding)."""

    is_fully_addressable = True

    @property
    def addressable_devices(self) -> set:
        return self.device_set

    def devices_indices_map(self, global_shape) -> dict:
        """For each device, the index (a tuple of slices) of its block in the global array."""
        if getattr(getattr(self, "spec", None), "unreduced", None):
            raise NotImplementedError("device_indices_map doesn't work with unreduced. Please file a "
                                      "bug at https://github.com/jax-ml/jax/issues")
        return self._block_indices(global_shape)

    def _block_indices(self, global_shape) -> dict:
        shape = tuple(global_shape)
        local = self.shard_shape(shape)
        tiling = self.tiling(len(shape))
        out = {}
        for pos, dev in enumerate(self._device_list()):
            blocks = self.core_sharding.block_index(pos, len(shape))
            out[dev] = tuple(slice(None) if t == 1 else slice(b * n, (b + 1) * n)
                             for b, n, t in zip(blocks, local, tiling))
        return out

    def addressable_devices_indices_map(self, global_shape) -> dict:
        return self.devices_indices_map(global_shape)

    @property
    def _device_assignment(self) -> tuple:
        """The devices in block order (JAX's private name, which checkpointing libraries use)."""
        return tuple(self._device_list())

    _addressable_device_assignment = _device_assignment  # every device is this process's

    def is_equivalent_to(self, other: Sharding, ndim: int) -> bool:
        """True if both put the same blocks on the same devices."""
        shape = (math.lcm(self.num_devices, other.num_devices),) * ndim
        try:
            return self.devices_indices_map(shape) == other.devices_indices_map(shape)
        except ValueError:
            return False


def _check_memory_kind(memory_kind):
    if memory_kind not in (None, "device"):
        raise ValueError(f"meshsim devices have only the 'device' memory kind, got {memory_kind!r}")


def make_single_device_sharding(device, *, memory_kind: str | None = None) -> "SingleDeviceSharding":
    return SingleDeviceSharding(device, memory_kind=memory_kind)


class SingleDeviceSharding(Sharding):
    """The whole array on one device."""

    def __init__(self, device, *, memory_kind: str | None = None):
        _check_memory_kind(memory_kind)
        self._device = device

    @property
    def memory_kind(self) -> str:
        return "device"

    @property
    def device_set(self) -> set:
        return {self._device}

    @property
    def num_devices(self) -> int:
        return 1

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def shard_shape(self, global_shape) -> tuple:
        return tuple(global_shape)

    def tiling(self, ndim: int) -> list[int]:
        return [1] * ndim

    def _device_list(self) -> list:
        return [self._device]

    @functools.cached_property
    def core_sharding(self) -> _core.ShardingCore:
        return _core.ShardingCore(None, [], device=self._device.id)

    def __eq__(self, other):
        return isinstance(other, SingleDeviceSharding) and other._device == self._device

    def __hash__(self):
        return hash((SingleDeviceSharding, self._device))

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind=device)"


def _entry_axes(entry) -> tuple:
    if entry is None or entry is UNCONSTRAINED:
        return ()
    return entry if isinstance(entry, tuple) else (entry,)


def check_no_duplicate_axes(spec: PartitionSpec) -> dict:
    """Raises as JAX does for a spec using a mesh axis twice; how often each axis is named."""
    counts: dict = {}
    for entry in spec.partitions:
        for axis in _entry_axes(entry):
            counts[axis] = counts.get(axis, 0) + 1
    duplicates = [a for a, c in counts.items() if c > 1]
    if duplicates:
        shown = ", ".join(sorted(f"`{a}`" for a in duplicates))
        raise DuplicateSpecError(
            "A single NamedSharding spec specification can map every mesh axis to at most one "
            f"positional dimension, but {spec} has duplicate entries for {shown}")
    return counts


def check_spec(mesh, spec: PartitionSpec) -> None:
    """Raises as JAX does for a spec naming axes the mesh lacks or using one twice."""
    counts = check_no_duplicate_axes(spec)
    for axis in counts:
        if axis not in mesh.axis_names:
            raise ValueError(
                f"Resource axis: {axis} of {spec} is not found in mesh: {tuple(mesh.axis_names)}.")
    if UNCONSTRAINED in spec.partitions and AxisType.Auto not in mesh.axis_types:
        raise ValueError(f"{spec} cannot contain `P.UNCONSTRAINED` when no mesh axis_types are "
                         f"`Auto`. Got mesh axis_types: {mesh.axis_types}")
    for name, axes in (("Unreduced", spec.unreduced), ("Reduced", spec.reduced)):
        for axis in axes:
            if axis not in mesh.axis_names:
                raise ValueError(f"{name} axes {axis} is not found in "
                                 f"mesh.axis_names={mesh.axis_names}. Got pspec={spec}")


class NamedSharding(Sharding):
    """`NamedSharding(mesh, spec)`: dimension d is split over the mesh axes
    `spec[d]` names (a tuple: their product, the first axis major) and
    replicated over the other axes."""

    def __init__(self, mesh: Mesh | AbstractMesh, spec: PartitionSpec, *,
                 memory_kind: str | None = None):
        if not isinstance(mesh, (Mesh, AbstractMesh)):
            raise TypeError(f"mesh of NamedSharding must be a Mesh or AbstractMesh, got {mesh!r}")
        if not isinstance(spec, PartitionSpec):
            raise TypeError(f"spec of NamedSharding must be a PartitionSpec, got {spec!r}")
        _check_memory_kind(memory_kind)
        check_spec(mesh, spec)
        self.mesh = mesh
        self.spec = spec

    @property
    def memory_kind(self) -> str | None:
        return "device" if isinstance(self.mesh, Mesh) else None

    def __repr__(self):
        memory = "" if self.memory_kind is None else f", memory_kind={self.memory_kind}"
        return f"NamedSharding(mesh={self.mesh}, spec={self.spec}{memory})"

    def __eq__(self, other):
        return (isinstance(other, NamedSharding) and self.spec == other.spec
                and self.mesh == other.mesh)

    def __hash__(self):
        return hash((NamedSharding, self.mesh, self.spec))

    def update(self, **kwargs) -> NamedSharding:
        return NamedSharding(kwargs.get("mesh", self.mesh), kwargs.get("spec", self.spec))

    @property
    def num_devices(self) -> int:
        return self.mesh.size

    @property
    def device_set(self) -> set:
        if isinstance(self.mesh, AbstractMesh):
            raise ValueError("device_set is not implemented for `jax.sharding.AbstractMesh`.")
        return set(self.mesh.devices.flat)

    def _device_list(self) -> list:
        return list(self.mesh.devices.flat)

    def tiling(self, ndim: int) -> list[int]:
        """The number of blocks along each of `ndim` dimensions."""
        sizes = self.mesh.shape
        return [math.prod(sizes[a] for a in _entry_axes(e)) for e in self.spec.partitions] + \
            [1] * (ndim - len(self.spec))

    @property
    def is_fully_replicated(self) -> bool:
        if self.mesh.size == 1:
            return True
        return not self.spec.unreduced and math.prod(self.tiling(len(self.spec))) == 1

    def check_compatible_aval(self, shape) -> None:
        if len(shape) < len(self.spec):
            scalar = " For scalars the PartitionSpec should be P()" if not shape else ""
            raise ValueError(f"Sharding {self} is only valid for values of rank at least "
                             f"{len(self.spec)}, but was applied to a value of rank "
                             f"{len(shape)}.{scalar}")

    def shard_shape(self, global_shape) -> tuple:
        shape = tuple(global_shape)
        self.check_compatible_aval(shape)
        tiling = self.tiling(len(shape))
        for dim, (size, n) in enumerate(zip(shape, tiling)):
            if size % n:
                raise IndivisibleError(
                    f"Sharding {self} implies that array axis {dim} is partitioned {n} times, but "
                    f"the dimension size is {size} (full shape: {shape}, per-dimension tiling "
                    f"factors: {tiling} should evenly divide the shape)")
        return tuple(size // n for size, n in zip(shape, tiling))

    def type_spec(self, ndim: int) -> PartitionSpec:
        """The spec an array's type shows: only Explicit axes, padded to `ndim`."""
        explicit = set(self.mesh.explicit_axes)
        entries = []
        for entry in self.spec.padded(ndim).partitions:
            axes = tuple(a for a in _entry_axes(entry) if a in explicit)
            entries.append(axes if len(axes) > 1 else (axes[0] if axes else None))
        return PartitionSpec(*entries)

    def check_type_divisibility(self, shape) -> None:
        """Raises as JAX's type check does when an Explicit-sharded dimension does not divide."""
        spec = self.type_spec(len(shape))
        sizes = self.mesh.shape
        for dim, (entry, size) in enumerate(zip(spec.partitions, shape)):
            axes = _entry_axes(entry)
            n = math.prod(sizes[a] for a in axes)
            if size % n:
                abstract = NamedSharding(self.mesh.abstract_mesh if isinstance(self.mesh, Mesh)
                                         else self.mesh, spec)
                raise ValueError(
                    f"Sharding spec {axes} implies that array axis {dim} is partitioned {n} times, "
                    f"but does not evenly divide the dimension size {size}. Got shape: "
                    f"{tuple(shape)} and sharding {abstract}")

    @functools.cached_property
    def core_sharding(self) -> _core.ShardingCore:
        if not isinstance(self.mesh, Mesh):
            raise ValueError(f"A NamedSharding over an AbstractMesh has no devices: {self}")
        # The layout only: pending reductions are the type's (device_put reshards to them).
        return _core.ShardingCore(self.mesh.core_mesh,
                                  [list(_entry_axes(e)) for e in self.spec.partitions])


def rank_error(what: str, sharding, ndim: int) -> ValueError:
    """JAX's error for a sharding whose spec is longer than the rank of the value given it;
    `what` names the value ("One of with_sharding_constraint arguments")."""
    scalar = " For scalars the PartitionSpec should be P()" if ndim == 0 else ""
    return ValueError(
        f"{what} is incompatible with its sharding annotation {sharding}: Sharding {sharding} is "
        f"only valid for values of rank at least {len(sharding.spec)}, but was applied to a "
        f"value of rank {ndim}.{scalar}")


def sharding_from_core(core: _core.ShardingCore, unreduced=(), reduced=()) -> Sharding:
    """The Python sharding for a C++ `ShardingCore` (and the pending reductions of the
    array's type, which the layout alone does not show)."""
    if core.mesh is None:
        return SingleDeviceSharding(devices_lib.device(core.device))
    entries = [None if not axes else axes[0] if len(axes) == 1 else tuple(axes)
               for axes in core.spec]
    return NamedSharding(Mesh.from_core(core.mesh),
                         PartitionSpec(*entries, unreduced=set(unreduced), reduced=set(reduced)))

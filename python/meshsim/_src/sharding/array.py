"""Where an array's blocks live, as `meshsim.Array` shows it: `.sharding`,
`.addressable_shards`, `.devices()`, ... (installed on the C++ class by
`install()`), and the sharding of a type (`typeof(x).sharding`)."""
from __future__ import annotations

from meshsim import _core
from meshsim._src.sharding import auto_names
from meshsim._src.sharding.mesh import AbstractMesh, Mesh
from meshsim._src.sharding.named_sharding import (NamedSharding, SingleDeviceSharding,
                                                   sharding_from_core)
from meshsim._src.sharding.partition_spec import PartitionSpec


class Shard:
    """One device's block of an array: `data` is `array[index]`; `replica_id`
    numbers the devices holding the same block."""

    __slots__ = ("device", "index", "replica_id", "data")

    def __init__(self, device, index: tuple, replica_id: int, data):
        self.device = device
        self.index = index
        self.replica_id = replica_id
        self.data = data

    def __repr__(self):
        return (f"Shard(device={self.device!r}, index={self.index}, "
                f"replica_id={self.replica_id}, data={self.data})")


def _sharding(self):
    # Arrays never move: the sharding is built once (device_put stores the user's).
    sharding = self.__dict__.get("_sharding")
    if sharding is None:
        aval = self.aval
        sharding = sharding_from_core(self.sharding_core, aval.unreduced, aval.reduced)
        if isinstance(sharding, NamedSharding):  # a layout chosen over Auto axes: JAX's name
            sharding = auto_names.jax_name(sharding, self.__dict__.get("_auto_origin"), self.ndim)
            if self.__dict__.get("_typed_result"):  # a jitted result over Explicit axes
                sharding = auto_names.typed_name(sharding, self.ndim)
        self._sharding = sharding
    return sharding


def _addressable_shards(self) -> list[Shard]:
    blocks = self.shard_data()  # one read-only view per device, replicas share memory
    indices = self.sharding._block_indices(self.shape)  # unreduced: each holds a partial sum
    copies: dict = {}
    shards = []
    for block, (device, index) in zip(blocks, indices.items()):
        key = tuple((s.start, s.stop) for s in index)
        replica_id = copies.get(key, 0)
        copies[key] = replica_id + 1
        data = _core.ArrayImpl.shard(block, SingleDeviceSharding(device).core_sharding, self.weak_type)
        shards.append(Shard(device, index, replica_id, data))
    return shards


def _device(self):
    devices = self.sharding.device_set
    return next(iter(devices)) if len(devices) == 1 else self.sharding


def _committed(self) -> bool:
    # Only device_put without a target leaves a value uncommitted (free to move).
    return self.__dict__.get("_committed", self.sharding_core.mesh is not None)


def _manual_axes() -> frozenset:
    env = _core.current_axis_env()
    return frozenset(env[1]) if env is not None else frozenset()


def _type_sharding(aval) -> NamedSharding:
    """`typeof(x).sharding`: the abstract mesh and the spec the type shows (pending
    reductions over manual axes belong to `manual_axis_type`)."""
    mesh = AbstractMesh((), ()) if aval.mesh is None else Mesh.from_core(aval.mesh).abstract_mesh
    entries = [None if not axes else axes[0] if len(axes) == 1 else tuple(axes)
               for axes in aval.spec]
    manual = _manual_axes()
    return NamedSharding(mesh, PartitionSpec(*entries, *[None] * (aval.ndim - len(entries)),
                                             unreduced=set(aval.unreduced) - manual,
                                             reduced=set(aval.reduced) - manual))


def _manual_axis_type(aval) -> "ManualAxisType":
    manual = _manual_axes()
    return ManualAxisType(varying=aval.vma, unreduced=set(aval.unreduced) & manual,
                          reduced=set(aval.reduced) & manual)


class ManualAxisType:
    """The manual-axis part of a type (`jax.typeof(x).manual_axis_type`): the axes a value
    varies over inside shard_map, and those it is unreduced or reduced over."""

    __slots__ = ("varying", "unreduced", "reduced")

    def __init__(self, *, varying=frozenset(), unreduced=frozenset(), reduced=frozenset()):
        object.__setattr__(self, "varying", frozenset(varying))
        object.__setattr__(self, "unreduced", frozenset(unreduced))
        object.__setattr__(self, "reduced", frozenset(reduced))

    def __setattr__(self, name, value):
        raise AttributeError(f"ManualAxisType is immutable: cannot set {name}")

    def update(self, **fields) -> "ManualAxisType":
        return ManualAxisType(**{k: fields.get(k, getattr(self, k)) for k in self.__slots__})

    def __eq__(self, other):
        return isinstance(other, ManualAxisType) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __hash__(self):
        return hash((self.varying, self.unreduced, self.reduced))

    def __repr__(self):
        return (f"ManualAxisType(varying={self.varying}, unreduced={self.unreduced}, "
                f"reduced={self.reduced})")


def _aval_core_sharding(sharding):
    """The core sharding a `ShapedArray(..., sharding=)` carries: none for the empty mesh (an
    unsharded type); a sharding over an AbstractMesh (`typeof(x).sharding` inside jit) means
    the context mesh with that shape."""
    if sharding is None or isinstance(sharding, _core.ShardingCore):
        return sharding
    if isinstance(sharding, NamedSharding) and isinstance(sharding.mesh, AbstractMesh):
        if sharding.mesh.empty:
            return None
        from meshsim._src.sharding import explicit
        mesh, spec = explicit.resolve(sharding, "ShapedArray")
        return NamedSharding(mesh, spec).core_sharding
    if isinstance(sharding, (NamedSharding, SingleDeviceSharding)):
        return sharding.core_sharding
    raise TypeError(f"ShapedArray: sharding must be a NamedSharding or a SingleDeviceSharding, "
                    f"got {sharding!r}")


_core_shaped_array_init = _core.ShapedArray.__init__


def _shaped_array_init(self, shape, dtype, weak_type=False, sharding=None, *,
                       manual_axis_type=None, memory_space=None):
    """`jax.core.ShapedArray(shape, dtype, weak_type, sharding=...)` as libraries build types
    (flax's scan): the sharding as user code sees it (`typeof(x).sharding`)."""
    if manual_axis_type is not None and manual_axis_type != ManualAxisType():
        raise NotImplementedError("ShapedArray(manual_axis_type=...): meshsim's types take "
                                  "their manual axes from the shard_map that makes them")
    if memory_space is not None and getattr(memory_space, "name", "Device") != "Device":
        raise NotImplementedError(f"ShapedArray(memory_space={memory_space}): meshsim's "
                                  "arrays live in device memory")
    _core_shaped_array_init(self, shape, dtype, weak_type, _aval_core_sharding(sharding))


def install() -> None:
    Array = _core.ArrayImpl
    Array.sharding = property(_sharding)
    Array.addressable_shards = property(_addressable_shards)
    Array.global_shards = property(_addressable_shards)
    Array.addressable_data = lambda self, i: _addressable_shards(self)[i].data
    Array.devices = lambda self: self.sharding.device_set
    Array.device = property(_device)
    Array.is_fully_replicated = property(lambda self: self.sharding.is_fully_replicated)
    Array.is_fully_addressable = property(lambda self: True)
    Array.committed = property(_committed)
    _core.ShapedArray.sharding = property(_type_sharding)
    _core.ShapedArray.__init__ = _shaped_array_init
    _core.ShapedArray.manual_axis_type = property(_manual_axis_type)

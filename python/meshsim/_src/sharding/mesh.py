"""Meshes (named axes over devices) and the context mesh set by `set_mesh`."""
from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import math
import threading
import warnings

import numpy as np

from meshsim import _core
from meshsim._src import devices as devices_lib


class AxisType(enum.Enum):
    """How a mesh axis is used: Explicit (in the types), Auto (left to the
    compiler), Manual (inside shard_map)."""
    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self):
        return self.name

    @property
    def core(self) -> _core.AxisType:
        return getattr(_core.AxisType, self.name)


def _normalize_axis_types(axis_names: tuple, axis_types, name: str) -> tuple:
    if axis_types is None:
        axis_types = (AxisType.Auto,) * len(axis_names)
    if not isinstance(axis_types, tuple):
        axis_types = tuple(axis_types) if isinstance(axis_types, list) else (axis_types,)
    if not all(isinstance(t, AxisType) for t in axis_types):
        raise TypeError(f"axis_types passed to {name} must be of type `jax.sharding.AxisType`. "
                        f"Got {axis_types} of type {tuple(type(t) for t in axis_types)}")
    if len(axis_names) != len(axis_types):
        raise ValueError("Number of axis names should match the number of axis_types. Got "
                         f"axis_names={axis_names} and axis_types={axis_types}")
    return axis_types


class _MeshAxes:
    """What concrete and abstract meshes share: named, sized, typed axes."""
    axis_names: tuple
    axis_sizes: tuple
    axis_types: tuple

    @property
    def shape(self) -> collections.OrderedDict:
        return collections.OrderedDict(zip(self.axis_names, self.axis_sizes))

    @property
    def shape_tuple(self) -> tuple:
        return tuple(zip(self.axis_names, self.axis_sizes))

    @property
    def empty(self) -> bool:
        return self.size == 0

    def _axes_of_type(self, t: AxisType) -> tuple:
        return tuple(n for n, ty in zip(self.axis_names, self.axis_types) if ty == t)

    @property
    def explicit_axes(self) -> tuple:
        return self._axes_of_type(AxisType.Explicit)

    @property
    def auto_axes(self) -> tuple:
        return self._axes_of_type(AxisType.Auto)

    @property
    def manual_axes(self) -> tuple:
        return self._axes_of_type(AxisType.Manual)

    def _all_axes_are(self, t: AxisType) -> bool:
        return bool(self.axis_types) and all(ty == t for ty in self.axis_types)

    @property
    def are_all_axes_explicit(self) -> bool:
        return self._all_axes_are(AxisType.Explicit)

    @property
    def _are_all_axes_explicit_or_manual(self) -> bool:
        return bool(self.axis_types) and all(
            ty in (AxisType.Explicit, AxisType.Manual) for ty in self.axis_types)

    @property
    def are_all_axes_auto(self) -> bool:
        return self._all_axes_are(AxisType.Auto)

    @property
    def are_all_axes_manual(self) -> bool:
        return self._all_axes_are(AxisType.Manual)

    def _axes_str(self) -> str:
        return ", ".join(f"'{n}': {s}" for n, s in self.shape_tuple)


@dataclasses.dataclass(frozen=True)
class AbstractDevice:
    device_kind: str
    num_cores: int | None
    platform: str

    def __repr__(self):
        return f"AbstractDevice({self._repr()})"

    def _repr(self) -> str:
        return (f"device_kind={self.device_kind}, num_cores={self.num_cores}, "
                f"platform={self.platform}")


_CPU = AbstractDevice(device_kind="cpu", num_cores=None, platform="cpu")


class AbstractMesh(_MeshAxes):
    """A mesh's axis names, sizes and types, without devices."""

    def __init__(self, axis_sizes: tuple, axis_names: tuple, axis_types=None, *,
                 abstract_device: AbstractDevice | None = None):
        self.axis_sizes = tuple(int(s) for s in axis_sizes)
        self.axis_names = tuple(axis_names)
        self.axis_types = _normalize_axis_types(self.axis_names, axis_types, "AbstractMesh")
        self.abstract_device = abstract_device
        self.size = math.prod(self.axis_sizes) if self.axis_sizes else 0

    @property
    def abstract_mesh(self) -> AbstractMesh:
        return self

    def _key(self) -> tuple:
        return (self.axis_sizes, self.axis_names, self.axis_types, self.abstract_device)

    def __eq__(self, other):
        return isinstance(other, AbstractMesh) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        device = "" if self.abstract_device is None else f", {self.abstract_device._repr()}"
        return f"AbstractMesh({self._axes_str() or '()'}, axis_types={self.axis_types}{device})"

    def update(self, axis_sizes=None, axis_names=None, axis_types=None, **kwargs) -> AbstractMesh:
        return AbstractMesh(self.axis_sizes if axis_sizes is None else axis_sizes,
                            self.axis_names if axis_names is None else axis_names,
                            self.axis_types if axis_types is None else axis_types,
                            abstract_device=kwargs.get("abstract_device", self.abstract_device))

    def update_axis_types(self, name_to_type: dict) -> AbstractMesh:
        return self.update(axis_types=tuple(name_to_type.get(n, t)
                                            for n, t in zip(self.axis_names, self.axis_types)))


_EMPTY_ABSTRACT_MESH = AbstractMesh((), ())


class Mesh(_MeshAxes):
    """Named axes over an array of devices: `Mesh(devices, axis_names, axis_types)`.

    Equal meshes are one object, so they share one C++ `MeshCore` (`core_mesh`),
    which is what arrays and compiled programs refer to."""

    _interned: dict[tuple, "Mesh"] = {}

    def __new__(cls, devices, axis_names, axis_types=None):
        devices = devices if isinstance(devices, np.ndarray) else np.array(devices, dtype=object)
        axis_names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if any(n is None for n in axis_names):
            raise ValueError(f"Mesh axis names cannot be None. Got: {axis_names}")
        if devices.ndim != len(axis_names):
            raise ValueError(
                "Mesh requires the ndim of its first argument (`devices`) to equal the length of "
                f"its second argument (`axis_names`), but got devices.ndim == {devices.ndim} and "
                f"len(axis_names) == {len(axis_names)}.")
        axis_types = _normalize_axis_types(axis_names, axis_types, "Mesh")
        flat = tuple(devices.flat)
        key = (flat, devices.shape, axis_names, axis_types)
        mesh = cls._interned.get(key)
        if mesh is None:
            mesh = cls._interned[key] = cls._create(flat, devices.shape, axis_names, axis_types)
        return mesh

    @classmethod
    def _create(cls, flat, shape, axis_names, axis_types, core_mesh=None) -> Mesh:
        empty = not axis_names and flat[0] is None
        if not empty and not all(isinstance(d, devices_lib.MeshDevice) for d in flat):
            raise TypeError(
                f"Mesh devices must be meshsim devices (from jax.devices()), got {flat}")
        mesh = object.__new__(cls)
        mesh.devices = np.array(flat, dtype=object).reshape(shape)
        mesh.devices.flags.writeable = False
        mesh.axis_names = axis_names
        mesh.axis_sizes = tuple(int(s) for s in shape)
        mesh.axis_types = axis_types
        mesh.size = 0 if empty else math.prod(mesh.axis_sizes)
        if core_mesh is None and not empty:
            core_mesh = _core.MeshCore(list(axis_names), list(mesh.axis_sizes),
                                       [t.core for t in axis_types], [d.id for d in flat])
        mesh.core_mesh = core_mesh
        if core_mesh is not None:
            cls._by_core[core_mesh] = mesh
        return mesh

    # Meshes by their C++ mesh: how a type's mesh finds its devices again.
    _by_core: dict = {}

    @classmethod
    def by_core(cls, core_mesh) -> "Mesh | None":
        return cls._by_core.get(core_mesh)

    @classmethod
    def from_core(cls, core_mesh: _core.MeshCore) -> Mesh:
        """The Mesh whose C++ mesh is `core_mesh` (the interned one if it exists)."""
        known = cls._by_core.get(core_mesh)
        if known is not None:
            return known
        flat = tuple(devices_lib.device(i) for i in core_mesh.device_ids)
        shape = tuple(core_mesh.axis_sizes)
        names = tuple(core_mesh.axis_names)
        types = tuple(AxisType[t.name] for t in core_mesh.axis_types)
        key = (flat, shape, names, types)
        mesh = cls._interned.get(key)
        if mesh is None:
            mesh = cls._interned[key] = cls._create(flat, shape, names, types, core_mesh)
        return mesh

    def __reduce__(self):
        return Mesh, (self.devices, self.axis_names, self.axis_types)

    @property
    def device_ids(self) -> np.ndarray:
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    @property
    def local_devices(self) -> list:
        return list(self.devices.flat)

    @property
    def local_mesh(self) -> Mesh:
        return self

    is_multi_process = False

    @property
    def is_scalar(self) -> bool:
        return self.size == 1 and not self.axis_names

    @functools.cached_property
    def abstract_mesh(self) -> AbstractMesh:
        if not self.axis_names:
            return _EMPTY_ABSTRACT_MESH
        return AbstractMesh(self.axis_sizes, self.axis_names, self.axis_types,
                            abstract_device=_CPU)

    def update(self, devices=None, axis_names=None, axis_types=None) -> Mesh:
        return Mesh(self.devices if devices is None else devices,
                    self.axis_names if axis_names is None else axis_names,
                    self.axis_types if axis_types is None else axis_types)

    def __str__(self):
        if self.empty:
            return "Mesh()"
        return f"Mesh({self._axes_str()}, axis_types={self.axis_types})"

    def __repr__(self):
        if self.empty:
            return "Mesh(axis_sizes=(), axis_names=())"
        return (f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names!r}, "
                f"axis_types={self.axis_types})")

    def __enter__(self):
        warnings.warn("`with mesh:` context manager has been deprecated. Please use `with"
                      " jax.set_mesh(mesh):` instead.", DeprecationWarning, stacklevel=2)
        _context.entered_meshes.append(set_mesh(self))
        _context.legacy = True
        return self

    def __exit__(self, *exc):
        _context.entered_meshes.pop().__exit__(*exc)
        return False


_EMPTY_MESH = Mesh(np.empty((), dtype=object), ())


class _Context(threading.local):
    """The context meshes of this thread (None when unset)."""

    def __init__(self):
        self.mesh: Mesh | None = None
        self.abstract_mesh: AbstractMesh | None = None
        self.entered_meshes: list = []
        # The mesh was entered by `with mesh:`, which places no computation (JAX's device
        # assignment takes only `set_mesh`'s mesh).
        self.legacy = False


_context = _Context()


class set_mesh:
    """Sets the context mesh: `set_mesh(mesh)` sets it for the rest of the
    thread; `with set_mesh(mesh):` sets it for the block and then restores the
    previous one. `set_mesh(None)` clears it."""

    __slots__ = ("prev_mesh", "prev_abstract_mesh", "prev_legacy")

    def __init__(self, mesh: Mesh | None):
        if mesh is not None and not isinstance(mesh, Mesh):
            raise ValueError(f"Expected mesh of type `jax.sharding.Mesh`. Got {type(mesh)}")
        if _core.current_trace() is not None:
            raise ValueError("`set_mesh` can only be used outside of `jax.jit`.")
        if mesh is not None and mesh.manual_axes:
            raise ValueError(
                f"mesh {mesh} contains manual axes which is not allowed when using "
                "`jax.set_mesh`. Please use `jax.shard_map` to enter into `Manual` mode instead.")
        self.prev_mesh, self.prev_abstract_mesh = _context.mesh, _context.abstract_mesh
        self.prev_legacy, _context.legacy = _context.legacy, False
        _context.mesh = mesh
        _context.abstract_mesh = None if mesh is None else mesh.abstract_mesh

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        _context.mesh, _context.abstract_mesh = self.prev_mesh, self.prev_abstract_mesh
        _context.legacy = self.prev_legacy
        return False


class use_abstract_mesh:
    """Context manager setting only the abstract context mesh (e.g. the
    mesh with Manual axes inside shard_map)."""

    __slots__ = ("mesh", "prev")

    def __init__(self, mesh: AbstractMesh):
        if not isinstance(mesh, AbstractMesh):
            raise ValueError(f"Expected mesh of type `jax.sharding.AbstractMesh`. Got {type(mesh)}")
        self.mesh = mesh

    def __enter__(self):
        self.prev = _context.abstract_mesh
        _context.abstract_mesh = self.mesh

    def __exit__(self, *exc):
        _context.abstract_mesh = self.prev
        return False


def get_abstract_mesh() -> AbstractMesh:
    """The context mesh's AbstractMesh (`AbstractMesh((), axis_types=())` when none)."""
    return _context.abstract_mesh or _EMPTY_ABSTRACT_MESH


def context_mesh() -> Mesh:
    """The concrete mesh set by `set_mesh` (the empty `Mesh()` when none)."""
    return _context.mesh or _EMPTY_MESH


def get_mesh() -> Mesh:
    """The concrete context mesh, outside jit (as JAX allows it)."""
    if _core.current_trace() is not None:
        raise ValueError("`get_mesh` can only be used outside of `jax.jit`. Maybe you want "
                         "`jax.sharding.get_abstract_mesh()`?")
    return context_mesh()

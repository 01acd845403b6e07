"""Top-level sharding API: `make_mesh`, `set_mesh`, `device_put`."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from meshsim._src import core, tree_util
from meshsim._src import devices as devices_lib
from meshsim._src.sharding import array, device_assignment, placement
from meshsim._src.sharding.mesh import AxisType, Mesh, context_mesh, set_mesh
from meshsim._src.sharding.layout import Format
from meshsim._src.sharding.named_sharding import NamedSharding, Sharding, SingleDeviceSharding
from meshsim._src.sharding.partition_spec import P, PartitionSpec

__all__ = ["make_mesh", "set_mesh", "device_put", "P"]

array.install()


def make_mesh(axis_shapes, axis_names, axis_types=None, *, devices=None) -> Mesh:
    """A mesh of the first prod(axis_shapes) devices, row-major; all axes
    Explicit unless `axis_types` says otherwise."""
    if devices is None:
        devices = devices_lib.devices()
    try:
        shape = tuple(int(s) for s in axis_shapes)
    except TypeError:
        raise ValueError("`axis_shapes` passed to `make_mesh` should be a sequence of ints. "
                         f"Got {axis_shapes}") from None
    if any(s < 1 for s in shape):  # JAX fails inside with an IndexError
        raise ValueError(f"`axis_shapes` passed to `make_mesh` must be positive, got {shape}")
    size = math.prod(shape)
    if size > len(devices):
        raise ValueError(f"Number of devices {len(devices)} must be >= the product of mesh_shape "
                         f"{shape}")
    if axis_types is None:
        axis_types = (AxisType.Explicit,) * len(shape)
    grid = np.array(list(devices)[:size], dtype=object).reshape(shape)
    return Mesh(grid, axis_names, axis_types=axis_types)


def _is_placement(p) -> bool:
    return p is None or isinstance(p, (Sharding, PartitionSpec, devices_lib.MeshDevice, Format))


def _as_sharding(p) -> Sharding | None:
    """A placement (None, a sharding, a device, a spec over the context mesh, or a Format, whose
    layout every shard has) as a sharding."""
    if isinstance(p, Format):
        p = p.sharding
    if p is None or isinstance(p, Sharding):
        return p
    if isinstance(p, devices_lib.Device):
        return SingleDeviceSharding(p)
    if isinstance(p, PartitionSpec):
        mesh = context_mesh()
        if mesh.empty:
            raise ValueError("Please set a mesh via `jax.set_mesh` if a PartitionSpec is passed "
                             "to device_put")
        return NamedSharding(mesh, p)
    raise ValueError("`jax.device_put` only accepts `None`, `jax.sharding.Sharding`, `jax.Device`, "
                     f"`Format`, `jax.memory.Space` or a pytree of these values. Received invalid "
                     f"value: {p}")


def _check_fits(value, sharding: NamedSharding) -> None:
    try:
        sharding.check_compatible_aval(value.shape)
    except ValueError as e:
        raise ValueError("One of device_put args is incompatible with its sharding annotation "
                         f"{sharding}: {e}") from None
    sharding.check_type_divisibility(value.shape)  # JAX's message for Explicit axes
    sharding.shard_shape(value.shape)               # then for every axis


def _put(x, sharding: Sharding | None, donate: bool):
    if isinstance(x, core.Tracer):
        if sharding is None:
            return x
        if isinstance(sharding, NamedSharding):  # inside jit: a reshard
            from meshsim._src.sharding.explicit import reshard
            if isinstance(sharding.mesh, Mesh):
                placement.check_device_put_in_jit([d.id for d in sharding.mesh.devices.flat])
                device_assignment.note_device_put(sharding.mesh.size)
            return reshard(x, sharding)
        raise NotImplementedError("device_put to a single device inside a traced function is not "
                                  "supported; call it outside jit")
    if isinstance(x, core.Array) and x.aval.unreduced and sharding is not None and not (
            isinstance(sharding, NamedSharding) and set(sharding.spec.unreduced) == set(x.aval.unreduced)):
        # A transfer splits the source into its devices' blocks, which partial sums are not;
        # only a reshard keeping the same pending sums moves them (JAX's own limit).
        raise NotImplementedError("device_indices_map doesn't work with unreduced. Please file a bug at "
                                  "https://github.com/jax-ml/jax/issues")
    if isinstance(x, np.ndarray) and isinstance(sharding, NamedSharding):
        # Splitting into blocks copies them: a read-only view spares a whole copy first.
        x = x.view()
        x.flags.writeable = False
    if isinstance(sharding, NamedSharding) and (sharding.spec.unreduced or sharding.spec.reduced):
        # Pending reductions are a type: an array becomes one by a reshard (host data has no
        # devices' blocks to split into partial sums, as in JAX).
        if not isinstance(x, core.Array):
            sharding.devices_indices_map(np.shape(x))
        from meshsim._src.sharding.explicit import reshard
        return reshard(core.asarray_value(x), sharding)
    value = core.asarray_value(x)
    if sharding is None:
        return value
    if isinstance(sharding, NamedSharding):
        _check_fits(value, sharding)
    if value.committed and value.sharding == sharding:
        return value
    out = value.reshard(sharding.core_sharding)
    out._sharding = sharding
    out._committed = True
    if donate and isinstance(x, core.Array):
        x.delete()
    return out


def device_put(x, device: Any = None, *, src: Any = None, donate: bool = False,
               may_alias: bool | None = None):
    """Places `x` (a pytree of array-likes) on `device`: a device, a sharding,
    a PartitionSpec over the context mesh, None (the default device, or where
    an array already is), or a pytree prefix of `x` of these.

    Arrays are immutable here, so `may_alias` and `src` change nothing."""
    if _is_placement(device):
        sharding = _as_sharding(device)
        return tree_util.tree_map(lambda leaf: _put(leaf, sharding, donate), x)
    try:
        placements = tree_util.tree_broadcast(device, x, is_leaf=_is_placement)
    except ValueError as e:
        raise ValueError("device_put device specification must be a tree prefix of the "
                         f"corresponding value; {e}") from None
    return tree_util.tree_map(lambda leaf, p: _put(leaf, _as_sharding(p), donate), x, placements)


def device_get(x: Any):
    """The pytree `x` with every array copied to a NumPy array on the host
    (other leaves pass through)."""
    def get(leaf):
        if isinstance(leaf, core.Array) or hasattr(leaf, "__jax_array__"):
            return np.asarray(leaf)
        return leaf
    return tree_util.tree_map(get, x)

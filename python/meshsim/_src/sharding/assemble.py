"""Building a sharded array from its per-device pieces, as JAX programs load
data: `make_array_from_callback` (asks for each device's block by index),
`make_array_from_single_device_arrays` (one array per device) and
`make_array_from_process_local_data` (this process's data; one process here,
so the global data)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from meshsim._src import core, tree_util
from meshsim._src.sharding.api import device_put


def _array_type_str(shape, dtype, sharding) -> str:
    """The type JAX names in these errors: `float32[8@x,6@y]`."""
    spec = sharding.type_spec(len(shape)) if hasattr(sharding, "type_spec") else None
    dims = []
    for i, n in enumerate(shape):
        entry = spec[i] if spec is not None and i < len(spec) else None
        axes = (entry,) if isinstance(entry, str) else tuple(entry or ())
        dims.append(f"{n}@{axes[0]}" if len(axes) == 1 else
                    f"{n}@({','.join(axes)})" if axes else str(n))
    return f"{np.dtype(dtype).name}[{','.join(dims)}]"


def _assemble(shape, sharding, blocks_by_device: dict, dtype, api_name: str):
    """The global array whose block on each device is `blocks_by_device[device]`."""
    shape = tuple(int(n) for n in shape)
    indices = sharding.devices_indices_map(shape)
    expected = sharding.shard_shape(shape)
    first = next(iter(blocks_by_device.values()))
    block_dtype = np.dtype(core.canonicalize_dtype(np.asarray(first).dtype))
    if dtype is not None and np.dtype(dtype) != block_dtype:
        raise ValueError(f"If `dtype` is provided to `jax.{api_name}`, it must match the dtype of "
                         f"the addressable shards. Got dtype={np.dtype(dtype)} and shard "
                         f"dtype={block_dtype}`.")
    out = np.empty(shape, block_dtype)
    for device, index in indices.items():
        block = np.asarray(blocks_by_device[device])
        if block.shape != tuple(expected):
            raise ValueError(
                f"Expected shard shape {tuple(expected)} doesn't match the single device array "
                f"shape {block.shape}. Shape of Array is "
                f"{_array_type_str(shape, block_dtype, sharding)} with sharding {sharding}")
        out[index] = block
    return device_put(out, sharding)


def make_array_from_callback(shape, sharding, data_callback: Callable, dtype=None):
    """The array of `shape` laid out by `sharding` whose block on each device is
    `data_callback(index)` (called once per device, `index` a tuple of slices)."""
    indices = sharding.addressable_devices_indices_map(tuple(shape))
    blocks = {device: data_callback(index) for device, index in indices.items()}
    return _assemble(shape, sharding, blocks, dtype, "make_array_from_callback")


def make_array_from_single_device_arrays(shape, sharding, arrays: Sequence, *, dtype=None):
    """The array of `shape` laid out by `sharding` from one array per device
    (each on the device whose block it is)."""
    arrays = list(arrays)
    devices = sharding.addressable_devices_indices_map(tuple(shape))
    if len(arrays) != len(devices):
        raise ValueError(f"Expected {len(devices)} per-device arrays (this is how many devices are "
                         f"addressable by the sharding), but got {len(arrays)}")
    blocks = {}
    for a in arrays:
        device = a.device if not callable(a.device) else a.device()
        if device not in devices:
            raise ValueError(f"An array on {device} was given, but {sharding} does not use that "
                             "device")
        blocks[device] = a
    if len(blocks) != len(devices):
        raise ValueError("make_array_from_single_device_arrays needs one array on each of the "
                         f"sharding's devices; got several on one device")
    return _assemble(shape, sharding, blocks, dtype, "make_array_from_single_device_arrays")


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
    """The arrays laid out by `sharding` (a prefix) from this process's data (a pytree). With one
    process the local data is the whole array."""
    leaves, treedef = tree_util.tree_flatten(local_data)
    leaves = [x if core.is_value(x) else np.asarray(x) for x in leaves]
    shapes = tree_util.broadcast_prefix(global_shape, local_data,
                                        is_leaf=lambda x: x is None or isinstance(x, tuple))
    for shape, leaf in zip(shapes, leaves):
        if shape is not None and tuple(shape) != tuple(leaf.shape):
            raise ValueError("When calling `make_array_from_process_local_data` on a single "
                             "process, global_shape should be None or equal to local_data.shape."
                             f"Got global_shape={tuple(shape)} and "
                             f"local_data.shape={tuple(leaf.shape)}.")
    return device_put(tree_util.tree_unflatten(treedef, leaves), sharding)

"""`jax.experimental.mesh_utils`: arrays of devices shaped as a mesh. Simulated
CPU devices have no physical topology, so a mesh is the device list in order
(as JAX does for CPU devices); the hybrid mesh's granules are processes (one)."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from meshsim._src import devices as devices_lib


def create_device_mesh(mesh_shape: Sequence[int], devices: Sequence | None = None, *,
                       contiguous_submeshes: bool = False,
                       allow_split_physical_axes: bool = False) -> np.ndarray:
    """`devices` (all devices by default) as an array of shape `mesh_shape`."""
    devices = list(devices_lib.devices() if devices is None else devices)
    if math.prod(mesh_shape) != len(devices):
        raise ValueError(f"Number of devices {len(devices)} must equal the product of mesh_shape "
                         f"{tuple(mesh_shape)}")
    out = np.empty(len(devices), dtype=object)
    out[:] = devices
    return out.reshape(tuple(mesh_shape))


def create_hybrid_device_mesh(mesh_shape: Sequence[int], dcn_mesh_shape: Sequence[int],
                              devices: Sequence | None = None, *, process_is_granule: bool = False,
                              should_sort_granules_by_key: bool = True,
                              allow_split_physical_axes: bool = False) -> np.ndarray:
    """A mesh of granules (`dcn_mesh_shape`) each holding a `mesh_shape` mesh;
    the granules of CPU devices are processes, and there is one."""
    devices = list(devices_lib.devices() if devices is None else devices)
    if not process_is_granule:
        raise ValueError(f"Device {devices[0]} does not have attribute slice_index. See "
                         "`process_is_granule` option.")
    if math.prod(dcn_mesh_shape) != 1:
        raise ValueError(f"Number of slices 1 must equal the product of dcn_mesh_shape "
                         f"{tuple(dcn_mesh_shape)}")
    mesh = create_device_mesh(mesh_shape, devices)
    return mesh.reshape(tuple(m * d for m, d in zip(mesh_shape, dcn_mesh_shape)))

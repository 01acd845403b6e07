"""`jax.experimental.colocated_python`: Python code run on the CPU devices next to
accelerators. Every simulated device is a host device, so the devices colocated with a
device are the device itself, and a colocated function or class runs where it is called
(libraries such as orbax import this module and take the CPU path through it)."""
from __future__ import annotations

import functools
from typing import Any, Callable

from meshsim._src.sharding.mesh import Mesh
from meshsim.experimental.colocated_python import func, serialization  # noqa: F401


def colocated_cpu_devices(devices_or_mesh):
    """The CPU devices colocated with `devices_or_mesh` (a mesh gives a mesh of the same
    shape): on the simulator, the same devices, in the same order."""
    if isinstance(devices_or_mesh, Mesh):
        return devices_or_mesh
    return tuple(devices_or_mesh)


class _ColocatedFunction:
    """`fun` as a colocated Python function: calling it calls `fun`; `specialize` records
    nothing the simulator needs and returns the function again."""

    def __init__(self, fun: Callable[..., Any]):
        self._fun = fun
        functools.update_wrapper(self, fun)

    def __call__(self, *args, **kwargs):
        return self._fun(*args, **kwargs)

    def specialize(self, in_specs=None, out_specs_fn=None, devices=None) -> "_ColocatedFunction":
        return self


def colocated_python(fun: Callable[..., Any]) -> _ColocatedFunction:
    return _ColocatedFunction(fun)


def colocated_python_class(cls: type) -> type:
    """A class whose instances live on the colocated CPU devices: on the simulator, `cls`."""
    return cls

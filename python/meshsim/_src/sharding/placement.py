"""Committed placement, as JAX keeps it: an array `device_put` on a device (or laid out over a
mesh) is committed there, and what is computed from it stays there, eagerly and under `jit`.
Uncommitted arrays (created without a placement) follow the committed ones; arrays committed to
different devices cannot meet in one computation (JAX's "incompatible devices" error)."""
from __future__ import annotations

import contextlib
import inspect
import sys
import threading

from meshsim import _core
from meshsim._src import devices as devices_lib

_Array = _core.ArrayImpl


def _single_committed(x) -> bool:
    return type(x) is _Array and x.__dict__.get("_committed", False) and x.sharding_core.mesh is None


def _device_ids(x) -> list[int]:
    s = x.sharding_core
    return [s.device] if s.mesh is None else list(s.mesh.device_ids)


def committed_device(leaves, describe):
    """The device the computation over `leaves` must run on: the one the single-device committed
    leaves are on (None when there is none). Raises JAX's ValueError when committed leaves sit on
    different devices; `describe(i)` names leaf i as "x of add" (only asked then)."""
    first = next((i for i, x in enumerate(leaves) if _single_committed(x)), None)
    on_device = first is not None
    if not on_device:  # arrays laid out over meshes must share one device assignment
        first = next((i for i, x in enumerate(leaves) if type(x) is _Array and x.committed), None)
        if first is None:
            return None
    ids = _device_ids(leaves[first])
    _check_context_devices(leaves[first], ids, describe(first))
    for i, x in enumerate(leaves):
        if type(x) is _Array and x.committed and _device_ids(x) != ids:
            raise ValueError(
                "Received incompatible devices for jitted computation. Got argument "
                f"{describe(first)} with shape {leaves[first].aval.str_short()} and with device ids "
                f"{ids} on platform CPU and argument {describe(i)} with shape "
                f"{x.aval.str_short()} and with device ids {_device_ids(x)} on platform CPU")
    return ids[0] if on_device else None


def _check_context_devices(x, ids: list[int], described: str) -> None:
    """A computation under `jax.set_mesh` runs on the context mesh's devices: committed
    operands elsewhere raise JAX's ValueError."""
    from meshsim._src.sharding.mesh import _context
    mesh = _context.mesh
    if mesh is None or mesh.empty or _context.legacy:
        return
    mesh_ids = [d.id for d in mesh.devices.flat]
    if mesh_ids != ids:
        raise ValueError(
            "Received incompatible devices for jitted computation. Got argument "
            f"{described} with shape {x.aval.str_short()} and with device ids {ids} on platform "
            f"CPU and jit's context mesh with device ids {mesh_ids} on platform CPU")


def eager_mesh():
    """The mesh an eager computation runs on, as JAX places it: `jax.set_mesh`'s (not the
    legacy `with mesh:`), outside traces and shard_map bodies; None otherwise."""
    from meshsim._src.sharding.mesh import _context
    mesh = _context.mesh
    if (mesh is None or _context.legacy or mesh.empty or _core.current_trace() is not None
            or _core.current_axis_env() is not None):
        return None
    return mesh


def _unplaced(x) -> bool:
    return (type(x) is _Array and x.sharding_core.mesh is None
            and not x.__dict__.get("_committed", False))


def onto_mesh(values, mesh, as_operands: bool):
    """`values` (a sequence) with each uncommitted single-device array replicated over `mesh`
    and committed there: JAX compiles every eager operation and jitted call under
    `jax.set_mesh` for the context mesh. Operands are named `P()` (what a transfer to the mesh
    names them); results keep the name their type gives (`P(None,)` over Explicit axes)."""
    if not any(_unplaced(x) for x in values):
        return values
    from meshsim._src.sharding.named_sharding import NamedSharding
    from meshsim._src.sharding.partition_spec import PartitionSpec
    replicated = NamedSharding(mesh, PartitionSpec())
    placed = []
    for x in values:
        if _unplaced(x):
            if as_operands:
                x = x.reshard(replicated.core_sharding)
                x._sharding = replicated
            else:  # typed as a result: one entry per dimension
                x = x.reshard(NamedSharding(mesh, PartitionSpec(*[None] * x.ndim)).core_sharding)
        placed.append(x)
    return placed


_jit_arguments = threading.local()


@contextlib.contextmanager
def jit_arguments(leaves, describe):
    """While a jitted function is traced for a call with array `leaves`: where its committed
    arguments live, so that a device_put inside it to other devices fails as in JAX."""
    first = next((i for i, x in enumerate(leaves) if type(x) is _Array and x.committed), None)
    outer = getattr(_jit_arguments, "value", None)
    _jit_arguments.value = None if first is None else (leaves[first], describe(first))
    try:
        yield
    finally:
        _jit_arguments.value = outer


def _caller_location() -> str:
    """`file:line:column (function)` of the innermost frame outside meshsim, as JAX's
    messages locate an operation."""
    frame = sys._getframe(1)
    while frame is not None and "/meshsim/" in frame.f_code.co_filename.replace("\\", "/"):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    positions = inspect.getframeinfo(frame, context=0).positions
    column = positions.col_offset if positions and positions.col_offset is not None else 0
    return f"{frame.f_code.co_filename}:{frame.f_lineno}:{column} ({frame.f_code.co_qualname})"


def check_device_put_in_jit(device_ids: list[int]) -> None:
    """A device_put inside a jitted function may only move values among the devices its
    committed arguments live on (JAX's "incompatible devices" ValueError)."""
    known = getattr(_jit_arguments, "value", None)
    if known is None:
        return
    arg, described = known
    ids = _device_ids(arg)
    if sorted(device_ids) != sorted(ids):
        raise ValueError(
            "Received incompatible devices for jitted computation. Got argument "
            f"{described} with shape {arg.aval.str_short()} and with device ids {ids} on "
            f"platform CPU and device_put inside jit with device ids {list(device_ids)} on "
            f"platform CPU at {_caller_location()}")


def place(outs, device_id: int):
    """The arrays `outs` (a sequence) moved to device `device_id` and committed there."""
    from meshsim._src.sharding.named_sharding import SingleDeviceSharding
    sharding = SingleDeviceSharding(devices_lib.devices()[device_id])
    placed = []
    for out in outs:
        if type(out) is _Array and out.sharding_core.mesh is None:
            if out.sharding_core.device != device_id:
                out = out.reshard(sharding.core_sharding)
            out._committed = True
        placed.append(out)
    return placed


# JAX applies binary operators through jitted jax.numpy functions, which its messages name.
_NUMPY_NAMES = {"sub": "subtract", "mul": "multiply", "div": "true_divide", "max": "maximum",
                "min": "minimum", "pow": "_power", "lt": "less", "gt": "greater",
                "le": "less_equal", "ge": "greater_equal", "eq": "equal", "ne": "not_equal",
                "atan2": "arctan2", "rem": "remainder", "dot_general": "matmul"}


def describe_operand(prim: str, count: int):
    """Names operand i of an eagerly applied primitive as JAX's messages do: "x of multiply"."""
    def describe(i: int) -> str:
        name = ("x", "y")[i] if count == 2 else f"args[{i}]"
        return f"{name} of {_NUMPY_NAMES.get(prim, prim)}"
    return describe

"""An un-jitted shard_map body with concrete values, as JAX runs it eagerly.

The body is still traced once into the program the shard_map binds, but while
it is being traced at top level (no enclosing jit, grad or vmap) its values are
concrete: whenever one is looked at (`print(x)`, `repr`, a `jax.debug.print`
or `jax.debug.callback`, the Python value of a value invariant over the mesh),
the program recorded so far is run on the shard_map's arguments and each
device's block of that value is read back. So printing shows every device's
block in JAX's format, debug callbacks run at once in program order, and an
error a callback raises names the device it ran on."""
from __future__ import annotations

import dataclasses

import numpy as np

from meshsim import _core
from meshsim._src import core, tracing


@dataclasses.dataclass
class Frame:
    """One eager shard_map body being run: its trace and what it was called with."""
    trace: object
    args: list          # the shard_map's global arguments
    in_specs: list      # core specs of `args`
    mesh: object        # the concrete Mesh; every axis is manual
    check_vma: bool


_frames: list[Frame] = []


def push(frame: Frame) -> None:
    _frames.append(frame)


def pop(frame: Frame) -> None:
    _frames.remove(frame)


def frame_of(values) -> Frame | None:
    """The eager frame whose trace is being recorded and which every tracer of `values` belongs
    to (concrete arrays may be mixed in), or None when they are not eager values."""
    if not _frames:
        return None
    frame = _frames[-1]
    current = _core.current_trace()
    if current is None or current is not frame.trace:
        return None
    tracers = [v for v in values if isinstance(v, core.Tracer)]
    if not tracers or any(t.trace is not frame.trace for t in tracers):
        return None
    return frame


def device_blocks(frame: Frame, values) -> list[list[np.ndarray]]:
    """For each device of the mesh in mesh order, its block of each of `values`."""
    from meshsim._src.numpy import structural
    axes = list(frame.mesh.axis_names)
    stacked = []
    for v in values:
        v = core.asarray_value(v)
        one = structural.reshape(v, (1, *v.shape))  # a leading axis the blocks stack on
        stacked.append(_core.vary_over(one, axes) if frame.check_vma else one)
    body = frame.trace.snapshot(stacked)
    with tracing.open_trace() as outer:
        inputs = [outer.new_input(x.aval) for x in frame.args]
        outs = _core.bind_shard_map(inputs, body, frame.mesh.core_mesh, frame.in_specs,
                                    [[axes]] * len(stacked), axes, frame.check_vma)
        program = outer.finish(list(outs))
    results = [np.asarray(core.asarray_value(r).to_numpy()) for r in program.run(list(frame.args))]
    return [[r[d] for r in results] for d in range(frame.mesh.devices.size)]


def device_labels(frame: Frame) -> list[str]:
    """"On cpu:3 at mesh coordinates (a, b,) = (1, 1)" for each device, in mesh order."""
    names = f"({', '.join(map(str, frame.mesh.axis_names))},)"
    return [f"On {device} at mesh coordinates {names} = {idx}"
            for idx, device in np.ndenumerate(frame.mesh.devices)]


def block_text(tracer) -> str | None:
    """JAX's text of an eager shard_map value: each device's block under its label."""
    frame = frame_of([tracer])
    if frame is None:
        return None
    blocks = device_blocks(frame, [tracer])
    return "\n".join(f"{label}:\n{block[0]}\n" for label, block in zip(device_labels(frame), blocks))


def run_callback(callback, leaves) -> bool:
    """Calls `callback(values)` once per device with its blocks, now, when `leaves` are eager
    shard_map values; returns False (nothing done) otherwise. An exception names the device."""
    frame = frame_of(leaves)
    if frame is None:
        return False
    blocks = device_blocks(frame, leaves)
    for label, values in zip(device_labels(frame), blocks):
        try:
            callback([core.asarray_value(v) for v in values])
        except Exception as e:
            e.add_note(f"(raised {label[0].lower()}{label[1:]})")
            raise
    return True


def concrete_value(tracer):
    """The value of an eager shard_map value that is the same on every device (invariant over
    every mesh axis), as JAX makes it concrete; None otherwise."""
    frame = frame_of([tracer])
    if frame is None or not frame.check_vma or tracer.aval.vma:
        return None
    return core.asarray_value(device_blocks(frame, [tracer])[0][0])

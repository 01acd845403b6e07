"""Tracing a Python function into a program (C++'s ir/trace.h).

Every transformation that traces (jit, grad/vjp, control flow, shard_map,
eager shard_map's device views) opens the innermost trace here, so the trace
is closed again whatever the traced function raises."""
from __future__ import annotations

import contextlib
from typing import Callable, Sequence

from meshsim import _core
from meshsim._src import core, tree_util


@contextlib.contextmanager
def open_trace():
    """A new innermost trace: every bind inside records into it. Closed on exit."""
    trace = _core.push_trace()
    try:
        yield trace
    finally:
        _core.pop_trace(trace)


# Open traces whose inputs hold known values (an eager grad's primals): trace -> those values.
_known_inputs: dict = {}


def trace_flat(fun: Callable, in_tree, avals: Sequence, values: Sequence | None = None):
    """Traces `fun(*unflatten(in_tree, inputs))` on inputs of types `avals`; `values`, when
    given, are what the inputs hold (so that Python control flow on them works, see
    `known_value`).

    Returns (program, captures, out_tree): `captures` are the tracers of
    enclosing traces the function closed over, the program's trailing inputs."""
    with open_trace() as trace:
        tracers = [trace.new_input(a) for a in avals]
        if values is not None:
            _known_inputs[trace] = list(values)
        try:
            out = fun(*tree_util.tree_unflatten(in_tree, tracers))
        finally:
            _known_inputs.pop(trace, None)
        out_leaves, out_tree = tree_util.tree_flatten(out)
        program, captures = trace.finish_capturing([core.asarray_value(x) for x in out_leaves])
    return program, list(captures), out_tree


def known_value(tracer):
    """The array a tracer of a trace opened over known inputs holds (as JAX's autodiff tracers
    carry their primal values), computed by the program recorded so far; None otherwise (jit's
    tracers, values closed over from enclosing traces)."""
    values = _known_inputs.get(tracer.trace)
    if values is None:
        return None
    inputs = []
    for v in values:
        if isinstance(v, _core.Tracer):
            v = known_value(v)
            if v is None:
                return None
        inputs.append(v)
    program = tracer.trace.snapshot([tracer])
    if len(program.in_avals) != len(inputs):
        return None
    return core.asarray_value(program.run(inputs)[0])


def known_depth(tracer) -> int | None:
    """How many traces over known inputs `tracer` is nested in (1: an eager grad's own value,
    2: a grad of a grad's), or None when it belongs to no such trace."""
    values = _known_inputs.get(tracer.trace)
    if values is None:
        return None
    outer = [known_depth(v) for v in values if isinstance(v, _core.Tracer)]
    return 1 + max((d or 0 for d in outer), default=0)

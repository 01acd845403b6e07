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


def trace_flat(fun: Callable, in_tree, avals: Sequence):
    """Traces `fun(*unflatten(in_tree, inputs))` on inputs of types `avals`.

    Returns (program, captures, out_tree): `captures` are the tracers of
    enclosing traces the function closed over, the program's trailing inputs."""
    with open_trace() as trace:
        tracers = [trace.new_input(a) for a in avals]
        out = fun(*tree_util.tree_unflatten(in_tree, tracers))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        program, captures = trace.finish_capturing([core.asarray_value(x) for x in out_leaves])
    return program, list(captures), out_tree

"""Tracing a Python function into a program (C++'s ir/trace.h).

Every transformation that traces (jit, grad/vjp, control flow, shard_map,
eager shard_map's device views) opens the innermost trace here, so the trace
is closed again whatever the traced function raises."""
from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any, Callable, Sequence

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


# What each open trace traces, for errors saying where a traced value came from:
# trace -> (function, what it is traced for, the arguments whose leaves are the trace's inputs).
_described: dict = {}

# Stands for a static argument among a call's arguments: it has no leaves and no name.
STATIC = object()


@contextlib.contextmanager
def describing(trace, fun: Callable, traced_for: str, args: tuple, kwargs: dict | None = None):
    """While open, `trace` traces `fun(*args, **kwargs)` for `traced_for` ("jit", "scan", ...):
    the leaves of (args, kwargs), in flattening order, are its inputs."""
    _described[trace] = (fun, traced_for, args, kwargs or {})
    try:
        yield
    finally:
        _described.pop(trace, None)


def fun_sourceinfo(fun: Callable) -> str:
    """`f at file.py:12`: a function as JAX's messages name it (partials and wrappers looked through)."""
    while isinstance(fun, functools.partial):
        fun = fun.func
    fun = inspect.unwrap(fun)
    try:
        return f"{fun.__name__} at {fun.__code__.co_filename}:{fun.__code__.co_firstlineno}"
    except AttributeError:
        return "<unknown>"


def argument_names(fun: Callable, args: Sequence, kwargs: dict) -> list[str]:
    """The name of each leaf of a call's (args, kwargs), as JAX's debug info writes it: the
    parameter bound to it and the leaf's path (`x`, `p['w'][0]`), keyword arguments after the
    positional ones sorted by keyword, `args[i]` when the call does not fit the signature.
    Arguments given as STATIC are left out."""
    leaf_names = []

    def add(name, value):
        if value is not STATIC:
            leaf_names.extend(name + tree_util.keystr(path)
                              for path, _ in tree_util.tree_flatten_with_path(value)[0])
    try:
        signature = inspect.signature(fun)
        bound = signature.bind(*args, **kwargs)
    except (TypeError, ValueError):
        add("args", list(args))
        for k in sorted(kwargs):
            add(f"kwargs['{k}']", kwargs[k])
        return leaf_names
    var_keyword = next((n for n, p in signature.parameters.items() if p.kind == p.VAR_KEYWORD), None)
    for name, value in bound.arguments.items():
        if name not in kwargs and name != var_keyword:
            add(name, value)
    for k in sorted(kwargs):
        add(k if k in bound.arguments else f"{var_keyword}['{k}']", kwargs[k])
    return leaf_names


def origin_message(tracer) -> str:
    """JAX's account of where a traced value that Python wanted concrete came from: the
    function being traced and the arguments the value depends on ("" when unknown, or when
    it depends on no argument: JAX then lists the operations' source lines, which meshsim
    does not record)."""
    described = _described.get(getattr(tracer, "trace", None))
    if described is None:
        return ""
    fun, traced_for, args, kwargs = described
    program = tracer.trace.snapshot([tracer])
    needed = set(program.outvars)
    for _, ins, outs, *_ in reversed(list(program.equations())):
        if needed.intersection(outs):
            needed.difference_update(outs)
            needed.update(ins)
    positions = [i for i, v in enumerate(program.invars) if v in needed]
    if not positions:
        return ""
    names = argument_names(fun, args, kwargs)
    if positions[-1] >= len(names):
        return ""
    arg_names = [names[i] for i in positions]
    if len(arg_names) == 1:
        which = f"the argument {arg_names[0]}"
    elif len(arg_names) == 2:
        which = f"the arguments {arg_names[0]} and {arg_names[1]}"
    else:
        which = f"the arguments {', '.join(arg_names[:-1])}, and {arg_names[-1]}"
    return (f"\nThe error occurred while tracing the function {fun_sourceinfo(fun)} for {traced_for}. "
            "This concrete value was not available in Python because it depends on the "
            f"value{'s' if len(arg_names) > 1 else ''} of {which}.")


# Open traces whose inputs hold known values (an eager grad's primals): trace -> those values.
_known_inputs: dict = {}

# Open traces of one example of a vmapped function: trace -> (batch size, {id of an input
# tracer: the dimension its batch is mapped along}), for the tracers' printed form.
batched_traces: dict = {}


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

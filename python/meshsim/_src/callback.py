"""Calling Python from programs: `jax.debug.callback`, `jax.debug.print` and `jax.pure_callback`.

Each is one primitive (`debug_callback`, `pure_callback`; cpp/meshsim/primitives/callback.cpp)
whose `callback` param is the id of the function kept here. Eagerly and inside `jit` over global
arrays the function is called once with the whole values; inside a shard_map body once per device
with its block, in device order, as JAX does."""
from __future__ import annotations

import itertools
from typing import Any, Callable

import numpy as np

from meshsim import _core
from meshsim._src import core, eager_shard_map, tree_util

__all__ = ["debug_callback", "debug_print", "pure_callback", "io_callback", "effects_barrier"]

_functions: dict[int, Callable] = {}
_ids = itertools.count()


def _host_call(callback: int, args: list, device: int, coords, dtypes: list, shapes: list) -> list:
    """What the core calls: the function gets arrays (as JAX passes its own arrays), and its
    results, which must have `shapes` (a batch of them under vmap), go back as contiguous
    NumPy arrays of the types asked."""
    results = _functions[callback]([_committed(core.asarray_value(a), False) for a in args], shapes)
    # (np.ascontiguousarray would make a 0-d result 1-d)
    return [np.asarray(r, dtype, order="C") for r, dtype in zip(results, dtypes)]


_core.set_host_caller(_host_call)


def _committed(x, keep_weak_type: bool = True):
    """`x` as a callback sees it: JAX hands over its arrays committed to their device (and
    strongly typed once they were operands of a primitive)."""
    if type(x) is core.Array and (not x.committed or (x.weak_type and not keep_weak_type)):
        x = core.Array.from_numpy(np.asarray(x), weak_type=x.weak_type and keep_weak_type)
        x._committed = True
    return x


def _keep(fn: Callable) -> int:
    key = next(_ids)
    _functions[key] = fn
    return key


def _flat_operands(args, kwargs):
    leaves, tree = tree_util.tree_flatten((args, kwargs))
    return [core.asarray_value(x) for x in leaves], tree


def debug_callback(callback: Callable[..., Any], *args, ordered: bool = False,
                   partitioned: bool = False, **kwargs) -> None:
    """Calls `callback(*args, **kwargs)` with the arrays' values when the program runs: inside a
    shard_map body once per device, with its block."""
    if not callable(callback):
        raise TypeError(f"first argument to jax.debug.callback must be a callable, got {callback!r}")
    leaves, tree = _flat_operands(args, kwargs)

    def call(values, shapes=()):
        a, k = tree_util.tree_unflatten(tree, values)
        callback(*a, **k)
        return []

    if eager_shard_map.run_callback(call, leaves):
        return
    if _core.current_trace() is None:  # eagerly JAX calls it directly: its own errors propagate
        call([_committed(x) for x in leaves])
        return
    core.bind("debug_callback", *leaves, callback=_keep(call))


def debug_print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:
    """Prints `fmt.format(*args, **kwargs)` with the arrays' values when the program runs (once
    per device inside a shard_map body)."""
    debug_callback(lambda *a, **k: print(fmt.format(*a, **k)), *args, **kwargs)


def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args,
                  sharding=None, vmap_method: str | None = None, **kwargs):
    """`callback(*args, **kwargs)` computed on the host with the arrays' values; its results must
    have the shapes and dtypes of `result_shape_dtypes` (a pytree of objects with `.shape` and
    `.dtype`)."""
    if vmap_method not in _VMAP_METHODS:
        raise ValueError(f"vmap_method must be on of the allowed methods {_VMAP_METHODS}, "
                         f"but got: {vmap_method}")
    return _result_callback("pure_callback", callback, result_shape_dtypes, args,
                            kwargs, {"vmap_method": vmap_method})


# How a vmapped pure_callback calls the function (its batching rule, callback.cpp): once per
# example, or once with the batch at dimension 0 of each batched operand and the others given
# a dimension of 1 (expand_dims), of the batch's size (broadcast_all) or left alone.
_VMAP_METHODS = ["sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                 "legacy_vectorized", None]


def io_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args,
                sharding=None, ordered: bool = False, **kwargs):
    """As `pure_callback`, for a function with side effects: it is called every time the program
    runs (once per example under vmap; `ordered=True` refuses vmap) and is not differentiable."""
    return _result_callback("io_callback", callback, result_shape_dtypes, args,
                            kwargs, {"ordered": bool(ordered)})


def _result_callback(primitive: str, callback, result_shape_dtypes, args, kwargs,
                     params: dict):
    leaves, tree = _flat_operands(args, kwargs)
    specs, out_tree = tree_util.tree_flatten(result_shape_dtypes)
    shapes = tuple(tuple(int(d) for d in s.shape) for s in specs)
    dtypes = tuple(np.dtype(core.canonicalize_dtype(s.dtype)) for s in specs)

    def call(values, shapes=shapes):
        a, k = tree_util.tree_unflatten(tree, values)
        results = tree_util.tree_leaves(callback(*a, **k))
        if len(results) != len(specs):
            raise RuntimeError("Mismatched number of outputs from callback. "
                               f"Expected: {len(specs)}, Actual: {len(results)}")
        results = [np.asarray(r) for r in results]
        results = [r.astype(core.canonicalize_dtype(r.dtype), copy=False) for r in results]
        for i, (r, shape, dtype) in enumerate(zip(results, shapes, dtypes)):
            if r.shape != tuple(shape):
                raise RuntimeError(f"Incorrect output shape for return value #{i}: "
                                   f"Expected: {shape}, Actual: {r.shape}")
            if r.dtype != dtype:
                raise RuntimeError(f"Incorrect output dtype for return value #{i}: "
                                   f"Expected: {dtype}, Actual: {r.dtype}")
        return results

    key = _keep(call)
    try:
        outs = core.bind(primitive, *leaves, callback=key, result_shapes=shapes or None,
                         result_dtypes=tuple(d.name for d in dtypes) or None, **params)
    finally:
        if _core.current_trace() is None:  # eagerly no program keeps the function: drop it once run
            _core.wait_all_dispatched()
            del _functions[key]
    return tree_util.tree_unflatten(out_tree, list(outs))


def effects_barrier() -> None:
    """Waits until every program dispatched so far, and so every callback it makes, has run."""
    _core.wait_all_dispatched()

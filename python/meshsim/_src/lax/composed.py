"""jax.lax operations composed of other lax operations: generic `reduce` and
`reduce_window` with any binary computation (the known monoids use their
reduction primitive), `associative_scan` (the odd/even recursion),
`approx_max_k`/`approx_min_k` (exact on CPU, as XLA's CPU backend computes
them), `composite`, `padtype_to_pads`, `dtype`."""
from __future__ import annotations

import builtins
import operator
from typing import Callable, Sequence

import numpy as np

from meshsim._src import core, tree_util

__all__ = ["reduce", "reduce_window", "reduce_window_shape_tuple", "associative_scan", "approx_max_k", "approx_min_k",
           "composite", "padtype_to_pads", "dtype", "DotDimensionNumbers"]

DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]]


def _lax():
    from meshsim._src.lax import namespace as lax
    return lax


def _monoid_reducer(computation, init):
    """The reduction primitive of `computation` when `init` is its identity, else None."""
    lax = _lax()
    try:
        init = np.asarray(init)
    except Exception:  # noqa: BLE001 (a traced init value: no monoid shortcut)
        return None
    if init.shape != ():
        return None
    value = init.item()
    table = [(lax.add, 0, lax.reduce_sum), (lax.mul, 1, lax.reduce_prod),
             (lax.max, -np.inf, lax.reduce_max), (lax.min, np.inf, lax.reduce_min),
             (lax.bitwise_and, True, lax.reduce_and), (lax.bitwise_or, False, lax.reduce_or)]
    for fn, identity, reducer in table:
        if computation is fn and (value == identity or (
                fn in (lax.max, lax.min) and init.dtype.kind in "iu"
                and value == (np.iinfo(init.dtype).min if fn is lax.max else np.iinfo(init.dtype).max))):
            return reducer
    return None


def reduce(operands, init_values, computation: Callable, dimensions: Sequence[int],
           out_sharding=None):
    """Reduces `operands` over `dimensions` with the binary `computation`
    (pytrees of operands and init values reduce together)."""
    lax = _lax()
    from meshsim._src.numpy import namespace as jnp
    flat_ops, tree = tree_util.tree_flatten(operands)
    flat_inits, init_tree = tree_util.tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError("Operands must have the same tree structure as init_values: "
                         f"{tree} vs. {init_tree}")
    dims = tuple(operator.index(d) for d in dimensions)
    if len(flat_ops) == 1:
        reducer = _monoid_reducer(computation, flat_inits[0])
        if reducer is not None:
            return reducer(flat_ops[0], dims)
    flat_ops = [jnp.asarray(x) for x in flat_ops]
    if not dims:
        return operands
    # Fold the reduced dimensions, moved to the front and merged, one element at a time.
    kept = [d for d in range(flat_ops[0].ndim) if d not in dims]
    moved = [jnp.transpose(x, dims + tuple(kept)) for x in flat_ops]
    n = int(np.prod([flat_ops[0].shape[d] for d in dims]))
    moved = [x.reshape((n,) + tuple(flat_ops[0].shape[d] for d in kept)) for x in moved]
    carry = [jnp.broadcast_to(jnp.asarray(i, x.dtype), x.shape[1:]) for i, x in zip(flat_inits, moved)]

    def step(acc, xs):
        acc_tree = tree_util.tree_unflatten(tree, acc)
        x_tree = tree_util.tree_unflatten(tree, list(xs))
        return tree_util.tree_leaves(computation(acc_tree, x_tree)), None
    out, _ = lax.scan(step, carry, moved)
    return tree_util.tree_unflatten(tree, out)


def padtype_to_pads(in_shape, window_shape, window_strides, padding) -> list[tuple[int, int]]:
    """The (low, high) padding of each dimension that 'SAME', 'SAME_LOWER' or
    'VALID' padding means for these windows."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return [(0, 0)] * len(in_shape)
        if mode in ("SAME", "SAME_LOWER"):
            out_shape = [-(-int(i) // int(s)) for i, s in zip(in_shape, window_strides)]
            pads = [builtins.max((o - 1) * int(s) + int(w) - int(i), 0)
                    for o, s, w, i in zip(out_shape, window_strides, window_shape, in_shape)]
            if mode == "SAME":
                return [(p // 2, p - p // 2) for p in pads]
            return [(p - p // 2, p // 2) for p in pads]
        raise RuntimeError("Unrecognized padding type: expected 'VALID', 'SAME', or 'SAME_LOWER', "
                           f"got {padding}.")
    return [tuple(p) for p in padding]


def _window_monoid(computation, init):
    """The windowed-reduction primitive for `computation` when `init` is its
    identity (JAX's monoid reducers: sums, maxima and minima)."""
    lax = _lax()
    reducer = _monoid_reducer(computation, init)
    names = {lax.reduce_sum: "reduce_window_sum", lax.reduce_max: "reduce_window_max",
             lax.reduce_min: "reduce_window_min"}
    return names.get(reducer)


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
    """The shape reduce_window gives (XLA's window arithmetic)."""
    def dilate(shape, dilation):
        return shape if dilation is None else [0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dilation)]
    padded = [d + lo + hi for d, (lo, hi) in zip(dilate(operand_shape, base_dilation), padding)]
    window = dilate(window_dimensions, window_dilation)
    return tuple(builtins.max((p - w) // s + 1, 0) for p, w, s in zip(padded, window, window_strides))


def reduce_window(operand, init_value, computation: Callable, window_dimensions,
                  window_strides=None, padding="VALID", base_dilation=None, window_dilation=None):
    """Reduces each window of `operand` with `computation`. Sums, maxima and
    minima from their identity bind reduce_window_sum/max/min (differentiable
    as JAX's, max/min pooling through select_and_scatter_add); any other
    computation folds the windows one offset at a time (a strided slice per
    offset) from the operand padded with `init_value`."""
    lax = _lax()
    from meshsim._src.numpy import namespace as jnp
    operand = jnp.asarray(operand)
    nd = operand.ndim
    window = tuple(operator.index(w) for w in window_dimensions)
    effective = list(window) if window_dilation is None else [
        (w - 1) * d + 1 if w else 0 for w, d in zip(window, window_dilation)]
    pads = padtype_to_pads(operand.shape, effective, window_strides or [], padding)
    strides = (1,) * len(window) if window_strides is None else tuple(int(s) for s in window_strides)
    base = (1,) * len(window) if base_dilation is None else tuple(int(b) for b in base_dilation)
    wdil = (1,) * len(window) if window_dilation is None else tuple(int(d) for d in window_dilation)
    monoid = _window_monoid(computation, init_value)
    if monoid is not None:
        return core.bind1(monoid, operand, base_dilation=base, padding=tuple((int(lo), int(hi)) for lo, hi in pads),
                          window_dilation=wdil, window_dimensions=window, window_strides=strides)
    if len(window) != nd:
        raise TypeError("reduce_window got the wrong number of window_dimensions for operand: got operand "
                        f"shape {operand.shape} with window_dimensions {window}.")
    init = jnp.asarray(init_value, operand.dtype)
    x = lax.pad(operand, init, [(lo, hi, b - 1) for (lo, hi), b in zip(pads, base)])
    effective = [(w - 1) * d + 1 for w, d in zip(window, wdil)]
    out_shape = [(n - e) // s + 1 if n >= e else 0 for n, e, s in zip(x.shape, effective, strides)]
    # Accumulated as XLA does: from the init value, one window offset at a time.
    result = jnp.broadcast_to(init, out_shape)
    if not builtins.all(out_shape):
        return result
    for offset in np.ndindex(*window):
        start = [o * d for o, d in zip(offset, wdil)]
        limit = [st + (o - 1) * s + 1 for st, o, s in zip(start, out_shape, strides)]
        result = computation(result, lax.slice(x, start, limit, strides))
    return result


def associative_scan(fn: Callable, elems, reverse: bool = False, axis: int = 0):
    """The inclusive scan of `elems` along `axis` with the associative `fn`
    (on pytrees), by the odd/even recursion: log-depth, n applications."""
    from meshsim._src.numpy import namespace as jnp
    flat, tree = tree_util.tree_flatten(elems)
    flat = [jnp.asarray(x) for x in flat]
    if not flat:
        return elems
    axis = axis % flat[0].ndim if flat[0].ndim else 0
    if reverse:
        flat = [jnp.flip(x, axis) for x in flat]
    sizes = {x.shape[axis] for x in flat}
    if len(sizes) != 1:
        raise ValueError("Array inputs to associative_scan must have the same first dimension. "
                         f"(saw: {[x.shape for x in flat]})")

    def combine(a, b):
        out = fn(tree_util.tree_unflatten(tree, a), tree_util.tree_unflatten(tree, b))
        return tree_util.tree_leaves(out)

    def take(x, start, stop=None, step=1):
        index = [slice(None)] * x.ndim
        index[axis] = slice(start, stop, step)
        return x[tuple(index)]

    def interleave(a, b):
        # a has as many or one more elements than b along the axis
        n_a, n_b = a.shape[axis], b.shape[axis]
        if n_a > n_b:
            pad_shape = list(b.shape)
            pad_shape[axis] = 1
            b = jnp.concatenate([b, jnp.zeros(pad_shape, b.dtype)], axis=axis)
        both = jnp.stack([a, b], axis=axis + 1)
        shape = list(a.shape)
        shape[axis] = 2 * a.shape[axis]
        return take(both.reshape(shape), 0, n_a + n_b)

    def scan(xs):
        n = xs[0].shape[axis]
        if n < 2:
            return xs
        reduced = combine([take(x, 0, -1, 2) for x in xs], [take(x, 1, None, 2) for x in xs])
        odd = scan(reduced)
        if n % 2 == 0:
            even = combine([take(o, 0, -1) for o in odd], [take(x, 2, None, 2) for x in xs])
        else:
            even = combine(odd, [take(x, 2, None, 2) for x in xs])
        even = [jnp.concatenate([take(x, 0, 1), e], axis=axis) for x, e in zip(xs, even)]
        return [interleave(e, o) for e, o in zip(even, odd)]

    out = scan(flat)
    if reverse:
        out = [jnp.flip(x, axis) for x in out]
    return tree_util.tree_unflatten(tree, out)


def _approx_k(operand, k: int, reduction_dimension: int, largest: bool):
    from meshsim._src.numpy import namespace as jnp
    lax = _lax()
    operand = jnp.asarray(operand)
    if not jnp.issubdtype(operand.dtype, jnp.floating):
        raise ValueError("operand must be a floating type")
    dim = reduction_dimension % operand.ndim
    if not 0 <= k <= operand.shape[dim]:
        raise ValueError(f"k must be in [0, {operand.shape[dim]}], got {k}")
    moved = jnp.moveaxis(operand, dim, -1)
    if largest:
        values, indices = lax.top_k(moved, k)
    else:
        # the smallest first, ties by index: a stable sort of the values
        indices = jnp.argsort(moved, axis=-1, stable=True)[..., :k].astype(jnp.int32)
        values = jnp.take_along_axis(moved, indices, axis=-1)
    return [jnp.moveaxis(values, -1, dim), jnp.moveaxis(indices, -1, dim)]


def approx_max_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """The k largest values along `reduction_dimension` and their indices
    (exact, as on CPU)."""
    return _approx_k(operand, k, reduction_dimension, largest=True)


def approx_min_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """The k smallest values along `reduction_dimension` and their indices
    (exact, as on CPU)."""
    return _approx_k(operand, k, reduction_dimension, largest=False)


def composite(decomposition: Callable, name: str, version: int = 0):
    """`decomposition`, marked as the composite operation `name` (a name for
    compilers that can replace it; the computation is the decomposition)."""
    import functools

    @functools.wraps(decomposition)
    def call(*args, **kwargs):
        return decomposition(*args, **kwargs)
    return call


def dtype(x):
    """The dtype `x` has (or would have as an array), canonicalised."""
    if hasattr(x, "dtype"):
        return core.canonicalize_dtype(x.dtype)
    if core.is_python_scalar(x):
        return core.python_scalar_dtype(x)
    return core.canonicalize_dtype(np.result_type(x))


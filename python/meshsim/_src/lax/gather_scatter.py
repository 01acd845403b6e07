"""jax.lax's functional gather and scatter forms, with XLA's dimension numbers.

Each is lowered onto meshsim's point-wise `gather`/`scatter*` primitives
(`_src/lax/indexing.py`): a slice of size s starting at index i along an
operand dim becomes the point indices i + arange(s) there, an operand batching
dim the arange of its index batching dim. The result (or the updates) is then
laid out as the index batch dims followed by the slice's offset dims in operand
order, and transposed to the dimension numbers' order. Gradients, vmap and
sharding come from the point-wise primitives.

Out-of-bounds starts follow XLA: "clip" and "promise_in_bounds" clamp each
start so that the whole slice fits; "fill" (gather) fills a slice that does not
fit, "drop" (scatter) skips a window that does not fit; scatters default to
dropping, gathers to clamping."""
from __future__ import annotations

import enum
import operator
from typing import Callable, NamedTuple, Sequence

import numpy as np

from meshsim._src import core
from meshsim._src import dtype_kinds

__all__ = ["GatherDimensionNumbers", "ScatterDimensionNumbers", "GatherScatterMode", "gather", "scatter",
           "scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max", "scatter_apply",
           "index_take"]


class GatherDimensionNumbers(NamedTuple):
    """XLA's gather dimension numbers; the index vector is the last dim of the indices."""
    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """XLA's scatter dimension numbers; the index vector is the last dim of the indices."""
    update_window_dims: Sequence[int]
    inserted_window_dims: Sequence[int]
    scatter_dims_to_operand_dims: Sequence[int]
    operand_batching_dims: Sequence[int] = ()
    scatter_indices_batching_dims: Sequence[int] = ()


class GatherScatterMode(enum.Enum):
    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()
    ONE_HOT = enum.auto()

    @staticmethod
    def from_any(s):
        if isinstance(s, GatherScatterMode):
            return s
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s == "fill" or s == "drop":
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        if s == "one_hot":
            return GatherScatterMode.ONE_HOT
        raise ValueError(f'Unknown gather mode "{s}"')


def _lax():
    from meshsim._src.lax import namespace as lax
    return lax


def _ints(seq) -> tuple[int, ...]:
    return tuple(operator.index(d) for d in seq)


def _index_array(indices):
    """The indices as a signed integer array wide enough to hold every operand bound."""
    lax = _lax()
    indices = core.asarray_value(indices)
    if not dtype_kinds.issubdtype(indices.dtype, np.integer):
        raise ValueError("indices must have an integer type")
    dtype = np.dtype(indices.dtype)
    if dtype.itemsize >= 4 and dtype.kind == "u":
        # Larger than any bound: clamping keeps it out of range once signed.
        limit = np.iinfo(np.int32 if dtype.itemsize == 4 else np.int64).max
        indices = lax.min(indices, lax.full_like(indices, limit))
        return lax.convert_element_type(indices, np.int32 if dtype.itemsize == 4 else np.int64)
    return indices if dtype.itemsize >= 4 else lax.convert_element_type(indices, np.int32)


def _point_indices(operand_shape, indices, starts_of, batching_of, window, drop: bool):
    """Point indices of every element of the windows.

    `starts_of[d]`: the position in the index vector of operand dim d's start;
    `batching_of[d]`: the index batch dim operand dim d is batched along;
    `window[d]`: the window's size along operand dim d, or None for a collapsed
    (size-1, dropped) dim. Starts are clamped so the window fits; with `drop`, a
    window that does not fit gets indices past the end instead. Returns (axes, point index arrays of shape
    batch + window, the operand dims of the window dims in that order, and the
    operand dims left unindexed, which follow the window dims)."""
    lax = _lax()
    batch_shape = tuple(indices.shape[:-1])
    nb = len(batch_shape)
    window_dims = [d for d in range(len(operand_shape)) if d not in batching_of and window[d] is not None]
    # A full-size window along a dim no index moves is taken whole: it needs no point indices.
    whole = [d for d in window_dims if d not in starts_of and window[d] == operand_shape[d]]
    if len(whole) == len(operand_shape) and whole:  # keep one indexed dim for the point primitives
        whole = whole[1:]
    window_dims = [d for d in window_dims if d not in whole]
    shape = batch_shape + tuple(window[d] for d in window_dims)
    idx_dtype = indices.dtype
    starts, fits = {}, None
    for d, k in starts_of.items():
        size = 1 if window[d] is None else window[d]
        start = lax.squeeze(lax.slice_in_dim(indices, k, k + 1, axis=nb), (nb,))
        starts[d] = (start, operand_shape[d] - size)
    if drop:
        for start, top in starts.values():
            ok = lax.bitwise_and(lax.ge(start, lax.full_like(start, 0)), lax.le(start, lax.full_like(start, top)))
            fits = ok if fits is None else lax.bitwise_and(fits, ok)
    axes, arrays = [], []
    for d in range(len(operand_shape)):
        if d in whole:
            continue
        if d in batching_of:
            arrays.append(lax.broadcasted_iota(idx_dtype, shape, batching_of[d]))
        else:
            if d in starts:
                start, top = starts[d]
                start = lax.clamp(lax.full_like(start, 0), start, lax.full_like(start, max(top, 0)))
                if fits is not None:  # out-of-range windows read the fill value / are dropped
                    start = lax.select(fits, start, lax.full_like(start, operand_shape[d]))
                point = lax.broadcast_in_dim(start, shape, tuple(range(nb)))
            else:
                point = lax.full(shape, 0, idx_dtype)
            if d in window_dims:
                point = lax.add(point, lax.broadcasted_iota(idx_dtype, shape, nb + window_dims.index(d)))
            arrays.append(point)
        axes.append(d)
    return axes, arrays, window_dims, whole


def _takes_points(shape, num_batch, index_map, collapsed, op_batching, idx_batching, window_dims, partial):
    """Whether the numbers index single elements of whole dims, as the primitives' JAX form
    takes them (indexing_jax_form.h): every indexed dim collapsed, other dims whole (`partial[d]`
    is None), operand and index batching dims alike, the index dims adjacent in the result."""
    indexed = set(index_map) | set(op_batching)
    if not indexed or sorted(index_map) != sorted(collapsed) or tuple(op_batching) != tuple(idx_batching):
        return False
    if any(partial[d] is not None and d not in indexed for d in range(len(shape))):
        return False
    if any(partial[d] not in (None, 1) for d in indexed):
        return False
    rank = num_batch + len(window_dims)
    batch_at = [d for d in range(rank) if d not in window_dims]
    if batch_at and batch_at[-1] - batch_at[0] + 1 != len(batch_at):
        return False
    if op_batching and (batch_at[:1] != [0] or any(d >= num_batch for d in op_batching)):
        return False
    return True


def _check_sorted(op: str, dims, name: str):
    if list(dims) != sorted(dims):
        raise TypeError(f"{name} in {op} op must be sorted; got {tuple(dims)}")


def _check_dims(what: str, dims, rank: int, name: str):
    for d in dims:
        if not 0 <= d < rank:
            raise TypeError(f"{what} {name} must be in the range [0, {rank}); got {name}={tuple(dims)}.")
    if len(set(dims)) != len(dims):
        raise TypeError(f"{what} {name} must not repeat; got {name}={tuple(dims)}.")


def gather(operand, start_indices, dimension_numbers: GatherDimensionNumbers, slice_sizes, *,
           unique_indices: bool = False, indices_are_sorted: bool = False, mode=None, fill_value=None):
    """XLA's gather: for each index vector in `start_indices` (its last dim), the slice of
    `operand` of size `slice_sizes` starting there."""
    lax = _lax()
    parsed = GatherScatterMode.from_any(mode) if mode is not None else GatherScatterMode.PROMISE_IN_BOUNDS
    if parsed is GatherScatterMode.ONE_HOT:
        raise NotImplementedError("gather mode ONE_HOT is not supported")
    operand = core.asarray_value(operand)
    indices = _index_array(start_indices)
    dn = dimension_numbers
    offset_dims, collapsed, start_map = _ints(dn.offset_dims), _ints(dn.collapsed_slice_dims), _ints(dn.start_index_map)
    op_batching, idx_batching = _ints(dn.operand_batching_dims), _ints(dn.start_indices_batching_dims)
    slice_sizes = _ints(slice_sizes)
    shape, rank = tuple(operand.shape), operand.ndim
    if len(slice_sizes) != rank:
        raise TypeError("Gather op must have one slice size for every input dimension; got: "
                        f"len(slice_sizes)={len(slice_sizes)}, input_shape.rank={rank}")
    for i, (s, n) in enumerate(zip(slice_sizes, shape)):
        if not 0 <= s <= n:
            raise TypeError(f"Slice size at index {i} in gather op is out of range, must be within "
                            f"[0, {n} + 1), got {s}.")
    if indices.ndim < 1 or len(start_map) != indices.shape[-1]:
        raise TypeError(f"Gather op has {len(start_map)} elements in start_index_map and the bound of "
                        f"dimension index_vector_dim={max(indices.ndim - 1, 0)} of indices is "
                        f"{indices.shape[-1] if indices.ndim else 1}. These two numbers must be equal.")
    _check_sorted("gather", offset_dims, "offset_dims")
    _check_sorted("gather", collapsed, "collapsed_slice_dims")
    _check_sorted("gather", op_batching, "operand_batching_dims")
    _check_dims("Gather op", start_map, rank, "start_index_map")
    _check_dims("Gather op", collapsed, rank, "collapsed_slice_dims")
    _check_dims("Gather op", op_batching, rank, "operand_batching_dims")
    _check_dims("Gather op", idx_batching, indices.ndim - 1, "start_indices_batching_dims")
    for i, d in enumerate(collapsed):
        if slice_sizes[d] != 1:
            raise TypeError("Gather op can only collapse slice dims with bound 1, but bound is "
                            f"{slice_sizes[d]} for index {d} at position {i}.")
    if len(op_batching) != len(idx_batching):
        raise TypeError("Gather op requires equal numbers of operand_batching_dims and "
                        f"start_indices_batching_dims, got {op_batching} and {idx_batching}.")
    kept = [d for d in range(rank) if d not in collapsed and d not in op_batching]
    if len(kept) != len(offset_dims):
        raise TypeError("All components of the offset index in a gather op must either be a offset dimension "
                        f"or explicitly collapsed/batching; got len(slice_sizes)={rank}, "
                        f"output_slice_sizes={offset_dims}, collapsed_slice_dims={collapsed}, "
                        f"operand_batching_dims={op_batching}.")
    out_rank = indices.ndim - 1 + len(offset_dims)
    _check_dims("Gather op", offset_dims, out_rank, "offset_dims")
    if _takes_points(shape, indices.ndim - 1, start_map, collapsed, op_batching, idx_batching, offset_dims,
                     [n if n != d_size else None for n, d_size in zip(slice_sizes, shape)]):
        from meshsim._src.lax import indexing
        return indexing.gather_in_jax_form(operand, core.asarray_value(start_indices), (
            offset_dims, collapsed, start_map, op_batching, idx_batching), slice_sizes,
            parsed.name.lower(), fill_value, indices_are_sorted, unique_indices)
    window = [None if d in collapsed else slice_sizes[d] for d in range(rank)]
    axes, points, window_dims, whole = _point_indices(
        shape, indices, {d: k for k, d in enumerate(start_map)}, dict(zip(op_batching, idx_batching)), window,
        drop=parsed is GatherScatterMode.FILL_OR_DROP)
    nb = indices.ndim - 1
    if axes:
        from meshsim._src.lax import indexing
        fill = parsed is GatherScatterMode.FILL_OR_DROP
        out = indexing.gather(operand, points, axes, 0, mode="fill" if fill else "clip",
                              fill_value=fill_value if fill else None)
    else:  # no index moves any dim: every slice is the whole operand
        out = lax.broadcast_in_dim(operand, tuple(indices.shape[:-1]) + shape, tuple(range(nb, nb + rank)))
    # `out` is laid out as batch + window_dims + whole; put the offset dims where the numbers say.
    layout = window_dims + whole
    source = {}
    batch_positions = iter(range(nb))
    for o in range(out_rank):
        if o in offset_dims:
            source[o] = nb + layout.index(kept[offset_dims.index(o)])
        else:
            source[o] = next(batch_positions)
    perm = tuple(source[o] for o in range(out_rank))
    return out if perm == tuple(range(out_rank)) else lax.transpose(out, perm)


def _scatter(kind: str, operand, scatter_indices, updates, dimension_numbers, mode, indices_are_sorted=False,
             unique_indices=False):
    lax = _lax()
    parsed = GatherScatterMode.from_any(mode)
    if parsed is GatherScatterMode.ONE_HOT:
        raise NotImplementedError("scatter mode ONE_HOT is not supported")
    operand, updates = core.asarray_value(operand), core.asarray_value(updates)
    indices = _index_array(scatter_indices)
    if operand.dtype != updates.dtype:
        raise TypeError(f"lax.scatter requires arguments to have the same dtypes, got {operand.dtype}, "
                        f"{updates.dtype}.")
    dn = dimension_numbers
    window_update_dims, inserted = _ints(dn.update_window_dims), _ints(dn.inserted_window_dims)
    to_operand = _ints(dn.scatter_dims_to_operand_dims)
    op_batching, idx_batching = _ints(dn.operand_batching_dims), _ints(dn.scatter_indices_batching_dims)
    shape, rank = tuple(operand.shape), operand.ndim
    nb = indices.ndim - 1
    expected_rank = nb + len(window_update_dims)
    if updates.ndim != expected_rank:
        raise TypeError(f"Updates tensor must be of rank {expected_rank}; got {updates.ndim}.")
    if indices.ndim < 1 or len(to_operand) != indices.shape[-1]:
        raise TypeError(f"Scatter op has {len(to_operand)} elements in scatter_dims_to_operand_dims and the "
                        f"bound of dimension index_vector_dim={max(indices.ndim - 1, 0)} of indices is "
                        f"{indices.shape[-1] if indices.ndim else 1}. These two numbers must be equal.")
    _check_sorted("scatter", window_update_dims, "update_window_dims")
    _check_sorted("scatter", inserted, "inserted_window_dims")
    _check_sorted("scatter", op_batching, "operand_batching_dims")
    _check_dims("Scatter op", to_operand, rank, "scatter_dims_to_operand_dims")
    _check_dims("Scatter op", inserted, rank, "inserted_window_dims")
    _check_dims("Scatter op", op_batching, rank, "operand_batching_dims")
    _check_dims("Scatter op", idx_batching, nb, "scatter_indices_batching_dims")
    _check_dims("Scatter op", window_update_dims, updates.ndim, "update_window_dims")
    kept = [d for d in range(rank) if d not in inserted and d not in op_batching]
    if len(kept) != len(window_update_dims):
        raise TypeError("Scatter op has window of size "
                        f"{len(window_update_dims) + len(inserted) + len(op_batching)}; doesn't match operand "
                        f"of rank {rank}.")
    for k, (u, d) in enumerate(zip(window_update_dims, kept)):
        if updates.shape[u] > shape[d]:
            raise TypeError("Bounds of the window dimensions of updates must not exceed the bounds of the "
                            f"corresponding dimensions of operand. For dimension {u}, updates bound is "
                            f"{updates.shape[u]}, operand bound is {shape[d]}.")
    scatter_dims = [u for u in range(updates.ndim) if u not in window_update_dims]
    for i, u in enumerate(scatter_dims):
        if updates.shape[u] != indices.shape[i]:
            raise TypeError("Bounds of the scatter dimensions of updates must be the same as the bounds of the "
                            f"corresponding dimensions of scatter indices. For scatter dimension {u}, updates "
                            f"bound is {updates.shape[u]}, indices bound is {indices.shape[i]}.")
    window = [None] * rank
    for u, d in zip(window_update_dims, kept):
        window[d] = updates.shape[u]
    if _takes_points(shape, nb, to_operand, inserted, op_batching, idx_batching, window_update_dims,
                     [None if w is None or w == n else w for w, n in zip(window, shape)]):
        from meshsim._src.lax import indexing
        return indexing.scatter_in_jax_form(kind, operand, core.asarray_value(scatter_indices), updates, (
            window_update_dims, inserted, to_operand, op_batching, idx_batching), parsed.name.lower(),
            indices_are_sorted, unique_indices)
    axes, points, window_dims, whole = _point_indices(
        shape, indices, {d: k for k, d in enumerate(to_operand)}, dict(zip(op_batching, idx_batching)), window,
        drop=parsed is not GatherScatterMode.CLIP)
    layout = window_dims + whole
    perm = tuple(scatter_dims) + tuple(window_update_dims[kept.index(d)] for d in layout)
    if perm != tuple(range(updates.ndim)):
        updates = lax.transpose(updates, perm)
    if not axes:  # a scalar operand: every window is the whole operand
        return _scatter_scalar(kind, operand, updates)
    from meshsim._src.lax import indexing
    return indexing.scatter(kind, operand, updates, points, axes, 0, mode="drop")


def _scatter_scalar(kind: str, operand, updates):
    lax = _lax()
    if updates.ndim == 0:
        updates = lax.expand_dims(updates, (0,))
    dims = tuple(range(updates.ndim))
    if updates.size == 0:
        return operand
    if kind == "scatter":
        return lax.reshape(updates, (updates.size,))[updates.size - 1]
    reducer, combine = {"scatter_add": (lax.reduce_sum, lax.add), "scatter_sub": (lax.reduce_sum, lax.sub),
                        "scatter_mul": (lax.reduce_prod, lax.mul),
                        "scatter_min": (lax.reduce_min, lax.min), "scatter_max": (lax.reduce_max, lax.max)}[kind]
    return combine(operand, reducer(updates, dims))


def scatter(operand, scatter_indices, updates, dimension_numbers: ScatterDimensionNumbers, *,
            indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
    """XLA's scatter: `updates`' windows replace the operand's at the index vectors."""
    return _scatter("scatter", operand, scatter_indices, updates, dimension_numbers, mode, indices_are_sorted,
                    unique_indices)


def scatter_add(operand, scatter_indices, updates, dimension_numbers: ScatterDimensionNumbers, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
    """XLA's scatter with addition: duplicate indices accumulate."""
    return _scatter("scatter_add", operand, scatter_indices, updates, dimension_numbers, mode, indices_are_sorted,
                    unique_indices)


def scatter_sub(operand, scatter_indices, updates, dimension_numbers: ScatterDimensionNumbers, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
    """XLA's scatter with subtraction."""
    return _scatter("scatter_sub", operand, scatter_indices, updates, dimension_numbers, mode, indices_are_sorted,
                    unique_indices)


def scatter_mul(operand, scatter_indices, updates, dimension_numbers: ScatterDimensionNumbers, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
    """XLA's scatter with multiplication."""
    return _scatter("scatter_mul", operand, scatter_indices, updates, dimension_numbers, mode, indices_are_sorted,
                    unique_indices)


def scatter_min(operand, scatter_indices, updates, dimension_numbers: ScatterDimensionNumbers, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
    """XLA's scatter keeping the minimum."""
    return _scatter("scatter_min", operand, scatter_indices, updates, dimension_numbers, mode, indices_are_sorted,
                    unique_indices)


def scatter_max(operand, scatter_indices, updates, dimension_numbers: ScatterDimensionNumbers, *,
                indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
    """XLA's scatter keeping the maximum."""
    return _scatter("scatter_max", operand, scatter_indices, updates, dimension_numbers, mode, indices_are_sorted,
                    unique_indices)


def scatter_apply(operand, scatter_indices, func: Callable, dimension_numbers: ScatterDimensionNumbers, *,
                  update_shape=(), indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
    """`func` applied to the operand's elements the windows (of shape `update_shape`) cover;
    an element covered twice has `func` applied once per cover, as XLA's sequential scatter."""
    lax = _lax()
    operand = core.asarray_value(operand)
    ones = lax.full(tuple(update_shape), 1, np.int32)
    covered = _scatter("scatter_add", lax.full(operand.shape, 0, np.int32), scatter_indices, ones,
                       dimension_numbers, mode)
    max_cover = lax.reduce_max(covered, tuple(range(covered.ndim))) if covered.ndim else covered

    def body(i, x):
        return lax.select(lax.lt(lax.full_like(covered, i), covered), func(x), x)

    return lax.fori_loop(0, max_cover, body, operand)


def index_take(src, idxs, axes: Sequence[int]):
    """src indexed on `axes[j]` by the integer array `idxs[j]` (all of one length), each index
    taken modulo the axis' size; the index dim comes first."""
    lax = _lax()
    src = core.asarray_value(src)
    axes = _ints(axes)
    columns = [lax.expand_dims(core.asarray_value(i), (1,)) for i in idxs]
    indices = lax.concatenate(columns, 1)
    sizes = lax.broadcast_in_dim(np.array([src.shape[ax] for ax in axes], indices.dtype), indices.shape, (1,))
    indices = lax.rem(lax.add(lax.rem(indices, sizes), sizes), sizes)
    slice_sizes = tuple(1 if d in axes else n for d, n in enumerate(src.shape))
    dn = GatherDimensionNumbers(offset_dims=tuple(range(1, src.ndim - len(axes) + 1)), collapsed_slice_dims=axes,
                                start_index_map=axes)
    return gather(src, indices, dn, slice_sizes)

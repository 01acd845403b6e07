"""meshsim.numpy: indexing — x[idx], x.at[idx], take, take_along_axis, put_along_axis.

The functions selecting by conditions and index arithmetic (nonzero, bincount, choose, ...)
are in selection.py.

Every index lowers to the primitives of cpp/meshsim/primitives/indexing.cpp:
static slices/ints are zero-copy `slice`/`rev`/`squeeze` views, traced scalar
indices a `dynamic_slice`, integer-array (advanced) indices one `gather`, and
`.at[idx]` updates one `scatter*` whose index arrays form an open mesh (each
sliced axis indexed by an arange broadcast along its own result dim).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from meshsim._src import core
from meshsim._src.lax import indexing as lax_indexing
from meshsim._src.lax.structural import canonicalize_axis
from meshsim._src.numpy.promotion import broadcast_shapes, broadcast_to_shape
from meshsim._src.sharding import explicit
from meshsim._src import dtype_kinds, errors

__all__ = ["take", "take_along_axis", "put_along_axis"]


# ---------------------------------------------------------------- parsing

@dataclass
class _Entry:
    """One index item resolved against the operand: kind is "none", "slice", "int" (static),
    "dyn" (traced/array integer scalar), "array" (integer arrays; a boolean mask gives one per
    axis it covers) or "bool" (a scalar boolean: a new axis kept or emptied)."""
    kind: str
    axes: tuple[int, ...] = ()
    value: object = None


def _int32(values):
    return core.asarray_value(np.asarray(values, np.int32))


def _is_concrete(x) -> bool:
    return not isinstance(x, core.Tracer)


def _classify(item):
    """(kind, value, number of operand axes consumed) for one index item."""
    if item is None:
        return "none", None, 0
    if item is Ellipsis:
        return "ellipsis", None, 0
    if isinstance(item, slice):
        return "slice", _static_slice(item), 1
    if isinstance(item, (bool, np.bool_)):
        return "bool", bool(item), 0
    if isinstance(item, (int, np.integer)):
        return "int", int(item), 1
    if core.is_value(item) or isinstance(item, (np.ndarray, list, tuple)):
        return _classify_array(item)
    raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                    f"{np.asarray(item).dtype if isinstance(item, float) else type(item).__name__}")


def _classify_array(item):
    from_list = isinstance(item, (list, tuple))
    if from_list:
        item = np.asarray(item) if len(item) else np.zeros(0, np.int32)
        if item.dtype == object:
            raise TypeError("Indexer must be an array of integers or booleans")
    dtype = np.dtype(item.dtype)
    if dtype == np.bool_:
        if not _is_concrete(item):
            raise errors.NonConcreteBooleanIndexError(item)
        mask = np.asarray(item)
        return ("bool", bool(mask), 0) if mask.ndim == 0 else ("mask", mask, mask.ndim)
    if not dtype_kinds.issubdtype(dtype, np.integer):
        raise TypeError(f"Indexer must have integer or boolean type, got indexer with type {dtype}")
    if isinstance(item, np.ndarray):
        if item.ndim == 0:
            return "int", int(item), 1
        # A NumPy array stays one (JAX tests its signs without equations); a list is an array.
        return "array", [core.asarray_value(item) if from_list else item.astype(core.canonicalize_dtype(dtype))], 1
    return ("dyn" if item.ndim == 0 else "array"), item if item.ndim == 0 else [item], 1


def _static_slice(s: slice):
    def static(v):
        if v is None:
            return None
        if isinstance(v, core.Tracer):
            raise IndexError("Array slice indices must have static start/stop/step to be used with "
                             "NumPy indexing syntax. Use lax.dynamic_slice for traced starts.")
        return operator.index(v)
    if s.step is not None and static(s.step) == 0:
        raise ValueError("slice step cannot be zero")
    return slice(static(s.start), static(s.stop), static(s.step))


def _parse_index(shape, idx) -> list[_Entry]:
    """The entries of `idx`, with the Ellipsis expanded and every operand axis covered."""
    if isinstance(idx, list):
        raise TypeError("Using a non-tuple sequence for multidimensional indexing is not allowed; "
                        "use `arr[array(seq)]` instead of `arr[seq]`.")
    items = [_classify(i) for i in (idx if isinstance(idx, tuple) else (idx,))]
    if sum(kind == "ellipsis" for kind, _, _ in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(n for _, _, n in items)
    if consumed > len(shape):
        raise IndexError(f"Too many indices: array is {len(shape)}-dimensional, but {consumed} were indexed")
    entries, axis = [], 0
    for position, (kind, value, n) in enumerate(items):
        if kind == "ellipsis":
            for _ in range(len(shape) - consumed):
                entries.append(_Entry("slice", (axis,), range(shape[axis])))
                axis += 1
            continue
        axes = tuple(range(axis, axis + n))
        axis += n
        entries.append(_entry(kind, value, axes, shape, position))
    entries += [_Entry("slice", (a,), range(shape[a])) for a in range(axis, len(shape))]
    return entries


def _entry(kind, value, axes, shape, position) -> _Entry:
    if kind == "slice":
        return _Entry("slice", axes, range(*value.indices(shape[axes[0]])))
    if kind == "mask":
        expected = tuple(shape[a] for a in axes)
        if value.shape != expected:
            raise IndexError(f"boolean index did not match shape of indexed array in index {position}: "
                             f"got {value.shape}, expected {list(expected)}")
        return _Entry("array", axes, [np.asarray(i, np.int32) for i in np.nonzero(value)])
    if kind == "int":
        n = shape[axes[0]]
        index_dtype = core.canonicalize_dtype(np.int64)  # int32 with x64 off
        info = np.iinfo(index_dtype)
        if not info.min <= value <= info.max:  # JAX converts the index before clamping it
            raise OverflowError(f"Python int {value} too large to convert to {index_dtype.name}")
        if n == 0:  # nothing to clamp to
            raise IndexError(f"index is out of bounds for axis {axes[0]} with size 0")
        return _Entry("int", axes, max(min(value, n), -n - 1))  # out-of-range stays so, in int32
    return _Entry(kind, axes, value)


def _is_full(e: _Entry, shape) -> bool:
    return e.kind == "slice" and e.value == range(shape[e.axes[0]])


def _advanced_position(entries, is_advanced, dims_before) -> int:
    """Where the broadcast index dims go (NumPy's rule): at the first advanced entry when the
    advanced entries are adjacent, else in front."""
    where = [i for i, e in enumerate(entries) if is_advanced(e)]
    if not where or where != list(range(where[0], where[-1] + 1)):
        return 0
    return dims_before(where[0])


# ---------------------------------------------------------------- x[idx]

_GATHER_MODES = {None: "clip", "clip": "clip", "promise_in_bounds": "clip", "fill": "fill", "drop": "fill"}


def _getitem(x, idx):
    """x[idx] with NumPy semantics; out-of-range integer indices are clamped, as JAX's."""
    return _rewriting_take(core.asarray_value(x), idx, mode=None, fill_value=None)


def _rewriting_take(x, idx, mode, fill_value, out_sharding=None, indices_are_sorted=False, unique_indices=False):
    if mode not in _GATHER_MODES:
        raise ValueError(f"Invalid mode {mode!r} for indexing; expected one of 'clip', 'fill', "
                         "'drop', 'promise_in_bounds'")
    raw_mode, mode = mode, _GATHER_MODES[mode]
    entries = _parse_index(x.shape, idx)
    has_arrays = any(e.kind in ("array", "bool") for e in entries)
    if not has_arrays and out_sharding is None:
        _check_sharded_partial_index(x, entries)
    if not has_arrays and out_sharding is not None and _gathers_eagerly(x, entries):
        def take(operand):
            return _rewriting_take(operand, idx, mode, fill_value, None, indices_are_sorted, unique_indices)
        return explicit.auto_axes(take, out_sharding=out_sharding, axes=out_sharding.mesh.explicit_axes)(x)

    def is_advanced(e):
        if e.kind == "int":
            return has_arrays or not -x.shape[e.axes[0]] <= e.value < x.shape[e.axes[0]]
        if e.kind == "dyn":
            return has_arrays or mode != "clip"
        return e.kind in ("array", "bool")

    if out_sharding is None and not has_arrays and mode == "clip" and any(e.kind == "dyn" for e in entries):
        y = _jax_dynamic_slice(x, entries)
        if y is not None:
            return y
    if out_sharding is None and any(is_advanced(e) for e in entries):
        plan = _jax_gather_plan(x, entries)
        if plan is not None:
            y = lax_indexing.gather_in_jax_form(
                x, plan.indices, plan.dnums, plan.slice_sizes, _JAX_GATHER_MODES[raw_mode], fill_value,
                indices_are_sorted=indices_are_sorted or plan.sorted, unique_indices=unique_indices or plan.sorted)
            if plan.reversed_dims:
                y = core.bind1("rev", y, dimensions=plan.reversed_dims)
            return _expand_dims(y, plan.newaxis_dims)
    y, ydims = _basic_indexing(x, entries, is_advanced)
    if not any(is_advanced(e) for e in entries):
        return y
    arrays, axes = [], []
    for e, dims in zip(entries, ydims):
        if is_advanced(e):
            arrays += _index_arrays(e)
            axes += dims
    shape = broadcast_shapes(*(a.shape for a in arrays))
    arrays = [broadcast_to_shape(a, shape) for a in arrays]
    at = _advanced_position(entries, is_advanced, lambda i: ydims[i][0] if ydims[i] else 0)
    return lax_indexing.gather(y, arrays, axes, at, mode, fill_value, out_sharding=out_sharding)


# ---------------------------------------------------------------- JAX's gather for an index

_JAX_GATHER_MODES = {None: "promise_in_bounds", "promise_in_bounds": "promise_in_bounds", "clip": "clip",
                     "fill": "fill_or_drop", "drop": "fill_or_drop"}
_JAX_SCATTER_MODES = {None: "fill_or_drop", "drop": "fill_or_drop", "fill": "fill_or_drop",
                      "promise_in_bounds": "promise_in_bounds", "clip": "clip"}


@dataclass
class _JaxGather:
    """An index as JAX's one gather (or scatter): its indices array (index vectors last), the
    five tuples of its dimension numbers, slice sizes, the shape x[idx] has (new axes
    included), where the new axes go, the result dims to reverse (negative steps) and whether
    the indices are known sorted and unique (no advanced index)."""
    indices: object
    dnums: tuple
    slice_sizes: tuple
    slice_shape: tuple
    newaxis_dims: tuple
    reversed_dims: tuple
    sorted: bool


def _jax_gather_plan(x, entries):
    """JAX's gather for indices of integer arrays, integers, whole slices and new axes (as JAX's
    _index_to_gather builds it, equation for equation); None for other indices (partial or
    strided slices, scalar booleans, empty shapes), which meshsim's own lowering takes."""
    atoms = []  # (kind, operand axis, value), a boolean mask as one integer array per dim
    for e in entries:
        if e.kind == "none":
            atoms.append(("none", None, None))
        elif e.kind == "slice":
            r = e.value
            if r.step != 1 and len(r):  # JAX's point indices start + step * iota
                atoms.append(("strided", e.axes[0], r))
            elif r != range(x.shape[e.axes[0]]):
                return None
            else:
                atoms.append(("slice", e.axes[0], None))
        elif e.kind == "array":
            atoms += [("array", a, v) for a, v in zip(e.axes, e.value)]
        elif e.kind in ("int", "dyn"):
            atoms.append((e.kind, e.axes[0], e.value))
        else:
            return None
    if 0 in x.shape:
        return None
    advanced = any(kind == "array" for kind, _, _ in atoms)
    normed = {p: lax_indexing.normalize_index(v, x.shape[a]) for p, (kind, a, v) in enumerate(atoms)
              if kind in ("array", "int", "dyn")}
    positions = [p for p in normed] if advanced else []
    contiguous = all(b - a == 1 for a, b in zip(positions, positions[1:]))
    offset_dims, collapsed, start_index_map, slice_sizes, slice_shape, newaxis_dims = [], [], [], [], [], []
    reversed_dims = []
    gather_indices, gather_shape = [], []
    y_axis = collapsed_y_axis = 0
    for p, (kind, axis, _) in enumerate(atoms):
        if positions and p == (positions[0] if contiguous else 0):
            arrays = _broadcast_arrays([normed[q] for q in positions])
            shape = tuple(arrays[0].shape)
            gather_indices += [(core.convert_element_type(a, np.int32), len(gather_shape)) for a in arrays]
            gather_shape += shape
            axes = [atoms[q][1] for q in positions]
            start_index_map += axes
            collapsed += axes
            slice_shape += shape
            y_axis += len(shape)
            collapsed_y_axis += len(shape)
        if p in positions:
            slice_sizes.append(1)
        elif kind in ("int", "dyn"):
            gather_indices.append((core.convert_element_type(normed[p], np.int32), len(gather_shape)))
            collapsed.append(axis)
            slice_sizes.append(1)
            start_index_map.append(axis)
        elif kind == "none":
            slice_shape.append(1)
            newaxis_dims.append(y_axis)
            y_axis += 1
        elif kind == "strided":
            r = atoms[p][2]
            iota = core.bind1("iota", dtype=np.dtype(np.int32), shape=(len(r),), dimension=0)
            steps = core.bind1("mul", _int32(r.step), iota)
            points = core.bind1("add", _int32(r.start), steps)
            if r.step < 0:
                reversed_dims.append(collapsed_y_axis)
                points = core.bind1("rev", points, dimensions=(0,))
            slice_sizes.append(1)
            gather_indices.append((points, len(gather_shape)))
            start_index_map.append(axis)
            gather_shape.append(len(r))
            collapsed.append(axis)
            slice_shape.append(len(r))
            collapsed_y_axis += 1
            y_axis += 1
        else:
            slice_shape.append(x.shape[axis])
            slice_sizes.append(x.shape[axis])
            offset_dims.append(collapsed_y_axis)
            collapsed_y_axis += 1
            y_axis += 1
    if not gather_indices or 0 in slice_shape:
        return None
    batch_at = [d for d in range(collapsed_y_axis) if d not in offset_dims]
    if batch_at and batch_at[-1] - batch_at[0] + 1 != len(batch_at):
        return None  # index dims apart in the result: not one block of our form
    if len(gather_indices) == 1:
        g = gather_indices[0][0]
        indices = _broadcast_in_dim(g, g.shape + (1,), range(g.ndim))
    else:
        full = tuple(gather_shape) + (1,)
        indices = core.bind1("concatenate", *(_broadcast_in_dim(g, full, range(i, i + g.ndim))
                                              for g, i in gather_indices), dimension=len(gather_shape))
    dnums = (tuple(offset_dims), tuple(sorted(collapsed)), tuple(start_index_map), (), ())
    return _JaxGather(indices, dnums, tuple(slice_sizes), tuple(slice_shape), tuple(newaxis_dims),
                      tuple(reversed_dims), not advanced)


def _jax_dynamic_slice(x, entries):
    """x[idx] for integers (one of them traced), unit-step slices and new axes as JAX's one
    dynamic_slice (every start an array, normalised by equations), then rev, squeeze and new
    axes; None for other indices."""
    starts, sizes, rev_axes, squeeze_axes, newaxis_dims = [], [], [], [], []
    for e in entries:
        if e.kind == "none":
            newaxis_dims.append(len(starts) - len(squeeze_axes) + len(newaxis_dims))
        elif e.kind in ("int", "dyn"):
            starts.append(core.asarray_value(e.value))
            sizes.append(1)
            squeeze_axes.append(e.axes[0])
        elif e.kind == "slice" and abs(e.value.step) == 1:
            r = e.value
            if r.step < 0:
                start = r.stop + 1
                starts.append(start)
                sizes.append(max(0, r.start + 1 - start))
                rev_axes.append(e.axes[0])
            else:
                starts.append(r.start)
                sizes.append(max(0, r.stop - r.start))
        else:
            return None
    if len(starts) > 1:
        starts = [core.convert_element_type(s, np.int32) for s in starts]
    y = lax_indexing.dynamic_slice(x, starts, sizes)
    if rev_axes:
        y = core.bind1("rev", y, dimensions=tuple(rev_axes))
    if squeeze_axes:
        y = core.bind1("squeeze", y, dimensions=tuple(squeeze_axes))
    return _expand_dims(y, newaxis_dims)


def _broadcast_arrays(arrays):
    """JAX's broadcast of index arrays to their common shape (unchanged when all agree)."""
    arrays = [core.asarray_value(a) for a in arrays]
    shape = broadcast_shapes(*(a.shape for a in arrays))
    if all(a.shape == shape for a in arrays):
        return arrays
    return [broadcast_to_shape(a, shape) for a in arrays]


def _expand_dims(y, dims):
    """lax.expand_dims: new axes of size 1 at `dims` of the result."""
    if not dims:
        return y
    ndim = y.ndim + len(dims)
    shape, it = [], iter(y.shape)
    for d in range(ndim):
        shape.append(1 if d in dims else next(it))
    return _broadcast_in_dim(y, shape, [d for d in range(ndim) if d not in dims])


def _gathers_eagerly(x, entries) -> bool:
    """Whether JAX takes an integer or partial-slice index of a concrete array held by several
    devices with a gather, which honours `out_sharding=` (a traced array is sliced instead)."""
    if not isinstance(x, core.Array) or x.sharding.num_devices == 1:
        return False
    for e in entries:
        if e.kind in ("int", "dyn"):
            return True
        if e.kind == "slice" and (abs(e.value.step) != 1 or len(e.value) != x.shape[e.axes[0]]):
            return True
    return False


def _check_sharded_partial_index(x, entries):
    """JAX indexes a concrete array spread over devices with a gather (under jit, with slices),
    whose sharding rule refuses an integer index or a partial or strided slice of a sharded dim."""
    if not isinstance(x, core.Array) or x.aval.mesh is None:
        return
    spec = list(x.aval.spec)
    dims, count, sharded = [], 0, False
    for e in entries:
        if e.kind in ("none", "bool"):
            continue
        if e.kind == "slice":
            r, n = e.value, x.shape[e.axes[0]]
            if abs(r.step) == 1 and len(r) == n:
                continue  # whole (or reversed): a slice and a rev
            if r.step != 1:
                dims.append(len(r))  # gathered element by element
        count += 1
        sharded |= any(a < len(spec) and spec[a] for a in e.axes)
    if sharded:
        from meshsim._src.sharding.explicit import ShardingTypeError
        raise ShardingTypeError(
            "Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather "
            "indexing as out sharding could not be resolved unambiguously (or would require "
            f"collectives on inputs). Got operand={x.aval!r}, "
            f"indices=ShapedArray(int32[{','.join(map(str, dims + [count]))}])")


def _index_arrays(e: _Entry):
    if e.kind == "int":
        return [_int32(e.value)]
    if e.kind == "dyn":
        return [e.value]
    if e.kind == "bool":
        return [_int32([0] if e.value else [])]
    return [core.asarray_value(v) for v in e.value]


def _basic_indexing(x, entries, is_advanced):
    """Applies slices, in-range static ints, traced scalars and new axes; returns the view and,
    per entry, the dims of the view it now occupies (advanced entries are left for a gather)."""
    starts, limits, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    reversed_dims, squeezed, dynamic = [], [], {}
    for e in entries:
        if e.kind == "slice":
            a, r = e.axes[0], e.value
            if r.step < 0 and len(r):
                starts[a], limits[a], strides[a] = r[-1], r[0] + 1, -r.step
                reversed_dims.append(a)
            else:
                starts[a], limits[a], strides[a] = (r.start, r.stop, r.step) if len(r) else (0, 0, 1)
        elif e.kind in ("int", "dyn") and not is_advanced(e):
            if e.kind == "int":
                starts[e.axes[0]] = e.value % x.shape[e.axes[0]]
                limits[e.axes[0]] = starts[e.axes[0]] + 1
            else:
                dynamic[e.axes[0]] = e.value
            squeezed.append(e.axes[0])
    y = x
    if (starts, limits, strides) != ([0] * x.ndim, list(x.shape), [1] * x.ndim):
        y = core.bind1("slice", y, start_indices=tuple(starts), limit_indices=tuple(limits),
                       strides=None if all(k == 1 for k in strides) else tuple(strides))  # as JAX's static slice
    if reversed_dims:
        y = core.bind1("rev", y, dimensions=tuple(reversed_dims))
    if dynamic:
        sizes = [1 if a in dynamic else d for a, d in enumerate(y.shape)]
        y = lax_indexing.dynamic_slice(y, [dynamic.get(a, 0) for a in range(y.ndim)], sizes)
    if squeezed:
        y = core.bind1("squeeze", y, dimensions=tuple(squeezed))
    return _insert_new_axes(y, entries, is_advanced)


def _insert_new_axes(y, entries, is_advanced):
    ydims, kept, d = [], [], 0
    for e in entries:
        if e.kind in ("none", "bool"):
            ydims.append((d,))
            d += 1
        elif e.kind in ("int", "dyn") and not is_advanced(e):
            ydims.append(())
        else:
            ydims.append(tuple(range(d, d + len(e.axes))))
            kept += ydims[-1]
            d += len(e.axes)
    if len(kept) != d:
        shape = [1] * d
        for k, size in zip(kept, y.shape):
            shape[k] = size
        y = core.bind1("broadcast_in_dim", y, shape=tuple(shape), broadcast_dimensions=tuple(kept))
    return y, ydims


# ---------------------------------------------------------------- x.at[idx]

_SCATTER_MODES = {None: "drop", "drop": "drop", "fill": "drop", "promise_in_bounds": "drop", "clip": "clip"}


def _scatter_update(x, idx, values, kind: str, mode=None, indices_are_sorted=False, unique_indices=False,
                    out_sharding=None):
    """x with x[idx] combined with `values` by the primitive `kind`; out-of-range indices are
    dropped (mode 'clip' clamps them). With `out_sharding` the result is laid out as given and
    the operand's own layout places no constraint (JAX computes it under auto_axes)."""
    from meshsim._src.sharding import explicit as explicit_sharding
    if out_sharding is not None:
        out_sharding = _update_out_sharding(out_sharding, np.shape(x))
    if mode not in _SCATTER_MODES:
        raise ValueError(f"Invalid mode {mode!r} for scatter; expected one of 'drop', 'fill', 'clip', "
                         "'promise_in_bounds'")
    x = core.asarray_value(x)
    entries = _parse_index(x.shape, idx)
    if any(e.kind == "bool" and not e.value for e in entries):  # x[..., False, ...] selects nothing
        return x if out_sharding is None else explicit_sharding.reshard(x, out_sharding)
    entries = [_Entry("none") if e.kind == "bool" else e for e in entries]
    if x.ndim == 0:  # only new axes can index a scalar: update it as element 0 of a vector
        flat = core.bind1("reshape", x, new_sizes=(1,), dimensions=None)
        out = _scatter_update(flat, (0,) + (None,) * len(entries), values, kind, mode)
        out = core.bind1("reshape", out, new_sizes=(), dimensions=None)
        return out if out_sharding is None else explicit_sharding.reshard(out, out_sharding)
    explicit = x.aval.mesh is not None and core.typeof(x).sharding.mesh.explicit_axes
    plan = None if explicit or out_sharding is not None else _jax_gather_plan(x, entries)
    if plan is not None:  # JAX's scatter, as its _scatter_impl writes it
        if core.is_value(values):
            values = core.convert_element_type(values, x.dtype, values.weak_type and x.weak_type)
        else:
            values = np.asarray(values, x.dtype)
        values = broadcast_to_shape(core.asarray_value(values), plan.slice_shape)
        if plan.newaxis_dims:
            values = core.bind1("squeeze", values, dimensions=plan.newaxis_dims)
        if plan.reversed_dims:
            values = core.bind1("rev", values, dimensions=plan.reversed_dims)
        dnums = plan.dnums[:3] + ((), ())
        return lax_indexing.scatter_in_jax_form(
            kind, x, plan.indices, values, dnums, _JAX_SCATTER_MODES[mode],
            indices_are_sorted=indices_are_sorted or plan.sorted, unique_indices=unique_indices or plan.sorted)
    values = core.convert_element_type(core.asarray_value(values), x.dtype, x.weak_type)
    arrays, axes, batch, result_shape, slice_spec = _open_mesh(x, entries)
    if not explicit or out_sharding is not None:
        # No Explicit axis types x (an Auto mesh, in or out of `set_mesh`), or a result laid
        # out as asked: nothing to lay out.
        values = broadcast_to_shape(values, result_shape)
    else:  # as JAX: the updates laid out as x[idx] is (its "slice sharding")
        from meshsim._src.numpy.structural import broadcast_to
        from meshsim._src.sharding.explicit import PartitionSpec as P, NamedSharding
        entry = lambda a: None if not a else a[0] if len(a) == 1 else tuple(a)  # noqa: E731
        sharding = NamedSharding(core.typeof(x).sharding.mesh, P(*map(entry, slice_spec)))
        values = broadcast_to(values, result_shape, out_sharding=sharding)
    return lax_indexing.scatter(kind, x, values, arrays, axes, 0, _SCATTER_MODES[mode], batch,
                                out_sharding=out_sharding)


def _canonical_out_sharding(out_sharding):
    """`.at[...].<method>(out_sharding=)` as a NamedSharding, with JAX's first checks: its type,
    then the spec against the mesh (NamedSharding's)."""
    from meshsim._src.sharding.explicit import NamedSharding, PartitionSpec
    assert isinstance(out_sharding, (NamedSharding, PartitionSpec))
    return NamedSharding(*explicit.resolve(out_sharding, "out_sharding"))


def _update_out_sharding(out_sharding, shape):
    """`.at[...].<update>(out_sharding=)` canonical, its rank and the result's divisibility
    checked as JAX's."""
    sharding = _canonical_out_sharding(out_sharding)
    assert len(sharding.spec) <= len(shape), (len(shape), sharding.spec)
    sharding.check_type_divisibility(shape)
    return sharding


def _open_mesh(x, entries):
    """Index arrays (one per indexed operand axis, all of one shape K), the batch axes (full
    slices indexed by K's same dim: JAX's window dims, which keep their sharding), the shape
    of x[idx] and JAX's spec for it; trailing full slices stay unindexed dims after K."""
    trailing = len(entries)
    while trailing > 0 and _is_full(entries[trailing - 1], x.shape):
        trailing -= 1
    if not any(e.axes for e in entries[:trailing]):  # nothing indexed: index the first full axis
        trailing = next(i for i, e in enumerate(entries) if e.axes) + 1
    is_advanced = lambda e: e.kind in ("int", "dyn", "array")  # noqa: E731
    adv = [a for e in entries[:trailing] if is_advanced(e) for a in _index_arrays(e)]
    bshape = broadcast_shapes(*(a.shape for a in adv))
    plain = [e for e in entries[:trailing] if not is_advanced(e)]
    at = _advanced_position(entries, is_advanced, lambda i: sum(not is_advanced(e) for e in entries[:i]))
    plain_sizes = [len(e.value) if e.kind == "slice" else 1 for e in plain]
    kshape = tuple(plain_sizes[:at]) + bshape + tuple(plain_sizes[at:])
    bdims = tuple(range(at, at + len(bshape)))
    xspec = [list(e) for e in x.aval.spec] + [[]] * (x.ndim - len(x.aval.spec))
    adv_spec = [[]] * len(bshape)
    plain_spec = [xspec[e.axes[0]] if e.kind == "slice" else [] for e in plain]
    arrays, axes, batch, k = [], [], [], 0
    for e in entries[:trailing]:
        if is_advanced(e):
            for a, arr in zip(e.axes, _index_arrays(e)):
                b = broadcast_to_shape(arr, bshape)
                if not arrays:
                    adv_spec = [list(s) for s in b.aval.spec] + [[]] * (len(bshape) - len(b.aval.spec))
                arrays.append(_broadcast_in_dim(b, kshape, bdims))
                axes.append(a)
            continue
        dim = k if k < at else k + len(bshape)
        k += 1
        if e.kind == "slice":
            arrays.append(_broadcast_in_dim(_int32(np.asarray(e.value)), kshape, (dim,)))
            axes.append(e.axes[0])
            if dim == e.axes[0] and _is_full(e, x.shape):
                batch.append(dim)
    rest = tuple(x.shape[e.axes[0]] for e in entries[trailing:])
    spec = plain_spec[:at] + adv_spec + plain_spec[at:] + [xspec[e.axes[0]] for e in entries[trailing:]]
    return arrays, axes, batch, kshape + rest, spec


def _broadcast_in_dim(x, shape, dims):
    return core.bind1("broadcast_in_dim", x, shape=tuple(shape), broadcast_dimensions=tuple(dims))


def _negatives_out_of_range(shape, idx, clip: bool):
    """`idx` with its negative integer entries not counted from the end
    (`wrap_negative_indices=False`): each becomes 0 under mode 'clip', else its axis' size,
    an index out of range that the mode then fills or drops."""
    items = list(idx) if isinstance(idx, tuple) else [idx]
    consumed = sum(_classify(i)[2] for i in items)
    out, axis = [], 0
    for item in items:
        kind, value, n = _classify(item)
        if kind == "ellipsis":
            axis += len(shape) - consumed
        elif kind == "int" and value < 0:
            item = 0 if clip else shape[axis]
        elif kind in ("dyn", "array"):
            indices = core.asarray_value(value if kind == "dyn" else value[0])
            item = _unwrapped(indices, shape[axis], "clip" if clip else "fill")
        axis += n
        out.append(item)
    return tuple(out)


class _IndexUpdateHelper:
    """x.at: x.at[idx].set(v) etc. return updated copies (JAX arrays are immutable)."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return _IndexUpdateRef(self.array, index)

    def __repr__(self):
        return f"_IndexUpdateHelper({self.array!r})"


class _IndexUpdateRef:
    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array, self.index = array, index

    def __repr__(self):
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def _index(self, x, wrap_negative_indices: bool, clip: bool):
        return self.index if wrap_negative_indices else _negatives_out_of_range(np.shape(x), self.index, clip)

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None, fill_value=None,
            out_sharding=None, wrap_negative_indices=True):
        if out_sharding is not None:
            out_sharding = _canonical_out_sharding(out_sharding)
        x = core.asarray_value(self.array)
        index = self._index(x, wrap_negative_indices, _GATHER_MODES.get(mode) == "clip")
        return _rewriting_take(x, index, mode, fill_value,
                               out_sharding, indices_are_sorted, unique_indices)

    def _update(self, kind, values, indices_are_sorted, unique_indices, mode, out_sharding, wrap):
        index = self._index(self.array, wrap, mode == "clip")
        return _scatter_update(self.array, index, values, kind, mode, indices_are_sorted, unique_indices,
                               out_sharding)

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
            wrap_negative_indices=True):
        return self._update("scatter", values, indices_are_sorted, unique_indices, mode, out_sharding,
                            wrap_negative_indices)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
            wrap_negative_indices=True):
        return self._update("scatter_add", values, indices_are_sorted, unique_indices, mode, out_sharding,
                            wrap_negative_indices)

    def subtract(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
                 wrap_negative_indices=True):
        return self._update("scatter_sub", values, indices_are_sorted, unique_indices, mode, out_sharding,
                            wrap_negative_indices)

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
                 wrap_negative_indices=True):
        return self._update("scatter_mul", values, indices_are_sorted, unique_indices, mode, out_sharding,
                            wrap_negative_indices)

    mul = multiply

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
            wrap_negative_indices=True):
        return self._update("scatter_min", values, indices_are_sorted, unique_indices, mode, out_sharding,
                            wrap_negative_indices)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
            wrap_negative_indices=True):
        return self._update("scatter_max", values, indices_are_sorted, unique_indices, mode, out_sharding,
                            wrap_negative_indices)

    def divide(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
               wrap_negative_indices=True):
        """x divided at idx by `values` (x[idx] /= values): as JAX, x over ones multiplied at idx."""
        from meshsim._src.numpy import creation, ufuncs
        ones = _IndexUpdateRef(creation.ones_like(self.array), self.index)
        return ufuncs.divide(self.array, ones.multiply(
            values, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            out_sharding=out_sharding, wrap_negative_indices=wrap_negative_indices))

    def power(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
              wrap_negative_indices=True):
        """x raised at idx to `values` (x[idx] **= values): as JAX, x to ones multiplied at idx."""
        from meshsim._src.numpy import creation, ufuncs
        ones = _IndexUpdateRef(creation.ones_like(self.array), self.index)
        return ufuncs.power(self.array, ones.multiply(
            values, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            out_sharding=out_sharding, wrap_negative_indices=wrap_negative_indices))

    def apply(self, func, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        """The unary `func` applied to x at idx, once for each time idx names an element
        (repeated indices apply it repeatedly, as JAX's scatter_apply)."""
        from meshsim._src.lax import control_flow
        x = core.asarray_value(self.array)
        zeros = broadcast_to_shape(core.asarray_value(np.int32(0)), x.shape)
        covered = _IndexUpdateRef(zeros, self.index).add(
            np.int32(1), indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
            wrap_negative_indices=wrap_negative_indices)
        most = core.bind1("reduce_max", covered, axes=tuple(range(x.ndim))) if x.ndim else covered

        def once_more(i, y):
            still = core.bind1("lt", broadcast_to_shape(core.asarray_value(i), x.shape), covered)
            return core.bind1("select_n", still, y, func(y))

        return control_flow.fori_loop(0, most, once_more, x)


core.Array.at = property(_IndexUpdateHelper)
core.Tracer.at = property(_IndexUpdateHelper)


# ---------------------------------------------------------------- take & co.

_TAKE_MODES = {None: "fill", "fill": "fill", "clip": "clip", "wrap": "wrap"}
_TAKE_ALONG_MODES = {None: "fill", "fill": "fill", "drop": "fill", "clip": "clip", "promise_in_bounds": "clip"}


def _take_mode(fn: str, mode, modes):
    if mode == "raise":
        raise NotImplementedError(f"The 'raise' mode to jnp.{fn} is not supported.")
    if mode not in modes:
        raise ValueError(f"Invalid mode '{mode}' for np.{fn}")
    return modes[mode]


def _unwrapped(indices, n: int, mode: str):
    """Indices whose negative values do not count from the end: they become 0 (clip) or out of
    range (fill), as the gather primitive would otherwise wrap them."""
    zero = broadcast_to_shape(core.convert_element_type(core.asarray_value(0), indices.dtype), indices.shape)
    repl = zero if mode == "clip" else broadcast_to_shape(
        core.convert_element_type(core.asarray_value(n), indices.dtype), indices.shape)
    return core.bind1("select_n", core.bind1("lt", indices, zero), indices, repl)


def _ravel(x):
    return x if x.ndim == 1 else core.bind1("reshape", x, new_sizes=(x.size,), dimensions=None)


def _integer_indices(fn: str, indices):
    indices = core.asarray_value(indices)
    if not dtype_kinds.issubdtype(indices.dtype, np.integer):
        raise TypeError(f"{fn} requires integer indices, got {indices.dtype}")
    return indices


def take(a, indices, axis=None, out=None, mode=None, unique_indices=False, indices_are_sorted=False,
         fill_value=None):
    """Elements of `a` at `indices` along `axis` (flattened when None). Out-of-range indices give
    fill_value by default (NaN for floats), as jnp.take."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.take is not supported.")
    a, indices = core.asarray_value(a), _integer_indices("take", indices)
    mode = _take_mode("take", mode, _TAKE_MODES)
    if axis is None:
        a, axis = _ravel(a), 0
    axis = canonicalize_axis(axis, a.ndim)
    if mode == "clip":  # np.take's clip: negative indices clamp to 0
        indices = _unwrapped(indices, a.shape[axis], mode)
    return lax_indexing.gather(a, [indices], (axis,), axis, mode, fill_value)


def _along_axis_indices(fn, arr, indices, axis):
    """arr broadcast against indices, one index array per dim (an arange on all but `axis`), and
    the normalized axis."""
    arr, indices = core.asarray_value(arr), _integer_indices(fn, indices)
    if axis is None:
        arr, axis = _ravel(arr), 0
        if indices.ndim != 1:
            raise ValueError(f"when axis=None, `indices` must have a single dimension, got {indices.shape}")
    if indices.ndim != arr.ndim:
        raise ValueError("indices and arr must have the same number of dimensions; "
                         f"{indices.ndim} vs. {arr.ndim}")
    axis = canonicalize_axis(axis, arr.ndim)
    drop = lambda s: s[:axis] + (1,) + s[axis + 1:]  # noqa: E731
    shape = broadcast_shapes(drop(arr.shape), drop(indices.shape))
    out_shape = shape[:axis] + (indices.shape[axis],) + shape[axis + 1:]
    arr = broadcast_to_shape(arr, shape[:axis] + (arr.shape[axis],) + shape[axis + 1:])
    arrays = [broadcast_to_shape(indices, out_shape) if d == axis else
              _broadcast_in_dim(_int32(np.arange(out_shape[d])), out_shape, (d,)) for d in range(arr.ndim)]
    return arr, arrays, axis


def take_along_axis(arr, indices, axis, mode=None, fill_value=None, *, wrap_negative_indices=None):
    """arr[..., indices, ...] matched element by element along `axis` (np.take_along_axis).
    Negative indices count from the end unless wrap_negative_indices=False (the default for
    mode='promise_in_bounds')."""
    wrap = mode != "promise_in_bounds" if wrap_negative_indices is None else wrap_negative_indices
    mode = _take_mode("take_along_axis", mode, _TAKE_ALONG_MODES)
    arr, arrays, axis = _along_axis_indices("take_along_axis", arr, indices, axis)
    if not wrap:
        arrays[axis] = _unwrapped(arrays[axis], arr.shape[axis], mode)
    return lax_indexing.gather(arr, arrays, range(arr.ndim), 0, mode, fill_value,
                               batch_axes=[d for d in range(arr.ndim) if d != axis])


def put_along_axis(arr, indices, values, axis, inplace: bool = True, *, mode=None):
    """A copy of arr with `values` written at `indices` along `axis` (inplace=False required)."""
    if inplace:
        raise ValueError("jax.numpy.put_along_axis cannot modify arrays in-place; pass inplace=False")
    arr = core.asarray_value(arr)
    full, arrays, axis = _along_axis_indices("put_along_axis", arr, indices, axis)
    if full.shape != arr.shape:
        raise ValueError(f"put_along_axis: indices of shape {core.asarray_value(indices).shape} do not "
                         f"match arr of shape {arr.shape}")
    values = core.convert_element_type(core.asarray_value(values), arr.dtype, arr.weak_type)
    values = broadcast_to_shape(values, arrays[0].shape)
    return lax_indexing.scatter("scatter", arr, values, arrays, range(arr.ndim), 0, _SCATTER_MODES[mode],
                                batch_axes=[d for d in range(arr.ndim) if d != axis])

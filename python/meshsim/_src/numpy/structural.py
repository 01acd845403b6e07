"""meshsim.numpy: shape manipulation, joining, splitting and rearranging (as jax.numpy).

Everything here is composed from the structural lax ops, most of which are
zero-copy views in the kernels (reshape of contiguous data, transpose,
broadcast, slice, rev, squeeze); concatenate and pad write one buffer."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from meshsim._src import api
from meshsim._src import core
from meshsim._src.lax import structural as lax
from meshsim._src.lax.structural import canonicalize_axis
from meshsim._src.numpy import promotion
from meshsim._src import dtype_kinds

__all__ = [
    "reshape", "ravel", "transpose", "permute_dims", "matrix_transpose", "swapaxes", "moveaxis",
    "expand_dims", "squeeze", "broadcast_to", "broadcast_arrays", "broadcast_shapes",
    "atleast_1d", "atleast_2d", "atleast_3d", "concatenate", "concat", "stack", "unstack",
    "hstack", "vstack", "dstack", "column_stack", "split", "array_split", "hsplit", "vsplit",
    "dsplit", "repeat", "tile", "pad", "flip", "fliplr", "flipud", "rot90", "roll",
    "ndim", "shape", "size", "append", "insert", "delete", "rollaxis", "resize", "trim_zeros",
]


def _axes(axis, ndim: int) -> tuple[int, ...]:
    """An int or sequence of axes, canonicalised; duplicates are an error."""
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(canonicalize_axis(a, ndim) for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"repeated axis: {axis}")
    return axes


def ndim(a) -> int:
    return a.ndim if hasattr(a, "ndim") else np.ndim(a)


def shape(a) -> tuple[int, ...]:
    return tuple(a.shape) if hasattr(a, "shape") else np.shape(a)


def size(a, axis=None) -> int:
    s = shape(a)
    if axis is None:
        return math.prod(s)
    return math.prod(s[i] for i in _axes(axis, len(s)))


# --- reshaping ---------------------------------------------------------------

def _resolve_shape(old: tuple[int, ...], new) -> tuple[int, ...]:
    """`new` with its single -1 (if any) solved, as JAX reports failures."""
    new = lax.canonicalize_shape(new)
    unknown = [i for i, d in enumerate(new) if d == -1]
    if len(unknown) > 1:
        raise TypeError(f"can only specify one unknown axis size with a `-1` value, got {new}")
    if not unknown:
        if math.prod(new) != math.prod(old):  # exact: a C++ product of huge sizes would wrap
            raise TypeError(f"cannot reshape array of shape {old} (size {math.prod(old)}) into "
                            f"shape {new} (size {math.prod(new)})")
        return new
    known = math.prod(d for d in new if d != -1)
    total = math.prod(old)
    if known == 0 or total % known:
        raise TypeError(f"cannot reshape array of shape {old} (size {total}) into shape {new} "
                        f"because the product of specified axis sizes ({known}) does not evenly "
                        f"divide {total}")
    return tuple(total // known if d == -1 else d for d in new)


def reshape(a, shape=None, order: str = "C", *, copy=None, out_sharding=None):
    a = core.asarray_value(a)
    if shape is None:
        raise TypeError("reshape() missing required argument 'shape'")
    new = _resolve_shape(a.shape, shape)
    if order == "C":
        return lax.reshape(a, new, out_sharding=out_sharding)
    if order == "F":  # column-major: reverse both index orders around a row-major reshape
        rev_old = tuple(reversed(range(a.ndim)))
        flat = lax.reshape(lax.transpose(a, rev_old), new[::-1])
        return lax.transpose(flat, tuple(reversed(range(len(new)))))
    raise ValueError(f"Unexpected value for 'order' argument: {order}.")


@api.jitted_when_traced(static_argnames=('order', 'out_sharding'), inline=True)
def ravel(a, order: str = "C", *, out_sharding=None):
    a = core.asarray_value(a)
    return reshape(a, (a.size,), order, out_sharding=out_sharding)


def transpose(a, axes=None):
    a = core.asarray_value(a)
    if axes is None:
        return lax.transpose(a, tuple(reversed(range(a.ndim))))
    return lax.transpose(a, tuple(canonicalize_axis(i, a.ndim) for i in axes))


def permute_dims(a, /, axes):
    return transpose(a, axes)


def matrix_transpose(x, /):
    x = core.asarray_value(x)
    if x.ndim < 2:
        raise ValueError(f"x must be at least two-dimensional for matrix_transpose; got {x.ndim=}")
    return swapaxes(x, -1, -2)


@api.jitted_when_traced(static_argnames=('axis1', 'axis2'), inline=True)
def swapaxes(a, axis1: int, axis2: int):
    a = core.asarray_value(a)
    perm = list(range(a.ndim))
    i, j = canonicalize_axis(axis1, a.ndim), canonicalize_axis(axis2, a.ndim)
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, perm)


def moveaxis(a, source, destination):
    a = core.asarray_value(a)
    source, destination = _axes(source, a.ndim), _axes(destination, a.ndim)
    if len(source) != len(destination):
        raise ValueError(f"Inconsistent number of elements: {len(source)} vs {len(destination)}")
    perm = [i for i in range(a.ndim) if i not in source]
    for dst, src in sorted(zip(destination, source)):
        perm.insert(dst, src)
    return lax.transpose(a, perm)


def expand_dims(a, axis):
    a = core.asarray_value(a)
    return lax.expand_dims(a, (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis))


def squeeze(a, axis=None):
    a = core.asarray_value(a)
    if axis is None:
        return lax.squeeze(a, tuple(i for i, d in enumerate(a.shape) if d == 1))
    return lax.squeeze(a, _axes(axis, a.ndim))


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    return promotion.broadcast_shapes(*(lax.canonicalize_shape(s) for s in shapes))


def broadcast_to(array, shape, *, out_sharding=None):
    """JAX's lax.broadcast_to: leading dims added, size-1 dims stretched; with `out_sharding`
    the array's own sharded dims must already be laid out as asked."""
    from meshsim._src.sharding import explicit
    array = core.asarray_value(array)
    shape = lax.canonicalize_shape(shape)
    aval = core.typeof(array)
    spec = None
    if out_sharding is not None:
        explicit.check_explicit_axes(out_sharding, "jnp.broadcast_to")
        spec = explicit.core_spec(explicit.resolve(out_sharding, "out_sharding")[1], len(shape))
    own = [list(e) for e in aval.spec] + [[]] * (array.ndim - len(aval.spec))
    if array.shape == shape and (spec is None or (aval.mesh is not None and own == spec)):
        return array
    if len(shape) < array.ndim:
        raise ValueError(f"Cannot broadcast to shape with fewer dimensions: arr_shape={array.shape} "
                         f"shape={shape}")
    nlead = len(shape) - array.ndim
    shape_ok = all(d in (1, s) for d, s in zip(array.shape, shape[nlead:]))
    sharding_ok = spec is None or all(not a or a == b for a, b in zip(own, spec[nlead:]))
    if not shape_ok or not sharding_ok:
        raise ValueError(f"Incompatible types for broadcasting: input type={aval.str_short()} "
                         f"and requested type={_type_str(array.dtype, shape, spec)}")
    out = promotion.broadcast_to_shape(array, shape)
    return out if out_sharding is None else explicit.reshard(out, out_sharding)


def broadcast_to_eagerly_materialized(array, shape, *, out_sharding=None):
    """`jnp.broadcast_to` as programs call it: outside a trace JAX's result is a
    fresh buffer, so a later `lax.div(x, it)` divides rather than multiplying by
    a reciprocal (XLA's rewrite of x / broadcast(y)); meshsim's own functions,
    which JAX runs inside its jitted code, use the view (`broadcast_to`)."""
    out = broadcast_to(array, shape, out_sharding=out_sharding)
    if out is array or core._core.current_trace() is not None:
        return out
    return lax.copy(out)


broadcast_to_eagerly_materialized.__name__ = broadcast_to_eagerly_materialized.__qualname__ = "broadcast_to"


def _type_str(dtype, shape, spec) -> str:
    """float32[8@dp,4@(tp,x)]: a type as JAX's str_short shows it."""
    def dim(n, axes):
        if not axes:
            return str(n)
        return f"{n}@{axes[0]}" if len(axes) == 1 else f"{n}@({','.join(axes)})"
    return f"{np.dtype(dtype).name}[{','.join(dim(n, a) for n, a in zip(shape, spec or [[]] * len(shape)))}]"


def broadcast_arrays(*args):
    arrays = [core.asarray_value(a) for a in args]
    common = broadcast_shapes(*(a.shape for a in arrays))
    return [promotion.broadcast_to_shape(a, common) for a in arrays]


def _atleast(arys, ndim: int, new_axes):
    """Each array with size-1 axes inserted (lax.expand_dims, as JAX does) at the
    places `new_axes` gives for its rank, up to `ndim` dimensions."""
    out = []
    for a in arys:
        a = core.asarray_value(a)
        out.append(a if a.ndim >= ndim else lax.expand_dims(a, new_axes(a.ndim)))
    return out[0] if len(out) == 1 else out


@api.jitted_when_traced
def atleast_1d(*arys):
    return _atleast(arys, 1, lambda nd: (0,))


@api.jitted_when_traced
def atleast_2d(*arys):
    return _atleast(arys, 2, lambda nd: tuple(range(2 - nd)))


@api.jitted_when_traced
def atleast_3d(*arys):
    if len(arys) != 1:  # JAX's program: one nested atleast_3d per array
        return [atleast_3d(a) for a in arys]
    # NumPy's placement: (N,) -> (1, N, 1) and (M, N) -> (M, N, 1).
    return _atleast(arys, 3, lambda nd: {0: (0, 1, 2), 1: (0, 2), 2: (2,)}[nd])


# --- joining -----------------------------------------------------------------

def _as_sequence(arrays):
    """A meshsim array argument as the list of its rows, as NumPy iterates it."""
    if core.is_value(arrays):
        return unstack(arrays)
    return list(arrays)


def _promote_dtypes(arrays, dtype):
    """Arrays converted to `dtype` or to their common promoted dtype (shapes unchanged)."""
    if dtype is not None:
        from meshsim._src.numpy.creation import user_dtype
        target, weak = user_dtype(dtype), False
    else:
        target, weak = promotion.result_type(*arrays)
    return [promotion._convert(a, target, weak) for a in arrays]


def concatenate(arrays, axis: int | None = 0, dtype=None):
    if core.is_value(arrays) or isinstance(arrays, np.ndarray):
        return _concatenate_array(arrays, axis, dtype)
    arrays = _as_sequence(arrays)
    if not arrays:
        raise ValueError("Need at least one array to concatenate.")
    arrays = [core.asarray_value(a) for a in arrays]
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    if arrays[0].ndim == 0:
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    axis = canonicalize_axis(axis, arrays[0].ndim)
    return lax.concatenate(_promote_dtypes(arrays, dtype), axis)


def _concatenate_array(arr, axis: int | None, dtype):
    """The rows of one array joined along `axis`, as JAX does without taking them apart:
    one reshape (after a transpose bringing the rows next to `axis`)."""
    (arr,) = _promote_dtypes([arr], dtype)
    if arr.ndim == 0 or arr.shape[0] == 0:
        raise ValueError("Need at least one array to concatenate.")
    if axis is None:
        return lax.reshape(arr, (arr.size,))
    if arr.ndim == 1:
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    axis = canonicalize_axis(axis, arr.ndim - 1)
    shape = arr.shape[1:axis + 1] + (arr.shape[0] * arr.shape[axis + 1],) + arr.shape[axis + 2:]
    return lax.reshape(arr, shape, (*range(1, axis + 1), 0, *range(axis + 1, arr.ndim)))


def concat(arrays, /, *, axis: int | None = 0):
    return concatenate(arrays, axis=axis)


def stack(arrays, axis: int = 0, out=None, dtype=None):
    if not len(arrays):
        raise ValueError("Need at least one array to stack.")
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.stack is not supported.")
    if core.is_value(arrays) or isinstance(arrays, np.ndarray):  # its rows, without unstacking them
        arrays = core.asarray_value(arrays)
        axis = canonicalize_axis(axis, arrays.ndim)
        return concatenate(expand_dims(arrays, axis + 1), axis=axis, dtype=dtype)
    from meshsim._src.numpy.creation import _check_arraylike
    _check_arraylike("stack", *arrays)
    return lax.stack(_promote_dtypes([core.asarray_value(a) for a in arrays], dtype), axis)


@api.jitted_when_traced(static_argnames=('axis',), inline=True)
def unstack(x, /, *, axis: int = 0):
    from meshsim._src.numpy.creation import _check_arraylike
    _check_arraylike("unstack", x)
    return lax.unstack(x, axis)


def hstack(tup, dtype=None):
    arrays = [atleast_1d(a) for a in _as_sequence(tup)]
    return concatenate(arrays, 0 if arrays and arrays[0].ndim == 1 else 1, dtype)


def vstack(tup, dtype=None):
    return concatenate([atleast_2d(a) for a in _as_sequence(tup)], 0, dtype)


def dstack(tup, dtype=None):
    return concatenate([atleast_3d(a) for a in _as_sequence(tup)], 2, dtype)


def column_stack(tup):
    arrays = [core.asarray_value(a) for a in _as_sequence(tup)]
    return concatenate([lax.reshape(a, (a.size, 1)) if a.ndim < 2 else a for a in arrays], 1)


# --- splitting ---------------------------------------------------------------

def _split(name: str, ary, indices_or_sections, axis: int):
    ary = core.asarray_value(ary)
    axis = canonicalize_axis(axis, ary.ndim)
    n = ary.shape[axis]
    if isinstance(indices_or_sections, core.Tracer):
        raise TypeError(f"jnp.{name}: indices_or_sections must be concrete (static) values")
    sections = np.asarray(indices_or_sections)
    if sections.ndim > 0:
        # Split points behave as Python slice bounds (negative, clipped, possibly empty pieces).
        points = [0, *(int(i) for i in sections), n]
        bounds = [builtins.slice(lo, hi).indices(n)[:2] for lo, hi in zip(points, points[1:])]
    else:
        count = operator.index(sections.item())
        if count <= 0:
            raise ValueError("number sections must be larger than 0.")
        part, rest = divmod(n, count)
        if rest and name == "split":
            raise ValueError(f"array split does not result in an equal division: rest is {rest}")
        sizes = [part + 1] * rest + [part] * (count - rest)
        starts = np.cumsum([0] + sizes[:-1])
        bounds = [(int(s), int(s) + z) for s, z in zip(starts, sizes)]
    return [lax.slice_in_dim(ary, lo, max(lo, hi), 1, axis) for lo, hi in bounds]


def split(ary, indices_or_sections, axis: int = 0):
    return _split("split", ary, indices_or_sections, axis)


def array_split(ary, indices_or_sections, axis: int = 0):
    return _split("array_split", ary, indices_or_sections, axis)


def hsplit(ary, indices_or_sections):
    ary = core.asarray_value(ary)
    return split(ary, indices_or_sections, 1 if ary.ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    ary = core.asarray_value(ary)
    if ary.ndim < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return split(ary, indices_or_sections, 0)


def dsplit(ary, indices_or_sections):
    ary = core.asarray_value(ary)
    if ary.ndim < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return split(ary, indices_or_sections, 2)


# --- repeating ---------------------------------------------------------------

def _repeat_each(a, times: int, axis: int):
    """Every element along `axis` repeated `times` times: broadcast a new axis, then merge."""
    aux = list(a.shape)
    aux.insert(axis + 1, times)
    b = lax.broadcast_in_dim(a, aux, tuple(i for i in range(len(aux)) if i != axis + 1))
    out = list(a.shape)
    out[axis] *= times
    return lax.reshape(b, out)


def _repeat_by_counts(a, counts, axis: int):
    """Element i along `axis` repeated counts[i] times (static counts): one concatenate."""
    pieces = [_repeat_each(lax.slice_in_dim(a, i, i + 1, 1, axis), int(c), axis)
              for i, c in enumerate(counts) if c]
    if not pieces:
        return lax.slice_in_dim(a, 0, 0, 1, axis)
    return lax.concatenate(pieces, axis)


def _repeat_traced(a, repeats, axis: int, total: int):
    """Output position j takes the element whose cumulative count first exceeds j."""
    from meshsim._src.numpy import namespace as jnp  # reductions and indexing live in other modules
    ends = jnp.cumsum(broadcast_to(ravel(repeats), (a.shape[axis],)))
    positions = lax.iota(ends.dtype, total)
    source = jnp.sum(lax.broadcast_in_dim(ends, (total, ends.shape[0]), (1,))
                     <= lax.broadcast_in_dim(positions, (total, ends.shape[0]), (0,)), axis=1)
    return jnp.take(a, jnp.minimum(source, a.shape[axis] - 1), axis=axis)


def repeat(a, repeats, axis: int | None = None, *, total_repeat_length: int | None = None,
           out_sharding=None):
    a = core.asarray_value(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, max(a.ndim, 1))
    from meshsim._src.sharding import explicit
    if out_sharding is None and a.ndim and explicit.get_abstract_mesh().explicit_axes:
        # JAX: under an Explicit mesh the repeated dim must be unsharded; the rest keep theirs.
        if a.aval.spec and axis < len(a.aval.spec) and a.aval.spec[axis]:
            raise ValueError("Please pass sharding to `jnp.repeat` via `out_sharding` parameter.")
        if a.aval.mesh is not None:
            out_sharding = explicit.type_spec(a.aval)
    if out_sharding is not None:  # JAX runs it under auto_axes: on the replicated value here
        if a.aval.mesh is not None and any(a.aval.spec):
            a = explicit.reshard(a, explicit.PartitionSpec())
        return explicit.reshard(_repeat(a, repeats, axis, total_repeat_length), out_sharding)
    return _repeat(a, repeats, axis, total_repeat_length)


def _repeat(a, repeats, axis: int, total_repeat_length):
    if isinstance(repeats, core.Tracer):
        if total_repeat_length is None:
            raise TypeError("When jit-compiling jnp.repeat, the total number of repeats must be "
                            "static. To fix this, either specify a static value for `repeats`, or "
                            "pass a static value to `total_repeat_length`.")
        return _repeat_traced(a, repeats, axis, operator.index(total_repeat_length))
    counts = np.asarray(repeats)
    if np.any(counts < 0):
        raise ValueError(f"repeats may not contain negative values, got {repeats}")
    if a.ndim == 0:
        if counts.size != 1:
            raise ValueError("`repeat` with a scalar parameter `a` is only implemented for scalar "
                             "values of the parameter `repeats`.")
        length = int(counts.item()) if total_repeat_length is None else total_repeat_length
        return lax.broadcast(a, (length,))
    counts = np.broadcast_to(counts.ravel(), (a.shape[axis],)) if counts.ndim else counts
    if total_repeat_length is not None:
        return _repeat_traced(a, core.asarray_value(counts.astype(np.int32)), axis,
                              operator.index(total_repeat_length))
    if counts.ndim == 0:
        return _repeat_each(a, int(counts), axis)
    return _repeat_by_counts(a, counts, axis)


def tile(A, reps):
    A = core.asarray_value(A)
    reps = lax.canonicalize_shape(reps)
    a_shape = (1,) * (len(reps) - A.ndim) + A.shape
    reps = (1,) * (len(a_shape) - len(reps)) + reps
    from meshsim._src.sharding.explicit import ShardingTypeError
    A = lax.reshape(A, a_shape)
    for i, (r, axes) in enumerate(zip(reps, A.aval.spec)):
        if r != 1 and axes:  # JAX's tile primitive: only unsharded dims repeat
            raise ShardingTypeError(f"Operand cannot be sharded on dimension {i} when the tiling is "
                                    f"non-trivial. Got input type: {core.typeof(A)} with reps: {reps}")
    # Interleave a size-1 axis before each axis, broadcast it to the rep count, merge pairs.
    paired = lax.reshape(A, [d for s in a_shape for d in (1, s)])
    tiled = lax.broadcast_in_dim(paired, [d for pair in zip(reps, a_shape) for d in pair],
                                 tuple(range(2 * len(a_shape))))
    # Merge the pairs one at a time: each is one merge JAX's reshape rule types, so the result
    # keeps A's spec (one reshape of all pairs is several merges, which it refuses).
    shape = list(tiled.shape)
    for i in reversed(range(len(a_shape))):
        shape[2 * i:2 * i + 2] = [shape[2 * i] * shape[2 * i + 1]]
        tiled = lax.reshape(tiled, tuple(shape))
    return tiled


# --- padding -----------------------------------------------------------------

def _pad_widths(pad_width, nd: int) -> np.ndarray:
    """pad_width broadcast to one (before, after) pair per axis, as NumPy accepts it."""
    if isinstance(pad_width, core.Tracer):
        raise TypeError("jnp.pad: pad_width must be concrete (static) values")
    widths = np.asarray(pad_width)
    if not dtype_kinds.issubdtype(widths.dtype, np.integer):
        raise TypeError(f"`pad_width` must be of integral type, got {pad_width}.")
    if widths.shape not in ((nd, 2), (1, 2), (2,), (1,), ()):
        raise ValueError(f"jnp.pad: pad_width with {nd=} has unsupported shape {widths.shape}. "
                         f"Valid shapes are ({nd}, 2), (1, 2), (2,), (1,), or ().")
    widths = np.broadcast_to(widths, (nd, 2))
    if np.any(widths < 0):
        raise ValueError("index can't contain negative values")
    return widths


def _pad_constant(array, widths, constant_values):
    values = core.convert_element_type(constant_values, array.dtype, array.weak_type)
    if values.ndim == 0:
        return lax.pad(array, values, [(int(lo), int(hi), 0) for lo, hi in widths])
    values = broadcast_to(values, (array.ndim, 2))
    for axis, (lo, hi) in enumerate(widths):
        for side, width in ((0, (int(lo), 0, 0)), (1, (0, int(hi), 0))):
            value = lax.reshape(lax.slice(values, (axis, side), (axis + 1, side + 1)), ())
            config = [(0, 0, 0)] * array.ndim
            config[axis] = width
            array = lax.pad(array, value, config)
    return array


def _pad_source_index(mode: str, positions: np.ndarray, n: int) -> np.ndarray:
    """For padded positions (relative to the original start), the source element's index."""
    if mode == "edge":
        return np.clip(positions, 0, n - 1)
    if mode == "wrap":
        return positions % n
    if mode == "symmetric":
        q = positions % (2 * n)
        return np.where(q < n, q, 2 * n - 1 - q)
    period = 2 * (n - 1)  # reflect
    if period == 0:
        return np.zeros_like(positions)
    q = positions % period
    return np.where(q < n, q, period - q)


def _gather_runs(array, source: np.ndarray, axis: int):
    """array indexed by static `source` along `axis`, as one concatenate of views: each
    run of constant, ascending or descending indices is a broadcast, slice or rev."""
    pieces, start = [], 0
    while start < len(source):
        step = int(source[start + 1] - source[start]) if start + 1 < len(source) else 1
        if step not in (-1, 0, 1):
            step = 1
        end = start + 1
        while end < len(source) and source[end] - source[end - 1] == step:
            end += 1
        lo = int(min(source[start], source[end - 1]))
        piece = lax.slice_in_dim(array, lo, lo + 1 if step == 0 else lo + end - start, 1, axis)
        if step == 0:
            piece = _repeat_each(piece, end - start, axis)
        elif step == -1:
            piece = lax.rev(piece, (axis,))
        pieces.append(piece)
        start = end
    return lax.concatenate(pieces, axis)


def _pad_by_index(array, widths, mode: str):
    for axis, (lo, hi) in enumerate(widths):
        lo, hi, n = int(lo), int(hi), array.shape[axis]
        if lo == hi == 0:
            continue
        if n == 0:
            raise ValueError(f"jnp.pad: cannot extend empty axis {axis} using mode '{mode}'; "
                             "only mode 'constant' pads empty axes")
        source = _pad_source_index(mode, np.arange(-lo, n + hi), n)
        array = _gather_runs(array, source, axis)
    return array


_INDEX_MODES = ("edge", "wrap", "symmetric", "reflect")


def pad(array, pad_width, mode: str = "constant", **kwargs):
    array = core.asarray_value(array)
    widths = tuple((int(lo), int(hi)) for lo, hi in _pad_widths(pad_width, array.ndim))
    allowed = {"constant": {"constant_values"}, "reflect": {"reflect_type"},
               "symmetric": {"reflect_type"}}.get(mode, set())
    unsupported = set(kwargs) - allowed
    if mode not in ("constant", "empty") + _INDEX_MODES:
        raise NotImplementedError(f"Unimplemented padding mode '{mode}' for np.pad.")
    if unsupported:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {sorted(unsupported)}")
    reflect_type = kwargs.get("reflect_type", "even")
    if reflect_type != "even":
        raise NotImplementedError("jnp.pad: only reflect_type='even' is implemented")
    return _pad(array, widths, mode, kwargs.get("constant_values", 0), reflect_type)


@api.jitted_when_traced(static_argnames=("pad_width", "mode", "reflect_type"))
def _pad(array, pad_width, mode, constant_values, reflect_type):
    if array.ndim == 0:
        return array
    if mode in ("constant", "empty"):
        return _pad_constant(array, pad_width, constant_values)
    return _pad_by_index(array, pad_width, mode)


# --- flipping and rolling ----------------------------------------------------

def flip(m, axis=None):
    return _flip(core.asarray_value(m), axis)


@api.jitted_when_traced(static_argnames=("axis",))
def _flip(m, axis):
    axes = tuple(range(m.ndim)) if axis is None else _axes(axis, m.ndim)
    return lax.rev(m, axes) if axes else m


def fliplr(m):
    return flip(m, 1)


def flipud(m):
    return flip(m, 0)


@api.jitted_when_traced(static_argnames=("k", "axes"))
def rot90(m, k: int = 1, axes: tuple[int, int] = (0, 1)):
    m = core.asarray_value(m)
    if m.ndim < 2:
        raise ValueError("rot90 requires its first argument to have ndim at least two, but got "
                         f"first argument of shape {m.shape}, which has ndim {m.ndim}")
    ax1, ax2 = (canonicalize_axis(a, m.ndim) for a in axes)
    if ax1 == ax2:
        raise ValueError("Axes must be different")
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, ax1), ax2)
    perm = list(range(m.ndim))
    perm[ax1], perm[ax2] = perm[ax2], perm[ax1]
    return lax.transpose(flip(m, ax2), perm) if k == 1 else flip(lax.transpose(m, perm), ax2)


def roll(a, shift, axis=None):
    """Elements shifted along `axis` with wrap-around: two slices, one concatenate."""
    a = core.asarray_value(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), a.shape)
    axes = tuple(canonicalize_axis(int(ax), a.ndim) for ax in np.atleast_1d(np.asarray(axis)))
    if isinstance(shift, core.Tracer) or (core.is_value(shift) and not isinstance(shift, np.ndarray)):
        return _roll_dynamic(a, core.asarray_value(shift), axes)
    shifts = np.asarray(shift)
    if len(np.broadcast_shapes(shifts.shape, np.shape(axes), (1,))) != 1:
        raise ValueError("'shift' and 'axis' arguments to roll must be scalars or 1D arrays")
    shifts, axes = np.broadcast_arrays(np.atleast_1d(shifts), axes)
    return _roll_static(a, tuple(int(s) for s in shifts), tuple(int(ax) for ax in axes))


@api.jitted_when_traced(static_argnames=("axis",))
def _roll_dynamic(a, shift, axis):
    """A shift known only when run: each axis rolled as a dynamic slice of the array
    concatenated with itself, starting at n - (shift mod n)."""
    from meshsim._src.lax.indexing import dynamic_slice_in_dim
    from meshsim._src.numpy.ufuncs import remainder
    if len(np.broadcast_shapes(shift.shape, np.shape(axis))) != 1:
        raise ValueError("'shift' and 'axis' arguments to roll must be scalars or 1D arrays")
    shape = np.broadcast_shapes(shift.shape, np.shape(axis))
    shifts = broadcast_to(shift, shape)
    for i, ax in enumerate(np.broadcast_to(axis, shape)):
        n = np.int32(a.shape[ax])
        s = remainder(core.convert_element_type(shifts[i], np.int32), np.int32(builtins.max(n, 1)))
        a = dynamic_slice_in_dim(lax.concatenate([a, a], int(ax)), n - s, a.shape[ax], axis=int(ax))
    return a


@api.jitted_when_traced(static_argnames=("shift", "axis"))
def _roll_static(a, shift, axis):
    for s, ax in zip(shift, axis):
        n = a.shape[ax]
        if n:
            # As JAX: slices [i, n) and [0, i) for i = -s mod n, even when i is 0.
            i = -s % n
            a = lax.concatenate([lax.slice_in_dim(a, i, n, 1, ax), lax.slice_in_dim(a, 0, i, 1, ax)], ax)
    return a


# --- inserting, deleting, resizing ------------------------------------------------

def _check_arraylike(name: str, *args):
    from meshsim._src.numpy.creation import _check_arraylike as check
    check(name, *args)


@api.jitted_when_traced(static_argnames=('axis',))
def append(arr, values, axis=None):
    """arr with values appended along axis (both flattened if axis is None)."""
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis=axis)


def insert(arr, obj, values, axis=None):
    """arr with values inserted before the indices obj along axis (flattened if None)."""
    from meshsim._src.numpy import namespace as jnp
    _check_arraylike("insert", arr, 0 if isinstance(obj, slice) else obj, values)
    a = core.asarray_value(arr)
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, a.ndim)
    indices = jnp.arange(*obj.indices(a.shape[axis])) if isinstance(obj, slice) else jnp.asarray(obj)
    if indices.ndim > 1:
        raise ValueError(f"jnp.insert(): obj must be a slice, a one-dimensional array, or a scalar; got {obj}")
    if not dtype_kinds.issubdtype(indices.dtype, np.integer):
        if indices.size == 0 and not core.is_value(obj):
            indices = indices.astype(int)
        else:
            raise ValueError(f"jnp.insert(): index array must be integer typed; got {obj}")
    values = jnp.array(values, ndmin=a.ndim, dtype=a.dtype, copy=False)
    if indices.size == 1:
        index = ravel(indices)[0]
        if indices.ndim == 0:
            values = moveaxis(values, 0, axis)
        indices = jnp.full(values.shape[axis], index)
    n_input = a.shape[axis]
    n_insert = broadcast_shapes(indices.shape, (values.shape[axis],))[0]
    out_shape = list(a.shape)
    out_shape[axis] += n_insert
    out = jnp.zeros_like(a, shape=tuple(out_shape))
    indices = jnp.clip(jnp.where(indices < 0, indices + n_input, indices), 0, n_input)
    values_ind = indices.at[jnp.argsort(indices)].add(jnp.arange(n_insert, dtype=indices.dtype))
    arr_mask = jnp.ones(n_input + n_insert, dtype=bool).at[values_ind].set(False)
    arr_ind = jnp.where(arr_mask, size=n_input)[0]
    out = out.at[(slice(None),) * axis + (values_ind,)].set(values)
    return out.at[(slice(None),) * axis + (arr_ind,)].set(a)


def delete(arr, obj, axis=None, *, assume_unique_indices: bool = False):
    """arr without the entries at indices (or mask) obj along axis (flattened if None)."""
    from meshsim._src.numpy import namespace as jnp
    _check_arraylike("delete", arr)
    a = core.asarray_value(arr)
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, a.ndim)
    lead = (slice(None),) * axis
    try:  # a static integer: two slices
        index = canonicalize_axis(operator.index(obj), a.shape[axis])
    except TypeError:
        pass
    else:
        return concatenate([a[lead + (slice(0, index),)], a[lead + (slice(index + 1, None),)]], axis=axis)
    if isinstance(obj, slice):
        obj = jnp.arange(a.shape[axis])[obj]
        assume_unique_indices = True
    _check_arraylike("delete", a, obj)
    obj_dtype = core.asarray_value(obj).dtype
    if dtype_kinds.issubdtype(obj_dtype, np.integer) and assume_unique_indices:
        # traceable: the kept positions are i + (number of deleted indices <= that position)
        idx = jnp.clip(jnp.where(jnp.ravel(obj) < 0, jnp.ravel(obj) + a.shape[axis], jnp.ravel(obj)),
                       0, a.shape[axis])
        idx = jnp.sort(idx)
        idx = idx - jnp.arange(len(idx), dtype=idx.dtype)
        i = jnp.arange(a.shape[axis] - idx.size, dtype=idx.dtype)
        i = i + jnp.sum(i[None, :] >= idx[:, None], 0, dtype=i.dtype)
        return a[lead + (i,)]
    if isinstance(obj, core.Tracer):
        raise TypeError("jnp.delete(): the 'obj' array argument must be concrete unless "
                        "assume_unique_indices=True (it gives the output shape)")
    obj = np.asarray(obj)
    if dtype_kinds.issubdtype(obj.dtype, np.integer):
        mask = np.ones(a.shape[axis], dtype=bool)
        mask[obj] = False
    elif obj.dtype == bool:
        if obj.shape != (a.shape[axis],):
            raise ValueError("np.delete(arr, obj): for boolean indices, obj must be one-dimensional "
                             "with length matching specified axis.")
        mask = ~obj
    else:
        raise ValueError(f"np.delete(arr, obj): got obj.dtype={obj.dtype}; must be integer or bool.")
    return a[lead + (mask,)]


def rollaxis(a, axis: int, start: int = 0):
    """a with `axis` moved to before position `start`."""
    _check_arraylike("rollaxis", a)
    a = core.asarray_value(a)
    start = operator.index(start)
    axis = canonicalize_axis(axis, a.ndim)
    if not -a.ndim <= start <= a.ndim:
        raise ValueError(f"start={start} must satisfy {-a.ndim}<=start<={a.ndim}")
    if start < 0:
        start += a.ndim
    if start > axis:
        start -= 1
    return moveaxis(a, axis, start)


def resize(a, new_shape):
    """a flattened, repeated cyclically to fill new_shape."""
    from meshsim._src.numpy import namespace as jnp
    _check_arraylike("resize", a)
    new_shape = (operator.index(new_shape),) if np.ndim(new_shape) == 0 else tuple(
        operator.index(d) for d in new_shape)
    if any(d < 0 for d in new_shape):
        raise ValueError("all elements of `new_shape` must be non-negative")
    arr = ravel(a)
    new_size = math.prod(new_shape)
    if arr.size == 0 or new_size == 0:
        return jnp.zeros_like(arr, shape=new_shape)
    arr = tile(arr, -(-new_size // arr.size))[:new_size]
    return reshape(arr, new_shape)


def trim_zeros(filt, trim: str = "fb", axis=None):
    """filt without its leading ('f') and/or trailing ('b') all-zero slices along the axes."""
    _check_arraylike("trim_zeros", filt)
    filt = core.asarray_value(filt)
    if isinstance(filt, core.Tracer):
        raise TypeError("trim_zeros needs a concrete `filt` (its output shape depends on the values)")
    host = np.asarray(filt)
    axes = set(range(host.ndim)) if axis is None else set(_axes(axis, host.ndim))
    if not axes or ("f" not in trim.lower() and "b" not in trim.lower()):
        return filt
    index = []
    for ax in range(host.ndim):
        if ax not in axes:
            index.append(slice(None))
            continue
        mask = host.any(axis=tuple(i for i in range(host.ndim) if i != ax))
        if not mask.any():
            index.append(slice(0, 0))
            continue
        start = int(mask.argmax()) if "f" in trim.lower() else None
        stop = host.shape[ax] - int(mask[::-1].argmax()) if "b" in trim.lower() else None
        index.append(slice(start, stop))
    return filt[tuple(index)]


core.install_value_stacker(stack)

"""meshsim.numpy: array creation (as jax.numpy).

Shapes are static, so inside a trace these build programs from constants,
broadcast_in_dim and iota, as JAX does; results have JAX's dtypes and weak
types (x64 off: float32 / int32 defaults)."""
from __future__ import annotations

import operator
import warnings

import numpy as np

from meshsim._src import api
from meshsim._src import core
from meshsim._src.abstract import ShapeDtypeStruct
from meshsim._src.sharding import explicit, placement
from meshsim._src.sharding import mesh as mesh_lib
from meshsim._src.sharding.named_sharding import NamedSharding
from meshsim._src.lax import elementwise as lax_ew
from meshsim._src.lax import structural as lax
from meshsim._src.numpy import promotion
from meshsim._src.numpy.dtypes import _dtype_of
from meshsim._src import dtype_kinds

__all__ = [
    "array", "asarray", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like",
    "empty_like", "arange", "linspace", "eye", "identity", "tri", "tril", "triu", "meshgrid",
    "indices", "diag", "astype", "copy", "logspace", "geomspace", "vander", "tril_indices", "triu_indices",
    "tril_indices_from", "triu_indices_from", "diag_indices", "diag_indices_from", "diagflat", "ix_", "s_",
    "index_exp", "from_dlpack",
]


def user_dtype(dtype) -> np.dtype:
    """A dtype argument as the dtype arrays get (64-bit narrows unless x64 is on)."""
    return core.canonicalize_dtype(_dtype_of(dtype))


def _default_float(dtype) -> np.dtype:
    return user_dtype(float if dtype is None else dtype)


def _like_operand(fun: str, a):
    """The *_like functions take any object with a shape and a dtype (a ShapeDtypeStruct, a
    NumPy-like array), as JAX's do: optax builds its zero states from ShapeDtypeStructs. Returns
    the operand to take the shape and dtype from, and the sharding such a stand-in names, which
    JAX gives the result outside jit only."""
    if core.is_value(a):
        return a, None
    if hasattr(a, "shape") and hasattr(a, "dtype"):
        return (ShapeDtypeStruct(a.shape, a.dtype, weak_type=getattr(a, "weak_type", False)),
                getattr(a, "sharding", None))
    _check_arraylike(fun, a)
    return a, None


def _check_arraylike(fun: str, *args):
    for i, a in enumerate(args):
        if not (core.is_value(a) or isinstance(a, (np.ndarray, np.generic, bool, int, float, complex))):
            raise TypeError(f"{fun} requires ndarray or scalar arguments, got {type(a)} at position {i}.")


def _leaves(x):
    if isinstance(x, (list, tuple)):
        for e in x:
            yield from _leaves(e)
    else:
        yield x


def _stack_nested(x, dtype):
    """A nested list holding meshsim values, as one array of `dtype`. Each element is
    converted and given its leading axis before the next one is, so a traced list records
    its equations in JAX's order; Python scalars and NumPy data stay constants."""
    if not isinstance(x, (list, tuple)):
        return core.convert_element_type(x, dtype) if core.is_value(x) else core.asarray_value(x, dtype)
    parts = [lax.expand_dims(_stack_nested(e, dtype), (0,)) for e in x]
    return parts[0] if len(parts) == 1 else lax.concatenate(parts, 0)


def array(object, dtype=None, copy: bool = True, order: str | None = "K", ndmin: int = 0,  # noqa: A002
          *, device=None):
    return on_device(_array(object, dtype, copy, order, ndmin), device)


def _array(object, dtype, copy: bool, order: str | None, ndmin: int):  # noqa: A002
    if order not in (None, "K", "C", "A"):
        raise NotImplementedError(f"Only implemented for order='K', got {order=}")
    dtype = None if dtype is None else user_dtype(dtype)
    if object is None:
        raise ValueError("None is not a valid value for jnp.array")
    if hasattr(object, "__jax_array__"):
        object = object.__jax_array__()
    if core.is_value(object):
        out = object if dtype is None else core.convert_element_type(object, dtype)
        if copy and out is object:
            placed = _transferred(out)
            out = placed if placed is not out else lax.copy(out)
    elif isinstance(object, (list, tuple)) and any(core.is_value(e) for e in _leaves(object)):
        out = _stack_nested(object, dtype or promotion.result_type(*_leaves(object))[0])
    else:
        out = _transferred(core.asarray_value(object, dtype))
    if ndmin > out.ndim:
        out = lax.expand_dims(out, range(ndmin - out.ndim))
    return out


def _transferred(out):
    """Host data or an uncommitted array made into a new array: under `jax.set_mesh` it is
    transferred to the mesh, replicated (`P()`), as JAX places what jnp.array makes."""
    mesh = placement.eager_mesh()
    return out if mesh is None else placement.onto_mesh([out], mesh, as_operands=True)[0]


def on_device(out, device):
    """`out` placed as a creation function's `device=` asks (a Device or a Sharding), as JAX
    places it; unchanged when None."""
    if device is None:
        return out
    from meshsim._src.sharding.api import device_put
    return device_put(out, device)


def asarray(a, dtype=None, order: str | None = None, *, copy: bool | None = None, device=None):
    return on_device(array(a, dtype=dtype, copy=bool(copy), order=order), device)


def astype(x, dtype, /, *, copy: bool = False, device=None):
    x = core.asarray_value(x)
    dtype = user_dtype(dtype)
    if x.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        if np.dtype(dtype) == np.bool_:
            return lax_ew.ne(x, lax.full((), 0, x.dtype))
        warnings.warn("Casting from complex to real dtypes will soon raise a ValueError. Please first use "
                      "jnp.real or jnp.imag to take the real/imaginary component of your input.",
                      DeprecationWarning, stacklevel=2)
    return on_device(core.convert_element_type(x, dtype, warn_on_complex_to_real=False), device)


def copy(a, order: str | None = None):
    return array(a, copy=True, order=order)


def full(shape, fill_value, dtype=None, *, device=None, out_sharding=None):
    if np.ndim(fill_value) == 0:
        out = lax.full(shape, fill_value, None if dtype is None else user_dtype(dtype))
    else:
        from meshsim._src.numpy.structural import broadcast_to
        out = broadcast_to(asarray(fill_value, dtype=dtype), shape)
    return on_device(explicit.with_out_sharding(out, out_sharding, "full"), device)


def _check_not_a_shape(name: str, shape, dtype) -> None:
    """`jnp.zeros(4, 4)`: JAX's error guesses the second size was meant as part of the shape."""
    if isinstance(shape, int) and isinstance(dtype, int):
        raise TypeError(
            f"Cannot interpret '{dtype}' as a data type.\n\nDid you accidentally write "
            f"`jax.numpy.{name}({shape}, {dtype})` when you meant `jax.numpy.{name}(({shape}, "
            f"{dtype}))`, i.e. with a single tuple argument for the shape?")


def zeros(shape, dtype=None, *, device=None, out_sharding=None):
    _check_not_a_shape("zeros", shape, dtype)
    out = lax.full(shape, 0, _default_float(dtype))
    return on_device(explicit.with_out_sharding(out, out_sharding, "jnp.zeros"), device)


def ones(shape, dtype=None, *, device=None, out_sharding=None):
    _check_not_a_shape("ones", shape, dtype)
    out = lax.full(shape, 1, _default_float(dtype))
    return on_device(explicit.with_out_sharding(out, out_sharding, "jnp.ones"), device)


def empty(shape, dtype=None, *, device=None, out_sharding=None):
    """Arrays are immutable: an "uninitialised" array is a zero one (and JAX's errors name zeros)."""
    _check_not_a_shape("empty", shape, dtype)
    out = lax.full(shape, 0, _default_float(dtype))
    return on_device(explicit.with_out_sharding(out, out_sharding, "jnp.zeros"), device)


def _like_sharding(a, shape, out_sharding, out, api: str, stand_in_sharding=None):
    """`out` laid out as `out_sharding`, or, when `a` is an array of the same
    shape sharded in its type, as `a` is (JAX's *_like keep the sharding)."""
    if out_sharding is not None:
        return explicit.with_out_sharding(out, out_sharding, api)
    if (stand_in_sharding is not None and isinstance(out, core.Array)
            and (shape is None or tuple(shape) == a.shape)):
        return on_device(out, _on_context_mesh(stand_in_sharding))
    if (type(a) is core.Array and a.committed and a.sharding_core.mesh is not None
            and (shape is None or tuple(shape) == a.shape)):
        return on_device(out, a.sharding)  # a concrete array's sharding, as it is named
    aval = getattr(a, "aval", None)
    out_aval = getattr(out, "aval", None)
    if (aval is not None and aval.mesh is not None and any(aval.spec)
            and (shape is None or tuple(shape) == aval.shape)
            and not (out_aval is not None and out_aval.mesh == aval.mesh and out_aval.spec == aval.spec)):
        return core.bind1("reshard", out, mesh=aval.mesh, spec=[list(e) for e in aval.spec])
    return out


def _on_context_mesh(sharding):
    """A NamedSharding over an AbstractMesh (eval_shape's results have them) over the context
    mesh of that shape, as JAX resolves it; other shardings as they are."""
    mesh = getattr(sharding, "mesh", None)
    context = mesh_lib.context_mesh()
    if isinstance(mesh, mesh_lib.AbstractMesh) and not context.empty and context.abstract_mesh == mesh:
        return NamedSharding(context, sharding.spec)
    return sharding


def full_like(a, fill_value, dtype=None, shape=None, *, device=None, out_sharding=None):
    a, stand_in_sharding = _like_operand("full_like", a)
    if np.ndim(fill_value) == 0:
        out = lax.full_like(a, fill_value, None if dtype is None else user_dtype(dtype), shape)
    else:
        from meshsim._src.numpy.structural import broadcast_to
        out = broadcast_to(asarray(fill_value, dtype=dtype or core.typeof(a).dtype),
                           core.typeof(a).shape if shape is None else shape)
    return on_device(_like_sharding(a, shape, out_sharding, out, "full_like", stand_in_sharding), device)


def zeros_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    a, stand_in_sharding = _like_operand("zeros_like", a)
    out = lax.full_like(a, 0, None if dtype is None else user_dtype(dtype), shape)
    return on_device(_like_sharding(a, shape, out_sharding, out, "jnp.zeros_like", stand_in_sharding), device)


def ones_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    a, stand_in_sharding = _like_operand("ones_like", a)
    out = lax.full_like(a, 1, None if dtype is None else user_dtype(dtype), shape)
    return on_device(_like_sharding(a, shape, out_sharding, out, "jnp.ones_like", stand_in_sharding), device)


empty_like = zeros_like


def _concrete_scalar(x, name: str):
    """A static argument's value (a NumPy scalar keeps its dtype for promotion)."""
    if isinstance(x, core.Tracer):
        raise TypeError(f"Attempted to use a traced value {core.typeof(x)} where a concrete value is "
                        f"required. It arose in the jnp.arange argument '{name}'.")
    if core.is_value(x):
        x = np.asarray(x)[()]
    if np.ndim(x) != 0:
        raise ValueError(f"jax.numpy.arange: arguments must be scalars; got {name}={x}")
    return x


def _typed(value, dtype):
    """`value` as a strongly typed 0-d array of `dtype`."""
    return core.convert_element_type(value, dtype)


def arange(start, stop=None, step=None, dtype=None, *, device=None, out_sharding=None):
    """start + step * iota, computed in the result dtype exactly as JAX does."""
    out = _arange(start, stop, step, dtype)
    return on_device(explicit.with_out_sharding(out, out_sharding, "jnp.arange"), device)


def _arange(start, stop, step, dtype):
    start = _concrete_scalar(start, "stop" if stop is None and step is None else "start")
    stop = None if stop is None else _concrete_scalar(stop, "stop")
    step = None if step is None else _concrete_scalar(step, "step")
    if dtype is None:
        dtype = promotion.result_type(start, *(x for x in (stop, step) if x is not None))[0]
    dtype = user_dtype(dtype)
    start, stop = (0, start) if stop is None else (start, stop)
    start, stop = np.asarray(start).item(), np.asarray(stop).item()
    if step is None:
        values = lax.iota(dtype, max(0, int(np.ceil(stop - start))))
        return values if start == 0 else lax_ew.add(_typed(start, dtype), values)
    step = np.asarray(step).item()
    size = max(0, int(np.ceil((stop - start) / step)))
    return lax_ew.add(_typed(start, dtype), lax_ew.mul(_typed(step, dtype), lax.iota(dtype, size)))


def _inexact(dtype) -> np.dtype:
    return dtype if dtype_kinds.issubdtype(dtype, np.floating) else _default_float(None)


def linspace(start, stop, num: int = 50, endpoint: bool = True, retstep: bool = False, dtype=None,
             axis: int = 0, *, device=None):
    """Evenly spaced values, start * (1 - t) + stop * t, as JAX computes them."""
    return _linspace(start, stop, operator.index(num), endpoint, retstep, dtype, operator.index(axis),
                     device=device)


@api.jitted_when_traced(static_argnames=('num', 'endpoint', 'retstep', 'dtype', 'axis', 'device'))
def _linspace(start, stop, num: int = 50, endpoint: bool = True, retstep: bool = False, dtype=None,
              axis: int = 0, *, device=None):
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    _check_arraylike("linspace", start, stop)
    if dtype is None:
        dtype = _inexact(promotion.result_type(start, stop)[0])
    dtype = user_dtype(dtype)
    compute = _inexact(dtype)
    start, stop = _typed(start, compute), _typed(stop, compute)
    bounds = list(promotion.broadcast_shapes(start.shape, stop.shape))
    start = promotion.broadcast_to_shape(start, tuple(bounds))
    stop = promotion.broadcast_to_shape(stop, tuple(bounds))
    axis = len(bounds) + axis + 1 if axis < 0 else axis
    bounds.insert(axis, 1)
    div = num - 1 if endpoint else num
    if num > 1:
        delta = lax_ew.div(lax_ew.sub(stop, start), _typed(div, compute))
        iota_shape = [1] * len(bounds)
        iota_shape[axis] = div
        t = lax_ew.div(lax.reshape(lax.iota(compute, div), iota_shape), _typed(div, compute))
        t = promotion.broadcast_to_shape(t, tuple(promotion.broadcast_shapes(iota_shape, bounds)))
        lo = promotion.broadcast_to_shape(lax.reshape(start, bounds), t.shape)
        hi = promotion.broadcast_to_shape(lax.reshape(stop, bounds), t.shape)
        out = lax_ew.add(lax_ew.mul(lo, lax_ew.sub(_typed(1, compute), t)), lax_ew.mul(hi, t))
        if endpoint:
            out = lax.concatenate([out, lax.expand_dims(stop, (axis,))], axis)
    elif num == 1:
        delta = _typed(np.nan if endpoint else lax_ew.sub(stop, start), compute)
        out = lax.reshape(start, bounds)
    else:
        delta = _typed(np.nan, compute)
        bounds[axis] = 0
        out = zeros(bounds, compute)
    if dtype_kinds.issubdtype(dtype, np.integer):
        out = lax_ew.floor(out)
    out = core.convert_element_type(out, dtype)
    out = on_device(out, device)
    return (out, delta) if retstep else out


def _iota_mask(compare, N, M, k, dtype, *, columns_first: bool = False):
    """compare(row + k, col) over an N x M grid, as `dtype`. JAX's eye makes the column
    iota before adding k, its tri after: `columns_first` keeps each program's order."""
    N = operator.index(N)
    M = N if M is None else operator.index(M)
    if N < 0 or M < 0:
        raise ValueError(f"negative dimensions are not allowed, got {N} and {M}")
    rows = lax.broadcasted_iota(np.int32, (N, M), 0)
    cols = lax.broadcasted_iota(np.int32, (N, M), 1) if columns_first else None
    shifted = lax_ew.add(rows, _typed(k, np.int32))
    if cols is None:
        cols = lax.broadcasted_iota(np.int32, (N, M), 1)
    mask = compare(shifted, cols)
    return core.convert_element_type(mask, dtype)


def eye(N, M=None, k=0, dtype=None, *, device=None, out_sharding=None):
    if not isinstance(k, (int, np.integer)) and not core.is_value(k):
        raise ValueError(f"k must be a scalar integer; got {k}")
    out = _iota_mask(lax_ew.eq, N, M, k, _default_float(dtype), columns_first=True)
    return on_device(explicit.with_out_sharding(out, out_sharding), device)


def identity(n, dtype=None):
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):
    return _iota_mask(lax_ew.ge, N, M, k, _default_float(dtype))


def _triangle(m, k: int, lower: bool, name: str):
    m = asarray(m)
    if m.ndim < 2:
        raise ValueError(f"Argument to jax.numpy.{name} must be at least 2D")
    N, M = m.shape[-2:]
    mask = tri(N, M, k=k if lower else k - 1, dtype=bool)
    mask = promotion.broadcast_to_shape(mask, m.shape)
    zero = promotion.broadcast_to_shape(core.convert_element_type(0, m.dtype, m.weak_type), m.shape)
    return lax_ew.select(mask, m, zero) if lower else lax_ew.select(mask, zero, m)


@api.jitted_when_traced(static_argnames=('k',))
def tril(m, k: int = 0):
    return _triangle(m, k, True, "tril")


@api.jitted_when_traced(static_argnames=('k',))
def triu(m, k: int = 0):
    return _triangle(m, k, False, "triu")


def meshgrid(*xi, copy: bool = True, sparse: bool = False, indexing: str = "xy"):
    args = [asarray(x) for x in xi]
    if any(a.ndim != 1 for a in args):
        raise ValueError("Arguments to jax.numpy.meshgrid must be 1D, got shapes "
                         f"{[a.shape for a in args]}")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"Valid values for indexing are 'xy' and 'ij', got {indexing}")
    dims = list(range(len(args)))
    if indexing == "xy" and len(args) >= 2:
        dims[0], dims[1] = 1, 0
    shape = [0] * len(args)
    for a, d in zip(args, dims):
        shape[d] = a.shape[0]
    out = []
    for a, d in zip(args, dims):
        sparse_shape = [1] * len(args)
        sparse_shape[d] = a.shape[0]
        out.append(lax.broadcast_in_dim(a, sparse_shape if sparse else shape, (d,)))
    return out


def indices(dimensions, dtype=None, sparse: bool = False):
    dimensions = lax.canonicalize_shape(dimensions)
    dtype = user_dtype(int if dtype is None else dtype)
    n = len(dimensions)
    if sparse:
        return tuple(lax.broadcasted_iota(dtype, tuple(d if j == i else 1 for j, d in enumerate(dimensions)), i)
                     for i in range(n))
    grids = [lax.broadcasted_iota(dtype, (1,) + dimensions, i + 1) for i in range(n)]
    return lax.concatenate(grids, 0) if grids else zeros((0,), dtype)


def diag(v, k: int = 0):
    """The k-th diagonal of a 2-d array, or a 2-d array with 1-d `v` on its k-th diagonal."""
    v = asarray(v)
    k = operator.index(k)
    if v.ndim == 1:
        n = v.shape[0] + abs(k)
        row = lax.broadcast_in_dim(v, (n, v.shape[0]), (1,))
        grid = lax.pad(row, _typed(0, v.dtype), ((0, 0, 0), (max(k, 0), max(-k, 0), 0)))
        return lax_ew.select(eye(n, k=k, dtype=bool), grid, zeros_like(grid))
    if v.ndim != 2:
        raise ValueError("diag input must be 1d or 2d")
    rows, cols = v.shape
    length = max(0, min(rows + min(k, 0), cols - max(k, 0)))
    # The diagonal is a strided slice of the flattened matrix.
    flat = lax.reshape(v, (rows * cols,))
    first = k if k >= 0 else -k * cols
    if length == 0:
        return lax.slice(flat, (0,), (0,))
    return lax.slice(flat, (first,), (first + (length - 1) * (cols + 1) + 1,), (cols + 1,))


# --- log-spaced ranges ----------------------------------------------------------

def _space_dtypes(name: str, start, stop, dtype):
    from meshsim._src.numpy.dtypes import result_type
    _check_arraylike(name, start, stop)
    dtype = _inexact(user_dtype(result_type(start, stop))) if dtype is None else user_dtype(dtype)
    computation_dtype = _inexact(dtype)
    start = astype(asarray(start), computation_dtype)
    stop = astype(asarray(stop), computation_dtype)
    return start, stop, dtype, computation_dtype


def logspace(start, stop, num: int = 50, endpoint: bool = True, base=10.0, dtype=None, axis: int = 0):
    """base ** linspace(start, stop, num)."""
    from meshsim._src.numpy import ufuncs
    num, axis = operator.index(num), operator.index(axis)
    start, stop, dtype, _ = _space_dtypes("logspace", start, stop, dtype)
    lin = linspace(start, stop, num, endpoint=endpoint, axis=axis)
    return lax_ew.convert_element_type(ufuncs.power(base, lin), dtype)


def geomspace(start, stop, num: int = 50, endpoint: bool = True, dtype=None, axis: int = 0):
    """Values evenly spaced on a log scale from start to stop (negative ranges keep their sign)."""
    from meshsim._src.numpy import ufuncs
    from meshsim._src.numpy.structural import moveaxis
    num, axis = operator.index(num), operator.index(axis)
    start, stop, dtype, computation_dtype = _space_dtypes("geomspace", start, stop, dtype)
    sign = ufuncs.sign(start)
    res = sign * logspace(ufuncs.log10(start / sign), ufuncs.log10(stop / sign), num, endpoint=endpoint,
                          base=10.0, dtype=computation_dtype, axis=0)
    res = moveaxis(res, 0, lax.canonicalize_axis(axis, res.ndim))
    return lax_ew.convert_element_type(res, dtype)


def vander(x, N=None, increasing: bool = False):
    """The Vandermonde matrix of 1-D x: columns x**(N-1), ..., x**0 (reversed if increasing)."""
    from meshsim._src.numpy import ufuncs
    _check_arraylike("vander", x)
    x = asarray(x)
    if x.ndim != 1:
        raise ValueError("x must be a one-dimensional array")
    N = x.shape[0] if N is None else operator.index(N)
    if N < 0:
        raise ValueError("N must be nonnegative")
    powers = lax.iota(x.dtype, N)
    if not increasing:
        powers = lax_ew.sub(core.Array.from_numpy(np.asarray(N - 1, x.dtype)), powers)
    return ufuncs.power(x[:, None], powers[None, :])


# --- index helpers ----------------------------------------------------------------

def _triu_size(n: int, m: int, k: int) -> int:
    """The number of elements on or above diagonal k of an n x m matrix."""
    if k < 0:
        return n * m - _triu_size(m, n, 1 - k)
    if k >= m:
        return 0
    mk = min(n, m - k)
    return mk * (mk + 1) // 2 + mk * (m - k - mk)


def _triangle_indices(name: str, n, k, m, lower: bool):
    from meshsim._src.numpy.selection import nonzero
    n, k = operator.index(n), operator.index(k)
    m = n if m is None else operator.index(m)
    size = _triu_size(m, n, -k) if lower else _triu_size(n, m, k)
    return nonzero((tril if lower else triu)(ones((n, m)), k=k), size=size)


def tril_indices(n, k=0, m=None):
    """(rows, cols) of the lower triangle (on or below diagonal k) of an n x m matrix."""
    return _triangle_indices("tril_indices", n, k, m, True)


def triu_indices(n, k=0, m=None):
    """(rows, cols) of the upper triangle (on or above diagonal k) of an n x m matrix."""
    return _triangle_indices("triu_indices", n, k, m, False)


def _shape_2d(name: str, arr):
    if not hasattr(arr, "shape"):
        _check_arraylike(name, arr)
        arr = asarray(arr)
    if len(arr.shape) != 2:
        raise ValueError("Only 2-D inputs are accepted")
    return arr.shape


def tril_indices_from(arr, k=0):
    n, m = _shape_2d("tril_indices_from", arr)
    return tril_indices(n, k=k, m=m)


def triu_indices_from(arr, k=0):
    n, m = _shape_2d("triu_indices_from", arr)
    return triu_indices(n, k=k, m=m)


def diag_indices(n, ndim=2):
    """ndim copies of arange(n): the indices of the main diagonal of an n x ... x n array."""
    n, ndim = operator.index(n), operator.index(ndim)
    if n < 0:
        raise ValueError(f"n argument to diag_indices must be nonnegative, got {n}")
    if ndim < 0:
        raise ValueError(f"ndim argument to diag_indices must be nonnegative, got {ndim}")
    return (lax.iota(core.canonicalize_dtype(np.int64), n),) * ndim


def diag_indices_from(arr):
    _check_arraylike("diag_indices_from", arr)
    shape = np.shape(arr)
    if len(shape) < 2:
        raise ValueError("input array must be at least 2-d")
    if len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    return diag_indices(shape[0], ndim=len(shape))


def diagflat(v, k: int = 0):
    """A 2-D array with the flattened v on diagonal k."""
    from meshsim._src.numpy.structural import ravel
    _check_arraylike("diagflat", v)
    return diag(ravel(asarray(v)), k)


def ix_(*args):
    """Open-mesh index arrays from 1-D sequences: a[ix_(rows, cols)] is the rows x cols block."""
    _check_arraylike("ix", *args)
    n = len(args)
    output = []
    for i, a in enumerate(args):
        a = asarray(a)
        if a.ndim != 1:
            raise ValueError(f"Arguments to jax.numpy.ix_ must be 1-dimensional, got shape {a.shape}")
        if a.dtype == np.bool_:
            raise NotImplementedError("Boolean arguments to jax.numpy.ix_ are not implemented")
        shape = [1] * n
        shape[i] = a.shape[0]
        if a.size == 0:  # NumPy gives empty index arrays an integer type
            output.append(full(shape, 0, core.canonicalize_dtype(np.int64)))
        else:
            output.append(lax.broadcast_in_dim(a, shape, (i,)))
    return tuple(output)


s_ = np.s_
index_exp = np.index_exp


_DLPACK_CPU = 1  # DLDeviceType kDLCPU: the only memory the simulated devices live in


def from_dlpack(x, /, *, device=None, copy: bool | None = None):
    """An array holding the data of `x`, any object exporting DLPack on the host (a NumPy
    array, a torch CPU tensor, a meshsim or JAX array); meshsim keeps its own copy."""
    from meshsim._src.sharding.api import device_put
    device_set = getattr(device, "device_set", None)
    if device_set is not None and len(device_set) > 1:
        raise ValueError("from_dlpack can only unpack a dlpack tensor onto a singular device, but "
                         f"a Sharding with {len(device_set)} devices was provided.")
    if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        raise TypeError("The array passed to from_dlpack must have __dlpack__ and __dlpack_device__ methods.")
    device_type, _ = x.__dlpack_device__()
    if device_type != _DLPACK_CPU:
        raise TypeError("Array passed to from_dlpack is on unsupported device type "
                        f"(DLDeviceType: {device_type}, array: {x}")
    result = asarray(np.from_dlpack(x), copy=True)
    return result if device is None else device_put(result, device)

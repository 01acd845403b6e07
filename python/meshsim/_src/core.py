"""The bridge between Python values and the C++ core: binding primitives,
turning Python and NumPy values into arrays, and the type of a value."""
from __future__ import annotations

import contextlib
import functools
import numbers
import os
import sysconfig
import threading
import warnings

import numpy as np

from meshsim import _core
from meshsim._src import float_checks
from meshsim._src.config import config
from meshsim._src.sharding import auto_names, placement

Array = _core.ArrayImpl
Tracer = _core.Tracer
ShapedArray = _core.ShapedArray

# Equations remember the user's line that traced them (print_saved_residuals shows it): the
# innermost frame outside this package and the standard library, as JAX picks it.
_core.capture_sources_outside([
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep,
    sysconfig.get_path("stdlib"),
    os.path.dirname(contextlib.__file__),
])


class _EvalContext(threading.local):
    depth = 0
    partial = 0  # of them, blocks of a partial evaluator (see known_values_evaluated)


_eval_context = _EvalContext()


@contextlib.contextmanager
def ensure_compile_time_eval():
    """Within the block, an operation none of whose operands is traced runs at once, even while
    a function is being traced (jit, grad, ...): its result is a concrete array, so Python can
    branch on it or convert it, as JAX's context manager of that name does."""
    _eval_context.depth += 1
    try:
        yield
    finally:
        _eval_context.depth -= 1


eval_context = ensure_compile_time_eval


@contextlib.contextmanager
def known_values_evaluated():
    """`ensure_compile_time_eval` for a partial evaluator (`jax.interpreters.partial_eval`, as
    flax's scan uses it to find its loop's known values): an operation on known values runs at
    once, except a collective (axis_index, psum, ...), whose value depends on the device a
    shard_map body runs on. That one is recorded, so that it lands in the enclosing shard_map's
    program, as JAX's partial evaluator binds it in the parent trace. (Inside
    `ensure_compile_time_eval` itself, JAX runs it at once and raises: unbound axis name.)"""
    _eval_context.partial += 1
    try:
        with ensure_compile_time_eval():
            yield
    finally:
        _eval_context.partial -= 1


@functools.lru_cache(maxsize=None)
def _reads_its_device(name: str) -> bool:
    return _core.primitive_info(name)["kind"] == "collective"


def evaluated_now(operands) -> bool:
    """Whether an operation on `operands` (a flat sequence) runs at once inside
    `ensure_compile_time_eval` although a trace is open: none of them is traced."""
    return bool(_eval_context.depth) and _core.current_trace() is not None and not any(
        isinstance(x, Tracer) for x in operands)


def _bind_now(name: str, args, params) -> tuple:
    """`name` applied to concrete operands at once although a trace is open: its one-equation
    program is run (running a program records nothing)."""
    arrays = [asarray_value(a) for a in args]
    trace = _core.push_trace()
    try:
        outs = _core.bind(name, [trace.new_input(a.aval) for a in arrays], params)
        program = trace.finish(list(outs))
    finally:
        _core.pop_trace(trace)
    return tuple(program.run(arrays))


def bind(name: str, /, *args, **params):
    """Applies primitive `name` (positional: a primitive may have a parameter `name`); returns
    its outputs as a tuple. Applied eagerly to arrays
    committed to a device, its results stay on that device; under `jax.set_mesh`, on the mesh."""
    mesh = placement.eager_mesh()
    if mesh is not None:
        args = placement.onto_mesh(args, mesh, as_operands=True)
    device = placement.committed_device(args, placement.describe_operand(name, len(args)))
    now = evaluated_now(args)
    if now and _reads_its_device(name):
        if not _eval_context.partial:  # run at once, as JAX does: no device to read
            axes = params.get("axis_name", params.get("axes"))
            axes = axes if isinstance(axes, (tuple, list)) else (axes,)
            raise NameError(f"unbound axis name: {axes[0] if axes else ''}")
        now = False  # recorded: it belongs to the enclosing shard_map's program
    if now:
        outs = _bind_now(name, args, params)
    else:
        outs = _core.bind(name, args, params)
        if (config._values["jax_debug_nans"] or config._values["jax_debug_infs"]) \
                and _core.current_trace() is None:
            float_checks.check_operation(name, outs)
        if device is None and _core.current_trace() is None:
            auto_names.remember_origin(outs, auto_names.origin_of(args))
    if mesh is not None:  # named as a jitted computation's results are
        outs = tuple(placement.onto_mesh(outs, mesh, as_operands=False))
        auto_names.name_typed_results(outs)
    return outs if device is None else tuple(placement.place(outs, device))


def bind1(name: str, /, *args, **params):
    """Applies a single-output primitive."""
    return bind(name, *args, **params)[0]


def is_value(x) -> bool:
    """True for meshsim arrays and tracers."""
    return isinstance(x, (Array, Tracer))


def canonicalize_dtype(dtype) -> np.dtype:
    """The dtype an array of `dtype` gets here (64-bit types narrow unless x64 is on)."""
    return _core.canonicalize_dtype(np.dtype(dtype))


def python_scalar_dtype(x) -> np.dtype:
    """JAX's dtype for a Python scalar (weakly typed)."""
    if isinstance(x, (bool, np.bool_)):
        return np.dtype(bool)
    if isinstance(x, numbers.Integral):
        return canonicalize_dtype(np.int64)
    if isinstance(x, numbers.Real):
        return canonicalize_dtype(np.float64)
    if isinstance(x, numbers.Complex):
        return canonicalize_dtype(np.complex128)
    raise TypeError(f"{type(x).__name__} is not a valid meshsim scalar")


def is_python_scalar(x) -> bool:
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


def check_python_int(x: int, dtype: np.dtype) -> None:
    """JAX's OverflowError for a Python int that `dtype` (the default integer
    type it would become) cannot hold."""
    info = np.iinfo(dtype)
    if not info.min <= x <= info.max:
        raise OverflowError(f"Python int {x} too large to convert to {dtype}")


def is_jax_value(x) -> bool:
    """Whether `x` is an array, tracer or scalar a transformation accepts (asarray_value takes it)."""
    try:
        asarray_value(x)
    except TypeError:
        return False
    return True


def asarray_value(x, dtype=None):
    """Any array-like as a meshsim Array or tracer (no copy for our own values).

    Python scalars become weakly typed, as in JAX; NumPy inputs keep their
    dtype, canonicalised (int64 -> int32 with x64 off)."""
    if is_value(x):
        if dtype is not None and np.dtype(dtype) != x.dtype:
            return convert_element_type(x, dtype)
        return x
    if isinstance(x, np.ma.MaskedArray):
        raise ValueError("numpy masked arrays are not supported as direct inputs to JAX functions. "
                         "Use arr.filled() to convert the value to a standard numpy array.")
    if dtype is None and is_python_scalar(x):
        scalar_dtype = python_scalar_dtype(x)
        if isinstance(x, int) and not isinstance(x, bool):
            check_python_int(x, scalar_dtype)
        return Array.from_numpy(np.asarray(x, scalar_dtype), weak_type=not isinstance(x, bool))
    if hasattr(x, "__jax_array__"):
        return asarray_value(x.__jax_array__(), dtype)
    if isinstance(x, (list, tuple)):
        if any(is_value(e) for e in _flat(x)):
            if _stack_values is None:
                raise TypeError("meshsim.numpy is not imported: a list of arrays cannot be stacked")
            return _stack_values([asarray_value(e, dtype) for e in x])
        if dtype is None and x:
            # JAX's dtype for the leaves (Python scalars are weak: [np.int8(1), 2] is
            # int8), then NumPy's conversion, which raises OverflowError for a
            # Python int out of range ([2**31] with x64 off).
            dtype = result_type(*_leaf_kinds(x))[0]
    arr = np.asarray(x, dtype=dtype)
    if arr.dtype == object:
        raise TypeError(f"cannot convert {type(x).__name__} to a meshsim array")
    if not arr.dtype.isnative:  # JAX refuses non-native byte orders (device_put's text)
        raise TypeError(f"Dtype {arr.dtype.str} is not a valid JAX array type. Only arrays of "
                        "numeric types are supported by JAX.")
    # NumPy inputs keep their dtype, narrowed as JAX narrows (int64 -> int32 with x64 off).
    target = canonicalize_dtype(arr.dtype)
    if arr.dtype != target:
        arr = arr.astype(target)
    # Copied (as JAX copies): the caller's memory may change later.
    return Array.from_numpy(arr, weak_type=False)


# jnp.stack (meshsim._src.numpy.structural installs it at import): a list holding
# arrays becomes their stack, as jnp.asarray does, without core importing the
# NumPy layer built on it.
_stack_values = None


def install_value_stacker(stack) -> None:
    global _stack_values
    _stack_values = stack


def result_type(*args) -> tuple[np.dtype, bool]:
    """JAX's result dtype and weak-type flag for operands (values, scalars or dtypes)."""
    dtype, weak = None, False
    for a in args:
        if is_value(a):
            d, w = a.dtype, a.weak_type
        elif is_python_scalar(a):
            d, w = python_scalar_dtype(a), not isinstance(a, bool)  # bools are not weak in JAX
        elif isinstance(a, (np.dtype, type, str)):
            d, w = canonicalize_dtype(a), False
        elif hasattr(a, "__jax_array__"):  # an array wrapper (flax's Variable): its array's type
            a = a.__jax_array__()
            d, w = (a.dtype, a.weak_type) if is_value(a) else (canonicalize_dtype(np.asarray(a).dtype), False)
        else:
            d, w = canonicalize_dtype(np.asarray(a).dtype), False
        if dtype is None:
            dtype, weak = d, w
        else:
            dtype, weak = _core.promote_types(dtype, weak, d, w)
    return np.dtype(dtype), weak


def _flat(xs):
    for e in xs:
        if isinstance(e, (list, tuple)):
            yield from _flat(e)
        else:
            yield e


def _leaf_kinds(xs) -> list:
    """One leaf of `xs` for each type among its leaves: what its promoted dtype
    depends on (promoting every leaf of a long list one by one would be slow)."""
    leaves = np.asarray(xs, dtype=object).ravel()  # NumPy walks the nesting at C speed
    return list(dict(zip(map(type, leaves), leaves)).values())


def convert_element_type(x, dtype, weak_type: bool = False, warn_on_complex_to_real: bool = True):
    """`x` as `dtype`; complex to real keeps the real part, with NumPy's ComplexWarning as JAX gives it."""
    dtype = canonicalize_dtype(dtype)
    if type(x) is int:
        # As in JAX, a Python int converts as NumPy casts it, without passing
        # through the default integer type: 2**100 -> float32 is fine,
        # 2**31 -> int32 wraps around.
        return Array.from_numpy(np.asarray(x).astype(dtype), weak_type=weak_type)
    x = asarray_value(x)
    if x.dtype == dtype and x.weak_type == weak_type:
        return x
    if warn_on_complex_to_real and x.dtype.kind == "c" and dtype.kind != "c":
        warnings.warn("Casting complex values to real discards the imaginary part",
                      np.exceptions.ComplexWarning, stacklevel=3)
    return bind1("convert_element_type", x, new_dtype=dtype, weak_type=weak_type)


def typeof(x) -> ShapedArray:
    """The abstract type of a value, as `jax.typeof`."""
    if is_value(x) or hasattr(x, "aval"):  # hasattr: random's key arrays carry their own aval
        return x.aval
    return asarray_value(x).aval

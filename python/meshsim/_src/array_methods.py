"""Operators, properties and methods of meshsim.Array and tracers.

Both classes come from the C++ core; their Python behaviour is installed here,
each method delegating to the meshsim.numpy function of the same meaning, so
that code written for arrays runs unchanged while tracing."""
from __future__ import annotations

import numpy as np

from meshsim._src import core, eager_shard_map, errors, tracing
from meshsim._src import dtype_kinds


def _jnp():
    from meshsim._src.numpy import namespace as jnp
    return jnp


def _forward(name):
    def op(self, other):
        return getattr(_jnp(), name)(self, other)
    return op


def _reverse(name):
    def op(self, other):
        return getattr(_jnp(), name)(other, self)
    return op


def _method(name):
    def method(self, *args, **kwargs):
        return getattr(_jnp(), name)(self, *args, **kwargs)
    method.__name__ = name
    return method


_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
    "floordiv": "floor_divide", "mod": "mod", "pow": "power", "matmul": "matmul",
    "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
    "lshift": "left_shift", "rshift": "right_shift", "divmod": "divmod",
}
_COMPARE = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
            "gt": "greater", "ge": "greater_equal"}
_UNARY = {"neg": "negative", "pos": "positive", "abs": "abs", "invert": "invert"}
_METHODS = ["astype", "ravel", "sum", "mean", "max", "min", "prod", "all",
            "any", "argmax", "argmin", "var", "std", "cumsum", "squeeze", "swapaxes",
            "round", "repeat", "take", "sort", "argsort", "dot", "conj", "conjugate"]


def _reshape(self, *shape, order="C", out_sharding=None):
    # Both x.reshape((2, 3)) and x.reshape(2, 3), as NumPy allows.
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = shape[0]
    return _jnp().reshape(self, shape, order=order, out_sharding=out_sharding)


def _transpose(self, *axes):
    if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int)):
        axes = axes[0]
    return _jnp().transpose(self, axes or None)


def _clip(self, min=None, max=None):  # noqa: A002 (the method's argument names)
    # By keyword, as JAX's method: the bounds reach jnp.clip's jit in the order of their names.
    return _jnp().clip(self, min=min, max=max)


def _array_item(self):
    return self.to_numpy().item()


def _array_index(self):
    if self.shape != () or not dtype_kinds.issubdtype(self.dtype, np.integer):
        raise TypeError("Only integer scalar arrays can be converted to a scalar index.")
    return int(self.to_numpy())


def _scalar_conversion(kind):
    def convert(self):
        if self.ndim > 0:  # JAX refuses a shape-(1,) array too, unlike NumPy
            raise TypeError(f"Only scalar arrays can be converted to Python scalars; got arr.ndim={self.ndim}")
        return kind(self.to_numpy())
    return convert


def _array_bool(self):
    # NumPy's rule: any single element, of whatever rank, has a truth value.
    if self.size == 0:
        raise ValueError("The truth value of an empty array is ambiguous. Use `array.size > 0` to check "
                         "that an array is not empty.")
    if self.size > 1:
        raise ValueError("The truth value of an array with more than one element is ambiguous. Use "
                         "a.any() or a.all()")
    return bool(self.to_numpy().reshape(()))


def _copied(self, memo=None):
    # copy.copy and copy.deepcopy give a new buffer of the same type, sharding and commitment.
    return _jnp().array(self, copy=True)


def _from_pickle(value: np.ndarray, weak_type: bool):
    return core.Array.from_numpy(value, weak_type=weak_type)


def _array_reduce(self):
    # Pickled as its host value: unpickled on the default device, uncommitted, as in JAX.
    return _from_pickle, (self.to_numpy(), bool(self.weak_type))


def _refuse_item_assignment(self, idx, value):
    raise TypeError("JAX arrays are immutable and do not support in-place item assignment. Instead of "
                    "x[idx] = y, use x = x.at[idx].set(y) or another .at[] method: "
                    "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.ndarray.at.html")


def _concrete_error(kind: str):
    """A tracer's conversion to a Python value: the value exists only when the
    program runs, so raise JAX's error for that conversion (unless it is an eager
    shard_map value the same on every device, which JAX makes concrete)."""
    def convert(self, *args, **kwargs):
        # JAX's float() and complex() of such a value still raise.
        value = None if kind in ("__float__", "__complex__") else eager_shard_map.concrete_value(self)
        if value is None and kind not in ("__float__", "__complex__", "__array__"):
            value = tracing.known_value(self)  # an eager grad's value, whose primal JAX knows
        if value is not None:
            return getattr(value, kind)(*args, **kwargs)
        origin = tracing.origin_message(self)
        if kind == "__bool__":
            raise errors.TracerBoolConversionError(self, origin)
        if kind == "__index__":
            raise errors.TracerIntegerConversionError(self, origin)
        if kind == "__array__":
            raise errors.TracerArrayConversionError(self, origin)
        if kind in ("item", "tolist"):
            raise errors.ConcretizationTypeError(self, f"This occurred in the {kind}() method of jax.Array",
                                                 origin)
        fn = kind.strip("_")
        raise errors.ConcretizationTypeError(
            self, f"The problem arose with the `{fn}` function. If trying to convert the data type of a "
            f"value, try using `x.astype({fn})` or `jnp.array(x, {fn})` instead.", origin)
    return convert


def _array_repr(self):
    prefix = "Array("
    if self.aval.unreduced:  # partial sums: the value exists only once reduced
        return f"{prefix}shape={self.shape}, dtype={self.dtype.name}, sharding={self.sharding})"
    dtype_str = f"dtype={self.dtype.name}" + (", weak_type=True" if self.weak_type else "")
    line_width = np.get_printoptions()["linewidth"]
    if self.size == 0:
        body = f"[], shape={self.shape}"
    else:
        body = np.array2string(self.to_numpy(), prefix=prefix, suffix=",", separator=", ",
                               max_line_width=line_width)
    # JAX pads rather than wraps a dtype that would overflow the last line
    last_line_len = len(body) - body.rfind("\n") + 1
    sep = " " * len(prefix) if last_line_len + len(dtype_str) + 2 > line_width else " "
    return f"{prefix}{body},{sep}{dtype_str})"


def _tracer_sharding(self):
    raise AttributeError(
        f"The 'sharding' attribute is not available on traced array with shape "
        f"{self.aval.str_short()}. To query sharding information on tracers, use `jax.typeof(x)`.")


def _tracer_repr(self):
    text = eager_shard_map.block_text(self)
    if text is not None:
        return text
    aval = self.aval
    batched = tracing.batched_traces.get(self.trace)
    if batched is not None:  # an example of a vmap: JAX shows the type with the batch dimension too
        size, dims = batched
        dtype, _, rest = aval.str_short().partition("[")
        shape = list(aval.shape)
        shape.insert(dims.get(id(self), 0), size)
        return f"VmapTracer(aval={dtype}[{rest}, batched={dtype}[{','.join(map(str, shape))}])"
    depth = tracing.known_depth(self)
    if depth is None:
        return f"JitTracer({'~' if aval.weak_type else ''}{aval.str_short()})"
    value = tracing.known_value(self)
    text = str(value) if value is not None else \
        f"JitTracer({'~' if aval.weak_type else ''}{aval.str_short()})"
    if not dtype_kinds.issubdtype(aval.dtype, np.inexact):
        return text  # JAX's integer results of a grad's values carry no tangent
    for _ in range(depth):
        text = f"GradTracer(primal={text}, typeof(tangent)={aval.str_short(short_dtypes=True)})"
    return text


def _len(self):
    if not self.shape:
        raise TypeError("len() of unsized object")
    return self.shape[0]


def _iter(self):
    if not self.shape:
        raise TypeError("iteration over a 0-d array")
    if isinstance(self, core.Tracer):  # as JAX's tracers: lax.index_in_dim, a strided slice and a squeeze
        from meshsim._src.lax import structural as lax
        return (lax.index_in_dim(self, i, 0, keepdims=False) for i in range(self.shape[0]))
    return (self[i] for i in range(self.shape[0]))


def install():
    for cls in (core.Array, core.Tracer):
        for dunder, name in _BINARY.items():
            setattr(cls, f"__{dunder}__", _forward(name))
            setattr(cls, f"__r{dunder}__", _reverse(name))
        for dunder, name in _COMPARE.items():
            setattr(cls, f"__{dunder}__", _forward(name))
        for dunder, name in _UNARY.items():
            setattr(cls, f"__{dunder}__", _method(name))
        for name in _METHODS:
            setattr(cls, name, _method(name))
        cls.reshape = _reshape
        cls.clip = _clip
        cls.transpose = _transpose
        cls.flatten = _method("ravel")
        cls.__getitem__ = lambda self, idx: _jnp()._getitem(self, idx)
        cls.__setitem__ = _refuse_item_assignment
        cls.__copy__ = _copied
        cls.__deepcopy__ = _copied
        cls.T = property(lambda self: _jnp().transpose(self))
        cls.mT = property(lambda self: _jnp().swapaxes(self, -1, -2))
        cls.real = property(lambda self: _jnp().real(self))
        cls.imag = property(lambda self: _jnp().imag(self))
        cls.itemsize = property(lambda self: self.dtype.itemsize)
        cls.nbytes = property(lambda self: self.size * self.dtype.itemsize)
        cls.__len__ = _len
        cls.__iter__ = _iter
        cls.__hash__ = None
        cls.__array_priority__ = 100
    core.Array.__array__ = lambda self, dtype=None, copy=None: (
        self.to_numpy() if dtype is None else self.to_numpy().astype(dtype))
    core.Array.item = _array_item
    # DLPack export of a host copy, so NumPy, torch and jnp.from_dlpack can import arrays; a
    # writable copy, as consumers of DLPack before 1.0 cannot be told the data is read-only.
    core.Array.__dlpack__ = lambda self, **kwargs: np.array(self.to_numpy()).__dlpack__(**kwargs)
    core.Array.__dlpack_device__ = lambda self: (1, 0)
    core.Array.__reduce__ = _array_reduce
    core.Array.tolist = lambda self: self.to_numpy().tolist()
    core.Array.__float__ = _scalar_conversion(float)
    core.Array.__int__ = _scalar_conversion(int)
    core.Array.__index__ = _array_index
    core.Array.__bool__ = _array_bool
    core.Array.__complex__ = _scalar_conversion(complex)
    core.Array.__repr__ = _array_repr
    core.Array.__str__ = lambda self: _array_repr(self) if self.aval.unreduced else str(self.to_numpy())
    core.Array.__format__ = lambda self, spec: format(self.to_numpy().item() if self.ndim == 0 else self.to_numpy(), spec)
    core.Array.copy = lambda self: _jnp().array(self, copy=True)
    # JAX starts a device-to-host copy; simulated devices' memory is the host's already.
    core.Array.copy_to_host_async = lambda self: None
    for conversion in ("__float__", "__int__", "__bool__", "__index__", "__complex__", "item", "tolist",
                       "__array__"):
        setattr(core.Tracer, conversion, _concrete_error(conversion))
    core.Tracer.__repr__ = _tracer_repr
    core.Tracer.__str__ = _tracer_repr
    core.Tracer.sharding = property(_tracer_sharding)

"""meshsim.nn.initializers: parameter initializers (as jax.nn.initializers).

Each initializer draws with meshsim.random exactly as JAX's does (same
sampler, same key use, same scaling order), so for the same key the
parameters are bit-identical to JAX's."""
from __future__ import annotations

import math
import operator

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src import core, random
from meshsim._src.lax.structural import canonicalize_shape
from meshsim._src import dtype_kinds

__all__ = ["Initializer", "zeros", "ones", "constant", "uniform", "normal", "truncated_normal", "orthogonal",
           "delta_orthogonal",
           "variance_scaling", "glorot_uniform", "glorot_normal", "xavier_uniform", "xavier_normal",
           "lecun_uniform", "lecun_normal", "he_uniform", "he_normal", "kaiming_uniform", "kaiming_normal"]


class Initializer:
    """The type of an initializer: init(key, shape, dtype=None, out_sharding=None) -> Array."""

    def __call__(self, key, shape, dtype=None, out_sharding=None):
        raise NotImplementedError


def _float_dtype(dtype) -> np.dtype:
    dtype = core.canonicalize_dtype(np.float64 if dtype is None else dtype)
    if dtype_kinds.issubdtype(dtype, np.complexfloating):
        raise TypeError("meshsim does not support complex numbers")
    return dtype


def zeros(key, shape, dtype=None, out_sharding=None):
    """An array of zeros (the key is unused)."""
    return jnp.zeros(shape, _float_dtype(dtype), out_sharding=out_sharding)


def ones(key, shape, dtype=None, out_sharding=None):
    """An array of ones (the key is unused)."""
    return jnp.ones(shape, _float_dtype(dtype), out_sharding=out_sharding)


def constant(value, dtype=None):
    """An initializer filling arrays with `value`."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        return jnp.full(shape, value, dtype=_float_dtype(dtype), device=out_sharding)
    return init


def uniform(scale=1e-2, dtype=None):
    """An initializer drawing uniformly from [0, scale)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _float_dtype(dtype)
        return random.uniform(key, shape, dtype, out_sharding=out_sharding) * jnp.array(scale, dtype)
    return init


def normal(stddev=1e-2, dtype=None):
    """An initializer drawing from N(0, stddev^2)."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _float_dtype(dtype)
        return random.normal(key, shape, dtype, out_sharding=out_sharding) * jnp.array(stddev, dtype)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """An initializer drawing stddev * (a standard normal truncated to (lower, upper))."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        dtype = _float_dtype(dtype)
        return random.truncated_normal(key, lower, upper, shape, dtype,
                                       out_sharding=out_sharding) * jnp.array(stddev, dtype)
    return init


def _axes_size(shape, axes) -> int:
    if isinstance(axes, (int, np.integer)):
        return shape[operator.index(axes)]
    return math.prod(shape[i] for i in axes)


def _compute_fans(shape, in_axis=-2, out_axis=-1, batch_axis=()) -> tuple[float, float]:
    """(fan_in, fan_out): the in/out axis sizes times the receptive field
    (every axis that is neither in, out nor batch)."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional weights tensor "
                         "with default in_axis. Must be at least 2D or specify in_axis explicitly.")
    in_size, out_size = _axes_size(shape, in_axis), _axes_size(shape, out_axis)
    batch_size = _axes_size(shape, batch_axis)
    receptive_field_size = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive_field_size, out_size * receptive_field_size


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """An initializer with variance scale / n, n from the fans as `mode` says, drawn
    from a truncated normal, a normal or a uniform distribution."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        shape = canonicalize_shape(shape)
        dtype = _float_dtype(dtype)
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        if mode == "fan_in":
            denominator = fan_in
        elif mode == "fan_out":
            denominator = fan_out
        elif mode == "fan_avg":
            denominator = (fan_in + fan_out) / 2
        elif mode == "fan_geo_avg":
            denominator = (fan_in * fan_out) ** 0.5
        else:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        variance = jnp.array(scale / denominator, dtype=dtype)
        if distribution == "truncated_normal":
            # .8796... is the stddev of a standard normal truncated to (-2, 2).
            stddev = jnp.sqrt(variance) / jnp.array(.87962566103423978, dtype)
            return random.truncated_normal(key, -2, 2, shape, dtype, out_sharding=out_sharding) * stddev
        if distribution == "normal":
            return random.normal(key, shape, dtype, out_sharding=out_sharding) * jnp.sqrt(variance)
        if distribution == "uniform":
            return random.uniform(key, shape, dtype, -1, out_sharding=out_sharding) * jnp.sqrt(3 * variance)
        raise ValueError(f"invalid distribution for variance scaling initializer: {distribution}")
    return init


def _named(scale, mode, distribution):
    def make(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis=in_axis, out_axis=out_axis,
                                batch_axis=batch_axis, dtype=dtype)
    return make


glorot_uniform = xavier_uniform = _named(1.0, "fan_avg", "uniform")
glorot_normal = xavier_normal = _named(1.0, "fan_avg", "truncated_normal")
lecun_uniform = _named(1.0, "fan_in", "uniform")
lecun_normal = _named(1.0, "fan_in", "truncated_normal")
he_uniform = kaiming_uniform = _named(2.0, "fan_in", "uniform")
he_normal = kaiming_normal = _named(2.0, "fan_in", "truncated_normal")
for _name in ("glorot_uniform", "glorot_normal", "lecun_uniform", "lecun_normal", "he_uniform", "he_normal"):
    globals()[_name].__name__ = globals()[_name].__qualname__ = _name


def orthogonal(scale=1.0, column_axis: int = -1, dtype=None):
    """An initializer of (flattened) orthogonal matrices: rows or columns orthonormal, the
    columns along `column_axis`, times `scale`."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        import math

        from meshsim._src.numpy import namespace as jnp
        from meshsim._src.random_linalg import orthogonal as sample
        if out_sharding is not None:
            raise NotImplementedError
        dtype = _float_dtype(dtype)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if any(d == 0 for d in shape):
            return jnp.zeros(shape, dtype)
        n_cols = shape[column_axis]
        q = sample(key, math.prod(shape) // n_cols, (), dtype, n_cols)
        q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (n_cols,))
        return jnp.array(scale, dtype) * jnp.moveaxis(q, -1, column_axis)
    return init


def delta_orthogonal(scale=1.0, column_axis: int = -1, dtype=None):
    """An initializer of convolution kernels (1 to 3 spatial dimensions, then in and out
    channels) that are zero except at the centre tap, which holds an orthogonal
    (in x out) matrix drawn as `orthogonal` draws it from the same key."""
    def init(key, shape, dtype=dtype, out_sharding=None):
        if out_sharding is not None:
            raise NotImplementedError
        dtype = _float_dtype(dtype)
        shape = tuple(shape)
        if len(shape) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        centre_tap = orthogonal(scale=scale, column_axis=column_axis, dtype=dtype)(key, shape[-2:])
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return jnp.zeros(shape, dtype).at[centre].set(centre_tap)
    return init

"""meshsim.nn: activation functions, softmax and friends (as jax.nn).

Written as JAX writes them, from jax.numpy and lax operations, so results,
dtypes and numerical stability match (softmax and logsumexp subtract the max
before exponentiating; softplus is a stable logaddexp)."""
from __future__ import annotations

import operator
import warnings

import numpy as np

import meshsim.numpy as jnp
from meshsim._src import core
from meshsim._src.lax import elementwise as lax
from meshsim._src.lax import structural as lax_structural
from meshsim._src.numpy.promotion import promote_args_inexact

__all__ = ["relu", "relu6", "gelu", "sigmoid", "silu", "swish", "softplus", "log_sigmoid", "elu", "leaky_relu",
           "tanh", "softmax", "log_softmax", "logsumexp", "one_hot"]


def relu(x):
    """max(x, 0)."""
    return jnp.maximum(x, 0)


def relu6(x):
    """min(max(x, 0), 6)."""
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


def sigmoid(x):
    """1 / (1 + exp(-x))."""
    return lax.logistic(x)


def silu(x):
    """x * sigmoid(x)."""
    x = core.asarray_value(x)
    return x * sigmoid(x)


swish = silu


def softplus(x):
    """log(1 + exp(x)), computed without overflow."""
    return jnp.logaddexp(x, 0)


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    x = core.asarray_value(x)
    return -softplus(-x)


def elu(x, alpha=1.0):
    """x if x > 0 else alpha * (exp(x) - 1)."""
    x = core.asarray_value(x)
    return jnp.where(x > 0, x, alpha * jnp.expm1(jnp.where(x > 0, 0.0, x)))


def leaky_relu(x, negative_slope=1e-2):
    """x if x >= 0 else negative_slope * x."""
    x = core.asarray_value(x)
    return jnp.where(x >= 0, x, negative_slope * x)


def gelu(x, approximate: bool = True):
    """x * Phi(x); with `approximate`, the tanh form of the Gaussian CDF."""
    (x,) = promote_args_inexact(x)
    if approximate:
        sqrt_2_over_pi = np.sqrt(2 / np.pi).astype(x.dtype)
        cdf = 0.5 * (1.0 + jnp.tanh(sqrt_2_over_pi * (x + 0.044715 * (x ** 3))))
        return x * cdf
    sqrt_half = np.sqrt(0.5).astype(x.dtype)
    return jnp.asarray(0.5 * x * lax.erfc(-x * sqrt_half), dtype=x.dtype)


def tanh(x, /):
    return jnp.tanh(x)


def softmax(x, axis=-1, where=None):
    """exp(x) / sum(exp(x)) along `axis`, shifted by the max for stability."""
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    unnormalized = jnp.exp(x_safe - x_max)
    result = unnormalized / jnp.sum(unnormalized, axis, where=where, keepdims=True)
    return result if where is None else jnp.where(where, result, 0)


def log_softmax(x, axis=-1, where=None):
    """x - logsumexp(x) along `axis`, shifted by the max for stability."""
    x = core.asarray_value(x)
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    shifted = x_safe - x_max
    result = shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis, where=where, keepdims=True))
    return result if where is None else jnp.where(where, result, -np.inf)


def _reduction_axes(ndim: int, axis) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        a = operator.index(a)
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of bounds for array of dimension {ndim}")
        out.append(a % ndim)
    return tuple(sorted(out))


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """log(sum(b * exp(a))) along `axis`, without overflow; with return_sign, also its sign."""
    if where is not None:
        a = jnp.where(where, a, 0)
    if b is not None:
        a, b = promote_args_inexact(a, b)
        a = jnp.where(b != 0, a, -np.inf)
    else:
        (a,) = promote_args_inexact(a)
    axes = _reduction_axes(a.ndim, axis)
    amax = jnp.max(a, axis=axes, keepdims=keepdims, where=where, initial=-np.inf)
    amax = lax.select(jnp.isfinite(amax), amax, jnp.zeros_like(amax))
    amax_with_dims = amax if keepdims else lax_structural.expand_dims(amax, axes)
    exp_a = lax.exp(lax.sub(a, amax_with_dims))
    if b is not None:
        exp_a = lax.mul(exp_a, b)
    sumexp = jnp.sum(exp_a, axis=axes, keepdims=keepdims, where=where)
    sign = lax.sign(sumexp)
    out = lax.add(lax.log(jnp.abs(sumexp)), amax)
    if return_sign:
        return out, sign
    if b is not None:
        out = jnp.where(sign < 0, np.array(np.nan, dtype=out.dtype), out)
    return out


def one_hot(x, num_classes: int, *, dtype=None, axis=-1):
    """A one-hot encoding of the integers in x, along a new axis of size num_classes."""
    num_classes = operator.index(num_classes)
    x = core.asarray_value(x)
    if not (np.issubdtype(x.dtype, np.integer) or x.dtype == np.bool_):
        warnings.warn(f"jax.nn.one_hot input should be integer-typed; got dtype={x.dtype}",
                      DeprecationWarning, stacklevel=2)
    dtype = core.canonicalize_dtype(np.float64) if dtype is None else dtype
    out_axis = operator.index(axis)
    if not -(x.ndim + 1) <= out_axis <= x.ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {x.ndim + 1}")
    out_axis %= x.ndim + 1
    lhs = lax_structural.expand_dims(x, (out_axis,))
    rhs_shape = [1] * x.ndim
    rhs_shape.insert(out_axis, num_classes)
    rhs = lax_structural.broadcasted_iota(x.dtype, rhs_shape, out_axis)
    return jnp.equal(lhs, rhs).astype(dtype)

"""meshsim.nn: activation functions, softmax and friends (as jax.nn).

Written as JAX writes them, from jax.numpy and lax operations, so results,
dtypes and numerical stability match (softmax and logsumexp subtract the max
before exponentiating; softplus is a stable logaddexp)."""
from __future__ import annotations

import operator
import warnings

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src import api, core
from meshsim._src.ad import custom_jvp, stop_gradient
from meshsim._src.lax import elementwise as lax
from meshsim._src.lax import structural as lax_structural
from meshsim._src.numpy.creation import _check_arraylike
from meshsim._src.numpy.promotion import promote_args_inexact
from meshsim._src import dtype_kinds

__all__ = ["relu", "relu6", "gelu", "sigmoid", "silu", "swish", "softplus", "log_sigmoid", "elu", "leaky_relu",
           "tanh", "softmax", "log_softmax", "logsumexp", "one_hot", "identity", "celu", "selu", "glu",
           "hard_tanh", "hard_sigmoid", "hard_silu", "hard_swish", "mish", "soft_sign", "squareplus",
           "standardize", "log1mexp", "logmeanexp", "sparse_plus", "sparse_sigmoid",
           "dot_product_attention"]


def _asarray(name: str, x):
    _check_arraylike(name, x)
    return core.asarray_value(x)


@custom_jvp
@api.jitted_when_traced
def relu(x):
    """max(x, 0), whose derivative at 0 is 0 (maximum's splits the tie and gives 1/2)."""
    return jnp.maximum(x, 0)


relu.defjvps(lambda tangent, _, x: lax.select(x > 0, tangent, lax_structural.full_like(tangent, 0)))


@custom_jvp
@api.jitted_when_traced
def relu6(x):
    """min(max(x, 0), 6), whose derivative is 0 at both kinks."""
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


relu6.defjvps(lambda tangent, _, x: lax.select((x > 0) & (x < 6), tangent,
                                               lax_structural.full_like(tangent, 0)))


@api.jitted_when_traced(inline=True)
def sigmoid(x):
    """1 / (1 + exp(-x))."""
    return lax.logistic(x)


@api.jitted_when_traced
def silu(x):
    """x * sigmoid(x)."""
    x = core.asarray_value(x)
    return x * sigmoid(x)


swish = silu


@api.jitted_when_traced
def softplus(x):
    """log(1 + exp(x)), computed without overflow."""
    return jnp.logaddexp(x, 0)


@api.jitted_when_traced
def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    x = core.asarray_value(x)
    return -softplus(-x)


@api.jitted_when_traced
def elu(x, alpha=1.0):
    """x if x > 0 else alpha * (exp(x) - 1)."""
    x = core.asarray_value(x)
    return jnp.where(x > 0, x, alpha * jnp.expm1(jnp.where(x > 0, 0.0, x)))


@api.jitted_when_traced
def leaky_relu(x, negative_slope=1e-2):
    """x if x >= 0 else negative_slope * x."""
    x = core.asarray_value(x)
    return jnp.where(x >= 0, x, negative_slope * x)


@api.jitted_when_traced
def identity(x):
    """x itself, as an array."""
    return _asarray("identity", x)


@api.jitted_when_traced
def celu(x, alpha=1.0):
    """max(x, 0) + alpha * expm1(min(x, 0) / alpha)."""
    x = _asarray("celu", x)
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


@api.jitted_when_traced
def selu(x):
    """scale * elu(x, alpha) with the self-normalizing constants."""
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    return scale * elu(_asarray("selu", x), alpha)


@api.jitted_when_traced(static_argnames=('axis',))
def glu(x, axis: int = -1):
    """x1 * sigmoid(x2), where x1, x2 are the halves of x along `axis`."""
    x = _asarray("glu", x)
    size = x.shape[axis]
    if size % 2:
        raise AssertionError("axis size must be divisible by 2")
    x1, x2 = jnp.split(x, 2, axis)
    return x1 * sigmoid(x2)


@api.jitted_when_traced
def hard_tanh(x):
    """x clipped to [-1, 1]."""
    x = _asarray("hard_tanh", x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


@api.jitted_when_traced
def hard_sigmoid(x):
    """relu6(x + 3) / 6."""
    return relu6(_asarray("hard_sigmoid", x) + 3.) / 6.


@api.jitted_when_traced
def hard_silu(x):
    """x * hard_sigmoid(x)."""
    x = _asarray("hard_silu", x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


@api.jitted_when_traced
def mish(x):
    """x * tanh(softplus(x))."""
    x = _asarray("mish", x)
    return x * jnp.tanh(softplus(x))


@api.jitted_when_traced
def soft_sign(x):
    """x / (|x| + 1)."""
    x = _asarray("soft_sign", x)
    return x / (jnp.abs(x) + 1)


@api.jitted_when_traced
def squareplus(x, b=4):
    """(x + sqrt(x^2 + b)) / 2."""
    x, b = _asarray("squareplus", x), _asarray("squareplus", b)
    return (x + jnp.sqrt(jnp.square(x) + b)) / 2


@custom_jvp
@api.jitted_when_traced
def log1mexp(x):
    """log(1 - exp(-x)), by expm1 below log(2) and log1p above (Maechler's split)."""
    x = _asarray("log1mexp", x)
    return jnp.where(x < jnp.log(2.0), jnp.log(-jnp.expm1(-x)), jnp.log1p(-jnp.exp(-x)))


# The derivative 1 / expm1(x) in closed form: differentiating the split above would take the
# untaken branch's infinities at 0 into the sum.
log1mexp.defjvps(lambda tangent, _, x: tangent / jnp.expm1(x))


@api.jitted_when_traced
def sparse_plus(x):
    """0 for x <= -1, x for x >= 1, (x + 1)^2 / 4 between."""
    x = _asarray("sparse_plus", x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


@api.jitted_when_traced
def sparse_sigmoid(x):
    """clip(x + 1, 0, 2) / 2."""
    return 0.5 * jnp.clip(_asarray("sparse_sigmoid", x) + 1.0, 0.0, 2.0)


@api.jitted_when_traced(static_argnames=("axis", "algorithm"))
def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *, algorithm: str = "fast"):
    """(x - mean) / sqrt(variance + epsilon), with the moments taken along `axis` unless given."""
    _check_arraylike("standardize", x)
    _check_arraylike("standardize", *(a for a in (mean, variance, where) if a is not None))
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(jnp.subtract(x, mean)), axis, keepdims=True, where=where)
        elif algorithm == "fast":
            # E[x^2] - E[x]^2 can round below zero: clip before the rsqrt.
            variance = jnp.clip(jnp.mean(jnp.square(x), axis, keepdims=True, where=where) - jnp.square(mean), 0)
        else:
            raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    return jnp.subtract(x, mean) * lax.rsqrt(variance + epsilon)


def gelu(x, approximate: bool = True):
    """x * Phi(x); with `approximate`, the tanh form of the Gaussian CDF."""
    (x,) = promote_args_inexact(x)
    if approximate:
        sqrt_2_over_pi = np.sqrt(2 / np.pi).astype(x.dtype)
        cdf = 0.5 * (1.0 + jnp.tanh(sqrt_2_over_pi * (x + 0.044715 * (x ** 3))))
        return x * cdf
    sqrt_half = np.sqrt(0.5).astype(x.dtype)
    return jnp.asarray(0.5 * x * lax.erfc(-x * sqrt_half), dtype=x.dtype)


@api.jitted_when_traced(inline=True)
def tanh(x, /):
    return jnp.tanh(x)


def softmax(x, axis=-1, where=None):
    """exp(x) / sum(exp(x)) along `axis`, shifted by the max for stability."""
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    # No gradient through the shift (JAX's order of roundings in narrow floats).
    unnormalized = jnp.exp(x_safe - stop_gradient(x_max))
    result = unnormalized / jnp.sum(unnormalized, axis, where=where, keepdims=True)
    return result if where is None else jnp.where(where, result, 0)


@api.jitted_when_traced(static_argnames=('axis',))
def log_softmax(x, axis=-1, where=None):
    """x - logsumexp(x) along `axis`, shifted by the max for stability."""
    x = core.asarray_value(x)
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    shifted = x_safe - stop_gradient(x_max)
    exp_shifted = jnp.exp(shifted)
    if exp_shifted.dtype == jnp.bfloat16:
        # JAX's log_softmax is one XLA computation, whose CPU compiler drops the bfloat16
        # rounding between exp (computed in float32) and the float32 sum. The sum gets the
        # unrounded exps; the gradient still flows through the rounded ones, as in JAX.
        rounded = exp_shifted.astype(jnp.float32)
        unrounded = jnp.exp(shifted.astype(jnp.float32))
        total = jnp.sum(rounded + stop_gradient(unrounded - rounded), axis, where=where,
                        keepdims=True).astype(exp_shifted.dtype)
    else:
        total = jnp.sum(exp_shifted, axis, where=where, keepdims=True)
    result = shifted - jnp.log(total)
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
    amax = stop_gradient(lax.select(jnp.isfinite(amax), amax, jnp.zeros_like(amax)))
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


@api.jitted_when_traced(static_argnames=("axis", "keepdims"))
def logmeanexp(x, axis=None, where=None, keepdims: bool = False):
    """log(mean(exp(x))) along `axis`, without overflow."""
    from meshsim._src.numpy.reductions import _count
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    x = core.asarray_value(x)
    count = _count(x, axis, keepdims, where, lse.dtype)
    return lse - jnp.log(count)


def one_hot(x, num_classes: int, *, dtype=None, axis=-1):
    """A one-hot encoding of the integers in x, along a new axis of size num_classes."""
    num_classes = operator.index(num_classes)
    x = core.asarray_value(x)
    if not (dtype_kinds.issubdtype(x.dtype, np.integer) or x.dtype == np.bool_):
        warnings.warn(f"jax.nn.one_hot input should be integer-typed; got dtype={x.dtype}",
                      DeprecationWarning, stacklevel=2)
    dtype = core.canonicalize_dtype(np.float64) if dtype is None else dtype
    out_axis = operator.index(axis)
    if not -(x.ndim + 1) <= out_axis <= x.ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {x.ndim + 1}")
    return _one_hot(x, num_classes, dtype=dtype, axis=out_axis % (x.ndim + 1))


@api.jitted_when_traced(static_argnames=('num_classes', 'dtype', 'axis'))
def _one_hot(x, num_classes: int, *, dtype, axis: int):
    out_axis = axis
    lhs = lax_structural.expand_dims(x, (out_axis,))
    rhs_shape = [1] * x.ndim
    rhs_shape.insert(out_axis, num_classes)
    rhs = lax_structural.broadcasted_iota(x.dtype, rhs_shape, out_axis)
    return jnp.equal(lhs, rhs).astype(dtype)


# -- attention (JAX's reference 'xla' implementation; no fused kernels)


def _ensure_4d(t):
    t = jnp.asarray(t)
    return jnp.expand_dims(t, tuple(range(4 - t.ndim))) if t.ndim < 4 else t


def _check_shape_and_dtype(t, shape, dtype, name: str) -> None:
    if t is None:
        return
    if t.ndim != len(shape):
        raise ValueError(f"{name} ndim should be {len(shape)}, but got {t.ndim}")
    if dtype is not None and t.dtype != dtype:
        raise ValueError(f"{name} dtype should be {dtype}, but got {t.dtype}")
    for i in range(t.ndim):
        if shape[i] != -1 and t.shape[i] != shape[i]:
            raise ValueError(f"{name} shape should be {shape}: but got {t.shape}")


def _attention_mask(logits, mask, is_causal, q_seqlen, kv_seqlen, local_window_size):
    """The logits with masked-out positions set to a large negative number.
    Logits are [B, K, G, T, S]; masks broadcast against them."""
    if mask is None and not is_causal and q_seqlen is None and kv_seqlen is None and local_window_size is None:
        return logits
    combined = jnp.ones_like(logits, dtype=bool)
    if mask is not None:
        combined = jnp.logical_and(combined, mask)
    T, S = logits.shape[-2:]
    if is_causal:
        combined = jnp.logical_and(combined, jnp.tril(jnp.ones((T, S), dtype=bool)))
    if local_window_size is not None:
        q_pos, k_pos = jnp.arange(T)[:, None], jnp.arange(S)[None, :]
        left, right = local_window_size
        combined = jnp.logical_and(combined, jnp.logical_and(q_pos >= k_pos - right, q_pos <= k_pos + left))
    if q_seqlen is not None or kv_seqlen is not None:
        pad = True
        if q_seqlen is not None:
            pad = jnp.arange(T)[None, :, None] < q_seqlen[:, None, None]
        if kv_seqlen is not None:
            pad = jnp.logical_and(pad, jnp.arange(S)[None, None, :] < kv_seqlen[:, None, None])
        combined = jnp.logical_and(combined, pad[:, None, None, :, :])
    # Softmax runs in float32: keep the fill finite there (float64's max would overflow).
    large_negative = -0.7 * min(float(dtype_kinds.finfo(logits.dtype).max), float(dtype_kinds.finfo(np.float32).max))
    return jnp.where(combined, logits, jnp.asarray(large_negative, dtype=logits.dtype))


def _grouped(t, K: int, G: int):
    """A [B, N, T, S] bias or mask as [B, K, G, T, S] (N = K * G query heads)."""
    if t is None:
        return None
    tB, tN, tT, tS = t.shape
    if tN == 1:
        return jnp.broadcast_to(t[:, :, None, :, :], (tB, 1, G, tT, tS))
    return jnp.reshape(t, (tB, K, G, tT, tS))


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None, is_causal: bool = False,
                          query_seq_lengths=None, key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual: bool = False):
    """softmax(scale * Q K^T + bias, masked) V over [batch, seq, heads, head_dim] arrays,
    with grouped-query attention when query has a multiple of key's heads."""
    output_shape = jnp.asarray(query).shape
    query, key, value = _ensure_4d(query), _ensure_4d(key), _ensure_4d(value)
    bias = None if bias is None else _ensure_4d(bias)
    mask = None if mask is None else _ensure_4d(mask)
    if query_seq_lengths is not None:
        query_seq_lengths = jnp.asarray(query_seq_lengths)
    if key_value_seq_lengths is not None:
        key_value_seq_lengths = jnp.asarray(key_value_seq_lengths)
    if isinstance(local_window_size, int):
        local_window_size = (local_window_size, local_window_size)
    B, S, K, H = key.shape
    _check_shape_and_dtype(value, [B, S, K, H], key.dtype, "value")
    _check_shape_and_dtype(query, [B, -1, -1, H], key.dtype, "query")
    _check_shape_and_dtype(mask, [-1] * 4, np.dtype(bool), "mask")
    _check_shape_and_dtype(bias, [-1] * 4, None, "bias")
    _check_shape_and_dtype(query_seq_lengths, [B], np.dtype("int32"), "query_seq_lengths")
    _check_shape_and_dtype(key_value_seq_lengths, [B], np.dtype("int32"), "key_value_seq_lengths")
    if query.shape[-2] % K != 0:
        raise ValueError("The number of query heads must be a multiple of key/value heads, "
                         f"but got {query.shape[-2]} vs {K}")
    if implementation == "cudnn":
        raise NotImplementedError("implementation='cudnn' needs a GPU; use None or 'xla'")
    if implementation not in (None, "xla"):
        raise ValueError(f"Unsupported implementation option: {implementation}")
    scale = (1.0 / np.sqrt(H)) if scale is None else scale

    T, N = query.shape[1], query.shape[2]
    G = N // K
    query = jnp.reshape(query, (B, T, K, G, H))
    logits_dtype = jnp.promote_types(query.dtype, np.float32)
    logits = jnp.einsum("BTKGH,BSKH->BKGTS", query, key, preferred_element_type=logits_dtype)
    logits = logits * jnp.array(scale, dtype=logits.dtype)
    if bias is not None:
        logits = (logits + _grouped(bias, K, G)).astype(logits.dtype)
    padded = _attention_mask(logits, _grouped(mask, K, G), is_causal, query_seq_lengths,
                             key_value_seq_lengths, local_window_size)
    padded = padded.astype(np.float32)
    probs = softmax(padded, axis=-1).astype(key.dtype)
    encoded = jnp.einsum("BKGTS,BSKH->BTKGH", probs, value)
    if query_seq_lengths is not None:
        q_mask = jnp.arange(T)[None, :] < query_seq_lengths[:, None]
        encoded = encoded * q_mask[:, :, None, None, None].astype(encoded.dtype)
    out = jnp.reshape(encoded, output_shape)
    if not return_residual:
        return out
    lse = logsumexp(padded, axis=-1).astype(key.dtype)  # [B, K, G, T]
    lse = jnp.reshape(jnp.moveaxis(lse, -1, 1), (B, T, N))
    return out, stop_gradient(jnp.reshape(lse, output_shape[:-1]))

"""meshsim.random: JAX's PRNG API over threefry2x32 keys, bit for bit.

Every function accepts typed keys (`key(0)`) and raw uint32[2] keys
(`PRNGKey(0)`), as JAX does; key-producing functions return the same kind
they were given. Samplers are JAX's algorithms (`jax/_src/random/core.py`)
written with the same lax operations in the same order, so that the floats
round identically.
"""
from __future__ import annotations

import functools

from collections.abc import Sequence

import numpy as np

from meshsim._src import ad, api, core, prng
from meshsim._src.lax import elementwise as lax
from meshsim._src.lax import sorting as lax_sort
from meshsim._src.lax import structural as lax_shape
from meshsim._src.lax.structural import broadcast_to_rank, canonicalize_shape
from meshsim._src.numpy.promotion import broadcast_shapes, broadcast_to_shape
from meshsim._src.prng import PRNGKeyArray
from meshsim._src import dtype_kinds

__all__ = [
    "PRNGKeyArray", "key", "PRNGKey", "key_data", "wrap_key_data", "key_impl", "split", "fold_in",
    "bits", "uniform", "normal", "randint", "bernoulli", "truncated_normal", "gumbel", "permutation",
    "choice", "categorical", "exponential", "laplace", "logistic", "lognormal", "cauchy", "rademacher",
    "double_sided_maxwell", "maxwell", "pareto", "rayleigh", "weibull_min", "triangular", "geometric", "wald",
    "clone", "key_dtype",
]

_IMPL = "threefry2x32"


def _staged(static_argnums):
    """`fun` run under jit, as JAX runs each sampler's steps: XLA then contracts
    float32/float64 products into the sums reading them, and keeps bfloat16 steps
    in float32 between the ops it fuses, rounding only where a value leaves them."""
    def wrap(fun):
        staged = None

        @functools.wraps(fun)
        def call(*args):
            nonlocal staged
            if staged is None:
                from meshsim._src.api import jit
                staged = jit(fun, static_argnums=static_argnums)
            return staged(*args)
        return call
    return wrap


# -- keys


def _check_impl(impl):
    if impl is not None and impl != _IMPL and impl != prng.KEY_DTYPE:
        raise ValueError(f'unrecognized PRNG implementation "{impl}". Did you mean one of: "{_IMPL}"?')


def _arraylike(x) -> bool:
    return (core.is_value(x) or isinstance(x, (np.ndarray, np.generic)) or np.isscalar(x)
            or hasattr(x, "__jax_array__"))


def _check_prng_key(name: str, key, *, allow_batched: bool = False) -> tuple[PRNGKeyArray, bool]:
    """The typed key for `key`, and whether it came as raw uint32 key data."""
    if isinstance(key, PRNGKeyArray):
        typed, wrapped = key, False
    elif _arraylike(key):
        typed, wrapped = prng.random_wrap(key), True
    else:
        raise TypeError(f"unexpected PRNG key type {type(key)}")
    if not allow_batched and typed.ndim:
        raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                         f"{np.shape(key)} != (). Use jax.vmap for batching.")
    return typed, wrapped


def _return_keys(wrapped: bool, keys: PRNGKeyArray):
    return keys._base if wrapped else keys


def _seed_key(ctor_name: str, seed, impl) -> PRNGKeyArray:
    _check_impl(impl)
    if isinstance(seed, PRNGKeyArray):
        raise TypeError(f"{ctor_name} accepts a scalar seed, but was given a PRNG key.")
    if np.ndim(seed):
        raise TypeError(f"{ctor_name} accepts a scalar seed, but was given an array of shape "
                        f"{np.shape(seed)} != (). Use jax.vmap for batching")
    return prng.random_seed(seed)


def key(seed, *, impl=None) -> PRNGKeyArray:
    """A typed scalar key (dtype key<fry>) from an integer seed."""
    return _seed_key("key", seed, impl)


def PRNGKey(seed, *, impl=None):
    """A legacy raw key: uint32[2] key data."""
    return _seed_key("PRNGKey", seed, impl)._base


def key_data(keys):
    """The uint32[..., 2] data underlying key array `keys`."""
    return _check_prng_key("key_data", keys, allow_batched=True)[0]._base


def wrap_key_data(key_bits_array, *, impl=None) -> PRNGKeyArray:
    """Typed keys over uint32[..., 2] key data."""
    _check_impl(impl)
    return prng.random_wrap(key_bits_array)


def key_dtype(impl_spec=None):
    """The dtype of typed keys (key<fry>)."""
    _check_impl(impl_spec)
    return prng.KEY_DTYPE


def clone(key):
    """A copy of `key` (keys are immutable values here, so the key itself)."""
    return key


def key_impl(keys) -> str:
    _check_prng_key("key_impl", keys, allow_batched=True)
    return _IMPL


def split(key, num: int | Sequence[int] = 2):
    """`num` new keys (or an array of keys of shape `num`) derived from `key`."""
    typed, wrapped = _check_prng_key("split", key)
    shape = canonicalize_shape(tuple(num) if isinstance(num, Sequence) else (num,))
    return _return_keys(wrapped, prng.random_split(typed, shape))


def _as_uint32_scalar(data):
    """`data` as uint32, as jnp.asarray(data, dtype='uint32'): Python ints must fit."""
    if isinstance(data, int) and not isinstance(data, bool):
        if not 0 <= data < 2 ** 32:
            raise OverflowError(f"Python integer {data} out of bounds for uint32")
        data = np.uint32(data)
    return lax.convert_element_type(data, np.uint32)


def fold_in(key, data):
    """A new key from `key` and the 32-bit integer `data` (= split(key, n)[data])."""
    typed, wrapped = _check_prng_key("fold_in", key)
    if np.ndim(data):
        raise TypeError("fold_in accepts a scalar, but was given an array of shape "
                        f"{np.shape(data)} != (). Use jax.vmap for batching.")
    return _return_keys(wrapped, prng.random_fold_in(typed, _as_uint32_scalar(data)))


# -- samplers


def _user_dtype(dtype, default) -> np.dtype:
    return core.canonicalize_dtype(np.dtype(default if dtype is None else dtype))


def _check_shape(name: str, shape: tuple[int, ...], *param_shapes) -> None:
    if param_shapes:
        shape_ = broadcast_shapes(shape, *param_shapes)
        if shape != shape_:
            raise ValueError(f"{name} parameter shapes must be broadcast-compatible with shape "
                             "argument, and the result of broadcasting the shapes must equal the "
                             f"shape argument, but got result {shape_} for shape argument {shape}.")


def _uint_dtype(nbits: int) -> np.dtype:
    return np.dtype(f"uint{nbits}")


def bits(key, shape=(), dtype=None):
    """Uniform random bits as unsigned integers of `dtype` (default uint32)."""
    typed, _ = _check_prng_key("bits", key)
    dtype = _user_dtype(dtype, np.uint64)
    if not dtype_kinds.issubdtype(dtype, np.unsignedinteger):
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dtype}")
    return prng.random_bits(typed, dtype.itemsize * 8, canonicalize_shape(shape))


@_staged(static_argnums=(1, 2))
def _uniform(key: PRNGKeyArray, shape, dtype, minval, maxval):
    """Floats in [minval, maxval): random mantissa bits under the exponent of 1.0,
    minus 1, scaled; the max() guards against rounding below minval."""
    finfo = dtype_kinds.finfo(dtype)
    nbits, nmant = finfo.bits, finfo.nmant
    minval, maxval = lax.convert_element_type(minval, dtype), lax.convert_element_type(maxval, dtype)
    minval, maxval = broadcast_to_rank(minval, len(shape)), broadcast_to_rank(maxval, len(shape))
    uint = _uint_dtype(nbits)
    # Formats with fewer than 8 mantissa bits (bfloat16, float8) draw 8 random bits, as JAX does.
    rng_bits = 8 if nmant < 8 else nbits
    random = prng.random_bits(key, rng_bits, shape)
    if rng_bits != nbits:
        random = lax.convert_element_type(random, uint)
    float_bits = lax.shift_right_logical(random, np.array(rng_bits - nmant, uint))
    float_bits = lax.bitwise_or(float_bits, np.array(1.0, dtype).view(uint))
    floats = lax.sub(lax.bitcast_convert_type(float_bits, dtype), np.array(1.0, dtype))
    return lax.max(minval, lax.add(lax.mul(floats, lax.sub(maxval, minval)), minval))


def _float_dtype(name: str, dtype) -> np.dtype:
    dtype = _user_dtype(dtype, np.float64)
    if not dtype_kinds.issubdtype(dtype, np.floating):
        raise ValueError(f"dtype argument to `{name}` must be a float dtype, got {dtype}")
    return dtype


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in [minval, maxval)."""
    typed, _ = _check_prng_key("uniform", key)
    dtype = _float_dtype("uniform", dtype)
    return _uniform(typed, canonicalize_shape(shape), dtype, minval, maxval)


@_staged(static_argnums=(1, 2))
def _normal(key: PRNGKeyArray, shape, dtype):
    return _normal_real(key, shape, dtype)


@_staged(static_argnums=(1, 2))
def _normal_real(key: PRNGKeyArray, shape, dtype):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = _uniform(key, shape, dtype, lo, np.array(1.0, dtype))
    return lax.mul(np.array(np.sqrt(2), dtype), lax.erf_inv(u))


def normal(key, shape=(), dtype=None):
    """Standard normal floats: sqrt(2) * erf_inv(u), u uniform in (-1, 1)."""
    typed, _ = _check_prng_key("normal", key)
    dtype = _user_dtype(dtype, np.float64)
    if not dtype_kinds.issubdtype(dtype, np.floating):
        raise ValueError(f"dtype argument to `normal` must be a float or complex dtype, got {dtype}")
    return _normal(typed, canonicalize_shape(shape), dtype)


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal floats conditioned on the open interval (lower, upper)."""
    if shape is not None:
        shape = canonicalize_shape(shape)
    typed, _ = _check_prng_key("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    if shape is None:
        shape = broadcast_shapes(np.shape(lower), np.shape(upper))
    else:
        _check_shape("truncated_normal", shape, np.shape(lower), np.shape(upper))
    return _truncated_normal(typed, lower, upper, shape, dtype)


@_staged(static_argnums=(3, 4))
def _truncated_normal(key, lower, upper, shape, dtype):
    sqrt2 = np.array(np.sqrt(2), dtype)
    lower = lax.convert_element_type(lower, dtype)
    upper = lax.convert_element_type(upper, dtype)
    a = lax.erf(lax.div(lower, sqrt2))
    b = lax.erf(lax.div(upper, sqrt2))
    out = lax.mul(sqrt2, lax.erf_inv(_uniform(key, shape, dtype, a, b)))
    # Rounding (or u == a) could land on a bound: clamp into the open interval. The clamp
    # is not differentiated through the bounds (nextafter has no derivative), as in JAX.
    lo = broadcast_to_rank(lax.nextafter(ad.stop_gradient(lower), np.array(np.inf, dtype)), len(shape))
    hi = broadcast_to_rank(lax.nextafter(ad.stop_gradient(upper), np.array(-np.inf, dtype)), len(shape))
    return lax.min(lax.max(out, lo), hi)


def _convert_and_clip_integer(val, dtype: np.dtype):
    """`val` in integer `dtype`, saturating at its bounds instead of wrapping."""
    src, dst = np.iinfo(val.dtype), np.iinfo(dtype)
    lo = np.array(max(src.min, dst.min), val.dtype)
    hi = np.array(min(src.max, dst.max), val.dtype)
    return lax.convert_element_type(lax.min(lax.max(val, lo), hi), dtype)


def _check_arraylike(name: str, *args):
    for i, a in enumerate(args):
        if not _arraylike(a):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(a)} at position {i}.")


def _as_integer_array(x):
    x = core.asarray_value(x)
    return x if dtype_kinds.issubdtype(x.dtype, np.integer) else lax.convert_element_type(x, np.int32)


def _randint(key: PRNGKeyArray, shape, minval, maxval, dtype):
    """JAX's randint: (2 * nbits random bits) mod span, offset by minval."""
    _check_shape("randint", shape, np.shape(minval), np.shape(maxval))
    _check_arraylike("randint", minval, maxval)
    minval = broadcast_to_rank(_as_integer_array(minval), len(shape))
    maxval = broadcast_to_rank(_as_integer_array(maxval), len(shape))
    # maxval past dtype's max (randint(k, s, 0, 256, uint8)) widens the span by one.
    dtype_max = _convert_and_clip_integer(core.asarray_value(np.array(np.iinfo(dtype).max, dtype)),
                                          maxval.dtype)
    maxval_out_of_range = lax.gt(maxval, dtype_max)
    minval = _convert_and_clip_integer(minval, dtype)
    maxval = _convert_and_clip_integer(maxval, dtype)
    nbits = np.iinfo(dtype).bits
    k1, k2 = prng.random_split(key, (2,))
    higher_bits = prng.random_bits(k1, nbits, shape)
    lower_bits = prng.random_bits(k2, nbits, shape)

    unsigned = _uint_dtype(nbits)
    span = lax.convert_element_type(lax.sub(maxval, minval), unsigned)
    span = lax.select(lax.le(maxval, minval), lax_shape.full_like(span, 1), span)  # empty range: minval
    span = lax.select(lax.bitwise_and(maxval_out_of_range, lax.gt(maxval, minval)),
                      lax.add(span, np.array(1, unsigned)), span)
    # (hi * 2**nbits + lo) mod span, with 2**nbits mod span computed without overflow.
    multiplier = lax.rem(np.array(2 ** (nbits // 2), unsigned), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(higher_bits, span), multiplier), lax.rem(lower_bits, span))
    offset = lax.rem(offset, span)
    return lax.add(minval, lax.convert_element_type(offset, dtype))


def randint(key, shape, minval, maxval, dtype=None):
    """Uniform integers in [minval, maxval) (modulo-biased when the span is not a power of 2)."""
    typed, _ = _check_prng_key("randint", key)
    dtype = _user_dtype(dtype, np.int64)
    shape = canonicalize_shape(shape)
    if not dtype_kinds.issubdtype(dtype, np.integer):
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    info = np.iinfo(dtype)
    sampling_dtype = dtype
    if info.bits < 32:  # sample narrow types in 32 bits to keep the bias small
        sampling_dtype = np.dtype(np.int32)
        minval = _clip_int32(minval, info.min, info.max)
        maxval = _clip_int32(maxval, info.min, info.max + 1)
    return lax.convert_element_type(_randint(typed, shape, minval, maxval, sampling_dtype), dtype)


def _clip_int32(x, lo: int, hi: int):
    x = lax.convert_element_type(core.asarray_value(x), np.int32)
    return lax.min(lax.max(x, np.int32(lo)), np.int32(hi))


def bernoulli(key, p=0.5, shape=None, mode: str = "low"):
    """Booleans that are True with probability p."""
    if shape is not None:
        shape = canonicalize_shape(shape)
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    typed, _ = _check_prng_key("bernoulli", key)
    p = core.asarray_value(p)
    if not dtype_kinds.issubdtype(p.dtype, np.floating):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {p.dtype}.")
    if shape is None:
        shape = tuple(p.shape)
    else:
        _check_shape("bernoulli", shape, np.shape(p))
    p = broadcast_to_rank(p, len(shape))
    if mode == "low":
        return lax.lt(_uniform(typed, shape, p.dtype, 0.0, 1.0), p)
    # Two uniforms: the second refines the first below its 2**-nmant resolution.
    u = _uniform(typed, (2, *shape), p.dtype, 0.0, 1.0)
    u1, u2 = (lax_shape.index_in_dim(u, i, keepdims=False) for i in range(2))
    u2 = lax.mul(u2, np.array(2.0 ** -dtype_kinds.finfo(p.dtype).nmant, p.dtype))
    return lax.lt(u2, lax.sub(p, u1))


def gumbel(key, shape=(), dtype=None, mode: str | None = None):
    """Standard Gumbel floats: -log(-log(u)) with u uniform in (0, 1)."""
    typed, _ = _check_prng_key("gumbel", key)
    dtype = _float_dtype("gumbel", dtype)
    shape = canonicalize_shape(shape)
    mode = "low" if mode is None else mode
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    if mode == "highest":
        raise NotImplementedError("gumbel(mode='highest') is not implemented; use 'high'")
    return _gumbel(typed, shape, dtype, mode)


@_staged(static_argnums=(1, 2, 3))
def _gumbel(key, shape, dtype, mode):
    finfo = dtype_kinds.finfo(dtype)
    if mode == "low":
        u = _uniform(key, shape, dtype, finfo.tiny, 1.0)
        return lax.neg(lax.log(lax.neg(lax.log(u))))
    # "high": a second uniform fills in the bits below the first's resolution
    # where u < 0.5, so -log1p(-u) resolves logits up to ~32 instead of ~16.
    u = _uniform(key, (2, *shape), dtype, 0.0, 1.0)
    high, low = (lax_shape.index_in_dim(u, i, keepdims=False) for i in range(2))
    refined = lax.add(lax.add(high, lax.mul(np.array(2.0 ** -finfo.nmant, dtype), low)),
                      np.array(finfo.tiny, dtype))
    x = lax.select(lax.ge(high, np.array(0.5, dtype)), high, refined)
    return lax.neg(lax.log(lax.neg(lax.log1p(lax.neg(x)))))


def _jnp():
    from meshsim._src.numpy import namespace as jnp
    return jnp


def _shuffle(key: PRNGKeyArray, x, axis: int):
    """JAX's shuffle: sort by fresh random uint32 keys, over enough rounds that
    key collisions (which would bias the order) become negligible."""
    exponent = 3  # tjablin@'s heuristic stop criterion, as in JAX
    num_rounds = int(np.ceil(exponent * np.log(max(1, x.size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(num_rounds):
        key, subkey = prng.random_split(key, (2,))
        sort_keys = prng.random_bits(subkey, 32, tuple(x.shape))
        _, x = lax_sort.sort_key_val(sort_keys, x, axis)
    return x


def permutation(key, x, axis: int = 0, independent: bool = False):
    """A shuffled copy of `x` along `axis`, or a permutation of range(x) for an int."""
    typed, _ = _check_prng_key("permutation", key)
    _check_arraylike("permutation", x)
    axis = lax_shape.canonicalize_axis(axis, np.ndim(x) or 1)
    if not np.ndim(x):
        if not dtype_kinds.issubdtype(core.asarray_value(x).dtype, np.integer):
            raise TypeError("x must be an integer or at least 1-dimensional")
        return _shuffle(typed, lax_shape.iota(np.int32, int(x)), axis)
    x = core.asarray_value(x)
    if independent or x.ndim == 1:
        return _shuffle(typed, x, axis)
    ind = _shuffle(typed, lax_shape.iota(np.int32, x.shape[axis]), 0)
    return _jnp().take(x, ind, axis, unique_indices=True)


def choice(key, a, shape: Sequence[int] = (), replace: bool = True, p=None, axis: int = 0,
           mode: str | None = None):
    """Samples of `a` (or of range(a)) along `axis`, uniformly or with probabilities `p`."""
    jnp = _jnp()
    typed, _ = _check_prng_key("choice", key)
    if not isinstance(shape, Sequence):
        raise TypeError(f"shape argument of jax.random.choice must be a sequence, got {shape}")
    _check_arraylike("choice", a)
    arr = core.asarray_value(a)
    if arr.ndim == 0:
        n_inputs = int(a)
    else:
        axis = lax_shape.canonicalize_axis(axis, arr.ndim)
        n_inputs = arr.shape[axis]
    shape = canonicalize_shape(shape)
    n_draws = int(np.prod(shape))
    if n_draws == 0:
        return jnp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population "
                         f"(size {n_inputs}) when 'replace=False'")
    if p is None and replace:
        ind = randint(typed, shape, 0, n_inputs)
    elif p is None:
        perm = permutation(typed, n_inputs if arr.ndim == 0 else arr, axis)
        result = lax_shape.slice_in_dim(perm, 0, n_draws, axis=axis)
        return lax_shape.reshape(result, _choice_shape(arr, shape, axis))
    else:
        _check_arraylike("choice", p)
        p_arr = core.asarray_value(p)
        if not dtype_kinds.issubdtype(p_arr.dtype, np.floating):
            p_arr = lax.convert_element_type(p_arr, core.canonicalize_dtype(np.float64))
        if p_arr.shape != (n_inputs,):
            raise ValueError("p must be None or a 1D vector with the same size as a.shape[axis]. "
                             f"p has shape {p_arr.shape} and a.shape[axis] is {n_inputs}.")
        if replace:  # inverse CDF
            p_cuml = jnp.cumsum(p_arr)
            total = lax_shape.index_in_dim(p_cuml, n_inputs - 1, keepdims=False)
            r = lax.mul(total, lax.sub(np.array(1, p_arr.dtype), _uniform(typed, shape, p_arr.dtype, 0.0, 1.0)))
            ind = lax.convert_element_type(jnp.searchsorted(p_cuml, r), np.int32)
        else:  # Gumbel top-k
            g = lax.add(gumbel(typed, (n_inputs,), p_arr.dtype, mode=mode), lax.log(p_arr))
            ind = lax.convert_element_type(lax_sort.top_k(g, n_draws)[1], np.int32)
    result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis)
    return lax_shape.reshape(result, _choice_shape(arr, shape, axis))


def _choice_shape(arr, shape, axis):
    return shape if arr.ndim == 0 else arr.shape[:axis] + tuple(shape) + arr.shape[axis + 1:]


def categorical(key, logits, axis: int = -1, shape=None, replace: bool = True, mode: str | None = None):
    """Category indices sampled from softmax(logits) along `axis` (Gumbel-max / top-k trick)."""
    jnp = _jnp()
    typed, _ = _check_prng_key("categorical", key)
    _check_arraylike("categorical", logits)
    logits = core.asarray_value(logits)
    batch_shape = tuple(np.delete(logits.shape, axis))
    if shape is None:
        shape = batch_shape
    else:
        shape = canonicalize_shape(shape)
        _check_shape("categorical", shape, batch_shape)
    shape_prefix = shape[:len(shape) - len(batch_shape)]
    if replace:
        if axis >= 0:
            axis -= logits.ndim
        logits_shape = list(shape[len(shape) - len(batch_shape):])
        logits_shape.insert(axis % logits.ndim, logits.shape[axis])
        g = gumbel(typed, (*shape_prefix, *logits_shape), logits.dtype, mode=mode)
        expanded = lax_shape.expand_dims(logits, tuple(range(len(shape_prefix))))
        return jnp.argmax(lax.add(g, expanded), axis=axis)
    logits = lax.add(logits, gumbel(typed, logits.shape, logits.dtype, mode=mode))
    k = int(np.prod(shape_prefix))
    if k > logits.shape[axis]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number of "
                         f"categories ({logits.shape[axis]}).")
    _, indices = lax_sort.top_k(jnp.moveaxis(logits, axis, -1), k)
    return lax_shape.reshape(indices, shape, (indices.ndim - 1, *range(indices.ndim - 1)))


# -- samplers built on uniform and normal, as JAX builds them


def _check_broadcast_shapes(name: str, shape, *args) -> tuple[int, ...]:
    arg_shapes = [np.shape(a) for a in args]
    if shape is None:
        return broadcast_shapes(*arg_shapes) if arg_shapes else ()
    shape = canonicalize_shape(shape)
    _check_shape(name, shape, *arg_shapes)
    return shape


def _check_all_safe_to_cast(name: str, dtype: np.dtype, *args) -> None:
    from meshsim._src.numpy.dtypes import TypePromotionError, result_type
    for arg in args:
        arg_dtype = core.asarray_value(arg).dtype
        if arg_dtype != dtype and result_type(arg, dtype) != dtype:
            raise TypePromotionError(f"In arguments to {name}, cannot safely cast argument of type "
                                     f"{arg_dtype} to {dtype}")


def _float_sampler_args(name: str, key, shape, dtype):
    typed, _ = _check_prng_key(name, key)
    dtype = _float_dtype(name, dtype)
    return typed, (None if shape is None else canonicalize_shape(shape)), dtype


def _param(x, dtype, shape):
    return broadcast_to_shape(lax.convert_element_type(x, dtype), shape)


def exponential(key, shape=(), dtype=None):
    """Standard exponential floats: -log1p(-u)."""
    return _exponential(*_float_sampler_args("exponential", key, shape, dtype))


@_staged(static_argnums=(1, 2))
def _exponential(key, shape, dtype):
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    return lax.neg(lax.log1p(lax.neg(u)))  # 1 - u is in (0, 1]: log is finite


def laplace(key, shape=(), dtype=None):
    """Standard Laplace floats: sign(u) * log1p(-|u|), u uniform in (-1, 1)."""
    return _laplace(*_float_sampler_args("laplace", key, shape, dtype))


@_staged(static_argnums=(1, 2))
def _laplace(key, shape, dtype):
    u = _uniform(key, shape, dtype, -1. + dtype_kinds.finfo(dtype).epsneg, 1.)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def logistic(key, shape=(), dtype=None):
    """Standard logistic floats: log(u) - log1p(-u)."""
    return _logistic(*_float_sampler_args("logistic", key, shape, dtype))


@_staged(static_argnums=(1, 2))
def _logistic(key, shape, dtype):
    x = _uniform(key, shape, dtype, dtype_kinds.finfo(dtype).tiny, 1.)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def lognormal(key, sigma=np.float32(1), shape=None, dtype=None):
    """exp(sigma * standard normal)."""
    typed, _ = _check_prng_key("lognormal", key)
    dtype = _user_dtype(dtype, np.float64)
    if not dtype_kinds.issubdtype(dtype, np.inexact):
        raise ValueError(f"dtype argument to `lognormal` must be a float or complex dtype, got {dtype}")
    shape = _check_broadcast_shapes("lognormal", shape, sigma)
    _check_all_safe_to_cast("lognormal", dtype, sigma)
    return _lognormal(typed, sigma, shape, dtype)


@_staged(static_argnums=(2, 3))
def _lognormal(key, sigma, shape, dtype):
    return lax.exp(lax.mul(_normal(key, shape, dtype), _param(sigma, dtype, shape)))


def cauchy(key, shape=(), dtype=None):
    """Standard Cauchy floats: tan(pi * (u - 1/2))."""
    return _cauchy(*_float_sampler_args("cauchy", key, shape, dtype))


@_staged(static_argnums=(1, 2))
def _cauchy(key, shape, dtype):
    u = _uniform(key, shape, dtype, dtype_kinds.finfo(dtype).eps, 1.)
    return lax.tan(lax.mul(np.array(np.pi, dtype), lax.sub(u, np.array(0.5, dtype))))


def rademacher(key, shape=(), dtype=None):
    """-1 or 1 with equal probability, in `dtype` (default int)."""
    jnp = _jnp()
    _check_prng_key("rademacher", key)
    dtype = _user_dtype(dtype, np.int64)
    samples = bernoulli(key, 0.5, canonicalize_shape(shape)).astype(dtype)
    return (2 * samples - 1).astype(dtype)


def maxwell(key, shape=(), dtype=None):
    """Maxwell floats: the norm of three standard normals."""
    typed, shape, dtype = _float_sampler_args("maxwell", key, shape, dtype)
    return _maxwell(typed, shape, dtype)


@_staged(static_argnums=(1, 2))
def _maxwell(key, shape, dtype):
    x = _normal(key, (*shape, 3), dtype)
    return lax.sqrt(_jnp().sum(lax.mul(x, x), axis=-1))


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """Maxwell floats with a random sign, times scale, plus loc."""
    typed, shape, dtype = _float_sampler_args("double_sided_maxwell", key, shape, dtype)
    return _double_sided_maxwell(typed, loc, scale, shape, dtype)


@_staged(static_argnums=(3, 4))
def _double_sided_maxwell(key, loc, scale, shape, dtype):
    params_shape = broadcast_shapes(np.shape(loc), np.shape(scale))
    shape = (shape or params_shape) + params_shape  # as JAX: parameters' dims are appended
    maxwell_key, rademacher_key = prng.random_split(key, (2,))
    rvs = maxwell(maxwell_key, shape, dtype)
    sign = rademacher(rademacher_key, shape, dtype)
    return sign * rvs * scale + loc


def pareto(key, b, shape=None, dtype=None):
    """Pareto floats of shape `b`: exp(exponential / b)."""
    typed, _, dtype = _float_sampler_args("pareto", key, (), dtype)
    shape = _check_broadcast_shapes("pareto", shape, b)
    _check_all_safe_to_cast("pareto", dtype, b)
    return _pareto(typed, b, shape, dtype)


@_staged(static_argnums=(2, 3))
def _pareto(key, b, shape, dtype):
    e = _exponential(key, shape, dtype)
    return lax.exp(lax.div(e, _param(b, dtype, shape)))


def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh floats: scale * sqrt(-2 log u)."""
    typed, _, dtype = _float_sampler_args("rayleigh", key, (), dtype)
    shape = _check_broadcast_shapes("rayleigh", shape, scale)
    _check_all_safe_to_cast("rayleigh", dtype, scale)
    return _rayleigh(typed, scale, shape, dtype)


@_staged(static_argnums=(2, 3))
def _rayleigh(key, scale, shape, dtype):
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    return lax.mul(_param(scale, dtype, shape), lax.sqrt(lax.mul(lax.log(u), np.array(-2, dtype))))


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull floats by the inverse CDF: (-log1p(-u)) ** (1 / concentration) * scale."""
    typed, shape, dtype = _float_sampler_args("weibull_min", key, shape, dtype)
    return _weibull_min(typed, scale, concentration, shape, dtype)


@_staged(static_argnums=(3, 4))
def _weibull_min(key, scale, concentration, shape, dtype):
    jnp = _jnp()
    u = _uniform(key, shape, dtype, 0, 1)
    return jnp.power(-jnp.log1p(-u), 1.0 / jnp.asarray(concentration)) * scale


def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular floats on [left, right] peaking at mode, by the inverse CDF."""
    typed, _, dtype = _float_sampler_args("triangular", key, (), dtype)
    shape = _check_broadcast_shapes("triangular", shape, left, mode, right)
    _check_all_safe_to_cast("triangular", dtype, left, mode, right)
    return _triangular(typed, left, mode, right, shape, dtype)


@_staged(static_argnums=(4, 5))
def _triangular(key, left, mode, right, shape, dtype):
    left, mode, right = (_param(v, dtype, shape) for v in (left, mode, right))
    fc = lax.div(lax.sub(mode, left), lax.sub(right, left))
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    out1 = lax.add(left, lax.sqrt(lax.mul(lax.mul(u, lax.sub(right, left)), lax.sub(mode, left))))
    one_minus_u = lax.sub(np.array(1, dtype), u)
    out2 = lax.sub(right, lax.sqrt(lax.mul(lax.mul(one_minus_u, lax.sub(right, left)), lax.sub(right, mode))))
    return lax.select(lax.lt(u, fc), out1, out2)


def geometric(key, p, shape=None, dtype=None):
    """Geometric integers (trials until the first success, >= 1): floor(log u / log1p(-p)) + 1."""
    from meshsim._src.numpy.promotion import promote_args_inexact
    typed, _ = _check_prng_key("geometric", key)
    dtype = _user_dtype(dtype, np.int64)
    if not dtype_kinds.issubdtype(dtype, np.integer):
        raise ValueError(f"dtype argument to `geometric` must be an int dtype, got {dtype}")
    shape = _check_broadcast_shapes("geometric", shape, p)
    _check_arraylike("geometric", p)
    (p,) = promote_args_inexact(p)
    u = _uniform(typed, shape, p.dtype, 0.0, 1.0)
    u = lax.select(lax.eq(u, np.array(0, u.dtype)), lax_shape.full_like(u, 1), u)  # as JAX: no log(0)
    log_one_minus_p = broadcast_to_shape(lax.log1p(lax.neg(p)), shape)
    g = lax.add(lax.floor(lax.div(lax.log(u), log_one_minus_p)), np.array(1, p.dtype))
    return lax.convert_element_type(g, dtype)


def wald(key, mean, shape=None, dtype=None):
    """Wald (inverse Gaussian) floats by Michael, Schucany and Haas' transformation."""
    typed, _, dtype = _float_sampler_args("wald", key, (), dtype)
    shape = _check_broadcast_shapes("wald", shape, mean)
    _check_all_safe_to_cast("wald", dtype, mean)
    return _wald(typed, mean, shape, dtype)


@_staged(static_argnums=(2, 3))
def _wald(key, mean, shape, dtype):
    k1, k2 = prng.random_split(key, (2,))
    mean = _param(mean, dtype, shape)
    v = _normal(k1, shape, dtype)
    z = _uniform(k2, shape, dtype, 0.0, 1.0)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    four, two = np.array(4, dtype), np.array(2, dtype)
    sqrt_term = lax.sqrt(lax.add(lax.mul(lax.mul(four, mean), y), lax.mul(mean_sq, y_sq)))
    x = lax.sub(lax.add(mean, lax.div(lax.mul(mean_sq, y), two)), lax.mul(lax.div(mean, two), sqrt_term))
    return lax.select(lax.le(z, lax.div(mean, lax.add(mean, x))), x, lax.div(mean_sq, x))


def _with_out_sharding(sampler):
    """`sampler` taking `out_sharding=`: the same values (JAX draws them as if
    unsharded), laid out as asked (a local slice of a replicated draw)."""
    @functools.wraps(sampler)
    def wrapped(*args, out_sharding=None, **kwargs):
        from meshsim._src.sharding.explicit import with_out_sharding
        if out_sharding is not None:  # checked before drawing, as JAX does
            from meshsim._src.sharding.explicit import check_explicit_axes
            check_explicit_axes(out_sharding, sampler.__name__)
        return with_out_sharding(sampler(*args, **kwargs), out_sharding)
    return wrapped


bits = _with_out_sharding(bits)
uniform = _with_out_sharding(uniform)
normal = _with_out_sharding(normal)
truncated_normal = _with_out_sharding(truncated_normal)
randint = _with_out_sharding(randint)
bernoulli = _with_out_sharding(bernoulli)
gumbel = _with_out_sharding(gumbel)
categorical = _with_out_sharding(categorical)
exponential = _with_out_sharding(exponential)
laplace = _with_out_sharding(laplace)
logistic = _with_out_sharding(logistic)
lognormal = _with_out_sharding(lognormal)
cauchy = _with_out_sharding(cauchy)
rademacher = _with_out_sharding(rademacher)
maxwell = _with_out_sharding(maxwell)
pareto = _with_out_sharding(pareto)
rayleigh = _with_out_sharding(rayleigh)
triangular = _with_out_sharding(triangular)
geometric = _with_out_sharding(geometric)
wald = _with_out_sharding(wald)

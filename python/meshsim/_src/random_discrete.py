"""jax.random's counting samplers and those built on gamma, drawn as JAX
draws them so the same key gives JAX's values: `poisson` (Knuth's product of
uniforms below rate 10, Hörmann's transformed rejection above, both run on
the same key and selected per element), `binomial` (geometric-sum inversion
when n*min(p, 1-p) <= 10, Kachitvichyanukul and Schmeiser's BTRS otherwise),
`multinomial` (a scan of conditional binomials over the categories),
`generalized_normal` and `ball`."""
from __future__ import annotations

import operator

import numpy as np

from meshsim._src import dtype_kinds
from meshsim._src import random as _random
from meshsim._src.random import (_check_prng_key, _check_shape, _float_dtype, _staged, _user_dtype,
                                 _with_out_sharding)

__all__ = ["poisson", "binomial", "multinomial", "generalized_normal", "ball"]


def _modules():
    from meshsim._src.lax import namespace as lax
    from meshsim._src.numpy import namespace as jnp
    return lax, jnp


def _check_arraylike(name: str, *args):
    for i, a in enumerate(args):
        if isinstance(a, (list, tuple)):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(a)} at position {i}.")


# ---- poisson --------------------------------------------------------------------

def _poisson_knuth(key, lam, shape, dtype, max_iters):
    """Counts uniforms until their product falls below exp(-lam)."""
    lax, jnp = _modules()

    def body(state):
        i, k, rng, log_prod = state
        rng, sub = _random.split(rng)
        k = lax.select(log_prod > -lam, k + 1, k)
        return i + 1, k, rng, log_prod + jnp.log(_random.uniform(sub, shape, np.float32))

    def cond(state):
        i, _, _, log_prod = state
        return (log_prod > -lam).any() & (i < max_iters)

    init = (jnp.int32(0), jnp.zeros(shape, dtype), key, jnp.zeros(shape, np.float32))
    return (lax.while_loop(cond, body, init)[1] - 1).astype(dtype)


def _poisson_rejection(key, lam, shape, dtype, max_iters):
    """Hörmann's PTRS: transformed rejection with squeeze."""
    lax, jnp = _modules()
    log_lam = jnp.log(lam)
    b = 0.931 + 2.53 * jnp.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(state):
        i, k_out, accepted, rng = state
        rng, sub0, sub1 = _random.split(rng, 3)
        u = _random.uniform(sub0, shape, lam.dtype) - 0.5
        v = _random.uniform(sub1, shape, lam.dtype)
        u_shifted = 0.5 - abs(u)
        k = jnp.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = jnp.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_lam - lax.lgamma(k + 1)
        accept_fast = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept = accept_fast | (~reject & (s <= t))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, rng

    def cond(state):
        i, _, accepted, _ = state
        return (~accepted).any() & (i < max_iters)

    init = (jnp.int32(0), jnp.full(shape, -1, lam.dtype), jnp.zeros(shape, bool), key)
    return lax.while_loop(cond, body, init)[1].astype(dtype)


def poisson(key, lam, shape=None, dtype=None):
    """Poisson(lam) integers."""
    lax, jnp = _modules()
    typed, _ = _check_prng_key("poisson", key)
    dtype = _user_dtype(dtype, np.int64)
    if not dtype_kinds.issubdtype(dtype, np.integer):
        raise ValueError(f"Invalid integer data type '{dtype.char}'.")
    shape = np.shape(lam) if shape is None else tuple(int(s) for s in shape)
    lam = lax.convert_element_type(jnp.broadcast_to(lam, shape), np.float32)
    max_iters = jnp.asarray(np.iinfo(dtype).max, dtype)
    small = jnp.isnan(lam) | (lam < 10)
    knuth = _poisson_knuth(typed, lax.select(small, lam, jnp.zeros_like(lam)), shape, dtype, max_iters)
    rejection = _poisson_rejection(typed, lax.select(small, jnp.full_like(lam, 100000.0), lam), shape, dtype,
                                   max_iters)
    result = lax.select(small, knuth, rejection)
    return lax.select(lam == 0, jnp.zeros_like(result), result)


# ---- binomial -------------------------------------------------------------------

_STIRLING_TAIL = [0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                  0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.010411265261972,
                  0.00925546218271273, 0.00833056343336287]


def _stirling_tail(k):
    """log(k!) minus Stirling's approximation: tabulated below 10, a series above."""
    lax, jnp = _modules()
    table = jnp.array(_STIRLING_TAIL, dtype=k.dtype)
    tabulated = k <= 9
    k = lax.clamp(jnp.asarray(0.0, k.dtype), k, jnp.asarray(9.0, k.dtype))
    kp1sq = (k + 1) * (k + 1)
    series = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    return lax.select(tabulated, table[jnp.asarray(jnp.floor(k), dtype="int32")], series)


def _binomial_inversion(key, count, prob, shape, dtype, max_iters):
    """Counts geometric waiting times until their sum passes n."""
    lax, jnp = _modules()
    # log1p(-0) must be -0 (so a certain event's waiting time is +inf, ending the loop).
    log1m_prob = lax.select(prob == 0, -prob, jnp.log1p(-prob))

    def body(state):
        i, num_geom, geom_sum, rng = state
        sub, rng = _random.split(rng)
        num_geom = lax.select(geom_sum <= count, num_geom + 1, num_geom)
        u = _random.uniform(sub, shape, prob.dtype)
        return i + 1, num_geom, geom_sum + jnp.ceil(jnp.log(u) / log1m_prob), rng

    def cond(state):
        i, _, geom_sum, _ = state
        return (geom_sum <= count).any() & (i < max_iters)

    init = (jnp.int32(0), jnp.zeros(shape, prob.dtype), jnp.zeros(shape, prob.dtype), key)
    return (lax.while_loop(cond, body, init)[1] - 1).astype(dtype)


def _btrs(key, count, prob, shape, dtype, max_iters):
    """Kachitvichyanukul and Schmeiser's transformed rejection with squeeze."""
    lax, jnp = _modules()
    stddev = jnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = jnp.floor((count + 1) * prob)

    def body(state):
        i, k_out, accepted, rng = state
        rng, sub0, sub1 = _random.split(rng, 3)
        u = _random.uniform(sub0, shape, prob.dtype) - 0.5
        v = _random.uniform(sub1, shape, prob.dtype)
        us = 0.5 - jnp.abs(u)
        accept_fast = (us >= 0.07) & (v <= v_r)
        k = jnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = jnp.log(v * alpha / (a / (us * us) + b))
        bound = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1)))
                 + (count + 1) * jnp.log((count - m + 1) / (count - k + 1))
                 + (k + 0.5) * jnp.log(r * (count - k + 1) / (k + 1))
                 + _stirling_tail(m) + _stirling_tail(count - m) - _stirling_tail(k) - _stirling_tail(count - k))
        accept = accept_fast | (~reject & (v <= bound))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, rng

    def cond(state):
        i, _, accepted, _ = state
        return (~accepted).any() & (i < max_iters)

    init = (jnp.int32(0), jnp.full(shape, -1, prob.dtype), jnp.zeros(shape, bool), key)
    return lax.while_loop(cond, body, init)[1].astype(dtype)


def _binomial(key, count, prob, shape, dtype):
    lax, jnp = _modules()
    from meshsim._src.numpy.promotion import promote_dtypes_inexact
    if shape is None:
        shape = jnp.broadcast_shapes(np.shape(count), np.shape(prob))
    else:
        _check_shape("binomial", shape, np.shape(count), np.shape(prob))
    prob, = promote_dtypes_inexact(prob)
    count = jnp.broadcast_to(lax.convert_element_type(count, prob.dtype), shape)
    prob = jnp.broadcast_to(prob, shape)
    below_half = prob < 0.5
    q = lax.select(below_half, prob, 1.0 - prob)
    count_bad = jnp.isnan(count) | (count < 0.0)
    count_inf = jnp.isinf(count)
    q_nan, q_negative = jnp.isnan(q), q < 0.0
    q = lax.select(q_nan | q_negative, jnp.full_like(q, 0.01), q)
    use_inversion = count_bad | (count * q <= 10.0)
    count = jnp.floor(count)
    count_inv = lax.select(use_inversion, count, jnp.full_like(count, 0.0))
    count_btrs = lax.select(use_inversion, jnp.full_like(count, 10000.0), count)
    q_btrs = lax.select(use_inversion, jnp.full_like(q, 0.5), q)
    max_iters = jnp.asarray(dtype_kinds.finfo(dtype).max, dtype)
    samples = lax.select(use_inversion, _binomial_inversion(key, count_inv, q, shape, dtype, max_iters),
                         _btrs(key, count_btrs, q_btrs, shape, dtype, max_iters))
    invalid = q_negative | q_nan | count_bad
    samples = lax.select(invalid, jnp.full_like(samples, np.nan, dtype), samples)
    samples = lax.select(count_inf & ~invalid, jnp.full_like(samples, np.inf, dtype), samples)
    return lax.select(below_half | count_bad | q_nan | count_inf, samples, count.astype(dtype) - samples)


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial(n, p) counts as floats."""
    typed, _ = _check_prng_key("binomial", key)
    _check_arraylike("binomial", n, p)
    dtype = _user_dtype(dtype, np.float64)
    if not dtype_kinds.issubdtype(dtype, np.floating):
        raise ValueError(f"dtype argument to `binomial` must be a float dtype, got {dtype}")
    if shape is not None:
        shape = tuple(int(s) for s in shape)
    return _binomial(typed, n, p, shape, dtype)


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    """Counts of n draws over the categories of p's last axis: for each
    category in turn, a binomial of what remains with the conditional
    probability of that category."""
    lax, jnp = _modules()
    from meshsim._src.numpy.promotion import promote_dtypes_inexact
    typed, _ = _check_prng_key("multinomial", key)
    _check_arraylike("multinomial", n, p)
    n, p = promote_dtypes_inexact(n, p)
    if shape is None:
        shape = p.shape
    n = jnp.broadcast_to(n, shape[:-1])
    p = jnp.moveaxis(jnp.broadcast_to(p, shape), -1, 0)
    remaining = lax.cumsum(p, 0, reverse=True)
    ratios = p / jnp.where(remaining == 0, 1, remaining)
    keys = _random.split(typed, ratios.shape[0])

    def draw(remainder, ratio_and_key):
        ratio, k = ratio_and_key
        count = binomial(k, remainder, ratio.clip(0, 1), dtype=remainder.dtype)
        return remainder - count, count

    _, counts = lax.scan(draw, n, (ratios, keys), unroll=unroll)
    return jnp.moveaxis(counts, 0, -1).astype(dtype)


# ---- generalized normal and the p-norm ball ----------------------------------------

@_staged(static_argnums=(2, 3))
def _generalized_normal(key, p, shape, dtype):
    from meshsim._src.random_gamma import gamma
    first, second = _random.split(key)
    g = gamma(first, 1 / p, shape, dtype)
    return _random.rademacher(second, shape, dtype) * g ** (1 / p)


def generalized_normal(key, p, shape=(), dtype=None):
    """Floats with density proportional to exp(-|x|^p): a random sign times
    Gamma(1/p)^(1/p)."""
    typed, _ = _check_prng_key("generalized_normal", key)
    shape = tuple(int(s) for s in shape)
    dtype = _float_dtype("gamma", dtype)
    return _generalized_normal(typed, p, shape, dtype)


def ball(key, d: int, p: float = 2, shape=(), dtype=None):
    """Points uniform in the d-dimensional unit p-norm ball (Barthe et al.)."""
    _, jnp = _modules()
    typed, _ = _check_prng_key("ball", key)
    shape = tuple(int(s) for s in shape)
    dtype = _float_dtype("gamma", dtype)
    return _ball(typed, operator.index(d), p, shape, dtype)


@_staged(static_argnums=(1, 3, 4))
def _ball(key, d, p, shape, dtype):
    _, jnp = _modules()
    first, second = _random.split(key)
    g = _generalized_normal(first, p, (*shape, d), dtype)
    e = _random.exponential(second, shape, dtype)
    return g / (((jnp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]


poisson = _with_out_sharding(poisson)
generalized_normal = _with_out_sharding(generalized_normal)
ball = _with_out_sharding(ball)

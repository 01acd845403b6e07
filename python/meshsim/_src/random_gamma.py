"""jax.random's gamma family as JAX draws it: `gamma`/`loggamma` sample each
element with its own key (the key split once per element) by Marsaglia and
Tsang's rejection method, boosting shapes below one; `beta`, `dirichlet`,
`chisquare`, `t` and `f` are built on them with JAX's key splits, so the
same key gives JAX's values."""
from __future__ import annotations

import numpy as np

from meshsim._src import core
from meshsim._src import random as _random
from meshsim._src.lax import elementwise as lax
from meshsim._src.random import (_check_all_safe_to_cast, _check_broadcast_shapes, _check_prng_key,
                                 _check_shape, _float_dtype, _staged, _with_out_sharding)

__all__ = ["gamma", "loggamma", "beta", "dirichlet", "chisquare", "t", "f"]


def _gamma_one(key, alpha, log_space: bool):
    """One draw for the scalar shape `alpha` with the key `key`."""
    from meshsim._src.lax import namespace as mlax
    from meshsim._src.numpy import namespace as jnp
    dtype = alpha.dtype
    const = lambda v: jnp.asarray(v, dtype)  # noqa: E731
    zero, one = const(0), const(1)
    boost = lax.ge(alpha, one)
    alpha_orig = alpha
    alpha = lax.select(boost, alpha, lax.add(alpha, one))
    d = lax.sub(alpha, const(1.0 / 3.0))
    c = lax.div(const(1.0 / 3.0), lax.sqrt(d))

    def rejected(state):
        _, X, V, U = state
        squeeze = lax.ge(U, lax.sub(one, lax.mul(const(0.0331), lax.mul(X, X))))
        log_test = lax.ge(lax.log(U), lax.add(lax.mul(X, const(0.5)),
                                              lax.mul(d, lax.add(lax.sub(one, V), lax.log(V)))))
        return lax.bitwise_and(squeeze, log_test)

    def propose(state):
        def next_normal(kxv):
            k, sub = _random.split(kxv[0])
            x = _random.normal(sub, (), dtype=dtype)
            return k, x, lax.add(one, lax.mul(x, c))

        k, x_key, u_key = _random.split(state[0], 3)
        _, x, v = mlax.while_loop(lambda kxv: lax.le(kxv[2], zero), next_normal, (x_key, zero, const(-1)))
        return k, lax.mul(x, x), lax.mul(lax.mul(v, v), v), _random.uniform(u_key, (), dtype=dtype)

    key, sub = _random.split(key)
    _, _, V, _ = mlax.while_loop(rejected, propose, (key, zero, one, const(2)))
    if log_space:
        log_u = lax.neg(_random.exponential(sub, (), dtype=dtype))
        log_boost = lax.select(lax.bitwise_or(boost, lax.eq(log_u, zero)), zero, lax.mul(log_u, lax.div(one, alpha_orig)))
        return lax.add(lax.add(lax.log(d), lax.log(V)), log_boost)
    u = lax.sub(one, _random.uniform(sub, (), dtype=dtype))
    return lax.mul(lax.mul(d, V), lax.select(boost, one, lax.pow(u, lax.div(one, alpha_orig))))


def _gamma(key, a, shape, dtype, log_space=False):
    from meshsim._src.lax import namespace as mlax
    from meshsim._src.numpy import namespace as jnp
    a = jnp.asarray(a)
    if shape is None:
        shape = np.shape(a)
    else:
        _check_shape("gamma", shape, np.shape(a))
    a = jnp.broadcast_to(a.astype(dtype), shape)
    n = int(np.prod(shape))
    keys = _random.key_data(_random.split(key, n)) if n else np.zeros((0, 2), np.uint32)
    if n == 0:
        return jnp.zeros(shape, dtype)
    samples = _draws(log_space)(keys, a.reshape(n))
    return samples.reshape(shape)


def _sample_grad(a, sample, log_space: bool):
    """d sample / d a at a fixed quantile; in log space d log(x) = dx / x, with a draw whose
    exp rounds to zero taken as the smallest normal float."""
    from meshsim._src.numpy import namespace as jnp
    from meshsim._src.lax.special import random_gamma_grad
    if not log_space:
        return random_gamma_grad(a, sample)
    x = jnp.exp(sample)
    x = lax.select(lax.eq(x, jnp.zeros_like(x)), jnp.full_like(x, jnp.finfo(x.dtype).tiny), x)
    return lax.div(random_gamma_grad(a, x), x)


_DRAWS = {}


def _draws(log_space: bool):
    """The per-element sampler over (keys, shapes), differentiable in the shapes: as JAX's
    random_gamma's JVP, a sample's tangent is the shape's times d sample / d shape, itself
    differentiable (a hessian in the shape differentiates it again)."""
    if log_space not in _DRAWS:
        from meshsim._src.lax import namespace as mlax
        from meshsim._src.ad import custom_jvp

        def draws(keys, a):
            return mlax.map(lambda ka: _gamma_one(ka[0], ka[1], log_space), (keys, a))

        rule = custom_jvp(draws)

        @rule.defjvp
        def draws_jvp(primals, tangents):
            keys, a = primals
            samples = rule(keys, a)
            return samples, lax.mul(tangents[1], _sample_grad(a, samples, log_space))

        _DRAWS[log_space] = rule
    return _DRAWS[log_space]


def _gamma_args(name, key, shape, dtype):
    typed, _ = _check_prng_key(name, key)
    dtype = _float_dtype(name if name != "loggamma" else "gamma", dtype)
    return typed, (None if shape is None else tuple(int(s) for s in shape)), dtype


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) floats."""
    typed, shape, dtype = _gamma_args("gamma", key, shape, dtype)
    return _staged_gamma(typed, a, shape, dtype, False)


def loggamma(key, a, shape=None, dtype=None):
    """log of Gamma(a, 1) floats, accurate for small a."""
    typed, shape, dtype = _gamma_args("loggamma", key, shape, dtype)
    return _staged_gamma(typed, a, shape, dtype, True)


_staged_gamma = _staged(static_argnums=(2, 3, 4))(_gamma)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) floats: two log-gammas, normalised in log space."""
    typed, _ = _check_prng_key("beta", key)
    dtype = _float_dtype("beta", dtype)
    _check_all_safe_to_cast("beta", dtype, a, b)
    shape = _check_broadcast_shapes("beta", shape, a, b)
    return _beta(typed, a, b, shape, dtype)


@_staged(static_argnums=(3, 4))
def _beta(key, a, b, shape, dtype):
    from meshsim._src.numpy import namespace as jnp
    a = jnp.broadcast_to(jnp.asarray(a).astype(dtype), shape)
    b = jnp.broadcast_to(jnp.asarray(b).astype(dtype), shape)
    key_a, key_b = _random.split(key)
    log_a = _gamma(key_a, a, shape, dtype, log_space=True)
    log_b = _gamma(key_b, b, shape, dtype, log_space=True)
    log_max = lax.max(log_a, log_b)
    ga, gb = jnp.exp(log_a - log_max), jnp.exp(log_b - log_max)
    return ga / (ga + gb)


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) floats along alpha's last axis: a softmax of log-gammas."""
    from meshsim._src.numpy import namespace as jnp
    typed, _ = _check_prng_key("dirichlet", key)
    dtype = _float_dtype("dirichlet", dtype)
    alpha = jnp.asarray(alpha)
    if not alpha.ndim >= 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == {alpha.ndim}")
    if shape is None:
        shape = alpha.shape[:-1]
    else:
        shape = tuple(int(s) for s in shape)
        _check_shape("dirichlet", shape, alpha.shape[:-1])
    return _dirichlet(typed, alpha, shape, dtype)


@_staged(static_argnums=(2, 3))
def _dirichlet(key, alpha, shape, dtype):
    from meshsim._src.nn import softmax
    samples = _gamma(key, alpha.astype(dtype), shape + alpha.shape[-1:], dtype, log_space=True)
    return softmax(samples, -1)


def chisquare(key, df, shape=None, dtype=None):
    """Chi-squared(df) floats: 2 Gamma(df / 2)."""
    typed, _ = _check_prng_key("chisquare", key)
    dtype = _float_dtype("chisquare", dtype)
    shape = _check_broadcast_shapes("chisquare", shape, df)
    _check_all_safe_to_cast("chisquare", dtype, df)
    return _chisquare(typed, df, shape, dtype)


@_staged(static_argnums=(2, 3))
def _chisquare(key, df, shape, dtype):
    from meshsim._src.numpy import namespace as jnp
    half = lax.div(jnp.asarray(df).astype(dtype), jnp.asarray(2, dtype))
    return lax.mul(jnp.exp(_gamma(key, half, shape, dtype, log_space=True)), jnp.asarray(2, dtype))


def t(key, df, shape=None, dtype=None):
    """Student's t(df) floats: normal * sqrt((df / 2) / Gamma(df / 2))."""
    typed, _ = _check_prng_key("t", key)
    dtype = _float_dtype("t", dtype)
    shape = _check_broadcast_shapes("t", shape, df)
    _check_all_safe_to_cast("t", dtype, df)
    return _t(typed, df, shape, dtype)


@_staged(static_argnums=(2, 3))
def _t(key, df, shape, dtype):
    from meshsim._src.numpy import namespace as jnp
    key_n, key_g = _random.split(key)
    n = _random.normal(key_n, shape, dtype)
    half = lax.div(jnp.asarray(df).astype(dtype), jnp.asarray(2, dtype))
    g = _gamma(key_g, half, shape, dtype)
    return n * jnp.sqrt(half / g)


def f(key, dfnum, dfden, shape=None, dtype=None):
    """F(dfnum, dfden) floats: a ratio of scaled chi-squared draws."""
    typed, _ = _check_prng_key("f", key)
    dtype = _float_dtype("f", dtype)
    shape = _check_broadcast_shapes("f", shape, dfnum, dfden)
    _check_all_safe_to_cast("f", dtype, dfnum, dfden)
    return _f(typed, dfnum, dfden, shape, dtype)


@_staged(static_argnums=(3, 4))
def _f(key, dfnum, dfden, shape, dtype):
    from meshsim._src.numpy import namespace as jnp
    dfden, dfnum = jnp.asarray(dfden).astype(dtype), jnp.asarray(dfnum).astype(dtype)
    key_dfd, key_dfn = _random.split(key)
    num = lax.div(_chisquare(key_dfn, dfnum, shape, dtype), dfnum)
    den = lax.div(_chisquare(key_dfd, dfden, shape, dtype), dfden)
    return lax.div(num, den)


gamma = _with_out_sharding(gamma)
loggamma = _with_out_sharding(loggamma)
beta = _with_out_sharding(beta)
dirichlet = _with_out_sharding(dirichlet)
chisquare = _with_out_sharding(chisquare)
t = _with_out_sharding(t)
f = _with_out_sharding(f)

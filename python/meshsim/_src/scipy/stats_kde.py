"""`jax.scipy.stats.gaussian_kde`: a weighted Gaussian kernel density estimate over a d x n
dataset, a pytree (so it passes through jit and vmap) whose bandwidth is fixed at
construction. The kernel sums are vmapped over points, as JAX writes them, for JAX's roundings."""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from meshsim._src import random
from meshsim._src.random_linalg import multivariate_normal
from meshsim._src.numpy import namespace as jnp
from meshsim._src.numpy.creation import _check_arraylike
from meshsim._src.numpy.promotion import promote_dtypes_inexact
from meshsim._src.scipy import linalg
from meshsim._src.scipy.special import logsumexp, ndtr
from meshsim._src.tree_util import register_pytree_node_class
from meshsim._src.vmap import vmap

__all__ = ["gaussian_kde"]

_FIELDS = ("neff", "dataset", "weights", "covariance", "inv_cov")


def _is_complex(x) -> bool:
    return jnp.issubdtype(jnp.result_type(x), np.complexfloating)


@register_pytree_node_class
class gaussian_kde:
    """Gaussian KDE with Scott's or Silverman's bandwidth, a scalar factor or a callable."""
    __slots__ = _FIELDS

    def __init__(self, dataset, bw_method=None, weights=None):
        _check_arraylike("gaussian_kde", dataset)
        dataset = jnp.atleast_2d(dataset)
        if _is_complex(dataset):
            raise NotImplementedError("gaussian_kde does not support complex data")
        if not dataset.size > 1:
            raise ValueError("`dataset` input should have multiple elements.")
        d, n = dataset.shape
        if weights is None:
            dataset, = promote_dtypes_inexact(dataset)
            weights = jnp.full(n, 1.0 / n, dtype=dataset.dtype)
        else:
            _check_arraylike("gaussian_kde", weights)
            dataset, weights = promote_dtypes_inexact(dataset, weights)
            weights = jnp.atleast_1d(weights)
            weights /= jnp.sum(weights)
            if weights.ndim != 1:
                raise ValueError("`weights` input should be one-dimensional.")
            if len(weights) != n:
                raise ValueError("`weights` input should be of length n")
        self._set("dataset", dataset)
        self._set("weights", weights)
        neff = self._set("neff", 1 / jnp.sum(weights ** 2))
        factor = self._bandwidth_factor("scott" if bw_method is None else bw_method, neff, d)
        data_covariance = jnp.atleast_2d(jnp.cov(dataset, rowvar=1, bias=False, aweights=weights))
        self._set("covariance", data_covariance * factor ** 2)
        self._set("inv_cov", jnp.linalg.inv(data_covariance) / factor ** 2)

    def _bandwidth_factor(self, bw_method, neff, d):
        if isinstance(bw_method, str) and bw_method == "scott":
            return jnp.power(neff, -1.0 / (d + 4))
        if isinstance(bw_method, str) and bw_method == "silverman":
            return jnp.power(neff * (d + 2) / 4.0, -1.0 / (d + 4))
        if jnp.isscalar(bw_method) and not isinstance(bw_method, str):
            return bw_method
        if callable(bw_method):
            return bw_method(self)
        raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar, or a callable.")

    def _set(self, name, value):
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name, value):
        raise dataclasses.FrozenInstanceError(f"cannot assign to field '{name}'")

    def __repr__(self):
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELDS)
        return f"gaussian_kde({fields})"

    def tree_flatten(self):
        return tuple(getattr(self, name) for name in _FIELDS), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        del aux_data
        kde = cls.__new__(cls)
        for name, value in zip(_FIELDS, children):
            kde._set(name, value)
        return kde

    @property
    def d(self):
        return self.dataset.shape[0]

    @property
    def n(self):
        return self.dataset.shape[1]

    def evaluate(self, points):
        _check_arraylike("evaluate", points)
        points = self._reshape_points(points)
        return _kernel_sums(False, self.dataset.T, self.weights[:, None], points.T, self.inv_cov)[:, 0]

    __call__ = pdf = evaluate

    def logpdf(self, x):
        _check_arraylike("logpdf", x)
        x = self._reshape_points(x)
        return _kernel_sums(True, self.dataset.T, self.weights[:, None], x.T, self.inv_cov)[:, 0]

    def integrate_gaussian(self, mean, cov):
        mean = jnp.atleast_1d(jnp.squeeze(mean))
        cov = jnp.atleast_2d(cov)
        if mean.shape != (self.d,):
            raise ValueError(f"mean does not have dimension {self.d}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"covariance does not have dimension {self.d}")
        chol, norm = self._convolution(self.covariance + cov)
        return _convolved_kernel_sum(chol, norm, self.dataset, self.weights, mean)

    def integrate_box_1d(self, low, high):
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("the limits of integration in integrate_box_1d must be scalars")
        sigma = jnp.squeeze(jnp.sqrt(self.covariance))
        low = jnp.squeeze((low - self.dataset) / sigma)
        high = jnp.squeeze((high - self.dataset) / sigma)
        return jnp.sum(self.weights * (ndtr(high) - ndtr(low)))

    def integrate_kde(self, other):
        if other.d != self.d:
            raise ValueError("KDEs are not the same dimensionality")
        chol, norm = self._convolution(self.covariance + other.covariance)
        small, large = (self, other) if self.n < other.n else (other, self)
        per_point = vmap(functools.partial(_convolved_kernel_sum, chol, norm, large.dataset, large.weights),
                         in_axes=1)(small.dataset)
        return jnp.sum(per_point * small.weights)

    def _convolution(self, covariance):
        """The Cholesky factor of the summed covariance and the Gaussian's normaliser."""
        chol = linalg.cho_factor(covariance)
        norm = jnp.sqrt(2 * np.pi) ** self.d * jnp.prod(jnp.diag(chol[0]))
        return chol, 1.0 / norm

    def resample(self, key, shape=()):
        index_key, noise_key = random.split(key)
        index = random.choice(index_key, self.n, shape=shape, p=self.weights)
        noise = multivariate_normal(noise_key, jnp.zeros(self.d, self.covariance.dtype), self.covariance,
                                           shape=shape, dtype=self.dataset.dtype).T
        return self.dataset[:, index] + noise

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        del low_bounds, high_bounds, maxpts
        raise NotImplementedError("only 1D box integrations are supported; use `integrate_box_1d`")

    def set_bandwidth(self, bw_method=None):
        del bw_method
        raise NotImplementedError("dynamically changing the bandwidth method is not supported")

    def _reshape_points(self, points):
        if _is_complex(points):
            raise NotImplementedError("gaussian_kde does not support complex coordinates")
        points = jnp.atleast_2d(points)
        d, m = points.shape
        if d == self.d:
            return points
        if d == 1 and m == self.d:  # one point given as a row
            return jnp.reshape(points, (self.d, 1))
        raise ValueError(f"points have dimension {d}, dataset has dimension {self.d}")


def _convolved_kernel_sum(chol, norm, target, weights, mean):
    """sum_j w_j N(target_j; mean, C) with C given by its Cholesky factor."""
    diff = target - mean[:, None]
    half_mahalanobis = 0.5 * jnp.sum(diff * linalg.cho_solve(chol, diff), axis=0)
    return norm * jnp.sum(jnp.exp(-half_mahalanobis) * weights)


def _kernel_sums(in_log, points, values, xi, precision):
    """For each row of xi, sum_j values_j N(xi; points_j, precision^-1) (its log when in_log),
    in whitened coordinates (the Cholesky factor of the precision)."""
    points, values, xi, precision = promote_dtypes_inexact(points, values, xi, precision)
    d = points.shape[1]
    if xi.shape[1] != d:
        raise ValueError("points and xi must have same trailing dim")
    if precision.shape != (d, d):
        raise ValueError("precision matrix must match data dims")
    whitening = linalg.cholesky(precision, lower=True)
    points, xi = jnp.dot(points, whitening), jnp.dot(xi, whitening)
    log_norm = jnp.sum(jnp.log(jnp.diag(whitening))) - 0.5 * d * jnp.log(2 * np.pi)

    def kernel(x_test, x_train, y_train):
        arg = log_norm - 0.5 * jnp.sum(jnp.square(x_train - x_test))
        return jnp.log(y_train) + arg if in_log else y_train * jnp.exp(arg)

    reduce = logsumexp if in_log else jnp.sum
    return vmap(lambda x: reduce(vmap(kernel, in_axes=(None, 0, 0))(x, points, values), axis=0))(xi)

"""meshsim.numpy: polynomials as coefficient arrays (highest power first) and 1-D
convolution/correlation (as jax.numpy), composed from jnp operations."""
from __future__ import annotations

import operator

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src import api, core, errors
from meshsim._src.numpy.creation import _check_arraylike
from meshsim._src.numpy.promotion import promote_dtypes, promote_dtypes_inexact

__all__ = ["polyval", "polyadd", "polysub", "polymul", "polyder", "polyint", "convolve", "correlate",
           "roots"]


def _arrays(name: str, *args):
    _check_arraylike(name, *args)
    return [core.asarray_value(a) for a in args]


def polyval(p, x, *, unroll: int = 16):
    """p evaluated at x by Horner's rule (p's leading axis holds the coefficients)."""
    p, x = promote_dtypes(*_arrays("polyval", p, x))
    y = jnp.zeros(jnp.broadcast_shapes(p.shape[1:], x.shape), dtype=x.dtype)
    for i in range(p.shape[0]):
        y = y * x + p[i]
    return y


def polyadd(a1, a2):
    """The sum of two polynomials."""
    a1, a2 = promote_dtypes(*_arrays("polyadd", a1, a2))
    if a2.shape[0] <= a1.shape[0]:
        return a1.at[-a2.shape[0]:].add(a2)
    return a2.at[-a1.shape[0]:].add(a1)


def polysub(a1, a2):
    """The difference of two polynomials."""
    a1, a2 = _arrays("polysub", a1, a2)
    return polyadd(a1, -a2)


def polymul(a1, a2, *, trim_leading_zeros: bool = False):
    """The product of two polynomials (a full convolution of their coefficients)."""
    a1, a2 = promote_dtypes_inexact(*_arrays("polymul", a1, a2))
    if trim_leading_zeros and (len(a1) > 1 or len(a2) > 1):
        a1, a2 = jnp.trim_zeros(a1, trim="f"), jnp.trim_zeros(a2, trim="f")
    if len(a1) == 0:
        a1 = jnp.zeros(1, dtype=a2.dtype)
    if len(a2) == 0:
        a2 = jnp.zeros(1, dtype=a1.dtype)
    return convolve(a1, a2, mode="full")


def polyder(p, m: int = 1):
    """The m-th derivative of polynomial p."""
    (p,) = promote_dtypes_inexact(*_arrays("polyder", p))
    m = operator.index(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive")
    if m == 0:
        return p
    coeff = jnp.prod(jnp.arange(m, len(p), dtype=p.dtype)[None] - jnp.arange(m, dtype=p.dtype)[:, None], 0)
    return p[:-m] * coeff[::-1]


def polyint(p, m: int = 1, k=None):
    """The m-th antiderivative of polynomial p, with integration constants k."""
    m = operator.index(m)
    p, k = promote_dtypes_inexact(*_arrays("polyint", p, 0 if k is None else k))
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k = jnp.atleast_1d(k)
    if len(k) == 1:
        k = jnp.full((m,), k[0])
    if k.shape != (m,):
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or m.")
    if m == 0:
        return p
    grid = jnp.arange(len(p) + m, dtype=p.dtype)[None] - jnp.arange(m, dtype=p.dtype)[:, None]
    coeff = jnp.prod(jnp.maximum(1, grid), 0)[::-1]
    return jnp.true_divide(jnp.concatenate((p, k)), coeff)


def _conv(x, y, mode: str, op: str, precision, preferred_element_type):
    """1-D convolution (op='convolve') or correlation: one conv_general_dilated
    of the longer input with the shorter (flipped to convolve)."""
    from meshsim._src.lax.convolution import conv_general_dilated
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"{op}() only support 1-dimensional inputs.")
    if preferred_element_type is None:
        x, y = promote_dtypes_inexact(x, y)
    else:
        x, y = promote_dtypes(x, y)
    if len(x) == 0 or len(y) == 0:
        raise ValueError(f"{op}: inputs cannot be empty, got shapes {x.shape} and {y.shape}.")
    reverse = False
    if op == "correlate":
        y = jnp.conj(y)
        if len(x) < len(y):
            x, y, reverse = y, x, True
    else:
        if len(x) < len(y):
            x, y = y, x
        y = jnp.flip(y)
    n = y.shape[0]
    if mode == "valid":
        pad = (0, 0)
    elif mode == "same":
        pad = (n // 2, n - n // 2 - 1)
    elif mode == "full":
        pad = (n - 1, n - 1)
    else:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")
    result = conv_general_dilated(x[None, None, :], y[None, None, :], (1,), [pad], precision=precision,
                                  preferred_element_type=preferred_element_type)[0, 0]
    return result[::-1] if reverse else result


def convolve(a, v, mode: str = "full", *, precision=None, preferred_element_type=None):
    """The discrete linear convolution of 1-D a and v."""
    a, v = _arrays("convolve", a, v)
    return _conv(a, v, mode, "convolve", precision, preferred_element_type)


def correlate(a, v, mode: str = "valid", *, precision=None, preferred_element_type=None):
    """The cross-correlation of 1-D a and v."""
    a, v = _arrays("correlate", a, v)
    return _conv(a, v, mode, "correlate", precision, preferred_element_type)


def roots(p, *, strip_zeros: bool = True):
    """The complex roots of the polynomial p (highest power first): the eigenvalues of its
    companion matrix. Leading zeros are stripped (they must be concrete), or with
    strip_zeros=False give as many NaN roots, last."""
    from meshsim._src.lax.fft import _complex
    (p,) = _arrays("roots", p)
    (p,) = promote_dtypes_inexact(p)
    p = jnp.atleast_1d(p)
    if p.ndim != 1:
        raise ValueError("Input must be a rank-1 array.")
    if p.size < 2:
        return jnp.array([], dtype=_complex(p.dtype))
    leading_zeros = jnp.where(jnp.all(p == 0), len(p), jnp.argmin(p == 0))
    if not strip_zeros:
        return _roots_with_zeros(p, leading_zeros)
    if isinstance(leading_zeros, core.Tracer):
        raise errors.ConcretizationTypeError(
            leading_zeros, "The error occurred in the jnp.roots() function. To use this within a "
            "JIT-compiled context, pass strip_zeros=False, but be aware that leading zeros will "
            "result in some returned roots being set to NaN.")
    return _roots_no_zeros(p[int(leading_zeros):])


@api.jitted_when_traced
def _roots_no_zeros(p):
    from meshsim._src.lax.fft import _complex
    from meshsim._src.numpy.decompositions import eigvals
    if p.size < 2:
        return jnp.array([], dtype=_complex(p.dtype))
    companion = jnp.diag(jnp.ones((p.size - 2,), p.dtype), -1)
    return eigvals(companion.at[0, :].set(-p[1:] / p[0]))


@api.jitted_when_traced
def _roots_with_zeros(p, leading_zeros):
    # an all-zero p solves as 1 (LAPACK cannot), its roots all becoming NaN below
    p = jnp.where(len(p) == leading_zeros, 1.0, p)
    found = _roots_no_zeros(jnp.roll(p, -leading_zeros))
    from meshsim._src.lax.sorting import sort
    found = sort((found == 0, found), num_keys=1)[1]  # zero roots last
    return jnp.where(jnp.arange(found.size) < found.size - leading_zeros, found, complex(np.nan, np.nan))

"""meshsim.lax: convolutions (as jax.lax). `conv_general_dilated` binds the
primitive; the other forms (`conv`, `conv_with_general_padding`,
`conv_transpose`, `conv_general_dilated_patches`, `conv_general_dilated_local`)
are composed from it as JAX composes them, and the shape helpers follow
JAX's."""
from __future__ import annotations

import math
import operator
from typing import NamedTuple, Sequence, Union

import numpy as np

from meshsim._src import core
from meshsim._src.lax.composed import padtype_to_pads
from meshsim._src.lax.precision import canonicalize_precision
from meshsim._src.sharding import explicit

__all__ = ["ConvDimensionNumbers", "ConvGeneralDilatedDimensionNumbers", "conv_general_dilated", "conv",
           "conv_with_general_padding", "conv_transpose", "conv_general_dilated_patches",
           "conv_general_dilated_local", "conv_dimension_numbers", "conv_general_permutations",
           "conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose_shape_tuple"]


class ConvDimensionNumbers(NamedTuple):
    """Where the batch, feature and spatial dimensions of a convolution's
    operands and result are: `lhs_spec` and `out_spec` are (batch, feature,
    spatial...), `rhs_spec` is (out feature, in feature, spatial...)."""
    lhs_spec: Sequence[int]
    rhs_spec: Sequence[int]
    out_spec: Sequence[int]


ConvGeneralDilatedDimensionNumbers = Union[tuple[str, str, str], ConvDimensionNumbers, None]


def conv_general_permutations(dimension_numbers):
    """The (lhs, rhs, out) permutations that string dimension numbers such as
    ('NCHW', 'OIHW', 'NCHW') describe; spatial dims follow rhs_spec's order."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    charpairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, (a, b) in enumerate(charpairs):
        if not dimension_numbers[i].count(a) == dimension_numbers[i].count(b) == 1:
            raise TypeError(f"convolution dimension_numbers[{i}] must contain the characters '{a}' and "
                            f"'{b}' exactly once, got {dimension_numbers[i]}.")
        if len(dimension_numbers[i]) != len(set(dimension_numbers[i])):
            raise TypeError(f"convolution dimension_numbers[{i}] cannot have duplicate characters, "
                            f"got {dimension_numbers[i]}.")
    if not (set(lhs_spec) - set(charpairs[0]) == set(rhs_spec) - set(charpairs[1])
            == set(out_spec) - set(charpairs[2])):
        raise TypeError("convolution dimension_numbers elements must each have the same set of "
                        f"spatial characters, got {dimension_numbers}.")

    def perm(spec, pair):
        spatial = [i for i, ch in enumerate(spec) if ch not in pair]
        if spec is not rhs_spec:
            spatial.sort(key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1])) + tuple(spatial)

    return tuple(perm(s, p) for s, p in zip(dimension_numbers, charpairs))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) -> ConvDimensionNumbers:
    """`dimension_numbers` (None, strings or ConvDimensionNumbers) as ConvDimensionNumbers."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError("convolution requires lhs and rhs ndim to be equal, got "
                        f"{len(lhs_shape)} and {len(rhs_shape)}.")
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if isinstance(dimension_numbers, (list, tuple)):
        if len(dimension_numbers) != 3:
            raise TypeError("convolution dimension_numbers list/tuple must be length 3, got "
                            f"{len(dimension_numbers)}.")
        if not all(isinstance(e, str) for e in dimension_numbers):
            raise TypeError("convolution dimension_numbers elements must be strings, got "
                            f"{tuple(map(type, dimension_numbers))}.")
        for i, e in enumerate(dimension_numbers):
            if len(e) != len(lhs_shape):
                raise TypeError(f"convolution dimension_numbers[{i}] must have len equal to the ndim of "
                                f"lhs and rhs, got {len(e)} for lhs and rhs shapes {tuple(lhs_shape)} "
                                f"and {tuple(rhs_shape)}.")
        return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))
    raise TypeError("convolution dimension_numbers must be tuple/list or None, got "
                    f"{type(dimension_numbers)}.")


def _dilate(d: int, dilation: int) -> int:
    return 0 if d == 0 else 1 + dilation * (d - 1)


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count: int = 1):
    """The result shape of a convolution in (N, C, spatial...) layout."""
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected {len(lhs_shape) - 2}, "
                        f"got {len(pads)}.")
    padded = [int(n) + int(lo) + int(hi) for n, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError("Negative padding is larger than the size of the corresponding dimension: "
                         f"got padding={pads} for lhs_shape[2:]={tuple(lhs_shape[2:])}")
    # JAX computes the spatial sizes with NumPy, so they are NumPy integers (as printed).
    space = tuple(np.int64(max((p - int(k)) // int(s) + 1, 0)) for p, k, s in zip(padded, rhs_shape[2:], strides))
    batch = lhs_shape[0] // batch_group_count if batch_group_count > 1 else lhs_shape[0]
    return (batch, rhs_shape[0]) + space


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple(np.take(lhs_shape, lhs_perm), np.take(rhs_shape, rhs_perm), window_strides, padding)
    return tuple(np.take(out, np.argsort(out_perm)))


def _conv_transpose_padding(k: int, s: int, padding):
    if padding == "SAME":
        pad_len = k + s - 2
        pad_a = k - 1 if s > k - 1 else int(np.ceil(pad_len / 2))
    elif padding == "VALID":
        pad_len = k + s - 2 + max(k - s, 0)
        pad_a = k - 1
    elif isinstance(padding, tuple):
        pads = tuple(k - p - 1 for p in padding)
        pad_a, pad_len = pads[0], sum(pads)
    else:
        raise ValueError(f"Invalid padding mode: {padding}")
    return pad_a, pad_len - pad_a


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    lhs_t, rhs_t = np.take(lhs_shape, lhs_perm), np.take(rhs_shape, rhs_perm)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(int(k), s, padding) for k, s in zip(rhs_t[2:], window_strides)]
    total = [sum(p) for p in padding]
    space = [(int(i) - 1) * s - int(k) + 2 + p for i, k, s, p in zip(lhs_t[2:], rhs_t[2:], window_strides, total)]
    out = (int(lhs_t[0]), int(rhs_t[0])) + tuple(space)
    return tuple(np.take(out, np.argsort(out_perm)))


def conv_general_dilated(lhs, rhs, window_strides: Sequence[int], padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers: ConvGeneralDilatedDimensionNumbers = None,
                         feature_group_count: int = 1, batch_group_count: int = 1, precision=None,
                         preferred_element_type=None, out_sharding=None):
    """The general n-dimensional convolution with dilation (XLA's Conv)."""
    lhs, rhs = core.asarray_value(lhs), core.asarray_value(rhs)
    dnums = conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
    if lhs_dilation is None:
        lhs_dilation = (1,) * (lhs.ndim - 2)
    elif isinstance(padding, str) and not len(lhs_dilation) == tuple(lhs_dilation).count(1):
        raise ValueError("String padding is not implemented for transposed convolution using this op. "
                         "Please either exactly specify the required padding or use conv_transpose.")
    if rhs_dilation is None:
        rhs_dilation = (1,) * (rhs.ndim - 2)
    if isinstance(padding, str):
        lhs_perm, rhs_perm, _ = dnums
        window = [_dilate(k, r) for k, r in zip(np.take(rhs.shape, rhs_perm)[2:], rhs_dilation)]
        padding = padtype_to_pads(np.take(lhs.shape, lhs_perm)[2:], window, window_strides, padding)
    else:
        try:
            padding = tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
        except (ValueError, TypeError) as e:
            raise ValueError("padding argument to conv_general_dilated should be a string or a sequence "
                             f"of (low, high) pairs, got {padding}") from e
    canonicalize_precision(precision)  # checked as JAX checks it; CPU computes float32 fully
    preferred = None if preferred_element_type is None else core.canonicalize_dtype(preferred_element_type)
    params = dict(batch_group_count=operator.index(batch_group_count),
                  dimension_numbers=tuple(tuple(int(d) for d in s) for s in dnums),
                  feature_group_count=operator.index(feature_group_count),
                  lhs_dilation=tuple(int(d) for d in lhs_dilation), out_sharding=None,
                  padding=tuple((int(lo), int(hi)) for lo, hi in padding), precision=None,
                  preferred_element_type=preferred, rhs_dilation=tuple(int(d) for d in rhs_dilation),
                  window_strides=tuple(int(s) for s in window_strides))
    if out_sharding is None:
        return core.bind1("conv_general_dilated", lhs, rhs, **params)
    if lhs.aval.mesh is None and rhs.aval.mesh is None:  # nothing sharded: lay out the result
        return explicit.reshard(core.bind1("conv_general_dilated", lhs, rhs, **params), out_sharding)
    params["out_sharding"] = explicit.out_sharding_param(out_sharding, lhs.ndim)
    return core.bind1("conv_general_dilated", lhs, rhs, **params)


def conv(lhs, rhs, window_strides: Sequence[int], padding: str, precision=None,
         preferred_element_type=None):
    """conv_general_dilated in NCHW/OIHW layout without dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides: Sequence[int], padding, lhs_dilation,
                              rhs_dilation, precision=None, preferred_element_type=None):
    """conv_general_dilated in NCHW/OIHW layout."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


_TRANSPOSE_DEFAULT_DIMS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                           5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs, rhs, strides: Sequence[int], padding, rhs_dilation=None,
                   dimension_numbers: ConvGeneralDilatedDimensionNumbers = None,
                   transpose_kernel: bool = False, precision=None, preferred_element_type=None,
                   use_consistent_padding: bool = False):
    """The transposed convolution (the gradient of a strided convolution):
    the input is dilated by `strides` and convolved with stride 1."""
    from meshsim._src.numpy import namespace as jnp
    lhs, rhs = core.asarray_value(lhs), core.asarray_value(rhs)
    assert len(lhs.shape) == len(rhs.shape) and len(lhs.shape) >= 2
    ndims = len(lhs.shape)
    if dimension_numbers is None:
        if ndims not in _TRANSPOSE_DEFAULT_DIMS:
            raise ValueError("No 4+ dimensional dimension_number defaults.")
        dimension_numbers = _TRANSPOSE_DEFAULT_DIMS[ndims]
    dn = conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
    window = np.take(rhs.shape, dn.rhs_spec)[2:]
    if rhs_dilation is None:
        rhs_dilation = (1,) * (ndims - 2)
    if use_consistent_padding or (isinstance(padding, str) and padding in {"SAME", "VALID"}):
        effective = [_dilate(int(k), r) for k, r in zip(window, rhs_dilation)]
        per_dim = [padding] * len(strides) if isinstance(padding, str) else padding
        pads = tuple(_conv_transpose_padding(k, s, p) for k, s, p in zip(effective, strides, per_dim))
    else:
        pads = padding
    if transpose_kernel:
        rhs = jnp.flip(rhs, tuple(dn.rhs_spec[2:]))
        rhs = jnp.swapaxes(rhs, dn.rhs_spec[0], dn.rhs_spec[1])
    return conv_general_dilated(lhs, rhs, (1,) * (ndims - 2), pads, strides, rhs_dilation, dn,
                                precision=precision, preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs, filter_shape: Sequence[int], window_strides: Sequence[int], padding,
                                 lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                                 precision=None, preferred_element_type=None):
    """Every window of `lhs` as features: output feature c * prod(filter_shape) + k
    is input channel c at window offset k (a grouped convolution with one-hot filters)."""
    from meshsim._src.numpy import namespace as jnp
    lhs = core.asarray_value(lhs)
    filter_shape = tuple(filter_shape)
    dnums = conv_dimension_numbers(lhs.shape, (1, 1) + filter_shape, dimension_numbers)
    window = math.prod(filter_shape)
    channels = lhs.shape[dnums.lhs_spec[1]]
    one_hot = jnp.broadcast_to(jnp.eye(window, dtype=lhs.dtype), (channels, window, window))
    rhs = jnp.reshape(one_hot, (channels * window, 1) + filter_shape)
    rhs = jnp.moveaxis(rhs, (0, 1), (dnums.rhs_spec[0], dnums.rhs_spec[1]))
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, dnums,
                                feature_group_count=channels, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs, rhs, window_strides: Sequence[int], padding, filter_shape: Sequence[int],
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None, precision=None):
    """An unshared convolution: each output position has its own filter (the
    patches contracted with `rhs` position by position)."""
    from meshsim._src.lax import namespace as lax
    from meshsim._src.numpy import namespace as jnp
    lhs = core.asarray_value(lhs)
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation,
                                           rhs_dilation, dimension_numbers)
    _, rhs_spec, out_spec = conv_dimension_numbers(lhs.shape, (1, 1) + tuple(filter_shape), dimension_numbers)
    lhs_b, rhs_b = list(out_spec[2:]), list(rhs_spec[2:])
    rhs_b = [rhs_b[i] for i in sorted(range(len(rhs_b)), key=lambda k: lhs_b[k])]
    dn = (([out_spec[1]], [rhs_spec[1]]), (sorted(lhs_b), rhs_b))
    out = lax.dot_general(patches, rhs, dimension_numbers=dn, precision=precision)
    return jnp.moveaxis(out, (-2, -1), (out_spec[0], out_spec[1]))

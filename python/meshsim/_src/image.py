"""jax.image: `resize` and `scale_and_translate` as JAX computes them. Each
resized dimension gets an (input x output) weight matrix from a sampling
kernel (triangle, Keys or OpenCV cubic, Lanczos, area box), normalised per
output and zeroed where the sample falls outside the input; the image is
contracted with one matrix per dimension. `nearest` gathers the input
element each output position's centre falls in."""
from __future__ import annotations

import enum
import math
from typing import Sequence

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src import core
from meshsim._src.numpy.promotion import promote_dtypes_inexact

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str):
        names = {"nearest": "NEAREST", "linear": "LINEAR", "bilinear": "LINEAR", "trilinear": "LINEAR",
                 "triangle": "LINEAR", "lanczos3": "LANCZOS3", "lanczos5": "LANCZOS5", "cubic": "CUBIC",
                 "bicubic": "CUBIC", "tricubic": "CUBIC", "cubic-pytorch": "CUBIC_PYTORCH",
                 "bicubic-pytorch": "CUBIC_PYTORCH", "area": "AREA"}
        if s not in names:
            raise ValueError(f'Unknown resize method "{s}"')
        return ResizeMethod[names[s]]


def _lanczos(radius: float):
    def kernel(x):
        y = radius * jnp.sin(np.pi * x) * jnp.sin(np.pi * x / radius)
        out = jnp.where(x > 0.001, jnp.divide(y, jnp.where(x != 0, np.pi ** 2 * x ** 2, 1)), 1)
        return jnp.where(x > radius, 0.0, out)
    return kernel


def _keys_cubic(x):
    out = (1.5 * x - 2.5) * x * x + 1.0
    out = jnp.where(x >= 1.0, ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0, out)
    return jnp.where(x >= 2.0, 0.0, out)


def _opencv_cubic(x):
    a = -0.75
    out = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    out = jnp.where(x >= 1.0, ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a, out)
    return jnp.where(x >= 2.0, 0.0, out)


def _triangle(x):
    return jnp.maximum(0, 1 - jnp.abs(x))


_AREA = object()
# method -> (kernel radius, kernel)
_KERNELS = {ResizeMethod.LINEAR: (1, _triangle), ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
            ResizeMethod.LANCZOS5: (5, _lanczos(5.0)), ResizeMethod.CUBIC: (2, _keys_cubic),
            ResizeMethod.CUBIC_PYTORCH: (2, _opencv_cubic), ResizeMethod.AREA: (1, _AREA)}

_SMALL = 1000.0 * float(np.finfo(np.float32).eps)


def _normalised(weights):
    total = jnp.sum(weights, axis=0, keepdims=True)
    return jnp.where(jnp.abs(total) > _SMALL, jnp.divide(weights, jnp.where(total != 0, total, 1)), 0)


def _weight_matrix(input_size: int, output_size: int, scale, translation, kernel, antialias: bool,
                   edge_padding: bool, radius: int):
    """weights[i, o]: how much input i contributes to output o."""
    dtype = jnp.result_type(scale, translation)
    inv_scale = 1.0 / scale
    kernel_scale = jnp.maximum(inv_scale, 1.0) if antialias else 1.0
    sample = (jnp.arange(output_size, dtype=dtype) + 0.5) * inv_scale - translation * inv_scale - 0.5
    pad = 0
    if edge_padding:
        pad = math.ceil(radius * max(1.0 / float(scale), 1.0)) if antialias else radius
    expanded = jnp.arange(-pad, input_size + pad, dtype=dtype)
    if kernel is _AREA:
        left_out = jnp.arange(output_size, dtype=dtype) * inv_scale - translation * inv_scale
        right_out = left_out + inv_scale
        left_in = jnp.arange(input_size, dtype=dtype)
        right_in = left_in + 1.0
        weights = jnp.maximum(0.0, jnp.minimum(right_out[None, :], right_in[:, None])
                              - jnp.maximum(left_out[None, :], left_in[:, None]))
    else:
        weights = kernel(jnp.abs(sample[None, :] - expanded[:, None]) / kernel_scale)
    if edge_padding:  # samples past the edges fold onto the edge elements
        clamped = jnp.clip(expanded.astype(jnp.int32), 0, input_size - 1)
        outputs = jnp.broadcast_to(jnp.arange(output_size)[None, :], (expanded.shape[0], output_size))
        folded = jnp.zeros((input_size, output_size), dtype=dtype).at[clamped[:, None], outputs].add(weights)
        return _normalised(folded)
    weights = _normalised(weights)
    inside = jnp.logical_and(sample >= -0.5, sample <= input_size - 0.5)
    return jnp.where(inside[None, :], weights, 0)


def _scale_and_translate(x, output_shape, spatial_dims, scale, translation, kernel, antialias,
                         edge_padding=False, radius=None):
    for i, d in enumerate(spatial_dims):
        d = d % x.ndim
        w = _weight_matrix(x.shape[d], output_shape[d], scale[i], translation[i], kernel, antialias,
                           edge_padding, radius).astype(x.dtype)
        x = jnp.moveaxis(jnp.tensordot(x, w, axes=([d], [0])), -1, d)
    return x


def _method(method):
    return ResizeMethod.from_string(method) if isinstance(method, str) else method


def _check_rank(shape, image):
    if len(shape) != image.ndim:
        raise ValueError("shape must have length equal to the number of dimensions of x;  "
                         f"{shape} vs {image.shape}")


def scale_and_translate(image, shape, spatial_dims: Sequence[int], scale, translation, method,
                        antialias: bool = True, precision=None):
    """Resamples `image` at output positions (o + 0.5 - translation) / scale - 0.5
    along `spatial_dims` with `method`'s kernel (widened by 1/scale when
    downsampling with `antialias`)."""
    image = core.asarray_value(image)
    shape = tuple(int(s) for s in shape)
    _check_rank(shape, image)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for scale_and_translate.")
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    edge_padding = method == ResizeMethod.CUBIC_PYTORCH and not antialias
    image, = promote_dtypes_inexact(image)
    scale, translation = promote_dtypes_inexact(jnp.asarray(scale), jnp.asarray(translation))
    if len(spatial_dims) == 0:
        return image
    return _scale_and_translate(image, shape, spatial_dims, scale, translation, kernel, antialias,
                                edge_padding, radius)


def _resize_nearest(x, shape):
    for d in range(x.ndim):
        m, n = x.shape[d], shape[d]
        if m == n:
            continue
        offsets = jnp.floor(((jnp.arange(n, dtype=np.float32) + 0.5) * m / n).astype(np.float32)).astype(np.int32)
        index = [slice(None)] * x.ndim
        index[d] = offsets
        x = x[tuple(index)]
    return x


def resize(image, shape, method, antialias: bool = True, precision=None):
    """`image` resampled to `shape` (dimensions whose size changes) with `method`."""
    image = core.asarray_value(image)
    shape = tuple(int(s) for s in shape)
    _check_rank(shape, image)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        return _resize_nearest(image, shape)
    image, = promote_dtypes_inexact(image)
    spatial = tuple(i for i in range(len(shape)) if image.shape[i] != shape[i])
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    scale = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in spatial]
    edge_padding = method == ResizeMethod.CUBIC_PYTORCH and not antialias
    return _scale_and_translate(image, shape, spatial, scale, [0.0] * len(spatial), kernel, antialias,
                                edge_padding, radius)

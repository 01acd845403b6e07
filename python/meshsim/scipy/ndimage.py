"""meshsim.scipy.ndimage (as jax.scipy.ndimage): `map_coordinates` of order 0 or 1."""
from __future__ import annotations

import functools
import itertools
import operator

__all__ = ["map_coordinates"]

_MODES = ("constant", "nearest", "wrap", "mirror", "reflect")


def _index_for_mode(index, size: int, mode: str):
    import meshsim.numpy as jnp
    if mode == "wrap":
        return index % size
    if mode == "mirror":
        if size == 1:
            return jnp.zeros_like(index)
        period = 2 * (size - 1)
        index = jnp.abs(index) % period
        return jnp.where(index > size - 1, period - index, index)
    if mode == "reflect":
        period = 2 * size
        index = index % period
        return jnp.where(index >= size, period - 1 - index, index)
    return jnp.clip(index, 0, size - 1)  # nearest; constant clips after marking validity


def map_coordinates(input, coordinates, order: int, mode: str = "constant", cval=0.0):  # noqa: A002
    """`input` sampled at `coordinates` (one array of positions per input dimension): the
    nearest point (order 0) or multilinear interpolation (order 1); outside the array as
    `mode` says (`constant` gives `cval`)."""
    import meshsim.numpy as jnp
    input_arr = jnp.asarray(input)
    coordinates = [jnp.asarray(c) for c in coordinates]
    if len(coordinates) != input_arr.ndim:
        raise ValueError("coordinates must be a sequence of length input.ndim, but "
                         f"{len(coordinates)} != {input_arr.ndim}")
    if mode not in _MODES:
        raise NotImplementedError(f"jax.scipy.ndimage.map_coordinates does not yet support mode {mode}. "
                                  f"Currently supported modes are {set(_MODES)}.")
    if order not in (0, 1):
        raise NotImplementedError("jax.scipy.ndimage.map_coordinates currently requires order<=1")
    per_dim = []
    for coord, size in zip(coordinates, input_arr.shape):
        coord = coord.astype(jnp.result_type(coord, float))
        if order == 0:
            idx = jnp.floor(coord + 0.5).astype(jnp.int32)
            choices = [(idx, None)]
        else:
            lower = jnp.floor(coord)
            upper_weight = coord - lower
            lower = lower.astype(jnp.int32)
            choices = [(lower, 1 - upper_weight), (lower + 1, upper_weight)]
        entries = []
        for idx, weight in choices:
            valid = (idx >= 0) & (idx < size) if mode == "constant" else None
            entries.append((_index_for_mode(idx, size, mode), valid, weight))
        per_dim.append(entries)
    out = None
    for combo in itertools.product(*per_dim):
        indices = tuple(i for i, _, _ in combo)
        value = input_arr[indices]
        if mode == "constant":
            valid = functools.reduce(operator.and_, [v for _, v, _ in combo])
            value = jnp.where(valid, value, jnp.asarray(cval, value.dtype))
        weights = [w for _, _, w in combo if w is not None]
        term = value * functools.reduce(operator.mul, weights) if weights else value
        out = term if out is None else out + term
    if jnp.issubdtype(input_arr.dtype, jnp.integer):
        out = jnp.round(out)
    return out.astype(input_arr.dtype)

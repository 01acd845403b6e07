"""meshsim.scipy.interpolate (as jax.scipy.interpolate): `RegularGridInterpolator`, linear or
nearest interpolation on a rectilinear grid (out-of-grid points get `fill_value`, or are
extrapolated when it is None)."""
from __future__ import annotations

import itertools

__all__ = ["RegularGridInterpolator"]


class RegularGridInterpolator:
    def __init__(self, points, values, method: str = "linear", bounds_error: bool = False,
                 fill_value=float("nan")):
        import meshsim.numpy as jnp
        if method not in ("linear", "nearest"):
            raise ValueError(f"method {method!r} is not defined")
        if bounds_error:
            raise NotImplementedError("`bounds_error` takes no effect under JIT-compiled functions and "
                                      "is therefore unsupported")
        self.method = method
        self.bounds_error = bounds_error
        self.grid = tuple(jnp.asarray(p) for p in points)
        self.values = jnp.asarray(values)
        self.fill_value = fill_value
        if len(self.grid) > self.values.ndim:
            raise ValueError(f"there are {len(self.grid)} point arrays, but values has "
                             f"{self.values.ndim} dimensions")

    def __call__(self, xi, method: str | None = None):
        import meshsim.numpy as jnp
        method = self.method if method is None else method
        if method not in ("linear", "nearest"):
            raise ValueError(f"method {method!r} is not defined")
        ndim = len(self.grid)
        xi = jnp.asarray(xi)
        if xi.shape[-1] != ndim:
            raise ValueError(f"the requested sample points xi have dimension {xi.shape[-1]}, but this "
                             f"RegularGridInterpolator has dimension {ndim}")
        shape = xi.shape[:-1]
        xi = xi.reshape(-1, ndim)
        indices, distances, outside = [], [], jnp.zeros(xi.shape[0], dtype=bool)
        for x, grid in zip(xi.T, self.grid):
            i = jnp.clip(jnp.searchsorted(grid, x) - 1, 0, grid.shape[0] - 2)
            indices.append(i)
            distances.append((x - grid[i]) / (grid[i + 1] - grid[i]))
            outside = outside | (x < grid[0]) | (x > grid[-1])
        if method == "linear":
            result = 0
            for corner in itertools.product((0, 1), repeat=ndim):
                weight = 1
                for d, c in enumerate(corner):
                    weight = weight * (distances[d] if c else 1 - distances[d])
                value = self.values[tuple(i + c for i, c in zip(indices, corner))]
                result = result + value * weight.reshape(weight.shape + (1,) * (value.ndim - 1))
        else:
            nearest = [jnp.where(t <= 0.5, i, i + 1) for i, t in zip(indices, distances)]
            result = self.values[tuple(nearest)]
        if self.fill_value is not None:
            mask = outside.reshape(outside.shape + (1,) * (result.ndim - 1))
            result = jnp.where(mask, jnp.asarray(self.fill_value, result.dtype), result)
        return result.reshape(shape + self.values.shape[ndim:])

"""meshsim.numpy: multi-dimensional histograms (`histogramdd`, `histogram2d`), as jax.numpy
has them: each sample's bin per dimension by searching the edges (the last bin holding its
right edge), one bincount over the flattened bin grid with an outlier bin on each side, the
outliers then cut off."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["histogramdd", "histogram2d"]

builtins_range = range  # the parameter `range` shadows it below


def histogramdd(sample, bins=10, range=None, weights=None, density=None):  # noqa: A002
    from meshsim._src.numpy import namespace as jnp
    sample = jnp.asarray(sample)
    if sample.ndim != 2:
        raise ValueError(f"histogramdd: sample must be a 2D array, got shape {sample.shape}")
    n, d = sample.shape
    if weights is not None and np.shape(weights) != (n,):
        raise ValueError("should have one weight for each sample.")
    if range is not None and (len(range) != d or any(r is not None and len(r) != 2 for r in range)):
        raise ValueError(f"For sample.shape={sample.shape}, range must be a sequence of {d} pairs or Nones; "
                         f"got range={range}")
    if not isinstance(bins, (list, tuple)):
        bins = [bins] * d  # one count or one array of edges for every dimension
    edges_by_dim, idx_by_dim, nbins = [], [], []
    for i in builtins_range(d):
        column = sample[:, i]
        edges = jnp.histogram_bin_edges(column, bins[i], None if range is None else range[i], weights)
        idx = jnp.searchsorted(edges, column, side="right")
        idx = jnp.where(column == edges[-1], idx - 1, idx)
        edges_by_dim.append(edges)
        idx_by_dim.append(idx)
        nbins.append(len(edges) + 1)
    flat = jnp.ravel_multi_index(tuple(idx_by_dim), tuple(nbins), mode="clip")
    hist = jnp.bincount(flat, weights, length=math.prod(nbins)).reshape(nbins)
    hist = hist[(slice(1, -1),) * d]
    if density:
        hist = hist / hist.sum()
        for norm in jnp.ix_(*[jnp.diff(e) for e in edges_by_dim]):
            hist = hist / norm
    return hist, edges_by_dim



def histogram2d(x, y, bins=10, range=None, weights=None, density=None):  # noqa: A002
    from meshsim._src.numpy import namespace as jnp
    sample = jnp.stack([jnp.asarray(x), jnp.asarray(y)], axis=1)
    hist, edges = histogramdd(sample, bins, range, weights, density)
    return hist, edges[0], edges[1]

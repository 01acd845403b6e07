"""jnp.histogramdd and jnp.histogram2d against JAX 0.10.2: counts (int32) and weighted
densities, bin counts per dimension, explicit ranges and explicit edges."""
import numpy as np
import pytest

import meshsim

RNG = np.random.default_rng(0)
X = RNG.normal(size=(60, 3)).astype(np.float32)
W = RNG.uniform(size=60).astype(np.float32)

CASES = {
    "dd_counts": lambda jnp: jnp.histogramdd(X, bins=4),
    "dd_weighted_density": lambda jnp: jnp.histogramdd(X, bins=[2, 3, 4], range=[(-1, 1), None, (-2, 2)],
                                                       weights=W, density=True),
    "2d_counts": lambda jnp: jnp.histogram2d(X[:, 0], X[:, 1], bins=5),
    "2d_edges_weights": lambda jnp: jnp.histogram2d(X[:, 0], X[:, 1], bins=[np.float32([-3, 0, 3]), 3],
                                                    weights=W, density=True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(real_jax, name):
    ours, theirs = CASES[name](meshsim.numpy), CASES[name](real_jax.numpy)
    ol, tl = meshsim.tree.leaves(ours), meshsim.tree.leaves(theirs)
    assert len(ol) == len(tl)
    for a, b in zip(ol, tl):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_errors():
    with pytest.raises(ValueError, match="one weight for each sample"):
        meshsim.numpy.histogramdd(X, weights=W[:5])

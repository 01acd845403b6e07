"""Comparing a pytree of meshsim results with JAX's: same number of leaves, each of the same
shape and dtype and close in value."""
import numpy as np

import meshsim


def assert_trees_close(ours, theirs, rtol: float, atol: float) -> None:
    ol, tl = meshsim.tree.leaves(ours), meshsim.tree.leaves(theirs)
    assert len(ol) == len(tl)
    for a, b in zip(ol, tl):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)

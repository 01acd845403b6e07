"""jax.scipy.cluster.vq.vq against JAX: random observations and code books (1-D and 2-D,
float32/int/float64), jit, ties, and JAX's rank errors."""
import numpy as np
import pytest

import meshsim
from meshsim.scipy.cluster.vq import vq as ours

jax = pytest.importorskip("jax")
from jax.scipy.cluster.vq import vq as theirs  # noqa: E402


@pytest.mark.parametrize("seed", range(8))
def test_vq_matches_jax(seed):
    rng = np.random.default_rng(seed)
    n, k, d = int(rng.integers(1, 20)), int(rng.integers(1, 6)), int(rng.integers(1, 5))
    shape_obs, shape_book = ((n,), (k,)) if seed % 4 == 0 else ((n, d), (k, d))
    obs, book = rng.normal(size=shape_obs), rng.normal(size=shape_book)
    if seed % 4 == 1:
        obs, book = np.round(obs * 3).astype(np.int32), np.round(book * 3).astype(np.int32)  # ties
    else:
        obs, book = obs.astype(np.float32), book.astype(np.float32)
    fn = meshsim.jit(ours) if seed % 2 else ours
    got, want = fn(obs, book), theirs(obs, book)
    for a, b in zip(got, want):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_vq_errors_match_jax():
    for obs, book in [(np.ones((3, 2)), np.ones(2)), (np.ones((2, 2, 2)), np.ones((2, 2, 2)))]:
        with pytest.raises(ValueError) as got:
            ours(obs, book)
        with pytest.raises(ValueError) as want:
            theirs(obs, book)
        assert str(got.value) == str(want.value)

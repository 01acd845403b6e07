"""lax's binary ops broadcast size-1 dims and rank-0 operands, nothing else: over random
shape pairs and dtypes, the result (shape, dtype, values) or the TypeError is JAX's, with the
shape errors raised before the dtype check as JAX raises them."""
import numpy as np
import pytest

import meshsim

jax = pytest.importorskip("jax")

OPS = ["add", "sub", "mul", "max", "min", "atan2", "pow", "eq", "lt", "nextafter"]


def _random_shapes(rng):
    base = tuple(int(rng.integers(1, 5)) for _ in range(int(rng.integers(1, 4))))
    other = [1 if rng.integers(0, 3) == 0 else n for n in base]
    kind = rng.integers(0, 5)
    if kind == 0:
        return base, ()
    if kind == 1:  # a rank mismatch
        return base, tuple(other[1:]) if len(other) > 1 else (2, *other)
    if kind == 2:  # a mismatched size
        other[int(rng.integers(0, len(other)))] += 1
    return (base, tuple(other)) if rng.integers(0, 2) else (tuple(other), base)


def _outcome(lib, op, x, y):
    try:
        z = getattr(lib.lax, op)(x, y)
        return "ok", z.shape, str(z.dtype), np.asarray(z)
    except TypeError as e:
        return "TypeError", str(e)


@pytest.mark.parametrize("seed", range(40))
def test_binary_broadcasting_matches_jax(seed):
    rng = np.random.default_rng(seed)
    op = OPS[seed % len(OPS)]
    a_shape, b_shape = _random_shapes(rng)
    x = rng.uniform(0.5, 2, a_shape).astype(np.float32)
    y = rng.uniform(0.5, 2, b_shape).astype(np.float32 if seed % 4 else np.float16)  # mixed: a dtype error
    got, want = _outcome(meshsim, op, x, y), _outcome(jax, op, x, y)
    assert got[:3] == want[:3]
    if want[0] == "ok":
        np.testing.assert_allclose(got[3], want[3], rtol=1e-6)

"""A jitted two-layer MLP forward pass with random weights, against NumPy."""
import numpy as np

import meshsim as jax
import meshsim.numpy as jnp


@jax.jit
def mlp(x, w1, w2):
    h = jnp.maximum(x @ w1, 0.0)
    return jnp.tanh(h @ w2)


def run():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32), dtype=np.float32)
    w1 = rng.standard_normal((32, 64), dtype=np.float32) * 0.1
    w2 = rng.standard_normal((64, 4), dtype=np.float32) * 0.1
    ours = mlp(jnp.asarray(x), jnp.asarray(w1), jnp.asarray(w2))
    reference = np.tanh(np.maximum(x @ w1, 0.0) @ w2)
    return [("mlp forward", ours, reference)]

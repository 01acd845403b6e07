"""jacrev/jacfwd over Explicit-sharded values without a context mesh, against JAX 0.10.2: JAX
runs the vmapped pullback eagerly over an uncommitted basis, so a transpose that lays out a
result the cotangent's type does not name (`sum`'s broadcast) raises its device-assignment
error with vmap's batched type, while one combining the basis with a committed residual
(`sin`) or following the cotangent's layout (a transpose) runs. Values agree where both run."""
import numpy as np
import pytest

import meshsim

FUNCTIONS = {
    "sum_sq": lambda jnp, W: lambda v: jnp.sum(v ** 2),
    "sum": lambda jnp, W: jnp.sum,
    "sin": lambda jnp, W: jnp.sin,
    "square": lambda jnp, W: lambda v: v ** 2,
    "matvec": lambda jnp, W: lambda v: v @ W,
    "transpose": lambda jnp, W: lambda v: v.T,
    "scale": lambda jnp, W: lambda v: v * 2,
    "mean_exp": lambda jnp, W: lambda v: jnp.mean(jnp.exp(v)),
    "tanh_matvec": lambda jnp, W: lambda v: jnp.tanh(v @ W),
    "matrix_transpose": lambda jnp, W: lambda m: m.T,
    "matrix_sum0": lambda jnp, W: lambda m: jnp.sum(m, 0),
    "matrix_sin": lambda jnp, W: jnp.sin,
    "matrix_norm": lambda jnp, W: lambda m: jnp.sqrt(jnp.sum(m * m)),
}


def _outcome(jax, transform, name):
    jnp = jax.numpy
    P, NS = jax.sharding.PartitionSpec, jax.sharding.NamedSharding
    mesh = jax.make_mesh((4, 2), ("x", "y"))
    v = jax.device_put(np.linspace(-1, 1, 8, dtype=np.float32), NS(mesh, P("x")))
    m = jax.device_put(np.linspace(-2, 2, 32, dtype=np.float32).reshape(8, 4), NS(mesh, P("x", "y")))
    W = jax.device_put(np.linspace(0, 1, 32, dtype=np.float32).reshape(8, 4), NS(mesh, P()))
    arg = m if name.startswith("matrix") else v
    try:
        out = getattr(jax, transform)(FUNCTIONS[name](jnp, W))(arg)
    except Exception as e:  # noqa: BLE001 - the class and text are compared
        return (type(e).__name__, str(e)), None
    return ("ok", out.shape), np.asarray(out)


@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_which_jacobians_raise_matches_jax(real_jax, transform, name):
    (ours, our_value), (theirs, their_value) = (_outcome(lib, transform, name)
                                                for lib in (meshsim, real_jax))
    assert ours == theirs
    if their_value is not None:
        np.testing.assert_allclose(our_value, their_value, rtol=1e-5, atol=1e-6)

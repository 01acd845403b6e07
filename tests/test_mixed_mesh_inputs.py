"""Operations whose inputs live on different meshes, against JAX 0.10.2: inputs on meshes
whose axes are all Auto combine (no common mesh), any other pair of different meshes is
JAX's ValueError "Mesh for all inputs should be equal", whether the inputs are sharded or
replicated, eager or under jit."""
import numpy as np
import pytest

import meshsim

OPS = {
    "add": lambda jnp, a, b: a + b,
    "multiply": lambda jnp, a, b: jnp.multiply(a, b),
    "matmul": lambda jnp, a, b: a @ b.T,
    "sin_times": lambda jnp, a, b: jnp.sin(a) * b,
    "where": lambda jnp, a, b: jnp.where(a > 3, a, b),
}


def _outcome(jax, types, specs, op, jit, data):
    jnp, P, AxisType = jax.numpy, jax.sharding.PartitionSpec, jax.sharding.AxisType
    meshes = [jax.make_mesh((8,), ("a",), axis_types=(getattr(AxisType, types[0]),)),
              jax.make_mesh((4, 2), ("a", "m"), axis_types=(getattr(AxisType, types[1]),) * 2)]
    args = [jax.device_put(jnp.asarray(d), jax.sharding.NamedSharding(m, P(*s)))
            for d, m, s in zip(data, meshes, specs)]
    f = (lambda a, b: OPS[op](jnp, a, b))
    try:
        out = (jax.jit(f) if jit else f)(*args)
    except Exception as e:  # the error is the outcome compared
        return type(e).__name__, str(e)
    return str(jax.typeof(out)), np.asarray(out)


@pytest.mark.parametrize("seed", range(24))
def test_inputs_on_two_meshes(real_jax, seed):
    rng = np.random.default_rng(seed)
    types = [str(rng.choice(["Auto", "Explicit"])) for _ in range(2)]
    specs = [("a",) if rng.random() < 0.5 else (), ("a",) if rng.random() < 0.5 else ()]
    op = str(rng.choice(sorted(OPS)))
    jit = bool(rng.random() < 0.5)
    shape = (8, int(rng.choice([2, 4])))
    data = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
    ours = _outcome(meshsim, types, specs, op, jit, data)
    theirs = _outcome(real_jax, types, specs, op, jit, data)
    assert ours[0] == theirs[0]
    if isinstance(theirs[1], str):
        assert ours[1] == theirs[1]
    else:
        np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6, atol=1e-6)

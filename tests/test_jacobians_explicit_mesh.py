"""jacfwd/jacrev/hessian of functions of values sharded over an Explicit context mesh,
against JAX 0.10.2: the Jacobian's type (shape and sharding: the output's dims keep their
sharding for jacfwd's trailing basis and jacrev's leading one, the input's dims theirs),
its values, and JAX's errors (a Hessian whose contraction is sharded is ambiguous). Eager
and under jit; inputs of random shapes drawn per seed."""
import numpy as np
import pytest

import meshsim

FUNCTIONS = {
    "sin": lambda jnp: jnp.sin,
    "scaled_square": lambda jnp: lambda v: 3 * v ** 2,
    "sum0": lambda jnp: lambda v: jnp.sum(v, 0),
    "cube_sum": lambda jnp: lambda v: jnp.sum(v ** 3),
    "tanh_mean": lambda jnp: lambda v: jnp.mean(jnp.tanh(v)),
    "self_dot": lambda jnp: lambda v: jnp.sum(v * v),
    "transpose": lambda jnp: lambda v: v.T,
    "exp_times_sum": lambda jnp: lambda v: jnp.exp(v) * jnp.sum(v),
}
SCALAR = {"cube_sum", "tanh_mean", "self_dot"}
SPECS = {"rows_X": ("X", None), "cols_Y": (None, "Y"), "both": ("X", "Y"), "rows_XY": (("X", "Y"), None),
         "replicated": (None, None)}


def _outcome(jax, name, transform, spec, seed, jit):
    jnp = jax.numpy
    rng = np.random.default_rng(seed)
    shape = (8 * int(rng.integers(1, 3)), 4 * int(rng.integers(1, 3)))
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    mesh = jax.make_mesh((2, 4), ("X", "Y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
    with jax.set_mesh(mesh):
        v = jax.device_put(x, jax.sharding.PartitionSpec(*SPECS[spec]))
        f = getattr(jax, transform)(FUNCTIONS[name](jnp))
        try:
            out = (jax.jit(f) if jit else f)(v)
        except Exception as e:  # noqa: BLE001 - the class name and text are compared
            return type(e).__name__, str(e).splitlines()[0]
        return str(jax.typeof(out)), np.asarray(out)


CASES = [(n, t) for n in FUNCTIONS for t in ("jacfwd", "jacrev", "hessian") if t != "hessian" or n in SCALAR]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("spec", sorted(SPECS))
@pytest.mark.parametrize("name,transform", CASES)
def test_jacobian_type_and_values_match_jax(real_jax, name, transform, spec, jit):
    seed = sorted(SPECS).index(spec)
    ours, theirs = (_outcome(lib, name, transform, spec, seed, jit) for lib in (meshsim, real_jax))
    assert ours[0] == theirs[0]
    if isinstance(theirs[1], np.ndarray):
        np.testing.assert_allclose(ours[1], theirs[1], rtol=2e-5, atol=1e-5)
    else:
        assert ours[1] == theirs[1]

"""Misusing Auto mesh axes raises what JAX raises: out_sharding= and reshard naming Auto
axes, unreduced axes over Auto axes, and the checks with_sharding_constraint and device_put
make; the types there show no Auto axes. Compared with the installed JAX, message and all
(the source location JAX appends is the caller's line, here as there)."""
import numpy as np
import pytest

import meshsim

CASES = {
    "reshard": lambda m, x, y: m.jax.reshard(x, m.P("Y", None)),
    "dot_out_sharding": lambda m, x, y: m.jnp.dot(x, y, out_sharding=m.P("X", None)),
    "einsum_out_sharding": lambda m, x, y: m.jnp.einsum("ij,jk->ik", x, y, out_sharding=m.P("X", "Y")),
    "lax_dot_general_out_sharding": lambda m, x, y: m.jax.lax.dot_general(
        x, y, (((1,), (0,)), ((), ())), out_sharding=m.P(None, "Y")),
    "unreduced_on_auto": lambda m, x, y: m.jax.reshard(x, m.P(None, None, unreduced={"X"})),
    "explicit_axes_without_in_sharding": lambda m, x, y: m.jax.sharding.explicit_axes(lambda a: a * 2)(x),
    "auto_axes_on_auto": lambda m, x, y: m.jax.sharding.auto_axes(lambda a: a * 2, out_sharding=m.P("X"))(x),
    "constraint_unknown_axis": lambda m, x, y: m.jax.lax.with_sharding_constraint(x, m.P("Z")),
    "constraint_repeated_axis": lambda m, x, y: m.jax.lax.with_sharding_constraint(x, m.P("X", "X")),
    "constraint_indivisible": lambda m, x, y: m.jax.lax.with_sharding_constraint(m.jnp.ones((6, 4)), m.P("X")),
    "device_put_indivisible": lambda m, x, y: m.jax.device_put(np.ones((6, 4)), m.P("X")),
    "jit_constraint_unknown_axis": lambda m, x, y: m.jax.jit(
        lambda a: m.jax.lax.with_sharding_constraint(a, m.P("Q")))(x),
    "typeof": lambda m, x, y: str(m.jax.typeof(x)),
    # out_sharding= naming Auto axes: JAX names the op
    "zeros_out_sharding": lambda m, x, y: m.jnp.zeros((8, 4), out_sharding=m.P("X")),
    "ones_out_sharding": lambda m, x, y: m.jnp.ones((8, 4), out_sharding=m.P("X")),
    "empty_out_sharding": lambda m, x, y: m.jnp.empty((8, 4), out_sharding=m.P("X")),
    "full_out_sharding": lambda m, x, y: m.jnp.full((8, 4), 2.0, out_sharding=m.P("X")),
    "zeros_like_out_sharding": lambda m, x, y: m.jnp.zeros_like(x, out_sharding=m.P("X")),
    "ones_like_out_sharding": lambda m, x, y: m.jnp.ones_like(x, out_sharding=m.P("X")),
    "full_like_out_sharding": lambda m, x, y: m.jnp.full_like(x, 3.0, out_sharding=m.P("X")),
    "arange_out_sharding": lambda m, x, y: m.jnp.arange(8, out_sharding=m.P("X")),
    "reshape_out_sharding": lambda m, x, y: m.jnp.reshape(x, (4, 8), out_sharding=m.P("X")),
    "lax_reshape_out_sharding": lambda m, x, y: m.jax.lax.reshape(x, (4, 8), out_sharding=m.P("X")),
    "broadcast_to_out_sharding": lambda m, x, y: m.jnp.broadcast_to(x[0], (8, 4), out_sharding=m.P("X")),
    "normal_out_sharding": lambda m, x, y: m.jax.random.normal(m.jax.random.key(0), (8, 4),
                                                               out_sharding=m.P("X")),
    "uniform_out_sharding": lambda m, x, y: m.jax.random.uniform(m.jax.random.key(0), (8, 4),
                                                                 out_sharding=m.P("X")),
    "randint_out_sharding": lambda m, x, y: m.jax.random.randint(m.jax.random.key(0), (8, 4), 0, 5,
                                                                 out_sharding=m.P("X")),
}


class Lib:
    def __init__(self, mod):
        self.jax = mod
        self.jnp = mod.numpy
        self.P = mod.sharding.PartitionSpec
        auto = (mod.sharding.AxisType.Auto,) * 2
        self.mesh = mod.make_mesh((4, 2), ("X", "Y"), axis_types=auto)


def _outcome(mod, name):
    lib = Lib(mod)
    with mod.set_mesh(lib.mesh):
        x = mod.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), lib.P("X", None))
        y = mod.device_put(np.arange(32.0, dtype=np.float32).reshape(4, 8), lib.P(None, "Y"))
        try:
            out = CASES[name](lib, x, y)
            return "ok", out if isinstance(out, str) else (str(mod.typeof(out)), repr(out.sharding.spec))
        except Exception as e:  # noqa: BLE001 - the class name is compared
            return type(e).__name__, str(e).replace(mod.__name__ + ".", "jax.")


@pytest.mark.parametrize("name", sorted(CASES))
def test_misuse_matches_jax(real_jax, name):
    ours, theirs = _outcome(meshsim, name), _outcome(real_jax, name)
    if "This error occurs at source:" in theirs[1]:
        # Both name this file and the lambda of CASES; the line JAX reports is the lambda's.
        theirs = (theirs[0], theirs[1].split("This error occurs at source:")[0])
        assert "test_auto_misuse.py" in ours[1] and "(<lambda>)" in ours[1]
        ours = (ours[0], ours[1].split("This error occurs at source:")[0])
    assert ours == theirs

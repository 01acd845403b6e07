"""Manual sharding on the simulated 8-device mesh: a 4x2 shard_map matmul, a
data-parallel mean of per-device losses, and axis indices over a tuple of
axes, each against NumPy."""
import numpy as np

import meshsim as jax
import meshsim.numpy as jnp
from meshsim.sharding import PartitionSpec as P

mesh = jax.make_mesh((4, 2), ("dp", "tp"))


@jax.jit
@jax.shard_map(mesh=mesh, in_specs=(P("dp", None), P(None, "tp")), out_specs=P("dp", "tp"))
def matmul(x_block, w_block):
    return x_block @ w_block  # each device: its rows of x times its columns of w


@jax.jit
@jax.shard_map(mesh=mesh, in_specs=P("dp"), out_specs=P())
def mean_squared(x_block):
    local = jnp.sum(x_block * x_block)        # varies over dp
    return jax.lax.pmean(local, "dp") / x_block.size  # invariant: the same on every device


@jax.shard_map(mesh=mesh, in_specs=P(), out_specs=P(("tp", "dp")))
def device_order(x):
    return jax.lax.axis_index(("tp", "dp"))[None] + 0 * x[:1]


def run():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 512), dtype=np.float32)
    w = rng.standard_normal((512, 64), dtype=np.float32)
    return [
        # Against the exact (float64) product: float32 sums of 512 products of unit normals are
        # within a few 1e-5 of it, in meshsim's order as in NumPy's BLAS.
        ("shard_map matmul 4x2", matmul(x, w), x.astype(np.float64) @ w.astype(np.float64), 1e-4),
        ("pmean over dp", mean_squared(x), np.mean(x * x)),
        ("axis_index over (tp, dp)", device_order(np.zeros(1, np.int32)), np.arange(8)),
    ]

"""A stack of flax.nnx residual blocks whose parameters, batch statistics and dropout rng
streams carry a leading layer axis: built with nnx.split_rngs over nnx.vmap, applied with
nnx.scan, trained with nnx.jit and nnx.value_and_grad. The module state holds typed rng keys,
so printing it with jax.tree.map(jnp.shape, ...) treats keys as leaves. Prints one JSON
object; run under real JAX and under `python -m meshsim`, the two must agree."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from flax_common import recorder

results = {}
record = recorder(results)


class Residual(nnx.Module):
    def __init__(self, width, *, rngs):
        self.proj = nnx.Linear(width, width, rngs=rngs)
        self.norm = nnx.BatchNorm(width, momentum=0.7, rngs=rngs)
        self.drop = nnx.Dropout(0.3, rngs=rngs)

    def __call__(self, h):
        return h + nnx.silu(self.drop(self.norm(self.proj(h))))


class Stack(nnx.Module):
    def __init__(self, width, depth, *, rngs):
        @nnx.split_rngs(splits=depth)
        @nnx.vmap(axis_size=depth)
        def build(rngs):
            return Residual(width, rngs=rngs)

        self.blocks = build(rngs)
        self.head = nnx.Linear(width, 2, rngs=rngs)

    def __call__(self, h):
        @nnx.scan
        def step(h, block):
            return block(h), jnp.mean(h)

        h, means = step(h, self.blocks)
        return self.head(h), means


model = Stack(6, 4, rngs=nnx.Rngs(params=5, dropout=9))
state = nnx.state(model)
record("state_shapes", str(jax.tree.map(jnp.shape, state)))
record("state_dtypes", str(jax.tree.map(lambda v: str(v.dtype), state)))
rng_state = nnx.state(model, nnx.RngState)
record("rng_leaf_types", sorted({str(jax.typeof(v)) for v in jax.tree.leaves(rng_state)}))
keys = jax.tree.leaves(nnx.state(model, nnx.RngKey))
record("dropout_key_data", np.asarray(jax.random.key_data(keys[0])).astype(np.float64))

rng = np.random.default_rng(3)
x = jnp.asarray(rng.normal(size=(5, 6)).astype(np.float32))
y = jnp.asarray(rng.normal(size=(5, 2)).astype(np.float32))
out, means = model(x)
record("train_out", out)
record("train_layer_means", means)
record("dropout_count_after", np.asarray(jax.tree.leaves(nnx.state(model, nnx.RngCount))[0]))
record("running_mean", model.blocks.norm.mean[...])

model.eval()
record("eval_out", model(x)[0])
model.train()


@nnx.jit
def train_step(model, opt, x, y):
    def loss(model):
        return jnp.mean((model(x)[0] - y) ** 2)
    value, grads = nnx.value_and_grad(loss)(model)
    opt.update(model, grads)
    return value


opt = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
record("losses", np.asarray([train_step(model, opt, x, y) for _ in range(4)]))
# (not the projection's bias: BatchNorm cancels its gradient, which Adam would scale up from
# rounding noise)
record("trained_proj_kernel", model.blocks.proj.kernel[...])
record("trained_norm_scale", model.blocks.norm.scale[...])
record("keys_after_training",
       np.asarray(jax.random.key_data(jax.tree.leaves(nnx.state(model, nnx.RngKey))[0])).astype(np.float64))

print(json.dumps(results, sort_keys=True))

"""A pipeline of flax.linen nn.scan loops inside shard_map, as pipeline-parallel tutorials build
one: an nn.scan over the pipeline's ticks broadcasts the parameters over the loop
(variable_broadcast), and each tick runs its stage's layers with an nn.scan of their own
(parameters stacked by layer). flax finds the ticks' parameters with JAX's partial evaluator:
the inner loop's parameters, made from the key alone, must come out known although the
activations it carries do not. Initialised from a key (values compared), then a loss and its
gradient with JAX's parameters on a (data, model) mesh. Prints one JSON object (see flax_common)."""
import json
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import flax.linen as nn  # noqa: E402
import jax
import jax.numpy as jnp
import numpy as np
from flax_common import recorder
from jax.sharding import Mesh, PartitionSpec as P

results = {}
record = recorder(results)


class Layer(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x, _):
        return jnp.tanh(nn.Dense(self.features)(x)), None


class StageLayers(nn.Module):
    features: int
    layers: int

    @nn.compact
    def __call__(self, x):
        layers = nn.scan(Layer, variable_axes={"params": 0}, split_rngs={"params": True}, length=self.layers)
        x, _ = layers(self.features)(x, None)
        return x


class Tick(nn.Module):
    features: int
    layers: int
    stages: int

    @nn.compact
    def __call__(self, state, tick_input):
        stage = jax.lax.axis_index("model")
        state = jnp.where(stage == 0, tick_input, state)
        state = StageLayers(self.features, self.layers)(state)
        ring = [(i, (i + 1) % self.stages) for i in range(self.stages)]
        return jax.lax.ppermute(state, "model", ring), state.sum(axis=-1)


class Pipeline(nn.Module):
    features: int
    layers: int
    stages: int

    @nn.compact
    def __call__(self, microbatches):
        ticks = nn.scan(Tick, variable_broadcast="params", split_rngs={"params": False})
        state, sums = ticks(self.features, self.layers, self.stages)(jnp.zeros_like(microbatches[0]), microbatches)
        return state, sums


rng = np.random.default_rng(5)
for data, stages, features, layers, ticks in [(4, 2, 3, 2, 3), (2, 4, 4, 3, 5), (1, 8, 2, 1, 8)]:
    mesh = Mesh(np.array(jax.devices()[: data * stages]).reshape(data, stages), ("data", "model"))
    model = Pipeline(features, layers, stages)
    x = jnp.asarray(rng.standard_normal((ticks, 2 * data, features)).astype(np.float32))

    def init(key, x_local):
        return model.init(key, x_local)

    init_sharded = jax.shard_map(init, mesh=mesh, in_specs=(P(), P(None, "data")), out_specs=P(),
                                 check_vma=False)
    name = f"{data}x{stages}_f{features}_l{layers}_t{ticks}"
    shapes = jax.eval_shape(init_sharded, jax.random.PRNGKey(1), x)
    record(f"{name}_shapes", json.dumps(jax.tree.map(lambda s: [list(s.shape), str(s.dtype)], shapes)))
    initialised = jax.jit(init_sharded)(jax.random.PRNGKey(1), x)
    record(f"{name}_init_kernel", initialised["params"]["ScanTick_0"]["StageLayers_0"]["ScanLayer_0"]
           ["Dense_0"]["kernel"])
    params = jax.tree.map(lambda a: jnp.asarray(rng.standard_normal(a.shape).astype(np.float32)),
                          initialised)

    def loss(params, x_local):
        state, sums = model.apply(params, x_local)
        return jax.lax.psum((state ** 2).sum() + sums.sum(), ("data", "model"))

    loss_sharded = jax.shard_map(loss, mesh=mesh, in_specs=(P(), P(None, "data")), out_specs=P(),
                                 check_vma=False)
    value, grads = jax.jit(jax.value_and_grad(loss_sharded))(params, x)
    record(f"{name}_loss", value)
    layer_grads = grads["params"]["ScanTick_0"]["StageLayers_0"]["ScanLayer_0"]["Dense_0"]
    record(f"{name}_grad_kernel", layer_grads["kernel"])
    record(f"{name}_grad_bias", layer_grads["bias"])

print(json.dumps(results))

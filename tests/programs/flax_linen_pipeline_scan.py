"""flax.linen's nn.scan over pipeline ticks inside shard_map, as pipeline-parallel tutorials
write a stage loop: the scanned step reads its stage with `lax.axis_index` and chooses the
input or the carried state with it. flax's scan finds the loop's known values with JAX's
partial evaluator (jax.interpreters.partial_eval), so the axis_index is reached while those are
computed. The model is initialised with jax.eval_shape and jit over shard_map, then a loss and
its gradient are taken with JAX's parameters on a (data, model) mesh of Auto axes. Prints one
JSON object (see flax_common)."""
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


class Stage(nn.Module):
    features: int

    @nn.compact
    def __call__(self, state, tick_input):
        stage = jax.lax.axis_index("model")
        state = jnp.where(stage == 0, tick_input, state)
        state = jnp.tanh(nn.Dense(self.features)(state))
        return jax.lax.ppermute(state, "model", [(0, 1), (1, 0)]), state.sum()


class Pipeline(nn.Module):
    features: int

    @nn.compact
    def __call__(self, microbatches):
        ticks = nn.scan(Stage, variable_broadcast="params", split_rngs={"params": False})
        state, sums = ticks(self.features)(jnp.zeros_like(microbatches[0]), microbatches)
        return state, sums


rng = np.random.default_rng(3)
for data, features, ticks in [(4, 3, 2), (2, 5, 3), (1, 4, 4)]:
    mesh = Mesh(np.array(jax.devices()[: 2 * data]).reshape(data, 2), ("data", "model"))
    model = Pipeline(features)
    x = jnp.asarray(rng.standard_normal((ticks, 2 * data, features)).astype(np.float32))

    def init(key, x_local):
        return model.init(key, x_local)

    init_sharded = jax.shard_map(init, mesh=mesh, in_specs=(P(), P(None, "data")), out_specs=P(),
                                 check_vma=False)
    shapes = jax.eval_shape(init_sharded, jax.random.PRNGKey(0), x)
    name = f"{data}x2_f{features}_t{ticks}"
    record(f"{name}_shapes", json.dumps(jax.tree.map(lambda s: [list(s.shape), str(s.dtype)], shapes)))
    initialised = jax.jit(init_sharded)(jax.random.PRNGKey(0), x)
    record(f"{name}_init_shapes", json.dumps(jax.tree.map(lambda a: list(a.shape), initialised)))
    # The same parameters under both: drawn here with NumPy.
    params = jax.tree.map(lambda a: jnp.asarray(rng.standard_normal(a.shape).astype(np.float32)),
                          initialised)

    def loss(params, x_local):
        state, sums = model.apply(params, x_local)
        return jax.lax.psum((state ** 2).sum() + sums.sum(), ("data", "model"))

    loss_sharded = jax.shard_map(loss, mesh=mesh, in_specs=(P(), P(None, "data")), out_specs=P(),
                                 check_vma=False)
    value, grads = jax.jit(jax.value_and_grad(loss_sharded))(params, x)
    record(f"{name}_loss", value)
    record(f"{name}_grad_kernel", grads["params"]["ScanStage_0"]["Dense_0"]["kernel"])

print(json.dumps(results))

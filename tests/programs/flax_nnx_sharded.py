"""flax.nnx on 8 devices, as a user scales a model out: parameters annotated with
nnx.with_partitioning (and a Param given its sharding directly), nnx.get_partition_spec,
jax.lax.with_sharding_constraint on activations and on the state, a jitted sharded
initialisation and a jitted data-parallel x tensor-parallel training step, on a mesh with
Auto axes and on one with Explicit axes. Prints one JSON object: losses and parameters
(compared to a close tolerance) and every sharding as text (compared exactly)."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
from flax_common import recorder, train_step

results = {}
record = recorder(results)


def spec_text(tree):
    """Every array leaf's sharding spec (and the mesh's axis names), by path."""
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {jax.tree_util.keystr(path): str(leaf.sharding.spec) if hasattr(leaf, "sharding")
            and hasattr(leaf.sharding, "spec") else repr(leaf) for path, leaf in flat}


class FeedForward(nnx.Module):
    def __init__(self, width, hidden, *, mesh, rngs):
        self.mesh = mesh
        init = nnx.initializers.lecun_normal()
        self.up = nnx.Linear(width, hidden, use_bias=False, rngs=rngs,
                             kernel_init=nnx.with_partitioning(init, (None, "model")))
        self.down = nnx.Param(init(rngs.params(), (hidden, width)), sharding=("model", None))
        self.bias = nnx.Param(jnp.zeros((width,)), sharding=(None,))

    def __call__(self, x):
        h = nnx.relu(self.up(x))
        h = jax.lax.with_sharding_constraint(h, NamedSharding(self.mesh, P("data", "model")))
        if self.mesh.axis_types[0] == AxisType.Explicit:  # the contraction's result type
            return jnp.dot(h, self.down[...], out_sharding=P("data", None)) + self.bias[...]
        return jnp.dot(h, self.down[...]) + self.bias[...]


data_rng = np.random.default_rng(3)
x_np = data_rng.normal(size=(16, 32)).astype(np.float32)
y_np = data_rng.normal(size=(16, 32)).astype(np.float32)


def run(tag, axis_types):
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=axis_types)

    @nnx.jit
    def create():
        model = FeedForward(32, 64, mesh=mesh, rngs=nnx.Rngs(0))
        state = nnx.state(model)
        specs = nnx.get_partition_spec(state)
        nnx.update(model, jax.lax.with_sharding_constraint(state, specs))
        return model

    with jax.set_mesh(mesh):
        model = create()
        specs = jax.tree_util.tree_flatten_with_path(nnx.get_partition_spec(nnx.state(model)))[0]
        record(f"{tag}_partition_specs", {jax.tree_util.keystr(p): str(s) for p, s in specs})
        record(f"{tag}_param_shardings", spec_text(nnx.state(model)))
        record(f"{tag}_init_up", model.up.kernel[...])
        record(f"{tag}_init_down", model.down[...])
        opt = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
        x = jax.device_put(x_np, NamedSharding(mesh, P("data", None)))
        y = jax.device_put(y_np, NamedSharding(mesh, P("data", None)))
        out = nnx.jit(lambda m, x: m(x))(model, x)
        record(f"{tag}_forward", out)
        record(f"{tag}_forward_sharding", str(out.sharding.spec))
        losses = [train_step(model, opt, x, y) for _ in range(5)]
        record(f"{tag}_losses", np.asarray(losses))
        record(f"{tag}_loss_sharding", str(losses[-1].sharding.spec))
        record(f"{tag}_trained_shardings", spec_text(nnx.state(model)))
        record(f"{tag}_trained_opt_state_shardings", spec_text(nnx.state(opt, nnx.OptState)))
        record(f"{tag}_trained_down", model.down[...])


run("auto", (AxisType.Auto, AxisType.Auto))
run("explicit", (AxisType.Explicit, AxisType.Explicit))
print(json.dumps(results, sort_keys=True))

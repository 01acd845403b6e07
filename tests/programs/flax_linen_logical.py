"""flax.linen with logical axis names, as large-model codebases shard a transformer: parameters
boxed with nn.with_logical_partitioning, activations constrained with nn.with_logical_constraint,
rules mapping logical names to the axes of a (data, fsdp, tensor) mesh built by mesh_utils and
entered with `with mesh:`, a jitted sharded init from nn.logical_to_mesh_sharding, and a jitted
training step whose tied embedding is looked up by token and reused for the logits (its gradient
scatter-adds into rows split over a mesh axis). Prints one JSON object (see flax_common)."""
import functools
import json
import warnings

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax.linen import partitioning as nn_partitioning
from flax_common import recorder
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding

warnings.simplefilter("ignore", DeprecationWarning)  # `with mesh:` warns under JAX 0.10.2
results = {}
record = recorder(results)

RULES = (("batch", ("data", "fsdp")), ("length", None), ("act_embed", "tensor"), ("act_mlp", "tensor"),
         ("embed", "fsdp"), ("mlp", "tensor"), ("vocab", "tensor"), ("norm", None))
mesh = Mesh(mesh_utils.create_device_mesh((2, 2, 2)), ("data", "fsdp", "tensor"))


class Feedforward(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, x):
        init = nn.initializers.lecun_normal()
        w_in = self.param("w_in", nn.with_logical_partitioning(init, ("embed", "mlp")), (x.shape[-1], self.hidden))
        w_out = self.param("w_out", nn.with_logical_partitioning(init, ("mlp", "embed")), (self.hidden, x.shape[-1]))
        h = nn.gelu(jnp.einsum("ble,eh->blh", x, w_in))
        h = nn.with_logical_constraint(h, ("batch", "length", "act_mlp"))
        return jnp.einsum("blh,he->ble", h, w_out)


class TiedLM(nn.Module):
    vocab: int = 64
    width: int = 16

    @nn.compact
    def __call__(self, tokens):
        table = self.param("embedding", nn.with_logical_partitioning(nn.initializers.normal(0.5), ("vocab", "embed")),
                           (self.vocab, self.width))
        x = nn.with_logical_constraint(jnp.take(table, tokens, axis=0), ("batch", "length", "act_embed"))
        for i in range(2):
            norm = nn.LayerNorm(use_bias=False, name=f"norm_{i}",
                                scale_init=nn.with_logical_partitioning(nn.initializers.ones, ("norm",)))
            x = x + Feedforward(32, name=f"ff_{i}")(norm(x))
        return jnp.einsum("ble,ve->blv", x, table)


model = TiedLM()
tokens = jnp.asarray(np.random.default_rng(0).integers(0, 64, size=(8, 4)), jnp.int32)
abstract = jax.eval_shape(functools.partial(model.init, jax.random.PRNGKey(0)), tokens)
logical = nn.get_partition_spec(abstract)
record("logical_specs", str(logical))
with mesh, nn_partitioning.axis_rules(RULES):
    record("mesh_specs", str(nn.logical_to_mesh(logical)))
shardings = nn.logical_to_mesh_sharding(logical, mesh, RULES)
with mesh, nn_partitioning.axis_rules(RULES):
    params = jax.jit(model.init, out_shardings=shardings)(jax.random.PRNGKey(0), tokens)
record("param_shardings", str(jax.tree.map(lambda a: (a.shape, str(a.sharding.spec)), nn.unbox(params))))
record("boxed", type(params["params"]["embedding"]).__name__)


def loss_fn(params, tokens):
    logits = model.apply(params, tokens)
    labels = jax.nn.one_hot((tokens + 1) % 64, 64)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * labels, axis=-1))


data = NamedSharding(mesh, nn.logical_to_mesh_axes(("batch", "length"), RULES))
record("data_spec", str(data.spec))


@functools.partial(jax.jit, in_shardings=(shardings, data), out_shardings=(shardings, None))
def train_step(params, tokens):
    loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
    return jax.tree.map(lambda p, g: p - 0.5 * g, params, grads), loss


with mesh, nn_partitioning.axis_rules(RULES):
    grads = jax.jit(jax.grad(loss_fn))(params, tokens)
    record("embedding_grad", nn.unbox(grads)["params"]["embedding"])
    record("embedding_grad_eager", nn.unbox(jax.grad(loss_fn)(params, tokens))["params"]["embedding"])
    losses = []
    rng = np.random.default_rng(1)
    for _ in range(3):
        params, loss = train_step(params, jnp.asarray(rng.integers(0, 64, size=(8, 4)), jnp.int32))
        losses.append(float(loss))
record("losses", losses)
record("trained_ff0_w_in", nn.unbox(params)["params"]["ff_0"]["w_in"])
record("trained_sharding", str(nn.unbox(params)["params"]["ff_0"]["w_in"].sharding))
try:
    nn.logical_to_mesh_axes(("embed", "embed"), RULES)
except ValueError as e:
    record("repeated_axis_error", str(e))
print(json.dumps(results, sort_keys=True))

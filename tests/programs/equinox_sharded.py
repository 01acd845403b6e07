"""equinox as its users train with it: an MLP replicated and a batch split over 8 devices with
eqx.filter_shard (with_sharding_constraint under eqx.filter_jit, donating its inputs), optax's
adam, a small CNN with Conv2d/LayerNorm/Dropout trained with filter_value_and_grad and
filter_vmap, tree_at/partition/tree_equal, and eqx.error_if inside filter_jit (which closes
eval_shape over a tracer). Prints one JSON object (see flax_common for the recording)."""
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.sharding as jshard
import numpy as np
import optax
from flax_common import recorder

results = {}
record = recorder(results)

mesh = jax.make_mesh((8,), ("batch",), axis_types=(jshard.AxisType.Auto,))
batch_sharding = jshard.NamedSharding(mesh, jshard.PartitionSpec("batch"))
replicated = jshard.NamedSharding(mesh, jshard.PartitionSpec())
keys = jax.random.split(jax.random.PRNGKey(7), 4)
x = jax.random.normal(keys[0], (256, 1))
y = 3 * x - 1
model = eqx.nn.MLP(in_size=1, out_size=1, width_size=16, depth=2, key=keys[1])
adam = optax.adam(1e-2)
opt_state = adam.init(eqx.filter(model, eqx.is_inexact_array))


def mse(model, x, y):
    return jnp.mean((jax.vmap(model)(x) - y) ** 2)


@eqx.filter_jit(donate="all")
def fit_step(model, opt_state, x, y):
    model, opt_state = eqx.filter_shard((model, opt_state), replicated)
    x, y = eqx.filter_shard((x, y), batch_sharding)
    grads = eqx.filter_grad(mse)(model, x, y)
    updates, opt_state = adam.update(grads, opt_state)
    return eqx.filter_shard((eqx.apply_updates(model, updates), opt_state), replicated)


model, opt_state = eqx.filter_shard((model, opt_state), replicated)
record("replicated_spec", str(model.layers[0].weight.sharding.spec))
losses = []
for i in range(30):
    xb, yb = eqx.filter_shard((x[i % 4 * 64:][:64], y[i % 4 * 64:][:64]), batch_sharding)
    model, opt_state = fit_step(model, opt_state, xb, yb)
    losses.append(float(eqx.filter_jit(mse)(model, x, y)))
record("mlp_losses", losses)
record("batch_spec", str(xb.sharding.spec))
record("mlp_shardings", str(jax.tree.map(lambda a: str(a.sharding.spec), eqx.filter(model, eqx.is_array))))


class CNN(eqx.Module):
    conv: eqx.nn.Conv2d
    norm: eqx.nn.LayerNorm
    head: eqx.nn.Linear
    drop: eqx.nn.Dropout

    def __init__(self, key):
        k1, k2 = jax.random.split(key)
        self.conv = eqx.nn.Conv2d(1, 4, 3, padding=1, key=k1)
        self.norm = eqx.nn.LayerNorm((4, 8, 8))
        self.head = eqx.nn.Linear(4 * 8 * 8, 3, key=k2)
        self.drop = eqx.nn.Dropout(0.2)

    def __call__(self, x, *, key=None, inference=False):
        h = jax.nn.relu(self.norm(self.conv(x)))
        return self.head(self.drop(h.reshape(-1), key=key, inference=inference))


cnn = CNN(keys[2])
images = jax.random.normal(keys[3], (16, 1, 8, 8))
labels = jnp.arange(16) % 3


@eqx.filter_value_and_grad
def cross_entropy(model, images, labels, keys):
    logits = eqx.filter_vmap(lambda m, a, k: m(a, key=k), in_axes=(None, 0, 0))(model, images, keys)
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


adamw = optax.adamw(3e-3)
cnn_state = adamw.init(eqx.filter(cnn, eqx.is_inexact_array))


@eqx.filter_jit
def cnn_step(model, state, key):
    loss, grads = cross_entropy(model, images, labels, jax.random.split(key, 16))
    updates, state = adamw.update(grads, state, eqx.filter(model, eqx.is_inexact_array))
    return eqx.apply_updates(model, updates), state, loss


cnn_losses, key = [], jax.random.PRNGKey(0)
for _ in range(4):
    key, sub = jax.random.split(key)
    cnn, cnn_state, loss = cnn_step(cnn, cnn_state, sub)
    cnn_losses.append(float(loss))
record("cnn_losses", cnn_losses)
predict = eqx.filter_jit(eqx.filter_vmap(lambda m, a: m(a, inference=True), in_axes=(None, 0)))
record("cnn_logits", predict(cnn, images))
record("tree_at", str(eqx.tree_equal(eqx.tree_at(lambda m: m.head.bias, cnn, jnp.zeros(3)), cnn)))
params, static = eqx.partition(cnn, eqx.is_array)
record("partition", f"{len(jax.tree.leaves(params))} {type(static).__name__}")
checked = eqx.filter_jit(lambda a: eqx.error_if(a, a < 0, "negative!"))
record("error_if_ok", checked(jnp.ones(3)))
try:
    checked(-jnp.ones(3))
    record("error_if_raises", "none")
except Exception as e:  # noqa: BLE001 - the class is compared
    record("error_if_raises", type(e).__name__)
print(json.dumps(results, sort_keys=True))

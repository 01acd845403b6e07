"""flax.linen as its users write it: a Dense MLP with Dropout, BatchNorm and LayerNorm
(init, apply in train and eval modes with mutable batch statistics), a jitted training step
with optax, nn.scan over a recurrent cell with its parameters broadcast over the steps,
nn.remat, and lazy_init from shapes alone. Prints one JSON object (see flax_common)."""
import json

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax_common import recorder

results = {}
record = recorder(results)


class Classifier(nn.Module):
    hidden: int = 16

    @nn.compact
    def __call__(self, x, train: bool):
        x = nn.Dense(self.hidden)(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.8)(x)
        x = nn.relu(x)
        x = nn.Dropout(0.3, deterministic=not train)(x)
        x = nn.LayerNorm()(x)
        return nn.Dense(4)(x)


data_rng = np.random.default_rng(5)
x = jnp.asarray(data_rng.normal(size=(12, 6)).astype(np.float32))
labels = jnp.asarray(data_rng.integers(0, 4, size=(12,)))

model = Classifier()
variables = model.init(jax.random.key(0), x, train=False)
record("init_shapes", str(jax.tree.map(lambda a: tuple(a.shape), variables)))
record("init_dense0_kernel", variables["params"]["Dense_0"]["kernel"])
record("eval_logits", model.apply(variables, x, train=False))
train_logits, updates = model.apply(variables, x, train=True, mutable=["batch_stats"],
                                    rngs={"dropout": jax.random.key(1)})
record("train_logits", train_logits)
record("batch_stats_mean", updates["batch_stats"]["BatchNorm_0"]["mean"])

tx = optax.adamw(5e-3)


@jax.jit
def train_step(params, batch_stats, opt_state, key):
    def loss_fn(p):
        logits, new = model.apply({"params": p, "batch_stats": batch_stats}, x, train=True,
                                  mutable=["batch_stats"], rngs={"dropout": key})
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean(), new

    (loss, new), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    upd, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, upd), new["batch_stats"], opt_state, loss


params, stats = variables["params"], variables["batch_stats"]
opt_state = tx.init(params)
losses = []
for step in range(5):
    params, stats, opt_state, loss = train_step(params, stats, opt_state, jax.random.key(10 + step))
    losses.append(loss)
record("losses", np.asarray(losses))
record("trained_dense1_bias", params["Dense_1"]["bias"])
record("trained_running_var", stats["BatchNorm_0"]["var"])


class Cell(nn.Module):
    @nn.compact
    def __call__(self, carry, x):
        carry = nn.tanh(nn.Dense(5, name="recur")(carry) + nn.Dense(5, name="inp")(x))
        return carry, carry * 2


Unrolled = nn.scan(Cell, variable_broadcast="params", split_rngs={"params": False},
                   in_axes=1, out_axes=1)
seq = jnp.asarray(data_rng.normal(size=(3, 7, 2)).astype(np.float32))
carry0 = jnp.zeros((3, 5))
scan_vars = Unrolled().init(jax.random.key(2), carry0, seq)
record("scan_param_shapes", str(jax.tree.map(lambda a: tuple(a.shape), scan_vars)))
final, ys = Unrolled().apply(scan_vars, carry0, seq)
record("scan_final_carry", final)
record("scan_ys", ys)
scan_grad = jax.grad(lambda v: jnp.sum(Unrolled().apply(v, carry0, seq)[1] ** 2))(scan_vars)
record("scan_grad_recur_kernel", scan_grad["params"]["recur"]["kernel"])

Checkpointed = nn.remat(Classifier, static_argnums=(2,))  # self, x, train
remat_vars = Checkpointed().init(jax.random.key(3), x, False)
record("remat_eval", Checkpointed().apply(remat_vars, x, False))
remat_grad = jax.grad(lambda p: jnp.sum(Checkpointed().apply(
    {"params": p, "batch_stats": remat_vars["batch_stats"]}, x, False) ** 2))(remat_vars["params"])
record("remat_grad_dense0_kernel", remat_grad["Dense_0"]["kernel"])

lazy = Classifier().lazy_init(jax.random.key(0), jax.ShapeDtypeStruct((12, 6), jnp.float32),
                              train=False)
record("lazy_equals_init", bool(all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(
    jax.tree.leaves(lazy), jax.tree.leaves(variables)))))
try:
    nn.Dense(3).lazy_init(jax.random.key(0), jax.ShapeDtypeStruct((2, 3), jnp.float32),
                          method=lambda m, v: m.param("bad", lambda k: v.sum()))
    record("lazy_dependent_error", "none")
except Exception as e:  # noqa: BLE001 - the class is compared
    record("lazy_dependent_error", type(e).__name__)

print(json.dumps(results, sort_keys=True))

"""HSDP (hybrid sharded data parallelism) with microbatched gradient
accumulation, written once against a module `jax` (meshsim or JAX) on the
seed notebook's MLP (examples/ex_training.py).

The 2-D mesh ("replica", "fsdp") = (2, 4): every weight is split over "fsdp"
(dim 0) and replicated over "replica"; the batch is split over both axes. One
training step is `jit(shard_map(...))`: each device scans over its
microbatches (`lax.scan`), and per microbatch takes the gradient of its local
loss, the weights all-gathered over "fsdp" in the forward pass under
`checkpoint` (so the backward pass gathers them again instead of keeping
them, and the all-gather's transpose reduce-scatters the gradient over
"fsdp"). The shard-sized gradients accumulate in the scan's carry; after the
loop they are averaged over "replica" once (`pmean`). Weights are cast to
varying over "replica" before differentiating, so the per-microbatch
gradients stay per-replica until that single all-reduce.

`run()` returns (name, meshsim value, NumPy value) triples for
examples/run_all.py: loss and gradients against the NumPy backprop of the
whole batch (ex_training.numpy_loss_and_grads)."""
from __future__ import annotations

from functools import partial

import numpy as np

try:
    import ex_training
except ImportError:  # imported as examples.ex_hsdp
    from examples import ex_training

MESH_SHAPE = (2, 4)
BATCH = 64  # 8 examples per device: 1, 2, 4 or 8 microbatches


def build(jax, num_microbatches=2):
    jnp, lax = jax.numpy, jax.lax
    P = jax.sharding.PartitionSpec
    base = ex_training.build(jax)
    Model, Linear, Batch, model = base["Model"], base["Linear"], base["Batch"], base["model"]
    batch = model.init_random_batch(key=jax.random.key(1), batch_size=BATCH)
    mesh = jax.make_mesh(MESH_SHAPE, ("replica", "fsdp"))
    num_fsdp = MESH_SHAPE[1]

    model_specs = Model(layer_sizes=model.layer_sizes,
                        layers=[Linear(w=P("fsdp", None), b=P("fsdp"))] * model.num_layers)
    batch_specs = Batch(inputs=P(("replica", "fsdp"), None), targets=P(("replica", "fsdp"), None))

    @partial(jax.checkpoint, policy=lambda p, *_, **__: p.name != "all_gather")
    def linear_hsdp(x, layer):
        w = lax.all_gather(layer.w, "fsdp", axis=0, tiled=True)
        b = lax.all_gather(layer.b, "fsdp", axis=0, tiled=True)
        return x @ w + b

    def microbatch_loss(model_shard, mb):
        preds = model_shard.predict(mb.inputs, linear_fwd_fn=linear_hsdp)
        return jnp.mean(jnp.sum((preds - mb.targets) ** 2, axis=-1))

    @jax.jit
    @partial(jax.shard_map, mesh=mesh, in_specs=(model_specs, batch_specs),
             out_specs=(P(), model_specs))
    def train_step(model_shard, batch_shard):
        # Per-replica gradients until the single all-reduce after the loop.
        model_local = jax.tree.map(lambda w: lax.pcast(w, "replica", to="varying"), model_shard)
        microbatches = jax.tree.map(
            lambda x: x.reshape(num_microbatches, x.shape[0] // num_microbatches, *x.shape[1:]),
            batch_shard)

        def accumulate(carry, mb):
            loss_sum, grad_sum = carry
            loss, grads = jax.value_and_grad(microbatch_loss)(model_local, mb)
            return (loss_sum + loss, jax.tree.map(jnp.add, grad_sum, grads)), None

        # The carry's type: varying over both axes, as each device's loss and
        # gradients are (zeros_like keeps its operand's type).
        zeros = (lax.pcast(jnp.zeros(()), ("replica", "fsdp"), to="varying"),
                 jax.tree.map(jnp.zeros_like, model_local))
        (loss_sum, grad_sum), _ = lax.scan(accumulate, zeros, microbatches)
        # Mean over microbatches and devices: the reduce-scatters already
        # summed the gradients over "fsdp"; pmean averages over "replica".
        loss = lax.pmean(loss_sum / num_microbatches, ("replica", "fsdp"))
        grads = jax.tree.map(lambda g: lax.pmean(g, "replica") / (num_microbatches * num_fsdp), grad_sum)
        return loss, grads

    def place(tree, specs):
        NS = jax.sharding.NamedSharding
        return jax.tree.map(lambda x, s: jax.device_put(x, NS(mesh, s)), tree, specs,
                            is_leaf=lambda s: isinstance(s, P))

    def step(model=model, batch=batch):
        return train_step(place(model, model_specs), place(batch, batch_specs))

    return dict(jax=jax, mesh=mesh, model=model, batch=batch, step=step, train_step=train_step,
                model_specs=model_specs, batch_specs=batch_specs,
                loss_baseline=base["loss_baseline"])


def run():
    """Loss and gradients of 1, 2 and 4 microbatches against the NumPy backprop."""
    import meshsim

    checks = []
    for m in (1, 2, 4):
        env = build(meshsim, num_microbatches=m)
        loss, grads = numpy_reference(env)
        got_loss, got_grads = env["step"]()
        checks.append((f"hsdp_{m}mb loss", np.asarray(got_loss), loss))
        for i, (layer, (dw, db)) in enumerate(zip(got_grads.layers, grads)):
            checks.append((f"hsdp_{m}mb dw{i}", np.asarray(layer.w), dw))
            checks.append((f"hsdp_{m}mb db{i}", np.asarray(layer.b), db))
    return checks


def numpy_reference(env):
    return ex_training.numpy_loss_and_grads(*ex_training.as_numpy(env["model"], env["batch"]))


if __name__ == "__main__":
    for name, ours, ref in run():
        print(f"{name:16s} max |diff| = {np.max(np.abs(ours - ref)):.2e}")

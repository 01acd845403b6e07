"""The seed notebook's MLP (layer sizes (32, 128, 256, 128, 4), batch 16, its
init from `random.key(0)`, MSE loss) and its baseline / DP / FSDP (two weight
layouts) / TP / FSDP+TP `jit(value_and_grad(shard_map(...)))` steps, written
once against a module `jax` (meshsim or JAX), plus an independent NumPy
backprop. tests/test_training.py and benchmarks/bench_training.py use it;
`run()` checks every strategy's loss and gradients against NumPy for
examples/run_all.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np

LAYER_SIZES = (32, 128, 256, 128, 4)
BATCH = 16


def build(jax, check_vma=True):
    jnp = jax.numpy
    P = jax.sharding.PartitionSpec

    @jax.tree_util.register_dataclass
    @dataclass
    class Linear:
        w: object
        b: object

    @jax.tree_util.register_dataclass
    @dataclass
    class Batch:
        inputs: object
        targets: object

    @jax.tree_util.register_dataclass
    @dataclass
    class Model:
        layers: list
        layer_sizes: tuple = field(metadata={"static": True})

        def __init__(self, layer_sizes, key=None, layers=None):
            self.layer_sizes = layer_sizes
            self.key = key
            if layers is not None:
                self.layers = layers
            elif key is not None:
                self._init_weights()
            else:
                self.layers = []

        @property
        def num_layers(self):
            return len(self.layer_sizes) - 1

        def _init_weights(self):
            keys = jax.random.split(self.key, self.num_layers)
            self.layers = []
            for k, n_in, n_out in zip(keys, self.layer_sizes[:-1], self.layer_sizes[1:]):
                k1, k2 = jax.random.split(k)
                w = jax.random.normal(k1, (n_in, n_out)) / jnp.sqrt(n_in)
                b = jax.random.normal(k2, (n_out,))
                self.layers.append(Linear(w, b))

        def predict(self, inputs, linear_fwd_fn):
            x = inputs
            for layer in self.layers:
                x = linear_fwd_fn(x, layer)
                x = jax.nn.relu(x)
            return x

        def init_random_batch(self, key, batch_size=32):
            k1, k2 = jax.random.split(key)
            inputs = jax.random.normal(k1, (batch_size, self.layer_sizes[0]))
            targets = jax.random.normal(k2, (batch_size, self.layer_sizes[-1]))
            return Batch(inputs, targets)

    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    key_model, key_batch = jax.random.split(jax.random.key(0))
    model = Model(layer_sizes=LAYER_SIZES, key=key_model)
    batch = model.init_random_batch(key=key_batch, batch_size=BATCH)

    def model_spec(linear_pspec):
        return Model(layer_sizes=model.layer_sizes, layers=[linear_pspec] * model.num_layers)

    def smap(in_specs):
        return partial(jax.shard_map, mesh=mesh, in_specs=in_specs, out_specs=P(),
                       check_vma=check_vma)

    def linear(x, layer):
        return x @ layer.w + layer.b

    @jax.jit
    @partial(jax.value_and_grad, argnums=0)
    def loss_baseline(model, batch):
        preds = model.predict(batch.inputs, linear_fwd_fn=linear)
        return jnp.mean(jnp.sum((preds - batch.targets) ** 2, axis=-1))

    strategies = {}

    # Data parallel
    dp_specs = (model_spec(Linear(w=P(), b=P())),
                Batch(inputs=P(("dp", "tp"), None), targets=P(("dp", "tp"), None)))

    @jax.jit
    @jax.value_and_grad
    @smap(dp_specs)
    def loss_dp(model_sharded, batch_sharded):
        preds = model_sharded.predict(batch_sharded.inputs, linear_fwd_fn=linear)
        loss_per_example = jnp.sum((preds - batch_sharded.targets) ** 2, axis=-1)
        loss_local = jnp.mean(loss_per_example)
        return jax.lax.pmean(loss_local, ("dp", "tp"))

    strategies["dp"] = (loss_dp, dp_specs)

    # FSDP, weights sharded over (dp, tp) on dim 0
    fsdp_specs = (model_spec(Linear(w=P(("dp", "tp"), None), b=P("tp"))),
                  Batch(inputs=P(("dp", "tp"), None), targets=P(("dp", "tp"), None)))

    @partial(jax.checkpoint, policy=lambda p, *_, **__: p.name != "all_gather")
    def linear_fsdp(x, layer):
        w = jax.lax.all_gather(layer.w, ("dp", "tp"), axis=0, tiled=True)
        b = jax.lax.all_gather(layer.b, "tp", axis=0, tiled=True)
        return x @ w + b

    @jax.jit
    @jax.value_and_grad
    @smap(fsdp_specs)
    def loss_fsdp(model_sharded, batch_sharded):
        preds = model_sharded.predict(batch_sharded.inputs, linear_fwd_fn=linear_fsdp)
        loss_per_example = jnp.sum((preds - batch_sharded.targets) ** 2, axis=-1)
        loss_local = jnp.mean(loss_per_example)
        return jax.lax.pmean(loss_local, ("dp", "tp"))

    strategies["fsdp"] = (loss_fsdp, fsdp_specs)

    # FSDP, weights sharded 2-D: dim 0 over dp, dim 1 over tp
    fsdp2_specs = (model_spec(Linear(w=P("dp", "tp"), b=P("tp"))),
                   Batch(inputs=P(("dp", "tp"), None), targets=P(("dp", "tp"), None)))

    @partial(jax.checkpoint, policy=lambda p, *_, **__: p.name != "all_gather")
    def linear_fsdp2(x, layer):
        w_partial = jax.lax.all_gather(layer.w, "tp", axis=1, tiled=True)
        w = jax.lax.all_gather(w_partial, "dp", axis=0, tiled=True)
        b = jax.lax.all_gather(layer.b, "tp", axis=0, tiled=True)
        return x @ w + b

    @jax.jit
    @jax.value_and_grad
    @smap(fsdp2_specs)
    def loss_fsdp2(model_sharded, batch_sharded):
        preds = model_sharded.predict(batch_sharded.inputs, linear_fwd_fn=linear_fsdp2)
        loss_per_example = jnp.sum((preds - batch_sharded.targets) ** 2, axis=-1)
        loss_local = jnp.mean(loss_per_example)
        return jax.lax.pmean(loss_local, ("dp", "tp"))

    strategies["fsdp_2d"] = (loss_fsdp2, fsdp2_specs)

    # Tensor parallel
    tp_specs = (model_spec(Linear(w=P("tp", None), b=P("tp"))),
                Batch(inputs=P(None, "tp"), targets=P(None, "tp")))

    def linear_tp(x, layer):
        matmul_local = x @ layer.w
        matmul_reduce_scattered = jax.lax.psum_scatter(
            matmul_local, "tp", scatter_dimension=1, tiled=True)
        return matmul_reduce_scattered + layer.b

    @jax.jit
    @partial(jax.value_and_grad, argnums=0)
    @smap(tp_specs)
    def loss_tp(model_sharded, batch_sharded):
        preds = model_sharded.predict(batch_sharded.inputs, linear_fwd_fn=linear_tp)
        loss_local = jnp.sum((preds - batch_sharded.targets) ** 2, axis=-1)
        loss_per_example = jax.lax.psum(loss_local, "tp")
        return jnp.mean(loss_per_example)

    strategies["tp"] = (loss_tp, tp_specs)

    # FSDP + TP
    fsdp_tp_specs = (model_spec(Linear(w=P(("tp", "dp"),), b=P("tp"))),
                     Batch(inputs=P("dp", "tp"), targets=P("dp", "tp")))

    @partial(jax.checkpoint, policy=lambda p, *_, **__: p.name != "all_gather")
    def linear_fsdp_tp(x, layer):
        w = jax.lax.all_gather(layer.w, "dp", axis=0, tiled=True)
        b = layer.b
        matmul_local = x @ w
        matmul_local_reduce_scattered = jax.lax.psum_scatter(
            matmul_local, "tp", scatter_dimension=1, tiled=True)
        return matmul_local_reduce_scattered + b

    @jax.jit
    @jax.value_and_grad
    @smap(fsdp_tp_specs)
    def loss_fsdp_tp(model_sharded, batch_sharded):
        preds = model_sharded.predict(batch_sharded.inputs, linear_fwd_fn=linear_fsdp_tp)
        loss_local = jnp.sum((preds - batch_sharded.targets) ** 2, axis=-1)
        loss_per_example = jax.lax.psum(loss_local, "tp")
        return jax.lax.pmean(jnp.mean(loss_per_example), axis_name="dp")

    strategies["fsdp_tp"] = (loss_fsdp_tp, fsdp_tp_specs)

    def place(tree, specs):
        """Puts each leaf of `tree` as its spec in `specs` says (JAX's Explicit
        mesh shard_map wants its inputs laid out as the in_specs)."""
        NS = jax.sharding.NamedSharding
        return jax.tree.map(lambda x, s: jax.device_put(x, NS(mesh, s)), tree, specs,
                            is_leaf=lambda s: isinstance(s, P))

    return dict(jax=jax, check_vma=check_vma, mesh=mesh, Model=Model, Linear=Linear, Batch=Batch, model=model,
                batch=batch, loss_baseline=loss_baseline, strategies=strategies, place=place)


STRATEGIES = ("dp", "fsdp", "fsdp_2d", "tp", "fsdp_tp")


def as_numpy(model, batch):
    """(weights [(w, b), ...], inputs, targets) as float64 NumPy arrays."""
    layers = [(np.asarray(l.w, np.float64), np.asarray(l.b, np.float64)) for l in model.layers]
    return layers, np.asarray(batch.inputs, np.float64), np.asarray(batch.targets, np.float64)


def numpy_loss_and_grads(layers, x, t):
    """The MLP's loss and its gradients [(dw, db), ...] by hand-written
    backprop: h = relu(h @ w + b) for every layer, loss = mean over the batch
    of sum((h - t) ** 2)."""
    hs, zs = [x], []
    for w, b in layers:
        zs.append(hs[-1] @ w + b)
        hs.append(np.maximum(zs[-1], 0.0))
    loss = np.mean(np.sum((hs[-1] - t) ** 2, axis=-1))
    dh = 2.0 * (hs[-1] - t) / x.shape[0]
    grads = []
    for (w, b), z, h in zip(reversed(layers), reversed(zs), reversed(hs[:-1])):
        dz = dh * (z > 0)
        grads.append((h.T @ dz, dz.sum(axis=0)))
        dh = dz @ w.T
    return loss, grads[::-1]


def run():
    """Each strategy's loss and gradients against the NumPy backprop."""
    import meshsim

    env = build(meshsim)
    layers, x, t = as_numpy(env["model"], env["batch"])
    loss, grads = numpy_loss_and_grads(layers, x, t)
    checks = []
    for name in ("baseline",) + STRATEGIES:
        if name == "baseline":
            l, g = env["loss_baseline"](env["model"], env["batch"])
        else:
            f, (mspec, bspec) = env["strategies"][name]
            l, g = f(env["place"](env["model"], mspec), env["place"](env["batch"], bspec))
        checks.append((f"{name} loss", l, loss))
        for i, (layer, (dw, db)) in enumerate(zip(g.layers, grads)):
            checks.append((f"{name} dw{i}", layer.w, dw))
            checks.append((f"{name} db{i}", layer.b, db))
    return checks

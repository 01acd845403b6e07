"""A small CNN (conv 3x3 -> batch norm -> relu -> max pool 2x2, conv 3x3 ->
batch norm -> relu -> average pool 2x2, dense -> softmax cross-entropy) on
16x16 RGB images in NHWC layout, trained data-parallel with SGD, written once
against a module `jax` (meshsim or JAX). Two data-parallel forms of the same
step: `shard_map` over the batch (batch-norm statistics and the loss averaged
with `pmean`; the replicated parameters' gradients summed by the transposed
`pvary`s), and Explicit sharding (the batch laid out over 'dp', everything
else propagated from the types). tests/test_cnn.py and benchmarks/bench_cnn.py
use it; `run()` trains both forms for a few steps."""
from __future__ import annotations

from functools import partial

import numpy as np

BATCH, SIZE, CHANNELS, CLASSES = 32, 16, 3, 10
WIDTHS = (16, 32)
LEARNING_RATE = 0.1
EPS = 1e-5


def init_params(jax, key):
    """He-initialised filters (HWIO), batch-norm scales/offsets and the classifier."""
    jnp = jax.numpy
    k1, k2, k3 = jax.random.split(key, 3)
    c1, c2 = WIDTHS
    flat = (SIZE // 4) * (SIZE // 4) * c2
    return {
        "conv1": jax.random.normal(k1, (3, 3, CHANNELS, c1)) * np.sqrt(2 / (9 * CHANNELS)),
        "bn1": {"scale": jnp.ones(c1), "offset": jnp.zeros(c1)},
        "conv2": jax.random.normal(k2, (3, 3, c1, c2)) * np.sqrt(2 / (9 * c1)),
        "bn2": {"scale": jnp.ones(c2), "offset": jnp.zeros(c2)},
        "dense": {"w": jax.random.normal(k3, (flat, CLASSES)) / np.sqrt(flat), "b": jnp.zeros(CLASSES)},
    }


def make_batch(seed=0, batch=BATCH):
    """Images and integer labels (class-dependent mean, so the loss can fall)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, batch).astype(np.int32)
    images = rng.standard_normal((batch, SIZE, SIZE, CHANNELS)).astype(np.float32)
    images += (labels[:, None, None, None] / CLASSES - 0.5).astype(np.float32)
    return images, labels


def build(jax):
    """The forward pass and both data-parallel training steps for library `jax`."""
    jnp, lax = jax.numpy, jax.lax
    P = jax.sharding.PartitionSpec

    def conv(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def batch_norm(x, bn, mean_fn):
        mean = mean_fn(jnp.mean(x, axis=(0, 1, 2)))
        var = mean_fn(jnp.mean(jnp.square(x), axis=(0, 1, 2))) - jnp.square(mean)
        return (x - mean) * lax.rsqrt(var + EPS) * bn["scale"] + bn["offset"]

    def max_pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def avg_pool(x):
        return lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0

    def loss_fn(params, images, labels, mean_fn=lambda v: v):
        x = max_pool(jax.nn.relu(batch_norm(conv(images, params["conv1"]), params["bn1"], mean_fn)))
        x = avg_pool(jax.nn.relu(batch_norm(conv(x, params["conv2"]), params["bn2"], mean_fn)))
        logits = x.reshape(x.shape[0], -1) @ params["dense"]["w"] + params["dense"]["b"]
        logp = jax.nn.log_softmax(logits)
        nll = -jnp.take_along_axis(logp, labels[:, None], axis=1)[:, 0]
        return mean_fn(jnp.mean(nll))

    def sgd(params, grads):
        return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)

    def shard_map_step(mesh):
        pmean = partial(lax.pmean, axis_name="dp")

        @jax.jit
        def step(params, images, labels):
            def local(params, images, labels):
                return jax.value_and_grad(loss_fn)(params, images, labels, pmean)

            loss, grads = jax.shard_map(local, mesh=mesh, in_specs=(P(), P("dp"), P("dp")),
                                        out_specs=(P(), P()))(params, images, labels)
            return loss, sgd(params, grads)

        return step

    @jax.jit
    def explicit_step(params, images, labels):
        loss, grads = jax.value_and_grad(loss_fn)(params, images, labels)
        return loss, sgd(params, grads)

    return {"loss_fn": loss_fn, "shard_map_step": shard_map_step, "explicit_step": explicit_step}


def train(jax, form, steps=3, seed=0):
    """Losses of `steps` SGD steps of `form` ('shard_map' or 'explicit') on 8
    devices, and the final parameters (as NumPy)."""
    mesh = jax.make_mesh((8,), ("dp",))
    env = build(jax)
    images, labels = make_batch(seed)
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("dp"))
    losses = []
    with jax.set_mesh(mesh):
        params = init_params(jax, jax.random.key(seed))
        images, labels = jax.device_put(images, sharding), jax.device_put(labels, sharding)
        step = env["shard_map_step"](mesh) if form == "shard_map" else env["explicit_step"]
        for _ in range(steps):
            loss, params = step(params, images, labels)
            losses.append(float(loss))
    return losses, jax.tree.map(np.asarray, params)


def numpy_loss(params, images, labels):
    """The same forward pass and loss in float64 NumPy, the reference of `run()`."""
    p = {k: (np.asarray(v, np.float64) if not isinstance(v, dict)
             else {n: np.asarray(a, np.float64) for n, a in v.items()}) for k, v in params.items()}

    def conv(x, w):  # 'SAME' 3x3, stride 1: pad by one and sum over every window
        padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))
        return np.einsum("nhwcij,ijco->nhwo", windows, w)

    def batch_norm(x, bn):
        mean = x.mean(axis=(0, 1, 2))
        var = np.square(x).mean(axis=(0, 1, 2)) - np.square(mean)
        return (x - mean) / np.sqrt(var + EPS) * bn["scale"] + bn["offset"]

    def pool(x, reduce):
        n, h, w, c = x.shape
        return reduce(x.reshape(n, h // 2, 2, w // 2, 2, c), axis=(2, 4))

    x = pool(np.maximum(batch_norm(conv(np.asarray(images, np.float64), p["conv1"]), p["bn1"]), 0), np.max)
    x = pool(np.maximum(batch_norm(conv(x, p["conv2"]), p["bn2"]), 0), np.mean)
    logits = x.reshape(x.shape[0], -1) @ p["dense"]["w"] + p["dense"]["b"]
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(labels)), labels].mean()


def run():
    """Both forms train (the loss falls), and the loss at the initial and at
    each form's trained parameters agrees with the NumPy forward pass."""
    import meshsim
    images, labels = make_batch()
    loss_fn = build(meshsim)["loss_fn"]
    initial = init_params(meshsim, meshsim.random.key(0))
    checks = [("loss at initial parameters", loss_fn(initial, images, labels),
               numpy_loss(initial, images, labels))]
    for form in ("shard_map", "explicit"):
        losses, params = train(meshsim, form, steps=5)
        assert losses[-1] < losses[0], (form, losses)
        checks.append((f"{form}: loss after 5 steps", loss_fn(params, images, labels),
                       numpy_loss(params, images, labels)))
    return checks


if __name__ == "__main__":
    for name, ours, reference in run():
        print(f"{name}: {float(ours):.6f} (NumPy {float(reference):.6f})")

"""A small MLP trained batch by batch: the variational autoencoder of JAX's
examples/mnist_vae.py (stax encoder 784-512-512-(10, 10), decoder
10-512-512-784, batch 32, momentum optimizer), meshsim against JAX on CPU,
the same code under both. Each jitted piece (encode, decode, the gradient of
the ELBO, the momentum update) and one whole training step (gradient, then
update) is called and its result awaited, as a training loop that reads its
loss does, so a call's wall time includes handing the program to another
thread and waking the reader, if the runtime does that. Calls interleaved so
machine noise hits both alike; wall and CPU time (all threads) per call, the
best of the samples.

Run: PYTHONPATH=python python3 benchmarks/bench_small_mlp.py [--repeats N]"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _timing import (  # noqa: E402
    configure_jax_cpu,
    interleaved_wall_and_cpu,
    load_average,
    print_wall_and_cpu,
)

configure_jax_cpu(8)
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

BATCH = 32


def pieces(jax):
    """{name: thunk}: each jitted piece on fixed inputs, its result awaited."""
    jnp, random = jax.numpy, jax.random
    optimizers = importlib.import_module(f"{jax.__name__}.example_libraries.optimizers")
    stax = importlib.import_module(f"{jax.__name__}.example_libraries.stax")
    Dense, FanOut, Relu, Softplus = stax.Dense, stax.FanOut, stax.Relu, stax.Softplus

    encoder_init, encode = stax.serial(
        Dense(512), Relu, Dense(512), Relu, FanOut(2),
        stax.parallel(Dense(10), stax.serial(Dense(10), Softplus)))
    decoder_init, decode = stax.serial(Dense(512), Relu, Dense(512), Relu, Dense(28 * 28))

    def elbo(rng, params, images):
        enc, dec = params
        mu, sigmasq = encode(enc, images)
        logits = decode(dec, mu + jnp.sqrt(sigmasq) * random.normal(rng, mu.shape))
        log_px = -jnp.sum(jnp.logaddexp(0., jnp.where(images, -1., 1.) * logits))
        kl = -0.5 * jnp.sum(1. + jnp.log(sigmasq) - mu ** 2. - sigmasq)
        return log_px - kl

    enc_key, dec_key = random.split(random.key(2))
    _, enc = encoder_init(enc_key, (BATCH, 28 * 28))
    _, dec = decoder_init(dec_key, (BATCH, 10))
    params = (enc, dec)
    rng = random.key(0)
    images = random.bernoulli(rng, jnp.full((BATCH, 28 * 28), 0.4))
    opt_init, opt_update, get_params = optimizers.momentum(1e-3, mass=0.9)
    state = opt_init(params)

    grad = jax.jit(jax.grad(lambda p, x: -elbo(rng, p, x) / BATCH))
    update = jax.jit(lambda g, s: opt_update(0, g, s))
    encode_j, decode_j = jax.jit(encode), jax.jit(decode)
    code = jnp.ones((BATCH, 10))
    g = grad(params, images)

    def step():
        return update(grad(get_params(state), images), state)

    calls = {
        "encode": lambda: encode_j(enc, images),
        "decode": lambda: decode_j(dec, code),
        "grad of the ELBO": lambda: grad(params, images),
        "momentum update": lambda: update(g, state),
        "training step": step,
    }
    return {name: (lambda f=f: jax.block_until_ready(f())) for name, f in calls.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--number", type=int, default=10, help="calls per sample")
    args = parser.parse_args()

    import jax as real_jax
    import meshsim

    ours, theirs = pieces(meshsim), pieces(real_jax)
    calls = {}
    for name in ours:
        calls[("meshsim", name)], calls[("jax", name)] = ours[name], theirs[name]
        for a, b in zip(meshsim.tree.leaves(ours[name]()), real_jax.tree.leaves(theirs[name]())):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-5, rtol=2e-5, err_msg=name)

    load_before = load_average()
    samples = interleaved_wall_and_cpu(calls, args.repeats, args.number)
    print(f"mnist_vae's MLP (batch {BATCH}), each call awaited; best of {args.repeats} interleaved "
          f"samples of {args.number} calls; {load_before} before, {load_average()} after\n")
    print_wall_and_cpu(samples, ours, label="piece", width=20, per="call")


if __name__ == "__main__":
    main()

"""An interleaved pipeline for dry runs: a Llama decoder (examples/ex_planning.py)
split into `pp * virtual` chunks of layers, chunk r * pp + s on pipeline rank s,
written once against a module `jax` (meshsim or JAX) in ordinary JAX.

The schedule is Megatron-LM's interleaved one (Narayanan et al. 2021, section
2.2.2) in lock step: microbatches go through the ranks in groups of pp; rank s at
tick t runs chunk r of microbatch g * pp + j, where t - s = g * pp * v + r * pp + j,
and hands its output to rank s + 1 (rank pp - 1 to rank 0, for the next chunk)
with a ppermute around the ring. m microbatches (a multiple of pp) take
m * v + pp - 1 ticks of 1/v of a stage's layers each: the bubble is
(pp - 1) / (m v), v times smaller than GPipe's or 1F1B's. The backward pass is
autodiff of the forward scan (all forwards, then all backwards, as GPipe), every
layer rematerialised: the same ticks, so the same time as the interleaved 1F1B
schedule, with more activations held.

Data parallelism over "dp": every replica holds its stage's weights, the float32
gradients are summed over "dp" once after the last microbatch; tensor
parallelism over "tp" with the residual stream split over it (Megatron's
sequence parallelism)."""
from __future__ import annotations

import numpy as np

from ex_planning import LlamaConfig, _adam, _cast, _llama_layer, jit_train_step


def tick_work(xp, t, stage, pp: int, virtual: int, microbatches: int):
    """(valid, chunk, microbatch) that rank `stage` runs at tick t, with the
    array module `xp` (NumPy, or jax.numpy on traced ticks)."""
    u = t - stage
    valid = (u >= 0) & (u < microbatches * virtual)
    u = xp.clip(u, 0, microbatches * virtual - 1)
    group, rest = u // (pp * virtual), u % (pp * virtual)
    return valid, rest // pp, group * pp + rest % pp


def llama_pipeline_step(jax, cfg: LlamaConfig, mesh, microbatches: int, virtual: int,
                        dtype=None, param_dtype=np.float32):
    """A training step (forward, backward, Adam) of `cfg` over a mesh with axes
    "pp", "dp", "tp"; `microbatches` per replica, each of cfg.batch / (dp *
    microbatches) sequences; `virtual` chunks per pipeline rank."""
    jnp, lax = jax.numpy, jax.lax
    dtype = jnp.bfloat16 if dtype is None else dtype
    P = jax.sharding.PartitionSpec
    pp, dp, tp = mesh.shape["pp"], mesh.shape["dp"], mesh.shape["tp"]
    m, v = microbatches, virtual
    if m % pp or cfg.layers % (pp * v):
        raise ValueError(f"microbatches ({m}) must be a multiple of pp ({pp}) and layers "
                         f"({cfg.layers}) of pp * virtual ({pp * v})")
    h, nh, nkv = cfg.hidden, cfg.heads, cfg.kv_heads
    dh = cfg.head_dim or h // nh
    kv_local = max(nkv // tp, 1)
    sp = cfg.sequence_parallel and tp > 1
    ticks = m * v + pp - 1
    # (the ticks at which the last rank runs the last chunk of microbatch 0, 1, ...)
    last = [(t, i) for t in range(ticks) for valid, chunk, i in [tick_work(np, t, pp - 1, pp, v, m)]
            if valid and chunk == v - 1]
    finishing_ticks = np.array([t for t, _ in sorted(last, key=lambda ti: ti[1])])
    # The weights arrive in `dtype` (one cast per step, shared by the microbatches).
    remat_block, nll = _llama_layer(jax, cfg, tp, lambda w, axis: w, dtype)

    def loss_fn(params, xs, targets):
        stage = lax.axis_index("pp")
        half = _cast(jax, params, dtype)
        chunks = jax.tree.map(lambda w: w[0], half["layers"])  # [v, layers per chunk, ...]

        def step(state, t):
            valid, chunk, i = tick_work(jnp, t, stage, pp, v, m)
            fresh = lax.dynamic_index_in_dim(xs, i, keepdims=False)
            inp = jnp.where((stage == 0) & (chunk == 0), fresh, state)
            layers = jax.tree.map(lambda w: lax.dynamic_index_in_dim(w, chunk, keepdims=False), chunks)
            out = lax.scan(lambda x, p: (remat_block(x, p), None), inp, layers)[0]
            ring = [(s, (s + 1) % pp) for s in range(pp)]
            return lax.ppermute(out, "pp", ring), out

        _, outs = lax.scan(step, jnp.zeros_like(xs[0]), jnp.arange(ticks))
        # The last rank finishes microbatch i at a tick known beforehand: the loss
        # runs once per microbatch on those outputs, after the loop.
        done = outs[finishing_ticks]  # [m, rows, seq, h]
        loss = nll(done.reshape((-1,) + done.shape[2:]), half["gf"], half["emb"],
                   targets.reshape((-1,) + targets.shape[2:]))
        return jnp.where(stage == pp - 1, loss, 0.0)  # this rank's part of the loss

    def train_step(params, opt_m, opt_v, xs, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, xs, targets)
        # Replicas average their gradients; the head's, used on the last rank only,
        # are summed over the ranks too.
        grads = {"layers": jax.tree.map(lambda g: lax.psum(g, "dp") / dp, grads["layers"]),
                 **{k: lax.psum(grads[k], ("pp", "dp")) / dp for k in ("emb", "gf")}}
        params, opt_m, opt_v = _adam(jax, params, grads, opt_m, opt_v)
        return lax.psum(loss, ("pp", "dp")) / dp, params, opt_m, opt_v

    lc, f = cfg.layers // (pp * v), cfg.ffn
    lead = (pp, v, lc)
    shapes = {
        "g1": (lead + (h,), P("pp", None, None, None)), "g2": (lead + (h,), P("pp", None, None, None)),
        "wq": (lead + (h, nh * dh), P("pp", None, None, None, "tp")),
        "wkv": (lead + (h, 2 * kv_local * tp * dh), P("pp", None, None, None, "tp")),
        "wo": (lead + (nh * dh, h), P("pp", None, None, "tp", None)),
        "wgu": (lead + (h, 2 * f), P("pp", None, None, None, "tp")),
        "wd": (lead + (f, h), P("pp", None, None, "tp", None)),
    }
    top = {"emb": ((cfg.vocab, h), P("tp", None)), "gf": ((h,), P(None))}
    rows = cfg.batch // m  # sequences per microbatch, over all replicas
    data = (((m, rows, cfg.seq, h), P(None, "dp", "tp" if sp else None, None)),
            ((m, rows, cfg.seq), P(None, "dp", None)))
    return jit_train_step(jax, train_step, mesh, shapes, top, data, dtype, param_dtype)


TINY_LLAMA = LlamaConfig(layers=8, hidden=16, ffn=24, heads=4, kv_heads=2, vocab=32, seq=8,
                         batch=8, head_dim=4, attention="dot", remat="full", sequence_parallel=True)


def run():
    """The interleaved pipeline run for real on the simulated devices (pp 2 x
    dp 2 x tp 2, 2 chunks a rank, 4 microbatches): loss and gradients (seen
    through Adam's first moment) against the same layers unpipelined (pp 1,
    one chunk) on the same data. Returns (name, ours, reference) checks."""
    import meshsim as jax
    rng = np.random.default_rng(405)
    cfg = TINY_LLAMA
    results, drawn = {}, {}
    for pp, v in ((1, 1), (2, 2)):
        mesh = jax.make_mesh((pp, 2, 2), ("pp", "dp", "tp"), devices=jax.devices()[:4 * pp])
        step, args = llama_pipeline_step(jax, cfg, mesh, microbatches=4, virtual=v, dtype=np.float32)
        if not drawn:  # the unpipelined program's shapes: [1, 1, L, ...] per layer weight
            drawn = {"layers": {k: rng.standard_normal(a.shape).astype(np.float32) * 0.3
                                for k, a in args[0]["layers"].items()},
                     **{k: rng.standard_normal(args[0][k].shape).astype(np.float32) * 0.3
                        for k in ("emb", "gf")}}
            x = rng.standard_normal(args[3].shape).astype(np.float32)
            t = rng.integers(0, cfg.vocab, args[4].shape).astype(np.int32)
        params = {"layers": {k: _to_chunks(w, pp, v) for k, w in drawn["layers"].items()},
                  **{k: drawn[k] for k in ("emb", "gf")}}

        def put(tree, like):
            return jax.tree.map(lambda a, s: jax.device_put(a, s.sharding), tree, like)
        zeros = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), args[0])
        loss, _, opt_m, _ = step(put(params, args[0]), put(zeros, args[1]), put(zeros, args[2]),
                                 jax.device_put(x, args[3].sharding), jax.device_put(t, args[4].sharding))
        grads = jax.tree.map(lambda g: 10 * np.asarray(g), opt_m)  # Adam's m after one step
        grads["layers"] = {k: _from_chunks(g) for k, g in grads["layers"].items()}
        results[(pp, v)] = (np.asarray(loss), grads)
    (loss_1, g_1), (loss_2, g_2) = results[(1, 1)], results[(2, 2)]
    checks = [("interleaved loss", loss_2, loss_1)]
    checks += [(f"interleaved d{k}", g_2["layers"][k], g_1["layers"][k]) for k in g_1["layers"]]
    checks += [(f"interleaved d{k}", g_2[k], g_1[k]) for k in ("emb", "gf")]
    return checks


def _to_chunks(w, pp, v):
    """[pp, v, layers per chunk, ...] of a weight drawn for the unpipelined program
    ([1, 1, L, ...]): chunk r of rank s holds virtual stage r * pp + s's layers."""
    layers = w.reshape((-1,) + w.shape[3:])
    lc = layers.shape[0] // (pp * v)
    return layers.reshape((v, pp, lc) + layers.shape[1:]).swapaxes(0, 1)


def _from_chunks(w):
    """Back to layer order, [L, ...]."""
    return w.swapaxes(0, 1).reshape((-1,) + w.shape[3:])

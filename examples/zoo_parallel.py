"""One training step of the GPT (examples/gpt.py) on a mesh whose axes each
play a role, written once against a module `jax` (meshsim or JAX):

- batch axes ("dp", and "fsdp" when present) split the batch;
- "fsdp" also splits every block weight along its model dimension; each
  layer all-gathers its weights in the forward pass under `checkpoint` (the
  backward gathers again instead of keeping them, and the gather's
  transpose reduce-scatters the gradient);
- "cp" (context parallelism) splits the sequence; attention sees the whole
  sequence by ring attention (K/V blocks travel around "cp" by `ppermute`,
  each device folding them into its queries' online softmax, skipping the
  blocks the causal mask hides entirely) or by all-gathering K and V. The
  load-balanced layout gives device r sequence chunks r and 2 cp - 1 - r,
  so every device holds as many early (cheap) as late (costly) queries;
- "tp" (tensor parallelism with Megatron's sequence parallelism) splits the
  heads of attention and the hidden units of the MLP; between those blocks
  the activations are split over the sequence along "tp" too, so the norms
  and residual adds run on 1/tp of the tokens: an all-gather over "tp"
  before each block, a reduce-scatter after it.

Embeddings, norms and the tied head are replicated; their gradients (and
everything else) come from `value_and_grad` of the `shard_map`, which sums
the replicated parameters' gradients over the axes their uses vary on.
`numpy_reference` is gpt.numpy_loss_and_grads on the same parameters."""
from __future__ import annotations

import dataclasses
import math
from functools import partial

import numpy as np

try:
    import gpt
except ImportError:  # imported as examples.zoo_parallel
    from examples import gpt

ROLES = ("batch", "fsdp", "cp", "tp")


def balanced_order(seq, cp):
    """Sequence positions in the load-balanced causal layout: 2 cp chunks,
    device r holding chunks r and 2 cp - 1 - r (contiguous when cp == 1)."""
    chunks = np.arange(seq).reshape(2 * cp, seq // (2 * cp))
    return np.concatenate([np.concatenate([chunks[r], chunks[2 * cp - 1 - r]]) for r in range(cp)])


def to_layout(params, cfg):
    """gpt's layout -> heads as their own dimension, for splitting over "tp"."""
    L, D, H, hd = cfg.layers, cfg.dim, cfg.heads, cfg.head_dim
    blocks = dict(params["blocks"])
    blocks["wqkv"] = blocks["wqkv"].reshape(L, D, 3, H, hd)
    blocks["wo"] = blocks["wo"].reshape(L, H, hd, D)
    return {**params, "blocks": blocks}


def from_layout(grads, cfg):
    blocks = {k: np.asarray(w) for k, w in grads["blocks"].items()}
    blocks["wqkv"] = blocks["wqkv"].reshape(cfg.layers, cfg.dim, 3 * cfg.dim)
    blocks["wo"] = blocks["wo"].reshape(cfg.layers, cfg.dim, cfg.dim)
    return {**grads, "blocks": blocks}


def default_config(sizes, batch_axes=None):
    """The GPT's shape grown to fit the mesh (`sizes`: axis name -> size)."""
    n_batch = math.prod(sizes.get(a, 1) for a in batch_axes_of(sizes, batch_axes) or ())
    n_cp, n_tp = sizes.get("cp", 1), sizes.get("tp", 1)
    return dataclasses.replace(gpt.CONFIG, batch=max(8, n_batch), seq=max(16, 2 * n_cp * n_tp),
                               heads=max(4, n_tp), dim=max(32, 8 * n_tp))


def batch_axes_of(sizes, batch_axes=None):
    return tuple(batch_axes if batch_axes is not None else
                 [a for a in ("dp", "fsdp") if a in sizes]) or None


def parts(jax, sizes, cfg, *, attention="ring", batch_axes=None):
    """The per-device pieces of a step on a mesh of `sizes` (axis name ->
    size): the specs of the parameters (heads as their own dimension, see
    `to_layout`) and of the data, and `layer_fwd(x, layer, positions)`, one
    block on local activations (`positions` those of this device's cp block,
    `cp_positions`)."""
    jnp, lax = jax.numpy, jax.lax
    P = jax.sharding.PartitionSpec
    has = lambda a: a in sizes  # noqa: E731
    fsdp, cp, tp = ("fsdp" if has("fsdp") else None, "cp" if has("cp") else None,
                    "tp" if has("tp") else None)
    batch = batch_axes_of(sizes, batch_axes)
    n_cp = sizes.get("cp", 1)
    seq_axes = tuple(a for a in (cp, tp) if a) or None
    model = gpt.build(jax, cfg)
    ln, gelu = model["layer_norm"], model["gelu"]

    block_specs = {
        "ln1_g": P(), "ln1_b": P(), "ln2_g": P(), "ln2_b": P(), "b2": P(),
        "wqkv": P(None, fsdp, None, tp, None), "wo": P(None, tp, None, fsdp),
        "w1": P(None, fsdp, tp), "b1": P(None, tp), "w2": P(None, tp, fsdp)}
    gathered_dim = {"wqkv": 0, "wo": 2, "w1": 0, "w2": 1}  # per layer (no leading L)
    param_specs = {"wte": P(), "wpe": P(), "lnf_g": P(), "lnf_b": P(), "blocks": block_specs}
    data_spec = P(batch, seq_axes)

    def gather_over_tp(x):
        return lax.all_gather(x, tp, axis=1, tiled=True) if tp else x

    def scatter_over_tp(x):
        return lax.psum_scatter(x, tp, scatter_dimension=1, tiled=True) if tp else x

    @partial(jax.checkpoint, policy=lambda p, *_, **__: p.name != "all_gather")
    def gather_weights(layer):
        if not fsdp:
            return layer
        return {k: lax.all_gather(w, fsdp, axis=gathered_dim[k], tiled=True)
                if k in gathered_dim else w for k, w in layer.items()}

    def ring_attention(q, k, v, q_pos, k_pos):
        """Online softmax over the cp blocks of K/V passed around the ring.
        Queries and keys are folded by halves (a device's two sequence
        chunks in the balanced layout), skipping the pairs the causal mask
        hides entirely: that is what the balanced layout evens out."""
        scale = 1 / math.sqrt(cfg.head_dim)
        shift = [(r, (r + 1) % n_cp) for r in range(n_cp)]
        halves = lambda a, axis=1: jnp.split(a, 2, axis=axis)  # noqa: E731
        qs, q_poss = halves(q), halves(q_pos, 0)

        def fold(m, l, acc, q, q_pos, k, v, k_pos):
            mask = (k_pos[None, :] <= q_pos[:, None])[None, :, None, :]
            s = jnp.einsum("bqhd,bkhd->bqhk", q, k) * scale
            m_new = jnp.maximum(m, jnp.max(jnp.where(mask, s, -1e30), axis=-1))
            p = jnp.where(mask, jnp.exp(s - m_new[..., None]), 0.0)
            corr = jnp.exp(m - m_new)
            return (m_new, l * corr + jnp.sum(p, axis=-1),
                    acc * corr[..., None] + jnp.einsum("bqhk,bkhd->bqhd", p, v))

        def skip(m, l, acc, *_):
            return m, l, acc

        def step(carry, _):
            state, k, v, k_pos = carry
            new_state = []
            for q_h, q_pos_h, (m, l, acc) in zip(qs, q_poss, state):
                for k_h, v_h, k_pos_h in zip(halves(k), halves(v), halves(k_pos, 0)):
                    visible = jnp.min(k_pos_h) <= jnp.max(q_pos_h)
                    m, l, acc = lax.cond(visible, fold, skip, m, l, acc, q_h, q_pos_h,
                                         k_h, v_h, k_pos_h)
                new_state.append((m, l, acc))
            k, v, k_pos = (lax.ppermute(a, cp, shift) for a in (k, v, k_pos))
            return (new_state, k, v, k_pos), None

        init = [(jnp.zeros_like(q_h[..., 0]) - 1e30, jnp.zeros_like(q_h[..., 0]), jnp.zeros_like(q_h))
                for q_h in qs]
        (state, *_), _ = lax.scan(step, (init, k, v, k_pos), length=n_cp)
        return jnp.concatenate([acc / l[..., None] for _, l, acc in state], axis=1)

    def allgather_attention(q, k, v, q_pos, k_pos):
        k, v = (lax.all_gather(a, cp, axis=1, tiled=True) for a in (k, v))
        k_pos = lax.all_gather(k_pos, cp, axis=0, tiled=True)
        return model["causal_attention"](q, k, v, q_pos, k_pos)

    attend = model["causal_attention"] if not cp else \
        ring_attention if attention == "ring" else allgather_attention

    def layer_fwd(x, layer, pos):
        w = gather_weights(layer)
        h = gather_over_tp(ln(x, w["ln1_g"], w["ln1_b"]))
        qkv = jnp.einsum("btd,dchk->btchk", h, w["wqkv"])
        o = attend(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], pos, pos)
        x = x + scatter_over_tp(jnp.einsum("bthk,hkd->btd", o, w["wo"]))
        h = gather_over_tp(ln(x, w["ln2_g"], w["ln2_b"]))
        z = gelu(h @ w["w1"] + w["b1"])
        return x + scatter_over_tp(z @ w["w2"]) + w["b2"]

    def cp_positions(positions):
        return gather_over_tp(positions[None])[0]

    return dict(model=model, block_specs=block_specs, param_specs=param_specs,
                data_spec=data_spec, seq_spec=P(seq_axes), layer_fwd=layer_fwd,
                cp_positions=cp_positions)


def build(jax, mesh_shape, axis_names, *, attention="ring", balanced=True, cfg=None,
          batch_axes=None, dtype=None):
    """The step on `jax.make_mesh(mesh_shape, axis_names)`; axes named "fsdp",
    "cp" and "tp" play those roles, `batch_axes` (default: "dp" and "fsdp"
    when present) split the batch. `attention`: "ring" or "allgather";
    `dtype`: the parameters' (float32 by default)."""
    jnp, lax = jax.numpy, jax.lax
    P = jax.sharding.PartitionSpec
    mesh = jax.make_mesh(tuple(mesh_shape), tuple(axis_names))
    sizes = dict(zip(axis_names, mesh_shape))
    cfg = cfg or default_config(sizes, batch_axes)
    pieces = parts(jax, sizes, cfg, attention=attention, batch_axes=batch_axes)
    model, layer_fwd = pieces["model"], pieces["layer_fwd"]
    param_specs, data_spec = pieces["param_specs"], pieces["data_spec"]
    params = gpt.init_params(jax, cfg, dtype=dtype)
    tokens, targets = gpt.init_batch(jax, cfg)
    order = balanced_order(cfg.seq, sizes.get("cp", 1)) if balanced else np.arange(cfg.seq)
    n_tokens = cfg.batch * cfg.seq

    @jax.jit
    @jax.value_and_grad
    @partial(jax.shard_map, mesh=mesh,
             in_specs=(param_specs, data_spec, data_spec, pieces["seq_spec"]), out_specs=P())
    def loss_and_grads(params, tokens, targets, positions):
        x = model["embed"](params, tokens, positions)
        pos_cp = pieces["cp_positions"](positions)
        x = lax.scan(lambda x, layer: (layer_fwd(x, layer, pos_cp), None), x, params["blocks"])[0]
        return lax.psum(model["head_loss_sum"](params, x, targets), tuple(axis_names)) / n_tokens

    args = (place(jax, mesh, to_layout(params, cfg), param_specs),
            *place_data(jax, mesh, pieces, tokens, targets, order))

    def step():
        loss, grads = loss_and_grads(*args)
        return loss, from_layout(grads, cfg)

    return dict(jax=jax, mesh=mesh, cfg=cfg, params=params, tokens=tokens, targets=targets,
                step=step, loss_and_grads=loss_and_grads, args=args, param_specs=param_specs,
                data_spec=data_spec, order=order)


def place(jax, mesh, tree, specs):
    NS, P = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
    return jax.tree.map(lambda w, s: jax.device_put(w, NS(mesh, s)), tree, specs,
                        is_leaf=lambda s: isinstance(s, P))


def place_data(jax, mesh, pieces, tokens, targets, order):
    """Tokens and targets in the sequence `order`, and the positions."""
    jnp, NS = jax.numpy, jax.sharding.NamedSharding
    spec = pieces["data_spec"]
    return (jax.device_put(jnp.asarray(np.asarray(tokens)[:, order]), NS(mesh, spec)),
            jax.device_put(jnp.asarray(np.asarray(targets)[:, order]), NS(mesh, spec)),
            jax.device_put(jnp.asarray(order.astype(np.int32)), NS(mesh, pieces["seq_spec"])))


def numpy_reference(env):
    return gpt.numpy_loss_and_grads(env["params"], env["tokens"], env["targets"], env["cfg"])


def checks(label, env):
    """(name, ours, NumPy) triples of the loss and every gradient."""
    loss, grads = env["step"]()
    ref_loss, ref_grads = numpy_reference(env)
    out = [(f"{label} loss", np.asarray(loss), ref_loss)]
    for (k, g), (_, r) in zip(gpt.flatten(grads), gpt.flatten(ref_grads)):
        out.append((f"{label} d{k}", np.asarray(g), r))
    return out

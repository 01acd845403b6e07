"""A small GPT written once against a module `jax` (meshsim or JAX), and an
independent NumPy forward and hand-written backward pass of its loss.

Token and position embeddings, pre-norm blocks (LayerNorm, causal multi-head
attention, LayerNorm, GELU MLP, each around a residual), a final LayerNorm, an
output head tied to the token embedding and the mean cross-entropy over all
tokens. Block parameters are stacked along a leading layer dimension, so a
pipeline shards the layers over an axis and a scan runs them. Every parallel
example (examples/ex_zoo_*.py) reuses these pieces, swapping in its own
attention or matmuls, and is checked against `numpy_loss_and_grads`.

Positions are an input: a context-parallel layout may reorder the sequence
(the load-balanced causal layout), and the causal mask compares positions,
not indices."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Config:
    vocab: int = 64
    seq: int = 16
    dim: int = 32
    heads: int = 4
    hidden: int = 128
    layers: int = 4
    batch: int = 8

    @property
    def head_dim(self):
        return self.dim // self.heads


CONFIG = Config()
LN_EPS = 1e-5
GELU_C = math.sqrt(2.0 / math.pi)
BLOCK_KEYS = ("ln1_g", "ln1_b", "wqkv", "wo", "ln2_g", "ln2_b", "w1", "b1", "w2", "b2")


def init_params(jax, cfg=CONFIG, key=0, dtype=None):
    """Parameters as a dict; block parameters stacked over cfg.layers."""
    jnp = jax.numpy
    dtype = dtype or jnp.float32
    k = jax.random.split(jax.random.key(key), 6)
    L, D, F = cfg.layers, cfg.dim, cfg.hidden

    def normal(key, shape, scale):
        return (jax.random.normal(key, shape) * scale).astype(dtype)

    params = {
        "wte": normal(k[0], (cfg.vocab, D), 0.5),
        "wpe": normal(k[1], (cfg.seq, D), 0.1),
        "lnf_g": jnp.ones((D,), dtype), "lnf_b": jnp.zeros((D,), dtype),
        "blocks": {
            "ln1_g": jnp.ones((L, D), dtype), "ln1_b": jnp.zeros((L, D), dtype),
            "wqkv": normal(k[2], (L, D, 3 * D), 1 / math.sqrt(D)),
            "wo": normal(k[3], (L, D, D), 1 / math.sqrt(D)),
            "ln2_g": jnp.ones((L, D), dtype), "ln2_b": jnp.zeros((L, D), dtype),
            "w1": normal(k[4], (L, D, F), 1 / math.sqrt(D)),
            "b1": jnp.zeros((L, F), dtype),
            "w2": normal(k[5], (L, F, D), 1 / math.sqrt(F)),
            "b2": jnp.zeros((L, D), dtype),
        },
    }
    return params


def init_batch(jax, cfg=CONFIG, key=1):
    """Random token ids and next-token targets, (batch, seq) int32."""
    k1, k2 = jax.random.split(jax.random.key(key))
    tokens = jax.random.randint(k1, (cfg.batch, cfg.seq), 0, cfg.vocab)
    targets = jax.random.randint(k2, (cfg.batch, cfg.seq), 0, cfg.vocab)
    return tokens, targets


def build(jax, cfg=CONFIG):
    """The model's pieces as functions of `jax`; every one works on local
    (per-device) blocks inside shard_map as well as on whole arrays."""
    jnp, lax = jax.numpy, jax.lax
    H, hd = cfg.heads, cfg.head_dim

    def layer_norm(x, g, b):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) * lax.rsqrt(var + LN_EPS) * g + b

    def gelu(x):
        return 0.5 * x * (1 + jnp.tanh(GELU_C * (x + 0.044715 * x ** 3)))

    def embed(params, tokens, positions):
        return params["wte"][tokens] + params["wpe"][positions]

    def split_heads(x):  # (B, T, D) -> (B, T, H, hd)
        return x.reshape(*x.shape[:-1], H, hd)

    def causal_attention(q, k, v, q_pos, k_pos):
        """softmax(q k^T / sqrt(hd), masked to k_pos <= q_pos) v on (B, T, H, hd)."""
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hd)
        mask = k_pos[None, :] <= q_pos[:, None]
        s = jnp.where(mask, s, -1e30)
        p = jax.nn.softmax(s, axis=-1)
        return jnp.einsum("bhqk,bkhd->bqhd", p, v)

    def attention(layer, h, positions, attend=None):
        """The attention sub-block on a normed input: qkv projection, `attend`
        (causal_attention unless a strategy passes its own), output projection."""
        q, k, v = jnp.split(h @ layer["wqkv"], 3, axis=-1)
        o = (attend or causal_attention)(split_heads(q), split_heads(k), split_heads(v),
                                         positions, positions)
        return o.reshape(*o.shape[:-2], cfg.dim) @ layer["wo"]

    def mlp(layer, h):
        return gelu(h @ layer["w1"] + layer["b1"]) @ layer["w2"] + layer["b2"]

    def block(layer, x, positions, attend=None):
        x = x + attention(layer, layer_norm(x, layer["ln1_g"], layer["ln1_b"]), positions, attend)
        return x + mlp(layer, layer_norm(x, layer["ln2_g"], layer["ln2_b"]))

    def blocks(stacked, x, positions, attend=None):
        """Every layer of `stacked` (leading layer dim) in order, as a scan."""
        def body(x, layer):
            return block(layer, x, positions, attend), None
        return lax.scan(body, x, stacked)[0]

    def head_loss_sum(params, x, targets):
        """Summed cross-entropy of the tied head on final-normed activations."""
        h = layer_norm(x, params["lnf_g"], params["lnf_b"])
        logits = h @ params["wte"].T
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.sum(jnp.take_along_axis(logp, targets[..., None], axis=-1))

    def loss(params, tokens, targets):
        positions = jnp.arange(tokens.shape[-1])
        x = blocks(params["blocks"], embed(params, tokens, positions), positions)
        return head_loss_sum(params, x, targets) / targets.size

    return dict(layer_norm=layer_norm, gelu=gelu, embed=embed, causal_attention=causal_attention,
                attention=attention, mlp=mlp, block=block, blocks=blocks,
                head_loss_sum=head_loss_sum, loss=loss, split_heads=split_heads)


# ---------------------------------------------------------------- NumPy reference

def as_numpy(tree):
    if isinstance(tree, dict):
        return {k: as_numpy(v) for k, v in tree.items()}
    return np.asarray(tree).astype(np.float64) if np.asarray(tree).dtype.kind == "f" \
        else np.asarray(tree)


def _ln_fwd(x, g, b):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    rstd = 1 / np.sqrt((xc ** 2).mean(-1, keepdims=True) + LN_EPS)
    xhat = xc * rstd
    return xhat * g + b, (xhat, rstd, g)


def _ln_bwd(dy, cache):
    xhat, rstd, g = cache
    dg = (dy * xhat).reshape(-1, xhat.shape[-1]).sum(0)
    db = dy.reshape(-1, xhat.shape[-1]).sum(0)
    dxhat = dy * g
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    return dx, dg, db


def _gelu_fwd(x):
    u = GELU_C * (x + 0.044715 * x ** 3)
    t = np.tanh(u)
    return 0.5 * x * (1 + t), (x, t)


def _gelu_bwd(dy, cache):
    x, t = cache
    du = GELU_C * (1 + 3 * 0.044715 * x ** 2)
    return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * du)


def numpy_loss_and_grads(params, tokens, targets, cfg=CONFIG):
    """Loss and the gradient of every parameter (same dict layout), by a
    forward pass in float64 and backpropagation written out by hand."""
    p = as_numpy(params)
    tokens, targets = np.asarray(tokens), np.asarray(targets)
    B, T = tokens.shape
    H, hd, D = cfg.heads, cfg.head_dim, cfg.dim
    blk = p["blocks"]
    L = blk["wqkv"].shape[0]
    mask = np.tril(np.ones((T, T), bool))

    x = p["wte"][tokens] + p["wpe"][np.arange(T)]
    caches = []
    for i in range(L):
        h1, ln1 = _ln_fwd(x, blk["ln1_g"][i], blk["ln1_b"][i])
        qkv = h1 @ blk["wqkv"][i]
        q, k, v = (a.reshape(B, T, H, hd) for a in np.split(qkv, 3, axis=-1))
        s = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hd)
        s = np.where(mask, s, -np.inf)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = np.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, T, D)
        x1 = x + o @ blk["wo"][i]
        h2, ln2 = _ln_fwd(x1, blk["ln2_g"][i], blk["ln2_b"][i])
        z = h2 @ blk["w1"][i] + blk["b1"][i]
        g, gc = _gelu_fwd(z)
        x2 = x1 + g @ blk["w2"][i] + blk["b2"][i]
        caches.append((h1, ln1, q, k, v, a, o, h2, ln2, g, gc))
        x = x2
    hf, lnf = _ln_fwd(x, p["lnf_g"], p["lnf_b"])
    logits = hf @ p["wte"].T
    logits -= logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    n = B * T
    loss = -np.take_along_axis(logp, targets[..., None], -1).sum() / n

    grads = {"blocks": {k: np.zeros_like(v) for k, v in blk.items()}}
    dlogits = np.exp(logp)
    np.put_along_axis(dlogits, targets[..., None],
                      np.take_along_axis(dlogits, targets[..., None], -1) - 1, -1)
    dlogits /= n
    grads["wte"] = np.einsum("btv,btd->vd", dlogits, hf)
    dx, grads["lnf_g"], grads["lnf_b"] = _ln_bwd(dlogits @ p["wte"], lnf)
    gb = grads["blocks"]
    for i in reversed(range(L)):
        h1, ln1, q, k, v, a, o, h2, ln2, g, gc = caches[i]
        # MLP: x2 = x1 + gelu(h2 w1 + b1) w2 + b2
        gb["b2"][i] = dx.sum((0, 1))
        gb["w2"][i] = np.einsum("btf,btd->fd", g, dx)
        dz = _gelu_bwd(dx @ blk["w2"][i].T, gc)
        gb["b1"][i] = dz.sum((0, 1))
        gb["w1"][i] = np.einsum("btd,btf->df", h2, dz)
        dh2, gb["ln2_g"][i], gb["ln2_b"][i] = _ln_bwd(dz @ blk["w1"][i].T, ln2)
        dx1 = dx + dh2
        # attention: x1 = x + o wo
        gb["wo"][i] = np.einsum("btd,bte->de", o, dx1)
        do = (dx1 @ blk["wo"][i].T).reshape(B, T, H, hd)
        da = np.einsum("bqhd,bkhd->bhqk", do, v)
        dv = np.einsum("bhqk,bqhd->bkhd", a, do)
        ds = a * (da - (da * a).sum(-1, keepdims=True)) / math.sqrt(hd)
        dq = np.einsum("bhqk,bkhd->bqhd", ds, k)
        dk = np.einsum("bhqk,bqhd->bkhd", ds, q)
        dqkv = np.concatenate([t.reshape(B, T, D) for t in (dq, dk, dv)], -1)
        gb["wqkv"][i] = np.einsum("btd,bte->de", h1, dqkv)
        dh1, gb["ln1_g"][i], gb["ln1_b"][i] = _ln_bwd(dqkv @ blk["wqkv"][i].T, ln1)
        dx = dx1 + dh1
    np.add.at(grads["wte"], tokens, dx)
    grads["wpe"] = np.zeros_like(p["wpe"])
    np.add.at(grads["wpe"], np.broadcast_to(np.arange(T), (B, T)), dx)
    return loss, grads


def flatten(tree, prefix=""):
    """[(name, leaf)] in a fixed order, for comparing gradient dicts."""
    if isinstance(tree, dict):
        return [item for k in sorted(tree) for item in flatten(tree[k], f"{prefix}{k}.")]
    return [(prefix[:-1], tree)]

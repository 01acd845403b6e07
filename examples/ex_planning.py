"""Training steps at real scale for dry runs, written once against a module
`jax` (meshsim or JAX) in ordinary JAX: shard_map over the mesh, a scan over
the layers, `jax.checkpoint` for recomputation, a hand-written Adam update.

- `gpt_step`: a GPT layer stack with Megatron-LM's tensor parallelism over a
  "tp" axis (column-parallel QKV and first MLP matmul, row-parallel output
  and second MLP matmul, their partial sums all-reduced; the backward pass's
  all-reduces come from the transposes), optionally Megatron's sequence
  parallelism (the residual stream split over "tp" along the sequence:
  all-gather before, reduce-scatter after each parallel block) and a pipeline
  over a "pp" axis (a scan over microbatches + stages - 1 steps, each stage
  running its layers and passing activations to the next with ppermute: the
  schedule's bubble is in the program). Recomputation as Megatron-LM does it
  (Korthikanti et al. 2022): "full" checkpoints each layer (its input saved),
  "selective" checkpoints only the attention core (scores, softmax, weighted
  values), saving everything else. A vocabulary-parallel cross-entropy ends
  the stack.
- `llama_step`: a Llama-3-shaped decoder (grouped-query attention, SwiGLU MLP,
  RMSNorm) with FSDP over "fsdp" (weights all-gathered per layer inside the
  remat, so gradients are reduce-scattered by the transpose) x TP over "tp".

Mixed precision as JAX programs write it: parameters and Adam's moments are
float32 (`param_dtype`) and are cast to bfloat16 (`dtype`) for use: once per
step for the GPT (Megatron's half-precision copy, shared by the microbatches),
per layer before the FSDP all-gather for the Llama (so weights and their
gradients travel as bfloat16); activations and matmuls are bfloat16,
norms, softmax statistics and the loss run in float32. Memory and bytes
follow these types.

Each returns (jitted step, argument ShapeDtypeStructs) to lower and compile
abstractly: `step.lower(*args).compile()`."""
from __future__ import annotations

import dataclasses
import importlib
import math
import numpy as np


@dataclasses.dataclass(frozen=True)
class GPTConfig:
    layers: int
    hidden: int
    heads: int
    seq: int
    batch: int
    vocab: int = 51200
    tp: int = 8
    pp: int = 1
    microbatch: int | None = None  # with pp > 1: examples per microbatch
    recompute: str = "full"  # "full" or "selective"
    sequence_parallel: bool = False
    schedule: str = "gpipe"  # with pp > 1: "gpipe" or "1f1b"
    dp: int = 1  # data-parallel replicas (axis "dp"; the 1F1B program only)


GPT_22B = GPTConfig(layers=48, hidden=6144, heads=64, seq=2048, batch=4)
GPT_175B = GPTConfig(layers=96, hidden=12288, heads=96, seq=2048, batch=64, pp=8, microbatch=1)


def _fused_layer_norm(jax):
    """Layer norm over the last axis as Megatron-LM's fused kernel runs it
    (`FusedLayerNormAffineFunction`): computed in float32, the result in x's type,
    and only the input, the weight and each row's mean and reciprocal standard
    deviation kept for the backward pass (autodiff of the float32 arithmetic
    would keep several float32 copies of the row)."""
    jnp = jax.numpy
    f32 = jnp.float32

    def statistics(x):
        x32 = x.astype(f32)
        mu = jnp.mean(x32, axis=-1, keepdims=True)
        return x32, mu, jax.lax.rsqrt(jnp.mean(jnp.square(x32 - mu), axis=-1, keepdims=True) + 1e-5)

    @jax.custom_vjp
    def layer_norm(x, g, b):
        return forward(x, g, b)[0]

    def forward(x, g, b):
        x32, mu, rstd = statistics(x)
        return ((x32 - mu) * rstd * g.astype(f32) + b).astype(x.dtype), (x, g, b, mu, rstd)

    def backward(saved, dy):
        x, g, b, mu, rstd = saved
        rows = tuple(range(x.ndim - 1))
        xhat = (x.astype(f32) - mu) * rstd
        dy = dy.astype(f32)
        dxhat = dy * g.astype(f32)
        dx = rstd * (dxhat - jnp.mean(dxhat, axis=-1, keepdims=True)
                     - xhat * jnp.mean(dxhat * xhat, axis=-1, keepdims=True))
        return (dx.astype(x.dtype), as_type_of(g, jnp.sum(dy * xhat, axis=rows)),
                as_type_of(b, jnp.sum(dy, axis=rows)))

    def as_type_of(param, grad):
        """The gradient in the parameter's type: summed over the mesh axes along which
        the rows vary and the parameter does not (the transpose of its broadcast)."""
        extra = tuple(sorted(jax.typeof(grad).vma - jax.typeof(param).vma))
        return (jax.lax.psum(grad, extra) if extra else grad).astype(param.dtype)
    layer_norm.defvjp(forward, backward)
    return layer_norm


def _cast(jax, tree, dtype):
    return jax.tree.map(lambda p: p.astype(dtype), tree)


def _causal(lax, s):
    return lax.broadcasted_iota(np.int32, (s, s), 0) >= lax.broadcasted_iota(np.int32, (s, s), 1)


def _global_max(lax, logits):
    """The row maxima of vocabulary-parallel logits, a constant for autodiff
    (gathered rather than pmax'd: that is differentiable everywhere)."""
    local = lax.stop_gradient(logits.max(axis=-1, keepdims=True))
    return lax.stop_gradient(lax.all_gather(local, "tp", to="invarying").max(axis=0))


def _rerun_whole(jax, layer):
    """`layer` under Megatron-LM's full recomputation (its CheckpointFunction):
    only the inputs are saved; the backward pass reruns the whole forward, its
    output included, and back-propagates from that output. (`jax.checkpoint`
    would leave out what the backward pass does not read, such as the last
    matmul and its all-reduce: less work than Megatron does.)"""
    @jax.custom_vjp
    def run(x, p):
        return layer(x, p)

    def forward(x, p):
        return layer(x, p), (x, p)

    def backward(saved, ct):
        out, pullback = jax.vjp(layer, *saved)
        _, ct = jax.lax.optimization_barrier((out, ct))  # the output is computed before its cotangent is used
        return pullback(ct)
    run.defvjp(forward, backward)
    return run


def _adam(jax, params, grads, m, v, lr=1e-4, b1=0.9, b2=0.95, eps=1e-8):
    jnp = jax.numpy
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
    params = jax.tree.map(lambda p, m, v: p - lr * m / (jnp.sqrt(v) + eps), params, m, v)
    return params, m, v


def gpt_step(jax, cfg: GPTConfig, mesh, dtype=None, param_dtype=np.float32):
    """A Megatron-LM GPT training step (forward, backward, Adam) on `mesh`
    (axes "tp"; "pp" when cfg.pp > 1 or by the 1F1B program; "dp" when cfg.dp > 1),
    computing in `dtype` (bfloat16 by default) on `param_dtype` parameters."""
    jnp, lax = jax.numpy, jax.lax
    dtype = jnp.bfloat16 if dtype is None else dtype
    P = jax.sharding.PartitionSpec
    tp, h, nh = cfg.tp, cfg.hidden, cfg.heads
    dh = h // nh
    sp = cfg.sequence_parallel
    layers_per_stage = cfg.layers // cfg.pp
    one_f_one_b_program = cfg.schedule == "1f1b"  # (with pp = 1: gradient accumulation)
    data = ("dp",) if cfg.dp > 1 else ()

    def attention_core(q, k, v):
        """Scores, causal softmax and the weighted sum of values."""
        scores = jnp.einsum("bqnd,bknd->bnqk", q, k) * (1.0 / math.sqrt(dh))
        scores = jnp.where(_causal(lax, q.shape[1]), scores, -1e9)
        probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(dtype)
        return jnp.einsum("bnqk,bknd->bqnd", probs, v)

    # Megatron's selective recomputation checkpoints the attention core alone
    # (its `CoreAttention` under `tensor_parallel.checkpoint`): everything else
    # the backward pass reads is saved, as autograd saves it.
    selective = cfg.recompute == "selective"
    layer_norm = _fused_layer_norm(jax)
    # Megatron's fused bias-GELU keeps its input and recomputes the GELU in the
    # backward pass.
    gelu = jax.checkpoint(jax.nn.gelu)
    core_attention = jax.checkpoint(attention_core) if selective else attention_core

    def column_parallel(a, w, bias):
        """Megatron's column-parallel linear layer: with sequence parallelism its
        input is all-gathered along the sequence first."""
        if sp:
            a = lax.all_gather(a, "tp", axis=1, tiled=True)
        return a @ w + bias
    # With sequence parallelism Megatron saves that input as its shard and
    # all-gathers it again in the backward pass (for the weight's gradient).
    if selective and sp:
        column_parallel = jax.checkpoint(column_parallel)

    def block(x, p):
        """One transformer layer on this device's shards; x: [b, s or s/tp, h]."""
        a = layer_norm(x, p["ln1_g"], p["ln1_b"])
        qkv = column_parallel(a, p["wqkv"], p["bqkv"])
        b, s = qkv.shape[0], qkv.shape[1]
        q, k, v = jnp.split(qkv.reshape(b, s, 3, nh // tp, dh), 3, axis=2)
        q, k, v = (t.reshape(b, s, nh // tp, dh) for t in (q, k, v))
        ctx = core_attention(q, k, v).reshape(b, s, h // tp)
        out = ctx @ p["wo"]
        out = lax.psum_scatter(out, "tp", scatter_dimension=1, tiled=True) if sp \
            else lax.psum(out, "tp")
        x = x + out + p["bo"]
        a = layer_norm(x, p["ln2_g"], p["ln2_b"])
        f = gelu(column_parallel(a, p["w1"], p["b1"])) @ p["w2"]
        f = lax.psum_scatter(f, "tp", scatter_dimension=1, tiled=True) if sp else lax.psum(f, "tp")
        return x + f + p["b2"]

    remat_block = block if selective else _rerun_whole(jax, block)

    def stack(x, layers):
        return lax.scan(lambda x, p: (remat_block(x, p), None), x, layers)[0]

    def head_loss(x, head, targets):
        """Vocabulary-parallel cross-entropy of the last hidden states."""
        if sp:
            x = lax.all_gather(x, "tp", axis=1, tiled=True)
        x = layer_norm(x, head["lnf_g"], head["lnf_b"])
        logits = (x @ head["emb"].T).astype(jnp.float32)  # [b, s, V/tp]
        m = _global_max(lax, logits)
        z = lax.psum(jnp.exp(logits - m).sum(axis=-1), "tp")
        first = lax.axis_index("tp") * logits.shape[-1]
        local = targets - first
        here = (local >= 0) & (local < logits.shape[-1])
        picked = jnp.take_along_axis(logits, jnp.clip(local, 0, logits.shape[-1] - 1)[..., None],
                                     axis=-1)[..., 0]
        target_logit = lax.psum(jnp.where(here, picked, 0.0), "tp")
        return jnp.mean(jnp.log(z) + m[..., 0] - target_logit)

    replicated = ("ln1_g", "ln1_b", "bo", "ln2_g", "ln2_b", "b2", "lnf_g", "lnf_b")

    def loss_fn(params, x, targets):
        # One bfloat16 copy of the weights per step (Megatron's half-precision
        # parameters beside its float32 main parameters), used by every microbatch.
        params = _cast(jax, params, dtype)
        if sp:
            # Parameters replicated over "tp" meet sequence shards: cast them to
            # varying once, so their gradients are all-reduced once per step
            # (the cast's transpose) rather than as activation-sized sums.
            params = {group: {k: lax.pcast(v, "tp", to="varying") if k in replicated else v
                              for k, v in ps.items()} for group, ps in params.items()}
        if cfg.pp == 1:
            return head_loss(stack(x, params["layers"]), params["head"], targets)
        return pipeline_loss(params, x, targets)

    def send_to_next_stage(out, backward=False):
        perm = [(i + 1, i) if backward else (i, i + 1) for i in range(cfg.pp - 1)]
        if sp:  # already a sequence shard per tensor-parallel rank
            return lax.ppermute(out, "pp", perm)
        # Megatron's scatter/gather (Narayanan et al. 2021, section 4.1): each
        # tensor-parallel rank sends its 1/tp of the activations to the next stage
        # over the network, which all-gathers them over NVLink.
        chunk = out.shape[1] // tp
        mine = lax.dynamic_slice_in_dim(out, lax.axis_index("tp") * chunk, chunk, axis=1)
        return lax.all_gather(lax.ppermute(mine, "pp", perm), "tp", axis=1, tiled=True, to="invarying")

    def pipeline_loss(params, xs, targets):
        """GPipe-style schedule: microbatch i enters stage 0 at step i."""
        nmb = xs.shape[0]
        stage = lax.axis_index("pp")
        # The head's parameters (replicated over "pp") are cast to varying once,
        # outside the loop, so their gradients are summed over "pp" once.
        params = {**params, "head": jax.tree.map(lambda v: lax.pcast(v, "pp", to="varying"), params["head"])}
        last = cfg.pp - 1

        def step(state, t):
            inp = jnp.where(stage == 0, lax.dynamic_index_in_dim(xs, t % nmb, keepdims=False),
                            state)
            out = stack(inp, params["layers"])
            j = jnp.clip(t - last, 0, nmb - 1)
            target = lax.dynamic_index_in_dim(targets, j, keepdims=False)
            loss = lax.cond(stage == last, lambda o: head_loss(o, params["head"], target),
                            lambda o: lax.pcast(jnp.zeros((), jnp.float32), "pp", to="varying"), out)
            loss = jnp.where(t >= last, loss, 0.0)
            return send_to_next_stage(out), loss

        state = lax.pcast(jnp.zeros_like(xs[0]), "pp", to="varying")  # each stage's own activations
        _, losses = lax.scan(step, state, jnp.arange(nmb + last))
        return lax.psum(losses.sum(), "pp") / nmb

    def one_f_one_b(params, xs, targets):
        """Megatron-LM's 1F1B schedule (Narayanan et al. 2021), in lock step: at tick
        t stage s runs the forward of microbatch t - s and the backward of microbatch
        t - 2(p - 1) + s, so the last stage runs each microbatch's backward right
        after its forward. The p - 1 warm-up ticks run forwards only, the p - 1
        cool-down ticks backwards only: every stage runs m + p - 1 forwards and
        backwards (GPipe's bubble) but holds at most 2p - 1 microbatches' layer inputs
        (full recomputation's checkpoints) rather than m. Each layer's backward first
        reruns its forward (`jax.vjp`), and weight gradients are summed into float32
        accumulators as they are computed (Megatron's fused gradient accumulation
        into `main_grad`). Returns the mean loss and the float32 gradients."""
        m, last = xs.shape[0], cfg.pp - 1
        slots = 2 * cfg.pp - 1
        stage = lax.axis_index("pp")
        half = _cast(jax, params, dtype)  # the half-precision copy, shared by the microbatches
        layers, head = half["layers"], half["head"]

        # Selective recomputation keeps what each layer's backward pass reads (the
        # residuals of its `jax.vjp`, a pytree; the attention core's are recomputed)
        # from the microbatch's forward tick to its backward tick. The layer's
        # weights among them are not kept: the backward pass has them.
        pullbacks = {}  # the pullback's tree; per residual, which weight it is (or None)

        def forward(x, layers):
            """(output, what each layer keeps for its backward pass, stacked)."""
            if not selective:
                return lax.scan(lambda x, p: (block(x, p), x), x, layers)  # the layer inputs

            def one(x, p):
                out, pullback = jax.vjp(block, x, p)
                kept, pullbacks["tree"] = jax.tree.flatten(pullback)
                weights = jax.tree.leaves(p)
                pullbacks["weight"] = [next((i for i, w in enumerate(weights) if r is w), None)
                                       for r in kept]
                return out, [r for r, w in zip(kept, pullbacks["weight"]) if w is None]
            return lax.scan(one, x, layers)

        def backward(kept, ct, acc):
            def one(ct, layer):
                saved, p, acc_p = layer
                if selective:
                    saved, weights = iter(saved), jax.tree.leaves(p)
                    pullback = jax.tree.unflatten(pullbacks["tree"], [
                        next(saved) if w is None else weights[w] for w in pullbacks["weight"]])
                else:  # Megatron's full recomputation: rerun the forward from the layer's input
                    out, pullback = jax.vjp(block, saved, p)
                    _, ct = lax.optimization_barrier((out, ct))  # the rerun forward, as Megatron's
                dx, dp = pullback(ct)
                return dx, jax.tree.map(lambda a, g: a + g.astype(a.dtype), acc_p, dp)
            return lax.scan(one, ct, (kept, layers, acc), reverse=True)

        def head_step(out, target, loss, acc_head):
            mb_loss, (dout, dhead) = jax.value_and_grad(
                lambda o, h: head_loss(o, h, target) / m, argnums=(0, 1))(out, head)
            return loss + mb_loss, dout, jax.tree.map(lambda a, g: a + g.astype(a.dtype),
                                                      acc_head, dhead)

        def no_head(out, target, loss, acc_head):
            return loss, jnp.zeros_like(out), acc_head

        def no_backward(kept, ct, acc):
            return jnp.zeros_like(ct), acc

        def tick(state, t, forwards, backwards):
            fwd_in, bwd_in, stash, acc, acc_head, loss = state
            dout = None
            if forwards:
                f = t - stage
                x = jnp.where(stage == 0, lax.dynamic_index_in_dim(
                    xs, jnp.clip(f, 0, m - 1), keepdims=False), fwd_in)
                out, kept = forward(x, layers)
                stash = jax.tree.map(lambda a, k: lax.dynamic_update_index_in_dim(a, k, f % slots, 0),
                                     stash, kept)
                target = lax.dynamic_index_in_dim(targets, jnp.clip(f, 0, m - 1), keepdims=False)
                loss, dout, acc_head = lax.cond((stage == last) & (f >= 0) & (f < m), head_step,
                                                no_head, out, target, loss, acc_head)
                fwd_in = send_to_next_stage(out)
            if backwards:
                b = t - 2 * last + stage
                ct = bwd_in if dout is None else jnp.where(stage == last, dout, bwd_in)
                kept = jax.tree.map(lambda a: lax.dynamic_index_in_dim(a, b % slots, keepdims=False), stash)
                dx, acc = lax.cond((b >= 0) & (b < m), backward, no_backward, kept, ct, acc)
                bwd_in = send_to_next_stage(dx, backward=True)
            return (fwd_in, bwd_in, stash, acc, acc_head, loss), None

        act = lax.pcast(jnp.zeros_like(xs[0]), "pp", to="varying")  # each stage's own activations
        kept_types = []  # what a microbatch's forward keeps, typed without computing it
        jax.eval_shape(lambda x, ls: kept_types.extend(jax.typeof(k) for k in
                                                       jax.tree.leaves(forward(x, ls)[1])), act, layers)
        stash = [jnp.zeros((slots,) + t.shape, t.dtype) for t in kept_types]
        stash = [lax.pcast(a, tuple(t.vma), to="varying") if t.vma else a
                 for a, t in zip(stash, kept_types)]
        if not selective:
            (stash,) = stash
        zeros = lambda tree: jax.tree.map(jnp.zeros_like, tree)  # noqa: E731
        state = (act, act, stash, zeros(params["layers"]), zeros(params["head"]),
                 lax.pcast(jnp.zeros((), jnp.float32), ("pp",) + data, to="varying"))
        for first, end, forwards, backwards in ((0, last, True, False), (last, m + last, True, True),
                                                 (m + last, m + 2 * last, False, True)):
            state, _ = lax.scan(lambda s, t, fw=forwards, bw=backwards: tick(s, t, fw, bw),
                                state, jnp.arange(first, end))
        *_, acc, acc_head, loss = state
        return lax.psum(loss, ("pp",) + data) / cfg.dp, {"layers": acc, "head": acc_head}

    def one_f_one_b_grads(params, xs, targets):
        """(loss, gradients) of the pipelined program by the 1F1B schedule: its
        parameters replicated over an axis are cast to varying first and their
        gradients summed over it once (what autodiff does with the casts)."""
        def axes(group, k):
            return (("pp",) * (group == "head" and cfg.pp > 1) + ("tp",) * (sp and k in replicated)
                    + data)
        cast = {group: {k: lax.pcast(v, axes(group, k), to="varying") if axes(group, k) else v
                        for k, v in ps.items()} for group, ps in params.items()}
        loss, grads = one_f_one_b(cast, xs, targets)
        # Data-parallel replicas average their gradients (Megatron-LM's all-reduce of
        # its float32 main gradients after the last microbatch's backward).
        return loss, {group: {k: lax.psum(g, axes(group, k)) / cfg.dp if axes(group, k) else g
                              for k, g in gs.items()} for group, gs in grads.items()}

    def train_step(params, opt_m, opt_v, x, targets):
        if one_f_one_b_program:
            loss, grads = one_f_one_b_grads(params, x, targets)
        else:
            loss, grads = jax.value_and_grad(loss_fn)(params, x, targets)
        params, opt_m, opt_v = _adam(jax, params, grads, opt_m, opt_v)
        return loss, params, opt_m, opt_v

    if cfg.schedule not in ("gpipe", "1f1b"):
        raise ValueError(f"schedule must be 'gpipe' or '1f1b', got {cfg.schedule!r}")
    if cfg.dp > 1 and not one_f_one_b_program:
        raise ValueError("data parallelism (dp > 1) is written for schedule='1f1b'")

    # Global shapes and specs.
    L = cfg.layers
    lead = ("pp",) if cfg.pp > 1 or one_f_one_b_program else (None,)
    shapes = {
        "ln1_g": ((L, h), P(*lead, None)), "ln1_b": ((L, h), P(*lead, None)),
        "wqkv": ((L, h, 3 * h), P(*lead, None, "tp")), "bqkv": ((L, 3 * h), P(*lead, "tp")),
        "wo": ((L, h, h), P(*lead, "tp", None)), "bo": ((L, h), P(*lead, None)),
        "ln2_g": ((L, h), P(*lead, None)), "ln2_b": ((L, h), P(*lead, None)),
        "w1": ((L, h, 4 * h), P(*lead, None, "tp")), "b1": ((L, 4 * h), P(*lead, "tp")),
        "w2": ((L, 4 * h, h), P(*lead, "tp", None)), "b2": ((L, h), P(*lead, None)),
    }
    head = {"lnf_g": ((h,), P(None)), "lnf_b": ((h,), P(None)),
            "emb": ((cfg.vocab, h), P("tp", None))}
    param_specs = {"layers": {k: s for k, (_, s) in shapes.items()},
                   "head": {k: s for k, (_, s) in head.items()}}
    seq_spec = "tp" if sp else None
    if cfg.pp == 1 and not one_f_one_b_program:
        x_shape, t_shape = (cfg.batch, cfg.seq, h), (cfg.batch, cfg.seq)
        x_spec, t_spec = P(None, seq_spec, None), P(None, None)
    else:  # microbatches of `microbatch` examples per data-parallel replica
        nmb = cfg.batch // (cfg.microbatch * cfg.dp)
        rows = cfg.microbatch * cfg.dp
        x_shape, t_shape = (nmb, rows, cfg.seq, h), (nmb, rows, cfg.seq)
        replica = "dp" if cfg.dp > 1 else None
        x_spec, t_spec = P(None, replica, seq_spec, None), P(None, replica, None)
    in_specs = (param_specs, param_specs, param_specs, x_spec, t_spec)
    out_specs = (P(), param_specs, param_specs, param_specs)
    step = jax.jit(jax.shard_map(train_step, mesh=mesh, in_specs=in_specs, out_specs=out_specs),
                   donate_argnums=(0, 1, 2))
    named = jax.sharding.NamedSharding

    def sds(shape, spec, dt=param_dtype):
        return jax.ShapeDtypeStruct(shape, dt, sharding=named(mesh, spec))
    params = {"layers": {k: sds(s, p) for k, (s, p) in shapes.items()},
              "head": {k: sds(s, p) for k, (s, p) in head.items()}}
    args = (params, params, params, sds(x_shape, x_spec, dtype), sds(t_shape, t_spec, np.int32))
    return step, args


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    layers: int = 80
    hidden: int = 8192
    ffn: int = 28672
    heads: int = 64
    kv_heads: int = 8
    vocab: int = 128256
    seq: int = 8192
    batch: int = 1024  # global sequences per step
    head_dim: int | None = None  # hidden // heads by default
    attention: str = "dot"  # "dot" (scores through memory) or "flash" (one fused kernel)
    remat: str = "full"  # "full" (keep layer inputs) or "minimal" (keep weight matmuls' outputs)
    parallel_block: bool = False  # PaLM's attention and MLP side by side from one norm
    # The residual stream split over "tp" between the layers (MaxText's
    # `activation_embed` -> tensor rule): all-gathered before the column-parallel
    # matmuls, reduce-scattered after the row-parallel ones instead of all-reduced.
    sequence_parallel: bool = False


LLAMA3_70B = LlamaConfig()


# PaLM 540B (Chowdhery et al. 2022, Table 1 and section 4): 118 layers, model
# width 18432, 48 heads of 256, multi-query attention (one key/value head),
# SwiGLU of 4 x 18432, parallel attention and MLP, sequences of 2048, a 256k
# vocabulary (padded to a multiple of the 12 model-parallel ranks here); 1024
# sequences per pod of 3072 TPU v4 chips (2048 over two pods).
PALM_540B = LlamaConfig(layers=118, hidden=18432, ffn=73728, heads=48, kv_heads=1, vocab=256008,
                        seq=2048, batch=1024, head_dim=256, attention="flash", remat="full",
                        parallel_block=True)


def maxtext_config(scale: int, per_device_batch: int, devices: int, remat: str) -> LlamaConfig:
    """MaxText's `global_parameter_scale` models (its base.yml and pyconfig's
    `get_individual_scales`): a Llama-2 decoder of 16 layers, embedding 2048,
    16 heads of 128, SwiGLU of 7168 and a 32,000 vocabulary, scaled by a power of
    two by doubling in turn heads and MLP width, embedding, layers; sequences of
    2048, flash attention. Between layers MaxText keeps activations split over
    the tensor axis (its logical rule `activation_embed` -> tensor: the embedding
    dimension; here the sequence, which moves and keeps the same bytes)."""
    base, rem = divmod(int(math.log2(scale)), 3)
    heads_mlp = 2 ** (base + (rem > 0))
    return LlamaConfig(layers=16 * 2 ** base, hidden=2048 * 2 ** (base + (rem > 1)),
                       ffn=7168 * heads_mlp, heads=16 * heads_mlp, kv_heads=16 * heads_mlp,
                       vocab=32000, seq=2048, batch=per_device_batch * devices, head_dim=128,
                       attention="flash", remat=remat, sequence_parallel=True)


def maxtext_step_flops(cfg: LlamaConfig) -> float:
    """MaxText's model flops per step (`calculate_tflops_training_per_device` times
    the devices): 6 flops per weight and token, and 3 x 4 b s^2 heads head_dim
    per layer for attention (counted without the causal mask, as its published
    tables were)."""
    b, s, h, dh = cfg.batch, cfg.seq, cfg.hidden, cfg.head_dim or cfg.hidden // cfg.heads
    weights = 3 * h * cfg.ffn + h * dh * (2 * cfg.heads + 2 * cfg.kv_heads)
    return 6 * b * s * (weights * cfg.layers + h * cfg.vocab) + 12 * b * s * s * cfg.heads * dh * cfg.layers


def _llama_layer(jax, cfg: LlamaConfig, tp: int, weight, dtype):
    """(rematerialised layer, vocabulary-parallel loss) of a Llama decoder on one
    device's shards; `weight(w, axis)` gives a weight in `dtype` whole
    along `axis` (an FSDP all-gather, or a cast)."""
    jnp, lax = jax.numpy, jax.lax
    flash_attention = importlib.import_module(
        f"{jax.__name__}.experimental.pallas.ops.tpu.flash_attention").flash_attention
    h, nh, nkv = cfg.hidden, cfg.heads, cfg.kv_heads
    dh = cfg.head_dim or h // nh
    kv_local = max(nkv // tp, 1)  # (fewer key/value heads than tp ranks: each rank keeps one)

    def rms(x, g):
        x32 = x.astype(jnp.float32)
        return (x32 * lax.rsqrt(jnp.mean(jnp.square(x32), axis=-1, keepdims=True) + 1e-5)
                * g.astype(jnp.float32)).astype(x.dtype)

    def attend(q, k, v):
        """q: [b, s, kv heads, group, dh]; k, v: [b, s, kv heads, dh]."""
        b, s, g = q.shape[0], q.shape[1], q.shape[3]
        if cfg.attention == "flash":
            # The kernel takes as many key/value heads as query heads: repeat them.
            def heads(t):
                return jnp.moveaxis(t, 1, 2).reshape(b, -1, s, dh)
            o = flash_attention(heads(q), heads(jnp.repeat(k[:, :, :, None], g, axis=3)),
                                heads(jnp.repeat(v[:, :, :, None], g, axis=3)),
                                causal=True, sm_scale=1.0 / math.sqrt(dh))
            return jnp.moveaxis(o, 1, 2).reshape(b, s, -1)
        scores = jnp.einsum("bqkgd,bskd->bkgqs", q, k) * (1.0 / math.sqrt(dh))
        probs = jax.nn.softmax(jnp.where(_causal(lax, s), scores, -1e9).astype(jnp.float32), axis=-1)
        return jnp.einsum("bkgqs,bskd->bqkgd", probs.astype(dtype), v).reshape(b, s, -1)

    sp = cfg.sequence_parallel and tp > 1  # (over one device there is nothing to split)
    name = jax.ad_checkpoint.checkpoint_name

    def gathered(a):
        """The input of column-parallel matmuls (their outputs split over "tp" by
        columns): with sequence parallelism, all the sequence, gathered once."""
        return lax.all_gather(a, "tp", axis=1, tiled=True) if sp else a

    def row_parallel(partial, label):
        """A row-parallel matmul's partial products summed over "tp": reduce-scattered
        along the sequence with sequence parallelism, all-reduced otherwise. Named
        after the collective: that is the matmul's value in the program XLA partitions."""
        out = lax.psum_scatter(partial, "tp", scatter_dimension=1, tiled=True) if sp \
            else lax.psum(partial, "tp")
        return name(out, label)

    def block(x, p):
        wq, wkv, wo = weight(p["wq"], 0), weight(p["wkv"], 0), weight(p["wo"], 1)
        wgu, wd = weight(p["wgu"], 0), weight(p["wd"], 1)
        a = gathered(rms(x, p["g1"]))
        b, s = a.shape[0], a.shape[1]
        q = name(a @ wq, "query_proj").reshape(b, s, kv_local, -1, dh)
        kv = name(a @ wkv, "kv_proj").reshape(b, s, 2, kv_local, dh)
        ctx = attend(q, kv[:, :, 0], kv[:, :, 1])
        if cfg.parallel_block:  # PaLM: x + attention(norm(x)) + mlp(norm(x)), one all-reduce
            gu = name(a @ wgu, "mlpwi").reshape(b, s, 2, -1)
            f = jax.nn.silu(gu[:, :, 0]) * gu[:, :, 1]
            return x + row_parallel(ctx @ wo + f @ wd, "out_proj")
        x = x + row_parallel(ctx @ wo, "out_proj")
        a = gathered(rms(x, p["g2"]))
        gu = name(a @ wgu, "mlpwi").reshape(b, s, 2, -1)
        f = jax.nn.silu(gu[:, :, 0]) * gu[:, :, 1]
        return x + row_parallel(f @ wd, "mlpwo")

    if cfg.remat not in ("full", "minimal"):
        raise ValueError(f"remat must be 'full' or 'minimal', got {cfg.remat!r}")
    # MaxText's remat policies: "full" keeps each layer's input, "minimal" also
    # the outputs of its weight matmuls (`checkpoint_dots_with_no_batch_dims` on
    # the global program, whose row-parallel matmul results are what XLA's
    # partitioner holds after their reduce-scatter: b s h / tp, not the partial
    # products of b s h; here each matmul's value by its name). What the backward
    # pass does not read is not kept (the last matmul's output, "mlpwo").
    minimal = jax.checkpoint_policies.save_only_these_names(
        "query_proj", "kv_proj", "out_proj", "mlpwi", "mlpwo")
    remat_block = jax.checkpoint(block, policy=None if cfg.remat == "full" else minimal)

    def nll(x, gf, emb, targets):
        """Mean cross-entropy of the last hidden states x against `targets`, the
        vocabulary split over "tp" (emb: [V/tp, h])."""
        x = rms(x, gf)
        if sp:
            x = lax.all_gather(x, "tp", axis=1, tiled=True)
        logits = (x @ emb.T).astype(jnp.float32)
        m = _global_max(lax, logits)
        z = lax.psum(jnp.exp(logits - m).sum(axis=-1), "tp")
        local = targets - lax.axis_index("tp") * logits.shape[-1]
        here = (local >= 0) & (local < logits.shape[-1])
        picked = jnp.take_along_axis(logits, jnp.clip(local, 0, logits.shape[-1] - 1)[..., None],
                                     axis=-1)[..., 0]
        return jnp.mean(jnp.log(z) + m[..., 0] - lax.psum(jnp.where(here, picked, 0.0), "tp"))
    return remat_block, nll


def llama_step(jax, cfg: LlamaConfig, mesh, dtype=None, param_dtype=np.float32):
    """A Llama-3-shaped training step (forward, backward, Adam) with FSDP over
    "fsdp" and tensor parallelism over "tp", every layer rematerialised,
    computing in `dtype` (bfloat16 by default) on `param_dtype` parameters."""
    jnp, lax = jax.numpy, jax.lax
    dtype = jnp.bfloat16 if dtype is None else dtype
    P = jax.sharding.PartitionSpec
    tp = mesh.shape["tp"]
    h, nh, nkv = cfg.hidden, cfg.heads, cfg.kv_heads
    dh = cfg.head_dim or h // nh
    kv_local = max(nkv // tp, 1)  # (fewer key/value heads than tp ranks: each rank keeps one)
    sp = cfg.sequence_parallel and tp > 1

    def gather(w, axis):  # cast first: the all-gather and its reduce-scatter move bfloat16
        return lax.all_gather(w.astype(dtype), "fsdp", axis=axis, tiled=True)
    remat_block, nll = _llama_layer(jax, cfg, tp, gather, dtype)

    def loss_fn(params, x, targets):
        x = lax.scan(lambda x, p: (remat_block(x, p), None), x, params["layers"])[0]
        emb = gather(params["emb"], 1)  # [V/tp, h]
        return lax.pmean(nll(x, params["gf"], emb, targets), "fsdp")

    def train_step(params, opt_m, opt_v, x, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, targets)
        params, opt_m, opt_v = _adam(jax, params, grads, opt_m, opt_v)
        return loss, params, opt_m, opt_v

    L, f = cfg.layers, cfg.ffn
    shapes = {
        "g1": ((L, h), P(None, None)), "g2": ((L, h), P(None, None)),
        "wq": ((L, h, nh * dh), P(None, "fsdp", "tp")),
        "wkv": ((L, h, 2 * kv_local * tp * dh), P(None, "fsdp", "tp")),
        "wo": ((L, nh * dh, h), P(None, "tp", "fsdp")),
        "wgu": ((L, h, 2 * f), P(None, "fsdp", "tp")),
        "wd": ((L, f, h), P(None, "tp", "fsdp")),
    }
    top = {"emb": ((cfg.vocab, h), P("tp", "fsdp")), "gf": ((h,), P(None))}
    data = (((cfg.batch, cfg.seq, h), P("fsdp", "tp" if sp else None, None)),
            ((cfg.batch, cfg.seq), P("fsdp", None)))
    return jit_train_step(jax, train_step, mesh, shapes, top, data, dtype, param_dtype)


def jit_train_step(jax, train_step, mesh, shapes, top, data, dtype, param_dtype):
    """(jitted shard_map of `train_step(params, opt_m, opt_v, x, targets)`, its
    argument ShapeDtypeStructs): parameters {"layers": shapes, **top} given as
    name -> (shape, spec), Adam's moments alike and donated; data = ((x shape,
    spec), (targets shape, spec)), x in `dtype`."""
    P = jax.sharding.PartitionSpec
    specs = {"layers": {k: s for k, (_, s) in shapes.items()},
             **{k: s for k, (_, s) in top.items()}}
    (x_shape, x_spec), (t_shape, t_spec) = data
    step = jax.jit(jax.shard_map(train_step, mesh=mesh,
                                 in_specs=(specs, specs, specs, x_spec, t_spec),
                                 out_specs=(P(), specs, specs, specs), check_vma=False),
                   donate_argnums=(0, 1, 2))
    named = jax.sharding.NamedSharding

    def sds(shape, spec, dt=param_dtype):
        return jax.ShapeDtypeStruct(shape, dt, sharding=named(mesh, spec))
    params = {"layers": {k: sds(s, p) for k, (s, p) in shapes.items()},
              **{k: sds(s, p) for k, (s, p) in top.items()}}
    return step, (params, params, params, sds(x_shape, x_spec, dtype), sds(t_shape, t_spec, np.int32))


# A small GPT run for real on the simulated devices: the loss against a NumPy
# forward pass, and the 1F1B schedule's hand-scheduled gradients (seen through
# Adam's update) against autodiff's, pipelined by GPipe and not pipelined.
TINY_GPT = GPTConfig(layers=4, hidden=16, heads=4, seq=8, batch=4, vocab=32, tp=2)


def _numpy_gpt_loss(params, x, targets, cfg: GPTConfig) -> float:
    def norm(x, g, b):
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b

    def gelu(x):  # the tanh form (jax.nn.gelu's default)
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    p = {k: np.asarray(v, np.float64) for k, v in params["layers"].items()}
    b, s, h = x.shape
    nh, dh = cfg.heads, cfg.hidden // cfg.heads
    causal = np.tril(np.ones((s, s), bool))
    for i in range(cfg.layers):
        a = norm(x, p["ln1_g"][i], p["ln1_b"][i])
        qkv = (a @ p["wqkv"][i] + p["bqkv"][i]).reshape(b, s, 3, nh, dh)
        # Column-parallel QKV: each tensor-parallel rank's columns hold its heads' q, k, v.
        qkv = qkv.reshape(b, s, cfg.tp, 3, nh // cfg.tp, dh)
        q, k, v = (qkv[:, :, :, j].reshape(b, s, nh, dh) for j in range(3))
        scores = np.einsum("bqnd,bknd->bnqk", q, k) / np.sqrt(dh)
        scores = np.where(causal, scores, -1e9)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = np.einsum("bnqk,bknd->bqnd", probs, v).reshape(b, s, h)
        x = x + ctx @ p["wo"][i] + p["bo"][i]
        a = norm(x, p["ln2_g"][i], p["ln2_b"][i])
        x = x + gelu(a @ p["w1"][i] + p["b1"][i]) @ p["w2"][i] + p["b2"][i]
    head = {k: np.asarray(v, np.float64) for k, v in params["head"].items()}
    logits = norm(x, head["lnf_g"], head["lnf_b"]) @ head["emb"].T
    m = logits.max(-1, keepdims=True)
    logz = np.log(np.exp(logits - m).sum(-1)) + m[..., 0]
    picked = np.take_along_axis(logits, targets[..., None], -1)[..., 0]
    return float((logz - picked).mean())


def _tiny_inputs(jax, args, cfg):
    """Random parameters and data, Adam's moments at zero (so the updated first
    moment is a tenth of the gradient)."""
    rng = np.random.default_rng(15)

    def one(a, zero=False):
        if np.dtype(a.dtype) == np.int32:
            value = rng.integers(0, cfg.vocab, a.shape).astype(np.int32)
        else:
            value = np.zeros(a.shape, a.dtype) if zero else \
                (rng.standard_normal(a.shape) * 0.3).astype(a.dtype)
        return jax.device_put(value, a.sharding)
    params, opt_m, opt_v, x, targets = args
    zeros = [jax.tree.map(lambda a: one(a, zero=True), t) for t in (opt_m, opt_v)]
    return (jax.tree.map(one, params), *zeros, one(x), one(targets))


def run():
    import meshsim as jax
    checks = []
    grads = {}
    for name, dp, pp, schedule in (("unpipelined", 1, 1, "gpipe"), ("gpipe", 1, 2, "gpipe"),
                                   ("1f1b", 1, 2, "1f1b"), ("1f1b dp", 2, 2, "1f1b"),
                                   ("accumulated dp", 2, 1, "1f1b"),
                                   ("1f1b selective", 1, 2, "1f1b"),
                                   ("1f1b selective sp dp", 2, 2, "1f1b")):
        cfg = dataclasses.replace(TINY_GPT, dp=dp, pp=pp, schedule=schedule,
                                  microbatch=1 if pp > 1 or dp > 1 else None,
                                  recompute="selective" if "selective" in name else "full",
                                  sequence_parallel=" sp" in name)
        if schedule == "1f1b":
            mesh = jax.make_mesh((dp, pp, 2), ("dp", "pp", "tp"), devices=jax.devices()[:4 * dp])
        else:
            mesh = jax.make_mesh((pp, 2), ("pp", "tp"), devices=jax.devices()[:2 * pp])
        step, args = gpt_step(jax, cfg, mesh, dtype=np.float32)
        inputs = _tiny_inputs(jax, args, cfg)
        start = jax.tree.map(np.asarray, inputs[0])  # (the step's arguments are donated)
        x, targets = (np.asarray(a) for a in inputs[3:])
        loss, _, opt_m, _ = step(*inputs)
        if x.ndim == 4:  # microbatches back into one batch
            x, targets = x.reshape((-1,) + x.shape[2:]), targets.reshape((-1,) + targets.shape[2:])
        reference = _numpy_gpt_loss(start, x.astype(np.float64),
                                    targets, cfg)
        checks.append((f"gpt {name} loss", np.asarray(loss), reference))
        grads[name] = jax.tree.map(lambda m: 10 * np.asarray(m), opt_m)
    for name in ("gpipe", "1f1b", "1f1b dp", "accumulated dp", "1f1b selective", "1f1b selective sp dp"):  # the same data: the same gradients
        for group in ("layers", "head"):
            for k, g in grads[name][group].items():
                checks.append((f"gpt {name} d{k}", g, grads["unpipelined"][group][k]))
    return checks

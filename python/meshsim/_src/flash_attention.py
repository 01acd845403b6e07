"""Flash attention as one fused kernel (`jax.experimental.pallas.ops.tpu.
flash_attention.flash_attention`'s interface): values as the kernel computes
them, and, for the planner, a forward and a backward kernel that keep their
score tiles on chip.

Each kernel is a `custom_vjp` function of its own (so a traced program holds it
as one named call, as JAX's holds one `pallas_call`); the planner
(`_src/planning.py`) costs such a call from its declared flops and reads and
writes only its operands and results: the s x s scores never reach HBM. The
forward kernel returns the output and each row's log-sum-exp; the backward
kernel recomputes the scores from them (Dao 2023, FlashAttention-2: 2 matmuls
forward, 5 backward). With `causal=True` the kernels skip the key blocks above
the diagonal (JAX's TPU kernel's `below_or_on_diag`): of n blocks a side they
compute n (n + 1) / 2."""
from __future__ import annotations

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src import ad, planning
from meshsim._src.lax import elementwise as lax
from meshsim._src.lax import structural

# JAX's TPU kernel's mask value and default block size along both sequences.
DEFAULT_MASK_VALUE = -0.7 * float(np.finfo(np.dtype("float32")).max)
BLOCK = 128
KERNEL_PREFIX = "flash_attention_kernel_"
_F32 = np.float32


def _scores(q, k, causal, sm_scale):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k, preferred_element_type=_F32)
    if sm_scale != 1.0:
        s = s * sm_scale
    if causal:
        rows = structural.broadcasted_iota(np.int32, s.shape, 2)
        cols = structural.broadcasted_iota(np.int32, s.shape, 3)
        s = jnp.where(rows >= cols, s, DEFAULT_MASK_VALUE)
    return s


def _kernels(causal: bool, sm_scale: float):
    def forward_kernel(q, k, v):
        s = _scores(q, k, causal, sm_scale)
        m = jnp.max(s, axis=-1, keepdims=True)
        p = jnp.exp(s - m)
        total = jnp.sum(p, axis=-1, keepdims=True)
        o = jnp.einsum("bhqk,bhkd->bhqd", p.astype(v.dtype), v, preferred_element_type=_F32) / total
        return o.astype(q.dtype), (m + lax.log(total))[..., 0]

    def backward_kernel(q, k, v, o, lse, do):
        p = jnp.exp(_scores(q, k, causal, sm_scale) - lse[..., None])
        do32 = do.astype(_F32)
        dv = jnp.einsum("bhqk,bhqd->bhkd", p, do32)
        dp = jnp.einsum("bhqd,bhkd->bhqk", do32, v.astype(_F32))
        ds = p * (dp - jnp.sum(do32 * o.astype(_F32), axis=-1, keepdims=True)) * sm_scale
        dq = jnp.einsum("bhqk,bhkd->bhqd", ds, k.astype(_F32))
        dk = jnp.einsum("bhqk,bhqd->bhkd", ds, q.astype(_F32))
        return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype)

    # Named for the planner: what the kernel is and whether it is causal.
    kernels = []
    for fun, kind in ((forward_kernel, "forward"), (backward_kernel, "backward")):
        fun.__name__ = f"{KERNEL_PREFIX}{kind}{'_causal' if causal else ''}"
        kernel = ad.custom_vjp(fun)
        # (Differentiated again, a kernel is differentiated as the math it computes.)
        kernel.defvjp(lambda *args, fun=fun: (fun(*args), args),
                      lambda args, ct, fun=fun: ad.vjp(fun, *args)[1](ct))
        kernels.append(kernel)
    flash_attention_forward_kernel, flash_attention_backward_kernel = kernels

    @ad.custom_vjp
    def flash_attention(q, k, v):
        return flash_attention_forward_kernel(q, k, v)[0]

    def forward(q, k, v):
        o, lse = flash_attention_forward_kernel(q, k, v)
        return o, (q, k, v, o, lse)

    def backward(saved, do):
        return flash_attention_backward_kernel(*saved, do)
    flash_attention.defvjp(forward, backward)
    return flash_attention


def flash_attention(q, k, v, ab=None, segment_ids=None, *, causal: bool = False, sm_scale: float = 1.0,
                    block_sizes=None, debug: bool = False):
    """softmax(sm_scale q k^T, causally masked) v over [batch, heads, seq, head_dim]
    arrays, as one fused kernel forward and one backward."""
    q, k, v = (jnp.asarray(a) for a in (q, k, v))
    b, h, sq, d = q.shape
    bk, hk, sk, dk = k.shape
    bv, hv, sv, dv = v.shape
    if b != bk or b != bv:
        raise ValueError(f"Batch size mismatch: got {b}, {bk} and {bv} (for q, k, v respectively)")
    if h != hk or h != hv:
        raise ValueError(f"Head count mismatch: got {h}, {hk}, {hv} (for q, k, v respectively)")
    if d != dk:
        raise ValueError(f"Model dimension mismatch: got {d} and {dk} (for q and k respectively)")
    if d != dv:
        raise NotImplementedError("V model dimension unequal to KV model dimension unsupported")
    if sk != sv:
        raise ValueError(f"KV sequence length mismatch: got {sk} and {sv}")
    if ab is not None or segment_ids is not None:
        raise NotImplementedError("flash_attention with an attention bias or segment ids")
    return _kernels(bool(causal), float(sm_scale))(q, k, v)


def _causal_fraction(sq: int, sk: int) -> float:
    """Share of the score blocks a causal kernel computes (n (n + 1) / 2 of n^2)."""
    n = -(-min(sq, sk) // BLOCK)
    return (n + 1) / (2 * n)


def kernel_cost(name: str, in_shapes: list) -> tuple | None:
    """(flops, matmul dims (batch, m, n, k)) of one of these kernels on its
    operands' per-device shapes, or None for another function."""
    if not name.startswith(KERNEL_PREFIX):
        return None
    kind = name[len(KERNEL_PREFIX):]
    b, h, sq, d = in_shapes[0]
    sk = in_shapes[1][2]
    share = _causal_fraction(sq, sk) if kind.endswith("_causal") else 1.0
    matmuls = 2 if kind.startswith("forward") else 5
    return 2.0 * matmuls * b * h * sq * sk * d * share, (b * h, sq, sk, d)


planning.FUSED_KERNEL_COSTS.append(kernel_cost)

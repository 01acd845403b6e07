"""Flash attention as a fused kernel (`meshsim.experimental.pallas.ops.tpu.
flash_attention`): values and gradients against JAX's reference implementation
of the same kernel, and the planner's cost of the kernels (flops of the computed
score blocks; bytes of operands and results only, no s x s buffer)."""
import zlib

import numpy as np
import pytest

import meshsim as jax
from meshsim.experimental.pallas.ops.tpu import flash_attention as fa


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 16, 8), (1, 4, 40, 16)])
def test_values_and_gradients_match_jax(real_jax, causal, shape):
    ref = pytest.importorskip("jax.experimental.pallas.ops.tpu.flash_attention")
    rng = np.random.default_rng(zlib.crc32(f"{shape}{causal}".encode()))
    q, k, v, do = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    scale = 0.3
    ours = fa.flash_attention(q, k, v, causal=causal, sm_scale=scale)
    theirs = ref.mha_reference(q, k, v, None, None, causal=causal, sm_scale=scale)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)
    grads = jax.grad(lambda q, k, v: (fa.flash_attention(q, k, v, causal=causal, sm_scale=scale) * do).sum(),
                     argnums=(0, 1, 2))(q, k, v)
    expect = real_jax.grad(lambda q, k, v: (ref.mha_reference_no_custom_vjp(
        q, k, v, None, None, causal=causal, sm_scale=scale) * do).sum(), argnums=(0, 1, 2))(q, k, v)
    for g, e in zip(grads, expect):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-4, atol=1e-5)
    # Under jit and differentiated twice (the kernels as the math they compute).
    jitted = jax.jit(lambda q: fa.flash_attention(q, k, v, causal=causal, sm_scale=scale))(q)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(theirs), rtol=1e-5, atol=1e-5)
    hvp = jax.grad(lambda q: jax.grad(lambda q: fa.flash_attention(q, k, v, causal=causal).sum())(q).sum())(q)
    hvp_ref = real_jax.grad(lambda q: real_jax.grad(lambda q: ref.mha_reference_no_custom_vjp(
        q, k, v, None, None, causal=causal).sum())(q).sum())(q)
    np.testing.assert_allclose(np.asarray(hvp), np.asarray(hvp_ref), rtol=1e-3, atol=1e-4)


def test_bad_shapes_are_named_as_jax_names_them():
    q = np.zeros((2, 3, 16, 8), np.float32)
    with pytest.raises(ValueError, match="Head count mismatch: got 3, 2, 3"):
        fa.flash_attention(q, q[:, :2], q)
    with pytest.raises(ValueError, match="Batch size mismatch"):
        fa.flash_attention(q, q[:1], q)
    with pytest.raises(ValueError, match="KV sequence length mismatch: got 16 and 8"):
        fa.flash_attention(q, q, q[:, :, :8])


@pytest.mark.parametrize("causal", [False, True])
def test_the_planner_costs_one_fused_kernel_each_way(causal):
    b, h, s, d = 2, 4, 1024, 128
    f = jax.jit(jax.grad(lambda q, k, v: fa.flash_attention(q, k, v, causal=causal).astype(np.float32).sum(),
                         argnums=(0, 1, 2)))
    sds = jax.ShapeDtypeStruct((b, h, s, d), jax.numpy.bfloat16)
    compiled = f.lower(sds, sds, sds).compile()
    kernels = [o for o in compiled.analysis.ops if o.name == "custom_vjp_call"]
    assert len(kernels) == 2
    blocks = s // 128
    share = (blocks + 1) / (2 * blocks) if causal else 1.0
    forward, backward = kernels
    assert forward.flops == pytest.approx(4 * b * h * s * s * d * share)
    assert backward.flops == pytest.approx(2.5 * forward.flops)
    # Operands and results only: q, k, v in; o (bfloat16) and the float32 row
    # statistics out; the scores never reach memory.
    qkv = 3 * b * h * s * d * 2
    assert forward.bytes_accessed == qkv + b * h * s * d * 2 + b * h * s * 4
    assert backward.bytes_accessed == qkv + 2 * b * h * s * d * 2 + b * h * s * 4 + qkv
    # Nothing of s x s is allocated either.
    assert compiled.memory_analysis().temp_size_in_bytes < b * h * s * s * 2
    # The unfused program (scores through memory) moves far more bytes.
    def unfused(q, k, v):
        scores = jax.numpy.einsum("bhqd,bhkd->bhqk", q, k).astype(np.float32)
        return jax.numpy.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores).astype(q.dtype), v)
    plain = jax.jit(jax.grad(lambda q, k, v: unfused(q, k, v).astype(np.float32).sum(), argnums=(0, 1, 2)))
    assert plain.lower(sds, sds, sds).compile().analysis.bytes_accessed > \
        5 * compiled.analysis.bytes_accessed

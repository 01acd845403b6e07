"""As jax.experimental.pallas.ops.tpu.flash_attention: `flash_attention(q, k, v,
causal=..., sm_scale=...)` over [batch, heads, seq, head_dim] arrays."""
from meshsim._src.flash_attention import DEFAULT_MASK_VALUE, flash_attention  # noqa: F401

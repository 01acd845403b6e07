"""`jax.nn.scaled_matmul` and `scaled_dot_general`: block-scaled matrix products (the form
mxfp8/nvfp4 kernels compute), here computed in float32 from the scales expanded over their
blocks."""
from __future__ import annotations

import numpy as np

from meshsim._src.numpy import namespace as jnp
from meshsim._src import core

__all__ = ["scaled_matmul", "scaled_dot_general"]


def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=np.float32):
    """einsum('BMK,BNK->BMN') of `lhs` and `rhs`, each multiplied by its scales repeated
    over blocks of the contracting (last) dimension; block sizes K // scales' K."""
    a, b, a_scales, b_scales = (core.asarray_value(x) for x in (lhs, rhs, lhs_scales, rhs_scales))
    if not all(x.ndim == 3 for x in (a, b, a_scales, b_scales)):
        raise ValueError("scaled_matmul requires all inputs to be 3-dimensional arrays")
    if a.shape[2] != b.shape[2] or a.shape[0] != b.shape[0]:
        raise ValueError("scaled_matmul requires inputs a and b to have matching batch (B) and contract "
                         f"(K) dimensions, but got shapes {a.shape} and {b.shape}")
    if a_scales.shape[2] != b_scales.shape[2] or a_scales.shape[0] != b_scales.shape[0]:
        raise ValueError("scaled_matmul requires scales to have matching batch (B) and contract (K) "
                         f"dimensions, but got shapes {a_scales.shape} and {b_scales.shape}")
    if a_scales.shape[1] != a.shape[1] or b_scales.shape[1] != b.shape[1]:
        raise ValueError("scaled_matmul requires scales to match non-contract dimensions of inputs, but "
                         f"got shapes a: {a.shape}, b: {b.shape}, a_scales: {a_scales.shape}, "
                         f"b_scales: {b_scales.shape}")

    def scaled(x, scales):
        block = x.shape[2] // scales.shape[2]
        return x.astype(jnp.float32) * jnp.repeat(scales.astype(jnp.float32), block, axis=2)
    out = jnp.einsum("BMK,BNK->BMN", scaled(a, a_scales), scaled(b, b_scales))
    return out.astype(preferred_element_type)


def scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=np.float32,
                       configs=None, implementation=None):
    """`lax.dot_general` when `configs` is None (as JAX falls back); quantizing to the
    configs' float8/float4 block formats is not available (meshsim has no float8_e8m0fnu)."""
    from meshsim._src.lax.linalg import dot_general
    if implementation is not None:
        import warnings
        warnings.warn("Backend selector, now ignored. The system chooses the backend automatically.",
                      DeprecationWarning, stacklevel=2)
    if configs is not None:
        raise NotImplementedError("scaled_dot_general with quantization configs: meshsim has no "
                                  "float8_e8m0fnu block-scale dtype")
    return dot_general(lhs, rhs, dimension_numbers, preferred_element_type=preferred_element_type)

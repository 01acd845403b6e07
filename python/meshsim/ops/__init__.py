"""meshsim.ops: segment reductions (as jax.ops)."""
from meshsim._src.ops import segment_sum, segment_prod, segment_max, segment_min  # noqa: F401

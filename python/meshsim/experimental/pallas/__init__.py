"""meshsim.experimental.pallas: the library kernels of jax.experimental.pallas.ops
that programs call (their values, and for the planner one fused kernel each)."""

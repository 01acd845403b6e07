"""stax and optimizers, the small neural-network and optimizer libraries that
JAX ships as jax.example_libraries, written over meshsim's own modules."""

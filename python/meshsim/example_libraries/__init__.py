"""meshsim.example_libraries (as jax.example_libraries): stax and optimizers."""

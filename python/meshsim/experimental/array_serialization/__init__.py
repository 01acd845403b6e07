"""`jax.experimental.array_serialization`: tensorstore checkpoints of sharded arrays. meshsim
does not write tensorstore checkpoints; the module exists so that libraries importing it
(orbax, flax.training.checkpoints) load, and its entry points say so when called."""

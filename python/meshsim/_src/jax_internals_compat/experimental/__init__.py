"""`jax.experimental` internals under meshsim (the public part is `meshsim.experimental`)."""

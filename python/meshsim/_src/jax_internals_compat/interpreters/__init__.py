"""`jax.interpreters` under meshsim: the submodules a library was seen to use."""

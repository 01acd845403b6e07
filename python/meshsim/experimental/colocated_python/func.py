"""`jax.experimental.colocated_python.func`: the module colocated functions are defined in
(their plumbing is not needed by the simulator, which calls them directly)."""

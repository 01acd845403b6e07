"""The one name of JAX's backend module that user code calls (the seed notebook
asks it before setting `jax_num_cpu_devices`)."""
from meshsim._src.devices import backends_are_initialized  # noqa: F401

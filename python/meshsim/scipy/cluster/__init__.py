"""meshsim.scipy.cluster (as jax.scipy.cluster): vector quantization (`vq`)."""
from meshsim.scipy.cluster import vq  # noqa: F401

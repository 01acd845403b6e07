"""meshsim.scipy.fft: discrete cosine transforms (as jax.scipy.fft)."""
from meshsim._src.scipy.fft import *  # noqa: F401,F403

"""meshsim.numpy.fft: discrete Fourier transforms (as jax.numpy.fft)."""
from meshsim._src.numpy.fft import *  # noqa: F401,F403

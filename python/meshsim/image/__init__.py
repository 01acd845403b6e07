"""meshsim.image (as jax.image): resizing and scale-and-translate resampling."""
from meshsim._src.image import ResizeMethod, resize, scale_and_translate  # noqa: F401

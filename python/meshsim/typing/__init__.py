"""meshsim.typing (as jax.typing): the annotations for array-like arguments and dtypes."""
from meshsim._src.typing import ArrayLike, DTypeLike  # noqa: F401

"""meshsim.scipy.spatial.transform (as jax.scipy.spatial.transform)."""
from meshsim._src.scipy.spatial_transform import Rotation, Slerp  # noqa: F401

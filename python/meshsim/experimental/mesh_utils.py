"""meshsim.experimental.mesh_utils (as jax.experimental.mesh_utils)."""
from meshsim._src.mesh_utils import create_device_mesh, create_hybrid_device_mesh  # noqa: F401

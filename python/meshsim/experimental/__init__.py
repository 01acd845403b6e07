"""meshsim.experimental (as jax.experimental): topologies for dry runs, pjit, mesh_utils,
multihost_utils."""
from meshsim.experimental import topologies  # noqa: F401

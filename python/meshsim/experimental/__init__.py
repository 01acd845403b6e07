"""meshsim.experimental (as jax.experimental): topologies for dry runs, pjit, mesh_utils,
multihost_utils, io_callback."""
from meshsim.experimental import topologies  # noqa: F401
from meshsim._src.callback import io_callback  # noqa: F401

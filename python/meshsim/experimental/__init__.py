"""meshsim.experimental: JAX's experimental namespace (topologies for dry runs)."""
from meshsim.experimental import topologies  # noqa: F401

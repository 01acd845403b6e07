"""meshsim.debug: inspecting and drawing how arrays are sharded."""
from meshsim._src.debug import (  # noqa: F401
    Collective, inspect_array_sharding, record_collectives, visualize_array_sharding,
    visualize_sharding)

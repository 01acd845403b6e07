"""meshsim.debug: inspecting and drawing how arrays are sharded."""
from meshsim._src.debug import (  # noqa: F401
    inspect_array_sharding, visualize_array_sharding, visualize_sharding)

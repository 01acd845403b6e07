"""meshsim.debug: inspecting and drawing how arrays are sharded, and recording
what programs ran (collectives, dispatch streams)."""
from meshsim._src.debug import (  # noqa: F401
    Collective, Dispatch, inspect_array_sharding, record_collectives, record_dispatches,
    visualize_array_sharding, visualize_sharding)

"""meshsim.debug: inspecting and drawing how arrays are sharded, and recording
what programs ran (collectives, dispatch streams)."""
from meshsim._src.debug import (  # noqa: F401
    Collective, Dispatch, inspect_array_sharding, record_collectives, record_dispatches,
    visualize_array_sharding, visualize_sharding)
from meshsim._src.callback import debug_callback as callback, debug_print as print  # noqa: F401,E402
from meshsim._src.debugger import breakpoint  # noqa: F401,E402,A004

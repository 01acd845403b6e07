"""meshsim.experimental.multihost_utils (as jax.experimental.multihost_utils), for one process."""
from meshsim._src.distributed import (ProcessFailureError, assert_equal,  # noqa: F401
                                      broadcast_one_to_all, live_devices,
                                      reached_preemption_sync_point,
                                      global_array_to_host_local_array,
                                      host_local_array_to_global_array, process_allgather,
                                      sync_global_devices)

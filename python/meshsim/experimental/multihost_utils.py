"""meshsim.experimental.multihost_utils (as jax.experimental.multihost_utils), for one process."""
from meshsim._src.distributed import (assert_equal, broadcast_one_to_all,  # noqa: F401
                                      global_array_to_host_local_array,
                                      host_local_array_to_global_array, process_allgather,
                                      sync_global_devices)

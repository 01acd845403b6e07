"""Multi-process JAX on one process: `jax.distributed` and
`jax.experimental.multihost_utils` as they behave when the job has exactly
one process (every simulated device is local), so multi-host programs run
unchanged here. A job of more processes is refused rather than pretended."""
from __future__ import annotations

import contextlib

import numpy as np

from meshsim._src import devices as devices_lib
from meshsim._src import tree_util

_initialized = False



def draw_as_jax_import_does() -> None:
    """`import jax` draws five doubles from NumPy's global generator (the jittered back-off
    delays of JAX's Kubernetes cluster detection are computed when its module loads). A
    program that seeds NumPy before importing JAX sees the generator after those draws, so
    importing meshsim, or `jax` through the alias, draws them too."""
    np.random.rand(5)


draw_as_jax_import_does()


class _State:
    """What `jax._src.distributed.global_state` tells libraries (orbax reads `client` and
    `process_id` to choose between single- and multi-process paths): process 0 of 1, with
    no coordination client or service."""
    client = None
    service = None
    preemption_sync_manager = None
    coordinator_address = None
    process_id = 0
    num_processes = 1


global_state = _State()


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids=None,
               cluster_detection_method: str | None = None, initialization_timeout: int = 300,
               heartbeat_timeout_seconds: int = 100, shutdown_timeout_seconds: int = 300,
               coordinator_bind_address: str | None = None, slice_index: int | None = None,
               partition_index: int | None = None) -> None:
    """Joins the (one-process) job: process 0 of 1."""
    global _initialized
    if _initialized:
        raise RuntimeError("distributed.initialize should only be called once.")
    if devices_lib.backends_are_initialized():
        raise RuntimeError(
            "jax.distributed.initialize() must be called before any JAX calls that might "
            "initialise the XLA backend. This includes any computation, but also calls to "
            "jax.devices, jax.device_put, and others.")
    if num_processes not in (None, 1) or process_id not in (None, 0):
        raise ValueError(
            "meshsim runs every simulated device in one process: num_processes must be 1 and "
            f"process_id 0, got num_processes={num_processes}, process_id={process_id}")
    _initialized = True


def is_initialized() -> bool:
    return _initialized


def shutdown() -> None:
    global _initialized
    _initialized = False


# --- multihost_utils ----------------------------------------------------------------

def sync_global_devices(name: str) -> None:
    """A barrier across processes: with one process, nothing to wait for."""


def broadcast_one_to_all(in_tree, is_source: bool | None = None):
    """Process 0's value of every leaf, as NumPy arrays (with one process, its own)."""
    return tree_util.tree_map(lambda x: np.asarray(x), in_tree)


def process_allgather(in_tree, tiled: bool = False):
    """Every process's value of each leaf, as NumPy arrays: stacked on a new
    leading axis of size 1 (one process), or concatenated if `tiled`."""
    def gather(x):
        x = np.asarray(x)
        return x if tiled else x[None]
    return tree_util.tree_map(gather, in_tree)


def assert_equal(in_tree, fail_message: str = "") -> None:
    """Checks that every process holds the same values: one process always does."""


def host_local_array_to_global_array(local_inputs, global_mesh, pspecs):
    """The global arrays laid out by `pspecs` over `global_mesh` whose
    process-local parts are `local_inputs` (with one process, the whole)."""
    from meshsim._src.sharding.api import device_put
    from meshsim._src.sharding.named_sharding import NamedSharding
    from meshsim._src.sharding.partition_spec import PartitionSpec
    is_spec = lambda p: p is None or isinstance(p, PartitionSpec)  # noqa: E731
    specs = tree_util.tree_broadcast(pspecs, local_inputs, is_leaf=is_spec)
    return tree_util.tree_map(
        lambda x, p: device_put(x, NamedSharding(global_mesh, p or PartitionSpec())),
        local_inputs, specs)


def global_array_to_host_local_array(global_inputs, global_mesh, pspecs):
    """This process's part of each global array: with one process, the array."""
    return host_local_array_to_global_array(global_inputs, global_mesh, pspecs)


class ProcessFailureError(Exception):
    """Raised when a process of a multi-process program fails (never, with one process)."""


def reached_preemption_sync_point(step_id: int) -> bool:
    """Whether every process reached the preemption sync point at `step_id`: with one process
    and no preemption notice, never."""
    return False


@contextlib.contextmanager
def live_devices(devices):
    """Runs the block on the devices still alive: with one process, all of `devices`. As in
    JAX, distributed initialization must come first."""
    if not _initialized:
        raise RuntimeError("Distributed JAX not initialized.")
    yield list(devices)

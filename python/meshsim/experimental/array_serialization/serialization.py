"""`jax.experimental.array_serialization.serialization`: the names libraries import at load
time. Calling any of them raises NotImplementedError: meshsim keeps arrays in host memory
and has no tensorstore writer (save with `np.save(path, np.asarray(x))` or orbax's
PyTreeCheckpointer over host arrays instead)."""
from __future__ import annotations


def _unsupported(what: str):
    raise NotImplementedError(
        f"{what}: meshsim does not write or read tensorstore checkpoints of sharded arrays")


class GlobalAsyncCheckpointManagerBase:
    def __init__(self, *args, **kwargs):
        _unsupported(type(self).__name__)


class AsyncManager(GlobalAsyncCheckpointManagerBase):
    pass


class GlobalAsyncCheckpointManager(AsyncManager):
    pass


def get_tensorstore_spec(ckpt_path, ocdbt: bool = True, process_idx=None, arr=None, driver=None):
    _unsupported("get_tensorstore_spec")


async def async_serialize(*args, **kwargs):
    _unsupported("async_serialize")


async def async_deserialize(*args, **kwargs):
    _unsupported("async_deserialize")


def run_serialization(*args, **kwargs):
    _unsupported("run_serialization")


def run_deserialization(*args, **kwargs):
    _unsupported("run_deserialization")

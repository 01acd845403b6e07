"""The simulated devices: `jax_num_cpu_devices` CPU devices of one process."""
from __future__ import annotations

from meshsim._src.config import config


class MeshDevice:
    """What a Mesh may hold: the simulated CPU devices, or the devices of a
    topology description (`_src/topologies.py`), which run nothing."""

    __slots__ = ()


class Device(MeshDevice):
    """One simulated device. Devices are created once; compare and hash by id.
    The class is named as JAX's (`jax.Device`, one class for every platform), which
    errors about a device object name; only the repr names the platform."""

    __slots__ = ("id",)
    platform = "cpu"
    device_kind = "cpu"
    process_index = 0
    host_id = 0

    def __init__(self, id: int):
        self.id = id

    def __repr__(self):
        return f"CpuDevice(id={self.id})"

    def __str__(self):
        return f"cpu:{self.id}"

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash((Device, self.id))

    def __reduce__(self):
        return device, (self.id,)

    @property
    def client(self) -> "Client":
        return _CLIENT

    def addressable_memories(self) -> list["Memory"]:
        return [Memory(self)]

    def default_memory(self) -> "Memory":
        return Memory(self)

    def memory(self, kind: str) -> "Memory":
        if kind != Memory.kind:
            from meshsim._src.errors import JaxRuntimeError
            raise JaxRuntimeError(
                "INVALID_ARGUMENT: Could not find memory addressable by device cpu. Device cpu can "
                f"address the following memory kinds: device. Got memory kind: {kind}")
        return Memory(self)


class Memory:
    """A device's memory. A simulated device has one, of JAX's default kind 'device' (a
    program's arrays stay in it: the host and pinned-host kinds of JAX's CPU devices are not
    simulated)."""

    __slots__ = ("_device",)
    kind = "device"

    def __init__(self, device: Device):
        self._device = device

    def addressable_by_devices(self) -> list[Device]:
        return [self._device]

    def __eq__(self, other):
        return isinstance(other, Memory) and other._device == self._device

    def __hash__(self):
        return hash((Memory, self._device))

    def __repr__(self):
        return f"CPU_DEVICE_{self._device.id}"

    def __str__(self):
        return f"CpuDeviceMemory(id={self._device.id}, process_index=0, client=cpu)"


class Client:
    """What JAX calls the backend client (`device.client`): the one process's CPU devices,
    for libraries that ask it about the platform and the process."""

    platform = "cpu"
    platform_version = "cpu"
    runtime_type = "pjrt_ifrt"

    def process_index(self) -> int:
        return 0

    host_id = process_index

    def device_count(self) -> int:
        return len(_all_devices())

    local_device_count = device_count

    def devices(self) -> list[Device]:
        return list(_all_devices())

    local_devices = devices


_CLIENT = Client()


_devices: list[Device] | None = None


def _all_devices() -> list[Device]:
    global _devices
    if _devices is None:
        _devices = [Device(i) for i in range(config._mark_devices_in_use())]
    return _devices


def _check_backend(backend) -> None:
    if backend is not None and backend != "cpu":
        raise RuntimeError(
            f"Unknown backend: '{backend}' requested, but no platforms that are instances of "
            f"{backend} are present. Platforms present are: cpu")


def device(id: int) -> Device:
    """The device with id `id`."""
    return _all_devices()[id]


def devices(backend: str | None = None) -> list[Device]:
    _check_backend(backend)
    return list(_all_devices())


def device_count(backend: str | None = None) -> int:
    _check_backend(backend)
    return len(_all_devices())


def local_devices(process_index: int | None = None, backend: str | None = None,
                  host_id: int | None = None) -> list[Device]:
    return devices(backend)


def local_device_count(backend: str | None = None) -> int:
    return device_count(backend)


def process_index(backend: str | None = None) -> int:
    """Every simulated device belongs to the one process."""
    _check_backend(backend)
    return 0


def process_count(backend: str | None = None) -> int:
    _check_backend(backend)
    return 1


def default_backend() -> str:
    return "cpu"


def backends_are_initialized() -> bool:
    """Whether the device list has been created (after which the device count is fixed)."""
    return _devices is not None


def _renamed(old: str, new, new_name: str):
    """JAX's deprecated `host_*` alias of a `process_*` query (it warns, then answers)."""
    def alias(backend=None):
        import warnings
        warnings.warn(f"jax.{old} has been renamed to jax.{new_name}. This alias will eventually "
                      "be removed; please update your code.", stacklevel=2)
        return new(backend)
    alias.__name__ = old
    return alias


host_id = _renamed("host_id", process_index, "process_index")
host_count = _renamed("host_count", process_count, "process_count")
host_ids = _renamed("host_ids", lambda backend=None: list(range(process_count(backend))),
                    "process_indices")

"""Device objects as JAX 0.10.2 has them (8 CPU devices): one class, `jax.Device`, whose name
errors about a device show (its repr names the platform), and equality and hashing by device.
Real JAX is the oracle."""
import numpy as np
import pytest

import meshsim


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


MISUSES = {
    "call": lambda d: d(),
    "len": lambda d: len(d),
    "add": lambda d: d + 1,
    "index": lambda d: d[0],
    "iterate": lambda d: list(d),
    "array method called": lambda d: d.platform(),
}


def _error(action, *args):
    try:
        action(*args)
    except Exception as e:  # noqa: BLE001 - the class name and text are compared
        return type(e).__name__, str(e)
    return None


@pytest.mark.parametrize("misuse", sorted(MISUSES))
def test_misusing_a_device_names_jaxs_class(libs, misuse):
    rng = np.random.default_rng(len(misuse))
    index = int(rng.integers(0, 8))
    ours, theirs = (_error(MISUSES[misuse], lib.devices()[index]) for lib in libs)
    assert theirs is not None
    assert ours == theirs


def test_array_device_is_a_property(libs):
    """`x.device()` (older JAX's method) calls the device the property returns."""
    shape = tuple(np.random.default_rng(1).integers(1, 5, size=2))
    ours, theirs = (_error(lambda lib: lib.numpy.zeros(shape).device(), lib) for lib in libs)
    assert ours == theirs


def test_the_class_and_its_instances(libs):
    for lib in libs:
        devices = lib.devices()
        assert all(isinstance(d, lib.Device) for d in devices)
        assert type(devices[0]).__name__ == "Device"
        assert repr(devices[2]) == "CpuDevice(id=2)"
        assert devices[3] == lib.devices()[3] and devices[3] != devices[4]
        assert devices[0] != 0 and devices[0] != "cpu:0"
        assert len({*devices, *lib.devices()}) == len(devices)

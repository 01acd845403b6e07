"""`meshsim.config`: JAX's configuration object for the flags the simulator honours.

    config.update("jax_num_cpu_devices", 8)   # before the devices are first used
    config.update("jax_enable_x64", True)
    config.jax_enable_x64                      # -> True

Other `jax_*` flags are accepted and stored, so that notebooks written for JAX
run unchanged; they do not change what the simulator does."""
from __future__ import annotations

import contextlib
import os
from typing import Any, Callable

from meshsim import _core


def _default_num_devices() -> int:
    return int(os.environ.get("MESHSIM_NUM_DEVICES", "8"))


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class Config:
    def __init__(self):
        self._values: dict[str, Any] = {
            "jax_num_cpu_devices": _default_num_devices(),
            "jax_enable_x64": False,
            "jax_platforms": None,
            "jax_threefry_partitionable": True,
            "jax_default_prng_impl": "threefry2x32",
            "jax_disable_jit": False,
            # ppermute over a tuple of axes not in mesh order: False counts devices in
            # mesh order and warns (JAX <= 0.11); True raises as newer JAX does.
            "jax_raise_on_ppermute_sort_diff": False,
            # A jitted call returns futures; off (for debugging), each call runs
            # before it returns and raises its errors at once.
            "jax_cpu_enable_async_dispatch": True,
            # 'strict' allows only weak-type promotions (jnp ops on mixed dtypes raise).
            "jax_numpy_dtype_promotion": "standard",
        }
        self._setters: dict[str, Callable[[Any], Any]] = {
            "jax_num_cpu_devices": self._set_num_devices,
            "jax_enable_x64": self._set_x64,
            "jax_platforms": self._set_platforms,
            "jax_cpu_enable_async_dispatch": self._set_async_dispatch,
            "jax_numpy_dtype_promotion": self._set_dtype_promotion,
        }
        self._devices_in_use = False
        if _env_flag("JAX_ENABLE_X64"):
            self.update("jax_enable_x64", True)
        if os.environ.get("JAX_CPU_ENABLE_ASYNC_DISPATCH", "").strip():
            self.update("jax_cpu_enable_async_dispatch",
                        _env_flag("JAX_CPU_ENABLE_ASYNC_DISPATCH"))

    def update(self, name: str, value: Any) -> None:
        if not name.startswith("jax_"):
            raise AttributeError(f"Unrecognized config option: {name}")
        setter = self._setters.get(name)
        self._values[name] = setter(value) if setter else value

    def read(self, name: str) -> Any:
        return self._value(name)

    @property
    def values(self) -> dict[str, Any]:
        return dict(self._values)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("jax_"):
            return self._value(name)
        raise AttributeError(f"'Config' object has no attribute '{name}'")

    def _value(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"Unrecognized config option: {name}") from None

    def _set_num_devices(self, n) -> int:
        n = int(n)
        if n < 1:
            raise ValueError(f"jax_num_cpu_devices must be a positive integer, got {n}")
        # The device list is built once; meshes and arrays refer to it by id.
        if self._devices_in_use and n != self._values["jax_num_cpu_devices"]:
            raise RuntimeError(
                "jax_num_cpu_devices config should be updated before backends are initialized "
                "i.e. before any JAX operation is executed. You should initialize this config "
                "immediately after `import jax`.")
        return n

    def _mark_devices_in_use(self) -> int:
        """Freezes the device count (called when the device list is first built)."""
        self._devices_in_use = True
        return self._values["jax_num_cpu_devices"]

    @staticmethod
    def _set_x64(value) -> bool:
        value = bool(value)
        _core.set_x64_enabled(value)
        return value

    @staticmethod
    def _set_dtype_promotion(value) -> str:
        if value not in ("standard", "strict"):
            raise ValueError(f"jax_numpy_dtype_promotion must be 'standard' or 'strict', got {value!r}")
        _core.set_strict_promotion(value == "strict")
        return value

    @staticmethod
    def _set_async_dispatch(value) -> bool:
        value = bool(value)
        _core.wait_all_dispatched()  # what ran asynchronously finishes first
        _core.set_async_dispatch(value)
        return value

    @staticmethod
    def _set_platforms(value):
        if value and "cpu" not in str(value).split(","):
            raise ValueError("meshsim simulates CPU devices only; jax_platforms must include "
                             f"'cpu', got {value!r}")
        return value


config = Config()


@contextlib.contextmanager
def raise_on_ppermute_sort_diff(value: bool):
    """`with raise_on_ppermute_sort_diff(False):` sets the flag of that name
    for the block (as JAX's context manager does)."""
    old = config.read("jax_raise_on_ppermute_sort_diff")
    config.update("jax_raise_on_ppermute_sort_diff", bool(value))
    try:
        yield
    finally:
        config.update("jax_raise_on_ppermute_sort_diff", old)

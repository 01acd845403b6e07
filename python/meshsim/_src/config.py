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


def _xla_flags_device_count() -> int | None:
    """The device count `XLA_FLAGS=--xla_force_host_platform_device_count=N` asks for (the
    last mention wins, as for any XLA flag), read when the devices are first built, as XLA
    reads it when JAX's CPU backend starts; None without one."""
    count = None
    for flag in os.environ.get("XLA_FLAGS", "").split():
        name, _, value = flag.partition("=")
        if name.lstrip("-") == "xla_force_host_platform_device_count" and value.strip().isdigit():
            count = int(value)
    return count if count else None


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
        # A count given to meshsim itself outranks XLA_FLAGS, as JAX's
        # `jax_num_cpu_devices` outranks the XLA flag.
        self._num_devices_chosen = "MESHSIM_NUM_DEVICES" in os.environ
        if _env_flag("JAX_ENABLE_X64"):
            self.update("jax_enable_x64", True)
        if os.environ.get("JAX_CPU_ENABLE_ASYNC_DISPATCH", "").strip():
            self.update("jax_cpu_enable_async_dispatch",
                        _env_flag("JAX_CPU_ENABLE_ASYNC_DISPATCH"))

    def update(self, name: str, value: Any) -> None:
        if not name.startswith("jax_"):
            raise AttributeError(f"Unrecognized config option: {name}")
        flag = _FLAGS.get(name)
        if flag is not None and flag.parser is not None:
            value = flag.parser(value)
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
        self._num_devices_chosen = True
        return n

    def _mark_devices_in_use(self) -> int:
        """Freezes the device count (called when the device list is first built)."""
        if not self._devices_in_use and not self._num_devices_chosen:
            self._values["jax_num_cpu_devices"] = _xla_flags_device_count() or _default_num_devices()
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
def disable_jit(disable: bool = True):
    """Within the block, jitted functions run op by op (for debugging)."""
    old = config.read("jax_disable_jit")
    config.update("jax_disable_jit", bool(disable))
    try:
        yield
    finally:
        config.update("jax_disable_jit", old)


_NO_DEFAULT = object()
_FLAGS: dict[str, "Flag"] = {}


class Flag:
    """A config option that is also a context manager, as JAX's `jax.<option>` objects are:
    `with jax.debug_nans(True):` sets it for the block, `jax.debug_nans.value` reads it,
    and `@jax.debug_nans(True)` sets it while a function runs. `config.update` sets the same value."""

    def __init__(self, name: str, default: Any, help: str = "", parser: Callable | None = None,
                 context_default: Any = _NO_DEFAULT):
        self.name = name
        self.__name__ = name[4:]
        self.__doc__ = f"Context manager for `{name}` config option.\n\n{help}"
        self.parser = parser
        self._context_default = context_default
        _FLAGS[name] = self
        if name not in config._values:
            config._values[name] = parser(default) if parser else default

    @property
    def value(self) -> Any:
        return config.read(self.name)

    def __call__(self, new_val: Any = _NO_DEFAULT) -> "_FlagBlock":
        if new_val is _NO_DEFAULT:
            if self._context_default is _NO_DEFAULT:
                raise TypeError(f"Context manager for {self.__name__} config option requires an "
                                "argument representing the new value for the config option.")
            new_val = self._context_default
        return _FlagBlock(self, self.parser(new_val) if self.parser else new_val)

    def __repr__(self) -> str:
        return f"{self.name}={self.value!r}"


class _FlagBlock(contextlib.ContextDecorator):
    def __init__(self, flag: Flag, value: Any):
        self.flag, self.new_val = flag, value
        self._saved: list = []

    def __enter__(self):
        self._saved.append(config.read(self.flag.name))
        config.update(self.flag.name, self.new_val)

    def __exit__(self, *exc):
        config.update(self.flag.name, self._saved.pop())


def bool_flag(name: str, default: bool, help: str = "") -> Flag:
    return Flag(name, default, help, parser=bool, context_default=True)


def enum_flag(name: str, default: Any, choices: tuple, help: str = "", optional: bool = False) -> Flag:
    """A flag taking one of `choices` (or None when `optional`), checked as JAX checks it."""
    def parse(value):
        if value is None and optional:
            return None
        value = getattr(value, "value", value)  # JAX's enum members name their string
        if value not in choices:
            allowed = ("None or in " if optional else "in ") + str(list(choices))
            raise ValueError(f"new enum value must be {allowed}, got {value} of type {type(value)}.")
        return value
    return Flag(name, default, help, parser=parse)

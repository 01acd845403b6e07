"""`meshsim.config`: JAX's configuration object for the flags the simulator honours.

    config.update("jax_num_cpu_devices", 8)   # before the devices are first used
    config.update("jax_enable_x64", True)
    config.jax_enable_x64                      # -> True

JAX 0.10.2's other options are accepted and stored, so that programs written for
JAX run unchanged; they do not change what the simulator does. Values are checked and
read back as JAX does (booleans by their truth, enum options as JAX's enum members,
JAX's ValueError and TypeError texts otherwise); JAX's command-line flags are read with
`config.read`, the other options as attributes. A name JAX does not have raises JAX's
AttributeError."""
from __future__ import annotations

import contextlib
import enum
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


# JAX 0.10.2's other options, with its defaults (enum values by their value). They concern
# XLA's compiler and caches, accelerators, export, Pallas and multi-host runs: a program may
# set and read them, and they do not change what the simulator does.
_STORED_JAX_OPTIONS: dict[str, Any] = {
    "check_vma": False,
    "eager_constant_folding": False,
    "jax2tf_associative_scan_reductions": False,
    "jax2tf_default_native_serialization": True,
    "jax_backend_target": "",
    "jax_bcoo_cusparse_lowering": False,
    "jax_captured_constants_report_frames": 0,
    "jax_captured_constants_warn_bytes": 2000000000,
    "jax_check_proxy_envs": True,
    "jax_check_static_indices": False,
    "jax_compilation_cache_check_contents": False,
    "jax_compilation_cache_dir": None,
    "jax_compilation_cache_expect_pgle": False,
    "jax_compilation_cache_include_metadata_in_key": False,
    "jax_compilation_cache_max_size": -1,
    "jax_compiler_detailed_logging_min_ops": 10,
    "jax_compiler_enable_remat_pass": True,
    "jax_cpu_collectives_implementation": "gloo",
    "jax_cpu_get_global_topology_timeout_minutes": 5,
    "jax_cpu_get_local_topology_timeout_minutes": 2,
    "jax_cross_host_transfer_socket_address": "",
    "jax_cross_host_transfer_timeout_seconds": None,
    "jax_cross_host_transfer_transfer_size": None,
    "jax_cross_host_transport_addresses": "",
    "jax_cuda_visible_devices": "all",
    "jax_custom_vjp3": False,
    "jax_debug_leaked_clients_on_clear_backends": False,
    "jax_debug_log_modules": "",
    "jax_disable_bwd_checks": False,
    "jax_disable_most_optimizations": False,
    "jax_disable_vmap_shmap_error": False,
    "jax_disallow_mesh_context_manager": False,
    "jax_distributed_debug": False,
    "jax_dump_ir_modes": "stablehlo",
    "jax_dump_ir_to": "",
    "jax_embedded_constants_max_bytes": 32,
    "jax_enable_checks": False,
    "jax_enable_compilation_cache": True,
    "jax_enable_pgle": False,
    "jax_enable_preemption_service": True,
    "jax_enable_recoverability": False,
    "jax_error_checking_behavior_divide": "ignore",
    "jax_error_checking_behavior_nan": "ignore",
    "jax_error_checking_behavior_oob": "ignore",
    "jax_exec_time_optimization_effort": 0.0,
    "jax_experimental_unsafe_xla_runtime_errors": False,
    "jax_explicit_x64_dtypes": None,  # ExplicitX64Mode.WARN, set by Config
    "jax_export_calling_convention_version": 10,
    "jax_export_ignore_forward_compatibility": False,
    "jax_force_dcn_cross_host_transfers": False,
    "jax_high_dynamic_range_gumbel": False,
    "jax_hlo_source_file_canonicalization_regex": None,
    "jax_include_debug_info_in_dumps": True,
    "jax_include_full_tracebacks_in_locations": True,
    "jax_log_checkpoint_residuals": False,
    "jax_logging_level": "NOTSET",
    "jax_memory_fitting_effort": 0.0,
    "jax_memory_fitting_level": "O2",
    "jax_mock_gpu_topology": "",
    "jax_mosaic_allow_hlo": False,
    "jax_mutable_array_checks": True,
    "jax_oneapi_visible_devices": "all",
    "jax_optimization_level": "UNKNOWN",
    "jax_pallas_enable_debug_checks": False,
    "jax_pallas_poison_buffers": False,
    "jax_pallas_use_mosaic_gpu": True,
    "jax_pallas_verbose_errors": False,
    "jax_persistent_cache_enable_xla_caches": "xla_gpu_per_fusion_autotune_cache_dir",
    "jax_persistent_cache_min_compile_time_secs": 1.0,
    "jax_persistent_cache_min_entry_size_bytes": 0,
    "jax_pgle_aggregation_percentile": 90,
    "jax_pgle_profiling_runs": 3,
    "jax_pjrt_client_create_options": None,
    "jax_platform_name": "",
    "jax_pprint_use_color": True,
    "jax_ragged_dot_use_gpu_pallas_triton_lowering": False,
    "jax_ragged_dot_use_ragged_dot_instruction": True,
    "jax_raise_persistent_cache_errors": False,
    "jax_random_seed_offset": 0,
    "jax_refs_to_pins": False,
    "jax_remat3": False,
    "jax_remove_custom_partitioning_ptr_from_cache_key": False,
    "jax_rocm_visible_devices": "all",
    "jax_scan3": False,
    "jax_send_traceback_to_runtime": None,  # RuntimeTracebackMode.OFF, set by Config
    "jax_serialization_version": 0,
    "jax_share_binary_between_hosts": False,
    "jax_share_binary_between_hosts_timeout_ms": 1200000,
    "jax_sort_devices_by_process_index": True,
    "jax_source_url_schema": None,
    "jax_threefry_gpu_kernel_lowering": False,
    "jax_traceback_filtering": "auto",
    "jax_traceback_in_locations_limit": 100,
    "jax_tracer_error_num_traceback_frames": 5,
    "jax_use_direct_linearize": True,
    "jax_use_emit_pipeline_primitive": False,
    "jax_use_magma": "auto",
    "jax_use_shardy_partitioner": True,
    "jax_use_simplified_jaxpr_constants": False,
    "jax_xla_backend": "",
    "jax_xla_profile_version": 0,
    "mock_num_gpu_processes": 0,
}


class _StrEnum(str, enum.Enum):
    """An enum whose members are their strings, printed as them (Python 3.11's StrEnum)."""
    __str__ = str.__str__
    __format__ = str.__format__


class NumpyDtypePromotion(_StrEnum):
    STANDARD = "standard"
    STRICT = "strict"


class LegacyPrngKeyState(_StrEnum):
    ALLOW = "allow"
    WARN = "warn"
    ERROR = "error"


class RuntimeTracebackMode(_StrEnum):
    OFF = "off"
    ON = "on"
    FULL = "full"

    @classmethod
    def _missing_(cls, value):  # any case, as JAX accepts it
        if isinstance(value, str):
            return next((m for m in cls if m.value == value.lower()), None)
        return None


class ExplicitX64Mode(enum.IntEnum):
    WARN = 1
    ERROR = 2
    ALLOW = 3

    @classmethod
    def _missing_(cls, value):  # a member's name in lower case, as JAX accepts it
        if isinstance(value, str) and value == value.lower():
            return cls.__members__.get(value.upper())
        return None


def enum_member(cls: type[enum.Enum]) -> Callable[[Any], Any]:
    """JAX's check of an option holding an enum: a member, or a string naming one's value
    (read back as the member)."""
    def parse(value):
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls(value)  # Python's "'x' is not a valid <enum>", as in JAX
        raise TypeError(f"new enum value must be an instance of {cls}, got {value} of type "
                        f"{type(value)}.")
    return parse


def one_of(choices: tuple, optional: bool = False) -> Callable[[Any], Any]:
    """JAX's check of an option holding one of `choices` (or None when `optional`)."""
    def parse(value):
        if value is None and optional:
            return None
        value = getattr(value, "value", value)  # JAX's enum members name their string
        if value not in choices:
            allowed = ("None or in " if optional else "in ") + str(list(choices))
            raise ValueError(f"new enum value must be {allowed}, got {value} of type {type(value)}.")
        return value
    return parse


def _of_type(kind: type | tuple, kind_name: str, optional: bool = True,
             end: str = "", error: type[Exception] = ValueError) -> Callable[[Any], Any]:
    """JAX's check of an int, float or string option (its texts differ by a final period)."""
    def parse(value):
        if (value is None and optional) or isinstance(value, kind):
            return value
        allowed = f"None or of type {kind_name}" if optional else f"of type {kind_name}"
        label = "string" if kind_name.endswith("str") else kind_name
        raise error(f"new {label} config value must be {allowed}, got {value} of type "
                    f"{type(value)}{end}")
    return parse


_OPTIONAL_STRING = _of_type(str, "str", end=".")

# How JAX 0.10.2 checks the stored options whose default does not tell (a bool default
# means any value, read back as its truth; an int or float default means that type or None).
_STORED_OPTION_CHECKS: dict[str, Callable[[Any], Any]] = {
    "jax_compilation_cache_dir": _OPTIONAL_STRING,
    "jax_hlo_source_file_canonicalization_regex": _OPTIONAL_STRING,
    "jax_persistent_cache_enable_xla_caches": _OPTIONAL_STRING,
    "jax_source_url_schema": _OPTIONAL_STRING,
    "jax_pjrt_client_create_options": _of_type((dict, str), "dict | str", end="."),
    "jax_debug_log_modules": _of_type(str, "str", optional=False, end=".", error=TypeError),
    "jax_cpu_collectives_implementation": one_of(("gloo", "mpi", "megascale"), optional=True),
    "jax_error_checking_behavior_divide": one_of(("ignore", "raise")),
    "jax_error_checking_behavior_nan": one_of(("ignore", "raise")),
    "jax_error_checking_behavior_oob": one_of(("ignore", "raise")),
    "jax_logging_level": one_of(("NOTSET", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
                                optional=True),
    "jax_memory_fitting_level": one_of(("UNKNOWN", "O0", "O1", "O2", "O3")),
    "jax_optimization_level": one_of(("UNKNOWN", "O0", "O1", "O2", "O3")),
    "jax_traceback_filtering": one_of(("off", "tracebackhide", "remove_frames",
                                       "quiet_remove_frames", "auto")),
    "jax_use_magma": one_of(("off", "on", "auto")),
    "jax_explicit_x64_dtypes": enum_member(ExplicitX64Mode),
    "jax_send_traceback_to_runtime": enum_member(RuntimeTracebackMode),
}

# JAX's command-line flags among its options: set with `update` and read with `read` (or
# `values`) as given, unchecked; they are not attributes of the config object.
_FLAG_ONLY_OPTIONS = frozenset({
    "jax_backend_target", "jax_check_proxy_envs", "jax_compiler_detailed_logging_min_ops",
    "jax_cross_host_transfer_socket_address", "jax_cross_host_transfer_timeout_seconds",
    "jax_cross_host_transfer_transfer_size", "jax_cross_host_transport_addresses",
    "jax_cuda_visible_devices", "jax_disable_most_optimizations", "jax_dump_ir_modes",
    "jax_dump_ir_to", "jax_force_dcn_cross_host_transfers", "jax_include_debug_info_in_dumps",
    "jax_mock_gpu_topology", "jax_oneapi_visible_devices", "jax_pallas_verbose_errors",
    "jax_platform_name", "jax_rocm_visible_devices", "jax_sort_devices_by_process_index",
    "jax_tracer_error_num_traceback_frames", "jax_xla_backend", "mock_num_gpu_processes",
})


_READABLE_OPTIONS = _FLAG_ONLY_OPTIONS | {"jax_enable_x64", "jax_cpu_enable_async_dispatch"}


def _stored_option_check(name: str, default: Any) -> Callable[[Any], Any] | None:
    if name in _FLAG_ONLY_OPTIONS:
        return None
    if name in _STORED_OPTION_CHECKS:
        return _STORED_OPTION_CHECKS[name]
    if isinstance(default, bool):
        return bool
    if isinstance(default, int):
        return _of_type(int, "int")
    if isinstance(default, float):
        return _of_type((int, float), "float")
    return None


class Config:
    def __init__(self):
        self._checks: dict[str, Callable[[Any], Any]] = {}
        for name, default in _STORED_JAX_OPTIONS.items():
            check = _stored_option_check(name, default)
            if check is not None:
                self._checks[name] = check
        self._checks.update(jax_disable_jit=bool, jax_platforms=_OPTIONAL_STRING)
        self._values: dict[str, Any] = {
            **_STORED_JAX_OPTIONS,
            "jax_explicit_x64_dtypes": ExplicitX64Mode.WARN,
            "jax_send_traceback_to_runtime": RuntimeTracebackMode.OFF,
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
            # STRICT allows only weak-type promotions (jnp ops on mixed dtypes raise).
            "jax_numpy_dtype_promotion": NumpyDtypePromotion.STANDARD,
            # float32 products summed in the order of XLA's CPU dot library, bit for bit
            # (kernels/library_dot_order.h); off: in meshsim's blocks of 256 terms.
            "meshsim_xla_dot_library_order": False,
        }
        self._setters: dict[str, Callable[[Any], Any]] = {
            "jax_num_cpu_devices": self._set_num_devices,
            "jax_enable_x64": self._set_x64,
            "jax_platforms": self._set_platforms,
            "jax_cpu_enable_async_dispatch": self._set_async_dispatch,
            "jax_numpy_dtype_promotion": self._set_dtype_promotion,
            "meshsim_xla_dot_library_order": self._set_dot_library_order,
        }
        self._devices_in_use = False
        # A count given to meshsim itself outranks XLA_FLAGS, as JAX's
        # `jax_num_cpu_devices` outranks the XLA flag.
        self._num_devices_chosen = "MESHSIM_NUM_DEVICES" in os.environ
        if _env_flag("JAX_ENABLE_X64"):
            self.update("jax_enable_x64", True)
        if _env_flag("MESHSIM_XLA_DOT_LIBRARY_ORDER"):
            self.update("meshsim_xla_dot_library_order", True)
        if os.environ.get("JAX_CPU_ENABLE_ASYNC_DISPATCH", "").strip():
            self.update("jax_cpu_enable_async_dispatch",
                        _env_flag("JAX_CPU_ENABLE_ASYNC_DISPATCH"))

    def update(self, name: str, value: Any) -> None:
        if name not in self._values:
            raise AttributeError(f"Unrecognized config option: {name}")
        flag = _FLAGS.get(name)
        check = flag.parser if flag is not None else self._checks.get(name)
        if check is not None:
            value = check(value)
        setter = self._setters.get(name)
        self._values[name] = setter(value) if setter else value

    def read(self, name: str) -> Any:
        """A command-line flag's value (JAX reads the options that have a context manager
        as attributes only)."""
        if name in self._values and name not in _READABLE_OPTIONS:
            raise AttributeError(
                "For flags with a corresponding contextmanager, read their value via e.g. "
                f"`config.{name}` rather than `config.FLAGS.{name}`.")
        return self._value(name)

    @property
    def values(self) -> dict[str, Any]:
        return dict(self._values)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._values or name in _FLAG_ONLY_OPTIONS:
            raise AttributeError(f"'Config' object has no attribute '{name}'")
        return self._values[name]

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
    def _set_dtype_promotion(value):
        value = enum_member(NumpyDtypePromotion)(value)
        _core.set_strict_promotion(value is NumpyDtypePromotion.STRICT)
        return value

    @staticmethod
    def _set_async_dispatch(value) -> bool:
        value = bool(value)
        _core.wait_all_dispatched()  # what ran asynchronously finishes first
        _core.set_async_dispatch(value)
        return value

    @staticmethod
    def _set_dot_library_order(value) -> bool:
        value = bool(value)
        _core.set_library_dot_order_enabled(value)
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
    old = config._value("jax_disable_jit")
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
        return config._value(self.name)

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
        self._saved.append(config._value(self.flag.name))
        config.update(self.flag.name, self.new_val)

    def __exit__(self, *exc):
        config.update(self.flag.name, self._saved.pop())


def bool_flag(name: str, default: bool, help: str = "") -> Flag:
    return Flag(name, default, help, parser=bool, context_default=True)


def enum_flag(name: str, default: Any, choices: tuple, help: str = "", optional: bool = False) -> Flag:
    """A flag taking one of `choices` (or None when `optional`), checked as JAX checks it."""
    return Flag(name, default, help, parser=one_of(choices, optional))

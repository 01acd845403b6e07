"""JAX 0.10.2's config options that are also `jax.<name>` context managers.

Honoured here: enable_x64, numpy_dtype_promotion, numpy_rank_promotion ('warn'/'raise'
on implicit rank promotion in jnp), debug_nans and debug_infs (FloatingPointError naming
the operation), no_tracing (RuntimeError when a jitted function would trace), log_compiles
and explain_cache_misses (a logged line per trace and per cache miss), default_prng_impl,
raise_on_ppermute_sort_diff. The others concern XLA's compiler, buffer guards between host
and accelerator, or threads, which the simulator does not have: they hold their value
(and check it as JAX does) without changing what runs."""
from __future__ import annotations

import logging

from meshsim._src.config import (Flag, LegacyPrngKeyState, NumpyDtypePromotion, bool_flag, config,
                                 enum_flag, enum_member)
from meshsim._src.lax.precision import DotAlgorithmPreset

logger = logging.getLogger("meshsim")

enable_x64 = bool_flag("jax_enable_x64", False, "Enable 64-bit types to be used")
numpy_dtype_promotion = Flag("jax_numpy_dtype_promotion", "standard",
                             "Specify the rules used for implicit type promotion in operations "
                             "between arrays.", parser=enum_member(NumpyDtypePromotion))
numpy_rank_promotion = enum_flag("jax_numpy_rank_promotion", "allow", ("allow", "warn", "raise"),
                                 "Control NumPy-style automatic rank promotion broadcasting.")
# CPU dots compute in full float32 whatever the precision, in JAX as here.
default_matmul_precision = enum_flag(
    "jax_default_matmul_precision", None,
    ("default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
     *(p.name for p in DotAlgorithmPreset if p.name != "DEFAULT")),
    "Control the default matmul and conv precision for 32bit inputs.", optional=True)
debug_nans = bool_flag("jax_debug_nans", False,
                       "Add nan checks to every operation; raise FloatingPointError naming the "
                       "operation that produced a nan.")
debug_infs = bool_flag("jax_debug_infs", False, "Add inf checks to every operation.")
no_tracing = bool_flag("jax_no_tracing", False, "Disallow tracing for JIT compilation.")
log_compiles = bool_flag("jax_log_compiles", False,
                         "Log a message each time a jitted function is traced and compiled.")
explain_cache_misses = bool_flag("jax_explain_cache_misses", False,
                                 "Each time a jitted function is traced again, log why.")
default_prng_impl = enum_flag("jax_default_prng_impl", "threefry2x32",
                              ("threefry2x32", "threefry4x32", "rbg", "unsafe_rbg", "philox2x32",
                               "philox4x32"),
                              "Select the default PRNG implementation, used when one is not "
                              "explicitly provided at seeding time.")
raise_on_ppermute_sort_diff = bool_flag(
    "jax_raise_on_ppermute_sort_diff", False,
    "ppermute over a tuple of axes not in mesh order raises instead of warning.")

# Stored and checked, no effect on a simulated CPU mesh (see the module's docstring).
threefry_partitionable = bool_flag("jax_threefry_partitionable", True,
                                   "Generate random bits with a partitionable threefry.")
enable_custom_prng = bool_flag("jax_enable_custom_prng", False, "Enable custom PRNGs.")
legacy_prng_key = Flag("jax_legacy_prng_key", "allow", "Policy for raw (uint32) PRNG keys.",
                       parser=enum_member(LegacyPrngKeyState))
debug_key_reuse = bool_flag("jax_debug_key_reuse", False, "Check PRNG keys are used once.")
check_tracer_leaks = bool_flag("jax_check_tracer_leaks", False, "Check for leaked tracers.")
allow_f16_reductions = bool_flag("jax_allow_f16_reductions", True,
                                 "Allow reductions to accumulate in 16-bit floats.")
auto_pcast = bool_flag("jax_auto_pcast", True, "Insert pcast where the types require it.")
softmax_custom_jvp = bool_flag("jax_softmax_custom_jvp", False,
                               "Use a custom JVP rule for jax.nn.softmax.")
remove_size_one_mesh_axis_from_type = bool_flag(
    "jax_remove_size_one_mesh_axis_from_type", False,
    "Leave mesh axes of size one out of sharding types.")
no_execution = bool_flag("jax_no_execution", False, "Disallow executing compiled programs.")
thread_guard = bool_flag("jax_thread_guard", False, "Check arrays are used from one thread.")
array_garbage_collection_guard = enum_flag(
    "jax_array_garbage_collection_guard", None, ("allow", "log", "fatal"),
    "What to do when an array is collected as part of a reference cycle.", optional=True)
_GUARD_LEVELS = ("allow", "log", "disallow", "log_explicit", "disallow_explicit")
transfer_guard_host_to_device = enum_flag("jax_transfer_guard_host_to_device", None, _GUARD_LEVELS,
                                          "Select the transfer guard level for host-to-device "
                                          "transfers.", optional=True)
transfer_guard_device_to_device = enum_flag("jax_transfer_guard_device_to_device", None,
                                            _GUARD_LEVELS, "Select the transfer guard level for "
                                            "device-to-device transfers.", optional=True)
transfer_guard_device_to_host = enum_flag("jax_transfer_guard_device_to_host", None, _GUARD_LEVELS,
                                          "Select the transfer guard level for device-to-host "
                                          "transfers.", optional=True)
_transfer_guard_all = enum_flag("jax_transfer_guard", None, _GUARD_LEVELS,
                                "Select the transfer guard level for all transfers.", optional=True)


def _parse_default_device(value):
    from meshsim._src.devices import Device
    if value is None or isinstance(value, Device) or value == "cpu":
        return value
    raise ValueError("jax.default_device must be passed either a Device object (e.g. "
                     "`jax.devices('cpu')[0]`) or a platform name string like 'cpu' or 'gpu', "
                     f"got: {value!r}")


default_device = Flag("jax_default_device", None, "Configure the default device for JAX operations.",
                      parser=_parse_default_device)


def transfer_guard(new_val: str):
    """Sets the guard level of every kind of transfer for the block."""
    from contextlib import ExitStack, contextmanager

    @contextmanager
    def block():
        with ExitStack() as stack:
            for flag in (transfer_guard_host_to_device, transfer_guard_device_to_device,
                         transfer_guard_device_to_host, _transfer_guard_all):
                stack.enter_context(flag(new_val))
            yield
    return block()


class UserContext(Flag):
    """A value that is part of every jitted function's cache key (`make_user_context`)."""


USER_CONTEXTS: list[UserContext] = []


def make_user_context(default_value=None) -> UserContext:
    """A context manager whose value, when it changes, makes jitted functions trace again."""
    ctx = UserContext(f"jax_user_context_{len(USER_CONTEXTS)}", default_value)
    USER_CONTEXTS.append(ctx)
    return ctx


def trace_context() -> tuple:
    """What, beyond the arguments, selects a jitted function's traced program."""
    return tuple(config._values[c.name] for c in USER_CONTEXTS)

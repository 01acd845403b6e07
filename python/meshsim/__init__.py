"""meshsim: a simulated multi-device accelerator mesh with JAX's API.

    import meshsim as jax
    import meshsim.numpy as jnp
"""
from meshsim._src.array_methods import install as _install_array_methods

_install_array_methods()

from meshsim._src.basearray import Array  # noqa: E402,F401
from meshsim._src.core import typeof  # noqa: E402,F401
from meshsim._src.api import jit, make_jaxpr, block_until_ready, named_scope, named_call  # noqa: E402,F401
from meshsim._src.abstract import ShapeDtypeStruct, eval_shape  # noqa: E402,F401
from meshsim._src.config import config  # noqa: E402,F401
from meshsim._src.flags import (  # noqa: E402,F401
    allow_f16_reductions, array_garbage_collection_guard, auto_pcast, check_tracer_leaks, debug_infs,
    debug_key_reuse, debug_nans, default_device, default_matmul_precision, default_prng_impl,
    enable_custom_prng, enable_x64, explain_cache_misses, legacy_prng_key, log_compiles,
    make_user_context, no_execution, no_tracing, numpy_dtype_promotion, numpy_rank_promotion,
    raise_on_ppermute_sort_diff, remove_size_one_mesh_axis_from_type, softmax_custom_jvp,
    thread_guard, threefry_partitionable, transfer_guard, transfer_guard_device_to_device,
    transfer_guard_device_to_host, transfer_guard_host_to_device)
from meshsim._src.devices import (devices, device_count, local_devices, local_device_count,  # noqa: E402,F401
                                  process_index, process_count, default_backend)
from meshsim._src.devices import Device  # noqa: E402,F401
from meshsim._src.devices import host_count, host_id, host_ids  # noqa: E402,F401
from meshsim._src.sharding.api import make_mesh, set_mesh, device_put, device_get, P  # noqa: E402,F401
from meshsim._src.sharding.named_sharding import NamedSharding  # noqa: E402,F401
from meshsim._src.shard_map import shard_map, smap  # noqa: E402,F401
from meshsim._src.pmap import pmap  # noqa: E402,F401
from meshsim._src.vmap import vmap  # noqa: E402,F401
from meshsim._src.sharding.explicit import reshard, auto_axes, explicit_axes  # noqa: E402,F401
from meshsim._src.ad import (grad, value_and_grad, vjp, jvp, linearize, custom_vjp, custom_jvp,  # noqa: E402,F401
                             checkpoint, remat, checkpoint_policies, jacfwd, jacrev, jacobian, hessian)
from meshsim._src.sharding.array import Shard  # noqa: E402,F401
from meshsim._src.sharding.assemble import (make_array_from_callback,  # noqa: E402,F401
                                            make_array_from_process_local_data,
                                            make_array_from_single_device_arrays)
from meshsim._src.runtime_control import (clear_caches, disable_jit,  # noqa: E402,F401
                                          effects_barrier, linear_transpose, live_arrays,
                                          process_indices)
from meshsim._src.custom_gradient import closure_convert, custom_gradient  # noqa: E402,F401
from meshsim._src.callback import effects_barrier, pure_callback  # noqa: E402,F401
from meshsim._src.float0 import float0  # noqa: E402,F401
from meshsim._src.ref import Ref, new_ref, freeze, free_ref, empty_ref, ds  # noqa: E402,F401
from meshsim._src.ref import memory  # noqa: E402,F401
from meshsim._src.ad_staging import fwd_and_bwd  # noqa: E402,F401
from meshsim._src.core import ensure_compile_time_eval  # noqa: E402,F401
from meshsim import (numpy, lax, tree_util, tree, sharding, debug, random, ops, nn, image,  # noqa: E402,F401
                     ad_checkpoint, dtypes, errors, profiler, stages, experimental, typing,
                     core, flatten_util, custom_derivatives, distributed, ref, ad, version,
                     monitoring)
from meshsim._src import xla_bridge as _xla_bridge  # noqa: E402,F401  (jax._src.xla_bridge)

# `__version_info__` is the JAX version whose API meshsim implements (libraries choose code
# paths by it); `__version__` is meshsim's own. See meshsim/version.py.
from meshsim.version import __version__, __version_info__  # noqa: E402,F401


def load_ipython_extension(ipython) -> None:
    """`%load_ext meshsim`: later `import jax` in the session resolves to meshsim."""
    from meshsim._src import jax_alias
    jax_alias.install()


def unload_ipython_extension(ipython) -> None:
    from meshsim._src import jax_alias
    jax_alias.uninstall()

# Names JAX 0.10 removed, kept (as JAX keeps them) only to say what replaces them.
_REMOVED = {name: (f"jax.{name} is deprecated; use jax.device_put instead. See "
                   "https://docs.jax.dev/en/latest/migrate_pmap.html#drop-in-replacements for a "
                   "drop-in replacement.")
            for name in ("device_put_replicated", "device_put_sharded")}


def __getattr__(name):
    if name in _REMOVED:
        raise AttributeError(_REMOVED[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

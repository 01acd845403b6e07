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
from meshsim._src.config import config, raise_on_ppermute_sort_diff  # noqa: E402,F401
from meshsim._src.devices import (devices, device_count, local_devices, local_device_count,  # noqa: E402,F401
                                  process_index, process_count, default_backend)
from meshsim._src.devices import CpuDevice as Device  # noqa: E402,F401
from meshsim._src.sharding.api import make_mesh, set_mesh, device_put, device_get, P  # noqa: E402,F401
from meshsim._src.sharding.named_sharding import NamedSharding  # noqa: E402,F401
from meshsim._src.shard_map import shard_map  # noqa: E402,F401
from meshsim._src.vmap import vmap  # noqa: E402,F401
from meshsim._src.sharding.explicit import reshard, auto_axes, explicit_axes  # noqa: E402,F401
from meshsim._src.ad import (grad, value_and_grad, vjp, jvp, linearize, custom_vjp, custom_jvp,  # noqa: E402,F401
                             checkpoint, remat, checkpoint_policies, jacfwd, jacrev, jacobian, hessian)
from meshsim import (numpy, lax, tree_util, tree, sharding, debug, random, ops, nn,  # noqa: E402,F401
                     ad_checkpoint, dtypes, errors, profiler, stages, experimental)
from meshsim._src import xla_bridge as _xla_bridge  # noqa: E402,F401  (jax._src.xla_bridge)

__version__ = "0.1.0"

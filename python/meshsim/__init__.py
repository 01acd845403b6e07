"""meshsim: a simulated multi-device accelerator mesh with JAX's API.

    import meshsim as jax
    import meshsim.numpy as jnp
"""
from meshsim._src.array_methods import install as _install_array_methods

_install_array_methods()

from meshsim._src.core import Array, typeof  # noqa: E402,F401
from meshsim._src.api import jit, make_jaxpr, block_until_ready  # noqa: E402,F401
from meshsim._src.config import config, raise_on_ppermute_sort_diff  # noqa: E402,F401
from meshsim._src.devices import devices, device_count, local_devices, local_device_count  # noqa: E402,F401
from meshsim._src.sharding.api import make_mesh, set_mesh, device_put, P  # noqa: E402,F401
from meshsim._src.shard_map import shard_map  # noqa: E402,F401
from meshsim._src.sharding.explicit import reshard, auto_axes, explicit_axes  # noqa: E402,F401
from meshsim._src.ad import (grad, value_and_grad, vjp, jvp, linearize, custom_vjp,  # noqa: E402,F401
                             checkpoint, remat, checkpoint_policies)
from meshsim import numpy, lax, tree_util, tree, sharding, debug, random, ops, nn, ad_checkpoint  # noqa: E402,F401

__version__ = "0.1.0"

"""meshsim.experimental.shard_map (as jax.experimental.shard_map): the pre-0.8 entry point,
kept by JAX 0.10.2 as a deprecated alias. Its signature is the old one: `mesh` and the specs
may be positional, `check_rep` is the replication check (`check_vma` today), and every mesh
axis is manual. Reading `shard_map` here warns as JAX does."""
import functools as _functools

from meshsim._src.deprecation import warn_deprecated
from meshsim._src.shard_map import shard_map as _shard_map

_DEPRECATION = "jax.experimental.shard_map is deprecated in v0.8.0. Used jax.shard_map instead."


def _legacy_shard_map(f, mesh, in_specs, out_specs, check_rep=True):
    """Please use `jax.shard_map`; this is the deprecated experimental form."""
    return _shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                      axis_names=frozenset(), check_vma=check_rep)


_legacy_shard_map.__name__ = _legacy_shard_map.__qualname__ = "shard_map"


@_functools.cache  # JAX warns on a name's first read only
def __getattr__(name):
    if name == "shard_map":
        warn_deprecated(_DEPRECATION)
        return _legacy_shard_map
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

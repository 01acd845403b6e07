"""meshsim.lax: collectives over the manual axes of a shard_map body, and the
VMA casts (as jax.lax: psum, pmean, all_gather, ppermute, pvary, pcast, ...).

As in JAX, the wrappers first cast an operand to varying over the named axes
it is invariant over (`pvary`, free at run time), so a reduction over an
axis a value is invariant on sums identical copies."""
from __future__ import annotations

import math

import numpy as np

from meshsim import _core
from meshsim._src import core, tree_util

__all__ = ["psum", "pmean", "pmax", "pmin", "axis_index", "axis_size", "pvary", "pcast"]


def _axis_tuple(axis_name) -> tuple:
    if isinstance(axis_name, (tuple, list)):
        return tuple(axis_name)
    return (axis_name,)


def _env(op: str, axes: tuple):
    """The body's (mesh, manual axes, check_vma); NameError for unbound axes."""
    env = _core.current_axis_env()
    for a in axes:
        if env is None or a not in env[1]:
            raise NameError(f"Found an unbound axis name: {a}. To fix this, please call {op} "
                            "under `jax.shard_map`.")
    return env


def _in_mesh_order(env, axes) -> tuple:
    return tuple(a for a in env[0].axis_names if a in axes)


def _vary_over(x, axes: tuple, env):
    """`x` cast to varying over those of `axes` it is invariant over."""
    if not env[2]:
        return x
    missing = _in_mesh_order(env, [a for a in axes if a not in x.aval.vma])
    return core.bind1("pvary", x, axes=missing) if missing else x


def _operand(x):
    x = core.asarray_value(x)
    if not isinstance(x, core.Tracer):
        raise TypeError("collectives apply to values inside a shard_map body, got a concrete "
                        f"array of type {x.aval.str_short()}")
    return x


def axis_size(axis_name) -> int:
    """The number of devices along `axis_name` (the product for a tuple)."""
    axes = _axis_tuple(axis_name)
    mesh = _env("axis_size", axes)[0]
    return math.prod(mesh.axis_sizes[mesh.axis_names.index(a)] for a in axes)


def axis_index(axis_name):
    """This device's index along `axis_name` (int32, varying over it); for a
    tuple, row-major over the axes in the order given."""
    axes = _axis_tuple(axis_name)
    _env("axis_index", axes)
    index = None
    for a in axes:
        i = core.bind1("axis_index", axis_name=a)
        index = i if index is None else index * axis_size(a) + i
    return index


def _all_reduce(name: str, x, axis_name, axis_index_groups):
    if axis_index_groups is not None:
        raise NotImplementedError(f"{name} with axis_index_groups is not supported")
    axes = _axis_tuple(axis_name)
    env = _env(name, axes)

    def leaf(v):
        if not isinstance(v, core.Tracer) and name == "psum":
            # A constant is invariant everywhere: summing its copies scales it.
            return core.asarray_value(v) * axis_size(axes)
        v = _operand(v)
        if name == "psum" and v.dtype == np.bool_:
            v = core.convert_element_type(v, np.int32)
        prim = "psum_invariant" if name == "psum" and env[2] else name
        return core.bind1(prim, _vary_over(v, axes, env), axes=axes)

    return tree_util.tree_map(leaf, x)


def psum(x, axis_name, *, axis_index_groups=None):
    """Sums `x` (a pytree) over the devices along `axis_name`; the result is
    invariant over those axes."""
    return _all_reduce("psum", x, axis_name, axis_index_groups)


def pmax(x, axis_name, *, axis_index_groups=None):
    return _all_reduce("pmax", x, axis_name, axis_index_groups)


def pmin(x, axis_name, *, axis_index_groups=None):
    return _all_reduce("pmin", x, axis_name, axis_index_groups)


def pmean(x, axis_name, *, axis_index_groups=None):
    """psum divided by the number of devices along `axis_name`."""
    n = axis_size(axis_name)
    return tree_util.tree_map(lambda v: v / n, psum(x, axis_name, axis_index_groups=axis_index_groups))


def pvary(x, axis_name):
    """Casts `x` from invariant to varying over `axis_name` (no data moves)."""
    axes = _axis_tuple(axis_name)
    env = _env("pvary", axes)
    if not env[2]:
        return x
    return tree_util.tree_map(
        lambda v: core.bind1("pvary", _operand(v), axes=_in_mesh_order(env, axes)), x)


_PCAST_TARGETS = ("unreduced", "reduced", "varying")


def pcast(x, axis_name, *, to: str):
    """Changes the VMA type of `x` over `axis_name`; only `to='varying'`
    (pvary) is available here."""
    if not isinstance(axis_name, (str, tuple)):
        raise TypeError(f"axis_name={axis_name!r} must be a tuple or a str. Got {axis_name}")
    if to not in _PCAST_TARGETS:
        raise ValueError(f"Got unexpected `to` value for `jax.lax.pcast`. Allowed `to` values are: "
                         f"{set(_PCAST_TARGETS)}")
    if to != "varying":
        raise NotImplementedError(f"pcast(..., to={to!r}) is not supported")
    axes = _axis_tuple(axis_name)
    env = _env("pcast", axes)

    def leaf(v):
        v = _operand(v)
        if env[2] and all(a in v.aval.vma for a in axes):
            raise ValueError("Unsupported pcast from=varying, to='varying'")
        return pvary(v, axes)

    return tree_util.tree_map(leaf, x)

"""`pmap`, built on `shard_map` and `jit` as JAX 0.10 builds it: the mapped
axis (size n) is laid over a one-axis mesh of the first n devices (or
`devices`), each device runs `fun` on its slice with the mapped axis squeezed
out, and results are stacked back along `out_axes`. Collectives name the
axis by `axis_name`."""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from meshsim._src import devices as devices_lib
from meshsim._src import tree_util
from meshsim._src.sharding.mesh import Mesh
from meshsim._src.sharding.named_sharding import NamedSharding
from meshsim._src.sharding.partition_spec import PartitionSpec

_DEFAULT_AXIS_NAME = "_internal_pmap_axis_name"


def _index_tuple(x) -> tuple[int, ...]:
    if x is None:
        return ()
    return (int(x),) if isinstance(x, int) else tuple(int(i) for i in x)


def _axis_spec(axis_name, axis: int | None) -> PartitionSpec:
    """The spec that shards dimension `axis` over the pmap axis (P() for None)."""
    if axis is None:
        return PartitionSpec()
    return PartitionSpec(*([None] * axis), axis_name)


def _flat_in_axes(in_axes, dyn_args, kwargs, in_tree) -> list:
    try:
        return _broadcast_prefix((in_axes, 0), (tuple(dyn_args), kwargs))
    except ValueError as e:
        raise ValueError(
            f"pmap in_axes specification must be a tree prefix of the corresponding value, got "
            f"specification {in_axes} for value tree {in_tree}.\n\nThe 'full pytree' here is the "
            "tuple of arguments passed positionally to the pmapped function, and the value of "
            "`in_axes` must be a tree prefix of that tuple. But it was not a prefix.\n\nCheck "
            "that the value of the `in_axes` argument to `pmap` is a tree prefix of the tuple "
            f"of arguments passed positionally to the pmapped function.") from e


def _broadcast_prefix(prefix, full) -> list:
    """The leaves of `prefix` (None among them) repeated over the leaves of `full` they cover."""
    return tree_util.broadcast_prefix(prefix, full, is_leaf=lambda x: x is None)


def in_tree_children(in_tree) -> list[int]:
    """The number of leaves of each positional argument in the tree of ((args...), kwargs)."""
    args_tree = in_tree.children()[0]
    return [c.num_leaves for c in args_tree.children()]


def pmap(fun: Callable, axis_name=None, *, in_axes=0, out_axes=0,
         static_broadcasted_argnums=(), devices: Sequence | None = None, backend: str | None = None,
         axis_size: int | None = None, donate_argnums=()) -> Callable:
    """Maps `fun` over axis `in_axes` of its arguments, one slice per device,
    with `axis_name` naming the mapped axis for collectives."""
    from meshsim._src.api import jit
    from meshsim._src.shard_map import shard_map
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    if devices is not None:
        if not devices:
            raise ValueError("'devices' argument to pmap must be non-empty, or None.")
        devices = tuple(devices)
    axis_name = _DEFAULT_AXIS_NAME if axis_name is None else axis_name
    static = _index_tuple(static_broadcasted_argnums)
    donate = _index_tuple(donate_argnums)
    if not all(type(a) is int for a in tree_util.tree_leaves(in_axes)):
        raise TypeError("pmap in_axes must be an int, None, or (nested) container with those "
                        f"types as leaves, but got {in_axes}.")
    if not all(type(a) is int for a in tree_util.tree_leaves(out_axes)):
        raise TypeError("pmap out_axes must be an int, None, or (nested) container with those "
                        f"types as leaves, but got {out_axes}.")
    cache: dict = {}

    def prepared(args, kwargs):
        """The jitted program for these arguments (built once per signature) and its flat arguments."""
        if static and max(static) >= len(args):
            raise ValueError(
                f"pmapped function has static_broadcasted_argnums={static} but was called with "
                f"only {len(args)} positional argument{'s' if len(args) > 1 else ''}. All static "
                "broadcasted arguments must be passed positionally.")
        dyn_argnums = [i for i in range(len(args)) if i not in static]
        dyn_args = [args[i] for i in dyn_argnums]
        static_vals = tuple((i, args[i]) for i in static)
        dyn_in_axes = (tuple(in_axes[i] for i in dyn_argnums)
                       if static and isinstance(in_axes, tuple) else in_axes)
        flat_args, in_tree = tree_util.tree_flatten((tuple(dyn_args), kwargs))
        in_axes_flat = tuple(_flat_in_axes(dyn_in_axes, dyn_args, kwargs, in_tree))
        size = next((int(x.shape[ax]) for x, ax in zip(flat_args, in_axes_flat)
                     if ax is not None and hasattr(x, "shape")), None)
        if size is None:
            raise ValueError("pmap requires at least one argument with a mapped axis.")
        if axis_size is not None and axis_size != size:
            raise ValueError(f"Specified axis_size {axis_size} doesn't match received "
                             f"axis_size {size}.")
        key = (static_vals, in_tree, in_axes_flat, size)
        jitted = cache.get(key)
        if jitted is None:
            jitted = cache[key] = _build(fun, static_vals, in_tree, in_axes_flat, size)
        jitted, shardings = jitted
        for x, sharding in zip(flat_args, shardings):
            if hasattr(x, "shape"):
                sharding.shard_shape(x.shape)  # JAX's IndivisibleError for a misfit argument
        return jitted, flat_args

    @functools.wraps(fun)
    def pmapped(*args, **kwargs):
        jitted, flat_args = prepared(args, kwargs)
        return jitted(*flat_args)

    def lower(*args, **kwargs):
        jitted, flat_args = prepared(args, kwargs)
        return jitted.lower(*flat_args)

    def _build(fun, static_vals, in_tree, in_axes_flat, size):
        mesh_devices = (devices if devices is not None else tuple(devices_lib.devices()))[:size]
        mesh = Mesh(mesh_devices, (axis_name,))
        in_specs = tuple(_axis_spec(axis_name, ax) for ax in in_axes_flat)

        def body(*flat):
            from meshsim._src.lax import namespace as lax
            squeezed = [x if ax is None else lax.squeeze(x, [ax]) for x, ax in zip(flat, in_axes_flat)]
            dyn_args, kw = tree_util.tree_unflatten(in_tree, squeezed)
            full = list(dyn_args)
            for i, v in static_vals:
                full.insert(i, v)
            out = fun(*full, **kw)
            out_axes_flat = _broadcast_prefix(out_axes, out)
            out_flat, out_tree = tree_util.tree_flatten(out)
            out_flat = [x if ax is None else lax.expand_dims(x, [ax])
                        for x, ax in zip(out_flat, out_axes_flat)]
            return tree_util.tree_unflatten(out_tree, out_flat)

        out_specs = tree_util.tree_map(lambda ax: _axis_spec(axis_name, ax), out_axes,
                                       is_leaf=lambda x: x is None)
        mapped = shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                           check_vma=False)
        # Donated positional arguments: every leaf of each, in flat order.
        static_positions = dict(static_vals)
        flags = []
        dyn_pos = 0
        for i in range(len(static_vals) + len(in_tree_children(in_tree))):
            if i in static_positions:
                continue
            n = in_tree_children(in_tree)[dyn_pos]
            flags.extend([i in donate] * n)
            dyn_pos += 1
        donate_flat = tuple(i for i, f in enumerate(flags) if f)
        shardings = [NamedSharding(mesh, spec) for spec in in_specs]
        return jit(mapped, donate_argnums=donate_flat), shardings

    pmapped.lower = lower
    return pmapped

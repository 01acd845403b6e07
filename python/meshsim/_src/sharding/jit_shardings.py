"""`jit(..., in_shardings=, out_shardings=)`: where a jitted function's
arguments and results live.

An argument with an in_sharding is placed there before the call (a committed
array laid out otherwise is JAX's ValueError); results with an out_sharding
are constrained to it at the end of the traced program, so propagation over
Auto axes (sharding/propagation.h) treats them as fixed, as XLA does."""
from __future__ import annotations

import functools

from meshsim._src import core, tree_util
from meshsim._src.abstract import ShapeDtypeStruct
from meshsim._src.sharding.mesh import AxisType, context_mesh
from meshsim._src.sharding.mesh import _context as _mesh_context
from meshsim._src.sharding.named_sharding import NamedSharding, Sharding, rank_error
from meshsim._src.sharding.partition_spec import PartitionSpec


def _is_leaf(x) -> bool:
    return x is None or isinstance(x, (PartitionSpec, Sharding))


def _resolved(sharding, what: str, api: str = "jit"):
    """A PartitionSpec over the context mesh as a NamedSharding (JAX's error without one). As
    in JAX 0.10.2, jit takes the mesh `jax.set_mesh` sets and the deprecated pjit the one a
    `with mesh:` block enters."""
    if isinstance(sharding, PartitionSpec):
        mesh = context_mesh()
        if mesh.empty or _mesh_context.legacy != (api == "pjit"):
            raise RuntimeError(
                f"{api} requires a non-empty mesh in context if you are passing `PartitionSpec`s "
                f"to {what}. You can define a context mesh via `jax.set_mesh(mesh)`. "
                f"Alternatively, provide `Sharding`s to {what} and then the mesh context manager "
                "is not required.")
        return NamedSharding(mesh, sharding)
    return sharding


def _broadcast(shardings, tree, what: str, args_len: int | None = None):
    """Per leaf of `tree`, its sharding (None: unspecified); `shardings` is a pytree prefix."""
    if _is_leaf(shardings):
        return [shardings] * len(tree_util.tree_leaves(tree))
    if args_len is not None and isinstance(shardings, (tuple, list)) and len(shardings) != args_len:
        raise ValueError(
            f"pjit {what} specification must be a tree prefix of the positional arguments tuple. "
            f"In particular, pjit {what} must either be a Sharding, a PartitionSpec, or a tuple "
            f"of length equal to the number of positional arguments. But pjit {what} is the "
            f"wrong length: got a tuple or list of length {len(shardings)} for an args tuple of "
            f"length {args_len}.")
    return tree_util.broadcast_prefix(shardings, tree, is_leaf=_is_leaf)


def _check_rank(sharding, x, path: str) -> None:
    if isinstance(sharding, NamedSharding) and len(sharding.spec) > x.ndim:
        raise rank_error(f"One of pjit arguments with pytree key path {path}", sharding, x.ndim)


def place_arguments(in_shardings, args: tuple, arg_names: list[str], static=(), api: str = "jit") -> tuple:
    """`args` laid out as `in_shardings` says (a pytree prefix of the positional arguments
    other than the `static` ones, which pass through)."""
    from meshsim._src.sharding.api import device_put  # noqa: PLC0415 (it imports jit)
    if isinstance(in_shardings, list):
        in_shardings = tuple(in_shardings)
    dynamic = [i for i in range(len(args)) if i not in static]
    per_arg = (in_shardings,) * len(dynamic) if _is_leaf(in_shardings) else in_shardings
    if not _is_leaf(in_shardings):
        _broadcast(in_shardings, tuple(args[i] for i in dynamic), "in_shardings", len(dynamic))
    placed = list(args)
    for i, shardings in zip(dynamic, per_arg):
        arg = args[i]
        name = arg_names[i] if i < len(arg_names) else f"args[{i}]"
        flat, treedef = tree_util.tree_flatten_with_path(arg)
        leaf_shardings = _broadcast(shardings, arg, "in_shardings")
        new = []
        for (path, leaf), sharding in zip(flat, leaf_shardings):
            sharding = _resolved(sharding, "in_shardings", api)
            if sharding is None:
                new.append(leaf)
                continue
            if isinstance(leaf, ShapeDtypeStruct):  # jit(f).lower(...): the abstract argument's layout
                new.append(leaf if leaf.sharding is not None else ShapeDtypeStruct(
                    leaf.shape, leaf.dtype, sharding=sharding, weak_type=leaf.weak_type, vma=leaf.vma))
                continue
            x = core.asarray_value(leaf)
            _check_rank(sharding, x, name + tree_util.keystr(path))
            if getattr(x, "committed", False) and not x.sharding.is_equivalent_to(sharding, x.ndim):
                raise ValueError(
                    "Sharding passed to jit does not match the sharding on the respective arg. "
                    f"Got jit sharding: {sharding},\narg sharding: {x.sharding} for arg type: "
                    f"{x.aval.str_short()}")
            new.append(device_put(x, sharding))
        placed[i] = tree_util.tree_unflatten(treedef, new)
    return tuple(placed)


def name_outputs(out, out_shardings, api: str = "jit") -> None:
    """Results given an out_sharding over an all-Auto mesh show it as given (`P('X', None)`
    stays so, where a layout propagation chose would read `P('X',)`)."""
    for out, sharding in zip(tree_util.tree_leaves(out), _broadcast(out_shardings, out, "out_shardings")):
        sharding = _resolved(sharding, "out_shardings", api) if sharding is not None else None
        if (isinstance(sharding, NamedSharding) and not sharding.spec.unreduced
                and all(t == AxisType.Auto for t in sharding.mesh.axis_types)):
            out._sharding = sharding


def constrain_outputs(fun, out_shardings, api: str = "jit"):
    """`fun` whose results are laid out as `out_shardings` (a pytree prefix) says."""
    from meshsim._src.sharding.explicit import _reshard_one  # noqa: PLC0415

    @functools.wraps(fun)
    def constrained(*args, **kwargs):
        out = fun(*args, **kwargs)
        leaves, treedef = tree_util.tree_flatten(out)
        shardings = _broadcast(out_shardings, out, "out_shardings")
        leaves = [x if s is None else _reshard_one(x, _resolved(s, "out_shardings", api),
                                                    "sharding_constraint")
                  for x, s in zip(leaves, shardings)]
        return tree_util.tree_unflatten(treedef, leaves)

    return constrained

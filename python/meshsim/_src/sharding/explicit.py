"""Explicit sharding ("sharding in types"): `reshard`, `with_sharding_constraint`,
`auto_axes`, `explicit_axes`, and the `out_sharding=` arguments of ops.

The rules that give every op's result its sharding, and the execution that
follows them, live in the C++ core (sharding/rules.h, runtime/sharded.h); this
module resolves the shardings users pass and binds the primitives."""
from __future__ import annotations

import functools

from meshsim import _core
from meshsim._src import core, tree_util
from meshsim._src.sharding import device_assignment
from meshsim._src.sharding.mesh import (AbstractMesh, AxisType, Mesh, _context, context_mesh,
                                        get_abstract_mesh)
from meshsim._src.sharding.named_sharding import (DuplicateSpecError, NamedSharding,
                                                   SingleDeviceSharding, check_spec, rank_error)
from meshsim._src.sharding.partition_spec import UNCONSTRAINED, PartitionSpec

__all__ = ["ShardingTypeError", "reshard", "with_sharding_constraint", "auto_axes",
           "explicit_axes"]

ShardingTypeError = _core.ShardingTypeError
ShardingTypeError.__module__ = "meshsim.sharding"


def _is_sharding_leaf(x) -> bool:
    return x is None or isinstance(x, (PartitionSpec, NamedSharding))


def resolve(sharding, what: str = "sharding") -> tuple[Mesh, PartitionSpec]:
    """A NamedSharding or a PartitionSpec (over the context mesh) as (concrete mesh, spec)."""
    if isinstance(sharding, NamedSharding):
        mesh, spec = sharding.mesh, sharding.spec
        if isinstance(mesh, AbstractMesh):
            ctx = context_mesh()
            if ctx.empty or ctx.abstract_mesh.update(axis_types=mesh.axis_types) != mesh.update(
                    abstract_device=ctx.abstract_mesh.abstract_device):
                raise ValueError(f"{what}: a NamedSharding over {mesh} needs a matching context "
                                 "mesh (`jax.set_mesh`)")
            mesh = ctx.update(axis_types=mesh.axis_types)
        return mesh, spec
    if isinstance(sharding, PartitionSpec):
        mesh = context_mesh()
        if mesh.empty:
            if what == "with_sharding_constraint":
                raise RuntimeError(
                    "with_sharding_constraint requires a non-empty mesh in context if you are "
                    "passing `PartitionSpec`s to shardings. You can define a context mesh via "
                    "`jax.set_mesh(mesh)`. Alternatively, provide `Sharding`s to shardings and "
                    "then the mesh context manager is not required.")
            raise ValueError("Using PartitionSpec when you are not under a mesh context is not "
                             "allowed. Please pass a NamedSharding instance or enter into a mesh "
                             f"context via `jax.set_mesh`. Got {sharding}")
        return _under_abstract_context(mesh), sharding
    raise TypeError(f"{what} expects a NamedSharding or a PartitionSpec, got {sharding!r}")


def _under_abstract_context(mesh: Mesh) -> Mesh:
    """The concrete mesh a PartitionSpec means: under `use_abstract_mesh` with another shape or
    axis names over as many devices, the context mesh's devices arranged as that mesh."""
    abstract = get_abstract_mesh()
    if (abstract.empty or abstract.axis_names == mesh.axis_names
            or abstract.size != mesh.size or abstract.manual_axes):
        return mesh
    return Mesh(mesh.devices.reshape(abstract.axis_sizes), abstract.axis_names,
                axis_types=abstract.axis_types)


def check_no_reduction_axes(spec: PartitionSpec, where: str = "this sharding") -> None:
    """Unreduced/reduced axes (JAX's {U:x}/{R:x}) reach a value through `reshard`,
    `device_put` of an array and the `out_sharding` of a contraction; elsewhere refuse them
    rather than drop them."""
    if spec.unreduced or spec.reduced:
        raise NotImplementedError(
            f"meshsim takes unreduced or reduced axes in {where} only through jax.reshard, "
            f"device_put of an array, or a contraction's out_sharding; got {spec}")


def _user_source() -> str:
    """Where the user's code called in (JAX's source summary): file:line:column (function)."""
    import os
    import sys
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame = frame.f_back
    if frame is None:
        return ""
    positions = list(frame.f_code.co_positions())
    line, _, col, _ = positions[frame.f_lasti // 2] if frame.f_lasti // 2 < len(positions) else (
        frame.f_lineno, None, 0, None)
    return f"{frame.f_code.co_filename}:{line}:{col or 0} ({frame.f_code.co_name})"


def check_explicit_axes(sharding, api: str) -> None:
    """JAX's refusal of Auto or Manual mesh axes in `out_sharding=` or a reshard (those
    axes are the compiler's to lay out)."""
    if sharding is None:
        return
    if isinstance(sharding, NamedSharding):
        mesh, spec = sharding.mesh, sharding.spec
    elif isinstance(sharding, PartitionSpec):
        mesh, spec = get_abstract_mesh(), sharding
        if mesh.empty:
            mesh = context_mesh()
        if mesh.empty:
            return
    else:
        return
    types = dict(zip(mesh.axis_names, mesh.axis_types))
    for d in range(len(spec)):
        for a in spec.axes_of(d):
            if a in types and types[a] != AxisType.Explicit:
                raise ValueError(
                    f"PartitionSpec passed to {api} cannot contain axis names that are of type Auto "
                    f"or Manual. Got PartitionSpec: {spec} with axis name: {a} of type: "
                    f"{types[a]}. This error occurs at source:  {_user_source()}")
    pending = set(spec.unreduced) | set(spec.reduced)
    if any(a in types and types[a] != AxisType.Explicit for a in pending):
        name = "Unreduced" if any(types.get(a) != AxisType.Explicit for a in spec.unreduced) else "Reduced"
        axes = spec.unreduced if name == "Unreduced" else spec.reduced
        abstract = mesh if isinstance(mesh, AbstractMesh) else mesh.abstract_mesh
        raise ValueError(f"{name} axes can only refer to mesh axes that is of type `Explicit`. Got "
                         f"{name.lower()} axes: {axes} and mesh: {abstract}")


def pending_axes(mesh: Mesh, axes) -> tuple:
    """A spec's unreduced or reduced axes as a primitive parameter: in mesh order, each
    checked to be an axis of `mesh`."""
    for a in axes:
        if a not in mesh.axis_names:
            raise ValueError(f"Resource axis: {a} of {PartitionSpec(unreduced=set(axes))} "
                             f"is not found in mesh: {tuple(mesh.axis_names)}.")
    return tuple(a for a in mesh.axis_names if a in axes)


def core_spec(spec: PartitionSpec, ndim: int, pending_ok: bool = False) -> list[list[str]]:
    """Per dimension, the mesh axes it is split over (padded to `ndim`); `pending_ok`:
    the caller passes the spec's unreduced/reduced axes on itself."""
    if not pending_ok:
        check_no_reduction_axes(spec)
    if len(spec) > ndim:
        raise ValueError(f"PartitionSpec {spec} has {len(spec)} entries but the array has rank "
                         f"{ndim}: a spec cannot be longer than the array's rank")
    return [list(spec.axes_of(d)) if d < len(spec) else [] for d in range(ndim)]


def type_spec(aval) -> PartitionSpec:
    """The spec a type shows, padded to its rank: P('dp', None)."""
    entries = [None if not axes else axes[0] if len(axes) == 1 else tuple(axes)
               for axes in aval.spec]
    return PartitionSpec(*entries, *[None] * (aval.ndim - len(entries)))


def _over_empty_mesh(sharding) -> bool:
    return isinstance(sharding, NamedSharding) and sharding.mesh.empty


def _reshard_one(x, sharding, prim: str = "reshard"):
    if sharding is None or _over_empty_mesh(sharding):
        raise ValueError("Reshard should only be used with out_shardings which are non-None and "
                         f"have a non-empty mesh. Got sharding {sharding}.")
    x = core.asarray_value(x)
    if isinstance(sharding, NamedSharding) and isinstance(sharding.mesh, AbstractMesh):
        device_assignment.check_abstract_placement(x, sharding)
    mesh, spec = resolve(sharding, "reshard")
    if len(spec) <= x.ndim:  # JAX's type checks: an axis used twice, a dim it does not divide
        NamedSharding(mesh, spec).check_type_divisibility(x.shape)
    pending = {}
    if spec.unreduced or spec.reduced:
        pending = dict(unreduced=pending_axes(mesh, spec.unreduced),
                       reduced=pending_axes(mesh, spec.reduced))
    return core.bind1(prim, x, mesh=mesh.core_mesh, spec=core_spec(spec, x.ndim, pending_ok=True),
                      **pending)


def _map_shardings(fn, xs, shardings):
    if _is_sharding_leaf(shardings):
        return tree_util.tree_map(lambda x: fn(x, shardings), xs)
    return tree_util.tree_map(fn, xs, tree_util.tree_broadcast(shardings, xs,
                                                               is_leaf=_is_sharding_leaf))


def reshard(xs, out_shardings):
    """Lays out every array of the pytree `xs` as `out_shardings` says (a
    NamedSharding or a PartitionSpec over the context mesh, or a pytree prefix
    of them): the type changes to the new sharding and the data moves with the
    collectives that takes (all-gather, all-to-all, or a local slice)."""
    tree_util.tree_map(lambda s: check_explicit_axes(s, "reshard"), out_shardings,
                       is_leaf=_is_sharding_leaf)
    return _map_shardings(_reshard_one, xs, out_shardings)


def _spec_matches(have: PartitionSpec, want: list) -> bool:
    return all(w is UNCONSTRAINED or h == w for h, w in zip(have, want))


def _check_duplicates(spec: PartitionSpec) -> None:
    axes = [a for d in range(len(spec)) for a in spec.axes_of(d)]
    duplicates = sorted({a for a in axes if axes.count(a) > 1})
    if duplicates:
        raise DuplicateSpecError(
            "A single shardings specification can map every mesh axis to at most one positional "
            f"dimension, but {spec} has duplicate entries for "
            + ", ".join(f"`{a}`" for a in duplicates))


def _check_constraint(x, sharding, cur) -> PartitionSpec:
    """JAX's checks of a constraint against the context mesh `cur` before it compares types: the
    sharding's kind, its devices, its axes and its rank. Returns its spec."""
    if isinstance(sharding, SingleDeviceSharding):
        ids = [d.id for d in context_mesh().devices.flat] if not context_mesh().empty else []
        raise ValueError(
            "Received incompatible devices for jitted computation. Got jit's context mesh with "
            f"device ids {ids} on platform CPU and explicit output sharding with device ids "
            f"{[d.id for d in sharding.device_set]} on platform CPU")
    if not isinstance(sharding, (PartitionSpec, NamedSharding)):
        raise TypeError("shardings leaf specifications are expected to be PartitionSpec instances "
                        f"or None, but got {sharding}")
    spec = sharding if isinstance(sharding, PartitionSpec) else sharding.spec
    _check_duplicates(spec)
    check_spec(cur, spec)
    if len(spec) > x.ndim:
        raise rank_error("One of with_sharding_constraint arguments", NamedSharding(cur, spec), x.ndim)
    return spec


def _divisible_part(spec: PartitionSpec, shape, mesh) -> PartitionSpec:
    """Inside jit, XLA pads a dimension its constraint does not divide, and the value comes out
    split only over the leading axes of that dimension whose product divides its size (JAX 0.10.2
    types `f32[6,32]` constrained to `P(('data', 'model'))` on a 2x4 mesh as `P('data',)`); the
    simulator, which does not pad, constrains it to those axes."""
    if any(axis not in mesh.shape for dim in range(len(spec)) for axis in spec.axes_of(dim)):
        return spec  # an unknown axis: NamedSharding's check names it
    entries = []
    for dim, size in enumerate(shape[:len(spec)]):
        kept, factor = [], 1
        for axis in spec.axes_of(dim):
            if size % (factor * mesh.shape[axis]):
                break
            factor *= mesh.shape[axis]
            kept.append(axis)
        if spec[dim] is UNCONSTRAINED or len(kept) == len(spec.axes_of(dim)):
            entries.append(spec[dim])
        else:
            entries.append(None if not kept else kept[0] if len(kept) == 1 else tuple(kept))
    return spec.update(partitions=entries)


def _constrain(x, sharding):
    x = core.asarray_value(x)
    # Only an all-Explicit *context* mesh makes the constraint an assert; without one, a
    # NamedSharding on an Explicit mesh is checked as an Auto-axes constraint (as JAX does).
    cur = get_abstract_mesh()
    if not cur.empty and cur.are_all_axes_explicit:
        spec = _check_constraint(x, sharding, cur)
        have = type_spec(x.aval)
        want = list(spec) + [None] * (x.ndim - len(spec))
        if not _spec_matches(have, want):
            want = PartitionSpec(*want)
            raise AssertionError(
                "`with_sharding_constraint` acts as an assert when all axes of mesh are of type "
                f"`Explicit`. The array sharding: {have} did not match the sharding provided: "
                f"{want}. Please use `jax.sharding.reshard` to shard your input to the sharding "
                "you want.")
        return x
    mesh, spec = resolve(sharding, "with_sharding_constraint")
    if len(spec) > x.ndim:
        raise rank_error("One of with_sharding_constraint arguments", NamedSharding(mesh, spec), x.ndim)
    explicit = [a for d in range(len(spec)) for a in spec.axes_of(d) if a in mesh.explicit_axes]
    if explicit:
        raise ValueError(
            "The spec of NamedSharding passed to with_sharding_constraint can only refer to Auto "
            f"axes of the mesh. Got spec={spec} and mesh={mesh.abstract_mesh}. You probably meant "
            "to use `reshard` API?")
    _check_duplicates(spec)
    if isinstance(x, core.Tracer):
        spec = _divisible_part(spec, x.shape, mesh)
        sharding = NamedSharding(mesh, spec)
    NamedSharding(mesh, spec).shard_shape(x.shape)  # JAX's IndivisibleError for an undivided dim
    have = type_spec(x.aval)
    # Traced, dims typed over Explicit axes keep them and only the others are constrained;
    # eagerly, JAX lays the array out as the sharding says.
    if any(have) and isinstance(x, core.Tracer):
        wanted = list(spec) + [None] * (x.ndim - len(spec))
        merged = PartitionSpec(*(h if h is not None else w for h, w in zip(have, wanted)))
        if merged == have:
            return x
        sharding = NamedSharding(mesh, merged)
    out = _reshard_one(x, sharding, "sharding_constraint")
    if type(out) is _core.ArrayImpl:  # eagerly, the result is named by the sharding given (`P()`)
        out._sharding = NamedSharding(mesh, spec)
    return out


def with_sharding_constraint(x, shardings):
    """Under an all-Explicit mesh, asserts that `x` is sharded as `shardings`
    says (its type already is the sharding); otherwise lays it out so."""
    if _is_sharding_leaf(shardings) or tree_util.treedef_is_leaf(
            tree_util.tree_structure(shardings, is_leaf=_is_sharding_leaf)):  # one for all
        return tree_util.tree_map(lambda leaf: _constrain(leaf, shardings), x)
    try:
        return _map_shardings(_constrain, x, shardings)
    except ValueError:
        error = tree_util.prefix_mismatch("with_sharding_constraint shardings", shardings, x,
                                          _is_sharding_leaf)
        if error is None:
            raise
        raise error from None


class _use_mesh:
    """Makes `mesh` the context mesh (also inside jit) for a block."""

    def __init__(self, mesh: Mesh):
        self.mesh = mesh

    def __enter__(self):
        self.prev = _context.mesh, _context.abstract_mesh
        _context.mesh, _context.abstract_mesh = self.mesh, self.mesh.abstract_mesh

    def __exit__(self, *exc):
        _context.mesh, _context.abstract_mesh = self.prev
        return False


def mesh_cast(x, mesh: Mesh):
    """`x` seen through `mesh` (same devices, other axis types): the type
    keeps `mesh`'s Explicit axes only; no data moves."""
    x = core.asarray_value(x)
    return core.bind1("mesh_cast", x, mesh=mesh.core_mesh)


def _axes_arg(axes, mesh: Mesh) -> tuple:
    if axes is None:
        return mesh.axis_names
    return (axes,) if isinstance(axes, str) else tuple(axes)


def _switch(mesh: Mesh, axes: tuple, to: AxisType) -> Mesh:
    manual = [a for a in axes if mesh.shape and a in mesh.manual_axes]
    if manual:
        raise NotImplementedError("Going from `Manual` AxisType to `Auto` or `Explicit` AxisType "
                                  "is not allowed. Please file a bug at "
                                  "https://github.com/jax-ml/jax/issues with your use case")
    return mesh.update(axis_types=tuple(to if n in axes else t
                                        for n, t in zip(mesh.axis_names, mesh.axis_types)))


def auto_axes(fun=None, *, axes=None, out_sharding=None):
    """Runs `fun` with `axes` (default: all) of the context mesh made Auto:
    inside, types do not show them. The result is resharded to `out_sharding`
    (given here or as the call's keyword argument)."""
    if fun is None:
        return functools.partial(auto_axes, axes=axes, out_sharding=out_sharding)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        target = kwargs.pop("out_sharding", None) if out_sharding is None else out_sharding
        if target is None:
            raise TypeError("Missing required keyword argument: 'out_sharding'")
        mesh = context_mesh()
        if mesh.empty:
            leaf = next(iter(tree_util.tree_leaves(target, is_leaf=_is_sharding_leaf)), None)
            mesh = leaf.mesh if isinstance(leaf, NamedSharding) else mesh
        if mesh.empty:
            raise ValueError("Context mesh cannot be empty. Please use `jax.set_mesh` API to enter "
                             "into a mesh context when using `auto_axes` API.")
        inner = _switch(mesh, _axes_arg(axes, mesh), AxisType.Auto)
        args, kwargs = tree_util.tree_map(lambda x: mesh_cast(x, inner), (args, kwargs))
        with _use_mesh(inner):
            out = fun(*args, **kwargs)
        with _use_mesh(mesh):  # the result laid out over axes that may be Auto outside: no check
            return _map_shardings(_reshard_one, out, target)

    return wrapped


def explicit_axes(fun=None, *, axes=None, in_sharding=None):
    """Runs `fun` with `axes` (default: all) of the context mesh made
    Explicit, its arguments resharded to `in_sharding`; the result's type
    keeps only the outer mesh's Explicit axes."""
    if fun is None:
        return functools.partial(explicit_axes, axes=axes, in_sharding=in_sharding)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        target = kwargs.pop("in_sharding", None) if in_sharding is None else in_sharding
        if target is None:
            raise TypeError("Missing required keyword argument: 'in_sharding'")
        mesh = context_mesh()
        if mesh.empty:
            raise ValueError("Context mesh cannot be empty. Please use `jax.set_mesh` API to enter "
                             "into a mesh context when using `explicit_axes` API.")
        inner = _switch(mesh, _axes_arg(axes, mesh), AxisType.Explicit)
        args = tree_util.tree_map(lambda x: mesh_cast(x, inner), args)
        with _use_mesh(inner):
            args = reshard(args, target)
            out = fun(*args, **kwargs)
        return tree_util.tree_map(lambda x: mesh_cast(x, mesh), out)

    return wrapped


def with_out_sharding(x, out_sharding, api: str = "reshard"):
    """The result of an op given `out_sharding=`: laid out so (JAX's refusal of
    Auto axes there names the op, `api`). Without one, under `set_mesh` of a
    mesh with Explicit axes (outside shard_map bodies) it is replicated over
    that mesh, as JAX types creation ops there (`NamedSharding(mesh, P(None,
    ...))`); otherwise as is. A sharding over the empty mesh (the type of an
    array made outside any mesh, `jax.typeof(x).sharding`) asks for nothing."""
    if out_sharding is not None and not _over_empty_mesh(out_sharding):
        check_explicit_axes(out_sharding, api)
        return reshard(x, out_sharding)
    mesh = context_mesh()
    if (not mesh.empty and not _context.legacy and mesh.explicit_axes
            and _core.current_axis_env() is None
            and core.asarray_value(x).aval.mesh is None):
        return reshard(x, NamedSharding(mesh, PartitionSpec()))
    return x


def out_sharding_param(out_sharding, ndim: int, pending_ok: bool = False):
    """`out_sharding=` as a primitive parameter: the spec over the operands' mesh;
    `pending_ok`: the caller passes its unreduced axes on (out_unreduced_param)."""
    if out_sharding is None:
        return None
    _, spec = resolve(out_sharding, "out_sharding")
    return core_spec(spec, ndim, pending_ok)


def check_out_divisible(out_sharding, shape) -> None:
    """Raises JAX's type error when `out_sharding=` splits a dim of the result's `shape` unevenly
    (JAX reshards the op's result to it, whose type check names the dim)."""
    mesh, spec = resolve(out_sharding, "out_sharding")
    NamedSharding(mesh, spec).check_type_divisibility(shape)


def out_unreduced_param(out_sharding) -> dict:
    """The unreduced axes of `out_sharding=` as the `out_unreduced` parameter of a
    contraction (none: no parameter). Reduced axes there are dropped, as JAX's dot_general
    drops them: the result is typed without them."""
    if out_sharding is None:
        return {}
    mesh, spec = resolve(out_sharding, "out_sharding")
    return dict(out_unreduced=pending_axes(mesh, spec.unreduced)) if spec.unreduced else {}

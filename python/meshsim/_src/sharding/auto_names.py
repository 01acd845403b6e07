"""How JAX names a layout its compiler chose over Auto mesh axes (the result of
a jitted function, or of an op applied to arrays on such a mesh): as the
sharding of the computation's first committed argument when that argument
has the result's rank and the same layout; otherwise as the compiled layout
read back, a PartitionSpec without its trailing unsplit dimensions
(`P('X',)` where the type would say `P('X', None)`)."""
from __future__ import annotations

from meshsim import _core
from meshsim._src.sharding.mesh import AxisType
from meshsim._src.sharding.named_sharding import NamedSharding
from meshsim._src.sharding.partition_spec import PartitionSpec

_Array = _core.ArrayImpl


def _on_auto_mesh(x) -> bool:
    mesh = x.sharding_core.mesh
    return mesh is not None and all(t == _core.AxisType.Auto for t in mesh.axis_types)


def origin_of(args):
    """The sharding JAX names a computation's layouts over Auto axes after: the first
    committed array of `args` (read before the call: donation deletes arguments), with
    its rank; None when that is not laid out over an all-Auto mesh."""
    for a in args:
        if type(a) is _Array and a.committed:
            if _on_auto_mesh(a) and isinstance(a.sharding, NamedSharding):
                return a.sharding, a.ndim
            return None
    return None


def remember_origin(outs, origin) -> None:
    """Notes `origin` (origin_of the computation's arguments) on each array of `outs`."""
    for o in outs:
        if type(o) is _Array and "_sharding" not in o.__dict__:
            o._auto_origin = origin


def name_typed_results(outs) -> None:
    """Notes on a jitted computation's results that their sharding is named by their type when
    laid out over Explicit axes only (typed_name; read when asked, so nothing waits here)."""
    for o in outs:
        if type(o) is _Array and "_sharding" not in o.__dict__:
            o._typed_result = True


def typed_name(sharding: NamedSharding, ndim: int) -> NamedSharding:
    """A jitted result's layout over Explicit axes only, named by its type: one entry per
    dimension (JAX's `P('sp', None)` for a shard_map's out_specs `P('sp')`); a layout over
    Auto axes keeps its own name."""
    mesh = sharding.mesh
    explicit = {n for n, t in zip(mesh.axis_names, mesh.axis_types) if t == AxisType.Explicit}
    spec = sharding.spec
    if not explicit or len(spec) >= ndim or not all(a in explicit for d in range(len(spec))
                                                    for a in spec.axes_of(d)):
        return sharding
    return sharding.update(spec=spec.padded(ndim))


def jax_name(sharding: NamedSharding, origin, ndim: int) -> NamedSharding:
    """`sharding` (a layout over an all-Auto mesh) as JAX names it, given the origin
    remember_origin noted (or None)."""
    mesh = sharding.mesh
    if not all(t == AxisType.Auto for t in mesh.axis_types) or sharding.spec.unreduced:
        return sharding
    if origin is not None:
        first, first_ndim = origin
        if first_ndim == ndim and first.mesh == mesh and first.is_equivalent_to(sharding, ndim):
            return first
    entries = list(sharding.spec.partitions)
    while entries and entries[-1] is None:
        entries.pop()
    return NamedSharding(mesh, PartitionSpec(*entries))

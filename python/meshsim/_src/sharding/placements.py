"""The mesh-oriented view of a sharding, as PyTorch's DTensor writes it: one
placement per mesh axis, `Shard(dim)` (the axis splits dimension `dim`),
`Replicate()` or `Partial('sum')` (the axis holds partial sums: JAX's
unreduced axes).

Several axes splitting one dimension: DTensor's convention is that mesh axes
split a dimension in mesh order, the earlier axis the major one. An axis that
is major to an axis before it in the mesh is a `_StridedShard(dim, sf)`,
whose split factor `sf` is the number of pieces the axes after it in the mesh
but major to it in the spec cut the dimension into first."""
from __future__ import annotations

import itertools
import math

from meshsim._src.sharding.named_sharding import NamedSharding
from meshsim._src.sharding.partition_spec import PartitionSpec

__all__ = ["Placement", "Shard", "Replicate", "Partial", "placements", "from_placements"]


class Placement:
    """How an array is laid out over one mesh axis."""

    def is_shard(self, dim: int | None = None) -> bool:
        return isinstance(self, Shard) and (dim is None or self.dim == dim)

    def is_replicate(self) -> bool:
        return isinstance(self, Replicate)

    def is_partial(self) -> bool:
        return isinstance(self, Partial)


class Shard(Placement):
    def __init__(self, dim: int):
        self.dim = dim

    def __eq__(self, other):
        return type(other) is Shard and other.dim == self.dim

    def __hash__(self):
        return hash((Shard, self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"

    def __str__(self):
        return f"S({self.dim})"


class _StridedShard(Shard):
    def __init__(self, dim: int, split_factor: int):
        super().__init__(dim)
        self.split_factor = split_factor

    def __eq__(self, other):
        return (type(other) is _StridedShard and other.dim == self.dim
                and other.split_factor == self.split_factor)

    def __hash__(self):
        return hash((_StridedShard, self.dim, self.split_factor))

    def __repr__(self):
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"

    def __str__(self):
        return f"_S({self.dim}, {self.split_factor})"


class Replicate(Placement):
    def __eq__(self, other):
        return type(other) is Replicate

    def __hash__(self):
        return hash(Replicate)

    def __repr__(self):
        return "Replicate()"

    def __str__(self):
        return "R"


class Partial(Placement):
    def __init__(self, reduce_op: str = "sum"):
        self.reduce_op = reduce_op

    def __eq__(self, other):
        return type(other) is Partial and other.reduce_op == self.reduce_op

    def __hash__(self):
        return hash((Partial, self.reduce_op))

    def __repr__(self):
        return f"Partial({self.reduce_op})"

    def __str__(self):
        return f"P({self.reduce_op})"


def _sharding_of(x) -> NamedSharding:
    if isinstance(x, NamedSharding):
        return x
    sharding = getattr(x, "sharding", None)
    if not isinstance(sharding, NamedSharding):
        raise TypeError(f"placements needs an array or type with a NamedSharding, got {x!r}")
    return sharding


def _dim_placements(names, sizes, dim: int, axes: tuple) -> dict:
    """The placement of each of `axes` (spec order, major first) splitting `dim`."""
    order = {a: names.index(a) for a in axes}
    out = {}
    for i, a in enumerate(axes):
        factor = math.prod(sizes[names.index(b)] for b in axes[:i] if order[b] > order[a])
        out[a] = Shard(dim) if factor == 1 else _StridedShard(dim, factor)
    return out


def placements(x) -> tuple:
    """One placement per axis of `x`'s mesh (an Array, a type, or a NamedSharding)."""
    sharding = _sharding_of(x)
    mesh, spec = sharding.mesh, sharding.spec
    names, sizes = list(mesh.axis_names), list(mesh.axis_sizes)
    found = {}
    for dim in range(len(spec)):
        found.update(_dim_placements(names, sizes, dim, tuple(spec.axes_of(dim))))
    for a in spec.unreduced:
        found[a] = Partial("sum")
    return tuple(found.get(a, Replicate()) for a in names)


def from_placements(mesh, placements, ndim: int) -> NamedSharding:
    """The NamedSharding over `mesh` of an array of rank `ndim` laid out as
    `placements` (one per mesh axis) say."""
    names, sizes = list(mesh.axis_names), list(mesh.axis_sizes)
    placements = tuple(placements)
    if len(placements) != len(names):
        raise ValueError(f"Expected one placement per mesh axis ({len(names)}), got "
                         f"{len(placements)}: {placements}")
    per_dim: dict[int, list] = {}
    unreduced = set()
    for a, p in zip(names, placements):
        if isinstance(p, Shard):
            if not -ndim <= p.dim < ndim:
                raise ValueError(f"{p!r} on mesh axis {a!r} is out of range for rank {ndim}")
            per_dim.setdefault(p.dim % ndim, []).append(a)
        elif isinstance(p, Partial):
            if p.reduce_op != "sum":
                raise NotImplementedError(f"Only Partial('sum') has a JAX sharding (unreduced "
                                          f"axes); got {p!r} on mesh axis {a!r}")
            unreduced.add(a)
        elif not isinstance(p, Replicate):
            raise TypeError(f"Expected a Shard, Replicate or Partial placement, got {p!r}")
    entries = [None] * ndim
    for dim, axes in per_dim.items():
        want = {a: placements[names.index(a)] for a in axes}
        for order in itertools.permutations(axes):  # the spec order the placements describe
            got = _dim_placements(names, sizes, dim, order)
            if all(got[a] == want[a] for a in axes):
                entries[dim] = order[0] if len(order) == 1 else order
                break
        else:
            raise ValueError(f"The placements {[want[a] for a in axes]} of dimension {dim} "
                             "describe no order of their mesh axes")
    while entries and entries[-1] is None:
        entries.pop()
    return NamedSharding(mesh, PartitionSpec(*entries, unreduced=unreduced))

"""PartitionSpec: for each dimension of an array, the mesh axes it is split over.

As in JAX 0.10, `P` is not a tuple (so pytree code treats it as a leaf), but
it iterates and indexes like the tuple of its canonical entries."""
from __future__ import annotations


class _Unconstrained:
    """The entry for a dimension whose sharding is left to the compiler."""

    def __repr__(self):
        return "UNCONSTRAINED"

    def __reduce__(self):
        return "UNCONSTRAINED"


UNCONSTRAINED = _Unconstrained()


def _canonicalize_partition(p):
    """None/()/[] -> None; lists -> tuples; a 1-tuple -> its element."""
    if p is UNCONSTRAINED:
        return p
    if not p:
        return None
    if isinstance(p, (tuple, list)):
        for q in p:
            if isinstance(q, (tuple, list)):
                raise ValueError("A tuple inside PartitionSpec cannot contain a nested tuple. "
                                 f"Got partition: {p} and the nested tuple: {q}")
        return p[0] if len(p) == 1 else tuple(p)
    return p


def _as_axis_set(value, name: str) -> frozenset:
    if isinstance(value, frozenset):
        return value
    if isinstance(value, set):
        return frozenset(value)
    raise TypeError(f"{name} argument of PartitionSpec should of type `frozenset` or `set`. "
                    f"Got type {value}")


def _check_reduction_axes(partitions, unreduced, reduced) -> None:
    for name, axes in (("unreduced", unreduced), ("reduced", reduced)):
        if None in axes:
            raise ValueError(f"{name} cannot contain None. All elements in {name} should refer"
                             " to the mesh axes.")
    if unreduced & reduced:
        raise ValueError("`unreduced` and `reduced` argument to PartitionSpec cannot overlap. "
                         f"Got unreduced: {unreduced} and reduced: {reduced}")
    for axis in (a for p in partitions for a in (p if isinstance(p, tuple) else (p,))):
        for name, axes in (("unreduced", unreduced), ("reduced", reduced)):
            if axis in axes:
                raise ValueError(f"partitions cannot overlap with {name} axes passed to "
                                 f"PartitionSpec. Got partitions: {partitions} and {name} axes: "
                                 f"{axes}")


class PartitionSpec:
    """How to partition an array over a mesh: one entry per leading dimension,
    each None (replicated), a mesh axis name, or a tuple of names (split over
    their product, the first name major)."""

    __slots__ = ("_partitions", "unreduced", "reduced")
    UNCONSTRAINED = UNCONSTRAINED

    def __init__(self, *partitions, unreduced=frozenset(), reduced=frozenset()):
        partitions = tuple(_canonicalize_partition(p) for p in partitions)
        unreduced = _as_axis_set(unreduced, "unreduced")
        reduced = _as_axis_set(reduced, "reduced")
        _check_reduction_axes(partitions, unreduced, reduced)
        object.__setattr__(self, "_partitions", partitions)
        object.__setattr__(self, "unreduced", unreduced)
        object.__setattr__(self, "reduced", reduced)

    def __setattr__(self, name, value):
        raise AttributeError("PartitionSpec is immutable")

    @property
    def partitions(self) -> tuple:
        return self._partitions

    def __repr__(self):
        entries = repr(self._partitions)[1:-1]
        if not self.unreduced and not self.reduced:
            return f"P({entries})"
        sets = [f"{name}={set(axes)!r}" for name, axes in
                (("unreduced", self.unreduced), ("reduced", self.reduced)) if axes]
        return f"P({', '.join(([entries.rstrip(',')] if entries else []) + sets)})"

    def __eq__(self, other):
        return (isinstance(other, PartitionSpec) and self._partitions == other._partitions
                and self.unreduced == other.unreduced and self.reduced == other.reduced)

    def __hash__(self):
        return hash((PartitionSpec, self._partitions, self.unreduced, self.reduced))

    def _check_plain(self, what: str) -> None:
        if self.unreduced or self.reduced:
            raise ValueError(f"Using {what} is dangerous when PartitionSpec has non-empty "
                             "unreduced/reduced set. Please use spec.partitions")

    def __getitem__(self, i):
        self._check_plain("pspec[...]")
        return self._partitions[i]

    def __iter__(self):
        self._check_plain("*pspec")
        return iter(self._partitions)

    def __len__(self):
        return len(self._partitions)

    def __add__(self, other):
        if isinstance(other, PartitionSpec):
            return PartitionSpec(*self._partitions, *other._partitions,
                                 unreduced=self.unreduced | other.unreduced,
                                 reduced=self.reduced | other.reduced)
        if isinstance(other, tuple):
            return PartitionSpec(*self, *other)
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, tuple):
            return PartitionSpec(*other, *self)
        return NotImplemented

    def __reduce__(self):
        return _rebuild, (self._partitions, self.unreduced, self.reduced)

    def index(self, value) -> int:
        return self._partitions.index(_canonicalize_partition(value))

    def count(self, value) -> int:
        return self._partitions.count(_canonicalize_partition(value))

    def update(self, partitions=None, unreduced=None, reduced=None) -> "PartitionSpec":
        return PartitionSpec(*(self._partitions if partitions is None else partitions),
                             unreduced=self.unreduced if unreduced is None else unreduced,
                             reduced=self.reduced if reduced is None else reduced)

    def axes_of(self, dim: int) -> tuple:
        """The mesh axes dimension `dim` is split over, major first (() if none)."""
        p = self._partitions[dim] if dim < len(self._partitions) else None
        if p is None or p is UNCONSTRAINED:
            return ()
        return tuple(a for a in p if a is not None) if isinstance(p, tuple) else (p,)

    def padded(self, ndim: int) -> "PartitionSpec":
        """This spec with UNCONSTRAINED -> None, padded with None to `ndim` entries."""
        entries = [None if p is UNCONSTRAINED else p for p in self._partitions]
        return self.update(partitions=entries + [None] * (ndim - len(entries)))


def _rebuild(partitions, unreduced, reduced) -> PartitionSpec:
    return PartitionSpec(*partitions, unreduced=unreduced, reduced=reduced)


P = PartitionSpec

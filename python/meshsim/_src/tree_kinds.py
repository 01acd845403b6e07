"""Pytree key-path entries (SequenceKey, DictKey, GetAttrKey, FlattenedIndexKey,
keystr) and node kinds: how each node type flattens and unflattens, one kind per
type, found by exact type (namedtuples by their ``_fields``)."""
from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from typing import Any, TypeVar

KeyEntry = TypeVar("KeyEntry", bound=Any)
KeyPath = tuple[KeyEntry, ...]


# --- key-path entries ---------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey:
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class DictKey:
    key: Hashable

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    name: str

    def __str__(self):
        return f".{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class FlattenedIndexKey:
    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """Joins a key path into a string, e.g. ``['a'][0].w``."""
    return separator.join(map(_simple_entrystr if simple else str, keys))


def _simple_entrystr(key) -> str:
    match key:
        case SequenceKey(idx=k) | DictKey(key=k) | GetAttrKey(name=k) | FlattenedIndexKey(key=k):
            return str(k)
    return str(key)


# --- node kinds ---------------------------------------------------------------

class _Kind:
    """Base of the node kinds; a kind pickles as a lookup of its type, so a
    pickled treedef loads where the same types are registered."""

    def __reduce__(self):
        return _unpickle_kind, (self.type,)


# Each kind implements:
#   flatten(x) -> (children, data)
#   flatten_with_keys(x) -> (key_child_pairs, data)
#   unflatten(data, children_tuple) -> value
#   children_up_to(data, n, x) -> children of x, checked against the treedef
#   describe(data, child_strs) -> the node's part of the treedef repr
#   node_data(data) -> what PyTreeDef.node_data() returns

class _NoneKind(_Kind):
    type = type(None)

    def flatten(self, x):
        return (), None

    def flatten_with_keys(self, x):
        return (), None

    def unflatten(self, data, children):
        return None

    def children_up_to(self, data, n, x):
        if x is not None:
            raise ValueError(
                f"Expected None, got {x!r}.\n\n"
                "In previous releases of JAX, flatten-up-to used to consider None to be a "
                "tree-prefix of non-None values. To obtain the previous behavior, you can "
                "usually write:\n  jax.tree.map(lambda x, y: None if x is None else f(x, y), "
                "a, b, is_leaf=lambda x: x is None)")
        return ()

    def describe(self, data, child_strs):
        return "None"

    def node_data(self, data):
        return (self.type, None)


class _SequenceKind(_Kind):
    """tuple and list: children are the elements, no data."""

    def __init__(self, seq_type):
        self.type = seq_type
        self.name = seq_type.__name__

    def flatten(self, x):
        return x, None

    def flatten_with_keys(self, x):
        return tuple([(SequenceKey(i), c) for i, c in enumerate(x)]), None

    def unflatten(self, data, children):
        return children if self.type is tuple else list(children)

    def children_up_to(self, data, n, x):
        if type(x) is not self.type:
            raise ValueError(f"Expected {self.name}, got {x!r}.")
        if len(x) != n:
            raise ValueError(
                f"{self.name.capitalize()} arity mismatch: {len(x)} != {n}; {self.name}: {x!r}.")
        return x

    def describe(self, data, child_strs):
        if self.type is tuple:
            return f"({child_strs[0]},)" if len(child_strs) == 1 else f"({', '.join(child_strs)})"
        return f"[{', '.join(child_strs)}]"

    def node_data(self, data):
        return (self.type, None)


def _sorted_keys(d) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError as e:
        raise ValueError("Comparator raised exception while sorting pytree dictionary keys.") from e


class _DictKind(_Kind):
    """dict: children in sorted key order, the sorted keys are the data."""
    type = dict

    def flatten(self, x):
        keys = _sorted_keys(x)
        return tuple([x[k] for k in keys]), keys

    def flatten_with_keys(self, x):
        keys = _sorted_keys(x)
        return tuple([(DictKey(k), x[k]) for k in keys]), keys

    def unflatten(self, data, children):
        return dict(zip(data, children))

    def children_up_to(self, data, n, x):
        if type(x) is not dict:
            raise ValueError(f"Expected dict, got {x!r}.")
        keys = _sorted_keys(x)
        if keys != data:
            raise ValueError(
                f"Dict key mismatch; expected keys: {list(data)!r}; present keys: {list(keys)!r}.")
        return [x[k] for k in keys]

    def describe(self, data, child_strs):
        return "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(data, child_strs)) + "}"

    def node_data(self, data):
        return (dict, list(data))


class _NamedTupleKind(_Kind):
    def __init__(self, cls):
        self.type = cls

    def flatten(self, x):
        return x, None

    def flatten_with_keys(self, x):
        return [(GetAttrKey(f), c) for f, c in zip(x._fields, x)], None

    def unflatten(self, data, children):
        return self.type(*children)

    def children_up_to(self, data, n, x):
        if not _is_namedtuple(x):
            raise ValueError(f"Expected named tuple, got {x!r}.")
        if type(x) is not self.type:
            raise ValueError(
                f"Named tuple type mismatch: expected type: {self.type!r}, tuple: {x!r}.")
        if len(x) != n:
            raise ValueError(f"Named tuple arity mismatch: {len(x)} != {n}; tuple: {x!r}.")
        return x

    def describe(self, data, child_strs):
        return f"CustomNode(namedtuple[{self.type.__name__}], [{', '.join(child_strs)}])"

    def node_data(self, data):
        return (self.type, None)


class _CustomKind(_Kind):
    """A type registered with register_pytree_node / register_pytree_with_keys."""

    def __init__(self, cls, flatten, unflatten, flatten_with_keys):
        self.type = cls
        self._flatten = flatten
        self._unflatten = unflatten
        self._flatten_with_keys = flatten_with_keys

    def flatten(self, x):
        out = self._flatten(x)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ValueError("The to_iterable function for a custom PyTree node should return "
                             f"a (children, aux_data) tuple, got {out!r}")
        try:
            iter(out[0])
        except TypeError:
            raise ValueError("The to_iterable function for a custom PyTree node should return "
                             "a (children, aux_data) tuple where 'children' is iterable, "
                             f"got {out!r}") from None
        return out

    def flatten_with_keys(self, x):
        if self._flatten_with_keys is None:
            children, data = self.flatten(x)
            return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)], data
        out = self._flatten_with_keys(x)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ValueError("The to_iterable_with_keys function for a custom PyTree node should "
                             f"return a (key_leaf_pairs, aux_data) tuple, got {out!r}")
        return out

    def unflatten(self, data, children):
        return self._unflatten(data, children)

    def children_up_to(self, data, n, x):
        if type(x) is not self.type:
            raise ValueError(
                f"Custom node type mismatch: expected type: {self.type!r}, value: {x!r}.")
        children, x_data = self.flatten(x)
        if x_data != data:
            raise ValueError(f"Mismatch custom node data: {data!r} != {x_data!r}; value: {x!r}.")
        children = tuple(children)
        if len(children) != n:
            raise ValueError(f"Custom type arity mismatch: {len(children)} != {n}; value: {x!r}.")
        return children

    def describe(self, data, child_strs):
        return f"CustomNode({self.type.__name__}[{data}], [{', '.join(child_strs)}])"

    def node_data(self, data):
        return (self.type, data)


class _DataclassKind(_Kind):
    """A dataclass registered with register_dataclass: data fields are children,
    the tuple of meta field values is the node data. The field names are read
    once, at registration."""
    describe = _CustomKind.describe
    node_data = _CustomKind.node_data

    def __init__(self, cls, data_fields: tuple, meta_fields: tuple):
        self.type = cls
        self.data_fields = data_fields
        self.meta_fields = meta_fields
        self._keys = tuple(GetAttrKey(f) for f in data_fields)

    def flatten(self, x):
        return ([getattr(x, f) for f in self.data_fields],
                tuple([getattr(x, f) for f in self.meta_fields]))

    def flatten_with_keys(self, x):
        children, data = self.flatten(x)
        return list(zip(self._keys, children)), data

    def unflatten(self, data, children):
        return self.type(**dict(zip(self.meta_fields, data)),
                         **dict(zip(self.data_fields, children)))

    def children_up_to(self, data, n, x):
        if type(x) is not self.type:
            raise ValueError(
                f"Custom dataclass node type mismatch: expected type: {self.type!r}, value: {x!r}.")
        children, x_data = self.flatten(x)
        if x_data != data:
            raise ValueError(
                f"Mismatch custom dataclass node data: {data!r} != {x_data!r}; value: {x!r}.")
        return children


_kinds: dict[type, _Kind] = {
    type(None): _NoneKind(),
    tuple: _SequenceKind(tuple),
    list: _SequenceKind(list),
    dict: _DictKind(),
}
# Filled on first sight of each namedtuple class (they are few and long-lived).
_namedtuple_kinds: dict[type, _NamedTupleKind] = {}


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _kind_of_type(t: type):
    """The kind of node type ``t``, or None if its instances are leaves."""
    kind = _kinds.get(t)
    if kind is None and issubclass(t, tuple) and hasattr(t, "_fields"):
        kind = _namedtuple_kinds.get(t)
        if kind is None:
            kind = _namedtuple_kinds[t] = _NamedTupleKind(t)
    return kind


def _kind_of(x):
    return _kind_of_type(type(x))


def _unpickle_kind(t: type):
    kind = _kind_of_type(t)
    if kind is None:
        raise ValueError(f"Unknown custom type in pickled PyTreeDef: {t}")
    return kind

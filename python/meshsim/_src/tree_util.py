"""Pytrees, with the semantics of JAX 0.10's ``jax.tree_util`` and ``jax.tree``.

A treedef is an immutable nested tuple: a leaf is the ``_LEAF`` sentinel and an
inner node is ``(kind, data, children)``. ``kind`` says how the node's Python
type flattens and unflattens and is compared by identity (one kind per type),
``data`` is the hashable static part (dict keys, custom aux data, dataclass
meta fields). Tuple equality and hashing then make treedefs usable as jit
cache keys at C speed.

Node types are found by *exact* type, as in JAX: a subclass of tuple, list or
dict is a leaf unless registered itself (so a PartitionSpec that subclasses
tuple stays a leaf). The only exception is namedtuples, recognised by their
``_fields`` attribute. The key-path entries and the node kinds live in
tree_kinds.py.
"""
from __future__ import annotations

import collections
import dataclasses
import difflib
import functools
import textwrap
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
Typ = TypeVar("Typ", bound=type)
Leaf = Any


class _Leaf:
    """The treedef node of a leaf; pickles as a reference to the singleton."""

    def __reduce__(self):
        return "_LEAF"


_LEAF = _Leaf()

from meshsim._src.tree_kinds import (  # noqa: E402,F401
    DictKey, FlattenedIndexKey, GetAttrKey, KeyEntry, KeyPath, SequenceKey, _CustomKind, _DataclassKind,
    _NamedTupleKind, _kind_of, _kind_of_type, _kinds, _sorted_keys, keystr)


# --- PyTreeDef ----------------------------------------------------------------

class PyTreeDef:
    """The structure of a pytree: everything but its leaves."""
    __slots__ = ("_node", "_num_leaves", "_num_nodes", "_hash")

    def __init__(self, node, num_leaves: int | None = None):
        self._node = node
        self._num_leaves = num_leaves
        self._num_nodes = None
        self._hash = None

    @property
    def num_leaves(self) -> int:
        if self._num_leaves is None:
            self._num_leaves = _count(self._node, leaves_only=True)
        return self._num_leaves

    @property
    def num_nodes(self) -> int:
        if self._num_nodes is None:
            self._num_nodes = _count(self._node, leaves_only=False)
        return self._num_nodes

    def children(self) -> list[PyTreeDef]:
        return [] if self._node is _LEAF else [PyTreeDef(c) for c in self._node[2]]

    def node_data(self):
        """``(type, data)`` of the root node, or None for a leaf."""
        if self._node is _LEAF:
            return None
        kind, data, _ = self._node
        return kind.node_data(data)

    def unflatten(self, leaves: Iterable[Leaf], /) -> Any:
        leaves = list(leaves)
        n = self.num_leaves
        if len(leaves) < n:
            raise ValueError(f"Too few leaves for PyTreeDef; expected {n}, got {len(leaves)}")
        if len(leaves) > n:
            raise ValueError(f"Too many leaves for PyTreeDef; expected {n}.")
        return _build(self._node, iter(leaves))

    def flatten_up_to(self, xs: Any, /) -> list[Any]:
        """The subtrees of ``xs`` at this treedef's leaves; ``xs`` must have this
        structure down to those leaves."""
        out: list[Any] = []
        _flatten_up_to(self._node, xs, out)
        return out

    def compose(self, inner: PyTreeDef, /) -> PyTreeDef:
        """The treedef with ``inner`` substituted at each of this one's leaves."""
        return PyTreeDef(_substitute(self._node, inner._node),
                         self.num_leaves * inner.num_leaves)

    def __reduce__(self):
        return PyTreeDef, (self._node, self._num_leaves)

    def __eq__(self, other):
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        return self._node == other._node

    def __hash__(self):
        if self._hash is None:
            try:
                self._hash = hash(self._node)
            except TypeError:
                # JAX accepts unhashable aux data; hash such treedefs by shape only.
                self._hash = hash(_strip_data(self._node))
        return self._hash

    def __repr__(self):
        return f"PyTreeDef({_describe(self._node)})"


def _count(node, leaves_only: bool) -> int:
    if node is _LEAF:
        return 1
    return (0 if leaves_only else 1) + sum(_count(c, leaves_only) for c in node[2])


def _build(node, leaves):
    if node is _LEAF:
        return next(leaves)
    kind, data, children = node
    built = []
    for c in children:
        built.append(next(leaves) if c is _LEAF else _build(c, leaves))
    return kind.unflatten(data, tuple(built))


def _flatten_up_to(node, x, out):
    if node is _LEAF:
        out.append(x)
        return
    kind, data, children = node
    for child, sub in zip(children, kind.children_up_to(data, len(children), x)):
        if child is _LEAF:
            out.append(sub)
        else:
            _flatten_up_to(child, sub, out)


def _substitute(node, inner):
    if node is _LEAF:
        return inner
    kind, data, children = node
    return (kind, data, tuple([_substitute(c, inner) for c in children]))


def _strip_data(node):
    if node is _LEAF:
        return node
    return (node[0], tuple(_strip_data(c) for c in node[2]))


def _describe(node) -> str:
    if node is _LEAF:
        return "*"
    kind, data, children = node
    return kind.describe(data, [_describe(c) for c in children])


# --- flattening ---------------------------------------------------------------

def _flatten(x, is_leaf, leaves):
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return _LEAF
    kind = _kind_of_type(type(x))
    if kind is None:
        leaves.append(x)
        return _LEAF
    children, data = kind.flatten(x)
    if is_leaf is not None:
        return (kind, data, tuple([_flatten(c, is_leaf, leaves) for c in children]))
    # Hot path of every jit call: take leaves here rather than recursing into them.
    nodes = []
    for c in children:
        if type(c) in _kinds or isinstance(c, tuple):
            nodes.append(_flatten(c, None, leaves))
        else:
            leaves.append(c)
            nodes.append(_LEAF)
    return (kind, data, tuple(nodes))


def _flatten_with_path(x, is_leaf, path, out):
    if is_leaf is not None and is_leaf(path, x):
        out.append((path, x))
        return _LEAF
    kind = _kind_of(x)
    if kind is None:
        out.append((path, x))
        return _LEAF
    pairs, data = kind.flatten_with_keys(x)
    return (kind, data, tuple([_flatten_with_path(c, is_leaf, (*path, k), out) for k, c in pairs]))


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None
                 ) -> tuple[list[Leaf], PyTreeDef]:
    leaves: list[Leaf] = []
    node = _flatten(tree, is_leaf, leaves)
    return leaves, PyTreeDef(node, len(leaves))


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Leaf]) -> Any:
    return treedef.unflatten(leaves)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Leaf]:
    leaves: list[Leaf] = []
    _flatten(tree, is_leaf, leaves)
    return leaves


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def tree_flatten_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                           is_leaf_takes_path: bool = False
                           ) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    if is_leaf is not None and not is_leaf_takes_path:
        is_leaf_without_path = is_leaf
        is_leaf = lambda _, x: is_leaf_without_path(x)  # noqa: E731
    out: list[tuple[KeyPath, Any]] = []
    node = _flatten_with_path(tree, is_leaf, (), out)
    return out, PyTreeDef(node, len(out))


def tree_leaves_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                          is_leaf_takes_path: bool = False) -> list[tuple[KeyPath, Any]]:
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    return PyTreeDef((_kinds[tuple], None, tuple(t._node for t in treedefs)))


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    return treedef.children()


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    return treedef.num_nodes == 1


def _is_strict_leaf(x, is_leaf) -> bool:
    return (is_leaf is not None and is_leaf(x)) or _kind_of(x) is None


def all_leaves(iterable: Iterable[Any], is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every element of ``iterable`` is a leaf (None is not: it is an empty node)."""
    if is_leaf is None:
        return all(_kind_of(x) is None for x in iterable)
    items = list(iterable)
    leaves = tree_leaves(items, is_leaf)
    return len(leaves) == len(items) and all(a is b for a, b in zip(items, leaves))


def is_tree_node(typ: type) -> bool:
    return _kind_of_type(typ) is not None


def flatten_one_level(tree: Any) -> tuple[Iterable[Any], Hashable]:
    kind = _kind_of(tree)
    if kind is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    if isinstance(kind, _NamedTupleKind):
        return list(tree), type(tree)
    return kind.flatten(tree)


def flatten_one_level_with_keys(tree: Any) -> tuple[Iterable[tuple[Any, Any]], Hashable]:
    kind = _kind_of(tree)
    if kind is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    pairs, data = kind.flatten_with_keys(tree)
    return pairs, (type(tree) if isinstance(kind, _NamedTupleKind) else data)


# --- mapping and reducing -----------------------------------------------------

def tree_map(f: Callable[..., Any], tree: Any, *rest: Any,
             is_leaf: Callable[[Any], bool] | None = None) -> Any:
    leaves, treedef = tree_flatten(tree, is_leaf)
    columns = [leaves] + _flatten_rest(treedef, tree, rest, is_leaf, "tree_map tree")
    return treedef.unflatten(f(*xs) for xs in zip(*columns))


def tree_map_with_path(f: Callable[..., Any], tree: Any, *rest: Any,
                       is_leaf: Callable[..., bool] | None = None,
                       is_leaf_takes_path: bool = False) -> Any:
    path_leaves, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    # The structure-error search below calls is_leaf on values only.
    value_is_leaf = None if is_leaf_takes_path else is_leaf
    columns = [[p for p, _ in path_leaves], [x for _, x in path_leaves]]
    columns += _flatten_rest(treedef, tree, rest, value_is_leaf, "tree_map_with_path tree")
    return treedef.unflatten(f(*xs) for xs in zip(*columns))


def _flatten_rest(treedef, tree, rest, is_leaf, name) -> list[list[Any]]:
    """Each of ``rest`` flattened up to ``treedef``; a mismatch raises the
    key-path-naming error JAX raises."""
    out = []
    for r in rest:
        try:
            out.append(treedef.flatten_up_to(r))
        except Exception as e:
            err = next(_prefix_error((), tree, r, is_leaf), None)
            raise (err(name) if err is not None else e) from None
    return out


class Unspecified:
    """The default of an optional argument whose None is a valid value."""


def tree_reduce(function: Callable[[T, Any], T], tree: Any,
                initializer: T | Unspecified = Unspecified(),
                is_leaf: Callable[[Any], bool] | None = None) -> T:
    if isinstance(initializer, Unspecified):
        return functools.reduce(function, tree_leaves(tree, is_leaf=is_leaf))
    return functools.reduce(function, tree_leaves(tree, is_leaf=is_leaf), initializer)


def tree_reduce_associative(operation: Callable[[T, T], T], tree: Any, *,
                            identity: T | Unspecified = Unspecified(),
                            is_leaf: Callable[[Any], bool] | None = None) -> T:
    leaves = tree_leaves(tree, is_leaf=is_leaf)
    if not leaves:
        if isinstance(identity, Unspecified):
            raise TypeError("Must specify identity for parallel reduction of empty sequence.")
        return identity
    return _reduce_halves(leaves, operation)


def _reduce_halves(xs, operation):
    if len(xs) == 1:
        return xs[0]
    mid = len(xs) // 2
    return operation(_reduce_halves(xs[:mid], operation), _reduce_halves(xs[mid:], operation))


def tree_all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    return all(tree_leaves(tree, is_leaf=is_leaf))


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
                   pytree_to_transpose: Any) -> Any:
    """Turns a tree of structure outer∘inner into one of structure inner∘outer."""
    if inner_treedef is None:
        inner_treedef = tree_structure(outer_treedef.flatten_up_to(pytree_to_transpose)[0])
    return transpose_flat(outer_treedef, inner_treedef, *tree_flatten(pytree_to_transpose))


def transpose_flat(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef, flat: list[Any],
                   treedef: PyTreeDef) -> Any:
    """tree_transpose of the tree that ``flat`` and ``treedef`` flatten."""
    inner_size, outer_size = inner_treedef.num_leaves, outer_treedef.num_leaves
    if treedef.num_leaves != inner_size * outer_size:
        raise TypeError(f"Mismatch\n{treedef}\n != \n{outer_treedef.compose(inner_treedef)}")
    rows = [flat[i * inner_size:(i + 1) * inner_size] for i in range(outer_size)]
    return inner_treedef.unflatten(outer_treedef.unflatten(col) for col in zip(*rows))


def broadcast_prefix(prefix_tree: Any, full_tree: Any,
                     is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """Each of ``full_tree``'s leaves' ``prefix_tree`` leaf (the one above it), in
    ``full_tree``'s leaf order. Nothing is unflattened, so a custom node whose
    constructor checks its fields (``jnp.asarray`` of them) is never built with
    placeholder leaves."""
    leaves: list[Any] = []
    prefix_leaves, prefix_def = tree_flatten(prefix_tree, is_leaf)
    try:
        subtrees = prefix_def.flatten_up_to(full_tree)
    except ValueError as e:
        err = next(_prefix_error((), prefix_tree, full_tree, is_leaf), None)
        raise (err("broadcast_prefix prefix_tree") if err is not None else e) from None
    for leaf, subtree in zip(prefix_leaves, subtrees):
        leaves.extend([leaf] * tree_structure(subtree).num_leaves)
    return leaves


def tree_broadcast(prefix_tree: Any, full_tree: Any,
                   is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``full_tree``'s structure with each leaf taken from ``prefix_tree``'s
    leaf above it."""
    return tree_structure(full_tree).unflatten(broadcast_prefix(prefix_tree, full_tree, is_leaf))


# --- structure-mismatch errors (messages as JAX's _prefix_error) -------------

def prefix_mismatch(name: str, prefix_tree: Any, full_tree: Any,
                    is_leaf: Callable[[Any], bool] | None = None) -> ValueError | None:
    """JAX's error for `name` (e.g. "in_axes") not being a tree prefix of `full_tree`, listing
    every mismatch; None when no mismatch is found."""
    errors = list(_prefix_error((), prefix_tree, full_tree, is_leaf))
    if not errors:
        return None
    details = "\n  ".join(e(name).args[0] for e in errors)
    return ValueError(f"{name} specification must be a tree prefix of the corresponding value; "
                      f"\n  Mismatch details ({len(errors)} found):\n  {details}")


def _child_keys(tree) -> tuple:
    return tuple(k for k, _ in flatten_one_level_with_keys(tree)[0])


def _prefix_error(key_path, prefix_tree, full_tree, is_leaf=None):
    """Yields functions building a ValueError for each place where
    ``prefix_tree`` is not a prefix of ``full_tree``."""
    if _is_strict_leaf(prefix_tree, is_leaf):
        return
    path = keystr(key_path)
    if type(prefix_tree) != type(full_tree):
        yield lambda name: ValueError(
            "pytree structure error: different types at key path\n"
            f"    {name}{path}\n"
            f"At that key path, the prefix pytree {name} has a subtree of type\n"
            f"    {type(prefix_tree)}\n"
            "but at the same key path the full pytree has a subtree of different type\n"
            f"    {type(full_tree)}.")
        return
    prefix_children, prefix_meta = flatten_one_level(prefix_tree)
    full_children, full_meta = flatten_one_level(full_tree)
    prefix_children, full_children = tuple(prefix_children), tuple(full_children)
    prefix_keys, full_keys = _child_keys(prefix_tree), _child_keys(full_tree)
    if isinstance(prefix_tree, (list, tuple)):
        if len(prefix_tree) != len(full_tree):
            ty = type(prefix_tree).__name__
            yield lambda name: ValueError(
                f"pytree structure error: different lengths of {ty} at key path\n"
                f"    {name}{path}\n"
                f"At that key path, the prefix pytree {name} has a subtree of type {ty} of "
                f"length {len(prefix_tree)}, but the full pytree has a subtree of the same "
                f"type but of length {len(full_tree)}.")
            return
    elif len(prefix_children) != len(full_children):
        try:
            diff = set(prefix_keys).symmetric_difference(full_keys)
        except TypeError:
            diff = None
        yield lambda name: ValueError(
            "pytree structure error: different numbers of pytree children at key path\n"
            f"    {name}{path}\n"
            f"At that key path, the prefix pytree {name} has a subtree of type\n"
            f"    {type(prefix_tree)}\n"
            f"with {len(prefix_children)} child keys\n"
            f"    {' '.join(str(k.key) for k in prefix_keys)}\n"
            "but at the same key path the full pytree has a subtree of the same type but "
            f"with {len(full_children)} child keys\n"
            f"    {' '.join(str(k.key) for k in full_keys)}\n"
            + ("" if diff is None else
               "so the symmetric difference on key sets is\n"
               f"    {' '.join(str(k.key) for k in diff)}"))
        return
    if prefix_meta != full_meta:
        prefix_str, full_str = str(prefix_meta), str(full_meta)
        meta_diff = textwrap.indent(
            "\n".join(difflib.ndiff(prefix_str.splitlines(), full_str.splitlines())), "    ")
        yield lambda name: ValueError(
            "pytree structure error: different pytree metadata at key path\n"
            f"    {name}{path}\n"
            f"At that key path, the prefix pytree {name} has a subtree of type\n"
            f"    {type(prefix_tree)}\n"
            "with metadata\n"
            f"    {prefix_str}\n"
            "but at the same key path the full pytree has a subtree of the same type but "
            "with metadata\n"
            f"    {full_str}\n"
            "so the diff in the metadata at these pytree nodes is\n"
            f"{meta_diff}")
        return
    for k, p, f in zip(prefix_keys, prefix_children, full_children):
        yield from _prefix_error((*key_path, k), p, f, is_leaf)


# --- registration -------------------------------------------------------------

def _register(cls: type, kind) -> None:
    if cls in _kinds:
        raise ValueError(f"Duplicate custom PyTreeDef type registration for {cls}.")
    _kinds[cls] = kind


def register_pytree_node(nodetype: type[T],
                         flatten_func: Callable[[T], tuple[Iterable[Any], Hashable]],
                         unflatten_func: Callable[[Hashable, Iterable[Any]], T],
                         flatten_with_keys_func: Callable | None = None) -> None:
    """Makes ``nodetype`` a pytree node: ``flatten_func(x) -> (children, aux)``,
    ``unflatten_func(aux, children) -> x``; aux is part of the treedef."""
    _register(nodetype, _CustomKind(nodetype, flatten_func, unflatten_func,
                                    flatten_with_keys_func))


def register_pytree_node_class(cls: Typ) -> Typ:
    """Class decorator using the class's ``tree_flatten`` method and
    ``tree_unflatten`` classmethod."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys(
        nodetype: type[T],
        flatten_with_keys: Callable[[T], tuple[Iterable[tuple[Any, Any]], Hashable]],
        unflatten_func: Callable[[Hashable, Iterable[Any]], T],
        flatten_func: Callable[[T], tuple[Iterable[Any], Hashable]] | None = None) -> None:
    """Like register_pytree_node, with a flatten that names each child's key."""
    if not flatten_func:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_with_keys_class(cls: Typ) -> Typ:
    flatten = (lambda x: x.tree_flatten()) if hasattr(cls, "tree_flatten") else None
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(), cls.tree_unflatten,
                              flatten)
    return cls


def register_dataclass(nodetype: Typ, data_fields: Sequence[str] | None = None,
                       meta_fields: Sequence[str] | None = None,
                       drop_fields: Sequence[str] = ()) -> Typ:
    """Makes a dataclass a pytree node. Data fields are children; meta fields
    (by default those declared with ``field(metadata={"static": True})``) are
    static: their values are part of the treedef and must be hashable."""
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError("register_dataclass: data_fields and meta_fields must both be "
                            "specified when either is specified. Got "
                            f"{data_fields=} {meta_fields=}.")
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError("register_dataclass: data_fields and meta_fields are required "
                            f"when nodetype is not a dataclass. Got {nodetype=}.")
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)

    if dataclasses.is_dataclass(nodetype):
        init_fields = {f.name for f in dataclasses.fields(nodetype) if f.init}
        init_fields.difference_update(drop_fields)
        if {*meta_fields, *data_fields} != init_fields:
            msg = ("data_fields and meta_fields must include all dataclass fields with "
                   "``init=True`` and only them.")
            if missing := init_fields - {*meta_fields, *data_fields}:
                msg += (f" Missing fields: {missing}. Add them to drop_fields to suppress "
                        "this error.")
            if unexpected := {*meta_fields, *data_fields} - init_fields:
                msg += f" Unexpected fields: {unexpected}."
            raise ValueError(msg)
    if overlap := set(data_fields) & set(meta_fields):
        raise ValueError(
            f"data_fields and meta_fields must not overlap. Overlapping fields: {overlap}.")
    if nodetype in _kinds:
        raise ValueError(f"Duplicate custom dataclass PyTreeDef type registration for {nodetype}.")
    _kinds[nodetype] = _DataclassKind(nodetype, data_fields, meta_fields)
    return nodetype


def register_static(cls: Typ) -> Typ:
    """Makes instances of ``cls`` leafless nodes whose value is in the treedef."""
    register_pytree_with_keys(cls, lambda x: ((), x), lambda x, _: x)
    return cls


def static(**kwargs):
    """A dataclasses.field marked static for register_dataclass (``jax.tree.static``)."""
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return dataclasses.field(metadata=metadata, **kwargs)


register_pytree_with_keys(
    collections.OrderedDict,
    lambda x: (tuple((DictKey(k), v) for k, v in x.items()), tuple(x)),
    lambda keys, values: collections.OrderedDict(zip(keys, values)),
)


def _flatten_defaultdict_with_keys(d):
    keys = _sorted_keys(d)
    return tuple((DictKey(k), d[k]) for k in keys), (d.default_factory, keys)


register_pytree_with_keys(
    collections.defaultdict,
    _flatten_defaultdict_with_keys,
    lambda data, values: collections.defaultdict(data[0], zip(data[1], values)),
)


# --- Partial ------------------------------------------------------------------

class _HashableCallableShim:
    """Delegates calls, hashing and equality to a wrapped functools.partial."""

    def __init__(self, fun):
        self.fun = fun

    def __call__(self, *args, **kw):
        return self.fun(*args, **kw)

    def __hash__(self):
        return hash(self.fun)

    def __eq__(self, other):
        if isinstance(other, _HashableCallableShim):
            return self.fun == other.fun
        return self.fun == other

    def __repr__(self):
        return f"_HashableCallableShim({self.fun!r})"


class Partial(functools.partial):
    """functools.partial that is a pytree: the bound arguments are children,
    the function is static (part of the treedef)."""

    def __new__(klass, func, *args, **kw):
        # functools.partial flattens a partial of a partial into one; box the
        # inner one so only the arguments given here become pytree children.
        if isinstance(func, functools.partial):
            original = func
            func = _HashableCallableShim(original)
            out = super().__new__(klass, func, *args, **kw)
            func.func, func.args, func.keywords = original.func, original.args, original.keywords
            return out
        return super().__new__(klass, func, *args, **kw)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, xs: Partial(func, *xs[0], **xs[1]),
)

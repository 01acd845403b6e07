"""Pytrees: meshsim.tree_util / meshsim.tree against JAX's semantics.

The first half checks documented behaviour directly; the second half (marked
``jax``) compares with the installed JAX on many tree shapes.
"""
import collections
import dataclasses
import functools
import inspect
import pickle

import numpy as np
import pytest

import meshsim.tree as mtree
import meshsim.tree_util as tu

Point = collections.namedtuple("Point", "x y")


class SubPoint(Point):
    pass


class PartitionSpec(tuple):
    """Stands in for meshsim's PartitionSpec: a tuple subclass, so a leaf."""


class Box:
    """Custom node registered with flatten/unflatten functions; ``meta`` is aux data."""

    def __init__(self, a, b, meta=None):
        self.a, self.b, self.meta = a, b, meta

    def __eq__(self, other):
        return type(other) is Box and (self.a, self.b, self.meta) == (other.a, other.b, other.meta)

    def __repr__(self):
        return f"Box({self.a!r}, {self.b!r}, {self.meta!r})"


def _box_flatten(box):
    return (box.a, box.b), box.meta


def _box_unflatten(meta, children):
    return Box(*children, meta)


class KeyedBox(Box):
    """Custom node registered with keys, so paths name its children."""


def _keyed_flatten(box):
    return ((tu.GetAttrKey("a"), box.a), (tu.GetAttrKey("b"), box.b)), box.meta


def _keyed_unflatten(meta, children):
    return KeyedBox(*children, meta)


class Pair:
    """Custom node registered with register_pytree_node_class (in each library)."""

    def __init__(self, first, second):
        self.first, self.second = first, second

    def tree_flatten(self):
        return (self.first, self.second), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)

    def __eq__(self, other):
        return type(other) is Pair and (self.first, self.second) == (other.first, other.second)

    def __repr__(self):
        return f"Pair({self.first!r}, {self.second!r})"


@dataclasses.dataclass
class Linear:
    w: object
    b: object
    activation: str = dataclasses.field(default="relu", metadata={"static": True})


tu.register_pytree_node(Box, _box_flatten, _box_unflatten)
tu.register_pytree_with_keys(KeyedBox, _keyed_flatten, _keyed_unflatten)
tu.register_pytree_node_class(Pair)
tu.register_dataclass(Linear)


# --- behaviour ----------------------------------------------------------------

def test_builtin_nodes_flatten_in_jax_order():
    leaves, treedef = tu.tree_flatten((1, {"b": 2, "a": [3, None, 4]}))
    assert leaves == [1, 3, 4, 2]  # dict keys sorted
    assert repr(treedef) == "PyTreeDef((*, {'a': [*, None, *], 'b': *}))"
    assert treedef.num_leaves == 4
    assert treedef.num_nodes == 8
    assert [repr(c) for c in treedef.children()] == [
        "PyTreeDef(*)", "PyTreeDef({'a': [*, None, *], 'b': *})"]
    assert tu.tree_unflatten(treedef, [5, 6, 7, 8]) == (5, {"a": [6, None, 7], "b": 8})


def test_none_is_an_empty_node_unless_is_leaf_says_otherwise():
    assert tu.tree_leaves([None, 1]) == [1]
    assert repr(tu.tree_structure(None)) == "PyTreeDef(None)"
    assert tu.tree_leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]
    assert tu.tree_map(lambda x: x + 1, [1, None, 2]) == [2, None, 3]


def test_ordered_dict_keeps_insertion_order_and_defaultdict_its_factory():
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    leaves, treedef = tu.tree_flatten(od)
    assert leaves == [1, 2]
    assert list(tu.tree_unflatten(treedef, leaves)) == ["b", "a"]
    assert treedef != tu.tree_structure(collections.OrderedDict([("a", 1), ("b", 2)]))
    assert treedef != tu.tree_structure({"b": 1, "a": 2})

    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    leaves, treedef = tu.tree_flatten(dd)
    assert leaves == [2, 1]
    back = tu.tree_unflatten(treedef, leaves)
    assert type(back) is collections.defaultdict and back.default_factory is list
    assert back == dd


def test_only_exact_builtin_types_and_namedtuples_are_nodes():
    assert tu.tree_leaves(PartitionSpec(("dp", None))) == [PartitionSpec(("dp", None))]
    assert tu.tree_leaves({"w": PartitionSpec(("dp",))}) == [PartitionSpec(("dp",))]

    class MyList(list):
        pass

    class MyDict(dict):
        pass

    assert tu.tree_leaves(MyList([1, 2])) == [MyList([1, 2])]
    assert tu.tree_leaves(MyDict(a=1)) == [MyDict(a=1)]
    assert repr(tu.tree_structure(Point(1, [2]))) == \
        "PyTreeDef(CustomNode(namedtuple[Point], [*, [*]]))"
    assert tu.tree_unflatten(tu.tree_structure(SubPoint(1, 2)), [3, 4]) == SubPoint(3, 4)
    assert type(tu.tree_map(lambda x: x, SubPoint(1, 2))) is SubPoint


def test_unflatten_checks_the_leaf_count():
    treedef = tu.tree_structure((1, 2))
    with pytest.raises(ValueError, match=r"^Too few leaves for PyTreeDef; expected 2, got 1$"):
        treedef.unflatten([1])
    with pytest.raises(ValueError, match=r"^Too many leaves for PyTreeDef; expected 2\.$"):
        tu.tree_unflatten(treedef, [1, 2, 3])
    assert treedef.unflatten(iter([1, 2])) == (1, 2)


def test_tree_map_over_several_trees_and_mismatches():
    assert tu.tree_map(lambda a, b: a + b, {"x": [1, 2]}, {"x": [10, 20]}) == {"x": [11, 22]}
    # The first tree's leaves may stand for whole subtrees of the others.
    assert tu.tree_map(lambda a, b: (a, b), (1, 2), ([3], {"k": 4})) == ((1, [3]), (2, {"k": 4}))
    with pytest.raises(ValueError, match=r"different lengths of tuple at key path\n"
                                         r"    tree_map tree\['a'\]\[1\]"):
        tu.tree_map(lambda a, b: a, {"a": [1, (2, 3)]}, {"a": [1, (2,)]})
    with pytest.raises(ValueError, match="different types at key path"):
        tu.tree_map(lambda a, b: a, (1, 2), [1, 2])
    with pytest.raises(ValueError, match="different pytree metadata"):
        tu.tree_map(lambda a, b: a, {"a": 1}, {"b": 1})
    with pytest.raises(ValueError, match="different types at key path"):
        tu.tree_map(lambda a, b: a, [None, 1], [2, 1])


def test_treedefs_are_hashable_cache_keys():
    a = tu.tree_structure({"b": 1, "a": (2, 3)})
    b = tu.tree_structure({"a": (0, 0), "b": 0})
    assert a == b and hash(a) == hash(b)
    assert a != tu.tree_structure({"a": (2, 3), "c": 1})
    assert a != tu.tree_structure({"a": [2, 3], "b": 1})
    assert tu.tree_structure(None) != tu.tree_structure(1)
    assert tu.tree_structure(1) != 1
    cache = {a: "hit"}
    assert cache[b] == "hit"
    # Unhashable aux data is allowed (as in JAX) and still gives a usable hash.
    unhashable = tu.tree_structure(Box(1, 2, ["m"]))
    assert hash(unhashable) == hash(tu.tree_structure(Box(3, 4, ["m"])))
    assert unhashable != tu.tree_structure(Box(1, 2, ["n"]))


def test_custom_nodes():
    box = Box(1, [2, 3], ("m", 1))
    leaves, treedef = tu.tree_flatten(box)
    assert leaves == [1, 2, 3]
    assert repr(treedef) == "PyTreeDef(CustomNode(Box[('m', 1)], [*, [*, *]]))"
    assert treedef.node_data() == (Box, ("m", 1))
    assert tu.tree_unflatten(treedef, [4, 5, 6]) == Box(4, [5, 6], ("m", 1))
    assert treedef != tu.tree_structure(Box(1, [2, 3], "other"))
    assert tu.tree_map(lambda x: x * 2, Pair(1, (2,))) == Pair(2, (4,))
    with pytest.raises(ValueError, match="Duplicate custom PyTreeDef type registration"):
        tu.register_pytree_node(Box, _box_flatten, _box_unflatten)
    with pytest.raises(ValueError, match="Duplicate custom PyTreeDef type registration"):
        tu.register_pytree_node(tuple, lambda t: (t, None), lambda _, c: tuple(c))


def test_custom_flatten_must_return_children_and_aux():
    class Bad:
        pass

    tu.register_pytree_node(Bad, lambda x: [1, 2, 3], lambda aux, c: Bad())
    with pytest.raises(ValueError, match=r"should return a \(children, aux_data\) tuple"):
        tu.tree_flatten(Bad())


def test_dataclass_static_field_is_in_the_treedef():
    layer = Linear(w=np.ones(2), b=[3.0], activation="gelu")
    leaves, treedef = tu.tree_flatten(layer)
    assert len(leaves) == 2 and leaves[1] == 3.0  # the static field is not a leaf
    assert repr(treedef) == "PyTreeDef(CustomNode(Linear[('gelu',)], [*, [*]]))"
    back = tu.tree_unflatten(treedef, leaves)
    assert type(back) is Linear and back.activation == "gelu" and back.b == [3.0]
    assert treedef != tu.tree_structure(Linear(w=np.ones(2), b=[3.0], activation="relu"))
    assert treedef == tu.tree_structure(Linear(w=0, b=[0], activation="gelu"))
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(layer)] == [".w", ".b[0]"]
    with pytest.raises(ValueError, match="Mismatch custom dataclass node data"):
        treedef.flatten_up_to(Linear(w=1, b=[2], activation="relu"))


def test_register_dataclass_with_explicit_fields_and_tree_static():
    @functools.partial(tu.register_dataclass, data_fields=["y", "x"], meta_fields=["tag"])
    @dataclasses.dataclass
    class Explicit:
        x: int
        y: int
        tag: str

    @tu.register_dataclass
    @dataclasses.dataclass
    class WithStatic:
        x: int
        name: str = mtree.static(default="n")

    assert tu.tree_leaves(Explicit(1, 2, "t")) == [2, 1]
    assert tu.tree_leaves(WithStatic(1)) == [1]
    assert tu.tree_structure(WithStatic(1)).node_data() == (WithStatic, ("n",))


def test_register_dataclass_errors():
    @dataclasses.dataclass
    class DC:
        x: int
        y: int

    with pytest.raises(TypeError, match="must both be specified"):
        tu.register_dataclass(DC, data_fields=["x"])
    with pytest.raises(TypeError, match="are required when nodetype is not a dataclass"):
        tu.register_dataclass(type("NotDC", (), {}))
    with pytest.raises(ValueError, match=r"Missing fields: \{'y'\}"):
        tu.register_dataclass(DC, data_fields=["x"], meta_fields=[])
    with pytest.raises(ValueError, match="must not overlap"):
        tu.register_dataclass(DC, data_fields=["x", "y"], meta_fields=["x"])
    tu.register_dataclass(DC)
    with pytest.raises(ValueError, match="Duplicate custom dataclass PyTreeDef"):
        tu.register_dataclass(DC)


def test_key_paths_and_keystr():
    tree = {"a": [1, (2, None)], "b": Point(3, 4), "c": Box(5, 6), "d": KeyedBox(7, 8)}
    paths = [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(tree)]
    assert paths == ["['a'][0]", "['a'][1][0]", "['b'].x", "['b'].y",
                     "['c'][<flat index 0>]", "['c'][<flat index 1>]", "['d'].a", "['d'].b"]
    (path, leaf), = tu.tree_leaves_with_path({1: [None, "v"]})
    assert path == (tu.DictKey(1), tu.SequenceKey(1)) and leaf == "v"
    assert tu.keystr(path) == "[1][1]"
    assert tu.keystr(path, simple=True, separator="/") == "1/1"
    assert repr(tu.GetAttrKey("w")) == "GetAttrKey(name='w')"
    assert tu.SequenceKey(0) != tu.FlattenedIndexKey(0)
    out = tu.tree_map_with_path(lambda p, x, y: (tu.keystr(p), x + y), {"k": [1]}, {"k": [2]})
    assert out == {"k": [("['k'][0]", 3)]}
    leaves, treedef = tu.tree_flatten_with_path(
        {"a": [1, 2], "b": [3]}, is_leaf=lambda p, x: p == (tu.DictKey("a"),),
        is_leaf_takes_path=True)
    assert [x for _, x in leaves] == [[1, 2], 3]
    assert repr(treedef) == "PyTreeDef({'a': *, 'b': [*]})"


def test_partial_is_a_pytree():
    add = tu.Partial(lambda a, b, scale=1: (a + b) * scale, 1, scale=3)
    leaves, treedef = tu.tree_flatten(add)
    assert leaves == [1, 3]
    rebuilt = tu.tree_unflatten(treedef, [10, 2])
    assert isinstance(rebuilt, functools.partial) and rebuilt(5) == 30
    # A partial of a partial keeps only the outer arguments as children.
    nested = tu.Partial(functools.partial(max, 5), 1)
    assert tu.tree_leaves(nested) == [1] and nested(7) == 7


def test_reductions_and_helpers():
    tree = [1, (2, {"a": 3})]
    assert tu.tree_reduce(lambda a, b: a + b, tree) == 6
    assert tu.tree_reduce(lambda a, b: a + b, [], 10) == 10
    assert tu.tree_reduce_associative(lambda a, b: a + b, tree) == 6
    with pytest.raises(TypeError, match="Must specify identity"):
        tu.tree_reduce_associative(lambda a, b: a + b, [])
    assert tu.tree_all([True, (1, {"a": 2})]) and not tu.tree_all([1, 0])
    assert tu.all_leaves([1, "x"]) and not tu.all_leaves([1, None])
    assert tu.all_leaves([(1,)], is_leaf=lambda x: isinstance(x, tuple))
    assert tu.is_tree_node(Point) and tu.is_tree_node(type(None)) and not tu.is_tree_node(int)
    assert tu.treedef_is_leaf(tu.tree_structure(1)) and tu.treedef_is_leaf(tu.tree_structure(None))
    assert tu.treedef_tuple([tu.tree_structure(1), tu.tree_structure([2])]) == \
        tu.tree_structure((0, [0]))
    assert tu.tree_transpose(tu.tree_structure([0, 0]), tu.tree_structure((0, 0)),
                             [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    assert tu.tree_broadcast([1, 2], [[3, 4], {"a": 5}]) == [[1, 1], {"a": 2}]
    assert tu.flatten_one_level({"b": [1], "a": 2}) == ((2, [1]), ("a", "b"))
    with pytest.raises(ValueError, match="can't tree-flatten type"):
        tu.flatten_one_level(1)


def test_treedef_pickles():
    treedef = tu.tree_structure({"a": [1, None], "p": Point(1, 2), "c": Box(1, 2, "m")})
    assert pickle.loads(pickle.dumps(treedef)) == treedef


def test_tree_namespace():
    tree = {"a": [1, 2], "b": (3,)}
    assert mtree.map(lambda x: x * 10, tree) == {"a": [10, 20], "b": (30,)}
    assert mtree.leaves(tree) == [1, 2, 3]
    leaves, treedef = mtree.flatten(tree)
    assert mtree.unflatten(treedef, leaves) == tree
    assert mtree.structure(tree) == treedef
    assert mtree.reduce(lambda a, b: a + b, tree) == 6
    assert mtree.all(tree)
    assert [tu.keystr(p) for p, _ in mtree.leaves_with_path(tree)] == \
        ["['a'][0]", "['a'][1]", "['b'][0]"]
    assert mtree.map_with_path(lambda p, x: len(p), tree) == {"a": [2, 2], "b": (2,)}
    assert mtree.transpose(mtree.structure([0, 0]), None, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])


# --- against JAX --------------------------------------------------------------

TREES = [
    1, None, (), [], {}, (1,), [1, None, 2], {"b": 1, "a": (2, 3)}, (1, {"a": 2}),
    [[]], ((),), {"a": None}, {1: "x", 2: "y"}, {(1, "a"): 1, (0, "b"): 2}, "s",
    np.arange(3), Point(1, [2, None]), SubPoint(None, 3), PartitionSpec(("dp", None)),
    collections.OrderedDict([("b", 1), ("a", [2])]),
    collections.defaultdict(int, {"b": 1, "a": 2}),
    Box(1, [2, 3], ("m", 1)), Box(None, (), "s"), KeyedBox({"k": 1}, 2),
    Pair(1, {"z": [2]}),
    Linear(w=1.0, b=[2.0, 3.0], activation="gelu"),
    {"params": [Linear(w=1, b=2), Linear(w=3, b=None)], "opt": (Point(1, 2), None)},
]

MISMATCHED = [
    ((1, 2), (1, 2, 3)),
    ((1, 2), [1, 2]),
    ({"a": 1}, {"b": 1}),
    ({"a": {"x": 1}}, {"a": {"x": 1, "y": 2}}),
    ({"a": [1, (2, 3)]}, {"a": [1, (2,)]}),
    ([None, 2], [1, 3]),
    (Point(1, 2), (1, 2)),
    ([Box(1, 2, "m")], [Box(1, 2, "n")]),
    (Linear(1, 2, "relu"), Linear(1, 2, "gelu")),
    (collections.OrderedDict(a=1), collections.OrderedDict(b=1)),
    ({"a": 1}, {1: 1, "a": 2}),
]


@pytest.fixture(scope="module")
def jtu(real_jax):
    """JAX's tree_util, with this file's custom node types registered in it too."""
    jtu = real_jax.tree_util
    if not jtu.is_tree_node(Box):
        jtu.register_pytree_node(Box, _box_flatten, _box_unflatten)
        jtu.register_pytree_with_keys(KeyedBox, _keyed_flatten_jax, _keyed_unflatten)
        jtu.register_pytree_node_class(Pair)
        jtu.register_dataclass(Linear)
    return jtu


def _keyed_flatten_jax(box):
    from jax.tree_util import GetAttrKey
    return ((GetAttrKey("a"), box.a), (GetAttrKey("b"), box.b)), box.meta


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the oracle's exception type is part of the comparison
        return type(e), str(e)
    return None


@pytest.mark.jax
@pytest.mark.parametrize("tree", TREES, ids=repr)
def test_flatten_matches_jax(jtu, tree):
    leaves, treedef = tu.tree_flatten(tree)
    jleaves, jtreedef = jtu.tree_flatten(tree)
    assert len(leaves) == len(jleaves) and all(a is b for a, b in zip(leaves, jleaves))
    assert repr(treedef) == repr(jtreedef)
    assert (treedef.num_leaves, treedef.num_nodes) == (jtreedef.num_leaves, jtreedef.num_nodes)
    assert [repr(c) for c in treedef.children()] == [repr(c) for c in jtreedef.children()]
    assert treedef.node_data() == jtreedef.node_data()
    marks = [f"leaf{i}" for i in range(len(leaves))]
    assert repr(treedef.unflatten(marks)) == repr(jtreedef.unflatten(marks))
    assert repr(tu.tree_map(str, tree)) == repr(jtu.tree_map(str, tree))


@pytest.mark.jax
@pytest.mark.parametrize("tree", TREES, ids=repr)
def test_paths_match_jax(jtu, tree):
    ours = [(repr(p), tu.keystr(p), tu.keystr(p, simple=True, separator="/"), x)
            for p, x in tu.tree_leaves_with_path(tree)]
    theirs = [(repr(p), jtu.keystr(p), jtu.keystr(p, simple=True, separator="/"), x)
              for p, x in jtu.tree_leaves_with_path(tree)]
    assert [o[:3] for o in ours] == [t[:3] for t in theirs]
    assert all(o[3] is t[3] for o, t in zip(ours, theirs))


@pytest.mark.jax
def test_structure_equality_matches_jax(jtu):
    for a in TREES:
        for b in TREES:
            same = tu.tree_structure(a) == tu.tree_structure(b)
            assert same == (jtu.tree_structure(a) == jtu.tree_structure(b)), (a, b)
            if same:
                assert hash(tu.tree_structure(a)) == hash(tu.tree_structure(b))


@pytest.mark.jax
@pytest.mark.parametrize("a,b", MISMATCHED, ids=repr)
def test_mismatch_errors_match_jax(jtu, a, b):
    ours = _error(lambda: tu.tree_map(lambda *x: 0, a, b))
    assert ours is not None and ours == _error(lambda: jtu.tree_map(lambda *x: 0, a, b))
    assert _error(lambda: tu.tree_structure(a).flatten_up_to(b)) == \
        _error(lambda: jtu.tree_structure(a).flatten_up_to(b))
    assert _error(lambda: tu.tree_map_with_path(lambda *x: 0, a, b)) == \
        _error(lambda: jtu.tree_map_with_path(lambda *x: 0, a, b))


@pytest.mark.jax
def test_error_messages_match_jax(jtu):
    cases = [
        lambda m: m.tree_structure((1, 2)).unflatten([1]),
        lambda m: m.tree_structure((1, 2)).unflatten([1, 2, 3]),
        lambda m: m.tree_structure({"a": 1, 1: 2}),
        lambda m: m.tree_structure(None).flatten_up_to(1),
        lambda m: m.register_pytree_node(Box, _box_flatten, _box_unflatten),
        lambda m: m.tree_reduce(lambda a, b: a, []),
        lambda m: m.tree_broadcast([1, 2], [[3, 4]]),
        lambda m: m.tree_transpose(m.tree_structure([0, 0]), m.tree_structure((0, 0, 0)),
                                   [(1, 2), (3, 4)]),
    ]
    for case in cases:
        assert _error(lambda: case(tu)) == _error(lambda: case(jtu))


@pytest.mark.jax
def test_is_leaf_matches_jax(jtu):
    tree = {"a": [1, None, (2, 3)], "b": Point(None, [4])}
    for is_leaf in (lambda x: x is None, lambda x: isinstance(x, tuple),
                    lambda x: isinstance(x, list), lambda x: isinstance(x, dict)):
        leaves, treedef = tu.tree_flatten(tree, is_leaf=is_leaf)
        jleaves, jtreedef = jtu.tree_flatten(tree, is_leaf=is_leaf)
        assert repr(leaves) == repr(jleaves) and repr(treedef) == repr(jtreedef)
        assert repr(tu.tree_map(lambda *x: repr(x), tree, tree, is_leaf=is_leaf)) == \
            repr(jtu.tree_map(lambda *x: repr(x), tree, tree, is_leaf=is_leaf))
        assert tu.all_leaves([tree], is_leaf) == jtu.all_leaves([tree], is_leaf)


@pytest.mark.jax
def test_tree_namespace_matches_jax(real_jax, jtu):
    jtree = real_jax.tree
    for name in ("map", "leaves", "flatten", "unflatten", "structure", "all", "reduce",
                 "reduce_associative", "map_with_path", "flatten_with_path",
                 "leaves_with_path", "transpose", "broadcast"):
        ours = inspect.signature(getattr(mtree, name)).parameters
        theirs = inspect.signature(getattr(jtree, name)).parameters
        assert [(p.name, p.kind) for p in ours.values()] == \
            [(p.name, p.kind) for p in theirs.values()], name
    missing = {n for n in dir(jtu) if not n.startswith("_")} - set(dir(tu))
    assert missing == {"default_registry"}
    tree = {"x": [1, 2], "y": (3, Point(4, 5))}
    assert mtree.transpose(mtree.structure([0, 0, 0]), None, [(1, 2), (3, 4), (5, 6)]) == \
        jtree.transpose(jtree.structure([0, 0, 0]), None, [(1, 2), (3, 4), (5, 6)])
    assert mtree.broadcast({"x": 0, "y": 1}, tree) == jtree.broadcast({"x": 0, "y": 1}, tree)
    assert mtree.reduce_associative(lambda a, b: [a, b], tree) == \
        jtree.reduce_associative(lambda a, b: [a, b], tree)

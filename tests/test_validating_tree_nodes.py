"""Transformations broadcast an axis or sharding spec over an argument's pytree without
rebuilding its custom nodes from placeholders, as JAX does: a node whose constructor
converts its fields (`jnp.asarray(a)`) must not be handed a spec object. Its results
(values and shapes) are compared with JAX 0.10.2's."""
import numpy as np
import pytest

import meshsim
from outcomes import outcome

jax = pytest.importorskip("jax")


def _node_class(j):
    """A class registered with `j` whose constructor converts what it is given."""

    class Converting:
        def __init__(self, a, b):
            self.a = j.numpy.asarray(a)
            self.b = j.numpy.asarray(b)

    j.tree_util.register_pytree_node(
        Converting, lambda t: ((t.a, t.b), None), lambda _, children: Converting(*children))
    return Converting


NODES = {"meshsim": _node_class(meshsim), "jax": _node_class(jax)}


def _summary(tree):
    return [(np.asarray(x).shape, np.asarray(x).dtype.name, np.asarray(x).tolist())
            for x in (tree.a, tree.b)]


def _cases(j, Node, a, b):
    mesh = j.make_mesh((2,), ("x",), axis_types=(j.sharding.AxisType.Auto,))
    P = j.sharding.PartitionSpec
    node = Node(a, b)
    return {
        "vmap": lambda: j.vmap(lambda t: Node(t.a * 2, t.b + 1))(node),
        "vmap in_axes tuple": lambda: j.vmap(lambda t: t, in_axes=(0,))(node),
        "vmap out_axes 1": lambda: j.vmap(lambda t: Node(t.a, t.b), out_axes=1)(node),
        "vmap out_axes None": lambda: j.vmap(lambda t, x: Node(t, t), in_axes=(None, 0),
                                             out_axes=None)(a[0], b),
        "jit in_shardings": lambda: j.jit(lambda t: t, in_shardings=j.sharding.NamedSharding(
            mesh, P()))(node),
        "shard_map": lambda: j.shard_map(lambda t: Node(t.a + 1, t.b), mesh=mesh, in_specs=P("x"),
                                         out_specs=P("x"))(node),
        "pmap": lambda: j.pmap(lambda t: Node(t.a - 1, t.b))(Node(a[:2], b[:2])),
    }


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("case", ["vmap", "vmap in_axes tuple", "vmap out_axes 1", "vmap out_axes None",
                                  "jit in_shardings", "shard_map", "pmap"])
def test_custom_nodes_are_not_rebuilt_from_spec_placeholders(seed, case):
    rng = np.random.default_rng(seed)
    rows = 2 * int(rng.integers(1, 4))
    a = rng.standard_normal((rows, int(rng.integers(1, 4)))).astype(np.float32)
    b = rng.integers(-5, 5, size=(rows, 3)).astype(np.int32)

    def run(j):
        return _summary(_cases(j, NODES[j.__name__], a, b)[case]())

    result = outcome(run, meshsim)
    assert result[0] == "ok", result
    assert result == outcome(run, jax)

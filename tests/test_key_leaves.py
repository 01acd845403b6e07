"""Typed PRNG key arrays are pytree leaves, as in JAX: jax.tree_util stops at a key, and keys
pass through jit, vmap, scan, control flow, grad's aux output, shard_map, custom_vjp,
callbacks and device_put with the same values, shapes and types as under JAX."""
import numpy as np
import pytest

import meshsim


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


def _described(jax, tree):
    """Each leaf as plain data: a key as (dtype, shape, key data), an array as its values."""
    def leaf(x):
        if jax.numpy.issubdtype(np.result_type(x) if np.isscalar(x) else x.dtype, jax.dtypes.prng_key):
            return str(x.dtype), x.shape, np.asarray(jax.random.key_data(x)).tolist()
        return str(np.asarray(x).dtype), np.shape(x), np.asarray(x).round(5).tolist()
    return jax.tree.map(leaf, tree)


def _same(libs, program):
    ours, theirs = (program(jax) for jax in libs)
    assert _described(libs[0], ours) == _described(libs[1], theirs)
    return ours


@pytest.mark.parametrize("n", [1, 3, 6])
def test_tree_util_stops_at_keys(libs, n):
    results = []
    for jax in libs:
        keys = jax.random.split(jax.random.key(n), n)
        tree = {"k": keys, "x": [jax.random.key(0), 1.0], "n": None}
        leaves, treedef = jax.tree.flatten(tree)
        paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(tree)]
        rebuilt = jax.tree.unflatten(treedef, leaves)
        results.append((
            [getattr(x, "shape", x) for x in leaves], str(treedef), paths,
            jax.tree.map(lambda x: getattr(x, "ndim", -1), tree),
            jax.tree_util.tree_map_with_path(lambda p, x: len(p), tree),
            jax.tree_util.all_leaves([keys, keys[0]]),
            jax.tree_util.is_tree_node(type(keys)),
            jax.tree.structure(keys).num_leaves,
            jax.tree.reduce(lambda a, b: a + getattr(b, "size", 1), tree, 0),
            bool(jax.numpy.all(rebuilt["k"] == keys)),
            len(jax.tree.leaves(tree, is_leaf=lambda x: isinstance(x, list))),
        ))
        with pytest.raises(ValueError, match="can't tree-flatten type"):
            jax.tree_util.flatten_one_level(keys)
    assert results[0] == results[1]


def test_tree_transpose_of_keys(libs):
    def program(jax):
        k = jax.random.key(4)
        outer, inner = jax.tree.structure([0, 0]), jax.tree.structure((0, 0))
        return jax.tree.transpose(outer, inner, [(k, 1.0), (jax.random.fold_in(k, 1), 2.0)])
    _same(libs, program)


def test_keys_in_a_flax_style_state_map_to_their_shapes(libs):
    """jax.tree.map(jnp.shape, state) over a module state holding rng keys."""
    def program(jax):
        keys = jax.random.split(jax.random.key(1), 5)
        state = {"dropout": {"key": keys, "count": jax.numpy.zeros(5, np.uint32)},
                 "w": jax.numpy.ones((5, 3))}
        return jax.tree.map(jax.numpy.shape, state)
    ours, theirs = (program(jax) for jax in libs)
    assert ours == theirs


@pytest.mark.parametrize("n", [2, 5])
def test_keys_through_jit(libs, n):
    _same(libs, lambda jax: jax.jit(lambda t: (t, jax.random.split(t["k"][0], n)))(
        {"k": jax.random.split(jax.random.key(n), n), "x": jax.numpy.ones(2)}))


@pytest.mark.parametrize("in_axes,out_axes", [(0, 0), (0, 1), (0, -1), (-1, 0)])
def test_keys_through_vmap(libs, in_axes, out_axes):
    def program(jax):
        keys = jax.random.split(jax.random.key(2), 6).reshape(2, 3)
        per_row = jax.vmap(lambda k: (jax.random.split(k, 4), jax.random.normal(k, (2,))))
        return jax.vmap(per_row, in_axes=in_axes, out_axes=out_axes)(keys)
    _same(libs, program)


def test_unmapped_key_in_vmap(libs):
    _same(libs, lambda jax: jax.vmap(lambda k, x: (k, jax.random.normal(k, ()) + x), in_axes=(None, 0),
                                     out_axes=(None, 0))(jax.random.key(5), jax.numpy.arange(3.0)))


@pytest.mark.parametrize("jit", [False, True])
def test_keys_through_scan_and_control_flow(libs, jit):
    def program(jax):
        def body(key, k):
            key, sub = jax.random.split(key)
            return key, (jax.random.uniform(sub, ()), k)

        def run(key, keys):
            return (jax.lax.scan(body, key, keys),
                    jax.lax.fori_loop(0, 3, lambda i, k: jax.random.split(k)[0], key),
                    jax.lax.cond(keys.shape[0] > 2, lambda k: jax.random.split(k)[1], lambda k: k, key),
                    jax.lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, jax.random.fold_in(c[1], 7)),
                                       (0, key)))
        run = jax.jit(run) if jit else run
        return run(jax.random.key(3), jax.random.split(jax.random.key(4), 4))
    _same(libs, program)


def test_keys_as_grad_aux(libs):
    def program(jax):
        jnp = jax.numpy

        def loss(x, key):
            key, sub = jax.random.split(key)
            return jnp.sum(x * jax.random.normal(sub, x.shape)), {"key": key}
        x = jnp.linspace(-1.0, 1.0, 3)
        return (jax.grad(loss, has_aux=True)(x, jax.random.key(6)),
                jax.value_and_grad(loss, has_aux=True)(x, jax.random.key(7)),
                jax.jit(jax.grad(loss, has_aux=True))(x, jax.random.key(8)))
    _same(libs, program)


@pytest.mark.parametrize("jit", [False, True])
def test_keys_through_shard_map(libs, jit):
    def program(jax):
        P = jax.sharding.PartitionSpec
        mesh = jax.make_mesh((4,), ("x",))
        sharded = jax.sharding.NamedSharding(mesh, P("x"))
        keys = jax.device_put(jax.random.split(jax.random.key(9), 8), sharded)
        x = jax.device_put(jax.numpy.ones(8), sharded)

        def body(k, x):
            return jax.vmap(lambda kk: jax.random.split(kk)[0])(k), x + jax.random.normal(k[0], x.shape)
        f = jax.shard_map(body, mesh=mesh, in_specs=(P("x"), P("x")), out_specs=(P("x"), P("x")))
        out = (jax.jit(f) if jit else f)(keys, x)
        return out, str(jax.typeof(out[0])), str(out[0].sharding.spec)
    ours = _same(libs, lambda jax: program(jax)[0])
    assert program(libs[0])[1:] == program(libs[1])[1:]
    assert ours is not None


def test_keys_through_device_put_custom_vjp_and_callbacks(libs):
    def program(jax):
        jnp = jax.numpy
        P = jax.sharding.PartitionSpec
        mesh = jax.make_mesh((2,), ("x",))
        placed = jax.device_put({"k": jax.random.split(jax.random.key(1), 4)},
                                jax.sharding.NamedSharding(mesh, P("x")))

        @jax.custom_vjp
        def noisy(x, k):
            return x * jax.random.normal(k, x.shape)
        noisy.defvjp(lambda x, k: (noisy(x, k), k),
                     lambda k, g: (g * jax.random.normal(k, g.shape), None))
        grad = jax.grad(lambda x, k: noisy(x, k).sum())(jnp.ones(3), jax.random.key(2))
        seen = jax.jit(lambda k: jax.pure_callback(lambda kk: np.float32(kk.shape[0]),
                                                   jax.ShapeDtypeStruct((), jnp.float32), k))(
            jax.random.split(jax.random.key(0), 3))
        shapes = jax.eval_shape(lambda k: jax.random.split(k, 3), jax.random.key(0))
        return placed, grad, seen, jax.checkpoint(lambda k: jax.random.split(k))(jax.random.key(3)), \
            (str(shapes.dtype), shapes.shape), str(jax.typeof(placed["k"]))
    ours, theirs = (program(jax) for jax in libs)
    assert _described(libs[0], ours[:4]) == _described(libs[1], theirs[:4])
    assert ours[4:] == theirs[4:]

"""Generated bad (and borderline) inputs for the public API: shapes, axes,
indices, dtypes, pytrees, meshes, specs, collectives' axes and permutations,
jit's argnums, NaN/inf and 0-size values. Each case is code setting `out`;
runner.py runs it against JAX and meshsim."""
import itertools

ARRAYS = {
    "vec": "jnp.arange(4.0)",
    "mat": "jnp.ones((2, 3), jnp.float32)",
    "ivec": "jnp.arange(6, dtype=jnp.int32)",
    "empty": "jnp.zeros((0,), jnp.float32)",
    "scalar": "jnp.float32(2.5)",
}


def _reshape():
    shapes = ["(-2, 2)", "(2**62 + 1, 64)", "(3, 5)", "(-1, -1)", "(0, -1)", "(2**31, 2**31)",
              "(2.5, 2)", "('a',)", "(2**63,)", "(-1, 0)"]
    for a, s in itertools.product(["vec", "mat", "empty"], shapes):
        yield f"out = {ARRAYS[a]}.reshape{s}"


def _indexing():
    idx = ["2**31", "-2**31 - 1", "10", "-10", "1.5", "'a'", "(0, 0)", "None, 7", "..., ...",
           "[1.5]", "jnp.array([10])", "jnp.array(True)", "2**63", "[[0, 1], [2]]"]
    for a, i in itertools.product(["vec", "ivec", "empty"], idx):
        yield f"out = {ARRAYS[a]}[{i}]"


def _axes():
    funcs = ["jnp.sum", "jnp.mean", "jnp.max", "jnp.argmax", "jnp.cumsum", "jnp.sort",
             "jnp.flip", "jnp.expand_dims", "jnp.squeeze", "jnp.prod"]
    axes = ["5", "-3", "(0, 0)", "1.0", "'a'", "(0, 5)"]
    for f, ax in itertools.product(funcs, axes):
        yield f"out = {f}(jnp.ones((2, 3)), axis={ax})"


def _empty_reductions():
    for f in ["jnp.max", "jnp.min", "jnp.argmax", "jnp.argmin", "jnp.mean", "jnp.sum", "jnp.prod",
              "jnp.std", "jnp.median", "jnp.var", "jnp.nanmax", "jnp.ptp"]:
        yield f"out = {f}(jnp.zeros((0,), jnp.float32))"
        yield f"out = {f}(jnp.zeros((3, 0), jnp.float32), axis=1)"


def _nan_inf():
    vals = ["jnp.array([1.0, jnp.nan, 3.0])", "jnp.array([jnp.inf, -jnp.inf, 0.0])",
            "jnp.array([jnp.nan, jnp.nan])"]
    for v, f in itertools.product(vals, ["jnp.max", "jnp.min", "jnp.argmax", "jnp.argmin",
                                         "jnp.sort", "jnp.argsort", "jnp.cumsum", "jnp.unique",
                                         "jnp.clip", "jnp.sign"]):
        yield f"out = {f}({v})"


def _creation():
    calls = ["jnp.zeros(-1)", "jnp.zeros((2, -3))", "jnp.ones(3.5)", "jnp.ones((2, 'a'))",
             "jnp.arange(0, 10, 0)", "jnp.arange(5, dtype=object)", "jnp.linspace(0, 1, num=-1)",
             "jnp.eye(-1)", "jnp.eye(2, k=1.5)", "jnp.full((2,), 'a')", "jnp.full((-1,), 1.0)",
             "jnp.zeros((2,), dtype='complex64')", "jnp.zeros((2,), dtype=object)",
             "jnp.array([1, 'a'])", "jnp.array(2**40)", "jnp.array([2**31])", "jnp.array(-2**63 - 1)",
             "jnp.array(np.array([1, 2], dtype=object))", "jnp.array({'a': 1})", "jnp.array(None)",
             "jnp.asarray(np.ma.array([1.0, 2.0], mask=[0, 1]))", "jnp.array([[1, 2], [3]])",
             "jnp.array(np.array(['a', 'b']))", "jnp.tri(-1)", "jnp.identity(-2)",
             "jnp.zeros((), dtype='int128')", "jnp.empty((2**62 + 1, 64))",
             "jnp.histogram(jnp.arange(5.0), bins=-1)", "jnp.histogram(jnp.arange(5.0), bins=0)",
             "jnp.histogram(jnp.arange(5.0), bins=2.5)", "jnp.bincount(jnp.array([-1, 2]))",
             "jnp.bincount(jnp.array([1.0, 2.0]))", "jnp.arange(1e20)", "jnp.ones((2,), dtype='float128')"]
    for c in calls:
        yield f"out = {c}"


def _structural():
    calls = ["jnp.concatenate([jnp.ones((2, 3)), jnp.ones((3, 2))])", "jnp.concatenate([])",
             "jnp.stack([])", "jnp.stack([jnp.ones(2), jnp.ones(3)])", "jnp.split(jnp.arange(5), 2)",
             "jnp.split(jnp.arange(6), 0)", "jnp.transpose(jnp.ones((2, 3)), (0, 0))",
             "jnp.transpose(jnp.ones((2, 3)), (0, 2))", "jnp.swapaxes(jnp.ones((2, 3)), 0, 5)",
             "jnp.moveaxis(jnp.ones((2, 3)), (0, 0), (1, 0))", "jnp.broadcast_to(jnp.ones(3), (2, 4))",
             "jnp.broadcast_to(jnp.ones(3), (-1, 3))", "jnp.tile(jnp.ones(2), -1)",
             "jnp.repeat(jnp.ones(3), -1)", "jnp.repeat(jnp.ones(3), jnp.array([1, 2]))",
             "jnp.pad(jnp.ones(3), -1)", "jnp.pad(jnp.ones(3), ((1, 2), (3, 4)))",
             "jnp.take(jnp.arange(5), jnp.array([7]), mode='raise')",
             "jnp.dot(jnp.ones((2, 3)), jnp.ones((2, 3)))", "jnp.matmul(jnp.float32(1), jnp.ones(3))",
             "jnp.einsum('ij,jk->ik', jnp.ones((2, 3)), jnp.ones((4, 5)))", "jnp.einsum('ii->i', jnp.ones((2, 3)))",
             "jnp.where(jnp.ones(3) > 0, jnp.ones(2), 0)", "jnp.roll(jnp.ones(3), 1, axis=4)",
             "jnp.diagonal(jnp.ones(3))", "jnp.trace(jnp.ones(3))", "jnp.linalg.inv(jnp.ones((2, 3)))",
             "jnp.linalg.solve(jnp.ones((2, 2)), jnp.ones(3))", "jnp.ones((2, 3)) + jnp.ones((3, 2))",
             "jnp.ones(3).astype(object)", "jnp.ones(3).astype('U3')", "lax.reshape(jnp.ones(4), (3,))",
             "lax.dynamic_slice(jnp.ones(4), (0,), (5,))", "lax.slice(jnp.ones(4), (3,), (1,))",
             "lax.dot_general(jnp.ones((2, 3)), jnp.ones((3, 2)), (((0,), (0,)), ((), ())))",
             "lax.broadcast_in_dim(jnp.ones(3), (4,), (0,))", "lax.concatenate([jnp.ones(2), jnp.ones((2, 2))], 0)",
             "lax.pad(jnp.ones(3), 0.0, [(1, 1, -1)])", "lax.conv_general_dilated(jnp.ones((1, 1, 3)), jnp.ones((1, 1, 4)), (1,), 'VALID')",
             "lax.sort(jnp.ones((2, 3)), dimension=3)", "lax.top_k(jnp.ones(3), 5)", "lax.top_k(jnp.ones(3), -1)",
             "jnp.ones(3) @ jnp.ones(4)", "jnp.argsort(jnp.ones(3), axis=2)", "jnp.cumsum(jnp.ones(3), dtype=object)"]
    for c in calls:
        yield f"out = {c}"


def _int_overflow():
    calls = ["jnp.sum(jnp.full((4,), 2**30, jnp.int32))", "jnp.cumsum(jnp.full((4,), 2**30, jnp.int32))",
             "jnp.prod(jnp.full((4,), 2**16, jnp.int32))", "jnp.array(2**31 - 1, jnp.int32) + 1",
             "jnp.abs(jnp.array(-2**31, jnp.int32))", "-jnp.array(-2**31, jnp.int32)",
             "jnp.array(-2**31, jnp.int32) // -1", "jnp.array(7, jnp.int32) // 0", "jnp.array(7, jnp.int32) % 0",
             "jnp.full((3,), 200, jnp.uint8) * 2", "jnp.sum(jnp.full((4,), 100, jnp.int8))",
             "jnp.array(2**31 - 1, jnp.int32) * 2"]
    for c in calls:
        yield f"out = {c}"


def _jit():
    calls = ["jax.jit(lambda x: x, static_argnums=3)(1.0)", "jax.jit(lambda x: x, static_argnums=-2)(1.0)",
             "jax.jit(lambda x: x, donate_argnums=2)(jnp.ones(2))", "jax.jit(lambda x: x, donate_argnums=-5)(jnp.ones(2))",
             "jax.jit(lambda x: x, static_argnums=0)(jnp.ones(2))", "jax.jit(lambda x: x, static_argnames='y')(1.0)",
             "jax.jit(lambda x: x, static_argnums=(0, 0))(1.0)", "jax.jit(lambda x: x, donate_argnums=0, static_argnums=0)(1.0)",
             "jax.jit(lambda x: x, static_argnums=1.5)(1.0)", "jax.jit(3)", "jax.jit(lambda x: x)(object())",
             "jax.jit(lambda x: x)('a')", "jax.jit(lambda x: x)(jnp.ones(2), 3)", "jax.jit(lambda x: int(x))(jnp.ones(()))",
             "jax.jit(lambda x: x if x > 0 else -x)(1.0)", "jax.jit(lambda x: jnp.zeros(x))(3)",
             "jax.grad(lambda x: x)(jnp.ones(2))", "jax.grad(lambda x: x.sum())(1)", "jax.grad(lambda x: x.sum(), argnums=3)(jnp.ones(2))",
             "jax.vmap(lambda x: x)(jnp.float32(1))", "jax.vmap(lambda x, y: x + y)(jnp.ones(2), jnp.ones(3))",
             "jax.vmap(lambda x: x, in_axes=2)(jnp.ones(3))", "jax.value_and_grad(lambda x: x)(jnp.ones(3))"]
    for c in calls:
        yield f"out = {c}"


def _trees():
    calls = ["jax.tree.map(lambda a, b: a + b, [1, 2], [1])", "jax.tree.map(lambda a, b: a + b, {'a': 1}, {'b': 1})",
             "jax.tree.map(lambda a, b: a + b, (1, 2), [1, 2])", "jax.tree.unflatten(jax.tree.structure([1, 2]), [1])",
             "jax.tree.leaves(None)", "jax.tree.map(lambda a: a, {1: 2, 'a': 3})"]
    for c in calls:
        yield f"out = {c}"


def _meshes():
    calls = ["jax.make_mesh((0, 8), ('x', 'y'))", "jax.make_mesh((3,), ('x',))", "jax.make_mesh((8,), ('x', 'y'))",
             "jax.make_mesh((16,), ('x',))", "jax.make_mesh((-8,), ('x',))", "jax.make_mesh((2, 4), ('x', 'x'))",
             "Mesh(np.array(jax.devices()[:2] * 2), ('x',))", "Mesh(np.array(jax.devices()), ('x', 'y'))",
             "Mesh(np.array(jax.devices()), (1,))", "Mesh(np.array([]), ('x',))",
             "NamedSharding(mesh8, P('y'))", "NamedSharding(mesh8, P('x', 'x'))",
             "jax.device_put(jnp.ones(3), NamedSharding(mesh8, P('x')))",
             "jax.device_put(jnp.ones((8, 2)), NamedSharding(mesh8, P(None, None, 'x')))",
             "jax.device_put(jnp.ones((8,)), NamedSharding(mesh42, P(('x', 'x'))))", "P('x', 'x')"]
    for c in calls:
        yield f"out = {c}"


COLLECTIVES = {
    "psum": "lax.psum(a, {ax})", "pmax": "lax.pmax(a, {ax})", "pmin": "lax.pmin(a, {ax})",
    "pmean": "lax.pmean(a, {ax})", "all_gather": "lax.all_gather(a, {ax}, tiled=True)[:a.shape[0]]",
    "psum_scatter": "lax.psum_scatter(jnp.tile(a, (16, 1)), {ax}, tiled=True)[:a.shape[0]]",
    "all_to_all": "lax.all_to_all(jnp.tile(a, (16, 1)), {ax}, 0, 0, tiled=True)[:a.shape[0]]",
    "ppermute": "lax.ppermute(a, {ax}, [(0, 1)])", "axis_index": "a + lax.axis_index({ax})",
}


def _shard(body, x="jnp.arange(16.0).reshape(8, 2)", mesh="mesh42", in_specs="P('x')", out_specs="P('x')",
           jit=True):
    sm = f"shard_map(lambda a: {body}, mesh={mesh}, in_specs={in_specs}, out_specs={out_specs})"
    return f"out = {'jax.jit(' + sm + ')' if jit else sm}({x})"


def _collectives():
    axes = ["('x', 'x')", "('y', 'y')", "'z'", "('x', 'z')", "()", "0"]
    for (name, tmpl), ax in itertools.product(COLLECTIVES.items(), axes):
        yield _shard(tmpl.format(ax=ax))
    perms = ["[(0.0, 1.0)]", "[('a', 'b')]", "[(0, 4)]", "[(0, 1), (0, 2)]", "[(0, 1), (1, 1)]", "[(-1, 0)]",
             "[(0, 1, 2)]", "[0, 1]", "((0, 1),)", "[(True, False)]", "[]"]
    for p, jit in itertools.product(perms, [True, False]):
        yield _shard(f"lax.ppermute(a, 'x', {p})", jit=jit)
    nan_x = "jnp.array([1.0, jnp.nan, 3.0, 4.0, jnp.nan, 0.0, -jnp.inf, 2.0]).reshape(8, 1)"
    for name in ["pmax", "pmin", "psum", "pmean"]:
        yield _shard(f"lax.{name}(a, 'x')", x=nan_x, mesh="mesh8", out_specs="P()")
    yield _shard("lax.psum(a, 'x')", x="jnp.full((8, 1), 2**30, jnp.int32)", mesh="mesh8", out_specs="P()")
    yield _shard("lax.pmax(a, 'x')", x="jnp.zeros((0, 2))", mesh="mesh8", out_specs="P()")
    yield _shard("lax.psum(a, 'x')", x="jnp.zeros((8, 0))", mesh="mesh8", out_specs="P()")


def _specs():
    cases = [dict(in_specs="[P('x')]"), dict(in_specs="P('z')"), dict(in_specs="P('x', 'x')"),
             dict(in_specs="(P('x'), P('x'))"), dict(out_specs="[P('x')]"), dict(out_specs="P('z')"),
             dict(in_specs="P('x')", x="jnp.arange(6.0)"), dict(in_specs="P(None, 'x')"),
             dict(in_specs="P('x', None, None)"), dict(in_specs="'x'"), dict(in_specs="None"),
             dict(out_specs="P()"), dict(x="jnp.arange(16.0).reshape(8, 2)", in_specs="P(('x', 'y'))"),
             dict(x="(jnp.ones(8), jnp.ones(8))", in_specs="P('x')"), dict(mesh="None"),
             dict(in_specs="P(('x', 'x'))"), dict(x="1.0", in_specs="P()"), dict(x="'a'", in_specs="P()")]
    for c, jit in itertools.product(cases, [True, False]):
        yield _shard("a", jit=jit, **c)


def _random():
    calls = ["jax.random.normal(jax.random.key(0), (-1,))", "jax.random.normal(jax.random.key(0), (2,), dtype=jnp.int32)",
             "jax.random.randint(jax.random.key(0), (2,), 5, 1)", "jax.random.key(1.5)", "jax.random.key('a')",
             "jax.random.split(jax.random.key(0), -1)", "jax.random.choice(jax.random.key(0), 3, (5,), replace=False)",
             "jax.random.uniform(jax.random.key(0), (2,), minval=1.0, maxval=0.0)", "jax.random.permutation(jax.random.key(0), -3)",
             "jax.random.categorical(jax.random.key(0), jnp.zeros((0,)))", "jax.random.normal(jnp.ones(2), (2,))",
             "jax.random.bernoulli(jax.random.key(0), 2.0, (3,))"]
    for c in calls:
        yield f"out = {c}"


def all_cases() -> list[str]:
    out = []
    for gen in [_reshape, _indexing, _axes, _empty_reductions, _nan_inf, _creation, _structural, _int_overflow,
                _jit, _trees, _meshes, _collectives, _specs, _random]:
        out.extend(gen())
    return out


if __name__ == "__main__":
    print(len(all_cases()))

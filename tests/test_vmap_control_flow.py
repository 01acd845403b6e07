"""vmap of lax.cond, lax.while_loop and lax.fori_loop batched as JAX batches them:
a cond whose predicate differs per example computes both branches and selects, a
while_loop whose predicate differs per example runs until every example is done,
each keeping its carry once its own predicate fails. Printed jaxprs, values and
gradients against JAX over random shapes and in_axes."""
import itertools
import re
import zlib

import numpy as np
import pytest

import meshsim


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def _batched(rng, shape, axis, batch):
    if axis is not None:
        shape = shape[:axis] + (batch,) + shape[axis:]
    return (rng.standard_normal(shape)).astype(np.float32)


def _cond_fn(jax):
    jnp, lax = jax.numpy, jax.lax

    def f(p, x, w):
        return lax.cond(p > 0, lambda x, w: jnp.sin(x) * w, lambda x, w: x @ jnp.ones((x.shape[-1],) * 2) + 1.0,
                        x, w)
    return f


def _switch_fn(jax):
    jnp, lax = jax.numpy, jax.lax

    def f(i, x, w):
        return lax.switch(jnp.int32(i), [lambda x, w: x * w, lambda x, w: jnp.cos(x) - w,
                                         lambda x, w: x * 0.5 + 1.0], x, w)
    return f


def _while_fn(jax):
    jnp, lax = jax.numpy, jax.lax

    def f(limit, x, scale):
        def cond(c):
            i, v, _ = c
            return (i < 20) & (jnp.sum(jnp.abs(v)) < limit)

        def body(c):
            i, v, acc = c
            return i + 1, v * scale + 0.25, acc + jnp.sum(v)
        return lax.while_loop(cond, body, (0, x, 0.0))
    return f


def _fori_fn(jax):
    lax = jax.lax

    def f(n, x, w):
        return lax.fori_loop(0, n, lambda i, c: c * w + i, x)
    return f


def _scalar_args(rng, axis, batch, kind):
    if kind == "index":
        v = rng.integers(-1, 4, size=(batch,) if axis is not None else ())
        return v.astype(np.int32)
    if kind == "count":
        v = rng.integers(0, 6, size=(batch,) if axis is not None else ())
        return v.astype(np.int32)
    v = rng.standard_normal((batch,) if axis is not None else ()).astype(np.float32)
    return v * 8 + 6 if kind == "limit" else v


AXES = [a for a in itertools.product((None, 0), (None, 0, 1), (None, 0, 1)) if any(x is not None for x in a)]
FUNCTIONS = {"cond": (_cond_fn, "pred"), "switch": (_switch_fn, "index"), "while": (_while_fn, "limit"),
             "fori": (_fori_fn, "count")}


def _case(name, axes):
    rng = np.random.default_rng(_seed(name, axes))
    batch, d = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    rows = int(rng.integers(1, 4))
    fn, kind = FUNCTIONS[name]
    first = _scalar_args(rng, axes[0], batch, kind)
    x = _batched(rng, (rows, d), axes[1], batch)
    w = _batched(rng, (rows, d), axes[2], batch) * (0.5 if name != "cond" else 1.0)
    return fn, (first, x, w)


def _check_close(ours, theirs):
    ours, theirs = meshsim.tree_util.tree_leaves(ours), [np.asarray(t) for t in _leaves(theirs)]
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype, (a, b)
        np.testing.assert_allclose(np.asarray(a), b, rtol=1e-5, atol=1e-5)


def _leaves(tree):
    import jax
    return jax.tree_util.tree_leaves(tree)


@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_vmapped_control_flow_matches_jax(real_jax, name, axes):
    fn, args = _case(name, axes)
    ours = meshsim.vmap(fn(meshsim), in_axes=axes)(*args)
    theirs = real_jax.vmap(fn(real_jax), in_axes=axes)(*args)
    _check_close(ours, theirs)
    jitted = meshsim.jit(meshsim.vmap(fn(meshsim), in_axes=axes))(*args)
    _check_close(jitted, theirs)


# JAX gives an unbatched array operand of an elementwise op a batch dimension of
# size 1 (and a batched lower-rank one trailing dimensions of size 1) and relies
# on the op broadcasting size-1 dimensions, which our elementwise primitives do
# not: there we broadcast to the full batch, so the printed shapes differ. The
# jaxprs are compared where every array operand is batched; fori_loop's counter
# is such a lower-rank operand once the trip count is batched.
JAXPR_CASES = [(name, axes) for name in FUNCTIONS for axes in AXES
               if axes[1] is not None and axes[2] is not None and (name != "fori" or axes[0] is None)]


@pytest.mark.parametrize("name,axes", JAXPR_CASES, ids=str)
def test_vmapped_control_flow_prints_jaxs_jaxpr(real_jax, name, axes):
    fn, args = _case(name, axes)
    ours = str(meshsim.make_jaxpr(meshsim.vmap(fn(meshsim), in_axes=axes))(*args))
    theirs = str(real_jax.make_jaxpr(real_jax.vmap(fn(real_jax), in_axes=axes))(*args))
    assert _plain(ours) == _plain(theirs)


def _plain(text: str) -> str:
    """A jaxpr's text with NumPy integers printed as Python's (JAX's batching rules
    compute some params, e.g. reduce_sum's axes, as np.int64) and white space (the
    line breaks their longer text causes) removed."""
    return re.sub(r"\s+", "", re.sub(r"np\.int64\((-?\d+)\)", r"\1", text))


def test_batched_predicate_cond_is_a_select(real_jax):
    fn, args = _case("cond", (0, 0, None))
    text = str(meshsim.make_jaxpr(meshsim.vmap(fn(meshsim), in_axes=(0, 0, None)))(*args))
    assert "cond[" not in text and "select_n" in text and "stop_gradient" in text


def test_unbatched_predicate_keeps_one_cond(real_jax):
    fn, args = _case("cond", (None, 0, None))
    text = str(meshsim.make_jaxpr(meshsim.vmap(fn(meshsim), in_axes=(None, 0, None)))(*args))
    assert text.count("cond[") == 1 and "select_n" not in text


@pytest.mark.parametrize("axes", [(0, 0, None), (0, None, 0), (None, 0, 0), (0, 1, 1)], ids=str)
@pytest.mark.parametrize("name", ["cond", "switch"])
def test_gradients_through_vmapped_cond_match_jax(real_jax, name, axes):
    fn, args = _case(name, axes)

    def loss(jax):
        def f(x, w):
            return jax.numpy.sum(jax.vmap(fn(jax), in_axes=axes)(args[0], x, w) ** 2)
        return f
    ours = meshsim.grad(loss(meshsim), argnums=(0, 1))(args[1], args[2])
    theirs = real_jax.grad(loss(real_jax), argnums=(0, 1))(args[1], args[2])
    _check_close(ours, theirs)


@pytest.mark.parametrize("name", ["cond", "switch"])
def test_per_example_gradients_through_cond_match_jax(real_jax, name):
    fn, (first, x, w) = _case(name, (0, 0, None))

    def per_example(jax):
        g = jax.grad(lambda p, x, w: jax.numpy.sum(fn(jax)(p, x, w)), argnums=(1, 2))
        return jax.jit(jax.vmap(g, in_axes=(0, 0, None)))
    _check_close(per_example(meshsim)(first, x, w), per_example(real_jax)(first, x, w))


def test_fori_loop_with_concrete_bounds_differentiates_under_vmap(real_jax):
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)

    def f(jax):
        lax = jax.lax
        return jax.vmap(jax.grad(lambda x, w: lax.fori_loop(0, 4, lambda i, c: jax.numpy.sin(c) * w, x).sum(),
                                 argnums=1))
    _check_close(f(meshsim)(x, w), f(real_jax)(x, w))


def test_while_loop_stops_each_example_at_its_own_predicate(real_jax):
    # Example i doubles until it passes its own limit; the others keep going.
    limits = np.array([1.0, 10.0, 100.0, 0.5], np.float32)

    def f(jax):
        return jax.vmap(lambda lim: jax.lax.while_loop(lambda v: v < lim, lambda v: v * 2.0, 1.0))
    ours = f(meshsim)(limits)
    np.testing.assert_array_equal(np.asarray(ours), [1.0, 16.0, 128.0, 1.0])
    _check_close(ours, f(real_jax)(limits))


def test_zero_trip_and_empty_batch(real_jax):
    def f(jax):
        return jax.vmap(lambda n, x: jax.lax.fori_loop(0, n, lambda i, c: c + 1.0, x))
    n, x = np.zeros(3, np.int32), np.arange(3, dtype=np.float32)
    _check_close(f(meshsim)(n, x), f(real_jax)(n, x))
    n0, x0 = np.zeros(0, np.int32), np.zeros(0, np.float32)
    _check_close(f(meshsim)(n0, x0), f(real_jax)(n0, x0))


def test_fori_loop_with_batched_trip_count_is_one_while(real_jax):
    fn, args = _case("fori", (0, 0, 0))
    text = str(meshsim.make_jaxpr(meshsim.vmap(fn(meshsim)))(*args))
    batch = args[0].shape[0]
    assert text.count("while[") == 1 and f"bool[{batch}] = lt" in text


def _constrained_loop(jax, kind, axis):
    """A per-example function whose control-flow body constrains its carry to P(axis)."""
    jnp, lax = jax.numpy, jax.lax
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(axis))

    def constrain(c):
        return lax.with_sharding_constraint(c, spec)

    def f(c0, xs):
        if kind == "scan":
            return lax.scan(lambda c, x: (constrain(c + x), c.sum()), c0, xs)[0]
        if kind == "while":
            return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, constrain(c[1] * 2.0)), (0, c0))[1]
        return lax.cond(xs.sum() > 0, lambda c: constrain(c * 2.0), lambda c: c - 1.0, c0)
    return mesh, f


@pytest.mark.parametrize("axis", ["y", "x"])
@pytest.mark.parametrize("kind", ["scan", "while", "cond"])
@pytest.mark.parametrize("jit", [False, True])
def test_spmd_axis_constraint_inside_vmapped_control_flow(real_jax, kind, axis, jit):
    # A constraint over another mesh axis composes with the spmd axis; one naming the
    # spmd axis itself is refused, as JAX refuses it.
    rng = np.random.default_rng(_seed(kind, axis, jit))
    c0, xs = rng.standard_normal((2, 8)).astype(np.float32), rng.standard_normal((2, 3, 8)).astype(np.float32)
    results = []
    for lib in (meshsim, real_jax):
        mesh, f = _constrained_loop(lib, kind, axis)
        g = lib.vmap(f, spmd_axis_name="x")
        try:
            with lib.set_mesh(mesh):
                out = (lib.jit(g) if jit else g)(c0, xs)
            results.append((np.asarray(out), out.sharding.spec))
        except Exception as e:  # noqa: BLE001 - the error is the result compared
            results.append((type(e).__name__, str(e)))
    ours, theirs = results
    if axis == "x":
        assert theirs[0] == "ValueError" and ours == theirs
    else:
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-5)
        assert tuple(ours[1]) == tuple(theirs[1])

"""Auto mesh axes: results of jitted programs keep the shardings XLA's propagation gives
them, `jit(in_shardings=, out_shardings=)` as JAX has them, and the mesh-oriented view
(DTensor placements) with exact round trips."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jax
import meshsim
from meshsim.sharding import Partial, Replicate, Shard, from_placements, placements


def _mesh(mod, shape=(4, 2), names=("X", "Y")):
    return mod.make_mesh(shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))


def _put(mod, mesh, value, *spec):
    return mod.device_put(value, mod.sharding.NamedSharding(mesh, mod.sharding.PartitionSpec(*spec)))


def _outcome(fn):
    try:
        out = fn()
        return "ok", str(out.sharding), np.asarray(out)
    except Exception as e:  # noqa: BLE001 - the class and text are compared
        return type(e).__name__, str(e), None


def _both(case):
    """case(mod, mesh) under JAX and meshsim: (kind, text, value) each."""
    results = []
    for mod in (jax, meshsim):
        results.append(_outcome(lambda: case(mod, _mesh(mod))))
    return results


X = np.arange(64, dtype=np.float32).reshape(8, 8)


def _clipped(m):
    @m.custom_vjp
    def f(x):
        return m.numpy.sin(x) * 3.0

    f.defvjp(lambda x: (f(x), m.numpy.cos(x)), lambda c, g: (m.numpy.clip(g * c, -1.0, 1.0),))
    return f

CASES = {
    "sin_keeps_sharding": lambda m, mesh: m.jit(m.numpy.sin)(_put(m, mesh, X, "X")),
    "in_shardings_places": lambda m, mesh: m.jit(
        m.numpy.cos, in_shardings=m.sharding.NamedSharding(mesh, m.sharding.PartitionSpec("Y")))(X),
    "out_shardings": lambda m, mesh: m.jit(
        m.numpy.sin, out_shardings=m.sharding.NamedSharding(mesh, m.sharding.PartitionSpec(None, "X")))(
        _put(m, mesh, X, "X")),
    "in_shardings_mismatch": lambda m, mesh: m.jit(
        m.numpy.sin, in_shardings=m.sharding.NamedSharding(mesh, m.sharding.PartitionSpec("X")))(
        _put(m, mesh, X, "Y")),
    "in_shardings_rank": lambda m, mesh: m.jit(
        lambda a: a, in_shardings=m.sharding.NamedSharding(mesh, m.sharding.PartitionSpec("X", "Y", None)))(X),
    "in_shardings_length": lambda m, mesh: m.jit(
        lambda a, b: a + b, in_shardings=(m.sharding.NamedSharding(mesh, m.sharding.PartitionSpec("X")),))(X, X),
    "in_shardings_spec_without_mesh": lambda m, mesh: m.jit(
        m.numpy.sin, in_shardings=m.sharding.PartitionSpec("X"))(X),
    "matmul_fsdp": lambda m, mesh: m.jit(lambda a, b: a @ b)(_put(m, mesh, X, "X"), _put(m, mesh, X, "Y")),
    "matmul_tp": lambda m, mesh: m.jit(lambda a, b: m.numpy.tanh(a @ b) @ b.T)(
        _put(m, mesh, X, "X"), _put(m, mesh, X, None, "Y")),
    "reduce": lambda m, mesh: m.jit(lambda a: m.numpy.sum(m.numpy.exp(a), axis=0))(_put(m, mesh, X, "X", "Y")),
    # Checkpointed regions and custom VJPs are partitioned through their programs.
    "checkpoint": lambda m, mesh: m.jit(m.checkpoint(lambda a, b: m.numpy.tanh(a @ b) * 2.0))(
        _put(m, mesh, X, "X"), _put(m, mesh, X, None, "Y")),
    "checkpoint_grad": lambda m, mesh: m.jit(m.grad(lambda a, b: m.numpy.sum(
        m.checkpoint(lambda u, v: m.numpy.tanh(u @ v))(a, b) ** 2)))(
        _put(m, mesh, X, "X"), _put(m, mesh, X, None, "Y")),
    "custom_vjp": lambda m, mesh: m.jit(_clipped(m))(_put(m, mesh, X, "X", "Y")),
    # Eager operations: JAX compiles each, so propagation lays out their results too.
    "eager_sin": lambda m, mesh: m.numpy.sin(_put(m, mesh, X, "X", "Y")),
    "eager_add_scalar": lambda m, mesh: _put(m, mesh, X, None, "X") + 1.0,
    "eager_matmul": lambda m, mesh: _put(m, mesh, X, "X", "Y") @ _put(m, mesh, X, None, "Y"),
    "eager_sum": lambda m, mesh: m.numpy.sum(_put(m, mesh, X, "X", "Y"), axis=0),
    "eager_transpose": lambda m, mesh: _put(m, mesh, X, "X", "Y").T,
    "eager_reshape": lambda m, mesh: _put(m, mesh, X, "X", "Y").reshape(64),
    "eager_broadcast": lambda m, mesh: _put(m, mesh, X[0], "X") * _put(m, mesh, X, None, "X"),
}


@pytest.mark.parametrize("name", CASES)
def test_like_jax(name):
    (jk, jt, jv), (mk, mt, mv) = _both(CASES[name])
    assert (mk, mt) == (jk, jt)
    if jv is not None:
        np.testing.assert_allclose(mv, jv, rtol=1e-5)


def test_spec_in_context_mesh():
    mesh = _mesh(meshsim)
    with meshsim.set_mesh(mesh):
        f = meshsim.jit(meshsim.numpy.sin, in_shardings=meshsim.sharding.PartitionSpec("X"),
                        out_shardings=meshsim.sharding.PartitionSpec(None, "X"))
        out = f(X)
    assert out.sharding.spec == meshsim.sharding.PartitionSpec(None, "X")
    np.testing.assert_allclose(np.asarray(out), np.sin(X), rtol=1e-6)


def test_collectives_of_a_propagated_program_are_recorded():
    mesh = _mesh(meshsim)
    a, b = _put(meshsim, mesh, X, None, "X"), _put(meshsim, mesh, X, "X")
    f = meshsim.jit(lambda a, b: a @ b)
    with meshsim.debug.record_collectives() as log:
        out = f(a, b)
    assert [(c.name, c.axes, c.bytes) for c in log] == [("psum", ("X",), 2 * 256 * 3 // 4)]
    np.testing.assert_allclose(np.asarray(out), X @ X, rtol=1e-5)


W = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
XS = np.stack([X, -X, X / 2])


def _zeros(m, mesh):
    return m.numpy.zeros(8, np.float32)


# name -> (body(m, carry, row, *consts), init(m, mesh), xs(m, mesh), consts(m, mesh))
SCANS = {
    # elementwise body: each device scans its own columns
    "cumsum": (lambda m, c, r: (c + r, c * 2.0), _zeros,
               lambda m, mesh: _put(m, mesh, X, None, "X"), lambda m, mesh: []),
    "carry_2d": (lambda m, c, r: (m.numpy.tanh(c) + r, c.sum(0)),
                 lambda m, mesh: _put(m, mesh, X, "X"),
                 lambda m, mesh: _put(m, mesh, XS, None, "X"), lambda m, mesh: []),
    # a constant laid out like the rows multiplies them
    "const_weights": (lambda m, c, r, w: (c + r * w[0], c), _zeros,
                      lambda m, mesh: _put(m, mesh, X, None, "Y"),
                      lambda m, mesh: [_put(m, mesh, W, None, "Y")]),
    # the body contracts the sharded dim
    "body_reduces": (lambda m, c, r: (c + r.sum(), r), _zeros,
                     lambda m, mesh: _put(m, mesh, X, None, "X"), lambda m, mesh: []),
    "matmul_body": (lambda m, c, r, w: (m.numpy.tanh(c @ w) + r, c),
                    lambda m, mesh: _put(m, mesh, X, "X"),
                    lambda m, mesh: _put(m, mesh, XS, None, "X"), lambda m, mesh: [W]),
}


def _scan_case(m, mesh, name):
    body, init, xs, consts = SCANS[name]
    f = m.jit(lambda i, x, *c: m.lax.scan(lambda carry, row: body(m, carry, row, *c), i, x))
    with m.set_mesh(mesh):
        return f(init(m, mesh), xs(m, mesh), *consts(m, mesh))


@pytest.mark.parametrize("name", SCANS)
def test_scan_like_jax(name):
    """Scans on Auto axes: JAX's values, and results laid out as XLA lays them out."""
    results = []
    for mod in (jax, meshsim):
        mesh = _mesh(mod)
        out = _scan_case(mod, mesh, name)
        results.append(([str(o.sharding) for o in out], [np.asarray(o) for o in out]))
    (j_sh, j_val), (m_sh, m_val) = results
    for a, b in zip(m_val, j_val):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert m_sh == j_sh


def test_scan_on_blocks_moves_nothing():
    mesh = _mesh(meshsim)
    xs = _put(meshsim, mesh, X, None, "X")
    f = meshsim.jit(lambda x: meshsim.lax.scan(lambda c, r: (c + r, c * 2.0), meshsim.numpy.zeros(8), x))
    f(xs)
    with meshsim.debug.record_collectives() as log:
        carry, ys = f(xs)
    assert list(log) == []
    np.testing.assert_allclose(np.asarray(ys), np.cumsum(X, 0) * 2 - X * 2, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(carry), X.sum(0), rtol=1e-6)


def _inspected(mod, mesh_types):
    """What inspect_array_sharding reports inside jit, for values computed from
    arguments laid out over an Auto (or mixed) mesh, then the results' shardings."""
    mesh = mod.make_mesh((4, 2), ("X", "Y"), axis_types=mesh_types(mod.sharding.AxisType))
    seen = []

    def look(name, v):
        mod.debug.inspect_array_sharding(v, callback=lambda s: seen.append(f"{name}: {s}"))

    def f(x, w):
        look("x", x)
        y = mod.numpy.sin(x)
        look("y", y)
        z = y @ w
        look("z", z)
        s = z.sum(0)
        look("s", s)
        t = mod.numpy.tanh(z).T
        look("t", t)
        return s, t

    outs = mod.jit(f)(_put(mod, mesh, X, "X", "Y"), _put(mod, mesh, X, None, "Y"))
    return seen, [str(o.sharding) for o in outs], [np.asarray(o) for o in outs]


@pytest.mark.parametrize("types", ["auto", "explicit_auto"])
def test_inspect_array_sharding_in_jit(types):
    mesh_types = {"auto": lambda t: (t.Auto, t.Auto), "explicit_auto": lambda t: (t.Explicit, t.Auto)}[types]
    j_seen, j_out, j_vals = _inspected(jax, mesh_types)
    m_seen, m_out, m_vals = _inspected(meshsim, mesh_types)
    assert m_seen == j_seen
    assert m_out == j_out
    for a, b in zip(m_vals, j_vals):
        np.testing.assert_allclose(a, b, rtol=1e-5)


MIXED = {
    "sin": (lambda m: m.numpy.sin, [("X", "Y")]),
    "sum_auto_dim": (lambda m: lambda a: a.sum(1), [("X", "Y")]),
    "sum_explicit_dim": (lambda m: lambda a: a.sum(0), [(None, "Y")]),
    "matmul": (lambda m: lambda a, b: a @ b, [("X",), (None, "Y")]),
    "transpose": (lambda m: lambda a: m.numpy.cos(a).T, [("X", "Y")]),
    "reduce_all": (lambda m: lambda a: m.numpy.max(m.numpy.exp(a)), [("X", "Y")]),
}


@pytest.mark.parametrize("name", MIXED)
@pytest.mark.parametrize("eager", [False, True])
def test_mixed_explicit_auto_mesh(name, eager):
    """Axis X Explicit, Y Auto: types show X only, layouts carry Y as XLA chooses."""
    def run(mod):
        t = mod.sharding.AxisType
        mesh = mod.make_mesh((4, 2), ("X", "Y"), axis_types=(t.Explicit, t.Auto))
        make, specs = MIXED[name]
        fun = make(mod) if eager else mod.jit(make(mod))
        args = [_put(mod, mesh, X, *spec) for spec in specs]
        with mod.set_mesh(mesh):
            return _outcome(lambda: fun(*args))
    (jk, jt, jv), (mk, mt, mv) = run(jax), run(meshsim)
    assert (mk, mt) == (jk, jt)
    if jv is not None:
        np.testing.assert_allclose(mv, jv, rtol=1e-5)


def test_mixed_mesh_types_inside_jit():
    """Inside jit on a mixed mesh, types show the Explicit axes only (as JAX's typeof)."""
    def run(mod):
        t = mod.sharding.AxisType
        mesh = mod.make_mesh((4, 2), ("X", "Y"), axis_types=(t.Explicit, t.Auto))
        types = []

        def f(a, b):
            for v in (a, b, mod.numpy.sin(a), a @ b, a.sum(0), a.sum(1), a.T):
                types.append(str(mod.typeof(v)))
            return a @ b
        with mod.set_mesh(mesh):
            out = mod.jit(f)(_put(mod, mesh, X, "X", "Y"), _put(mod, mesh, X, None, "Y"))
        return types, str(out.sharding)
    assert run(meshsim) == run(jax)


# ---- placements ---------------------------------------------------------------------------

def test_placements_print_as_dtensor():
    mesh = _mesh(meshsim, (2, 2, 2), ("a", "b", "c"))
    x = _put(meshsim, mesh, np.zeros((4, 4, 2), np.float32), ("a", "c"), None, "b")
    p = placements(x)
    assert p == (Shard(0), Shard(2), Shard(0))
    assert repr(p) == "(Shard(dim=0), Shard(dim=2), Shard(dim=0))"
    assert [str(q) for q in p] == ["S(0)", "S(2)", "S(0)"]
    y = _put(meshsim, mesh, np.zeros((4, 4), np.float32), ("c", "a"))
    assert repr(placements(y)) == "(_StridedShard(dim=0, sf=2), Replicate(), Shard(dim=0))"
    assert repr(Partial("sum")) == "Partial(sum)" and str(Partial()) == "P(sum)"
    assert str(Replicate()) == "R"


@st.composite
def _layouts(draw):
    sizes = draw(st.lists(st.sampled_from([2, 4]), min_size=1, max_size=3)
                 .filter(lambda s: np.prod(s) <= 8))
    names = tuple("abc"[: len(sizes)])
    ndim = draw(st.integers(1, 3))
    dims = [draw(st.integers(-1, ndim - 1)) for _ in names]  # -1: replicated
    order = draw(st.permutations(list(names)))
    entries = [tuple(a for a in order if dims[names.index(a)] == d) for d in range(ndim)]
    return sizes, names, ndim, entries


@settings(max_examples=60, deadline=None)
@given(_layouts())
def test_placements_round_trip(layout):
    sizes, names, ndim, entries = layout
    devices = int(np.prod(sizes))
    mesh = meshsim.sharding.Mesh(np.array(meshsim.devices()[:devices]).reshape(sizes), names)
    spec = meshsim.sharding.PartitionSpec(*[e if len(e) > 1 else (e[0] if e else None) for e in entries])
    sharding = meshsim.sharding.NamedSharding(mesh, spec)
    back = from_placements(mesh, placements(sharding), ndim)
    norm = lambda s: tuple(tuple(s.axes_of(d)) if d < len(s) else () for d in range(ndim))  # noqa: E731
    assert norm(back.spec) == norm(spec)
    # The same blocks on the same devices.
    shape = tuple(int(np.prod(sizes)) * 2 for _ in range(ndim))
    assert back.devices_indices_map(shape) == sharding.devices_indices_map(shape)


_AT_UPDATES = {
    "set_col": lambda m, x: x.at[:, 2].set(0.0) * 2.0,
    "add_cols": lambda m, x: x.at[:, m.numpy.asarray([1, 14, 5, -1])].add(1.0),
    "set_row_neg": lambda m, x: x.at[-3].set(7.0),
    "take_cols": lambda m, x: m.numpy.take(x, m.numpy.asarray([0, 15, 9, 20]), axis=1),
    "getitem_cols": lambda m, x: x[:, m.numpy.asarray([3, 12, -2])] + 1.0,
}


@pytest.mark.parametrize("spec", [(None, ("Y", "Z")), (None, ("X", "Y", "Z")), (("Z", "X"), "Y"),
                                  (("X", "Z"),)], ids=str)
@pytest.mark.parametrize("name", list(_AT_UPDATES))
def test_indexed_dims_split_over_several_axes(name, spec):
    """Gathers and scatters along dims split over 1-3 Auto axes run on each device's
    block as XLA partitions them: JAX's values, result shardings and collectives."""
    from auto_oracle import normalized, run_jax, run_meshsim
    x = np.random.default_rng(3).standard_normal((8, 16)).astype(np.float32)
    found = []
    for mod, runner in ((jax, run_jax), (meshsim, run_meshsim)):
        mesh = _mesh(mod, (2, 2, 2), ("X", "Y", "Z"))
        with mod.set_mesh(mesh):
            specs, coll, out = runner(mod, lambda a: _AT_UPDATES[name](mod, a), [_put(mod, mesh, x, *spec)])
        found.append(([normalized(s) for s in specs], coll, np.asarray(out)))
    (j_specs, j_coll, j_out), (m_specs, m_coll, m_out) = found
    np.testing.assert_array_equal(m_out, j_out)
    assert m_specs == j_specs
    assert m_coll == j_coll


_OUTSIDE_SET_MESH = {
    "add_row": lambda m, x: x.at[2].add(1.0),
    "add_col": lambda m, x: x.at[:, 3].add(1.0),
    "add_rows_by_array": lambda m, x: x.at[m.numpy.array([1, 5])].add(1.0),
    "set_element": lambda m, x: x.at[0, 0].set(5.0),
    "multiply_row": lambda m, x: x.at[1].multiply(2.0),
    "min_row": lambda m, x: x.at[1].min(2.0),
    "add_sharded_update": lambda m, x: x.at[:4].add(m.device_put(
        np.ones((4, 16), np.float32), m.sharding.NamedSharding(x.sharding.mesh, m.sharding.PartitionSpec("X")))),
    "jit_add_row": lambda m, x: m.jit(lambda a: a.at[2].add(1.0))(x),
    "get_row": lambda m, x: x.at[1].get(),
    "segment_sum": lambda m, x: m.ops.segment_sum(x, m.numpy.array([0, 0, 1, 1, 2, 2, 3, 3]), 4),
}


@pytest.mark.parametrize("name", list(_OUTSIDE_SET_MESH))
def test_indexed_updates_on_auto_mesh_outside_set_mesh(name):
    """`.at[]` updates of an array laid out over an all-Auto mesh, with no context mesh: JAX's
    values and result sharding (the updates need no layout of their own)."""
    x = np.arange(128, dtype=np.float32).reshape(8, 16)
    found = []
    for mod in (jax, meshsim):
        mesh = _mesh(mod, (2, 4))
        out = _OUTSIDE_SET_MESH[name](mod, _put(mod, mesh, x, "X", "Y"))
        found.append((np.asarray(out), repr(out.sharding.spec), str(mod.typeof(out))))
    np.testing.assert_array_equal(found[1][0], found[0][0])
    assert found[1][1:] == found[0][1:]


def test_notebook_mlp_step_matches_xla():
    """notebooks/auto_sharding.ipynb's MLP step (Auto axes data x model, batch split over data,
    w1 by columns and w2 by rows over model): JAX's result shardings, loss and updated weights,
    and the collectives of XLA's compiled step (kind, axes, bytes)."""
    from auto_oracle import normalized, run_jax, run_meshsim
    rng = np.random.default_rng(0)
    values = [rng.standard_normal((64, 32), np.float32), rng.standard_normal((64, 16), np.float32),
              rng.standard_normal((32, 128), np.float32) * 0.1, rng.standard_normal((128, 16), np.float32) * 0.1]
    found = []
    for mod, runner in ((jax, run_jax), (meshsim, run_meshsim)):
        mesh = _mesh(mod, (4, 2), ("data", "model"))
        x, y, w1, w2 = (_put(mod, mesh, v, *s) for v, s in
                        zip(values, [("data",), ("data",), (None, "model"), ("model", None)]))

        def step(w1, w2, x, y, mod=mod):
            def loss(p):
                h = mod.nn.relu(x @ p["w1"])
                return mod.numpy.mean((h @ p["w2"] - y) ** 2)
            value, g = mod.value_and_grad(loss)({"w1": w1, "w2": w2})
            return value, w1 - 0.1 * g["w1"], w2 - 0.1 * g["w2"]

        specs, coll, out = runner(mod, step, [w1, w2, x, y])
        found.append(([normalized(s) for s in specs], coll, [np.asarray(o) for o in out]))
    (j_specs, j_coll, j_out), (m_specs, m_coll, m_out) = found
    assert m_specs == j_specs
    assert m_coll == j_coll
    for a, b in zip(m_out, j_out):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)

"""`.at[...].set/add/subtract/multiply/min/max(..., out_sharding=)` against JAX on Explicit
meshes: over random meshes, operand specs, indices and requested layouts, eager and under jit,
the result's type (`jax.typeof`) and values must be JAX's, as must the errors JAX raises."""
import numpy as np
import pytest

import meshsim

jax = pytest.importorskip("jax")

METHODS = ["set", "add", "subtract", "multiply", "min", "max"]
MESHES = [((8,), ("dp",)), ((4, 2), ("dp", "tp")), ((2, 4), ("dp", "tp")), ((2, 2, 2), ("a", "b", "c"))]


def _entries(names):
    """The spec entries a dim may take on a mesh of `names`: none, one axis, two axes."""
    return [None, *names, *([tuple(names[:2])] if len(names) > 1 else [])]


def _random_index(rng, shape):
    """One of the index forms a scatter takes, with its numpy value."""
    kind = rng.integers(0, 5)
    if kind == 0:
        return int(rng.integers(-shape[0], shape[0]))
    if kind == 1:
        return np.asarray(rng.integers(0, shape[0], int(rng.integers(1, 5))), np.int32)
    if kind == 2:
        return slice(int(rng.integers(0, 2)), shape[0], int(rng.integers(1, 3)))
    if len(shape) == 1:
        return np.asarray(rng.integers(-shape[0], shape[0], 3), np.int32)
    if kind == 3:
        return (slice(None), np.asarray(rng.integers(0, shape[1], 3), np.int32))
    return (np.asarray(rng.integers(0, shape[0], 2), np.int32), int(rng.integers(0, shape[1])))


def _run(lib, mesh_shape, names, x, x_spec, index, method, values, out_spec, named, jit):
    P, NS = lib.sharding.PartitionSpec, lib.sharding.NamedSharding
    mesh = lib.make_mesh(mesh_shape, names, axis_types=(lib.sharding.AxisType.Explicit,) * len(names))
    with lib.set_mesh(mesh):
        try:
            xs = lib.device_put(x, NS(mesh, P(*x_spec)))
            out_sharding = NS(mesh, P(*out_spec)) if named else P(*out_spec)

            def update(a, v):
                return getattr(a.at[index], method)(v, out_sharding=out_sharding)

            y = (lib.jit(update) if jit else update)(xs, values)
            return "ok", str(lib.typeof(y)), np.asarray(y)
        except Exception as e:  # noqa: BLE001 - the class and message are compared
            return type(e).__name__, str(e), None


@pytest.mark.parametrize("seed", range(48))
def test_random_updates_with_out_sharding_match_jax(seed):
    rng = np.random.default_rng(seed)
    mesh_shape, names = MESHES[seed % len(MESHES)]
    ndim = int(rng.integers(1, 4))
    shape = tuple(int(rng.choice([4, 8, 16])) for _ in range(ndim))
    entries = _entries(names)
    x_spec = [entries[int(rng.integers(0, len(entries)))] for _ in range(ndim)]
    out_spec = [entries[int(rng.integers(0, len(entries)))] for _ in range(ndim)]
    x = rng.standard_normal(shape).astype(np.float32)
    index = _random_index(rng, shape)
    values = np.float32(rng.standard_normal()) if seed % 3 == 0 else \
        rng.standard_normal(np.zeros(shape)[index].shape).astype(np.float32)
    method = METHODS[seed % len(METHODS)]
    args = (mesh_shape, names, x, x_spec, index, method, values, out_spec, bool(seed % 2))
    for jit in (False, True):
        got = _run(meshsim, *args, jit)
        want = _run(jax, *args, jit)
        assert got[:2] == want[:2], (jit, got[:2], want[:2])
        if want[2] is not None:
            np.testing.assert_allclose(got[2], want[2], rtol=1e-6)


def _mesh(lib):
    return lib.make_mesh((4, 2), ("dp", "tp"), axis_types=(lib.sharding.AxisType.Explicit,) * 2)


# JAX's checks of out_sharding (its type, its spec over the mesh, its rank and the result's
# divisibility), and the updates that need it.
ERROR_CASES = {
    "spec_without_mesh": (False, lambda m, P, x: x.at[1].set(2.0, out_sharding=P("tp"))),
    "named_without_mesh": (False, lambda m, P, x: x.at[1].set(
        2.0, out_sharding=m.sharding.NamedSharding(x.sharding.mesh, P("tp")))),
    "not_a_sharding": (True, lambda m, P, x: x.at[1].set(2.0, out_sharding="dp")),
    "duplicate_axis": (True, lambda m, P, x: x.at[1].set(2.0, out_sharding=P("dp", "dp"))),
    "indivisible": (True, lambda m, P, x: x.at[1].mul(2.0, out_sharding=P(None, "dp"))),
    "longer_than_rank": (True, lambda m, P, x: x.at[1].set(2.0, out_sharding=P(None, None, "dp"))),
    "unknown_axis": (True, lambda m, P, x: x.at[1].min(2.0, out_sharding=P("zz"))),
    "without_out_sharding": (True, lambda m, P, x: x.at[np.array([0, 3])].max(np.ones((2, 6), np.float32))),
    "with_out_sharding": (True, lambda m, P, x: x.at[np.array([0, 3])].max(
        np.ones((2, 6), np.float32), out_sharding=P(("dp", "tp")))),
    "false_index": (True, lambda m, P, x: x.at[False].add(1.0, out_sharding=P(None, "tp"))),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_out_sharding_errors_match_jax(case):
    in_mesh, fn = ERROR_CASES[case]

    def outcome(lib):
        P = lib.sharding.PartitionSpec
        mesh = _mesh(lib)
        x = lib.device_put(np.arange(48, dtype=np.float32).reshape(8, 6),
                           lib.sharding.NamedSharding(mesh, P("dp")))
        try:
            if in_mesh:
                with lib.set_mesh(mesh):
                    y = fn(lib, P, x)
            else:
                y = fn(lib, P, x)
            return "ok", str(lib.typeof(y)), np.asarray(y).tolist()
        except Exception as e:  # noqa: BLE001 - the class and message are compared
            return type(e).__name__, str(e)

    assert outcome(meshsim) == outcome(jax)


def test_gradient_and_vmap_with_out_sharding_match_jax():
    """The cotangent flows back through the laid-out result (JAX differentiates through its
    auto_axes), and vmap leaves the mapped dim unsharded."""
    def run(lib):
        P = lib.sharding.PartitionSpec
        mesh = _mesh(lib)
        with lib.set_mesh(mesh):
            x = lib.device_put(np.arange(32, dtype=np.float32).reshape(8, 4) / 7,
                               lib.sharding.NamedSharding(mesh, P("dp")))
            v = np.linspace(-1, 1, 8, dtype=np.float32)

            def f(a, u):
                y = a.at[:, 1].add(u * u, out_sharding=P(None, "tp"))
                return (lib.numpy.sin(y) * y).sum()

            g = lib.jit(lib.grad(f, argnums=(0, 1)))(x, v)
            batched = lib.vmap(lambda a, u: a.at[1].add(u, out_sharding=P("tp")), in_axes=(1, 0))(x, v[:4])
            return [str(lib.typeof(t)) for t in (*g, batched)], [np.asarray(t) for t in (*g, batched)]

    got, want = run(meshsim), run(jax)
    assert got[0] == want[0]
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)

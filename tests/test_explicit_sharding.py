"""Explicit sharding ("sharding in types"): every rule against the installed
JAX (types and ShardingTypeError texts), every result against NumPy over
random shapes and specs, and the collectives each global program runs."""
import itertools

import numpy as np
import pytest

import meshsim
import meshsim.numpy as mjnp
from meshsim.sharding import NamedSharding, PartitionSpec as P, ShardingTypeError


class Lib:
    """One library (meshsim or JAX) as the cases use it."""

    def __init__(self, jax, shape=(4, 2), names=("dp", "tp")):
        self.jax = jax
        self.jnp = jax.numpy
        self.lax = jax.lax
        self.P = jax.sharding.PartitionSpec
        self.reshard = jax.sharding.reshard
        self.mesh = jax.make_mesh(shape, names)

    def put(self, value, *spec):
        return self.jax.device_put(np.asarray(value),
                                   self.jax.sharding.NamedSharding(self.mesh, self.P(*spec)))

    def arr(self, shape, *spec, dtype=np.float32):
        return self.put(np.arange(np.prod(shape), dtype=dtype).reshape(shape), *spec)


def outcome(lib: Lib, case):
    """The result's type, or the error's class name and message."""
    with lib.jax.set_mesh(lib.mesh):
        try:
            return "ok", str(lib.jax.typeof(case(lib)))
        except Exception as e:  # noqa: BLE001 - the class name is compared
            return type(e).__name__, str(e)


X = lambda m: m.arr((8, 8), "dp", "tp")  # noqa: E731
XT = lambda m: m.arr((8, 8), "tp", "dp")  # noqa: E731
XDP = lambda m: m.arr((8, 8), "dp", None)  # noqa: E731
IDX = lambda m: m.put(np.array([3, 1, 7, 0], np.int32))  # noqa: E731

CASES = {
    # elementwise (JAX's broadcasting rule)
    "add_replicated": lambda m: X(m) + m.jnp.ones((8, 8)),
    "add_scalar": lambda m: X(m) + 1,
    "add_incompatible": lambda m: X(m) + XT(m),
    "add_vector_incompatible": lambda m: X(m) + m.arr((8,), "dp"),
    "add_vector_ok": lambda m: XDP(m) + m.arr((8,), None),
    "add_size1": lambda m: X(m) + m.arr((1, 8), None, "tp"),
    "add_illegal": lambda m: m.arr((8, 8), "dp", None) + m.arr((8, 8), None, "dp"),
    "sin": lambda m: m.jnp.sin(X(m)),
    "astype": lambda m: X(m).astype(m.jnp.int32),
    "compare": lambda m: X(m) > 3,
    "where_same": lambda m: m.jnp.where(X(m) > 3, X(m), 0.0),
    "where_mixed": lambda m: m.jnp.where(X(m) > 3, X(m), XT(m)),
    "clip": lambda m: m.jnp.clip(X(m), 1.0, 5.0),
    # reductions
    "sum0": lambda m: X(m).sum(0),
    "sum1": lambda m: X(m).sum(1),
    "sum_all": lambda m: X(m).sum(),
    "max0": lambda m: X(m).max(0),
    "min1": lambda m: X(m).min(1),
    "prod0": lambda m: X(m).prod(0),
    "argmax0": lambda m: X(m).argmax(0),
    "argmin1": lambda m: X(m).argmin(1),
    "any1": lambda m: (X(m) > 3).any(1),
    "mean0": lambda m: X(m).mean(0),
    "cumsum_sharded": lambda m: m.jnp.cumsum(X(m), 0),
    "cumsum_unsharded": lambda m: m.jnp.cumsum(XDP(m), 1),
    "sort_sharded": lambda m: m.jnp.sort(X(m), 1),
    "sort_unsharded": lambda m: m.jnp.sort(XDP(m), 1),
    # reshape
    "reshape_split_2axes": lambda m: m.arr((64,), ("dp", "tp"), dtype=np.int32).reshape(8, 8),
    "reshape_split_bad": lambda m: m.arr((64,), ("dp", "tp"), dtype=np.int32).reshape(2, 32),
    "reshape_split_16x4": lambda m: m.arr((64,), ("dp", "tp"), dtype=np.int32).reshape(16, 4),
    "reshape_split_4x16": lambda m: m.arr((64,), ("dp", "tp"), dtype=np.int32).reshape(4, 16),
    "reshape_merge": lambda m: X(m).reshape(64),
    "reshape_merge_first": lambda m: XDP(m).reshape(64),
    "reshape_merge_second": lambda m: m.arr((8, 8), None, "tp").reshape(64),
    "reshape_other": lambda m: X(m).reshape(4, 16),
    "reshape_split_last": lambda m: X(m).reshape(8, 2, 4),
    "reshape_split_bad2": lambda m: X(m).reshape(2, 4, 8),
    "reshape_singleton": lambda m: X(m).reshape(8, 1, 8),
    "reshape_3d_merge": lambda m: m.arr((4, 2, 8), "dp", None, "tp").reshape(8, 8),
    # structural
    "transpose": lambda m: X(m).T,
    "transpose_3d": lambda m: m.jnp.transpose(m.arr((4, 2, 8), "dp", None, "tp"), (2, 0, 1)),
    "expand_dims": lambda m: X(m)[None],
    "broadcast_to": lambda m: m.jnp.broadcast_to(m.arr((8,), "dp"), (3, 8)),
    "broadcast_col": lambda m: m.jnp.broadcast_to(m.arr((8,), "dp")[:, None], (8, 3)),
    "concat_sharded_dim": lambda m: m.jnp.concatenate([X(m), X(m)], 0),
    "concat_unsharded_dim": lambda m: m.jnp.concatenate([XDP(m), XDP(m)], 1),
    "concat_mixed": lambda m: m.jnp.concatenate([XDP(m), X(m)], 1),
    "lax_slice_partial": lambda m: m.lax.slice(X(m), (0, 0), (4, 8)),
    "lax_slice_full": lambda m: m.lax.slice(X(m), (0, 0), (8, 8)),
    "lax_slice_strided": lambda m: m.lax.slice(X(m), (0, 0), (8, 8), (2, 1)),
    "lax_slice_unsharded": lambda m: m.lax.slice(XDP(m), (0, 1), (8, 4)),
    "lax_pad_zero": lambda m: m.lax.pad(X(m), 0.0, ((0, 0, 0), (0, 0, 0))),
    "lax_pad_unsharded": lambda m: m.lax.pad(XDP(m), 0.0, ((0, 0, 0), (1, 1, 0))),
    "lax_pad_indivisible": lambda m: m.lax.pad(X(m), 0.0, ((1, 1, 0), (0, 0, 0))),
    "lax_squeeze": lambda m: m.lax.squeeze(m.arr((8, 1), "dp", None), (1,)),
    "lax_rev": lambda m: m.lax.rev(X(m), (0,)),
    "dynamic_slice_unsharded": lambda m: m.lax.dynamic_slice(XDP(m), (0, 0), (8, 2)),
    "dynamic_slice_sharded": lambda m: m.lax.dynamic_slice(X(m), (0, 0), (2, 2)),
    # indexing: gather, scatter, dynamic_update_slice, top_k
    "getitem_rows_unsharded": lambda m: m.arr((8, 8), None, "tp")[IDX(m)],
    "getitem_rows_sharded": lambda m: X(m)[IDX(m)],
    "getitem_cols": lambda m: XDP(m)[:, IDX(m)],
    "getitem_cols_sharded": lambda m: X(m)[:, IDX(m)],
    "getitem_index_sharded": lambda m: m.arr((8, 8), None, "tp")[m.put(np.arange(8, dtype=np.int32), "dp")],
    "take0": lambda m: m.jnp.take(m.arr((8, 8), None, "tp"), IDX(m), axis=0),
    "take1": lambda m: m.jnp.take(XDP(m), IDX(m), axis=1),
    "take1_sharded": lambda m: m.jnp.take(X(m), IDX(m), axis=1),
    "take_along1": lambda m: m.jnp.take_along_axis(XDP(m), m.put(np.zeros((8, 3), np.int32), "dp"), axis=1),
    "take_along1_index_replicated": lambda m: m.jnp.take_along_axis(
        XDP(m), m.put(np.zeros((8, 3), np.int32)), axis=1),
    "take_along0_sharded": lambda m: m.jnp.take_along_axis(
        X(m), m.put(np.zeros((3, 8), np.int32), None, "tp"), axis=0),
    "take_along1_sharded": lambda m: m.jnp.take_along_axis(
        X(m), m.put(np.zeros((8, 3), np.int32), "dp"), axis=1),
    "dus_replicated_update": lambda m: m.lax.dynamic_update_slice(XDP(m), m.jnp.ones((8, 2)), (0, 3)),
    "dus_same": lambda m: m.lax.dynamic_update_slice(XDP(m), m.arr((8, 2), "dp", None), (0, 3)),
    "dus_different": lambda m: m.lax.dynamic_update_slice(XDP(m), m.arr((8, 2), None, "tp"), (0, 3)),
    "at_add_rows": lambda m: m.arr((8, 8), None, "tp").at[IDX(m)].add(1.0),
    "at_add_rows_sharded": lambda m: X(m).at[IDX(m)].add(1.0),
    "at_add_updates": lambda m: m.arr((8, 8), None, "tp").at[IDX(m)].add(m.arr((4, 8), None, "tp")),
    "at_add_updates_replicated": lambda m: m.arr((8, 8), None, "tp").at[IDX(m)].add(m.jnp.ones((4, 8))),
    "at_set_rows": lambda m: m.arr((8, 8), None, "tp").at[IDX(m)].set(1.0),
    # .at[] with full slices before the index: JAX's window dims keep their sharding
    "at_set_cols": lambda m: XDP(m).at[:, IDX(m)].set(1.0),
    "at_add_cols_updates": lambda m: XDP(m).at[:, IDX(m)].add(m.arr((8, 4), "dp", None)),
    "at_mul_cols_replicated_updates": lambda m: XDP(m).at[:, IDX(m)].multiply(m.jnp.ones((8, 4))),
    "at_min_cols_tp": lambda m: m.arr((8, 8), "tp", None).at[:, IDX(m)].min(2.0),
    "at_max_cols_scalar_index": lambda m: XDP(m).at[:, 3].max(2.0),
    "at_set_cols_sharded_dim": lambda m: X(m).at[:, IDX(m)].set(1.0),
    "at_add_middle": lambda m: m.arr((4, 8, 2), "dp", None, "tp").at[:, IDX(m), :].add(1.0),
    "at_add_middle_int_sharded": lambda m: m.arr((4, 8, 2), "dp", None, "tp").at[:, IDX(m), 1].add(1.0),
    "at_add_last_two_slices": lambda m: m.arr((4, 8, 8), "dp", "tp", None).at[:, :, IDX(m)].add(1.0),
    "at_add_last_sharded": lambda m: m.arr((4, 8, 8), "dp", None, "tp").at[:, :, IDX(m)].add(1.0),
    "at_ellipsis": lambda m: m.arr((4, 8, 8), "dp", "tp", None).at[..., IDX(m)].multiply(2.0),
    "at_nonadjacent": lambda m: m.arr((4, 8, 2), "dp", None, None).at[IDX(m), :, IDX(m) % 2].add(1.0),
    "at_index_2d": lambda m: XDP(m).at[:, m.put(np.zeros((2, 2), np.int32))].add(1.0),
    "at_strided_slice": lambda m: XDP(m).at[::2, IDX(m)].set(1.0),
    "at_reversed_slice": lambda m: XDP(m).at[::-1, IDX(m)].set(1.0),
    "at_updates_other_sharding": lambda m: XDP(m).at[:, IDX(m)].set(m.arr((8, 4), "tp", None)),
    "at_updates_sharded_window": lambda m: XDP(m).at[:, IDX(m)].set(m.arr((8, 4), None, "tp")),
    "broadcast_to_out_sharding": lambda m: m.jnp.broadcast_to(m.arr((8,), "dp"), (3, 8),
                                                              out_sharding=m.P(None, "dp")),
    "broadcast_to_out_sharding_bad": lambda m: m.jnp.broadcast_to(m.arr((8,), "dp"), (3, 8),
                                                                  out_sharding=m.P(None, "tp")),
    "broadcast_to_out_sharding_same_shape": lambda m: m.jnp.broadcast_to(XDP(m), (8, 8),
                                                                         out_sharding=m.P(None, "tp")),
    "top_k_values": lambda m: m.lax.top_k(XDP(m), 3)[0],
    "top_k_indices": lambda m: m.lax.top_k(XDP(m), 3)[1],
    "top_k_sharded": lambda m: m.lax.top_k(X(m), 3)[0],
    "argsort_last": lambda m: m.jnp.argsort(XDP(m), axis=-1),
    "argsort_sharded": lambda m: m.jnp.argsort(X(m), axis=-1),
    # dot_general (docs cases on (4, 2) rather than (2, 2))
    "dot_free": lambda m: XDP(m) @ m.arr((8, 16), None, "tp"),
    "dot_replicated_rhs": lambda m: X(m) @ m.jnp.ones((8, 4)),
    "dot_fsdp": lambda m: XDP(m) @ m.arr((8, 4), "dp", None),
    "dot_both_contract_same": lambda m: m.arr((8, 8), None, "tp") @ m.arr((8, 4), "tp", None),
    "dot_both_contract_diff": lambda m: X(m) @ XT(m),
    "dot_illegal": lambda m: XDP(m) @ m.arr((8, 8), None, "dp"),
    "dot_out_sharding": lambda m: m.jnp.dot(m.arr((8, 8), None, "tp"), m.arr((8, 4), "tp", None),
                                            out_sharding=m.P("dp", None)),
    "matmul_out_sharding": lambda m: m.jnp.matmul(X(m), XT(m), out_sharding=m.P()),
    "einsum_out_sharding": lambda m: m.jnp.einsum("ij,jk->ik", m.arr((8, 8), None, "tp"),
                                                  m.arr((8, 4), "tp", None),
                                                  out_sharding=m.P(None, "tp")),
    "dot_general_out_sharding": lambda m: m.lax.dot_general(
        m.arr((8, 8), None, "tp"), m.arr((8, 4), "tp", None), (((1,), (0,)), ((), ())),
        out_sharding=m.P("dp", None)),
    "batch_ok": lambda m: m.jnp.einsum("bij,bjk->bik", m.arr((4, 8, 4), "dp", None, None),
                                       m.arr((4, 4, 8), "dp", None, "tp")),
    "batch_mismatch": lambda m: m.jnp.einsum("bij,bjk->bik", m.arr((4, 8, 4), "dp", None, None),
                                             m.arr((4, 4, 8), "tp", None, None)),
    "matvec": lambda m: XDP(m) @ m.jnp.ones(8),
    "vecmat": lambda m: m.jnp.ones(8) @ m.arr((8, 4), None, "tp"),
    # creation and sampling
    "zeros": lambda m: m.jnp.zeros((8, 8)),
    "zeros_out_sharding": lambda m: m.jnp.zeros((8, 8), out_sharding=m.P("dp")),
    "ones_out_sharding": lambda m: m.jnp.ones((8, 4), out_sharding=m.P(None, "tp")),
    "full_out_sharding": lambda m: m.jnp.full((8, 8), 2.0, out_sharding=m.P(None, "tp")),
    "arange_out_sharding": lambda m: m.jnp.arange(8, out_sharding=m.P("dp")),
    "zeros_like": lambda m: m.jnp.zeros_like(X(m)),
    "normal_out_sharding": lambda m: m.jax.random.normal(m.jax.random.key(0), (8, 8),
                                                         out_sharding=m.P("dp")),
    "uniform_out_sharding": lambda m: m.jax.random.uniform(m.jax.random.key(0), (8, 8),
                                                           out_sharding=m.P(None, "tp")),
    # reshard and constraints
    "reshard_replicate": lambda m: m.reshard(X(m), m.P()),
    "reshard_swap": lambda m: m.reshard(X(m), m.P("tp", "dp")),
    "reshard_none": lambda m: m.reshard(X(m), None),
    "reshard_in_jit": lambda m: m.jax.jit(lambda a: m.reshard(a, m.P(("dp", "tp"))))(X(m)),
    "device_put_in_jit": lambda m: m.jax.jit(
        lambda a: m.jax.device_put(a, m.jax.sharding.NamedSharding(m.mesh, m.P(None, "dp"))))(X(m)),
    "wsc_match": lambda m: m.lax.with_sharding_constraint(X(m), m.P("dp", "tp")),
    "wsc_mismatch": lambda m: m.lax.with_sharding_constraint(X(m), m.P("dp")),
    "wsc_named": lambda m: m.lax.with_sharding_constraint(
        X(m), m.jax.sharding.NamedSharding(m.mesh, m.P("tp", "dp"))),
    "auto_axes_missing": lambda m: m.jax.sharding.auto_axes(lambda a: a * 2)(X(m)),
    "auto_axes": lambda m: m.jax.sharding.auto_axes(lambda a: a * 2, out_sharding=m.P("tp"))(X(m)),
    "auto_axes_kw": lambda m: m.jax.sharding.auto_axes(lambda a: a.T @ a)(X(m), out_sharding=m.P(None, "dp")),
    "auto_axes_one_axis": lambda m: m.jax.sharding.auto_axes(
        lambda a: a * 2, axes="tp", out_sharding=m.P("dp"))(X(m)),
    "jit_chain": lambda m: m.jax.jit(lambda a, b: (a @ b).sum(0) + 1)(XDP(m), m.arr((8, 8), None, "tp")),
}


@pytest.fixture(scope="module")
def libs(real_jax):
    return Lib(meshsim), Lib(real_jax)


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_matches_jax(libs, name):
    ours, theirs = (outcome(lib, CASES[name]) for lib in libs)
    assert ours == theirs


def test_sharding_type_error_is_a_value_error():
    assert issubclass(ShardingTypeError, ValueError)
    m = Lib(meshsim)
    with meshsim.set_mesh(m.mesh), pytest.raises(ValueError, match="incompatible shardings"):
        X(m) + XT(m)


def test_inside_auto_axes_types_drop_the_axes(libs):
    def probe(lib):
        seen = []

        def f(a):
            seen.append((str(lib.jax.typeof(a)), repr(lib.jax.sharding.get_abstract_mesh())))
            return a * 2

        with lib.jax.set_mesh(lib.mesh):
            lib.jax.sharding.auto_axes(f, axes="tp", out_sharding=lib.P("dp"))(X(lib))
            lib.jax.jit(lambda a: lib.jax.sharding.auto_axes(f, out_sharding=lib.P("tp"))(a))(X(lib))
        return seen

    assert probe(libs[0]) == probe(libs[1])


def test_get_abstract_mesh_inside_jit(libs):
    def probe(lib):
        seen = []
        with lib.jax.set_mesh(lib.mesh):
            lib.jax.jit(lambda a: seen.append(repr(lib.jax.sharding.get_abstract_mesh())) or a)(X(lib))
        return seen

    assert probe(libs[0]) == probe(libs[1])


def test_shard_map_infers_in_specs_from_types(libs):
    def probe(lib):
        seen = []

        def body(a):
            seen.append(str(lib.jax.typeof(a)))
            return a * 2

        with lib.jax.set_mesh(lib.mesh):
            out = lib.jax.jit(lambda a: lib.jax.shard_map(body, out_specs=lib.P("dp", "tp"))(a))(X(lib))
            return seen, str(lib.jax.typeof(out)), np.asarray(out).tolist()

    assert probe(libs[0]) == probe(libs[1])


# ---- values against NumPy -------------------------------------------------------------

MESH = meshsim.make_mesh((4, 2), ("dp", "tp"))
SPECS_2D = [P(), P("dp"), P(None, "tp"), P("dp", "tp"), P("tp", "dp"), P(("dp", "tp")),
            P(None, ("tp", "dp"))]


def _put(value, spec):
    return meshsim.device_put(value, NamedSharding(MESH, spec))


def _check(result, expected, spec=None, rtol=1e-5):
    np.testing.assert_allclose(np.asarray(result), expected, rtol=rtol, atol=1e-4)
    if spec is not None:  # results' shardings show the spec padded to the rank, as JAX's do
        assert result.sharding.spec == spec.padded(result.ndim)


@pytest.mark.parametrize("spec", SPECS_2D, ids=str)
def test_values_elementwise_and_reductions(spec):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((16, 8)).astype(np.float32)
    with meshsim.set_mesh(MESH):
        x, y = _put(a, spec), _put(b, spec)
        typed = meshsim.typeof(x).sharding.spec
        _check(x * y + 1, a * b + 1, typed)
        _check(mjnp.tanh(x) - y / 2, np.tanh(a) - b / 2, typed)
        _check(x + _put(b, P()), a + b, typed)  # a replicated operand is sliced locally
        for axis in (0, 1, None):
            _check(x.sum(axis), a.sum(axis))
            _check(x.max(axis), a.max(axis))
            _check(x.min(axis), a.min(axis))
            _check(mjnp.prod(x * 0 + 1.25, axis), np.prod(np.full(a.shape, 1.25, np.float32), axis))
            _check(x.mean(axis), a.mean(axis))
            _check((x > 0).any(axis), (a > 0).any(axis))  # pmax/pmin of booleans
            _check((x > -1).all(axis), (a > -1).all(axis))
        _check(x.argmax(0), a.argmax(0))
        _check(x.T, a.T, P(*reversed(typed)))
        _check(meshsim.jit(lambda u, v: (u * v).sum(0))(x, y), (a * b).sum(0))


@pytest.mark.parametrize("src,dst", list(itertools.product(SPECS_2D, SPECS_2D)), ids=str)
def test_values_reshard_any_to_any(src, dst):
    a = np.random.default_rng(1).standard_normal((16, 8)).astype(np.float32)
    with meshsim.set_mesh(MESH):
        x = _put(a, src)
        y = meshsim.reshard(x, dst)
        _check(y, a, dst)
        for pos, shard in enumerate(y.addressable_shards):
            np.testing.assert_array_equal(np.asarray(shard.data), a[shard.index])
        z = meshsim.jit(lambda v: meshsim.reshard(v, dst))(x)
        _check(z, a, dst)


@pytest.mark.parametrize("seed", range(12))
def test_values_dot_general_random_specs(seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 8)).astype(np.float32)
    entries = [None, "dp", "tp", ("dp", "tp")]
    with meshsim.set_mesh(MESH):
        while True:
            ls = P(*[entries[i] for i in rng.choice(len(entries), 2)])
            rs = P(*[entries[i] for i in rng.choice(len(entries), 2)])
            try:
                x, y = _put(a, ls), _put(b, rs)
                meshsim.typeof(x @ y)
                break
            except ValueError:  # an illegal combination: try another (the rules are tested above)
                continue
        _check(x @ y, a @ b, rtol=1e-4)
        out = P("dp", "tp")
        _check(mjnp.dot(x, y, out_sharding=out), a @ b, out, rtol=1e-4)
        _check(meshsim.jit(lambda u, v: mjnp.matmul(u, v, out_sharding=P()))(x, y), a @ b, P(None, None),
               rtol=1e-4)


def test_values_reshape_transpose_broadcast_concat_slice():
    a = np.arange(64, dtype=np.int32)
    with meshsim.set_mesh(MESH):
        x = _put(a, P(("dp", "tp")))
        _check(x.reshape(8, 8), a.reshape(8, 8), P(("dp", "tp"), None))
        _check(x.reshape(16, 4), a.reshape(16, 4), P(("dp", "tp"), None))
        m = _put(a.reshape(8, 8), P("dp", "tp"))
        _check(m.reshape(64), a, P(("dp", "tp")))  # a merge that moves data
        _check(m.reshape(8, 2, 4), a.reshape(8, 2, 4), P("dp", "tp", None))
        _check(mjnp.broadcast_to(_put(a[:8], P("dp")), (3, 8)), np.broadcast_to(a[:8], (3, 8)),
               P(None, "dp"))
        _check(mjnp.concatenate([m, m], 1), np.concatenate([a.reshape(8, 8)] * 2, 1), P("dp", "tp"))
        _check(mjnp.concatenate([m, m], 0), np.concatenate([a.reshape(8, 8)] * 2, 0), P("dp", "tp"))
        _check(meshsim.lax.slice(m, (0, 0), (4, 8)), a.reshape(8, 8)[:4], P("dp", "tp"))
        _check(meshsim.lax.slice(_put(a.reshape(8, 8), P("dp")), (0, 2), (8, 6)),
               a.reshape(8, 8)[:, 2:6], P("dp", None))
        _check(mjnp.cumsum(_put(a.reshape(8, 8), P("dp")), 1), np.cumsum(a.reshape(8, 8), 1))
        _check(mjnp.sort(_put(a.reshape(8, 8)[::-1], P(None, "tp")), 0),
               np.sort(a.reshape(8, 8)[::-1], 0))


def test_creation_and_random_out_sharding_values():
    with meshsim.set_mesh(MESH):
        z = mjnp.arange(16, out_sharding=P("dp"))
        _check(z, np.arange(16), P("dp"))
        key = meshsim.random.key(3)
        plain = meshsim.random.normal(key, (8, 8))
        sharded = meshsim.random.normal(key, (8, 8), out_sharding=P(None, "tp"))
        _check(sharded, np.asarray(plain), P(None, "tp"))
        with meshsim.debug.record_collectives() as log:
            mjnp.zeros((8, 8), out_sharding=P("dp", "tp"))
        assert log == []  # slicing a replicated value moves nothing


# ---- collectives and bytes moved --------------------------------------------------------

def test_shard_local_ops_move_no_bytes():
    a = np.ones((64, 32), np.float32)
    w = np.ones((32, 16), np.float32)
    with meshsim.set_mesh(MESH):
        x, wt = _put(a, P("dp", None)), _put(w, P(None, "tp"))
        f = meshsim.jit(lambda x, w: mjnp.tanh(x @ w) * 2 + 1)
        f(x, wt)
        with meshsim.debug.record_collectives() as log:
            y = f(x, wt)
            mjnp.sin(x) + x
            x.sum(1)
            x.T.reshape(32, 4, 16)
    assert log == []
    assert str(meshsim.typeof(y)) == "float32[64@dp,16@tp]"
    assert y.distinct_buffers() == 8


def test_collectives_of_reductions_and_contractions():
    a = np.ones((64, 32), np.float32)
    with meshsim.set_mesh(MESH):
        x = _put(a, P("dp", "tp"))
        with meshsim.debug.record_collectives() as log:
            x.sum(0)                                # reduce the dp-sharded dim: psum over dp
            x.max(1)                                # pmax over tp
            x @ _put(np.ones((32, 8), np.float32), P())   # one-sided contracting: all-gather over tp
            mjnp.dot(x, _put(np.ones((32, 8), np.float32), P("tp")), out_sharding=P("dp"))
            meshsim.reshard(x, P())                 # as XLA: one all-gather per dim, minor first
            meshsim.reshard(x, P("tp", "dp"))
            meshsim.reshard(x, P(("dp", "tp")))     # tp moves from dim 1 to dim 0
    block = 64 * 32 * 4 // 8
    assert [(c.name, c.axes) for c in log] == [
        ("psum", ("dp",)), ("pmax", ("tp",)), ("all_gather", ("tp",)), ("psum", ("tp",)),
        ("all_gather", ("tp",)), ("all_gather", ("dp",)), ("all_to_all", ("dp", "tp")), ("all_to_all", ("tp",))]
    assert log[0].bytes == 2 * 3 * (32 // 2 * 4) // 4   # ring all-reduce of a 16-float block over 4
    assert log[2].bytes == block                        # the other half of the dp block's rows
    assert (log[4].bytes, log[5].bytes) == (block, 2 * block * 3)


def test_eager_and_jit_agree():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)

    def step(x, w):
        h = mjnp.maximum(x @ w, 0.0)
        return (h * h).sum(1), meshsim.reshard(h, P()).mean(0)

    with meshsim.set_mesh(MESH):
        x, w = _put(a, P("dp")), _put(b, P(None, "tp"))
        eager, jitted = step(x, w), meshsim.jit(step)(x, w)
    h = np.maximum(a @ b, 0)
    for got in (eager, jitted):
        _check(got[0], (h * h).sum(1), rtol=1e-4)
        _check(got[1], h.mean(0), rtol=1e-4)
    assert str(meshsim.typeof(eager[0])) == str(meshsim.typeof(jitted[0])) == "float32[16@dp]"


def test_values_indexing_family():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((16, 8)).astype(np.float32)
    idx = np.array([3, 1, 7, 0, 3], np.int32)
    cols = rng.integers(0, 8, (16, 3)).astype(np.int32)
    with meshsim.set_mesh(MESH):
        xr, xc = _put(a, P(None, "tp")), _put(a, P("dp", None))
        i = _put(idx, P())
        _check(xr[i], a[idx], P(None, "tp"))
        _check(mjnp.take(xc, i, axis=1), a[:, idx], P("dp", None))
        _check(mjnp.take_along_axis(xc, _put(cols, P("dp")), axis=1), np.take_along_axis(a, cols, 1),
               P("dp", None))
        _check(meshsim.jit(lambda u, v: u[v])(xr, i), a[idx], P(None, "tp"))
        expected = a.copy()
        np.add.at(expected, idx, 2.0)
        _check(xr.at[i].add(2.0), expected, P(None, "tp"))
        _check(meshsim.jit(lambda u, v: u.at[v].add(2.0))(xr, i), expected, P(None, "tp"))
        upd = rng.standard_normal((16, 2)).astype(np.float32)
        expected = a.copy()
        expected[:, 3:5] = upd
        _check(meshsim.lax.dynamic_update_slice(xc, _put(upd, P("dp", None)), (0, 3)), expected, P("dp", None))
        vals, ixs = meshsim.lax.top_k(xc, 3)
        order = np.argsort(-a, axis=1, kind="stable")[:, :3]
        _check(vals, np.take_along_axis(a, order, 1), P("dp", None))
        _check(ixs, order, P("dp", None))
        _check(mjnp.argsort(xc, axis=-1), np.argsort(a, axis=-1, kind="stable"), P("dp", None))


@pytest.mark.parametrize("spec", [P("dp"), P("dp", None, "tp"), P(("dp", "tp")), P("tp", None, "dp"),
                                  P(None, None, "tp")], ids=str)
def test_at_updates_with_window_dims_run_shard_local(spec):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((8, 6, 4)).astype(np.float32)
    idx = rng.integers(-6, 6, 5).astype(np.int32)
    u = rng.standard_normal((8, 5, 4)).astype(np.float32)
    at = (slice(None), idx)
    with meshsim.set_mesh(MESH):
        x, i = _put(a, spec), _put(idx, P())
        with meshsim.debug.record_collectives() as log:
            added = x.at[:, i].add(u)
            written = x.at[:, i].set(2.0)
            low = x.at[:, i].min(0.25)
            scaled = meshsim.jit(lambda v, j: v.at[:, j, :].multiply(3.0))(x, i)
        assert log == []  # the window dims stay where they are; the indexed dim is whole
        typed = meshsim.typeof(x).sharding.spec
        for ufunc, got, arg in [(np.add, added, u), (None, written, 2.0), (np.minimum, low, 0.25),
                                (np.multiply, scaled, 3.0)]:
            expected = a.copy()
            if ufunc is None:
                expected[at] = arg
            else:
                ufunc.at(expected, at, arg)
            _check(got, expected, typed)
        grad = meshsim.grad(lambda v: (v.at[:, i].multiply(2.0) ** 2).sum())(x)
        factor = np.ones_like(a)
        np.multiply.at(factor, at, 2.0)
        _check(grad, 2 * a * factor ** 2, typed)


def _random_reshape(rng):
    """A shape, a spec over MESH for it and a new shape that splits or merges one dim."""
    entries = [None, "dp", "tp", ("dp", "tp"), ("tp", "dp")]
    while True:
        shape = [int(rng.choice([1, 2, 4, 8, 16])) for _ in range(int(rng.integers(1, 4)))]
        spec = P(*[entries[i] for i in rng.choice(len(entries), len(shape))])
        try:
            meshsim.typeof(_put(np.zeros(shape, np.float32), spec))
        except ValueError:  # an axis used twice, or a dim it does not divide
            continue
        d = int(rng.integers(len(shape)))
        if rng.random() < 0.5 and shape[d] > 1:  # split dim d
            f = int(rng.choice([f for f in (2, 4, 8) if shape[d] % f == 0] or [1]))
            new = shape[:d] + [shape[d] // f, f] + shape[d + 1:]
        elif d + 1 < len(shape):  # merge dims d, d+1
            new = shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2:]
        else:
            continue
        return tuple(shape), spec, tuple(new)


@pytest.mark.parametrize("seed", range(10))
def test_reshape_types_values_and_movement(libs, seed):
    rng = np.random.default_rng(seed)
    shape, spec, new = _random_reshape(rng)
    a = rng.standard_normal(shape).astype(np.float32)
    out_specs = [None, P(), P("dp"), P(*([None] * (len(new) - 1) + ["tp"]))]
    for out in out_specs:
        def case(m, out=out):
            x = m.put(a, *spec)
            return m.jnp.reshape(x, new) if out is None else m.jnp.reshape(x, new, out_sharding=m.P(*out))
        ours, theirs = (outcome(lib, case) for lib in libs)
        assert ours == theirs, (shape, spec, new, out)
        if ours[0] != "ok":
            continue
        with meshsim.set_mesh(MESH):
            x = _put(a, spec)
            with meshsim.debug.record_collectives() as log:
                got = case(libs[0])
            jitted = meshsim.jit(lambda v, out=out: mjnp.reshape(v, new, out_sharding=out))(x)
        typed = meshsim.typeof(got).sharding.spec
        _check(got, a.reshape(new), typed)
        _check(jitted, a.reshape(new), typed)
        if out is None and len(new) > len(shape):
            assert log == []  # JAX's split rule keeps every block where it is
        for rec in log:  # a reshard to coarser blocks elsewhere permutes them first, as XLA does
            assert rec.name in ("all_gather", "all_to_all", "ppermute")


def test_reshape_merge_moves_only_what_it_must():
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    with meshsim.set_mesh(MESH):
        x = _put(a, P("dp", "tp"))
        with meshsim.debug.record_collectives() as log:
            flat = x.reshape(64)
            kept = _put(a.reshape(64), P(("dp", "tp"))).reshape((8, 8), out_sharding=P("dp"))
    _check(flat, a.reshape(64), P(("dp", "tp")))
    _check(kept, a, P("dp", None))
    # each device lacks the other half of its row (8 floats, 4 held), then half of its dp rows
    assert [(c.name, c.axes, c.bytes) for c in log] == [("all_to_all", ("tp",), 16), ("all_gather", ("tp",), 32)]

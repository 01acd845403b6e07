"""lax.ragged_dot / ragged_dot_general (JAX's `ragged_dot_general` primitive):
values against NumPy and JAX over random shapes and group sizes (empty groups,
sums below and equal to the rows), all three modes, dtypes and
preferred_element_type, the jaxpr, gradients, errors against JAX, and use
under jit and inside shard_map."""
import numpy as np
import pytest

import meshsim as jax
import meshsim.numpy as jnp
from meshsim import lax
from meshsim.sharding import Mesh, PartitionSpec as P

RNG = np.random.default_rng(11)
RDN = lax.RaggedDotDimensionNumbers


def np_ragged_dot(lhs, rhs, group_sizes):
    """Rows [start_i, start_i + size_i) of lhs times rhs[i]; the rest zero."""
    out = np.zeros((lhs.shape[0], rhs.shape[2]), np.result_type(lhs, rhs))
    start = 0
    for i, size in enumerate(group_sizes):
        out[start:start + size] = lhs[start:start + size] @ rhs[i]
        start += size
    return out


def random_group_sizes(m, g, kind):
    """`g` sizes summing to m ("full"), to less than m ("short"), with empty groups."""
    total = int(RNG.integers(0, m + 1)) if kind == "short" else m
    cuts = np.sort(RNG.integers(0, total + 1, size=g - 1))
    sizes = np.diff(np.concatenate([[0], cuts, [total]]))
    if kind == "empty" and g > 1:  # one group moves its rows to another
        i, j = RNG.choice(g, 2, replace=False)
        sizes[j] += sizes[i]
        sizes[i] = 0
    return sizes.astype(np.int32)


@pytest.mark.parametrize("kind", ["full", "short", "empty"])
@pytest.mark.parametrize("trial", range(4))
def test_ragged_dot_matches_numpy_and_jax(kind, trial, real_jax):
    m, k, n, g = (int(RNG.integers(1, 9)) for _ in range(4))
    lhs = RNG.standard_normal((m, k)).astype(np.float32)
    rhs = RNG.standard_normal((g, k, n)).astype(np.float32)
    gs = random_group_sizes(m, g, kind)
    got = lax.ragged_dot(lhs, rhs, jnp.asarray(gs))
    assert got.shape == (m, n) and got.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), np_ragged_dot(lhs, rhs, gs), rtol=1e-5, atol=1e-5)
    want = real_jax.lax.ragged_dot(lhs, rhs, gs)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    if kind == "short":
        assert not np.asarray(got)[gs.sum():].any()


def test_all_groups_empty_and_zero_rows():
    rhs = RNG.standard_normal((3, 4, 2)).astype(np.float32)
    out = lax.ragged_dot(np.ones((5, 4), np.float32), rhs, jnp.zeros(3, jnp.int32))
    assert not np.asarray(out).any()
    assert lax.ragged_dot(np.ones((0, 4), np.float32), rhs, jnp.zeros(3, jnp.int32)).shape == (0, 2)


@pytest.mark.parametrize("dtypes,preferred", [
    ((np.float32, np.float32), None),
    ((np.float32, np.int32), None),
    ((np.int32, np.int32), None),
    ((np.int8, np.int8), np.dtype(np.int32)),
    ((np.int16, np.int8), None),
    ((np.bool_, np.bool_), None),
    ((np.float32, np.float32), np.dtype(np.int32)),
    ((np.int32, np.int32), np.dtype(np.float32)),
])
@pytest.mark.parametrize("gs_dtype", [np.int32, np.uint8])
def test_dtypes_and_preferred_element_type_match_jax(dtypes, preferred, gs_dtype, real_jax):
    lhs = (RNG.standard_normal((6, 3)) * 3).astype(dtypes[0])
    rhs = (RNG.standard_normal((3, 3, 2)) * 3).astype(dtypes[1])
    gs = np.array([2, 0, 3], gs_dtype)
    got = lax.ragged_dot(lhs, rhs, jnp.asarray(gs), preferred_element_type=preferred)
    want = real_jax.lax.ragged_dot(lhs, rhs, gs, preferred_element_type=preferred)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64),
                               rtol=1e-5, atol=1e-5)


def test_negative_group_sizes_mask_as_jax(real_jax):
    lhs = RNG.standard_normal((7, 3)).astype(np.float32)
    rhs = RNG.standard_normal((3, 3, 4)).astype(np.float32)
    for gs in ([3, -1, 2], [-2, 5, 4], [9, 1, 1]):
        gs = np.array(gs, np.int32)
        np.testing.assert_allclose(np.asarray(lax.ragged_dot(lhs, rhs, jnp.asarray(gs))),
                                   np.asarray(real_jax.lax.ragged_dot(lhs, rhs, gs)), rtol=1e-5, atol=1e-5)


def test_jaxpr_prints_as_jax(real_jax):
    args = (np.ones((6, 3), np.float32), np.ones((2, 3, 4), np.float32), np.array([2, 3], np.int32))
    assert str(jax.make_jaxpr(lax.ragged_dot)(*args)) == str(real_jax.make_jaxpr(real_jax.lax.ragged_dot)(*args))
    f = lambda m: lambda a, b, c: m.lax.ragged_dot(a, b, c, preferred_element_type=np.dtype(np.float32))  # noqa: E731
    assert str(jax.make_jaxpr(f(jax))(*args)) == str(real_jax.make_jaxpr(f(real_jax))(*args))


# --- ragged_dot_general: the three modes ------------------------------------------

GENERAL_CASES = [
    # noncontracting with a batch dim, group_sizes per batch row [b, g] and shared [g]
    ((2, 5, 3), (3, 2, 3, 4), (([2], [2]), ([0], [1])), [1], [0], [[1, 2, 2], [0, 4, 1]]),
    ((2, 5, 3), (3, 2, 3, 4), (([2], [2]), ([0], [1])), [1], [0], [2, 0, 2]),
    # noncontracting: ragged dim after another free dim, group dim last on rhs, two contractions
    ((3, 6, 2, 4), (2, 4, 5, 3), (([2, 3], [0, 1]), ([], [])), [1], [3],
     [[1, 2, 3], [0, 0, 6], [2, 2, 1]]),
    ((5, 3), (4, 3, 2), (([1], [1]), ([], [])), [0], [2], [1, 3]),
    # contracting: result gets a leading group dim
    ((4, 6), (6, 5), (([1], [0]), ([], [])), [1], [], [2, 1, 3]),
    ((2, 4, 6), (2, 6, 5), (([2], [1]), ([0], [0])), [2], [], [[0, 6, 0], [3, 1, 1]]),
    ((3, 6, 4), (4, 6, 2), (([2, 1], [0, 1]), ([], [])), [1], [], [[1, 2], [3, 3], [0, 5], [6, 0]]),
    # batch: a plain batched product
    ((2, 5, 3), (2, 3, 4), (([2], [1]), ([0], [0])), [0], [], [1, 1]),
]


@pytest.mark.parametrize("case", range(len(GENERAL_CASES)))
def test_ragged_dot_general_modes_match_jax(case, real_jax):
    lshape, rshape, dot_dims, ragged, group, gs = GENERAL_CASES[case]
    lhs = RNG.standard_normal(lshape).astype(np.float32)
    rhs = RNG.standard_normal(rshape).astype(np.float32)
    gs = np.array(gs, np.int32)
    got = lax.ragged_dot_general(lhs, rhs, jnp.asarray(gs), RDN(dot_dims, ragged, group))
    want = real_jax.lax.ragged_dot_general(lhs, rhs, gs, real_jax.lax.RaggedDotDimensionNumbers(
        dot_dims, ragged, group))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


# --- gradients --------------------------------------------------------------------

@pytest.mark.parametrize("case", [0, 2, 3])
def test_gradients_match_jax(case, real_jax):
    lshape, rshape, dot_dims, ragged, group, gs = GENERAL_CASES[case]
    lhs = RNG.standard_normal(lshape).astype(np.float32)
    rhs = RNG.standard_normal(rshape).astype(np.float32)
    gs = np.array(gs, np.int32)

    def loss(mod):
        dims = mod.lax.RaggedDotDimensionNumbers(dot_dims, ragged, group)
        w = np.linspace(-1, 1, 1 + int(np.prod(lshape))).astype(np.float32)

        def f(a, b):
            out = mod.lax.ragged_dot_general(a, b, gs, dims)
            return (out * w[:out.size].reshape(out.shape) if out.size <= w.size else out).sum()
        return f

    got = jax.grad(loss(jax), argnums=(0, 1))(lhs, rhs)
    want = real_jax.grad(loss(real_jax), argnums=(0, 1))(lhs, rhs)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-4)


def test_gradient_matches_numpy_with_empty_and_short_groups():
    lhs = RNG.standard_normal((9, 4))
    rhs = RNG.standard_normal((4, 4, 3))
    gs = np.array([3, 0, 4, 0], np.int32)  # 7 of 9 rows
    ct = RNG.standard_normal((9, 3))
    _, pullback = jax.vjp(lambda a, b: lax.ragged_dot(a, b, jnp.asarray(gs)), lhs.astype(np.float32),
                          rhs.astype(np.float32))
    d_lhs, d_rhs = pullback(ct.astype(np.float32))
    want_lhs, want_rhs = np.zeros_like(lhs), np.zeros_like(rhs)
    start = 0
    for i, size in enumerate(gs):
        rows = slice(start, start + size)
        want_lhs[rows] = ct[rows] @ rhs[i].T
        want_rhs[i] = lhs[rows].T @ ct[rows]
        start += size
    np.testing.assert_allclose(np.asarray(d_lhs), want_lhs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(d_rhs), want_rhs, rtol=1e-4, atol=1e-4)


def test_grad_jaxpr_uses_ragged_dots(real_jax):
    args = (np.ones((6, 3), np.float32), np.ones((2, 3, 4), np.float32))
    gs = np.array([2, 3], np.int32)

    def eqns(mod):
        jaxpr = mod.make_jaxpr(mod.grad(lambda a, b: mod.lax.ragged_dot(a, b, gs).sum(), argnums=(0, 1)))(*args)
        return [line.strip() for line in str(jaxpr).splitlines() if "ragged_dot_dimension_numbers=" in line]

    assert len(eqns(jax)) == 3 and sorted(eqns(jax)) == sorted(eqns(real_jax))


# --- errors -----------------------------------------------------------------------

LHS = np.ones((7, 3), np.float32)
RHS = np.ones((3, 3, 4), np.float32)

ERROR_CASES = [
    ("group count", lambda m: m.lax.ragged_dot(LHS, RHS, np.array([1, 2], np.int32))),
    ("float group sizes", lambda m: m.lax.ragged_dot(LHS, RHS, np.array([1.0, 2.0, 3.0], np.float32))),
    ("scalar group sizes", lambda m: m.lax.ragged_dot(LHS, RHS, np.array(3, np.int32))),
    ("2-d group sizes", lambda m: m.lax.ragged_dot(LHS, RHS, np.ones((2, 3), np.int32))),
    ("contracting size", lambda m: m.lax.ragged_dot(LHS[:, :2], RHS, np.array([1, 2, 3], np.int32))),
    ("narrower preferred", lambda m: m.lax.ragged_dot(LHS.astype(np.int32), RHS.astype(np.int32),
                                                      np.array([1, 2, 3], np.int32),
                                                      preferred_element_type=np.dtype(np.int8))),
    ("no rhs group dim", lambda m: m.lax.ragged_dot_general(
        LHS, RHS, np.array([1, 2, 3], np.int32), m.lax.RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], []))),
    ("group dim contracted", lambda m: m.lax.ragged_dot_general(
        LHS, RHS, np.array([1, 2, 3], np.int32), m.lax.RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [1]))),
    ("group dim out of range", lambda m: m.lax.ragged_dot_general(
        LHS, RHS, np.array([1, 2, 3], np.int32), m.lax.RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [5]))),
    ("ragged dim out of range", lambda m: m.lax.ragged_dot_general(
        LHS, RHS, np.array([1, 2, 3], np.int32), m.lax.RaggedDotDimensionNumbers((([1], [1]), ([], [])), [2], [0]))),
    ("two ragged dims", lambda m: m.lax.ragged_dot_general(
        LHS, RHS, np.array([1, 2, 3], np.int32), m.lax.RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0, 1], [0]))),
    ("contracting with group dim", lambda m: m.lax.ragged_dot_general(
        np.ones((4, 6), np.float32), np.ones((6, 5), np.float32), np.array([2, 1, 3], np.int32),
        m.lax.RaggedDotDimensionNumbers((([1], [0]), ([], [])), [1], [1]))),
    ("batched group sizes shape", lambda m: m.lax.ragged_dot_general(
        np.ones((2, 5, 3), np.float32), np.ones((3, 2, 3, 4), np.float32), np.ones((3, 3), np.int32),
        m.lax.RaggedDotDimensionNumbers((([2], [2]), ([0], [1])), [1], [0]))),
    ("grad of contracting mode", lambda m: m.grad(lambda a: m.lax.ragged_dot_general(
        a, np.ones((6, 5), np.float32), np.array([2, 1, 3], np.int32),
        m.lax.RaggedDotDimensionNumbers((([1], [0]), ([], [])), [1], [])).sum())(np.ones((4, 6), np.float32))),
]


@pytest.mark.parametrize("name", [c[0] for c in ERROR_CASES])
def test_errors_match_jax(name, real_jax):
    call = dict(ERROR_CASES)[name]
    with pytest.raises(Exception) as want:
        call(real_jax)
    with pytest.raises(type(want.value)) as got:
        call(jax)
    assert str(got.value) == str(want.value)


def test_group_offset_is_not_implemented():
    with pytest.raises(NotImplementedError, match="group_offset"):
        lax.ragged_dot(LHS, RHS, jnp.array([1, 2, 3], jnp.int32), group_offset=jnp.array([0], jnp.int32))


# --- jit and shard_map ------------------------------------------------------------

def test_under_jit_matches_numpy():
    lhs = RNG.standard_normal((10, 4)).astype(np.float32)
    rhs = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    f = jax.jit(lambda a, b, g: lax.ragged_dot(a, b, g) * 2.0)
    for gs in ([4, 0, 6], [1, 2, 3], [0, 0, 10]):
        gs = np.array(gs, np.int32)
        np.testing.assert_allclose(np.asarray(f(lhs, rhs, jnp.asarray(gs))), 2 * np_ragged_dot(lhs, rhs, gs),
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(8,), (2, 4)])
def test_inside_shard_map_each_device_has_its_groups(shape):
    """Experts split over 'ep': each device multiplies its own rows by its own
    experts with its own group sizes; gradients flow back through shard_map."""
    mesh = Mesh(np.array(jax.devices()).reshape(shape), ("ep",) if len(shape) == 1 else ("dp", "ep"))
    ep = shape[-1]
    rows, k, n, local_experts = 6, 3, 4, 2
    lhs = RNG.standard_normal((ep * rows, k)).astype(np.float32)
    rhs = RNG.standard_normal((ep * local_experts, k, n)).astype(np.float32)
    gs = np.stack([random_group_sizes(rows, local_experts, "short") for _ in range(ep)]).astype(np.int32)

    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=(P("ep"), P("ep"), P("ep")), out_specs=P("ep"))
    def f(x, w, g):
        return lax.ragged_dot(x, w, g[0])

    want = np.concatenate([np_ragged_dot(lhs[d * rows:(d + 1) * rows], rhs[d * local_experts:(d + 1) * local_experts],
                                         gs[d]) for d in range(ep)])
    np.testing.assert_allclose(np.asarray(f(lhs, rhs, jnp.asarray(gs))), want, rtol=1e-5, atol=1e-5)

    d_lhs, d_rhs = jax.grad(lambda x, w: f(x, w, jnp.asarray(gs)).sum(), argnums=(0, 1))(lhs, rhs)
    ones = np.ones((rows, n))
    for d in range(ep):
        start = 0
        for e in range(local_experts):
            r = slice(d * rows + start, d * rows + start + gs[d, e])
            np.testing.assert_allclose(np.asarray(d_lhs)[r], ones[:gs[d, e]] @ rhs[d * local_experts + e].T,
                                       rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(np.asarray(d_rhs)[d * local_experts + e], lhs[r].T @ ones[:gs[d, e]],
                                       rtol=1e-4, atol=1e-4)
            start += gs[d, e]

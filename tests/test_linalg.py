"""dot_general and the products built on it (matmul, dot, vdot, inner, outer,
tensordot, einsum): values against NumPy, dtypes and errors against JAX."""
import numpy as np
import pytest

import meshsim as jax
import meshsim.numpy as jnp
from meshsim import lax

RNG = np.random.default_rng(7)


def _random(shape, dtype=np.float32):
    if dtype == np.bool_:
        return RNG.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        lo = 0 if np.issubdtype(dtype, np.unsignedinteger) else -4
        return RNG.integers(lo, 5, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _close(got, want, rtol=1e-4, atol=1e-4):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got.astype(np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol)


def _einsum_spec(x_ndim, y_ndim, lc, rc, lb, rb):
    """The einsum string equivalent to a dot_general, for the NumPy reference."""
    letters = iter("abcdefghijklmnop")
    xs, ys = [None] * x_ndim, [None] * y_ndim
    for a, b in list(zip(lb, rb)) + list(zip(lc, rc)):
        xs[a] = ys[b] = next(letters)
    xs = [c or next(letters) for c in xs]
    ys = [c or next(letters) for c in ys]
    out = [xs[a] for a in lb] + [c for i, c in enumerate(xs) if i not in lb + lc] + \
          [c for i, c in enumerate(ys) if i not in rb + rc]
    return "".join(xs) + "," + "".join(ys) + "->" + "".join(out)


# --- dot_general ---------------------------------------------------------------------

def _random_dot_problem():
    size = lambda: int(RNG.choice([0, 1, 2, 3, 5, 17]))  # noqa: E731
    nb, nc, nl, nr = (int(RNG.integers(0, k)) for k in (3, 3, 3, 3))
    batch, contract = [size() for _ in range(nb)], [size() for _ in range(nc)]
    lhs_logical = batch + contract + [size() for _ in range(nl)]
    rhs_logical = batch + contract + [size() for _ in range(nr)]
    lperm, rperm = RNG.permutation(len(lhs_logical)), RNG.permutation(len(rhs_logical))
    linv, rinv = np.argsort(lperm), np.argsort(rperm)
    lb = [int(linv[i]) for i in range(nb)]
    rb = [int(rinv[i]) for i in range(nb)]
    lc = [int(linv[nb + i]) for i in range(nc)]
    rc = [int(rinv[nb + i]) for i in range(nc)]
    return ([lhs_logical[i] for i in lperm], [rhs_logical[i] for i in rperm], lc, rc, lb, rb)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8, np.uint8, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_dot_general_random_dimension_numbers(dtype):
    _check_random_dot_generals(dtype)


def test_dot_general_float64_with_x64(x64):
    _check_random_dot_generals(np.float64)


def _check_random_dot_generals(dtype):
    for _ in range(60):
        lshape, rshape, lc, rc, lb, rb = _random_dot_problem()
        x, y = _random(lshape, dtype), _random(rshape, dtype)
        # Also exercise non-contiguous operands: transposed copies and reversed views.
        if RNG.random() < 0.3 and x.ndim >= 2:
            x = np.swapaxes(np.swapaxes(x, 0, 1).copy(), 0, 1)
        if RNG.random() < 0.3 and y.ndim >= 1:
            y = y[::-1]
        got = lax.dot_general(x, y, ((lc, rc), (lb, rb)))
        want = np.einsum(_einsum_spec(x.ndim, y.ndim, lc, rc, lb, rb), x.astype(np.float64), y.astype(np.float64))
        if dtype == np.bool_:
            want = want > 0
        elif np.issubdtype(dtype, np.integer):
            want = want.astype(np.int64).astype(dtype)  # integer products wrap like XLA's
        assert got.dtype == dtype
        _close(got, want)


@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt"])
@pytest.mark.parametrize("m,k,n", [(33, 17, 9), (1, 40, 7), (6, 40, 1), (1, 5, 1), (8, 1, 8)])
def test_dot_general_reads_transposed_operands_in_place(layout, m, k, n):
    """Column-major operands reach BLAS through transpose flags (and gemv for
    vector shapes); the results must not depend on the layout."""
    a = _random((m, k))
    b = _random((k, n))
    a_in = np.asfortranarray(a) if layout[0] == "t" else a
    b_in = np.asfortranarray(b) if layout[1] == "t" else b
    _close(lax.dot_general(a_in, b_in, (((1,), (0,)), ((), ()))), a.astype(np.float64) @ b)
    _close(jnp.matmul(jnp.transpose(jnp.asarray(a.T.copy())), b_in), a.astype(np.float64) @ b)
    batched_a, batched_b = _random((3, m, k)), _random((3, k, n))
    _close(lax.dot_general(batched_a, batched_b.transpose(0, 2, 1).copy(), (((2,), (2,)), ((0,), (0,)))),
           np.einsum("bmk,bkn->bmn", batched_a.astype(np.float64), batched_b))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("spec", ["bqhd,bkhd->bhqk", "bhqk,bkhd->bhqd", "qbhd,hkbd->bhqk"])
def test_dot_general_batch_dims_apart_in_memory(real_jax, dtype, spec):
    """Batch dims that do not merge into one stride (attention's batch and head
    dims around the sequence dim) are read in place, each matrix at its own
    offset: the same bits as JAX's dot of packed copies, within rounding."""
    sizes = dict(b=2, h=3, q=5, k=4, d=6)
    xs, ys = spec.split("->")[0].split(",")
    x = _random(tuple(sizes[c] for c in xs), dtype)
    y = _random(tuple(sizes[c] for c in ys), dtype)
    with jax.enable_x64(dtype == np.float64):
        got = np.asarray(jax.jit(lambda x, y: jnp.einsum(spec, x, y))(x, y))
    want = np.einsum(spec, x.astype(np.float64), y.astype(np.float64))
    assert got.dtype == dtype
    _close(got, want)
    real = real_jax.numpy.einsum(spec, x.astype(np.float32), y.astype(np.float32))
    _close(got, np.asarray(real), rtol=1e-5, atol=1e-5)


def test_dot_general_broadcast_operand():
    row = jnp.broadcast_to(jnp.asarray(_random((1, 6))), (4, 6))
    w = _random((6, 3))
    _close(lax.dot_general(row, w, (((1,), (0,)), ((), ()))), np.asarray(row).astype(np.float64) @ w)


def test_dot_general_mixed_and_preferred_types(real_jax):
    rlax = real_jax.lax
    dn = (((1,), (0,)), ((), ()))
    cases = [(np.int8, np.float32, None), (np.int8, np.int8, np.float32), (np.int8, np.int8, np.int32),
             (np.int32, np.uint32, None), (np.int32, np.uint8, None), (np.uint8, np.uint8, np.int32),
             (np.bool_, np.bool_, None), (np.bool_, np.bool_, np.int32), (np.float32, np.float32, np.int32)]
    for lt, rt, pref in cases:
        x, y = _random((2, 3), lt), _random((3, 4), rt)
        want = rlax.dot_general(x, y, dn, preferred_element_type=pref)
        got = lax.dot_general(x, y, dn, preferred_element_type=pref)
        assert got.dtype == want.dtype, (lt, rt, pref)
        _close(got, np.asarray(want))
    with pytest.raises(TypeError, match="must not be narrower"):
        lax.dot_general(_random((2, 3), np.int32), _random((3, 2), np.int32), dn, preferred_element_type=np.int8)


def test_dot_general_errors():
    x, y = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(TypeError, match=r"contracting dimensions to have the same shape, got \(2,\) and \(3,\)"):
        lax.dot_general(x, y, (((0,), (0,)), ((), ())))
    with pytest.raises(TypeError, match="lhs dimension numbers to be nonnegative"):
        lax.dot_general(x, y, (((2,), (0,)), ((), ())))
    with pytest.raises(TypeError, match="equal numbers of lhs_batch and rhs_batch"):
        lax.dot_general(x, y, (((1,), (0,)), ((0,), ())))
    with pytest.raises(TypeError, match="batch dimensions to have the same shape"):
        lax.dot_general(x, y, (((1,), (0,)), ((0,), (1,))))
    with pytest.raises(TypeError, match="disjoint from contracting"):
        lax.dot_general(x, y, (((1,), (0,)), ((1,), (0,))))
    with pytest.raises(TypeError, match="contracting dimensions to be distinct"):
        lax.dot_general(np.ones((3, 3)), np.ones((3, 3)), (((0, 0), (0, 1)), ((), ())))
    with pytest.raises(TypeError, match="dimension_numbers must be"):
        lax.dot_general(x, y, ((1,), (0,)))


def test_lax_dot_and_batch_matmul():
    a, b, v = _random((3, 4)), _random((4, 5)), _random((4,))
    _close(lax.dot(a, b), a.astype(np.float64) @ b)
    _close(lax.dot(a, v), a.astype(np.float64) @ v)
    _close(lax.dot(v, v), v.astype(np.float64) @ v)
    with pytest.raises(ValueError, match="dimension_numbers must be specified"):
        lax.dot(_random((2, 3, 4)), b)
    x, y = _random((2, 3, 4)), _random((2, 4, 5))
    _close(lax.batch_matmul(x, y), x.astype(np.float64) @ y)
    with pytest.raises(ValueError, match="at least 2D"):
        lax.batch_matmul(v, v)
    with pytest.raises(ValueError, match="same ndim"):
        lax.batch_matmul(x, b)


# --- jnp products ------------------------------------------------------------------

MATMUL_SHAPES = [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((3, 4), (4, 5)), ((2, 3, 4), (4, 5)),
                 ((3, 4), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 6)),
                 ((1, 3, 4), (1, 4, 2)), ((0, 4), (4, 3)), ((3, 0), (0, 2)), ((2, 1, 1, 3), (1, 3, 1))]


@pytest.mark.parametrize("a_shape,b_shape", MATMUL_SHAPES, ids=str)
def test_matmul_matches_numpy(a_shape, b_shape):
    a, b = _random(a_shape), _random(b_shape)
    want = np.matmul(a.astype(np.float64), b)
    _close(jnp.matmul(a, b), want)
    _close(jnp.asarray(a) @ jnp.asarray(b), want)
    _close(jax.jit(jnp.matmul)(a, b), want)


@pytest.mark.parametrize("a_shape,b_shape", [((), (3,)), ((4,), ()), ((4,), (4,)), ((3, 4), (4,)),
                                             ((3, 4), (4, 5)), ((2, 3, 4), (5, 4, 6)), ((4,), (2, 4, 3))], ids=str)
def test_dot_inner_outer_tensordot_vdot(a_shape, b_shape):
    a, b = _random(a_shape), _random(b_shape)
    a64 = a.astype(np.float64)
    _close(jnp.dot(a, b), np.dot(a64, b))
    if a.ndim and b.ndim and a_shape[-1] == b_shape[-1]:
        _close(jnp.inner(a, b), np.inner(a64, b))
    _close(jnp.outer(a, b), np.outer(a64, b))
    if a.size == b.size:
        _close(jnp.vdot(a, b), np.vdot(a64, b))
    k = min(a.ndim, b.ndim, 1)
    if k == 0 or a_shape[-1:] == b_shape[:1]:
        _close(jnp.tensordot(a, b, k), np.tensordot(a64, b, k))



@pytest.mark.parametrize("seed", range(6))
def test_complex_vdot_conjugates_its_first_operand(seed):
    """NumPy's and JAX's vdot: sum(conj(a) * b) over the flattened operands (complex a, b or
    both; real first operands are not touched)."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in rng.integers(1, 5, int(rng.integers(1, 3))))
    a = (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(np.complex64)
    b = (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(np.complex64)
    a = a.real.copy() if seed % 3 == 1 else a
    b = b.real.copy() if seed % 3 == 2 else b
    got = np.asarray(jnp.vdot(a, b))
    np.testing.assert_allclose(got, np.vdot(a.astype(np.complex128), b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(jax.jit(jnp.vdot)(a, b)), got, rtol=1e-6)

def test_tensordot_axes_forms():
    a, b = _random((3, 4, 5)), _random((5, 4, 2))
    a64 = a.astype(np.float64)
    _close(jnp.tensordot(a, b, [[1, 2], [1, 0]]), np.tensordot(a64, b, [[1, 2], [1, 0]]))
    _close(jnp.tensordot(a, b, (2, 0)), np.tensordot(a64, b, (2, 0)))
    _close(jnp.tensordot(a, b, (-1, -3)), np.tensordot(a64, b, (-1, -3)))
    c = _random((4, 5, 6))
    _close(jnp.tensordot(a, c, 2), np.tensordot(a64, c, 2))
    _close(jnp.tensordot(a, c, 0), np.tensordot(a64, c, 0))
    with pytest.raises(TypeError, match="exceeds input ranks"):
        jnp.tensordot(a, b, 4)
    with pytest.raises(TypeError, match="equal length"):
        jnp.tensordot(a, b, [[1, 2], [0]])
    with pytest.raises(TypeError, match="axes argument must be"):
        jnp.tensordot(a, b, "x")


def test_product_dtypes_match_jax(real_jax):
    rjnp = real_jax.numpy
    pairs = [(np.int8, np.int8), (np.int8, np.uint8), (np.float32, np.int32), (np.bool_, np.bool_),
             (np.int32, np.int32), (np.uint8, np.uint16)]
    for lt, rt in pairs:
        a, b = _random((2, 3), lt), _random((3, 2), rt)
        for name in ("matmul", "dot", "tensordot"):
            args = (a, b, 1) if name == "tensordot" else (a, b)
            want, got = getattr(rjnp, name)(*args), getattr(jnp, name)(*args)
            assert got.dtype == want.dtype, (name, lt, rt)
            _close(got, np.asarray(want))
        want, got = rjnp.einsum("ij,jk->ik", a, b), jnp.einsum("ij,jk->ik", a, b)
        assert got.dtype == want.dtype
    for fn in ("dot", "matmul", "vdot", "inner", "outer"):
        args = (2.0, 3.0) if fn in ("dot", "inner") else (np.ones(3, np.float32), 2.0 * np.ones(3, np.float32))
        want, got = real_jax.typeof(getattr(rjnp, fn)(*args)), jax.typeof(getattr(jnp, fn)(*args))
        assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, want.weak_type), fn
    want = rjnp.dot(np.ones((2, 2), np.int8), np.ones((2, 2), np.int8), preferred_element_type=np.float32)
    got = jnp.dot(np.ones((2, 2), np.int8), np.ones((2, 2), np.int8), preferred_element_type=np.float32)
    assert got.dtype == want.dtype


def test_matmul_errors():
    with pytest.raises(TypeError, match=r"contracting dimensions to have the same shape, got \(4,\) and \(5,\)"):
        jnp.matmul(np.ones((3, 4)), np.ones((5, 6)))
    with pytest.raises(TypeError, match=r"\(4,\) and \(5,\)"):
        jnp.asarray(np.ones((3, 4))) @ jnp.asarray(np.ones((5, 6)))
    with pytest.raises(ValueError, match="matmul input operand 0 must have ndim at least 1"):
        jnp.matmul(np.ones(()), np.ones((5, 6)))
    with pytest.raises(ValueError, match=r"Incompatible types for matmul arguments: float32\[2,3,4\] and float32\[3,4,5\]"):
        jnp.matmul(np.ones((2, 3, 4), np.float32), np.ones((3, 4, 5), np.float32))
    with pytest.raises(TypeError, match=r"got \(12,\) and \(10,\)"):
        jnp.vdot(np.ones((3, 4)), np.ones((2, 5)))
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        jnp.matmul([[1.0]], np.ones((1, 1)))


# --- einsum ---------------------------------------------------------------------------

EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,i->", [(6,), (6,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(1, 3, 4), (5, 4, 2)]),
    ("...ij,jk", [(2, 2, 3, 4), (4, 5)]),
    ("bsd,de->bse", [(2, 5, 8), (8, 3)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ij", [(3, 4)]),
    ("ji", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,ij->ij", [(1, 4), (5, 4)]),
    ("ijk,kl,lm->im", [(2, 3, 4), (4, 5), (5, 6)]),
    ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij,j", [(0, 3), (3,)]),
    ("i->", [(0,)]),
    ("ij,jk->ik", [(3, 0), (0, 2)]),
]


@pytest.mark.parametrize("spec,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_matches_numpy(spec, shapes):
    ops = [_random(s) for s in shapes]
    want = np.einsum(spec, *[o.astype(np.float64) for o in ops])
    _close(jnp.einsum(spec, *ops), want)
    _close(jnp.einsum(spec, *ops, optimize="greedy"), want)


def test_einsum_integer_bool_and_interleaved_forms(real_jax):
    a, b = _random((3, 4), np.int8), _random((4, 2), np.int8)
    got = jnp.einsum("ij,jk->ik", a, b)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(np.asarray(got), (a.astype(np.int64) @ b).astype(np.int8))
    bools = _random((5,), np.bool_)
    for spec in ("i->", "i,i->"):
        ops = (bools,) * spec.count("i,") + (bools,)
        want, got = real_jax.numpy.einsum(spec, *ops), jnp.einsum(spec, *ops)
        assert got.dtype == want.dtype and bool(got) == bool(want)
    x, y = _random((3, 4)), _random((4, 5))
    _close(jnp.einsum(x, [0, 1], y, [1, 2], [0, 2]), x.astype(np.float64) @ y)
    _close(jnp.einsum(x, [Ellipsis, 1], [1, Ellipsis]), x.T)
    got = jnp.einsum("i,i->", np.ones(3, np.float32), np.ones(3, np.float32), preferred_element_type=np.int32)
    assert got.dtype == np.int32


def test_einsum_errors():
    with pytest.raises(ValueError, match="Size of label 'j' for operand 1"):
        jnp.einsum("ij,jk->ik", np.ones((3, 4)), np.ones((5, 6)))
    with pytest.raises(ValueError, match="Number of einsum subscripts, 2, must be equal to the number of operands, 1"):
        jnp.einsum("ij,jk->ik", np.ones((3, 4)))
    with pytest.raises(ValueError, match="Output character 'i' appeared more than once"):
        jnp.einsum("ij->ii", np.ones((3, 4)))
    with pytest.raises(ValueError, match="Output character 'k' did not appear in the input"):
        jnp.einsum("ij->k", np.ones((3, 4)))
    with pytest.raises(ValueError, match="does not contain the correct number of indices for operand 0"):
        jnp.einsum("i,i", 2.0, np.ones(3))
    with pytest.raises(ValueError, match="Size of label 'i' for operand 0"):
        jnp.einsum("ii", np.ones((3, 4)))


def test_einsum_under_jit_is_one_dot_general():
    x, w = _random((2, 5, 8)), _random((8, 3))
    f = jax.jit(lambda a, b: jnp.einsum("bsd,de->bse", a, b))
    _close(f(x, w), np.einsum("bsd,de->bse", x.astype(np.float64), w))
    jaxpr = str(jax.make_jaxpr(lambda a, b: jnp.einsum("bsd,de->bse", a, b))(x, w))
    assert jaxpr.count("dot_general") == 1 and "transpose" not in jaxpr

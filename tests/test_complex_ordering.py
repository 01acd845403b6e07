"""Complex numbers ordered as JAX orders them, against real JAX on CPU:
lexicographically on (real, imag). max/min pick by two float comparisons and a
select (a NaN part loses), reductions and scans fold in order from -inf+0j /
inf+0j, sort/argsort use each part as a float key (NaNs last, -0.0 == 0.0),
scatters combine with complex arithmetic; argmax/argmin, clip, top_k and
cross-device max/min of complex values fail as JAX's do."""
import itertools

import numpy as np
import pytest

import meshsim as ms
import meshsim.numpy as mnp
from meshsim import lax as mlax
from meshsim.errors import JaxRuntimeError
from meshsim.sharding import PartitionSpec as P

jax = pytest.importorskip("jax")
jnp = jax.numpy

NAN, INF = np.nan, np.inf


def same_bits(a, b):
    """Equal dtype, shape and parts bit for bit (any NaN matches any NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype.kind == "c":
        return same_bits(a.real, b.real) and same_bits(a.imag, b.imag)
    if a.dtype.kind in "biu":
        return np.array_equal(a, b)
    width = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    return bool(np.all((np.isnan(a) & np.isnan(b)) | (a.view(width) == b.view(width))))


def complex_of(re, im, dtype=np.complex64):
    out = np.empty(np.shape(re), dtype)
    out.real, out.imag = re, im  # part by part: keeps -0.0 and NaN parts
    return out


PARTS = [0.0, -0.0, 1.0, -1.0, 2.5, INF, -INF, NAN]
EDGE = complex_of(*zip(*itertools.product(PARTS, PARTS)))  # 64 values, every pairing


def ties_and_nans(shape, seed, dtype=np.complex64):
    """Small integer parts (many ties in either part), with NaN and infinite parts sprinkled in."""
    r = np.random.default_rng(seed)
    re = r.integers(-2, 3, shape).astype(np.float64)
    im = r.integers(-2, 3, shape).astype(np.float64)
    re[r.random(shape) < 0.08] = NAN
    im[r.random(shape) < 0.08] = NAN
    re[r.random(shape) < 0.05] = -INF
    im[r.random(shape) < 0.05] = INF
    return complex_of(re, im, dtype)


# ---- elementwise max/min ------------------------------------------------------------

@pytest.mark.parametrize("name", ["lax.max", "lax.min", "maximum", "minimum", "fmax", "fmin"])
def test_binary_max_min_bit_for_bit_over_every_pair_of_edge_values(name):
    x, y = (np.array(v) for v in zip(*itertools.product(EDGE, EDGE)))
    if name.startswith("lax."):
        got, want = getattr(mlax, name[4:])(x, y), getattr(jax.lax, name[4:])(x, y)
    else:
        got, want = getattr(mnp, name)(x, y), getattr(jnp, name)(x, y)
    assert same_bits(got, want)


def test_max_min_with_broadcast_scalars_jit_and_vmap():
    x = ties_and_nans((5, 6), 1)
    for f, g in ((lambda a: mnp.maximum(a, 1 + 1j), lambda a: jnp.maximum(a, 1 + 1j)),
                 (lambda a: mnp.minimum(0.5j, a), lambda a: jnp.minimum(0.5j, a))):
        assert same_bits(f(x), g(x))
        assert same_bits(ms.jit(f)(x), jax.jit(g)(x))
        assert same_bits(ms.vmap(f)(x), jax.vmap(g)(x))


# ---- reductions and scans -------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((37,), None), ((6, 9), 0), ((6, 9), 1), ((4, 3, 5), (0, 2)),
                                        ((4, 3, 5), 1), ((1,), 0), ((2, 1), 1), ((3, 0), 0)])
@pytest.mark.parametrize("name", ["max", "min", "nanmax", "nanmin", "ptp"])
def test_reductions_fold_in_order_as_jax(name, shape, axis):
    x = ties_and_nans(shape, 2 + len(shape))
    if x.size == 0 or (name == "ptp" and x.size < 2):
        kw = dict(initial=0j) if name in ("max", "min") else None
        if kw is None:
            return
        assert same_bits(getattr(mnp, name)(x, axis=axis, **kw), getattr(jnp, name)(x, axis=axis, **kw))
        return
    assert same_bits(getattr(mnp, name)(x, axis=axis), getattr(jnp, name)(x, axis=axis))


def test_reductions_at_the_identity_and_a_single_element():
    # -inf-1j is below the identity -inf+0j: a reduction over two elements starts from the
    # identity, one over a single element is that element (XLA drops the reduction).
    for vals in ([complex(-INF, -1), complex(-INF, -2)], [complex(-INF, -1)], [complex(NAN, 0), 1j],
                 [1j, complex(NAN, 0)], [complex(INF, 1), complex(INF, 2)]):
        x = np.array(vals, np.complex64)
        for name in ("max", "min"):
            assert same_bits(getattr(mnp, name)(x), getattr(jnp, name)(x)), (name, vals)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("axis,reverse", [(0, False), (1, False), (0, True), (1, True)])
def test_cumulative_max_min(name, axis, reverse):
    x = ties_and_nans((7, 6), 10 + axis)
    x[0, 0] = complex(-INF, -1)
    got = getattr(mlax, name)(x, axis=axis, reverse=reverse)
    assert same_bits(got, getattr(jax.lax, name)(x, axis=axis, reverse=reverse))
    assert same_bits(ms.jit(lambda a: getattr(mlax, name)(a, axis=axis, reverse=reverse))(x), got)


def test_complex128_under_x64():
    x = ties_and_nans((5, 8), 20, np.complex128)
    with jax.enable_x64(True), ms.enable_x64(True):
        for name in ("max", "min"):
            assert same_bits(getattr(mnp, name)(x, axis=1), getattr(jnp, name)(jnp.asarray(x), axis=1))
        assert same_bits(mnp.maximum(x, x[::-1]), jnp.maximum(jnp.asarray(x), jnp.asarray(x[::-1])))
        assert same_bits(mnp.sort(x, axis=0), jnp.sort(jnp.asarray(x), axis=0))
        assert same_bits(mlax.cummin(x, axis=1), jax.lax.cummin(jnp.asarray(x), axis=1))


# ---- sorting --------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((64,), -1), ((6, 9), 0), ((6, 9), 1), ((3, 4, 5), 1)])
def test_sort_and_argsort_lexicographic_nans_last(shape, axis):
    x = ties_and_nans(shape, 30 + len(shape)) if shape != (64,) else EDGE.copy()
    assert same_bits(mnp.sort(x, axis=axis), jnp.sort(x, axis=axis))
    assert same_bits(mnp.argsort(x, axis=axis), jnp.argsort(x, axis=axis))
    assert same_bits(mnp.argsort(x, axis=axis, descending=True), jnp.argsort(x, axis=axis, descending=True))
    assert same_bits(mnp.sort(x, axis=axis, descending=True), jnp.sort(x, axis=axis, descending=True))


def test_lax_sort_with_a_complex_key_carries_other_operands():
    x = ties_and_nans((20,), 40)
    v = np.arange(20, dtype=np.int32)
    got = mlax.sort((x, v), num_keys=1)
    want = jax.lax.sort((x, v), num_keys=1)
    assert same_bits(got[0], want[0]) and same_bits(got[1], want[1])
    assert same_bits(mnp.lexsort((x, x.real)), jnp.lexsort((x, x.real)))


def test_searchsorted_on_a_sorted_complex_array():
    a = np.sort(ties_and_nans((30,), 41))
    q = ties_and_nans((12,), 42)
    for side in ("left", "right"):
        assert same_bits(mnp.searchsorted(jnp.sort(a), q, side=side), jnp.searchsorted(jnp.sort(a), q, side=side))


def test_grad_through_sort_max_and_maximum():
    x = complex_of(np.array([1.0, 1.0, -2.0, 3.0, 3.0]), np.array([0.5, -1.0, 2.0, 0.0, 0.0]))
    y = x[::-1].copy()

    def losses(np_):
        return [lambda a: np_.real(np_.sum(np_.sort(a) * np_.arange(1, 6))),
                lambda a: np_.real(np_.max(a)) + np_.imag(np_.min(a)),
                lambda a: np_.real(np_.sum(np_.maximum(a, y) * (1 + 2j)))]

    for f, g in zip(losses(mnp), losses(jnp)):
        assert same_bits(ms.grad(f)(x), jax.grad(g)(x))


# ---- scatters -------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["set", "add", "mul", "min", "max", "get"])
def test_scatter_methods_with_duplicate_indices(method):
    r = np.random.default_rng(50)
    base = ties_and_nans((6, 4), 51) + complex_of(r.standard_normal((6, 4)), r.standard_normal((6, 4)))
    upd = ties_and_nans((9, 4), 52) * np.complex64(0.75 - 1.25j)
    idx = r.integers(0, 6, 9)

    def run(np_, base, upd):
        ref = np_.asarray(base).at[idx]
        return ref.get() if method == "get" else getattr(ref, method)(upd)

    assert same_bits(run(mnp, base, upd), run(jnp, base, upd))
    # operands as arguments: XLA would fold a closed-over scatter at compile time (without FMAs)
    assert same_bits(ms.jit(lambda b, u: run(mnp, b, u))(base, upd), jax.jit(lambda b, u: run(jnp, b, u))(base, upd))


def test_scatter_add_gradient_on_complex():
    x = complex_of(np.arange(4.0), -np.arange(4.0))
    idx = np.array([0, 2, 0])

    def loss(np_):
        return lambda u: np_.real(np_.sum(np_.asarray(x).at[idx].add(u) * (2 - 1j)))

    u = complex_of(np.ones(3), np.ones(3))
    assert same_bits(ms.grad(loss(mnp))(u), jax.grad(loss(jnp))(u))


# ---- what JAX refuses ----------------------------------------------------------------

def test_argmax_argmin_clip_and_top_k_refuse_complex_as_jax():
    x = np.array([1 + 1j, 2 - 1j], np.complex64)
    for name, op in (("argmax", "gt"), ("argmin", "lt")):
        text = (f"{op} does not accept dtype complex64 at position 0. Accepted dtypes at position 0 are "
                "subtypes of integer, floating, bool.")
        with pytest.raises(TypeError) as want:
            getattr(jnp, name)(x)
        assert str(want.value) == text
        with pytest.raises(TypeError) as got:
            getattr(mnp, name)(x)
        assert str(got.value) == text
    with pytest.raises(ValueError) as want:
        jnp.clip(x, 0, 1)
    with pytest.raises(ValueError) as got:
        mnp.clip(x, 0, 1)
    assert str(got.value) == str(want.value)
    with pytest.raises(ValueError, match="Clip received a complex value"):
        mnp.clip(np.float32(1), 1j)
    with pytest.raises(ValueError, match="^top_k is not compatible with complex inputs."):
        mlax.top_k(x, 1)
    with pytest.raises(ValueError, match="^top_k is not compatible with complex inputs."):
        jax.lax.top_k(x, 1)


@pytest.mark.parametrize("name", ["pmax", "pmin"])
def test_pmax_pmin_of_complex_fail_at_run_time_as_jax_and_psum_works(name):
    mesh = ms.make_mesh((8,), ("x",))
    jmesh = jax.make_mesh((8,), ("x",))
    x = ties_and_nans((8,), 60)
    f = ms.shard_map(lambda a: getattr(mlax, name)(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P())
    g = jax.shard_map(lambda a: getattr(jax.lax, name)(a, "x"), mesh=jmesh, in_specs=jax.P("x"), out_specs=jax.P())
    jx = jax.device_put(x, jax.NamedSharding(jmesh, jax.P("x")))
    with pytest.raises(jax.errors.JaxRuntimeError, match="^UNIMPLEMENTED: Unsupported reduction computation"):
        g(jx)
    with pytest.raises(JaxRuntimeError, match="^UNIMPLEMENTED: Unsupported reduction computation"):
        np.asarray(f(ms.device_put(x, ms.sharding.NamedSharding(mesh, P("x")))))
    s = ms.shard_map(lambda a: mlax.psum(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P())
    t = jax.shard_map(lambda a: jax.lax.psum(a, "x"), mesh=jmesh, in_specs=jax.P("x"), out_specs=jax.P())
    y = np.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-3.0)
    np.testing.assert_allclose(np.asarray(s(ms.device_put(y, ms.sharding.NamedSharding(mesh, P("x"))))),
                               np.asarray(t(jax.device_put(y, jax.NamedSharding(jmesh, jax.P("x"))))), rtol=1e-6)

"""complex64 (and complex128 under x64) against real JAX on CPU: promotion with
weak Python complex scalars, creation, NumPy interchange, casts, elementwise
arithmetic (bit for bit where XLA's formulas are plain), abs, sign and the
transcendental functions bit for bit (XLA's expansions; the rest within a few
units of float32's last place), branch cuts, -0.0, inf and NaN parts
included, comparisons, reductions, matmul through complex BLAS,
collectives moving 8-byte elements, autodiff with JAX's conjugate convention,
vmap and sharded arrays."""
import itertools
import warnings

import ml_dtypes
import numpy as np
import pytest

import meshsim as ms
import meshsim.numpy as mnp
from meshsim import lax as mlax
from meshsim.sharding import PartitionSpec as P

jax = pytest.importorskip("jax")
jnp = jax.numpy


def rng(seed):
    return np.random.default_rng(seed)


def random_complex(shape, seed, dtype=np.complex64, scale=3.0):
    r = rng(seed)
    return (r.standard_normal(shape) * scale + 1j * r.standard_normal(shape) * scale).astype(dtype)


def edge_complex(dtype=np.complex64):
    """Random values plus parts from {+-0, +-1, +-inf, NaN, huge, tiny} in every pairing."""
    real_t = np.float32 if dtype == np.complex64 else np.float64
    info = np.finfo(real_t)
    parts = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, np.inf, -np.inf, np.nan, float(info.max) / 2, float(info.tiny) * 4]
    grid = list(itertools.product(parts, parts))
    vals = np.empty(len(grid), dtype)
    vals.real = np.array([a for a, _ in grid], real_t)  # set part by part: keeps -0.0
    vals.imag = np.array([b for _, b in grid], real_t)
    return np.concatenate([vals, random_complex(100, 7, dtype), random_complex(50, 8, dtype, scale=0.01)])


def same_bits(a, b):
    """Equal part for part, bit for bit, except that any NaN matches any NaN."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype.kind in "biu":
        return np.array_equal(a, b)
    if a.dtype.kind == "c":
        return same_bits(a.real, b.real) and same_bits(a.imag, b.imag)
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(nan | (a.view(width) == b.view(width))))


def close(a, b, ulps=4):
    """Each part within `ulps` units of the last place of the larger part's
    magnitude; infinities and NaNs where JAX has them."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    eps = np.finfo(a.real.dtype).eps
    scale = np.maximum(np.abs(b.real), np.abs(b.imag))
    for pa, pb in ((a.real, b.real), (a.imag, b.imag)):
        finite = np.isfinite(pb) & np.isfinite(scale)
        bad = ~finite & ~((np.isnan(pa) & np.isnan(pb)) | (pa == pb))
        assert not bad.any(), (a[bad][:5], b[bad][:5])
        err = np.abs(pa[finite].astype(np.float64) - pb[finite]) / np.maximum(scale[finite], np.finfo(pb.dtype).tiny)
        assert (err <= ulps * eps).all(), (a[finite][err > ulps * eps][:5], b[finite][err > ulps * eps][:5])


# ---- dtypes, promotion, creation ---------------------------------------------

PROMO = ["bool", "int8", "uint8", "int32", "uint32", "float16", "bfloat16", "float32", "complex64",
         "float8_e4m3fn"]


def dt(name):
    return np.dtype(getattr(ml_dtypes, name, None) or name)


@pytest.mark.parametrize("x64", [False, True])
def test_promote_types_with_complex_matches_jax(x64):
    names = PROMO + (["float64", "complex128", "int64"] if x64 else [])
    with jax.enable_x64(x64), ms.enable_x64(x64):
        for a, b in itertools.combinations_with_replacement(names, 2):
            try:
                want = jnp.promote_types(dt(a), dt(b))
            except Exception:  # noqa: BLE001
                with pytest.raises(ms.dtypes.TypePromotionError):
                    mnp.promote_types(dt(a), dt(b))
                continue
            assert mnp.promote_types(dt(a), dt(b)) == want, (a, b)
        for a in names:
            for scalar in (2, 2.5, 1j):
                try:
                    want = jax.typeof(jnp.asarray(np.zeros(2, dt(a))) + scalar)
                except jax.dtypes.TypePromotionError:
                    with pytest.raises(ms.dtypes.TypePromotionError):
                        mnp.asarray(np.zeros(2, dt(a))) + scalar
                    continue
                got = ms.typeof(mnp.asarray(np.zeros(2, dt(a))) + scalar)
                assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type), (a, scalar)


def test_python_complex_scalars_are_weak():
    for expr in (lambda np_: np_.asarray(1j), lambda np_: np_.float32(1) + 1j, lambda np_: np_.int32(2) * 1j,
                 lambda np_: np_.bfloat16(1) + 1j, lambda np_: np_.asarray([1, 2j]), lambda np_: 2.5 + np_.asarray(1j)):
        want, got = jax.typeof(expr(jnp)), ms.typeof(expr(mnp))
        assert (str(got), got.weak_type) == (str(want), want.weak_type)


def test_creation_numpy_round_trip_and_printing():
    z = random_complex((3, 4), 1)
    a = mnp.asarray(z)
    assert a.dtype == np.complex64 and np.asarray(a).dtype == np.complex64
    np.testing.assert_array_equal(np.asarray(a), z)
    assert str(ms.typeof(a)) == str(jax.typeof(jnp.asarray(z))) == "complex64[3,4]"
    for make in (lambda m: m.zeros((2, 3), m.complex64), lambda m: m.ones(3, dtype=m.complex64),
                 lambda m: m.full((2,), 1 - 2j), lambda m: m.array([1, 2.5j, -3]),
                 lambda m: m.asarray(np.arange(4)).astype(m.complex64), lambda m: m.complex64(3),
                 lambda m: m.zeros_like(m.asarray(z)), lambda m: m.eye(2, dtype=m.complex64)):
        got, want = make(mnp), make(jnp)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    # complex128 input narrows to complex64 without x64, as JAX does
    assert mnp.asarray(z.astype(np.complex128)).dtype == np.complex64
    assert mnp.iscomplexobj(a) and not mnp.iscomplexobj(a.real) and mnp.issubdtype(a.dtype, mnp.complexfloating)
    assert "c64[3,4]" in str(ms.make_jaxpr(lambda x: x * 2)(a))
    assert str(ms.make_jaxpr(lambda x: x * (1 + 2j))(a)) == str(jax.make_jaxpr(lambda x: x * (1 + 2j))(z))
    assert mnp.finfo(mnp.complex64).eps == jnp.finfo(jnp.complex64).eps


# ---- casts -------------------------------------------------------------------

CAST_TARGETS = ["bool", "int8", "uint8", "int32", "float16", "bfloat16", "float32", "complex64",
                "float8_e4m3fn"]


@pytest.mark.parametrize("to", CAST_TARGETS)
def test_casts_from_complex_take_the_real_part_bit_for_bit(to):
    z = edge_complex()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = mlax.convert_element_type(mnp.asarray(z), dt(to))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = jax.lax.convert_element_type(jnp.asarray(z), dt(to))
    assert same_bits(got, want)
    warned = [w for w in seen if issubclass(w.category, np.exceptions.ComplexWarning)]
    assert bool(warned) == (to != "complex64")


@pytest.mark.parametrize("src", ["bool", "int8", "uint32", "int32", "float16", "bfloat16", "float32",
                                 "float8_e5m2"])
def test_casts_to_complex_bit_for_bit(src):
    vals = np.concatenate([np.array([0, -0.0, 1, -1, np.inf, -np.inf, np.nan, 1e30, 3.5, 250]),
                           rng(2).standard_normal(50) * 100])
    with np.errstate(invalid="ignore", over="ignore"):
        x = vals.astype(dt(src)) if dt(src).kind != "b" else vals > 0
    assert same_bits(mlax.convert_element_type(mnp.asarray(x), np.complex64),
                     jax.lax.convert_element_type(jnp.asarray(x), np.complex64))


def test_astype_complex_to_real_warns_as_jax():
    z = random_complex(5, 3)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        want = jnp.asarray(z).astype(jnp.float32)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        got = mnp.asarray(z).astype(mnp.float32)
    assert same_bits(got, want)
    assert [(w.category, str(w.message)) for w in ours] == [(w.category, str(w.message)) for w in theirs]


# ---- elementwise ---------------------------------------------------------------

EXACT_UNARY = ["negative", "conj", "real", "imag", "square"]
EXACT_BINARY = ["add", "subtract", "multiply", "equal", "not_equal"]


@pytest.mark.parametrize("name", EXACT_UNARY)
def test_exact_unary_bit_for_bit(name):
    z = edge_complex()
    assert same_bits(getattr(mnp, name)(mnp.asarray(z)), getattr(jnp, name)(jnp.asarray(z)))


@pytest.mark.parametrize("name", EXACT_BINARY)
def test_exact_binary_bit_for_bit(name):
    z = edge_complex()
    w = np.roll(z, 17)
    assert same_bits(getattr(mnp, name)(mnp.asarray(z), mnp.asarray(w)),
                     getattr(jnp, name)(jnp.asarray(z), jnp.asarray(w)))
    # with weak Python scalars on either side
    for s in (2.5, 1j, -3):
        assert same_bits(getattr(mnp, name)(mnp.asarray(z), s), getattr(jnp, name)(jnp.asarray(z), s))


# XLA (or JAX's lowering) expands these into real operations (XLA's own exp, log, log1p, expm1,
# the C library's sin, cos and atan2); ours follow the expansions step by step, so results agree
# bit for bit.
EXPANDED_EXACT = ["abs", "sign", "exp", "log", "sqrt", "expm1", "log1p", "sin", "cos", "tan", "sinh", "cosh", "tanh",
                  "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh"]


def expansion_inputs(dtype):
    """edge_complex, subnormal and overflowing parts in every pairing, values near the unit circle
    (where log switches to log1p), tiny and large values."""
    real_t = np.float32 if dtype == np.complex64 else np.float64
    info = np.finfo(real_t)
    parts = [0.0, -0.0, 1.0, -3.0, float(info.tiny) / 4, -float(info.tiny) / 3, 89.0, -104.0, 720.0, 1e30, np.inf, np.nan]
    grid = list(itertools.product(parts, parts))
    vals = np.empty(len(grid), dtype)
    vals.real = np.array([a for a, _ in grid], real_t)
    vals.imag = np.array([b for _, b in grid], real_t)
    r = rng(16)
    circle = (np.exp(1j * r.uniform(-np.pi, np.pi, 200)) * (1 + r.standard_normal(200) * 1e-3)).astype(dtype)
    return np.concatenate([edge_complex(dtype), vals, circle, random_complex(300, 14, dtype),
                           random_complex(100, 15, dtype, scale=1e-3), random_complex(100, 17, dtype, scale=60)])


@pytest.mark.parametrize("x64", [False, True], ids=["complex64", "complex128"])
@pytest.mark.parametrize("name", EXPANDED_EXACT)
def test_expanded_functions_bit_for_bit(name, x64):
    z = expansion_inputs(np.complex128 if x64 else np.complex64)
    with jax.enable_x64(x64), ms.enable_x64(x64):
        ours, theirs = getattr(mnp, name), getattr(jnp, name)
        want = theirs(jnp.asarray(z))
        assert same_bits(ours(mnp.asarray(z)), want)
        assert same_bits(ms.jit(ours)(mnp.asarray(z)), want)
        for n in (1, 3, 5, 7, 13):  # short arrays, which XLA's loops handle apart
            assert same_bits(ours(mnp.asarray(z[-n:])), theirs(jnp.asarray(z[-n:])))


# ulps allowed against XLA's own formulas (glibc's complex functions differ in the last bits)
TRANSCENDENTAL = {"reciprocal": 2, "exp2": 8, "log10": 8, "log2": 8, "angle": 2}


@pytest.mark.parametrize("name", sorted(TRANSCENDENTAL))
def test_transcendental_functions_within_ulps(name):
    z = np.concatenate([random_complex(300, 11), random_complex(100, 12, scale=0.3), random_complex(50, 13, scale=20)])
    close(getattr(mnp, name)(mnp.asarray(z)), getattr(jnp, name)(jnp.asarray(z)), TRANSCENDENTAL[name])


def test_division_bit_for_bit_where_finite_and_special_values_as_jax():
    z, w = edge_complex(), np.roll(edge_complex(), 5)
    got, want = np.asarray(mnp.asarray(z) / mnp.asarray(w)), np.asarray(jnp.asarray(z) / jnp.asarray(w))
    close(got, want, 2)


@pytest.mark.parametrize("name", ["log", "sqrt"])
def test_branch_cuts_and_signed_zeros(name):
    # the negative real axis approached from above (+0.0j) and below (-0.0j)
    re = np.array([-4.0, -1.0, -0.25, 0.0, -0.0, 2.0], np.float32)
    for im in (0.0, -0.0):
        z = np.empty(re.shape, np.complex64)
        z.real, z.imag = re, im
        assert same_bits(getattr(mnp, name)(mnp.asarray(z)), getattr(jnp, name)(jnp.asarray(z)))


def test_power_and_integer_power():
    z = random_complex(40, 21, scale=1.5)
    w = random_complex(40, 22, scale=0.7)
    close(mnp.asarray(z) ** mnp.asarray(w), jnp.asarray(z) ** jnp.asarray(w), 64)
    for k in (0, 1, 2, 3, -1, -2, 5):
        close(mnp.asarray(z) ** k, jnp.asarray(z) ** k, 8)
    close(mnp.asarray(z) ** 0.5, jnp.asarray(z) ** 0.5, 16)


def test_ordering_comparisons_are_lexicographic():
    z = random_complex(30, 5).round()
    w = np.roll(z, 3)
    w.real[::2] = z.real[::2]  # ties in the real part decide by the imaginary part
    for name in ("less", "less_equal", "greater", "greater_equal"):
        np.testing.assert_array_equal(getattr(mnp, name)(mnp.asarray(z), mnp.asarray(w)),
                                      getattr(jnp, name)(jnp.asarray(z), jnp.asarray(w)))
    with pytest.raises(TypeError, match="lt does not accept dtype complex64"):
        mlax.lt(mnp.asarray(z), mnp.asarray(w))


def test_lax_complex_real_imag_conj_and_classification():
    x, y = rng(3).standard_normal((2, 6)).astype(np.float32)
    got, want = mlax.complex(x, y), jax.lax.complex(x, y)
    assert same_bits(got, want)
    assert same_bits(mlax.conj(x), jax.lax.conj(x))  # a real operand gives a complex result
    z = edge_complex()
    for name in ("isnan", "isinf", "isfinite", "iscomplex", "isreal"):
        np.testing.assert_array_equal(getattr(mnp, name)(mnp.asarray(z)), getattr(jnp, name)(jnp.asarray(z)))
    a = mnp.asarray(z)
    assert same_bits(a.real, jnp.asarray(z).real) and same_bits(a.imag, jnp.asarray(z).imag)
    assert same_bits(a.conj(), jnp.asarray(z).conj())
    with pytest.raises(TypeError, match="real does not accept dtype float32"):
        mlax.real(x)


# ---- reductions, matmul ---------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((37,), None), ((6, 50), 1), ((40, 3, 5), 0), ((4, 33), (0, 1)),
                                        ((5, 6, 7), (0, 2))])
def test_reductions(shape, axis):
    z = random_complex(shape, sum(shape), scale=0.5)
    for name in ("sum", "mean", "prod"):
        close(getattr(mnp, name)(mnp.asarray(z), axis=axis), getattr(jnp, name)(jnp.asarray(z), axis=axis),
              64 if name == "prod" else 8)
    if isinstance(axis, int):
        close(mnp.cumsum(mnp.asarray(z), axis=axis), jnp.cumsum(jnp.asarray(z), axis=axis), 64)


@pytest.mark.parametrize("m,k,n", [(3, 5, 4), (16, 64, 8), (1, 300, 7), (9, 1, 1), (2, 0, 3)])
def test_matmul_through_complex_gemm(m, k, n):
    a, b = random_complex((m, k), m * k + 1), random_complex((k, n), k * n + 2)
    got, want = mnp.asarray(a) @ mnp.asarray(b), np.asarray(jnp.asarray(a) @ jnp.asarray(b))
    assert got.dtype == np.complex64
    exact = a.astype(np.complex128) @ b.astype(np.complex128)
    bound = 8 * np.finfo(np.float32).eps * (np.abs(a) @ np.abs(b)) + 1e-30
    assert (np.abs(np.asarray(got) - exact) <= bound).all()
    assert (np.abs(want - exact) <= bound).all()
    # transposed and batched operands, mixed with a real operand
    c = random_complex((4, k, m), 3)
    close(mnp.einsum("bkm,kn->bmn", mnp.asarray(c), mnp.asarray(b)),
          jnp.einsum("bkm,kn->bmn", jnp.asarray(c), jnp.asarray(b)), 64 * max(k, 1))
    r = rng(4).standard_normal((k, n)).astype(np.float32)
    close(mnp.asarray(a) @ mnp.asarray(r), jnp.asarray(a) @ jnp.asarray(r), 64 * max(k, 1))


def test_complex128_with_x64():
    z = random_complex((6, 5), 31, np.complex128)
    with jax.enable_x64(True), ms.enable_x64(True):
        a, ja = mnp.asarray(z), jnp.asarray(z)
        assert a.dtype == np.complex128 and (a + 1j).dtype == np.complex128
        assert (mnp.asarray(np.float64(1)) + 1j).dtype == (jnp.asarray(np.float64(1)) + 1j).dtype
        assert same_bits(a * a + a, ja * ja + ja)
        assert same_bits(mnp.exp(a), jnp.exp(ja))
        close(a @ a.T, ja @ ja.T, 64)
        close(mnp.sum(a, axis=0), jnp.sum(ja, axis=0), 8)
        assert same_bits(mnp.abs(a), jnp.abs(ja))


# ---- collectives, sharding, vmap ---------------------------------------------------

def test_collectives_move_eight_byte_elements():
    mesh = ms.make_mesh((2, 4), ("dp", "tp"), axis_types=(ms.sharding.AxisType.Auto,) * 2)
    jmesh = jax.make_mesh((2, 4), ("dp", "tp"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    x = random_complex((8, 8), 41)

    def body(lax):
        return lambda b: (lax.psum(b, "tp"), lax.all_gather(b, "tp", axis=1, tiled=True),
                          lax.psum_scatter(b, "dp", scatter_dimension=0, tiled=True),
                          lax.ppermute(b, "tp", [(i, (i + 1) % 4) for i in range(4)]),
                          lax.all_to_all(b, "tp", 0, 0, tiled=True))

    def specs(P_):
        return dict(in_specs=P_("dp", "tp"), out_specs=(P_("dp"), P_("dp", "tp"), P_("dp", "tp"), P_("dp", "tp"),
                                                        P_("dp", "tp")))
    f = ms.shard_map(body(mlax), mesh=mesh, **specs(P))
    g = jax.shard_map(body(jax.lax), mesh=jmesh, **specs(jax.sharding.PartitionSpec))
    with ms.debug.record_collectives() as log:
        got = f(x)
    for a, b in zip(got, g(x)):
        assert a.dtype == np.complex64
        close(a, b, 4)
    nbytes = {r.name: r.bytes for r in log}
    block = 4 * 2 * 8  # a [4, 2] complex64 block
    assert nbytes["all_gather"] == block * 3
    assert nbytes["ppermute"] == block
    psum = nbytes.get("psum", nbytes.get("psum_invariant"))
    assert psum == 2 * block * 3 // 4


def test_sharded_arrays_and_vmap():
    mesh = ms.make_mesh((4, 2), ("x", "y"))
    z = random_complex((8, 6), 51)
    w = random_complex((6, 4), 52)
    a = ms.device_put(z, ms.sharding.NamedSharding(mesh, P("x", "y")))
    assert a.dtype == np.complex64 and ms.typeof(a).dtype == np.complex64
    with ms.set_mesh(mesh), ms.debug.record_collectives() as log:
        whole = ms.sharding.reshard(a, P())
    np.testing.assert_array_equal(np.asarray(whole), z)
    # Each device holds 6 of the 48 elements, 8 bytes each; as XLA, the dims are gathered one
    # at a time, minor first: over y it receives 6 elements, then over x the other 36.
    assert [(r.name, r.bytes) for r in log] == [("all_gather", 6 * 8), ("all_gather", 36 * 8)]
    with ms.sharding.use_mesh(mesh) if hasattr(ms.sharding, "use_mesh") else ms.set_mesh(mesh):
        got = ms.jit(lambda a, b: mnp.exp(a) @ b)(a, mnp.asarray(w))
    close(got, jnp.exp(jnp.asarray(z)) @ jnp.asarray(w), 64)
    close(ms.vmap(lambda r: mnp.sum(r * mnp.conj(r)))(mnp.asarray(z)),
          jax.vmap(lambda r: jnp.sum(r * jnp.conj(r)))(jnp.asarray(z)), 8)


# ---- autodiff ---------------------------------------------------------------------

REAL_OF_COMPLEX = [
    lambda np_, z: np_.sum(np_.abs(z) ** 2),
    lambda np_, z: np_.sum(np_.real(z * np_.conj(z) * 0.5 + z)),
    lambda np_, z: np_.sum(np_.abs(np_.exp(z))),
    lambda np_, z: np_.sum(np_.imag(np_.sin(z) * (1 + 2j))),
    lambda np_, z: np_.sum(np_.real(z @ z.T)),
    lambda np_, z: np_.sum(np_.angle(z)),
    lambda np_, z: np_.real(np_.sum(np_.log(z) / z)),
    lambda np_, z: np_.sum(np_.abs(np_.sqrt(z)) + np_.real(z.astype(np_.complex64) ** 3)),
]


@pytest.mark.parametrize("k", range(len(REAL_OF_COMPLEX)))
def test_grad_of_real_function_of_complex_matches_jax(k):
    f = REAL_OF_COMPLEX[k]
    z = random_complex((3, 3), 60 + k, scale=1.0)
    got = ms.grad(lambda z: f(mnp, z))(mnp.asarray(z))
    want = jax.grad(lambda z: f(jnp, z))(jnp.asarray(z))
    assert got.dtype == want.dtype == np.complex64
    close(got, want, 64)


def test_holomorphic_grad_and_errors():
    z = random_complex((), 70, scale=1.0)
    for f in (lambda np_, z: z ** 3 + 2 * z, lambda np_, z: np_.exp(z) * np_.sin(z), lambda np_, z: 1 / (z + 3)):
        got = ms.grad(lambda z: f(mnp, z), holomorphic=True)(mnp.asarray(z))
        want = jax.grad(lambda z: f(jnp, z), holomorphic=True)(jnp.asarray(z))
        close(got, want, 16)
    with pytest.raises(TypeError, match="For holomorphic differentiation, pass holomorphic=True"):
        ms.grad(lambda z: z * 2)(mnp.asarray(z))
    with pytest.raises(TypeError, match="holomorphic=True requires inputs with complex dtype"):
        ms.grad(lambda x: x * 2, holomorphic=True)(mnp.float32(1))
    y, vjp = ms.vjp(lambda z: z * (2 - 1j), mnp.asarray(z))
    jy, jvjp = jax.vjp(lambda z: z * (2 - 1j), jnp.asarray(z))
    close(vjp(mnp.asarray(np.complex64(1 + 1j)))[0], jvjp(jnp.asarray(np.complex64(1 + 1j)))[0], 2)

"""int4 / uint4 as JAX exposes them (ml_dtypes' one-byte storage) against real
JAX on CPU: creation, NumPy interchange, promotion (only weak Python ints
promote to them), casts (integers wrap, floats saturate) and the arithmetic XLA
on CPU computes in four bits."""
import itertools

import ml_dtypes
import numpy as np
import pytest

import meshsim as ms
import meshsim.numpy as mnp
from meshsim import lax as mlax

jax = pytest.importorskip("jax")
jnp = jax.numpy

INT4 = ["int4", "uint4"]


def dt(name):
    return np.dtype(getattr(ml_dtypes, name, None) or name)


def all_values(name):
    info = ml_dtypes.iinfo(dt(name))
    vals = np.arange(int(info.min), int(info.max) + 1)
    return np.array(list(itertools.product(vals, vals))).T.astype(dt(name))


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    return np.array_equal(a.astype(np.int32), b.astype(np.int32))


@pytest.mark.parametrize("name", INT4)
def test_creation_and_numpy_round_trip(name):
    d = dt(name)
    x = np.array([0, 1, 7, 3, 5], d)
    a = mnp.asarray(x)
    assert a.dtype == d and np.asarray(a).dtype == d and same(a, x)
    assert str(ms.typeof(a)) == str(jax.typeof(jnp.asarray(x)))
    for make in (lambda m: m.zeros(3, getattr(m, name)), lambda m: m.ones((2, 2), getattr(m, name)),
                 lambda m: m.full(4, 3, getattr(m, name)), lambda m: m.asarray([1, 2, 3], getattr(m, name))):
        assert same(make(mnp), make(jnp))
    assert mnp.iinfo(d).max == jnp.iinfo(d).max and mnp.issubdtype(d, mnp.integer)


@pytest.mark.parametrize("name", INT4)
def test_promotion_only_from_weak_ints(name):
    d = dt(name)
    for other in ["int8", "uint8", "int32", "float32", "bfloat16", "int4", "uint4", "bool"]:
        try:
            want = jnp.promote_types(d, dt(other))
        except Exception:  # noqa: BLE001
            with pytest.raises(ms.dtypes.TypePromotionError, match="4-bit integers do not support implicit"):
                mnp.promote_types(d, dt(other))
            continue
        assert mnp.promote_types(d, dt(other)) == want, other
    x = np.array([1, 2, 3], d)
    assert (mnp.asarray(x) + 1).dtype == (jnp.asarray(x) + 1).dtype == d


@pytest.mark.parametrize("name", INT4)
@pytest.mark.parametrize("src", ["int8", "int32", "uint8", "float32", "bfloat16", "bool"])
def test_casts_wrap_integers_and_saturate_floats(name, src):
    vals = np.array([0, 1, -1, 7, 8, -8, -9, 15, 16, 17, 300, -300, 100, 3.7, -3.7, 1e9])
    if dt(src).kind == "f":
        vals = np.concatenate([vals, [np.inf, -np.inf, np.nan, -0.0]])
    with np.errstate(invalid="ignore", over="ignore"):
        x = vals.astype(dt(src)) if dt(src).kind != "b" else vals > 0
    assert same(mlax.convert_element_type(mnp.asarray(x), dt(name)),
                jax.lax.convert_element_type(jnp.asarray(x), dt(name)))


@pytest.mark.parametrize("name", INT4)
@pytest.mark.parametrize("to", ["int8", "int32", "uint8", "float32", "bfloat16", "bool", "int4", "uint4"])
def test_casts_from_four_bits(name, to):
    x = all_values(name)[0]
    assert same(mlax.convert_element_type(mnp.asarray(x), dt(to)),
                jax.lax.convert_element_type(jnp.asarray(x), dt(to)))


BINARY = ["add", "subtract", "multiply", "maximum", "minimum", "equal", "less", "greater_equal",
          "bitwise_and", "bitwise_or", "bitwise_xor"]


@pytest.mark.parametrize("name", INT4)
@pytest.mark.parametrize("op", BINARY)
def test_binary_arithmetic_in_four_bits(name, op):
    x, y = all_values(name)
    assert same(getattr(mnp, op)(mnp.asarray(x), mnp.asarray(y)), getattr(jnp, op)(jnp.asarray(x), jnp.asarray(y)))


@pytest.mark.parametrize("name", INT4)
def test_unary_and_scalar_arithmetic(name):
    x = all_values(name)[0]
    a, ja = mnp.asarray(x), jnp.asarray(x)
    assert same(-a, -ja) and same(a + 3, ja + 3) and same(a * 2, ja * 2)
    assert same(mlax.shift_left(a, mnp.asarray(np.ones_like(x))), jax.lax.shift_left(ja, jnp.ones_like(ja)))
    nonzero = np.where(x.astype(np.int32) == 0, 1, x.astype(np.int32)).astype(x.dtype)
    assert same(mlax.div(a, mnp.asarray(nonzero)), jax.lax.div(ja, jnp.asarray(nonzero)))
    assert same(mlax.rem(a, mnp.asarray(nonzero)), jax.lax.rem(ja, jnp.asarray(nonzero)))


# ---- bit operations within four bits, and what JAX refuses ---------------------------

SHIFTS = ["shift_left", "shift_right_logical", "shift_right_arithmetic"]


@pytest.mark.parametrize("name", INT4)
@pytest.mark.parametrize("op", SHIFTS)
def test_shifts_act_on_the_four_bit_pattern_for_every_pair(name, op):
    # every value by every shift amount, out-of-range and negative amounts included
    x, y = all_values(name)
    assert same(getattr(mlax, op)(x, y), getattr(jax.lax, op)(x, y))
    assert same(ms.jit(getattr(mlax, op))(x, y), getattr(jax.lax, op)(x, y))


@pytest.mark.parametrize("name", INT4)
def test_population_count_clz_invert_and_numpy_shifts(name):
    x, y = all_values(name)
    for op in ("population_count", "clz"):
        assert same(getattr(mlax, op)(x), getattr(jax.lax, op)(x)), op
    assert same(mnp.invert(x), jnp.invert(x))
    assert same(mnp.right_shift(x, y), jnp.right_shift(x, y))
    assert same(mnp.left_shift(x, y), jnp.left_shift(x, y))
    assert same(mnp.asarray(x) >> 1, jnp.asarray(x) >> 1)


@pytest.mark.parametrize("name", INT4)
def test_reductions_and_abs_match_jax_results_or_errors(name):
    x = all_values(name)[0]

    def outcome(f):
        try:
            r = np.asarray(f())
            return "ok", r.dtype, r.astype(np.float64).tolist()
        except Exception as e:  # noqa: BLE001
            return type(e).__name__, str(e)

    for fn in ("sum", "prod", "abs", "mean", "max", "min", "cumsum", "sign", "negative", "argmax"):
        got = outcome(lambda: getattr(mnp, fn)(mnp.asarray(x)))
        want = outcome(lambda: getattr(jnp, fn)(jnp.asarray(x)))
        assert got == want, (fn, got, want)
    for fn in ("abs", "sign", "neg"):
        assert outcome(lambda: getattr(mlax, fn)(mnp.asarray(x))) == outcome(lambda: getattr(jax.lax, fn)(jnp.asarray(x))), fn
    # lax's own reductions wrap in four bits
    for fn in ("reduce_sum", "reduce_max", "reduce_min"):
        assert outcome(lambda: getattr(mlax, fn)(mnp.asarray(x), (0,))) == outcome(
            lambda: getattr(jax.lax, fn)(jnp.asarray(x), (0,))), fn


@pytest.mark.parametrize("name", INT4)
def test_sorting_orders_by_value(name):
    """sort, argsort (stable), descending sorts, lax.sort with a second operand,
    searchsorted and top_k of every four-bit value, over random shapes."""
    info = ml_dtypes.iinfo(dt(name))
    rng = np.random.default_rng(17 if name == "int4" else 19)
    for _ in range(5):
        shape = tuple(int(n) for n in rng.integers(1, 9, int(rng.integers(1, 3))))
        x = rng.integers(int(info.min), int(info.max) + 1, shape).astype(dt(name))
        m, j = mnp.asarray(x), jnp.asarray(x)
        for axis in range(x.ndim):
            assert same(mnp.sort(m, axis=axis), jnp.sort(j, axis=axis))
            assert same(mnp.sort(m, axis=axis, descending=True), jnp.sort(j, axis=axis, descending=True))
            assert same(mnp.argsort(m, axis=axis), jnp.argsort(j, axis=axis))
        other = np.arange(x.size, dtype=np.int32).reshape(shape)
        got = mlax.sort((m, mnp.asarray(other)), num_keys=1)
        want = jax.lax.sort((j, jnp.asarray(other)), num_keys=1)
        assert same(got[0], want[0]) and same(got[1], want[1])
        assert same(ms.jit(lambda a: mnp.sort(a))(x), jax.jit(lambda a: jnp.sort(a))(x))
    keys = np.sort(rng.integers(int(info.min), int(info.max) + 1, 12)).astype(dt(name))
    queries = np.arange(int(info.min), int(info.max) + 1).astype(dt(name))
    for side in ("left", "right"):
        assert same(mnp.searchsorted(mnp.asarray(keys), mnp.asarray(queries), side=side),
                    jnp.searchsorted(jnp.asarray(keys), jnp.asarray(queries), side=side))

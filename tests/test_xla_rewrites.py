"""Rewrites XLA's CPU compiler makes in jitted programs that show in the bits,
against real JAX: a bfloat16 op converted to float32 right away is read before
its rounding (softmax's sum reads exp's float32 values), a complex quotient by a
constant multiplies by its reciprocal, and an eager broadcast_to result is a
fresh buffer that a later division divides by."""
import zlib

import ml_dtypes
import numpy as np
import pytest

import meshsim as ms
import meshsim.numpy as mnp
from meshsim import lax as mlax

jax = pytest.importorskip("jax")
jnp = jax.numpy

BF16 = np.dtype(ml_dtypes.bfloat16)


def rng_for(*parts):
    return np.random.default_rng(zlib.crc32("/".join(map(str, parts)).encode()))


def same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.reshape(-1), want.reshape(-1)
    assert np.array_equal(g.view(np.uint8), w.view(np.uint8)), f"{np.sum(g != w)} of {g.size} differ"


def both(fn, *operands, jit=True):
    """fn(numpy-like module, lax-like module, *operands) under meshsim and JAX."""
    run_ms = (lambda *xs: fn(mnp, mlax, *xs))
    run_jax = (lambda *xs: fn(jnp, jax.lax, *xs))
    if jit:
        run_ms, run_jax = ms.jit(run_ms), jax.jit(run_jax)
    return (run_ms(*[mnp.asarray(x) for x in operands]),
            run_jax(*[jnp.asarray(x) for x in operands]))


@pytest.mark.parametrize("case", range(8))
@pytest.mark.parametrize("jit", [True, False])
def test_bfloat16_softmax(case, jit):
    rng = rng_for("softmax", case)
    shape = (int(rng.integers(1, 9)), int(rng.choice([3, 20, 33, 128, 300])))
    x = (rng.standard_normal(shape) * rng.choice([1, 4, 30])).astype(BF16)
    same_bits(*both(lambda m, _, v: (ms if m is mnp else jax).nn.softmax(v, axis=-1), x, jit=jit))


OPS = {
    "mul": lambda m, a, b: a * b,
    "add": lambda m, a, b: a + b,
    "div": lambda m, a, b: a / b,
    "max": lambda m, a, b: m.maximum(a, b),
    "chain": lambda m, a, b: a * b + a,
    "exp": lambda m, a, b: m.exp(a),
    "tanh": lambda m, a, b: m.tanh(a),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_bfloat16_result_converted_to_float32_under_jit(op):
    rng = rng_for("convert", op)
    a = (rng.standard_normal(500) * 3).astype(BF16)
    b = (rng.standard_normal(500) * 3).astype(BF16)
    fn = OPS[op]

    def program(m, _, x, y):
        r = fn(m, x, y)
        return r.astype(np.float32), r  # the rounded value is still there for other readers

    got, want = both(program, a, b)
    same_bits(got[1], want[1])
    if op in ("exp", "tanh"):
        # float32 exp/tanh inside XLA's fusions are ulps from meshsim's: check the
        # rewrite itself, each against its own float32 op on widened operands
        wide_ms, wide_jax = both(lambda m, _, x, y: fn(m, x.astype(np.float32), y), a, b)
        same_bits(got[0], wide_ms)
        same_bits(want[0], wide_jax)
    else:
        same_bits(got[0], want[0])


@pytest.mark.parametrize("divisor", [3.0, 2 - 0.5j, -7e-3j])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_quotient_by_a_constant(divisor, dtype):
    rng = rng_for("complex-div", divisor, dtype)
    z = (rng.standard_normal(300) * 10.0 ** rng.integers(-3, 4, 300)
         + 1j * rng.standard_normal(300)).astype(dtype)
    with jax.enable_x64(dtype == "complex128"), ms.enable_x64(dtype == "complex128"):
        same_bits(*both(lambda m, _, v: v / divisor, z))            # a constant: reciprocal
        same_bits(*both(lambda m, _, v: v / divisor, z, jit=False))  # an argument: divides
        same_bits(*both(lambda m, _, v, d: v / d, z, np.asarray(divisor, dtype)))  # passed in


@pytest.mark.parametrize("case", range(6))
def test_eager_broadcast_to_divisor_divides(case):
    rng = rng_for("broadcast-divisor", case)
    rows, cols = int(rng.integers(2, 40)), int(rng.integers(2, 40))
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    y = rng.standard_normal((rows, 1)).astype(np.float32)
    # eager: broadcast_to's result is a buffer of its own, so lax.div divides
    same_bits(*both(lambda m, lax, a, b: lax.div(a, m.broadcast_to(b, (rows, cols))), x, y, jit=False))
    # within one jnp call or a jitted program the broadcast stays one: reciprocal
    same_bits(*both(lambda m, lax, a, b: a / b, x, y, jit=False))
    same_bits(*both(lambda m, lax, a, b: lax.div(a, m.broadcast_to(b, (rows, cols))), x, y))

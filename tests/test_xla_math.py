"""exp, log, tanh, erf, log1p, expm1 and logistic as XLA's CPU code computes them (kernels/xla_math.h): bit for bit
with JAX over random values, random bit patterns and each approximation's edge and cut-over
values, eager and jitted, in every float dtype where JAX's result comes from that code."""
import ml_dtypes
import numpy as np
import pytest

import meshsim
import meshsim.numpy as jnp
from meshsim import lax

RNG = np.random.default_rng(0)
F32 = np.finfo(np.float32)


def neighbours(*values, dtype=np.float32):
    """Each value and the floats one ulp either side of it, with both signs."""
    v = np.asarray(values, dtype)
    with np.errstate(over="ignore"):
        out = np.concatenate([v, np.nextafter(v, dtype(np.inf)), np.nextafter(v, dtype(-np.inf))])
    return np.concatenate([out, -out])


# Where each approximation changes branch or saturates, and the inputs around them.
CUT_OVERS = {
    "exp": neighbours(88.72283, 88.7228394, 88.8, 87.33654, 87.8, 88.03, 103.97, 126.5 * np.log(2),
                      np.log(2) / 2, 0.5),
    "log": neighbours(1.0, 0.70710677, 0.7071068, 0.5, 2.0, F32.tiny, F32.max),
    "tanh": neighbours(0.0004, 7.99881172180175781, 7.90531110763549805, 9.0, 20.0),
    "erf": neighbours(3.832506856900711, 3.0, 1.0),
    "log1p": neighbours(0.41421356237309504880, -1.0, -0.5, 1e-4, F32.tiny, 2.0 ** -24, F32.max),
    "expm1": neighbours(0.5, 2.0 ** -126, 88.72283, 88.8, 87.8, 1e-4),
    "logistic": neighbours(87.8, 88.8, 88.72283, 103.97, 16.635532, 0.5),
}
SPECIALS = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40, 1e-45, -1e-45,
                       F32.tiny, -F32.tiny, F32.max, -F32.max, 1.0, -1.0])


def float32_inputs(name, n=60_000):
    ranges = [RNG.uniform(-100, 100, n), RNG.uniform(-10, 10, n), RNG.uniform(-1, 1, n),
              RNG.uniform(-1e-3, 1e-3, n // 4)]
    if name == "log":
        ranges += [np.exp(RNG.uniform(-87, 88, n)), 1 + RNG.uniform(-0.3, 0.4, n)]
    if name == "log1p":
        ranges += [RNG.uniform(-1, 0, n), np.exp(RNG.uniform(-87, 88, n))]
    random_bits = RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([*(r.astype(np.float32) for r in ranges), random_bits,
                           CUT_OVERS[name], SPECIALS])


def assert_same_bits(ours, theirs, x):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    ours, theirs, x = ours.ravel(), theirs.ravel(), np.ravel(x)
    width = np.dtype(f"u{ours.dtype.itemsize}")
    same = ours.view(width) == theirs.view(width)
    nan = np.isnan(ours.astype(np.float64)) & np.isnan(theirs.astype(np.float64))
    assert (same | nan).all(), list(zip(x[~(same | nan)][:5], ours[~(same | nan)][:5],
                                        theirs[~(same | nan)][:5]))


FUNCTIONS = ["exp", "log", "tanh", "erf", "log1p", "expm1", "logistic"]


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_float32_bit_for_bit(real_jax, name, jitted):
    x = float32_inputs(name)
    ours_f = getattr(lax, name)
    ours = (meshsim.jit(ours_f) if jitted else ours_f)(jnp.asarray(x))
    assert_same_bits(ours, getattr(real_jax.lax, name)(x), x)


@pytest.mark.parametrize("name", FUNCTIONS[:4])
def test_nan_payloads_as_xla_returns_them(real_jax, name):
    # exp, tanh and erf return the input NaN quieted, log an all-ones NaN.
    payloads = np.uint32([0x7FC00001, 0xFFC12345, 0x7F800001, 0xFF812345]).view(np.float32)
    ours = np.asarray(getattr(lax, name)(jnp.asarray(payloads)))
    theirs = np.asarray(getattr(real_jax.lax, name)(payloads))
    np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32))


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_narrow_floats_compute_in_float32(real_jax, name, dtype):
    with np.errstate(over="ignore", invalid="ignore"):
        x = float32_inputs(name, 20_000).astype(dtype)
    if dtype == np.float16:  # every float16, subnormals included
        x = np.concatenate([x, np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)])
    assert_same_bits(getattr(lax, name)(jnp.asarray(x)), getattr(real_jax.lax, name)(x), x)


# XLA's loop leaves 3, 5, 6 or 7 trailing elements of a short rank-1 float32 array to libm's
# expf/logf; other shapes of the same sizes run its approximation throughout.
SHAPES = [(n,) for n in range(0, 40)] + [(), (2, 3), (1, 7), (7, 1), (3, 5), (2, 2, 3), (4, 13)]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_small_shape(real_jax, name):
    pool = float32_inputs(name, 2_000)
    for shape in SHAPES:
        x = RNG.choice(pool, shape).astype(np.float32)
        assert_same_bits(getattr(lax, name)(jnp.asarray(x)), real_jax.jit(getattr(real_jax.lax, name))(x),
                         x.ravel())


def test_strided_and_fused_operands(real_jax):
    x = RNG.uniform(-5, 5, (64, 33)).astype(np.float32)
    for name in FUNCTIONS:
        arg = np.abs(x) if name == "log" else x
        ours = meshsim.jit(lambda v: getattr(lax, name)(v.T))(jnp.asarray(arg))
        theirs = real_jax.jit(lambda v: getattr(real_jax.lax, name)(v.T))(arg)
        assert_same_bits(ours, theirs, arg.T)
    for name in ("exp", "log", "tanh"):  # XLA fuses erf into its readers with other code
        arg = np.abs(x) if name == "log" else x
        ours = meshsim.jit(lambda v: getattr(lax, name)(v.T * 2.0) + 1.0)(jnp.asarray(arg))
        theirs = real_jax.jit(lambda v: getattr(real_jax.lax, name)(v.T * 2.0) + 1.0)(arg)
        assert_same_bits(ours, theirs, arg.T)


def test_float64_tanh(x64_with_jax, real_jax):
    n = 50_000
    x = np.concatenate([RNG.uniform(-25, 25, n), RNG.uniform(-1, 1, n), RNG.uniform(-1e-6, 1e-6, n),
                        RNG.integers(0, 2**64, n, dtype=np.uint64).view(np.float64),
                        neighbours(17.714196154005176, 17.6610191624600077, 20.0, dtype=np.float64),
                        np.float64([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -1e-310, 2.2250738585072014e-308])])
    for jitted in (False, True):
        ours = (meshsim.jit(lax.tanh) if jitted else lax.tanh)(jnp.asarray(x))
        assert_same_bits(ours, real_jax.lax.tanh(x), x)


def test_complex_and_float64_keep_their_own_paths(x64_with_jax, real_jax):
    # Complex exp/log/tanh and float64 exp/log/erf are not XLA's float32 code: still close.
    z = (RNG.normal(size=200) + 1j * RNG.normal(size=200)).astype(np.complex64)
    for name in ("exp", "log", "tanh"):
        np.testing.assert_allclose(np.asarray(getattr(lax, name)(jnp.asarray(z))),
                                   np.asarray(getattr(real_jax.lax, name)(z)), rtol=1e-5, atol=1e-6)
    x = RNG.uniform(0.1, 5, 1000)
    for name in ("exp", "log", "erf"):
        np.testing.assert_allclose(np.asarray(getattr(lax, name)(jnp.asarray(x))),
                                   np.asarray(getattr(real_jax.lax, name)(x)), rtol=1e-15)


def test_erf_refuses_complex_as_jax_does(real_jax):
    z = np.complex64([1 + 1j])
    with pytest.raises(TypeError) as theirs:
        real_jax.lax.erf(z)
    with pytest.raises(TypeError) as ours:
        lax.erf(jnp.asarray(z))
    assert str(ours.value) == str(theirs.value)

"""Every float sampler of meshsim.random in every float dtype against JAX's, bit for bit,
for four keys each. The cases that are not bit-identical yet are listed in KNOWN with how
many of the four keys agree and why the others differ; the test fails when a listed case
changes either way (a fix updates the table), and checks that the differing draws are
still close to JAX's."""
import zlib

import ml_dtypes
import numpy as np
import pytest

import meshsim.random as mr

KEYS = 4
DTYPES = ["float32", "bfloat16", "float16", "float64"]
ALPHA = np.array([0.5, 1.5, 3.0], np.float32)

# name -> the draw, given the random module (meshsim's or JAX's), a key, a shape, a dtype
SAMPLERS = {
    "uniform": lambda r, k, s, d: r.uniform(k, s, d, -1.5, 2.0),
    "normal": lambda r, k, s, d: r.normal(k, s, d),
    "truncated_normal": lambda r, k, s, d: r.truncated_normal(k, -1.3, 2.1, s, d),
    "exponential": lambda r, k, s, d: r.exponential(k, s, d),
    "laplace": lambda r, k, s, d: r.laplace(k, s, d),
    "logistic": lambda r, k, s, d: r.logistic(k, s, d),
    "lognormal": lambda r, k, s, d: r.lognormal(k, 0.7, s, d),
    "cauchy": lambda r, k, s, d: r.cauchy(k, s, d),
    "maxwell": lambda r, k, s, d: r.maxwell(k, s, d),
    "double_sided_maxwell": lambda r, k, s, d: r.double_sided_maxwell(k, 0.3, 1.7, s, d),
    "pareto": lambda r, k, s, d: r.pareto(k, 2.5, s, d),
    "rayleigh": lambda r, k, s, d: r.rayleigh(k, 1.5, s, d),
    "weibull_min": lambda r, k, s, d: r.weibull_min(k, 2.0, 1.5, s, d),
    "triangular": lambda r, k, s, d: r.triangular(k, 0.0, 0.3, 1.0, s, d),
    "wald": lambda r, k, s, d: r.wald(k, 1.3, s, d),
    "gumbel": lambda r, k, s, d: r.gumbel(k, s, d),
    "gamma": lambda r, k, s, d: r.gamma(k, 1.7, s, d),
    "loggamma": lambda r, k, s, d: r.loggamma(k, 0.6, s, d),
    "beta": lambda r, k, s, d: r.beta(k, 0.8, 2.5, s, d),
    "dirichlet": lambda r, k, s, d: r.dirichlet(k, ALPHA, s, d),
    "t": lambda r, k, s, d: r.t(k, 4.5, s, d),
    "f": lambda r, k, s, d: r.f(k, 3.0, 5.0, s, d),
    "chisquare": lambda r, k, s, d: r.chisquare(k, 2.5, s, d),
    "ball": lambda r, k, s, d: r.ball(k, 3, 2, s, d),
    "generalized_normal": lambda r, k, s, d: r.generalized_normal(k, 1.5, s, d),
    "multivariate_normal": lambda r, k, s, d: r.multivariate_normal(
        k, np.zeros(2, np.float32), 2 * np.eye(2, dtype=np.float32), s, d),
}

UNISOLATED_F64 = "float64: last-bit differences in some draws; cause not isolated"
NARROW = "bfloat16/float16: some steps round differently from XLA's fused program; cause not isolated"
UNISOLATED = "float32: last-bit differences in some draws; cause not isolated"
# (name, dtype) -> (keys of KEYS that are bit-identical, why the others are not)
KNOWN: dict[tuple[str, str], tuple[int, str]] = {
    ("maxwell", "float32"): (0, UNISOLATED),
    ("gamma", "float32"): (1, UNISOLATED),
    ("loggamma", "float32"): (0, UNISOLATED),
    ("beta", "float32"): (1, UNISOLATED),
    ("f", "float32"): (0, UNISOLATED),
    ("chisquare", "float32"): (3, UNISOLATED),
    ("ball", "float32"): (0, UNISOLATED),
    ("generalized_normal", "float32"): (0, UNISOLATED),
    ("ball", "bfloat16"): (1, NARROW),
    ("logistic", "float16"): (2, NARROW),
    ("wald", "float16"): (3, NARROW),
    ("beta", "float16"): (2, NARROW),
    ("t", "float16"): (2, NARROW),
    ("f", "float16"): (0, NARROW),
    ("chisquare", "float16"): (0, NARROW),
    ("ball", "float16"): (0, NARROW),
    ("generalized_normal", "float16"): (1, NARROW),
    ("maxwell", "float64"): (0, UNISOLATED_F64),
    ("double_sided_maxwell", "float64"): (3, UNISOLATED_F64),
    ("gamma", "float64"): (2, UNISOLATED_F64),
    ("beta", "float64"): (0, UNISOLATED_F64),
    ("dirichlet", "float64"): (1, UNISOLATED_F64),
    ("f", "float64"): (0, UNISOLATED_F64),
    ("ball", "float64"): (1, UNISOLATED_F64),
}


def draws(random, name: str, dtype: str) -> list[np.ndarray]:
    """The sampler's draws for KEYS keys, at one shape drawn for the case (so each library
    compiles the sampler once per case)."""
    rng = np.random.default_rng(zlib.crc32(f"{name}/{dtype}".encode()))
    shape = (int(rng.integers(1, 5)), int(rng.integers(1, 7)))
    seeds = rng.integers(0, 2 ** 31, KEYS)
    return [np.asarray(SAMPLERS[name](random, random.key(int(seed)), shape, dtype)) for seed in seeds]


def bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint8)


# multivariate_normal's draws of a narrow dtype are added to the product with the float32
# factor of the float32 covariance: the result is float32, in JAX as here.
RESULT_DTYPE = {("multivariate_normal", "bfloat16"): "float32", ("multivariate_normal", "float16"): "float32"}


CASES = [(name, dtype) for dtype in DTYPES for name in SAMPLERS]


@pytest.mark.parametrize("name,dtype", CASES)
def test_sampler_is_bit_identical_to_jax(request, real_jax, name, dtype):
    if dtype == "float64":
        request.getfixturevalue("x64_with_jax")
    ours, theirs = draws(mr, name, dtype), draws(real_jax.random, name, dtype)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert a.dtype.name == RESULT_DTYPE.get((name, dtype), dtype)
    identical = sum(np.array_equal(bits(a), bits(b)) for a, b in zip(ours, theirs))
    expected, why = KNOWN.get((name, dtype), (KEYS, ""))
    assert identical == expected, (
        f"{name} {dtype}: {identical} of {KEYS} keys bit-identical to JAX, KNOWN says {expected}"
        + (f" ({why})" if why else ""))
    # where the bits differ, the values still agree to the last few bits
    tolerance = 256 * float(ml_dtypes.finfo(ours[0].dtype).eps)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=tolerance,
                                   atol=tolerance)

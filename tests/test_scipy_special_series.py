"""The series/continued-fraction special functions of `jax.scipy.special` and `jax.lax`
(incomplete gamma and beta, zeta, polygamma, exponential integrals, Bessel I0/I1, erfcx, poch,
bernoulli), the stats built on them (gamma/beta/poisson CDFs), the multivariate normal,
`sem`, `rankdata`, `mode`, `jnp.i0` and `jnp.kaiser`, against JAX 0.10.2 on random arguments,
under jit and grad."""
import numpy as np
import pytest

import meshsim

RNG = np.random.default_rng(7)


def _u(lo, hi, n=40):
    return RNG.uniform(lo, hi, n).astype(np.float32)


A, X, U, B = _u(0.1, 20), _u(0.0, 30), _u(0, 1), _u(0.1, 10)
V = _u(-30, 30)

R0 = _u(1.1, 10)
R1 = _u(0.1, 5)
R2 = _u(0.1, 10)
R3 = _u(0.01, 10)
R4 = _u(0.01, 30)
R5 = _u(-20, 40)
R6 = _u(-3, 9)
R7 = _u(-5, 5)
R8 = _u(0, 4)
MVN_X = np.random.default_rng(3).normal(size=(5, 3)).astype(np.float32)

CASES = {
    "gammainc": lambda sp, lax, st, jnp: sp.gammainc(A, X),
    "gammaincc": lambda sp, lax, st, jnp: sp.gammaincc(A, X),
    "gammainc_edges": lambda sp, lax, st, jnp: sp.gammainc(np.float32([1, 2, 3, 0.5]),
                                                           np.float32([0, np.inf, 1e-3, 50])),
    "betainc": lambda sp, lax, st, jnp: sp.betainc(A / 2, B, U),
    "betainc_edges": lambda sp, lax, st, jnp: sp.betainc(np.float32([1, 2, 3]), np.float32([2, 2, 1]),
                                                         np.float32([0, 1, 0.5])),
    "zeta": lambda sp, lax, st, jnp: sp.zeta(R0, R1),
    "zeta_riemann": lambda sp, lax, st, jnp: sp.zeta(np.float32([2, 3, 4.5]), np.float32(1)),
    "polygamma": lambda sp, lax, st, jnp: sp.polygamma(np.arange(40) % 4, R2),
    "expn": lambda sp, lax, st, jnp: sp.expn(np.arange(40) % 5, R3),
    "exp1": lambda sp, lax, st, jnp: sp.exp1(R4),
    "expi": lambda sp, lax, st, jnp: sp.expi(R5),
    "i0e": lambda sp, lax, st, jnp: sp.i0e(V),
    "i1e": lambda sp, lax, st, jnp: sp.i1e(V),
    "i0": lambda sp, lax, st, jnp: sp.i0(V / 3),
    "i1": lambda sp, lax, st, jnp: sp.i1(V / 3),
    "erfcx": lambda sp, lax, st, jnp: sp.erfcx(R6),
    "poch": lambda sp, lax, st, jnp: sp.poch(R7, R8),
    "bernoulli": lambda sp, lax, st, jnp: sp.bernoulli(12),
    "lax_igamma": lambda sp, lax, st, jnp: (lax.igamma(A, X), lax.igammac(A, X)),
    "lax_betainc": lambda sp, lax, st, jnp: lax.betainc(A, B, U),
    "lax_zeta_polygamma": lambda sp, lax, st, jnp: (lax.zeta(A + 1.5, B),
                                                    lax.polygamma(np.float32(np.arange(40) % 3), A)),
    "lax_bessel": lambda sp, lax, st, jnp: (lax.bessel_i0e(V), lax.bessel_i1e(V)),
    "jnp_i0_kaiser": lambda sp, lax, st, jnp: (jnp.i0(V / 4), jnp.kaiser(12, 3.5), jnp.kaiser(1, 2.0)),
    "gamma_dist": lambda sp, lax, st, jnp: [getattr(st.gamma, f)(X / 3, A / 4 + 0.5, 0.5, 1.5)
                                            for f in ("cdf", "sf", "logcdf", "logsf")],
    "beta_dist": lambda sp, lax, st, jnp: [getattr(st.beta, f)(U, A / 4 + 0.5, B)
                                           for f in ("cdf", "sf", "logcdf", "logsf")],
    "poisson_cdf": lambda sp, lax, st, jnp: st.poisson.cdf(np.arange(40) % 12, A),
    "multivariate_normal": lambda sp, lax, st, jnp: (
        st.multivariate_normal.logpdf(MVN_X,
                                      np.zeros(3, np.float32), np.eye(3, dtype=np.float32) + 0.3),
        st.multivariate_normal.pdf(np.float32([0.5, -1, 2]), np.ones(3, np.float32), 2.0),
        st.multivariate_normal.logpdf(np.float32([0.5, 1]), np.float32(0.2), np.float32(1.5))),
    "sem": lambda sp, lax, st, jnp: (st.sem(MAT), st.sem(MAT, axis=1, ddof=0), st.sem(MAT, axis=None)),
    "rankdata": lambda sp, lax, st, jnp: [st.rankdata(TIES, method=m)
                                          for m in ("average", "min", "max", "dense", "ordinal")],
    "mode": lambda sp, lax, st, jnp: tuple(st.mode(np.array([[1, 2, 2, 3], [4, 4, 1, 1], [7, 7, 7, 0]]),
                                                   axis=1)),
}
MAT = np.random.default_rng(4).normal(size=(6, 5)).astype(np.float32)
TIES = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5], np.float32)


def _compare(ours, theirs, rtol):
    ours_l, theirs_l = meshsim.tree.leaves(ours), meshsim.tree.leaves(theirs)
    assert len(ours_l) == len(theirs_l)
    for a, b in zip(ours_l, theirs_l):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-30)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(real_jax, name):
    import jax.scipy.special as jsp
    import jax.scipy.stats as jst
    import meshsim.scipy.special as msp
    import meshsim.scipy.stats as mst
    ours = CASES[name](msp, meshsim.lax, mst, meshsim.numpy)
    theirs = CASES[name](jsp, real_jax.lax, jst, real_jax.numpy)
    _compare(ours, theirs, rtol=2e-5)


def test_erfcx_where_erfc_underflows():
    """JAX 0.10.2 returns 0 for erfcx(x) once erfc(x) underflows (x > ~9.2); the value is
    ~1/(x sqrt(pi)), as SciPy gives it."""
    import scipy.special
    x = np.float32([9.5, 12.0, 30.0, 1e3])
    np.testing.assert_allclose(np.asarray(meshsim.scipy.special.erfcx(x)),
                               scipy.special.erfcx(x.astype(np.float64)), rtol=1e-5)


@pytest.mark.parametrize("fn", ["gammainc", "betainc", "zeta", "i0e", "expi"])
def test_jit_vmap_and_grad(real_jax, fn):
    import jax.scipy.special as jsp
    import meshsim.scipy.special as msp
    args = {"gammainc": (np.float32(2.5), np.float32(3.0)),
            "betainc": (np.float32(2.0), np.float32(3.0), np.float32(0.4)),
            "zeta": (np.float32(3.0), np.float32(1.5)), "i0e": (np.float32(2.0),),
            "expi": (np.float32(1.5),)}[fn]
    last = len(args) - 1
    for lib, sp in ((meshsim, msp), (real_jax, jsp)):
        f = getattr(sp, fn)
        g = lib.grad(f, argnums=last)(*args)
        j = lib.jit(f)(*args)
        v = lib.vmap(lambda t: f(*args[:-1], t))(np.float32([0.3, 0.5, 0.7]) * args[-1])
        if lib is meshsim:
            ours = (g, j, v)
        else:
            theirs = (g, j, v)
    _compare(ours, theirs, rtol=5e-4)  # gradients of different (equally valid) approximations


def test_polygamma_refuses_float_order():
    with pytest.raises(ValueError, match="must be of integer type"):
        meshsim.scipy.special.polygamma(1.0, 2.0)

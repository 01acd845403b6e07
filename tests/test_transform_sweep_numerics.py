"""A sweep of jax.grad, jax.jvp and jax.vmap (in_axes 0 and 1, and nested) over jnp.linalg,
jax.scipy.linalg, jnp.fft, reduce_window, the cumulative scans, jax.scipy.special and the
jax.random samplers, each against JAX on random shapes. Decompositions enter through their
defining identities (Q R, V diag(w) V^T, U S V^T, L L^T, P L U), which fix the signs and
orders their factors leave free."""
import numpy as np
import pytest

import meshsim
import meshsim.scipy.linalg  # noqa: F401 - meshsim.scipy's submodules, as the cases reach them
import meshsim.scipy.special  # noqa: F401

jax = pytest.importorskip("jax")
import jax.scipy.linalg  # noqa: E402,F401
import jax.scipy.special  # noqa: E402,F401


def _spd(rng, n):
    a = rng.standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


# name -> (function of the library, argument kinds); kinds: "x" (a normal matrix n x n),
# "v" (a vector), "spd", "pos" (positive matrix), "unit" (in (0, 1)), "tri" (lower triangular,
# well conditioned), "key"; every argument but keys is differentiated.
CASES = {
    "linalg.inv": (lambda m: m.numpy.linalg.inv, ["spd"]),
    "linalg.solve": (lambda m: m.numpy.linalg.solve, ["spd", "x"]),
    "linalg.det": (lambda m: m.numpy.linalg.det, ["spd"]),
    "linalg.slogdet": (lambda m: lambda a: m.numpy.linalg.slogdet(a)[1], ["spd"]),
    "linalg.pinv": (lambda m: m.numpy.linalg.pinv, ["spd"]),
    "linalg.cholesky": (lambda m: m.numpy.linalg.cholesky, ["spd"]),
    "linalg.cholesky_identity": (lambda m: lambda a: (lambda c: c @ c.T)(m.numpy.linalg.cholesky(a)), ["spd"]),
    "linalg.qr_identity": (lambda m: lambda a: (lambda q, r: (q @ r, m.numpy.abs(m.numpy.diag(r))))(
        *m.numpy.linalg.qr(a)), ["x"]),
    "linalg.eigh_identity": (lambda m: lambda a: (lambda w, v: (w, (v * w) @ v.T))(
        *m.numpy.linalg.eigh(a)), ["spd"]),
    "linalg.eigvalsh": (lambda m: m.numpy.linalg.eigvalsh, ["spd"]),
    "linalg.svd_identity": (lambda m: lambda a: (lambda u, s, vt: (s, (u * s) @ vt))(
        *m.numpy.linalg.svd(a, full_matrices=False)), ["spd"]),
    "linalg.svdvals": (lambda m: m.numpy.linalg.svdvals, ["spd"]),
    "linalg.norm_2": (lambda m: lambda a: m.numpy.linalg.norm(a, 2), ["spd"]),
    "linalg.norm_nuc": (lambda m: lambda a: m.numpy.linalg.norm(a, "nuc"), ["spd"]),
    "linalg.norm_fro": (lambda m: m.numpy.linalg.norm, ["x"]),
    "linalg.matrix_power": (lambda m: lambda a: m.numpy.linalg.matrix_power(a, 3), ["x"]),
    "linalg.lstsq": (lambda m: lambda a, b: m.numpy.linalg.lstsq(a, b)[0], ["spd", "x"]),
    "linalg.multi_dot": (lambda m: lambda a, b: m.numpy.linalg.multi_dot([a, b, a]), ["x", "x"]),
    "linalg.cond": (lambda m: m.numpy.linalg.cond, ["spd"]),
    "scipy.expm": (lambda m: m.scipy.linalg.expm, ["x"]),
    "scipy.solve_triangular": (lambda m: lambda a, b: m.scipy.linalg.solve_triangular(a, b, lower=True),
                               ["tri", "x"]),
    "scipy.cho_solve": (lambda m: lambda a, b: m.scipy.linalg.cho_solve(m.scipy.linalg.cho_factor(a), b),
                        ["spd", "x"]),
    "scipy.lu_solve": (lambda m: lambda a, b: m.scipy.linalg.lu_solve(m.scipy.linalg.lu_factor(a), b),
                       ["spd", "x"]),
    "scipy.lu_identity": (lambda m: lambda a: (lambda p, l, u: p @ l @ u)(*m.scipy.linalg.lu(a)), ["spd"]),
    "scipy.det": (lambda m: m.scipy.linalg.det, ["spd"]),
    "scipy.inv": (lambda m: m.scipy.linalg.inv, ["spd"]),
    "scipy.sqrtm_identity": (lambda m: lambda a: (lambda s: s @ s)(m.scipy.linalg.sqrtm(a)).real, ["spd"]),
    "scipy.solve_sylvester": (lambda m: lambda a, b, c: m.scipy.linalg.solve_sylvester(a, b, c),
                              ["spd", "spd", "x"]),
    "fft.fft": (lambda m: lambda a: m.numpy.fft.fft(a).real, ["x"]),
    "fft.ifft": (lambda m: lambda a: m.numpy.fft.ifft(a, axis=0).imag, ["x"]),
    "fft.rfft": (lambda m: lambda a: m.numpy.abs(m.numpy.fft.rfft(a)), ["x"]),
    "fft.irfft": (lambda m: lambda a: m.numpy.fft.irfft(a), ["x"]),
    "fft.fft2": (lambda m: lambda a: m.numpy.fft.fft2(a, norm="ortho").imag, ["x"]),
    "fft.rfftn": (lambda m: lambda a: m.numpy.fft.rfftn(a).real, ["x"]),
    "fft.hfft": (lambda m: lambda a: m.numpy.fft.hfft(a, norm="forward"), ["x"]),
    "reduce_window.sum": (lambda m: lambda a: m.lax.reduce_window(a, 0.0, m.lax.add, (2, 1), (1, 1), "SAME"),
                          ["x"]),
    "reduce_window.max": (lambda m: lambda a: m.lax.reduce_window(a, -np.inf, m.lax.max, (2, 2), (1, 1),
                                                                  "VALID"), ["x"]),
    "conv": (lambda m: lambda a, b: m.lax.conv_general_dilated(a[None, None], b[None, None], (1, 1), "SAME")[0, 0],
             ["x", "x"]),
    "cumsum": (lambda m: lambda a: m.numpy.cumsum(a, axis=0), ["x"]),
    "cumprod": (lambda m: lambda a: m.numpy.cumprod(a, axis=1), ["x"]),
    "cummax": (lambda m: lambda a: m.lax.cummax(a, axis=0), ["x"]),
    "cummin": (lambda m: lambda a: m.lax.cummin(a, axis=1, reverse=True), ["x"]),
    "cumlogsumexp": (lambda m: lambda a: m.lax.cumlogsumexp(a, axis=0), ["x"]),
    "associative_scan": (lambda m: lambda a: m.lax.associative_scan(lambda p, q: p * q + q, a, axis=1), ["x"]),
    "special.erf": (lambda m: m.scipy.special.erf, ["x"]),
    "special.erfc": (lambda m: m.scipy.special.erfc, ["x"]),
    "special.erfinv": (lambda m: lambda a: m.scipy.special.erfinv(a * 0.9), ["unit"]),
    "special.gammaln": (lambda m: m.scipy.special.gammaln, ["pos"]),
    "special.digamma": (lambda m: m.scipy.special.digamma, ["pos"]),
    "special.polygamma": (lambda m: lambda a: m.scipy.special.polygamma(1, a), ["pos"]),
    "special.zeta": (lambda m: lambda a: m.scipy.special.zeta(a + 1.5, 2.0), ["pos"]),
    "special.gammainc": (lambda m: lambda x: m.scipy.special.gammainc(2.5, x), ["pos"]),
    "special.gammaincc": (lambda m: lambda x: m.scipy.special.gammaincc(1.5, x), ["pos"]),
    "special.betainc": (lambda m: lambda x: m.scipy.special.betainc(2.0, 3.0, x), ["unit"]),
    "special.i0e": (lambda m: m.scipy.special.i0e, ["x"]),
    "special.i1e": (lambda m: m.scipy.special.i1e, ["x"]),
    "special.ndtr": (lambda m: m.scipy.special.ndtr, ["x"]),
    "special.ndtri": (lambda m: m.scipy.special.ndtri, ["unit"]),
    "special.log_ndtr": (lambda m: m.scipy.special.log_ndtr, ["x"]),
    "special.logsumexp": (lambda m: lambda a: m.scipy.special.logsumexp(a, axis=0), ["x"]),
    "special.xlogy": (lambda m: m.scipy.special.xlogy, ["x", "pos"]),
    "special.xlog1py": (lambda m: m.scipy.special.xlog1py, ["x", "pos"]),
    "special.expit": (lambda m: m.scipy.special.expit, ["x"]),
    "special.logit": (lambda m: m.scipy.special.logit, ["unit"]),
    "special.entr": (lambda m: m.scipy.special.entr, ["pos"]),
    "special.expi": (lambda m: m.scipy.special.expi, ["pos"]),
    "special.exp1": (lambda m: m.scipy.special.exp1, ["pos"]),
    "special.spence": (lambda m: m.scipy.special.spence, ["pos"]),
    "special.sinc": (lambda m: m.numpy.sinc, ["x"]),
    "random.gamma": (lambda m: lambda k, a: m.random.gamma(k, a), ["key", "pos"]),
    "random.beta": (lambda m: lambda k, a, b: m.random.beta(k, a, b), ["key", "pos", "pos"]),
    "random.dirichlet": (lambda m: lambda k, a: m.random.dirichlet(k, a), ["key", "pos"]),
    "random.loggamma": (lambda m: lambda k, a: m.random.loggamma(k, a), ["key", "pos"]),
    "random.chisquare": (lambda m: lambda k, a: m.random.chisquare(k, a), ["key", "pos"]),
    "random.t": (lambda m: lambda k, a: m.random.t(k, a), ["key", "pos"]),
    "random.f": (lambda m: lambda k, a, b: m.random.f(k, a, b), ["key", "pos", "pos"]),
    "random.normal_scaled": (lambda m: lambda k, a: m.random.normal(k, a.shape) * a, ["key", "x"]),
    "random.truncated_normal": (lambda m: lambda k, a: m.random.truncated_normal(k, a - 2, a + 2), ["key", "x"]),
    "random.weibull_min": (lambda m: lambda k, a: m.random.weibull_min(k, a, a + 1), ["key", "pos"]),
    "random.pareto": (lambda m: lambda k, a: m.random.pareto(k, a + 1), ["key", "pos"]),
    "random.multivariate_normal": (lambda m: lambda k, a: m.random.multivariate_normal(
        k, a[0], a @ a.T + 3 * m.numpy.eye(a.shape[0])), ["key", "x"]),
    "random.orthogonal": (lambda m: lambda k, a: m.random.orthogonal(k, a.shape[0]) @ a, ["key", "x"]),
    "random.poisson": (lambda m: lambda k, a: m.random.poisson(k, a * 3).astype(a.dtype) * a, ["key", "pos"]),
    "random.categorical": (lambda m: lambda k, a: m.random.categorical(k, a).astype(a.dtype), ["key", "x"]),
    "random.binomial": (lambda m: lambda k, a: m.random.binomial(k, 5 * a, a / (1 + a)), ["key", "pos"]),
}
# Functions whose values are integers or piecewise constant: compared, not differentiated.
NOT_DIFFERENTIABLE = {"random.poisson", "random.categorical", "random.binomial"}
# Built on schur, which JAX 0.10.2 does not differentiate either: both must refuse alike.
THROUGH_SCHUR = {"scipy.sqrtm_identity", "scipy.solve_sylvester"}


def _arg(rng, kind, n, lib):
    if kind == "key":
        return lib.random.key(int(rng.integers(0, 2**31)))
    if kind == "spd":
        a = _spd(rng, n)
    elif kind == "pos":
        a = rng.uniform(0.5, 3.0, (n, n))
    elif kind == "unit":
        a = rng.uniform(0.05, 0.95, (n, n))
    elif kind == "tri":
        a = np.tril(rng.standard_normal((n, n))) + 2 * n * np.eye(n)
    else:
        a = rng.standard_normal((n, n))
    return a.astype(np.float32)


def _args(name, seed, lib, batch=None):
    """The case's arguments; with `batch` = (sizes...) each gets those leading dims (keys split)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 5))
    out = []
    for kind in CASES[name][1]:
        if batch is None:
            out.append(_arg(rng, kind, n, lib))
        elif kind == "key":
            k = lib.random.key(int(rng.integers(0, 2**31)))
            out.append(lib.random.split(k, batch))
        else:
            out.append(np.stack([_arg(rng, kind, n, lib) for _ in range(int(np.prod(batch)))]).reshape(
                batch + (n, n)))
    return out


def _close(got, want, tol=2e-3):
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        scale = max(1.0, float(np.abs(w).max(initial=0)))
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale)


def _loss(lib, name, ct_seed):
    """sum(f(args) * ct) over f's outputs: its gradient is the VJP of the cotangent ct."""
    f = CASES[name][0](lib)

    def loss(*args):
        outs = jax.tree_util.tree_leaves(f(*args))
        rng = np.random.default_rng(ct_seed)
        return sum((o * rng.standard_normal(o.shape).astype(np.float32)).sum() for o in outs)
    return loss


def _diff_argnums(name):
    return tuple(i for i, k in enumerate(CASES[name][1]) if k != "key")


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("name", sorted(set(CASES) - NOT_DIFFERENTIABLE - THROUGH_SCHUR))
def test_grad_matches_jax(name, seed):
    argnums = _diff_argnums(name)
    got = meshsim.grad(_loss(meshsim, name, seed), argnums=argnums)(*_args(name, seed, meshsim))
    want = jax.grad(_loss(jax, name, seed), argnums=argnums)(*_args(name, seed, jax))
    _close(got, want)


@pytest.mark.parametrize("name", sorted(THROUGH_SCHUR))
def test_grad_through_schur_refused_as_jax(name):
    errors = []
    for lib in (meshsim, jax):
        with pytest.raises(NotImplementedError) as info:
            lib.grad(_loss(lib, name, 0))(*_args(name, 0, lib))
        errors.append(str(info.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("name", sorted(set(CASES) - NOT_DIFFERENTIABLE - THROUGH_SCHUR))
def test_jvp_matches_jax(name):
    argnums = _diff_argnums(name)

    def run(lib):
        args = _args(name, 7, lib)
        rng = np.random.default_rng(8)
        tangents = [rng.standard_normal(args[i].shape).astype(np.float32) for i in argnums]

        def f(*diff):
            full = list(args)
            for i, d in zip(argnums, diff):
                full[i] = d
            return CASES[name][0](lib)(*full)
        return lib.jvp(f, [args[i] for i in argnums], tangents)
    _close(run(meshsim), run(jax))


@pytest.mark.parametrize("axis", [0, 1, "nested"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_matches_jax(name, axis):
    kinds = CASES[name][1]
    if axis == 1 and "key" in kinds:
        pytest.skip("a key array has one axis to map")

    def run(lib):
        f = CASES[name][0](lib)
        if axis == "nested":
            return lib.vmap(lib.vmap(f))(*_args(name, 3, lib, (2, 3)))
        args = [a if k == "key" else np.moveaxis(a, 0, axis) for a, k in zip(_args(name, 3, lib, (3,)), kinds)]
        return lib.vmap(f, in_axes=axis)(*args)
    _close(run(meshsim), run(jax))

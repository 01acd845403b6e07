"""lax's special-function primitives lgamma, digamma, polygamma, zeta, igamma, igammac,
igamma_grad_a, bessel_i0e and bessel_i1e against the installed JAX: printed programs (forward, grad, vmap, and the jax.scipy.special functions built on them),
values bit for bit over random shapes and float dtypes with edge values, gradients, dtype and
derivative errors, and an application to Explicit-sharded operands."""
import numpy as np
import pytest

import meshsim

RNG = np.random.default_rng(17)

# Zeros, poles, reflections, the overflow of Gamma, tiny and huge magnitudes.
EDGES = np.array([0.0, -0.0, 1.0, 2.0, -1.0, -2.0, -2.5, 0.5, -0.5, 1e-8, -1e-8, 1e-30, 3.75, 7.5,
                  100.5, 171.0, 172.0, 1e10, -1e10, 1e30, np.inf, -np.inf, np.nan])
SHAPES = [(), (7,), (3, 5), (2, 3, 4)]


def libs(real_jax):
    """(jax, lax, jnp, scipy.special) of meshsim and of JAX."""
    import jax.scipy.special  # noqa: F401 (loads the submodule)
    import meshsim.scipy.special  # noqa: F401
    return [(m, m.lax, m.numpy, m.scipy.special) for m in (meshsim, real_jax)]


def operand(shape, low=-20.0, high=20.0):
    """Random values in [low, high) and log-uniform magnitudes, with edge values mixed in."""
    size = int(np.prod(shape))
    values = np.where(RNG.random(size) < 0.5, RNG.uniform(low, high, size), np.exp(RNG.uniform(-12, 12, size)))
    edges = RNG.random(size) < 0.2
    values[edges] = RNG.choice(EDGES, edges.sum())
    return values.reshape(shape)


# name -> (build(lax, args) -> result, operand makers of a shape).
FUNCTIONS = {
    "lgamma": (lambda lax, a: lax.lgamma(*a), [operand]),
    "digamma": (lambda lax, a: lax.digamma(*a), [operand]),
    "polygamma": (lambda lax, a: lax.polygamma(*a),
                  [lambda s: RNG.choice([0.0, 1.0, 2.0, 3.0, 5.0, 1.5, -1.0], s), operand]),
    "zeta": (lambda lax, a: lax.zeta(*a), [lambda s: operand(s, 0.0, 30.0), operand]),
    "igamma": (lambda lax, a: lax.igamma(*a), [lambda s: operand(s, -1.0, 60.0), lambda s: operand(s, -1.0, 60.0)]),
    "igammac": (lambda lax, a: lax.igammac(*a), [lambda s: operand(s, -1.0, 60.0), lambda s: operand(s, -1.0, 60.0)]),
    "igamma_grad_a": (lambda lax, a: lax.igamma_grad_a(*a),
                      [lambda s: operand(s, -1.0, 60.0), lambda s: operand(s, -1.0, 60.0)]),
    "bessel_i0e": (lambda lax, a: lax.bessel_i0e(*a), [operand]),
    "bessel_i1e": (lambda lax, a: lax.bessel_i1e(*a), [operand]),
}
# XLA divides the Bessel functions' expansions above |x| = 8 by sqrt(|x|) in code that differs
# from a correctly rounded quotient by up to 2 ulp on some elements: those compare to 2 ulp.
NEAR_BITS = {"bessel_i0e": 2, "bessel_i1e": 2}


def assert_jaxs_bits(name, ours, theirs):
    ulps = NEAR_BITS.get(name, 0)
    if not ulps:
        np.testing.assert_array_equal(ours, theirs)
        return
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    both = ~np.isnan(ours)
    spacing = np.spacing(np.maximum(np.abs(ours[both]), np.abs(theirs[both]))).astype(np.float64)
    difference = np.abs(ours[both].astype(np.float64) - theirs[both].astype(np.float64))
    assert np.all(difference <= ulps * spacing)


def run_both(real_jax, name, dtype, shape):
    build, makers = FUNCTIONS[name]
    largest = float(real_jax.numpy.finfo(dtype).max)
    args = [np.clip(maker(shape), -largest, largest) for maker in makers]  # no overflowing casts
    out = []
    for jax, lax, jnp, _ in libs(real_jax):
        typed = [jnp.asarray(a, dtype) for a in args]
        out.append(np.asarray(jax.jit(lambda *a: build(lax, a))(*typed)))
    return out


# JAX compiles the incomplete gamma functions' loops for seconds per shape and dtype: they
# are checked over fewer of them.
LOOPS = ("igamma", "igammac", "igamma_grad_a")
CLOSED_FORMS = sorted(set(FUNCTIONS) - set(LOOPS))


@pytest.mark.parametrize("name, shape", [(n, s) for n in CLOSED_FORMS for s in SHAPES]
                         + [(n, (2, 3, 4)) for n in LOOPS])
def test_float32_values_are_jaxs_bits(real_jax, name, shape):
    ours, theirs = run_both(real_jax, name, np.float32, shape)
    assert ours.dtype == theirs.dtype == np.float32
    assert_jaxs_bits(name, ours, theirs)


@pytest.mark.parametrize("name", CLOSED_FORMS + ["igamma"])
def test_float64_values_are_jaxs_bits(real_jax, x64_with_jax, name):
    ours, theirs = run_both(real_jax, name, np.float64, (5, 40))
    assert ours.dtype == theirs.dtype == np.float64
    assert_jaxs_bits(name, ours, theirs)


@pytest.mark.parametrize("name, dtype", [(n, d) for n in CLOSED_FORMS for d in ("bfloat16", "float16")]
                         + [("igammac", "bfloat16")])
def test_narrow_floats_compute_in_float32(real_jax, name, dtype):
    ours, theirs = run_both(real_jax, name, getattr(real_jax.numpy, dtype), (6, 9))
    assert ours.dtype == theirs.dtype
    if name in NEAR_BITS:  # a narrow result is the float32 one rounded: at most 1 ulp apart
        np.testing.assert_allclose(ours.astype(np.float32), theirs.astype(np.float32),
                                   rtol=float(real_jax.numpy.finfo(dtype).eps))
    else:
        np.testing.assert_array_equal(ours.astype(np.float32), theirs.astype(np.float32))


def test_values_agree_with_scipy(x64):
    scipy_special = pytest.importorskip("scipy.special")
    lax = meshsim.lax
    x = np.concatenate([RNG.uniform(0.1, 30, 50), 0.3 - RNG.uniform(0.1, 9, 50)])
    np.testing.assert_allclose(np.asarray(lax.lgamma(x)), scipy_special.gammaln(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(lax.digamma(x)), scipy_special.digamma(x), rtol=1e-10, atol=1e-10)
    positive = np.abs(x)
    for n in (1, 2, 4):
        np.testing.assert_allclose(np.asarray(lax.polygamma(float(n), positive)),
                                   scipy_special.polygamma(n, positive), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(lax.zeta(positive + 1.5, positive)),
                               scipy_special.zeta(positive + 1.5, positive), rtol=1e-10)
    a = np.abs(RNG.uniform(0.1, 30, x.size))
    np.testing.assert_allclose(np.asarray(lax.igamma(a, positive)), scipy_special.gammainc(a, positive),
                               rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(np.asarray(lax.igammac(a, positive)), scipy_special.gammaincc(a, positive),
                               rtol=1e-10, atol=1e-14)
    wide = x * 3
    np.testing.assert_allclose(np.asarray(lax.bessel_i0e(wide)), scipy_special.i0e(wide), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(lax.bessel_i1e(wide)), scipy_special.i1e(wide), rtol=1e-14)


# name -> build(jax, lax, jnp, sp) -> (function, args); make_jaxpr prints the same program.
PROGRAMS = {
    "lgamma": lambda jax, lax, jnp, sp: (lax.lgamma, (1.5,)),
    "digamma_vector": lambda jax, lax, jnp, sp: (lax.digamma, (jnp.ones(3),)),
    "grad_lgamma": lambda jax, lax, jnp, sp: (jax.grad(lax.lgamma), (1.5,)),
    "grad_digamma": lambda jax, lax, jnp, sp: (jax.grad(lax.digamma), (1.5,)),
    "grad_polygamma": lambda jax, lax, jnp, sp: (jax.grad(lambda x: lax.polygamma(2.0, x)), (1.5,)),
    "grad_sum_digamma": lambda jax, lax, jnp, sp: (jax.grad(lambda x: lax.digamma(x).sum()), (jnp.ones(3),)),
    "value_and_grad_lgamma": lambda jax, lax, jnp, sp: (jax.value_and_grad(lax.lgamma), (2.5,)),
    "vmap_lgamma": lambda jax, lax, jnp, sp: (jax.vmap(lax.lgamma), (jnp.ones((4, 2)),)),
    "vmap_polygamma_m_fixed": lambda jax, lax, jnp, sp: (jax.vmap(lax.polygamma, (None, 0)), (1.0, jnp.ones(3))),
    "vmap_zeta_both": lambda jax, lax, jnp, sp: (jax.vmap(lax.zeta), (jnp.ones(3) + 1, jnp.ones(3))),
    "polygamma_broadcast": lambda jax, lax, jnp, sp: (lax.polygamma, (jnp.ones((2, 1)), jnp.ones((1, 3)))),
    "zeta_scalar_q": lambda jax, lax, jnp, sp: (lambda x: lax.zeta(x, 2.0), (jnp.ones(4) * 3,)),
    "narrow": lambda jax, lax, jnp, sp: (lax.lgamma, (jnp.ones(2, jnp.bfloat16),)),
    "sp_gammaln": lambda jax, lax, jnp, sp: (sp.gammaln, (1.5,)),
    "sp_gammaln_int": lambda jax, lax, jnp, sp: (sp.gammaln, (2,)),
    "sp_gammaln_int_array": lambda jax, lax, jnp, sp: (sp.gammaln, (jnp.arange(3),)),
    "grad_sp_gammaln": lambda jax, lax, jnp, sp: (jax.grad(sp.gammaln), (1.5,)),
    "sp_digamma_int": lambda jax, lax, jnp, sp: (sp.digamma, (1,)),
    "grad_sp_digamma": lambda jax, lax, jnp, sp: (jax.grad(sp.digamma), (2.0,)),
    "sp_polygamma": lambda jax, lax, jnp, sp: (lambda x: sp.polygamma(2, x), (1.5,)),
    "sp_polygamma_orders": lambda jax, lax, jnp, sp: (lambda x: sp.polygamma(jnp.arange(3), x), (jnp.ones(3),)),
    "grad_sp_polygamma": lambda jax, lax, jnp, sp: (jax.grad(lambda x: sp.polygamma(1, x)), (1.5,)),
    "igamma": lambda jax, lax, jnp, sp: (lax.igamma, (1.5, jnp.ones(3))),
    "grad_igamma": lambda jax, lax, jnp, sp: (jax.grad(lax.igamma, (0, 1)), (1.5, 2.0)),
    "grad_igammac": lambda jax, lax, jnp, sp: (jax.grad(lax.igammac, (0, 1)), (1.5, 2.0)),
    "grad_igamma_a_broadcast": lambda jax, lax, jnp, sp: (jax.grad(lambda a, x: lax.igamma(a, x).sum()),
                                                          (jnp.float32(1.5), jnp.ones(3) * 2)),
    "vmap_igamma_grad_a": lambda jax, lax, jnp, sp: (jax.vmap(lax.igamma_grad_a, (0, None)), (jnp.ones(3), 2.0)),
    "sp_gammainc": lambda jax, lax, jnp, sp: (sp.gammainc, (1.5, 2.0)),
    "sp_gammaincc_int": lambda jax, lax, jnp, sp: (sp.gammaincc, (2, jnp.ones(3))),
    "grad_sp_gammaincc_x": lambda jax, lax, jnp, sp: (jax.grad(sp.gammaincc, 1), (1.5, 2.0)),
    "bessel_i0e": lambda jax, lax, jnp, sp: (lax.bessel_i0e, (jnp.ones(3),)),
    "grad_bessel_i0e": lambda jax, lax, jnp, sp: (jax.grad(lambda x: lax.bessel_i0e(x).sum()), (jnp.ones(3),)),
    "grad_bessel_i1e_weak": lambda jax, lax, jnp, sp: (jax.grad(lax.bessel_i1e), (1.5,)),
    "vmap_bessel_i1e": lambda jax, lax, jnp, sp: (jax.vmap(lax.bessel_i1e), (jnp.ones((2, 3)),)),
    "sp_i0e": lambda jax, lax, jnp, sp: (sp.i0e, (1.5,)),
    "sp_i1e_int": lambda jax, lax, jnp, sp: (sp.i1e, (1,)),
    "sp_i0": lambda jax, lax, jnp, sp: (sp.i0, (1.5,)),
    "sp_i1": lambda jax, lax, jnp, sp: (sp.i1, (jnp.ones(3),)),
    "sp_zeta": lambda jax, lax, jnp, sp: (sp.zeta, (2.0, 1.5)),
    "sp_zeta_int_x": lambda jax, lax, jnp, sp: (sp.zeta, (2, jnp.ones(3))),
}


@pytest.mark.parametrize("case", sorted(PROGRAMS))
def test_printed_programs_are_jaxs(real_jax, case):
    ours, theirs = [str(lib[0].make_jaxpr(fun)(*args)) for lib in libs(real_jax)
                    for fun, args in [PROGRAMS[case](*lib)]]
    assert ours == theirs


@pytest.mark.parametrize("name", ["lgamma", "digamma", "polygamma", "igamma_a", "igammac_x", "bessel_i0e",
                                  "bessel_i1e"])
def test_gradients_are_jaxs(real_jax, name):
    x = np.abs(operand((4, 6))) + 0.05
    x[0] = -RNG.uniform(0.1, 5, 6)  # through the reflection
    # The other operand is an argument: XLA folds what a constant operand alone determines at
    # compile time, with the C library's functions (see below).
    other = np.float32(RNG.uniform(0.1, 10, (4, 6)))
    grads = []
    for jax, lax, jnp, _ in libs(real_jax):
        build = {"lgamma": lambda v, o: lax.lgamma(v), "digamma": lambda v, o: lax.digamma(v),
                 "polygamma": lambda v, o: lax.polygamma(jnp.full_like(v, 2.0), v),
                 "igamma_a": lambda v, o: lax.igamma(jnp.abs(v), o),
                 "igammac_x": lambda v, o: lax.igammac(o, jnp.abs(v)),
                 "bessel_i0e": lambda v, o: lax.bessel_i0e(v * 4), "bessel_i1e": lambda v, o: lax.bessel_i1e(v * 4)}[name]
        grads.append(np.asarray(jax.jit(jax.grad(lambda v, o: build(v, o).sum()))(jnp.asarray(x, np.float32),
                                                                                 other)))
    if name in NEAR_BITS:
        np.testing.assert_allclose(*grads, rtol=1e-6, atol=1e-7)
    elif name not in ("digamma", "polygamma"):
        np.testing.assert_array_equal(*grads)
    else:
        # The order m of the derivative's polygamma is a constant: XLA folds n! = exp(lgamma(m + 1))
        # at compile time with the C library's log and exp, a few ulp from its run-time expansion.
        np.testing.assert_allclose(*grads, rtol=1e-5)


def test_scipy_zeta_is_the_primitive_with_series_derivatives(real_jax):
    x, q = np.float32(RNG.uniform(1.5, 9, 12)), np.float32(RNG.uniform(0.2, 9, 12))
    values, grads = [], []
    for jax, lax, jnp, sp in libs(real_jax):
        values.append(np.asarray(jax.jit(sp.zeta)(x, q)))
        grads.append([np.asarray(jax.jit(jax.vmap(jax.grad(sp.zeta, i)))(x, q)) for i in (0, 1)])
    np.testing.assert_array_equal(*values)
    for ours, theirs in zip(*grads):  # both differentiate a series: JAX's and meshsim's sum otherwise
        np.testing.assert_allclose(ours, theirs, rtol=2e-5)


def test_gradients_are_the_derivatives(x64):
    lax = meshsim.lax
    x = RNG.uniform(0.2, 12, 20)
    step = 1e-6
    for f in (lax.lgamma, lax.digamma, lambda v: lax.polygamma(1.0, v)):
        numeric = (np.asarray(f(x + step)) - np.asarray(f(x - step))) / (2 * step)
        analytic = np.asarray(meshsim.vmap(meshsim.grad(f))(x))
        np.testing.assert_allclose(analytic, numeric, rtol=1e-6)
    a = RNG.uniform(0.2, 12, 20)
    for f in (lax.igamma, lax.igammac):
        for argnum in (0, 1):
            shift = [step if i == argnum else 0.0 for i in range(2)]
            numeric = (np.asarray(f(a + shift[0], x + shift[1])) - np.asarray(f(a - shift[0], x - shift[1]))) / (2 * step)
            analytic = np.asarray(meshsim.vmap(meshsim.grad(f, argnum))(a, x))
            np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-9)
    for f in (lax.bessel_i0e, lax.bessel_i1e):
        v = np.concatenate([x, -x, x + 8])
        numeric = (np.asarray(f(v + step)) - np.asarray(f(v - step))) / (2 * step)
        np.testing.assert_allclose(np.asarray(meshsim.vmap(meshsim.grad(f))(v)), numeric, rtol=1e-6, atol=1e-9)
    second = meshsim.vmap(meshsim.grad(meshsim.grad(lax.lgamma)))(x)
    np.testing.assert_array_equal(np.asarray(second), np.asarray(lax.polygamma(1.0, x)))


def outcome(run):
    try:
        run()
        return "ok"
    except Exception as e:  # noqa: BLE001 (the class and text are compared)
        return type(e).__name__, str(e)


ERRORS = {
    "lgamma_int": lambda jax, lax, jnp, sp: lax.lgamma(1),
    "digamma_int32": lambda jax, lax, jnp, sp: lax.digamma(jnp.arange(3)),
    "polygamma_int_m": lambda jax, lax, jnp, sp: lax.polygamma(1, 1.0),
    "polygamma_mixed": lambda jax, lax, jnp, sp: lax.polygamma(1.0, jnp.float16(1)),
    "zeta_int_q": lambda jax, lax, jnp, sp: lax.zeta(2.0, jnp.int32(1)),
    "zeta_mixed": lambda jax, lax, jnp, sp: lax.zeta(jnp.ones(2, jnp.bfloat16), jnp.ones(2)),
    "polygamma_shapes": lambda jax, lax, jnp, sp: lax.polygamma(jnp.ones(2), jnp.ones(3)),
    "polygamma_ranks": lambda jax, lax, jnp, sp: lax.polygamma(jnp.ones((2, 3)), jnp.ones(3)),
    "lgamma_complex": lambda jax, lax, jnp, sp: lax.lgamma(jnp.ones(2, jnp.complex64)),
    "grad_polygamma_m": lambda jax, lax, jnp, sp: jax.grad(lambda m: lax.polygamma(m, 1.5))(1.0),
    "grad_zeta": lambda jax, lax, jnp, sp: jax.grad(lax.zeta)(2.0, 1.5),
    "grad_igamma_grad_a": lambda jax, lax, jnp, sp: jax.grad(lax.igamma_grad_a)(2.0, 1.5),
    "igamma_int": lambda jax, lax, jnp, sp: lax.igamma(1, 2.0),
    "igammac_mixed": lambda jax, lax, jnp, sp: lax.igammac(jnp.float16(1), 2.0),
    "bessel_i0e_int": lambda jax, lax, jnp, sp: lax.bessel_i0e(jnp.arange(2)),
    "sp_zeta_riemann": lambda jax, lax, jnp, sp: sp.zeta(2.0),
    "bessel_i1e_complex": lambda jax, lax, jnp, sp: lax.bessel_i1e(jnp.ones(2, jnp.complex64)),
    "sp_polygamma_float_n": lambda jax, lax, jnp, sp: sp.polygamma(1.0, 2.0),
    "sp_polygamma_complex": lambda jax, lax, jnp, sp: sp.polygamma(1, jnp.ones(2, jnp.complex64)),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_are_jaxs(real_jax, case):
    ours, theirs = [outcome(lambda: ERRORS[case](*lib)) for lib in libs(real_jax)]
    assert ours == theirs
    assert ours != "ok"


def test_explicit_sharding_is_elementwise(real_jax):
    results = []
    x = np.clip(operand((16, 32)), -1e15, 1e15)  # the incomplete gamma series ends within 1e7 steps
    m = RNG.choice([0.0, 1.0, 3.0], (16, 32))
    a = RNG.uniform(0.1, 30, (16, 32))
    for jax, lax, jnp, _ in libs(real_jax):
        mesh = jax.make_mesh((2, 4), ("a", "b"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
        P, NamedSharding = jax.sharding.PartitionSpec, jax.sharding.NamedSharding
        # One jit per function: XLA fuses the expansions of several into one loop, whose
        # contractions differ in the last bit. JAX's igamma family takes operands of one
        # sharding (a scalar beside a sharded array fails its lowering).
        functions = [lambda v, n, w: lax.lgamma(v), lambda v, n, w: lax.digamma(v),
                     lambda v, n, w: lax.polygamma(n, v), lambda v, n, w: lax.zeta(v, w),
                     lambda v, n, w: lax.igamma(w, v),
                     lambda v, n, w: jax.grad(lambda u: lax.lgamma(u).sum())(v)]
        with jax.set_mesh(mesh):
            xs = jax.device_put(np.float32(x), NamedSharding(mesh, P("a", "b")))
            ms = jax.device_put(np.float32(m), NamedSharding(mesh, P("a", None)))
            ws = jax.device_put(np.float32(a), NamedSharding(mesh, P("a", "b")))
            outs = [jax.jit(f)(xs, ms, ws) for f in functions]
            results.append([(str(jax.typeof(o)), np.asarray(o)) for o in outs])
    for i, ((our_type, ours), (their_type, theirs)) in enumerate(zip(*results)):
        assert our_type == their_type
        np.testing.assert_array_equal(ours, theirs, err_msg=f"function {i}")

"""lax's special-function primitives lgamma, digamma, polygamma and zeta against the installed
JAX: printed programs (forward, grad, vmap, and the jax.scipy.special functions built on them),
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
}


def run_both(real_jax, name, dtype, shape):
    build, makers = FUNCTIONS[name]
    largest = float(real_jax.numpy.finfo(dtype).max)
    args = [np.clip(maker(shape), -largest, largest) for maker in makers]  # no overflowing casts
    out = []
    for jax, lax, jnp, _ in libs(real_jax):
        typed = [jnp.asarray(a, dtype) for a in args]
        out.append(np.asarray(jax.jit(lambda *a: build(lax, a))(*typed)))
    return out


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("shape", SHAPES)
def test_float32_values_are_jaxs_bits(real_jax, name, shape):
    ours, theirs = run_both(real_jax, name, np.float32, shape)
    assert ours.dtype == theirs.dtype == np.float32
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_float64_values_are_jaxs_bits(real_jax, x64_with_jax, name):
    ours, theirs = run_both(real_jax, name, np.float64, (5, 40))
    assert ours.dtype == theirs.dtype == np.float64
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_narrow_floats_compute_in_float32(real_jax, name, dtype):
    ours, theirs = run_both(real_jax, name, getattr(real_jax.numpy, dtype), (6, 9))
    assert ours.dtype == theirs.dtype
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
}


@pytest.mark.parametrize("case", sorted(PROGRAMS))
def test_printed_programs_are_jaxs(real_jax, case):
    ours, theirs = [str(lib[0].make_jaxpr(fun)(*args)) for lib in libs(real_jax)
                    for fun, args in [PROGRAMS[case](*lib)]]
    assert ours == theirs


@pytest.mark.parametrize("name", ["lgamma", "digamma", "polygamma"])
def test_gradients_are_jaxs(real_jax, name):
    x = np.abs(operand((4, 6))) + 0.05
    x[0] = -RNG.uniform(0.1, 5, 6)  # through the reflection
    grads = []
    for jax, lax, jnp, _ in libs(real_jax):
        build = {"lgamma": lax.lgamma, "digamma": lax.digamma,
                 "polygamma": lambda v: lax.polygamma(jnp.full_like(v, 2.0), v)}[name]
        grads.append(np.asarray(jax.jit(jax.grad(lambda v: build(v).sum()))(jnp.asarray(x, np.float32))))
    if name == "lgamma":
        np.testing.assert_array_equal(*grads)
    else:
        # The order m of the derivative's polygamma is a constant: XLA folds n! = exp(lgamma(m + 1))
        # at compile time with the C library's log and exp, a few ulp from its run-time expansion.
        np.testing.assert_allclose(*grads, rtol=1e-5)


def test_gradients_are_the_derivatives(x64):
    lax = meshsim.lax
    x = RNG.uniform(0.2, 12, 20)
    step = 1e-6
    for f in (lax.lgamma, lax.digamma, lambda v: lax.polygamma(1.0, v)):
        numeric = (np.asarray(f(x + step)) - np.asarray(f(x - step))) / (2 * step)
        analytic = np.asarray(meshsim.vmap(meshsim.grad(f))(x))
        np.testing.assert_allclose(analytic, numeric, rtol=1e-6)
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
    x = operand((8, 12))
    m = RNG.choice([0.0, 1.0, 3.0], (8, 12))
    for jax, lax, jnp, _ in libs(real_jax):
        mesh = jax.make_mesh((2, 4), ("a", "b"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
        P, NamedSharding = jax.sharding.PartitionSpec, jax.sharding.NamedSharding
        with jax.set_mesh(mesh):
            xs = jax.device_put(np.float32(x), NamedSharding(mesh, P("a", "b")))
            ms = jax.device_put(np.float32(m), NamedSharding(mesh, P("a", None)))
            outs = jax.jit(lambda v, n: (lax.lgamma(v), lax.digamma(v), lax.polygamma(n, v), lax.zeta(v, 2.0),
                                         jax.grad(lambda w: lax.lgamma(w).sum())(v)))(xs, ms)
            results.append([(str(jax.typeof(o)), np.asarray(o)) for o in outs])
    for (our_type, ours), (their_type, theirs) in zip(*results):
        assert our_type == their_type
        np.testing.assert_array_equal(ours, theirs)

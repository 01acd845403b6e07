"""Derivative rules of what JAX differentiates in both modes, against JAX 0.10.2:
lax.reduce_precision (linear: tangents and cotangents are rounded like the value),
lax.custom_linear_solve (forward mode solves with `solve` alone; reverse mode needs
`transpose_solve`) and custom_derivatives.linear_call, under jvp, jacfwd, linearize, grad,
hessian, jit and vmap, over random shapes, formats and dtypes."""
import zlib

import numpy as np
import pytest
import x64_mode
from outcomes import outcome
from tree_oracle import assert_trees_close

import meshsim

jax = pytest.importorskip("jax")

FORMATS = [(5, 10), (8, 7), (4, 3), (5, 2), (11, 52), (2, 1)]


def seeded(name: str):
    return np.random.default_rng(zlib.crc32(name.encode()))


def _bits_equal(ours, theirs):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    width = ours.dtype.itemsize * 8
    np.testing.assert_array_equal(ours.view(f"uint{width}"), theirs.view(f"uint{width}"))


def _rounding_cases(lib, fmt):
    """The derivatives of a function through reduce_precision, each rounding its tangents."""
    jnp, lax = lib.numpy, lib.lax

    def rounded(v):
        return lax.reduce_precision(v, *fmt)

    def loss(v):
        return jnp.sum(rounded(v * v) * jnp.sin(v))
    return {
        "jvp": lambda x, t: lib.jvp(rounded, (x,), (t,)),
        "jacfwd": lambda x, t: lib.jacfwd(rounded)(x),
        "linearize": lambda x, t: lib.linearize(rounded, x)[1](t),
        "grad": lambda x, t: lib.grad(loss)(x),
        "hessian": lambda x, t: lib.hessian(loss)(x),
        "jit_jvp": lambda x, t: lib.jit(lambda a, b: lib.jvp(rounded, (a,), (b,)))(x, t),
        "vmap_jvp": lambda x, t: lib.vmap(lambda a, b: lib.jvp(rounded, (a,), (b,))[1])(x[None], t[None]),
    }


@pytest.mark.parametrize("dtype,fmt", [("float32", (5, 10)), ("float32", (2, 1)), ("float32", (11, 52)),
                                       ("float16", (4, 3)), ("bfloat16", (5, 2))])
def test_reduce_precision_derivatives(dtype, fmt):
    rng = seeded(f"rp-derivatives-{fmt}-{dtype}")
    shape = tuple(int(s) for s in rng.integers(1, 5, rng.integers(1, 3)))
    x = (rng.standard_normal(shape) * 3).astype(jax.numpy.dtype(dtype))
    t = (rng.standard_normal(shape) * 1.7).astype(jax.numpy.dtype(dtype))
    ours, theirs = _rounding_cases(meshsim, fmt), _rounding_cases(jax, fmt)
    for name in ours:
        if dtype != "float32" and name == "hessian":
            continue  # narrow sums of products: compared in float32
        got, expected = ours[name](x, t), jax.jit(theirs[name])(x, t)  # the oracle compiled once
        if name in ("jvp", "jacfwd", "linearize", "jit_jvp", "vmap_jvp"):  # rounding only: bit for bit
            for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
                _bits_equal(g, e)
        else:
            assert_trees_close(got, expected, rtol=1e-5, atol=1e-6)


def test_reduce_precision_float64_and_its_tangent_is_not_zero(x64_with_jax):
    rng = seeded("rp-float64")
    x = rng.standard_normal(17) * np.exp(rng.uniform(-30, 30, 17))
    for fmt in FORMATS:
        f_ours = lambda v, fmt=fmt: meshsim.lax.reduce_precision(v, *fmt)  # noqa: E731
        f_theirs = lambda v, fmt=fmt: jax.lax.reduce_precision(v, *fmt)  # noqa: E731
        _bits_equal(f_ours(x), f_theirs(x))
        for g, e in zip(meshsim.jvp(f_ours, (x,), (x[::-1],)), jax.jvp(f_theirs, (x,), (x[::-1],))):
            _bits_equal(g, e)
    (_, tangent) = meshsim.jvp(lambda v: meshsim.lax.reduce_precision(v, 5, 10), (x,), (np.ones(17),))
    assert np.count_nonzero(np.asarray(tangent)) == 17


def test_reduce_precision_printed_as_jax_prints_it():
    x = np.linspace(-2, 2, 5).astype(np.float32)
    for lib in (meshsim, jax):
        lib.printed = str(lib.make_jaxpr(lib.grad(lambda v: lib.lax.reduce_precision(v, 4, 3).sum()))(x))
    assert meshsim.printed == jax.printed
    assert "reduce_precision[exponent_bits=4 mantissa_bits=3]" in meshsim.printed


def _problem(rng, n):
    m = rng.standard_normal((n, n)).astype(np.float32) + n * np.eye(n, dtype=np.float32)
    return m, rng.standard_normal(n).astype(np.float32)


def _solve(lib):
    jnp = lib.numpy

    def solve(matvec, rhs):  # the matrix read off the operator, as a solver without it would
        return jnp.linalg.solve(lib.jacobian(matvec)(rhs), rhs)
    return solve


def _solves(lib, transpose_solve: bool, symmetric: bool = False):
    jnp = lib.numpy

    def x_of(m, b):
        return lib.lax.custom_linear_solve(lambda v: jnp.sin(m) @ v, b, _solve(lib),
                                           _solve(lib) if transpose_solve else None, symmetric=symmetric)
    return x_of


def _forward_cases(lib, x_of):
    return {
        "jvp": lambda m, b, dm, db: lib.jvp(x_of, (m, b), (dm, db)),
        "jvp_b": lambda m, b, dm, db: lib.jvp(lambda v: x_of(m, v), (b,), (db,)),
        "jacfwd": lambda m, b, dm, db: lib.jacfwd(x_of, argnums=(0, 1))(m, b),
        "linearize": lambda m, b, dm, db: lib.linearize(x_of, m, b)[1](dm, db),
        "jit_jacfwd": lambda m, b, dm, db: lib.jit(lib.jacfwd(x_of, argnums=1))(m, b),
        "vmap_jvp": lambda m, b, dm, db: lib.vmap(lambda v, dv: lib.jvp(lambda u: x_of(m, u), (v,), (dv,)))(
            lib.numpy.stack([b, db]), lib.numpy.stack([db, b])),
        "jit_primal": lambda m, b, dm, db: lib.jit(x_of)(m, b),
    }


@pytest.mark.parametrize("n", [1, 4])
def test_linear_solve_forward_mode_needs_no_transpose_solve(n):
    rng = seeded(f"solve-forward-{n}")
    m, b = _problem(rng, n)
    dm, db = (rng.standard_normal(m.shape).astype(np.float32), rng.standard_normal(n).astype(np.float32))
    ours = _forward_cases(meshsim, _solves(meshsim, False))
    theirs = _forward_cases(jax, _solves(jax, False))
    for name in ours:
        assert_trees_close(ours[name](m, b, dm, db), jax.jit(theirs[name])(m, b, dm, db), rtol=2e-4, atol=2e-5)


def _reverse_cases(lib, x_of):
    jnp = lib.numpy

    def loss(m, b):
        return jnp.sum(jnp.cos(x_of(m, b)) * b)
    return {
        "grad": lambda m, b: lib.grad(loss, (0, 1))(m, b),
        "hessian_b": lambda m, b: lib.hessian(lambda v: loss(m, v))(b),
        "hessian_m": lambda m, b: lib.hessian(lambda a: loss(a, b))(m),
        "grad_of_jvp": lambda m, b: lib.grad(lambda v: jnp.sum(lib.jvp(lambda u: x_of(m, u), (v,), (v,))[1]))(b),
    }


@pytest.mark.parametrize("symmetric", [False, True])
def test_linear_solve_reverse_and_second_order(symmetric):
    rng = seeded(f"solve-reverse-{symmetric}")
    m, b = _problem(rng, 2)
    if symmetric:
        m = np.arcsin(np.clip((m + m.T) / (2 * np.abs(m).max()), -1, 1)).astype(np.float32)  # sin(m) symmetric
        m = m + np.eye(len(b), dtype=np.float32)
    ours = _reverse_cases(meshsim, _solves(meshsim, not symmetric, symmetric))
    theirs = _reverse_cases(jax, _solves(jax, not symmetric, symmetric))
    for name in ours:
        assert_trees_close(ours[name](m, b), jax.jit(theirs[name])(m, b), rtol=2e-4, atol=2e-5)


def test_linear_solve_without_transpose_solve_refuses_reverse_mode_as_jax():
    m, b = _problem(seeded("solve-refused"), 3)
    ours = _reverse_cases(meshsim, _solves(meshsim, False))
    theirs = _reverse_cases(jax, _solves(jax, False))
    for name in ours:
        got, expected = outcome(ours[name], m, b), outcome(jax.jit(theirs[name]), m, b)
        assert expected[0] == "TypeError"
        assert (got[0], got[1].splitlines()[0]) == (expected[0], expected[1].splitlines()[0]), name


def _linear_call_cases(lib):
    jnp = lib.numpy

    def scaled(r, v):
        return lib.custom_derivatives.linear_call(lambda r, v: r * v, lambda r, ct: r * ct * 10.0, r, v)
    return {
        "call": lambda r, v: scaled(r, v),
        "grad": lambda r, v: lib.grad(lambda u: jnp.sum(scaled(r, u) ** 2))(v),
        "jvp": lambda r, v: lib.jvp(lambda u: scaled(r, u), (v,), (v + 1.0,)),
        "vjp_jit": lambda r, v: lib.jit(lambda u: lib.vjp(lambda w: scaled(r, w), u)[1](u * 3.0))(v),
    }


def test_linear_call_transposes_and_applies_forward():
    rng = seeded("linear-call")
    r, v = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    ours, theirs = _linear_call_cases(meshsim), _linear_call_cases(jax)
    for name in ours:
        assert_trees_close(ours[name](r, v), theirs[name](r, v), rtol=1e-6, atol=1e-6)


def _jvp_argument_cases(lib):
    """jvp's primal/tangent pairs: float0 tangents for int and bool primals, equal dtypes for
    floats (after canonicalisation: a float64 or Python float tangent of a float32 primal),
    equal shapes."""
    jnp, float0 = lib.numpy, lib.dtypes.float0

    def f(x, n):
        return x * n, n + 1

    def scaled(x):
        return 3.0 * x

    return {
        "int primal, float0 tangent": lambda: lib.jvp(f, (1.5, 3), (1.0, np.zeros((), float0)))[1][0],
        "int primal, float tangent": lambda: lib.jvp(f, (1.5, 3), (1.0, 1.0)),
        "float primal, float0 tangent": lambda: lib.jvp(f, (1.5, 3), (np.zeros((), float0),) * 2),
        "float primal, int tangent": lambda: lib.jvp(f, (1.5, 3), (1, np.zeros((), float0))),
        "bool primal, bool tangent": lambda: lib.jvp(lambda b, x: jnp.where(b, x, 0.0), (True, 2.0), (True, 1.0)),
        "bfloat16 primal, float32 tangent": lambda: lib.jvp(scaled, (jnp.ones(2, jnp.bfloat16),), (jnp.ones(2),)),
        "float32 primal, float64 tangent": lambda: lib.jvp(scaled, (np.float32(1.0),), (np.float64(2.0),))[1],
        "float32 primal, Python float tangent": lambda: lib.jvp(scaled, (np.float32(1.0),), (2.0,))[1],
        "shapes differ": lambda: lib.jvp(scaled, (1.0,), (jnp.ones(2),)),
        "float0 shapes differ": lambda: lib.jvp(lambda n: n, (jnp.arange(3),), (np.zeros((2,), float0),)),
        "int array primal": lambda: lib.jvp(lambda n: n * 2, (jnp.arange(3),), (np.zeros((3,), float0),))[0],
    }


@pytest.mark.parametrize("name", list(_jvp_argument_cases(meshsim)))
def test_jvp_checks_primal_and_tangent_types_as_jax_does(name):
    kind, ours = outcome(_jvp_argument_cases(meshsim)[name])
    jax_kind, theirs = outcome(_jvp_argument_cases(jax)[name])
    assert kind == jax_kind, (ours, theirs)
    if kind != "ok":
        assert ours == theirs
    else:
        _bits_equal(ours, theirs)

"""Integer and boolean primals under jvp, vjp, linearize and grad(allow_int=True), against
JAX 0.10.2: the function receives them as the caller gave them (not as traced values), their
tangents are float0 zeros that jit returns without computing anything, and results the function
did not compute from its traced inputs come back as it returned them."""
import zlib

import numpy as np
import pytest

import meshsim

jax = pytest.importorskip("jax")


def _kind(x, lib):
    if isinstance(x, lib.core.Tracer):
        return "tracer"
    for scalar in (bool, int, float):  # JAX passes some Python scalars as subclasses (TypedInt)
        if isinstance(x, scalar):
            return scalar.__name__
    return "array" if hasattr(x, "shape") else type(x).__name__


def _programs(lib, n_value, seen):
    """Calls of each autodiff entry point on f(x, n) that uses n as a concrete value."""
    jnp = lib.numpy
    f0 = lib.dtypes.float0

    def f(x, n):
        seen.append(_kind(n, lib))
        k = int(np.asarray(n).sum())
        return (x * np.asarray(n).sum()).sum() + jnp.zeros(k).sum() + sum(range(k)) + x[0] ** 2

    x = jnp.linspace(0.5, 2.0, 3)
    n = n_value(lib)
    n_tangent = np.zeros(np.shape(n), f0)
    return {
        "jvp": lambda: lib.jvp(f, (x, n), (jnp.ones(3), n_tangent)),
        "vjp": lambda: lib.vjp(f, x, n)[1](jnp.float32(1)),
        "linearize": lambda: lib.linearize(f, x, n)[1](jnp.ones(3), n_tangent),
        "grad": lambda: lib.grad(f, argnums=(0, 1), allow_int=True)(x, n),
        "value_and_grad": lambda: lib.value_and_grad(f, argnums=(0, 1), allow_int=True)(x, n),
        "jacfwd": lambda: lib.jacfwd(f)(x, n),
        "hessian": lambda: lib.hessian(f)(x, n),
    }


N_VALUES = {
    "int array": lambda lib: lib.numpy.arange(3),
    "numpy int32": lambda lib: np.int32(4),
    "python int": lambda lib: 3,
    "bool array": lambda lib: lib.numpy.array([True, False, True]),
}


def _flat(tree, lib):
    return [(np.asarray(v).dtype, np.shape(v), np.asarray(v).tolist() if np.asarray(v).dtype.kind != "V"
             else None) for v in lib.tree.leaves(tree)]


@pytest.mark.parametrize("entry", ["jvp", "vjp", "linearize", "grad", "value_and_grad", "jacfwd", "hessian"])
@pytest.mark.parametrize("n_name", sorted(N_VALUES))
def test_integer_primals_reach_the_function_as_given(entry, n_name):
    ours_seen, theirs_seen = [], []
    ours = _programs(meshsim, N_VALUES[n_name], ours_seen)[entry]()
    theirs = _programs(jax, N_VALUES[n_name], theirs_seen)[entry]()
    assert ours_seen == theirs_seen and "tracer" not in ours_seen
    o, t = _flat(ours, meshsim), _flat(theirs, jax)
    assert [(d, s) for d, s, _ in o] == [(d, s) for d, s, _ in t]
    for (_, _, a), (_, _, b) in zip(o, t):
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("shape", [(), (3,), (2, 0), (4, 40)])
def test_jit_returns_float0_tangents_without_computing_them(shape):
    rng = np.random.default_rng(zlib.crc32(repr(shape).encode()))
    n = rng.integers(-5, 5, size=shape).astype(np.int32)

    def run(lib):
        def step(x, n):
            return lib.grad(lambda x, n: (x * n).sum(), argnums=(0, 1), allow_int=True)(x, n)
        out = lib.jit(step)(np.ones(shape, np.float32), n)
        zeros = lib.jit(lambda x: (x, np.zeros(shape, lib.dtypes.float0)))(1.0)[1]
        return out, zeros
    (o_grad, o_zeros), (t_grad, t_zeros) = run(meshsim), run(jax)
    np.testing.assert_array_equal(o_grad[0], t_grad[0])
    for ours, theirs in [(o_grad[1], t_grad[1]), (o_zeros, t_zeros)]:
        assert type(ours).__name__ == type(theirs).__name__ == "TypedNdArray"
        assert ours.dtype == theirs.dtype == jax.dtypes.float0 and ours.shape == theirs.shape
        assert repr(ours) == repr(theirs)
        assert isinstance(ours, np.ndarray)


def test_results_not_computed_from_traced_inputs_come_back_as_returned():
    def run(lib):
        f0 = np.zeros((), lib.dtypes.float0)
        return [
            lib.jvp(lambda n: n * 2, (3,), (f0,))[0],
            lib.jvp(lambda x: 1.0, (1.0,), (1.0,))[0],
            lib.jvp(lambda x, n: (x * n, n), (1.0, np.int32(3)), (1.0, f0))[0][1],
            lib.vjp(lambda x: (x * 2, 2.0), 1.0)[0][1],
            lib.linearize(lambda x: (x, 2.0), 1.0)[0],
        ]
    ours, theirs = run(meshsim), run(jax)
    assert [type(v).__name__ for v in ours] == [type(v).__name__ for v in theirs]
    assert [np.asarray(v).tolist() for v in ours] == [np.asarray(v).tolist() for v in theirs]


def test_aux_holds_any_python_values():
    # aux is not differentiated: what the function did not compute from its traced inputs
    # (strings, Python numbers, None, arrays made outside) comes back as it was returned.
    def run(lib):
        jnp = lib.numpy
        c = jnp.arange(2.0)
        return [
            lib.value_and_grad(lambda x: (x ** 2, {"note": "s", "n": 3, "c": c, "y": x * 3}),
                               has_aux=True)(2.0),
            lib.grad(lambda x: (x ** 2, (x * 3, None, 1.5)), has_aux=True)(2.0),
            lib.vjp(lambda x: (x * 2, ["a", x * 1]), 1.0, has_aux=True)[2],
            lib.jvp(lambda x: (x * 2, ("b", 7)), (1.0,), (1.0,), has_aux=True),
            lib.jacrev(lambda x: (x * 2, {"k": "v"}), has_aux=True)(jnp.ones(2)),
            lib.jit(lib.value_and_grad(lambda x: (x ** 2, 5), has_aux=True))(2.0),
            lib.linearize(lambda x: (x * 2, "z"), 1.0, has_aux=True)[2],
        ]

    def described(tree, lib):
        leaves, treedef = lib.tree.flatten(tree)
        return str(treedef).replace("PyTreeDef", ""), [
            (type(v).__name__, np.asarray(v).tolist()) if hasattr(v, "shape") else v for v in leaves]

    ours, theirs = run(meshsim), run(jax)
    for o, t in zip(ours, theirs):
        assert described(o, meshsim) == described(t, jax)

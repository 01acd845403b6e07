"""`jax.test_util.check_grads` and the types of complex cotangents, against JAX 0.10.2: a correct
derivative passes at orders 1 and 2 in both modes, a wrong custom derivative fails in both; the
cotangent of real/imag of a weakly typed complex is a strong complex, as JAX's."""
import numpy as np
import pytest

import meshsim
import meshsim.test_util  # noqa: F401 - a submodule, imported as JAX's must be


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


def _outcome(jax, f_name, order, modes, seed):
    jnp = jax.numpy
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5))
    w, b = rng.standard_normal(n).astype(np.float32), np.float32(rng.standard_normal())
    x = rng.standard_normal((3, n)).astype(np.float32)

    @jax.custom_jvp
    def wrong_sin(v):
        return jnp.sin(v)

    wrong_sin.defjvp(lambda p, t: (jnp.sin(p[0]), 2.0 * jnp.cos(p[0]) * t[0]))

    funs = {
        "logistic_loss": lambda w, b: jnp.sum(jnp.tanh(x @ w + b) ** 2),
        "wrong_derivative": lambda w, b: jnp.sum(wrong_sin(x @ w + b)),
    }
    try:
        jax.test_util.check_grads(funs[f_name], (w, b), order=order, modes=modes)
        return "passed"
    except AssertionError:
        return "AssertionError"


@pytest.mark.parametrize("f_name", ["logistic_loss", "wrong_derivative"])
@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("modes", [("fwd", "rev"), ("rev",), ("fwd",)])
@pytest.mark.parametrize("seed", [0, 1])
def test_check_grads_agrees_with_jax(libs, f_name, order, modes, seed):
    import jax.test_util  # noqa: F401 - a submodule JAX does not import by itself
    ours, theirs = (_outcome(lib, f_name, order, modes, seed) for lib in libs)
    assert ours == theirs
    assert ours == ("passed" if f_name == "logistic_loss" else "AssertionError")


@pytest.mark.parametrize("part", ["real", "imag", "both"])
@pytest.mark.parametrize("z", [3.0 + 4.0j, np.complex64(1.5 - 2.0j)])
def test_complex_cotangent_types_match_jax(libs, part, z):
    def case(jax):
        jnp = jax.numpy
        f = {"real": lambda z: jnp.real(z) ** 2, "imag": lambda z: jnp.imag(z) * 3.0,
             "both": lambda z: jnp.real(z) ** 2 + jnp.imag(z) ** 2}[part]
        return repr(jax.grad(f)(z))

    ours, theirs = (case(lib) for lib in libs)
    assert ours == theirs

"""The jax.numpy functions JAX 0.10.2 defines as `jit(inline=True)` functions (`tanh`, `dot`,
`acos`, ...) are jitted functions to a user here too: the same repr (equinox prints a model's
activation by it), deep copies, `.trace`/`.lower`, and still no `jit` equation of their own in
a traced program. Real JAX is the oracle; the names come from its jax.numpy."""
import copy
import re

import numpy as np
import pytest

import meshsim
import meshsim.numpy as mjnp


def _inline_jitted_names(jax) -> list[str]:
    import jax.numpy as jjnp
    return sorted(name for name in dir(jjnp)
                  if type(getattr(jjnp, name)).__name__ == "PjitFunction"
                  and getattr(jjnp, name)._jit_info.inline)


def _masked(text: str) -> str:
    return re.sub(r"0x[0-9a-f]+", "0x…", text)


def test_reprs_are_jaxs(real_jax):
    import jax.numpy as jjnp
    names = _inline_jitted_names(real_jax)
    assert len(names) > 50
    differing = [(name, repr(getattr(mjnp, name, None)))
                 for name in names if _masked(repr(getattr(mjnp, name, None)))
                 != _masked(repr(getattr(jjnp, name)))]
    assert differing == []


def test_the_jnp_ufunc_objects_stay_ufuncs(real_jax):
    import jax.numpy as jjnp
    for name in ("add", "subtract", "maximum", "negative", "logical_and", "bitwise_xor"):
        assert repr(getattr(mjnp, name)) == repr(getattr(jjnp, name))


@pytest.mark.parametrize("seed", range(3))
def test_calls_copies_and_traces(real_jax, seed):
    import jax.numpy as jjnp
    rng = np.random.default_rng(seed)
    unary = [n for n in _inline_jitted_names(real_jax)
             if n in ("tanh", "exp", "sin", "acos", "abs", "sqrt", "floor", "square", "sign")]
    name = str(rng.choice(unary))
    x = rng.uniform(0.1, 0.9, size=tuple(rng.integers(1, 5, size=int(rng.integers(1, 3)))))
    x = x.astype(rng.choice([np.float32, np.float16]))
    ours, theirs = getattr(mjnp, name), getattr(jjnp, name)
    np.testing.assert_allclose(np.asarray(ours(x)), np.asarray(theirs(x)), rtol=2e-3)
    copied = copy.deepcopy(ours)
    assert _masked(repr(copied)) == _masked(repr(copy.deepcopy(theirs)))
    np.testing.assert_array_equal(np.asarray(copied(x)), np.asarray(ours(x)))
    # Inlined: the traced program holds the operations, not a `jit` equation.
    assert str(meshsim.make_jaxpr(lambda v: ours(v) * 2)(x)) == \
        str(real_jax.make_jaxpr(lambda v: theirs(v) * 2)(x))
    assert meshsim.numpy.tanh.trace(x).out_info.shape == x.shape


def test_dot_keeps_its_static_arguments(real_jax):
    import jax.numpy as jjnp
    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (4, 2)])
    for lib, jnp in ((meshsim, mjnp), (real_jax, jjnp)):
        out = jnp.dot(a, b, preferred_element_type=jnp.float32)
        np.testing.assert_allclose(np.asarray(out), a @ b, rtol=1e-5)
        assert jnp.dot.trace(a, b, preferred_element_type=jnp.float32).out_info.dtype == np.float32

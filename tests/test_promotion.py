"""JAX's type promotion lattice, weak types included, against real JAX."""
import itertools

import numpy as np
import pytest

from meshsim import _core
from meshsim._src.numpy.promotion import result_type

DTYPES = ["bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float32"]


def _jax_result(a, b):
    jnp = pytest.importorskip("jax.numpy")
    jax = pytest.importorskip("jax")

    def value(spec):
        kind, dt = spec
        if kind == "weak":
            return {"int32": 1, "float32": 1.0, "bool": True}[dt]
        return jnp.zeros((), dt)

    out = jnp.add(value(a), value(b)) if "bool" not in (a[1], b[1]) else jnp.logical_or(value(a), value(b))
    return np.dtype(out.dtype), bool(jax.typeof(out).weak_type)


SPECS = [("strong", d) for d in DTYPES] + [("weak", "int32"), ("weak", "float32")]


@pytest.mark.parametrize("a,b", list(itertools.combinations_with_replacement(SPECS, 2)))
def test_promote_types_matches_jax(a, b):
    if "bool" in (a[1], b[1]):
        pytest.skip("bool arithmetic promotes through logical ops")
    ours = _core.promote_types(np.dtype(a[1]), a[0] == "weak", np.dtype(b[1]), b[0] == "weak")
    assert (np.dtype(ours[0]), ours[1]) == _jax_result(a, b)


def test_promotion_is_symmetric():
    for a, b in itertools.product(SPECS, repeat=2):
        ab = _core.promote_types(np.dtype(a[1]), a[0] == "weak", np.dtype(b[1]), b[0] == "weak")
        ba = _core.promote_types(np.dtype(b[1]), b[0] == "weak", np.dtype(a[1]), a[0] == "weak")
        assert ab == ba


def test_x64_off_narrows_64_bit_types():
    assert np.dtype(_core.canonicalize_dtype(np.dtype("int64"))) == np.int32
    assert np.dtype(_core.canonicalize_dtype(np.dtype("float64"))) == np.float32
    assert np.dtype(_core.canonicalize_dtype(np.dtype("uint64"))) == np.uint32
    # uint32 with int32 needs int64, which narrows back to int32 as in JAX
    assert np.dtype(_core.promote_types(np.dtype("uint32"), False, np.dtype("int32"), False)[0]) == np.int32


def test_result_type_of_python_scalars():
    assert result_type(1, 2) == (np.dtype("int32"), True)
    assert result_type(1, 2.0) == (np.dtype("float32"), True)
    assert result_type(np.float32(1), 2) == (np.dtype("float32"), False)
    assert result_type(np.int8(1), 2) == (np.dtype("int8"), False)
    assert result_type(np.int8(1), 2.5) == (np.dtype("float32"), True)

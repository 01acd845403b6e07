"""lax's dtype errors side by side with JAX: operands of unequal dtypes given to an op
that requires equal ones raise JAX's TypeError text, with the tip naming the
promoting jnp function where JAX gives one, eagerly, under jit, grad and vmap;
lax's special functions refuse non-floating operands as JAX's primitives do."""
import numpy as np
import pytest

import meshsim
import meshsim.lax
import meshsim.numpy

jax = pytest.importorskip("jax")
import jax.numpy  # noqa: E402

RNG = np.random.default_rng(0)

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int32", "int16", "int8", "uint8", "uint32")

# lax op -> the dtype family its operands are drawn from.
BINARY_OPS = {
    "add": FLOATS + INTS, "sub": FLOATS + INTS, "mul": FLOATS + INTS, "div": FLOATS + INTS,
    "max": FLOATS + INTS, "min": FLOATS + INTS, "rem": FLOATS + INTS, "eq": FLOATS + INTS,
    "ne": FLOATS + INTS, "lt": FLOATS + INTS, "ge": FLOATS + INTS, "atan2": FLOATS,
    "nextafter": FLOATS, "pow": FLOATS, "bitwise_and": INTS, "bitwise_xor": INTS, "shift_left": INTS,
    "shift_right_logical": INTS, "shift_right_arithmetic": INTS,
}
SPECIAL_BINARY = ("igamma", "igammac", "igamma_grad_a", "zeta", "polygamma")
SPECIAL_UNARY = ("lgamma", "digamma", "bessel_i0e", "bessel_i1e")


def _operands(np_mod, dtypes, shape):
    return [np_mod.asarray(RNG.uniform(1, 3, shape).astype(np.float32)).astype(d) for d in dtypes]


def _message(call, jnp, lax, j):
    with pytest.raises(TypeError) as info:
        call(jnp, lax, j)
    return str(info.value)


def _same_error(call):
    expected = _message(call, jax.numpy, jax.lax, jax)
    got = _message(call, meshsim.numpy, meshsim.lax, meshsim)
    assert got == expected


def _two_dtypes(family):
    first, second = RNG.choice(len(family), 2, replace=False)
    return family[first], family[second]


# Differentiable in JAX (its grad of nextafter fails on the missing rule first).
GRAD_OPS = [op for op, family in BINARY_OPS.items() if family[0] in FLOATS and op != "nextafter"]
CASES = [(op, where) for op in BINARY_OPS for where in ("eager", "jit", "vmap")] + \
    [(op, "grad") for op in GRAD_OPS]


@pytest.mark.parametrize("op,where", CASES)
def test_binary_op_of_unequal_dtypes(op, where):
    dtypes = _two_dtypes(FLOATS if where == "grad" else BINARY_OPS[op])
    shape = tuple(RNG.integers(1, 4, RNG.integers(0, 3)))
    if where == "vmap":
        shape = (int(RNG.integers(1, 4)),) + shape

    def call(jnp, lax, j):
        x, y = _operands(jnp, dtypes, shape)
        fn = getattr(lax, op)
        if where == "jit":
            return j.jit(fn)(x, y)
        if where == "grad":
            return j.grad(lambda a: fn(a, y).astype(jnp.float32).sum())(x)
        if where == "vmap":
            return j.vmap(fn)(x, y)
        return fn(x, y)
    _same_error(call)


@pytest.mark.parametrize("scalar", [2, 2.5])
def test_binary_op_with_python_scalar(scalar):
    # A Python scalar takes its own weak dtype: int32 beside floats, float32 beside ints.
    dtype = RNG.choice(INTS if isinstance(scalar, float) else FLOATS[1:])
    _same_error(lambda jnp, lax, j: lax.mul(jnp.ones(3, dtype), scalar))


@pytest.mark.parametrize("cases", [2, 3, 4])
def test_select_n_names_every_case_dtype(cases):
    dtypes = [str(RNG.choice(FLOATS))] * cases
    dtypes[int(RNG.integers(1, cases))] = "float32" if dtypes[0] != "float32" else "float16"

    def call(jnp, lax, j):
        which = jnp.asarray(RNG.integers(0, cases, 5).astype(np.int32)) if cases > 2 else jnp.ones(5, bool)
        return lax.select_n(which, *_operands(jnp, dtypes, (5,)))
    _same_error(call)


def test_concatenate_and_clamp_and_dynamic_update_slice():
    _same_error(lambda jnp, lax, j: lax.concatenate(_operands(jnp, ("float32", "float32", "int32"), (2,)), 0))
    _same_error(lambda jnp, lax, j: lax.clamp(*_operands(jnp, ("float16", "float32", "float32"), (3,))))
    _same_error(lambda jnp, lax, j: lax.dynamic_update_slice(*_operands(jnp, ("float32", "float16"), (3,)),
                                                             (0,)))
    _same_error(lambda jnp, lax, j: lax.bitwise_or(*_operands(jnp, ("int32", "int8"), (3,))))


@pytest.mark.parametrize("op", SPECIAL_BINARY)
@pytest.mark.parametrize("dtypes", [("float32", "float16"), ("int32", "float32"), ("float32", "int32"),
                                    ("float32", "bool")])
def test_special_function_dtypes(op, dtypes):
    _same_error(lambda jnp, lax, j: getattr(lax, op)(*_operands(jnp, dtypes, (3,))))


@pytest.mark.parametrize("op", SPECIAL_BINARY + SPECIAL_UNARY)
def test_special_function_accepts_what_jax_accepts(op):
    dtype = str(RNG.choice(FLOATS))
    arity = 2 if op in SPECIAL_BINARY else 1
    for mod in (jax, meshsim):
        args = _operands(mod.numpy, (dtype,) * arity, (4,))
        assert getattr(mod.lax, op)(*args).dtype == dtype
    if arity == 2:  # a Python float is a float32 here: fine beside float32 only
        _same_outcome(lambda jnp, lax, j: getattr(lax, op)(jnp.ones(3, dtype), 2.0))
        _same_outcome(lambda jnp, lax, j: getattr(lax, op)(2.5, jnp.ones(3, dtype)))


def _same_outcome(call):
    try:
        expected = call(jax.numpy, jax.lax, jax)
    except TypeError:
        _same_error(call)
        return
    got = call(meshsim.numpy, meshsim.lax, meshsim)
    assert got.dtype == expected.dtype and got.shape == expected.shape


@pytest.mark.parametrize("op", SPECIAL_UNARY)
@pytest.mark.parametrize("operand", ["int32", "bool", 2])
def test_special_unary_refuses_non_floating(op, operand):
    _same_error(lambda jnp, lax, j: getattr(lax, op)(operand if isinstance(operand, int)
                                                     else jnp.ones(3, operand)))

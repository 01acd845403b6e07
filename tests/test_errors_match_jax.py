"""Error cases side by side with JAX: each case runs under meshsim and under the
installed JAX, and meshsim must raise an exception of JAX's type (an instance
of it) and, where the case says so, JAX's message.

Python ints out of the default integer's range (x64 off) raise OverflowError
as in JAX; reshape, matmul, broadcasting, axis and dtype-name errors follow
JAX's types and name the shapes, axes or dtypes at fault."""
import numpy as np
import pytest

import meshsim
import meshsim.lax
import meshsim.numpy

jax = pytest.importorskip("jax")
import jax.numpy  # noqa: E402

SAME_MESSAGE, SAME_TYPE, SAME_FIRST_LINE = "message", "type", "first line"


def _leaked_tracer(j):
    """A tracer a jitted function stored outside itself."""
    kept = []
    j.jit(lambda x: kept.append(x * 2) or x)(1.0)
    return kept[0]


CASES = {
    # Python ints that int32 cannot hold (x64 off).
    "array(2**40)": (lambda jnp, lax, j: jnp.array(2**40), SAME_MESSAGE),
    "asarray(2**31)": (lambda jnp, lax, j: jnp.asarray(2**31), SAME_MESSAGE),
    "asarray(-2**31 - 1)": (lambda jnp, lax, j: jnp.asarray(-2**31 - 1), SAME_MESSAGE),
    "array(2**64)": (lambda jnp, lax, j: jnp.array(2**64), SAME_MESSAGE),
    "array([2**31])": (lambda jnp, lax, j: jnp.array([2**31]), SAME_MESSAGE),
    "array([1, 2**31])": (lambda jnp, lax, j: jnp.array([1, 2**31]), SAME_MESSAGE),
    "array(((2**40,),))": (lambda jnp, lax, j: jnp.array(((2**40,),)), SAME_MESSAGE),
    "array([np.int8(1), 2**31])": (lambda jnp, lax, j: jnp.array([np.int8(1), 2**31]), SAME_MESSAGE),
    "array([np.int64(2**40)])": (lambda jnp, lax, j: jnp.array([np.int64(2**40)]), SAME_MESSAGE),
    "uint32(-1)": (lambda jnp, lax, j: jnp.uint32(-1), SAME_MESSAGE),
    "uint32(2**32)": (lambda jnp, lax, j: jnp.uint32(2**32), SAME_MESSAGE),
    "int8(300)": (lambda jnp, lax, j: jnp.int8(300), SAME_MESSAGE),
    "uint8(-1)": (lambda jnp, lax, j: jnp.uint8(-1), SAME_MESSAGE),
    "asarray(-1, uint32)": (lambda jnp, lax, j: jnp.asarray(-1, dtype=jnp.uint32), SAME_MESSAGE),
    "array([300], int8)": (lambda jnp, lax, j: jnp.array([300], dtype=jnp.int8), SAME_MESSAGE),
    "array(2**40, uint32)": (lambda jnp, lax, j: jnp.array(2**40, dtype=jnp.uint32), SAME_MESSAGE),
    "full((2,), 2**64)": (lambda jnp, lax, j: jnp.full((2,), 2**64), SAME_MESSAGE),
    "lax.add(x, 2**31)": (lambda jnp, lax, j: lax.add(jnp.arange(3), 2**31), SAME_MESSAGE),
    "arange(3) * 2**31": (lambda jnp, lax, j: jnp.arange(3) * 2**31, SAME_TYPE),
    "ones(3) + 2**40": (lambda jnp, lax, j: jnp.ones(3) + 2**40, SAME_TYPE),
    "jit argument 2**31": (lambda jnp, lax, j: j.jit(lambda x: x)(2**31), SAME_MESSAGE),
    "jit argument y['a']": (lambda jnp, lax, j: j.jit(lambda x, y: x)(1, {"a": -2**40}), SAME_MESSAGE),
    # Reshape to another size.
    "x.reshape(4, 2)": (lambda jnp, lax, j: jnp.ones((2, 3)).reshape(4, 2), SAME_MESSAGE),
    "reshape(x, (5,))": (lambda jnp, lax, j: jnp.reshape(jnp.ones((2, 3)), (5,)), SAME_MESSAGE),
    "reshape(x, (4, -1))": (lambda jnp, lax, j: jnp.reshape(jnp.ones((2, 3)), (4, -1)), SAME_MESSAGE),
    "reshape(x, (-1, -1))": (lambda jnp, lax, j: jnp.reshape(jnp.ones((2, 3)), (-1, -1)), SAME_MESSAGE),
    # Matmul shape mismatches.
    "[2,3] @ [2,3]": (lambda jnp, lax, j: jnp.ones((2, 3)) @ jnp.ones((2, 3)), SAME_MESSAGE),
    "[2,3] @ [4]": (lambda jnp, lax, j: jnp.ones((2, 3)) @ jnp.ones(4), SAME_MESSAGE),
    "matmul(x, 2.0)": (lambda jnp, lax, j: jnp.matmul(jnp.ones((2, 3)), 2.0), SAME_MESSAGE),
    "dot([3], [4])": (lambda jnp, lax, j: jnp.dot(jnp.ones(3), jnp.ones(4)), SAME_MESSAGE),
    "batch matmul": (lambda jnp, lax, j: jnp.ones((2, 2, 3)) @ jnp.ones((3, 3, 4)), SAME_MESSAGE),
    "einsum ij,jk": (lambda jnp, lax, j: jnp.einsum("ij,jk->ik", jnp.ones((2, 3)), jnp.ones((2, 3))),
                     SAME_TYPE),  # JAX (opt_einsum) prints the two sizes swapped
    # Broadcasting mismatches name the shapes: ValueError across ranks, the lax
    # op's TypeError for operands of one rank.
    "[2,3] + [4]": (lambda jnp, lax, j: jnp.ones((2, 3)) + jnp.ones(4), SAME_MESSAGE),
    "[2,3] + [4,3]": (lambda jnp, lax, j: jnp.ones((2, 3)) + jnp.ones((4, 3)), SAME_MESSAGE),
    "multiply [2,3] [3,2]": (lambda jnp, lax, j: jnp.multiply(jnp.ones((2, 3)), jnp.ones((3, 2))),
                             SAME_MESSAGE),
    "[2,3] == [4,3]": (lambda jnp, lax, j: jnp.ones((2, 3)) == jnp.ones((4, 3)), SAME_MESSAGE),
    "where": (lambda jnp, lax, j: jnp.where(True, jnp.ones((2, 3)), jnp.ones((4, 3))), SAME_MESSAGE),
    "broadcast_to": (lambda jnp, lax, j: jnp.broadcast_to(jnp.ones((2, 3)), (4, 3)), SAME_MESSAGE),
    "broadcast_to fewer dims": (lambda jnp, lax, j: jnp.broadcast_to(jnp.ones((2, 3)), (3,)), SAME_MESSAGE),
    "lax.add shapes": (lambda jnp, lax, j: lax.add(jnp.ones((2, 3)), jnp.ones((3, 2))), SAME_MESSAGE),
    # Axes out of range (meshsim raises NumPy's AxisError, both a ValueError and an
    # IndexError; JAX raises one or the other).
    "sum(axis=2)": (lambda jnp, lax, j: jnp.ones((2, 3)).sum(axis=2), SAME_MESSAGE),
    "sum(axis=-3)": (lambda jnp, lax, j: jnp.sum(jnp.ones((2, 3)), axis=-3), SAME_MESSAGE),
    "max(axis=(0, 2))": (lambda jnp, lax, j: jnp.max(jnp.ones((2, 3)), axis=(0, 2)), SAME_MESSAGE),
    "mean(axis=5)": (lambda jnp, lax, j: jnp.mean(jnp.ones((2, 3)), axis=5), SAME_TYPE),
    "argmax(axis=2)": (lambda jnp, lax, j: jnp.argmax(jnp.ones((2, 3)), axis=2), SAME_TYPE),
    "split(axis=2)": (lambda jnp, lax, j: jnp.split(jnp.ones((2, 3)), 2, axis=2), SAME_TYPE),
    "swapaxes(0, 2)": (lambda jnp, lax, j: jnp.swapaxes(jnp.ones((2, 3)), 0, 2), SAME_TYPE),
    "cumsum(axis=2)": (lambda jnp, lax, j: jnp.cumsum(jnp.ones((2, 3)), axis=2), SAME_MESSAGE),
    "concatenate(axis=2)": (lambda jnp, lax, j: jnp.concatenate([jnp.ones((2, 3))] * 2, axis=2),
                            SAME_MESSAGE),
    "stack(axis=4)": (lambda jnp, lax, j: jnp.stack([jnp.ones((2, 3))] * 2, axis=4), SAME_MESSAGE),
    "expand_dims(x, 4)": (lambda jnp, lax, j: jnp.expand_dims(jnp.ones((2, 3)), 4), SAME_MESSAGE),
    "take(axis=3)": (lambda jnp, lax, j: jnp.take(jnp.ones((2, 3)), jnp.array([0]), axis=3), SAME_MESSAGE),
    "sort(axis=2)": (lambda jnp, lax, j: jnp.sort(jnp.ones((2, 3)), axis=2), SAME_MESSAGE),
    "argsort(axis=2)": (lambda jnp, lax, j: jnp.argsort(jnp.ones((2, 3)), axis=2), SAME_MESSAGE),
    "lax.sort(dimension=2)": (lambda jnp, lax, j: lax.sort(jnp.ones((2, 3)), dimension=2), SAME_MESSAGE),
    "diagonal(axis2=2)": (lambda jnp, lax, j: jnp.diagonal(jnp.ones((2, 3)), 0, 0, 2), SAME_MESSAGE),
    "moveaxis(x, 3, 0)": (lambda jnp, lax, j: jnp.moveaxis(jnp.ones((2, 3)), 3, 0), SAME_MESSAGE),
    "nn.softmax(axis=2)": (lambda jnp, lax, j: j.nn.softmax(jnp.ones((2, 3)), axis=2), SAME_MESSAGE),
    # Bad dtype names.
    "zeros(dtype='floot32')": (lambda jnp, lax, j: jnp.zeros(3, dtype="floot32"), SAME_MESSAGE),
    "ones(3, 'int33')": (lambda jnp, lax, j: jnp.ones(3, "int33"), SAME_MESSAGE),
    "astype('foo')": (lambda jnp, lax, j: jnp.ones(3).astype("foo"), SAME_MESSAGE),
    "asarray(dtype='bogus')": (lambda jnp, lax, j: jnp.asarray([1, 2], dtype="bogus"), SAME_MESSAGE),
    "arange(dtype='nope')": (lambda jnp, lax, j: jnp.arange(3, dtype="nope"), SAME_MESSAGE),
    "jnp.dtype('floot32')": (lambda jnp, lax, j: jnp.dtype("floot32"), SAME_MESSAGE),
    "convert_element_type('xx')": (lambda jnp, lax, j: lax.convert_element_type(jnp.ones(3), "xx"),
                                   SAME_MESSAGE),
    "zeros(dtype=object)": (lambda jnp, lax, j: jnp.zeros(3, dtype=object), SAME_TYPE),
    "normal(dtype=int32)": (lambda jnp, lax, j: j.random.normal(j.random.key(0), (2,), dtype="int32"),
                            SAME_MESSAGE),
    # Windows larger than the operand, and negative sizes.
    "dynamic_slice sizes > shape": (lambda jnp, lax, j: lax.dynamic_slice(jnp.ones(4), (1,), (6,)),
                                    SAME_MESSAGE),
    "dynamic_slice (5, -1)": (lambda jnp, lax, j: lax.dynamic_slice(jnp.ones((4, 3)), (1, 0), (5, -1)),
                              SAME_MESSAGE),
    "dynamic_slice (2, -1)": (lambda jnp, lax, j: lax.dynamic_slice(jnp.ones((4, 3)), (1, 0), (2, -1)),
                              SAME_MESSAGE),
    "jit dynamic_slice sizes > shape":
        (lambda jnp, lax, j: j.jit(lambda a: lax.dynamic_slice(a, (0, 1), (2, 4)))(jnp.ones((3, 3))),
         SAME_MESSAGE),
    "dynamic_update_slice update > shape":
        (lambda jnp, lax, j: lax.dynamic_update_slice(jnp.ones((4, 3)), jnp.ones((2, 5)), (0, 0)), SAME_MESSAGE),
    # Static arguments must hash.
    "static list": (lambda jnp, lax, j: j.jit(lambda x, s: x, static_argnums=1)(1.0, [1]), SAME_MESSAGE),
    "static dict kwarg": (lambda jnp, lax, j: j.jit(lambda x, s: x, static_argnames="s")(1.0, s={"a": 1}),
                          SAME_MESSAGE),
    # Shapes from traced values.
    "zeros(traced n)": (lambda jnp, lax, j: j.jit(lambda n: jnp.zeros(n))(3), SAME_MESSAGE),
    "zeros((traced n, 2))": (lambda jnp, lax, j: j.jit(lambda n: jnp.zeros((n, 2)))(3), SAME_MESSAGE),
    "ones([2, traced n])": (lambda jnp, lax, j: j.jit(lambda n: jnp.ones([2, n]))(3), SAME_MESSAGE),
    # Results that are not arrays.
    "jit returns a str": (lambda jnp, lax, j: j.jit(lambda x: (x, "s"))(1.0), SAME_MESSAGE),
    "jit returns an object": (lambda jnp, lax, j: j.jit(lambda x: {"a": [x, object()]})(1.0), SAME_MESSAGE),
    "jit returns a type": (lambda jnp, lax, j: j.jit(lambda x: [x, j.typeof(x)])(1.0), SAME_TYPE),
    "vmap returns a str": (lambda jnp, lax, j: j.vmap(lambda x: (x, "s"))(jnp.ones(2)), SAME_MESSAGE),
    "grad of a str": (lambda jnp, lax, j: j.grad(lambda x: "s")(1.0), SAME_MESSAGE),
    "vjp returns a str": (lambda jnp, lax, j: j.vjp(lambda x: (x, "s"), 1.0), SAME_MESSAGE),
    "jvp returns a str": (lambda jnp, lax, j: j.jvp(lambda x: (x, "s"), (1.0,), (1.0,)), SAME_MESSAGE),
    "jacrev returns an object": (lambda jnp, lax, j: j.jacrev(lambda x: [x, object()])(1.0), SAME_TYPE),
    # A primitive without a derivative is the error even when the output is not a scalar.
    "grad of a vector pure_callback":
        (lambda jnp, lax, j: j.grad(lambda x: j.pure_callback(np.sin, j.ShapeDtypeStruct((5,), np.float32), x))(
            np.ones(5, np.float32)), SAME_MESSAGE),
    "eval_shape returns a str": (lambda jnp, lax, j: j.eval_shape(lambda x: (x, "s"), 1.0), SAME_MESSAGE),
    # A tracer kept past its trace.
    "leaked tracer + 1": (lambda jnp, lax, j: _leaked_tracer(j) + 1, SAME_FIRST_LINE),
    "sin(leaked tracer)": (lambda jnp, lax, j: jnp.sin(_leaked_tracer(j)), SAME_FIRST_LINE),
}


def _raised(fn, *modules):
    with pytest.raises(Exception) as info:
        fn(*modules)
    return info.value


@pytest.mark.parametrize("name", CASES)
def test_error_matches_jax(name):
    case, compared = CASES[name]
    expected = _raised(case, jax.numpy, jax.lax, jax)
    got = _raised(case, meshsim.numpy, meshsim.lax, meshsim)
    if type(expected).__module__.startswith("jax"):  # jax.errors' classes: meshsim.errors' of one hierarchy
        assert [c.__name__ for c in type(got).__mro__] == [c.__name__ for c in type(expected).__mro__], \
            f"JAX raises {expected!r}, meshsim {got!r}"
    else:
        assert isinstance(got, type(expected)), f"JAX raises {expected!r}, meshsim {got!r}"
    if compared == SAME_MESSAGE:
        assert str(got) == str(expected)
    elif compared == SAME_FIRST_LINE:
        assert str(got).splitlines()[0] == str(expected).splitlines()[0]


VALUES = {
    # In range, or converted as NumPy casts (JAX wraps these too).
    "asarray(2**31 - 1)": lambda jnp, lax: jnp.asarray(2**31 - 1),
    "asarray(-2**31)": lambda jnp, lax: jnp.asarray(-2**31),
    "uint32(2**32 - 1)": lambda jnp, lax: jnp.uint32(2**32 - 1),
    "array(2**31, uint32)": lambda jnp, lax: jnp.array(2**31, dtype=jnp.uint32),
    "array(2**31, float32)": lambda jnp, lax: jnp.array(2**31, dtype=jnp.float32),
    "array([2**31 - 1, -2**31])": lambda jnp, lax: jnp.array([2**31 - 1, -2**31]),
    "array([np.int8(1), 2])": lambda jnp, lax: jnp.array([np.int8(1), 2]),
    "array(np.int64(2**40))": lambda jnp, lax: jnp.array(np.int64(2**40)),
    "array(np.array([2**40]))": lambda jnp, lax: jnp.array(np.array([2**40])),
    "full((2,), 2**31)": lambda jnp, lax: jnp.full((2,), 2**31),
    "full((2,), 2**40, int32)": lambda jnp, lax: jnp.full((2,), 2**40, jnp.int32),
    "lax.convert_element_type(2**31, int32)": lambda jnp, lax: lax.convert_element_type(2**31, jnp.int32),
    "lax.convert_element_type(2**100, float32)":
        lambda jnp, lax: lax.convert_element_type(2**100, jnp.float32),
    "uint32 array + -1": lambda jnp, lax: jnp.arange(3, dtype=jnp.uint32) + -1,
    "int8 array + 300": lambda jnp, lax: jnp.arange(3, dtype=jnp.int8) + 300,
}


@pytest.mark.parametrize("name", VALUES)
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_int_conversions_that_succeed_match_jax(name):
    expected = VALUES[name](jax.numpy, jax.lax)
    got = VALUES[name](meshsim.numpy, meshsim.lax)
    assert got.dtype == expected.dtype and got.weak_type == expected.weak_type
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


def test_array_equiv_of_unbroadcastable_shapes_is_false():
    # NumPy's answer; JAX 0.10.2 lets the TypeError of `equal` escape instead.
    assert not bool(meshsim.numpy.array_equiv(meshsim.numpy.ones(3), meshsim.numpy.ones(2)))
    assert not bool(meshsim.numpy.array_equiv(meshsim.numpy.ones((2, 3)), meshsim.numpy.ones(2)))

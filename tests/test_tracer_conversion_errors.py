"""Python conversions of arrays and of traced values, side by side with JAX 0.10.2.

Concrete arrays: bool() follows NumPy (one element of any rank has a truth value, more or
none raise ValueError), float()/int()/complex() want rank 0, __index__ a rank-0 integer,
and item assignment raises JAX's TypeError. Traced values: the error says which function
was being traced, for which transformation, and which of its arguments the value depends
on, as JAX's does ("... while tracing the function f at file.py:12 for jit ...")."""
import functools
import warnings

import numpy as np
import pytest

import meshsim
from outcomes import outcome

jax = pytest.importorskip("jax")


@pytest.fixture(params=[0, 1, 2])
def rng(request):
    return np.random.default_rng(request.param)


def _random_shape(rng, size):
    """A shape of rank 0 to 3 holding `size` elements (size 1 of any rank, or 0/many)."""
    rank = int(rng.integers(0 if size == 1 else 1, 4))
    dims = [1] * rank
    if rank:
        dims[int(rng.integers(rank))] = size
    return tuple(dims)


@pytest.mark.parametrize("size", [0, 1, 3])
@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "bfloat16", "uint8", "complex64"])
@pytest.mark.parametrize("conversion", [bool, float, int, complex, "index", "setitem", "len"])
def test_conversions_of_concrete_arrays_match_jax(rng, size, dtype, conversion):
    shape = _random_shape(rng, size)
    host = rng.integers(0, 3, size=shape)

    def convert(j):
        x = j.numpy.asarray(host, dtype=dtype)
        if conversion == "index":
            return [10, 11, 12, 13][x.__index__()]
        if conversion == "setitem":
            x[0] = 1
            return x
        if conversion == "len":
            return len(x)
        return conversion(x)

    with warnings.catch_warnings():  # complex to real casts warn under both
        warnings.simplefilter("ignore")
        assert outcome(convert, meshsim) == outcome(convert, jax), (shape, host)


def _branch(x):
    return 1 if x > 0 else 0


def _two(x, y):
    return 1 if x + y > 0 else 0


def _tree(p, n):
    return 1 if p["a"][1] * n > 0 else 0


def _uses_last(a, b, c, *, scale):
    return int(c * scale)


def _loop_body(i, c):
    return c + (1 if c > 0 else 0)


# Each case takes the library and returns what to run; the same function objects are traced
# under both, so the source locations the messages give agree.
CASES = {
    "jit bool": lambda j: j.jit(_branch)(1.0),
    "jit two arguments": lambda j: j.jit(_two)(1.0, 2.0),
    "jit pytree path": lambda j: j.jit(_tree)({"a": [1.0, 2.0]}, 3.0),
    "jit keyword": lambda j: j.jit(_tree)({"a": [1.0, 2.0]}, n=3.0),
    "jit three arguments int()": lambda j: j.jit(lambda x, y, z: int(x + y + z))(1, 2, 3),
    "jit keyword-only int()": lambda j: j.jit(_uses_last)(1.0, 2.0, 3.0, scale=2.0),
    "jit static argnums": lambda j: j.jit(_two, static_argnums=0)(1.0, 2.0),
    "jit static argnames": lambda j: j.jit(_two, static_argnames="y")(1.0, y=2.0),
    "jit partial": lambda j: j.jit(functools.partial(_two, y=1.0))(1.0),
    "jit __index__": lambda j: j.jit(lambda x: range(x))(3),
    "jit item()": lambda j: j.jit(lambda x: j.numpy.array(x).item())(3),
    "jit __array__": lambda j: j.jit(lambda x: np.asarray(x))(3),
    "jit shape": lambda j: j.jit(lambda n: j.numpy.zeros((n, 2)))(3),
    "make_jaxpr": lambda j: j.make_jaxpr(_branch)(1.0),
    "eval_shape": lambda j: j.eval_shape(_two, 1.0, 2.0),
    "scan body": lambda j: j.jit(lambda x: j.lax.scan(
        lambda c, x: (c + (1 if x > 0 else 0), x), 0.0, x))(j.numpy.ones(3)),
    "scan carry tree": lambda j: j.jit(lambda x: j.lax.scan(
        lambda c, x: ((c[0], c[1] + (1 if c[1] > 0 else 0)), x), (x[0], x[1]), x))(j.numpy.ones(3)),
    "fori_loop": lambda j: j.jit(lambda x: j.lax.fori_loop(0, 3, _loop_body, x))(1.0),
    "cond branch": lambda j: j.jit(lambda x: j.lax.cond(
        x > 0, lambda x: 1.0 if x > 0 else 0.0, lambda x: x, x))(1.0),
    "switch branch": lambda j: j.jit(lambda i, x: j.lax.switch(
        i, [lambda x: x, lambda x: 1.0 if x > 0 else 0.0], x))(1, 2.0),
    "while cond": lambda j: j.jit(lambda x: j.lax.while_loop(
        lambda c: bool(c < 3), lambda c: c + 1, x))(0.0),
    "while body": lambda j: j.jit(lambda x: j.lax.while_loop(
        lambda c: c < 3, lambda c: c + (1 if c > 0 else 2), x))(0.0),
}


@pytest.mark.parametrize("name", CASES)
def test_traced_conversion_errors_name_their_origin_as_jax(name):
    assert outcome(CASES[name], meshsim) == outcome(CASES[name], jax)


@pytest.mark.parametrize("transform", ["jit", "vmap", "make_jaxpr"])
@pytest.mark.parametrize("use", ["getitem", "at set", "at add", "getitem of a row"])
def test_traced_boolean_indices_raise_jaxs_non_concrete_error(rng, transform, use):
    shape = tuple(int(d) for d in rng.integers(1, 5, size=int(rng.integers(1, 3))))
    host = rng.standard_normal((2, *shape)).astype(np.float32)

    def index(j, x):
        mask = x > 0
        if use == "at set":
            return x.at[mask].set(0.0)
        if use == "at add":
            return x.at[mask].add(1.0)
        if use == "getitem of a row":
            return x[j.numpy.stack([mask, ~mask])[0]]
        return x[mask]

    def run(j):
        f = functools.partial(index, j)
        x = j.numpy.asarray(host)
        if transform == "vmap":
            return j.vmap(f)(x).shape
        if transform == "make_jaxpr":
            return str(j.make_jaxpr(f)(x))
        return j.jit(f)(x).shape

    result = outcome(run, meshsim)
    assert result[0] == "NonConcreteBooleanIndexError"
    assert result == outcome(run, jax)
    with pytest.raises(IndexError):  # JAX's class is an IndexError: code catching that works
        run(meshsim)
    assert issubclass(meshsim.errors.NonConcreteBooleanIndexError, meshsim.errors.JAXIndexError)

"""Array creation and dtypes: meshsim.numpy's constructors, scalar types and
dtype queries, against NumPy (values) and JAX (dtypes, weak types, values)."""
import warnings

import numpy as np
import pytest

import meshsim as mjax
import meshsim.lax as lax
import meshsim.numpy as jnp

jax = pytest.importorskip("jax")
jjnp = jax.numpy


def same_as_jax(ours, theirs, exact=True):
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    assert ours.weak_type == theirs.weak_type, (ours.weak_type, theirs.weak_type)
    if exact:
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    else:
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6, atol=1e-6)


def both(expr: str, **names):
    """Evaluates `expr` with jnp/lax bound to meshsim, then to JAX."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX warns when float64 is truncated
        ours = eval(expr, {"jnp": jnp, "lax": lax, "np": np, **names})
        theirs = eval(expr, {"jnp": jjnp, "lax": jax.lax, "np": np, **names})
    return ours, theirs


ARRAY_CASES = [
    "jnp.array(1.5)", "jnp.asarray(1.5)", "jnp.array(3)", "jnp.array(True)", "jnp.array([1, 2])",
    "jnp.array([1, 2.0])", "jnp.array([[True], [False]])", "jnp.array(1.5, dtype=jnp.float32)",
    "jnp.asarray(1, dtype=float)", "jnp.array(np.float64(2))", "jnp.array(np.arange(3))",
    "jnp.array(np.array([1, 2], dtype=np.uint64))", "jnp.array([])", "jnp.array([[], []])",
    "jnp.array(lax.full((), 1.0))", "jnp.asarray(lax.full((2,), 1.0))",
    "jnp.array([1, lax.full((), 2.0)])", "jnp.array([lax.full((), 2.0)])",
    "jnp.array([jnp.ones(2), np.ones(2)])", "jnp.array([[jnp.ones(2)], [jnp.zeros(2)]], dtype=jnp.int8)",
    "jnp.array(jnp.arange(3), dtype=jnp.float32)", "jnp.array(2, ndmin=3)", "jnp.array([1, 2], ndmin=2)",
    "jnp.array((1, 2), dtype='uint8')", "jnp.array([1, 2], dtype=jnp.bool_)",
]


@pytest.mark.parametrize("expr", ARRAY_CASES)
def test_array_and_asarray_match_jax(expr):
    same_as_jax(*both(expr))


CREATION_CASES = [
    "jnp.zeros(3)", "jnp.zeros((2, 0, 3), int)", "jnp.ones((2, 3), jnp.bool_)", "jnp.ones(4, 'int8')",
    "jnp.empty((2,))", "jnp.full((2,), 3)", "jnp.full((2,), 3.0)", "jnp.full((2, 1), np.int8(3))",
    "jnp.full((2,), True)", "jnp.full((2, 3), jnp.arange(3))", "jnp.full((2,), 2.5, dtype=int)",
    "jnp.full((2,), lax.full((), 1.0))", "jnp.full((), 7, jnp.uint16)",
    "jnp.zeros_like(lax.full((2,), 1.0))", "jnp.zeros_like(2.0)", "jnp.zeros_like(np.ones((2, 2), np.int8))",
    "jnp.ones_like(jnp.arange(3), dtype=float)", "jnp.full_like(jnp.ones(2, int), 2.5)",
    "jnp.full_like(lax.full((2,), 1.0), 2)", "jnp.full_like(jnp.ones(3), 4, shape=(2, 2))",
    "jnp.empty_like(jnp.ones((2, 3)))", "jnp.full_like(jnp.ones((2, 3)), jnp.arange(3))",
    "jnp.astype(jnp.ones(2), int)", "jnp.astype(lax.full((2,), 1.0), jnp.float32)",
    "jnp.copy(lax.full((2,), 1.0))", "jnp.copy(np.arange(3))",
    "jnp.float32(2)", "jnp.int32(2.7)", "jnp.float32(lax.full((), 1))", "jnp.int8([1, 2])",
    "jnp.bool_(1)", "jnp.uint32(np.arange(3))", "jnp.float64(3)", "jnp.int64(5)",
]


@pytest.mark.parametrize("expr", CREATION_CASES)
def test_constructors_match_jax(expr):
    same_as_jax(*both(expr))


ARANGE_CASES = [
    "jnp.arange(5)", "jnp.arange(0)", "jnp.arange(-3)", "jnp.arange(5.0)", "jnp.arange(1, 5)",
    "jnp.arange(5, 1, -1)", "jnp.arange(0.5, 2)", "jnp.arange(0.0, 1.0, 0.1)", "jnp.arange(-1, 1, 0.01)",
    "jnp.arange(10, 0, -0.3)", "jnp.arange(1, 5, dtype=float)", "jnp.arange(0, 5, 0.5, dtype=int)",
    "jnp.arange(np.int8(5))", "jnp.arange(jnp.int8(5))", "jnp.arange(3, dtype=jnp.uint8)",
    "jnp.arange(0, 10, 3)", "jnp.arange(1e6, 1e6 + 10, 0.7)", "jnp.arange(np.float32(0.1), 2, 0.3)",
]


@pytest.mark.parametrize("expr", ARANGE_CASES)
def test_arange_matches_jax_bit_for_bit(expr):
    same_as_jax(*both(expr))


def test_arange_errors():
    with pytest.raises(ValueError, match="must be scalars"):
        jnp.arange(np.ones(2))
    with pytest.raises(ZeroDivisionError):
        jnp.arange(0, 10, 0)
    with pytest.raises(TypeError, match="jnp.arange argument 'stop'"):
        mjax.jit(lambda n: jnp.arange(n))(3)


LINSPACE_CASES = [
    "jnp.linspace(0, 1, 5)", "jnp.linspace(0, 1)", "jnp.linspace(0, 10, 5, dtype=int)",
    "jnp.linspace(0, 1, 1)", "jnp.linspace(0, 1, 0)", "jnp.linspace(0, 1, 4, endpoint=False)",
    "jnp.linspace(-3.5, 7.25, 17)", "jnp.linspace(jnp.zeros(2), jnp.ones(2), 3)",
    "jnp.linspace(np.zeros((2, 1)), np.arange(3.0), 4, axis=-1)",
    "jnp.linspace(np.zeros(2), np.ones(2), 3, axis=1)", "jnp.linspace(2, 1, 6, dtype=jnp.int8)",
    "jnp.linspace(0, 1, 3, retstep=True)[1]", "jnp.linspace(0, 1, 1, retstep=True)[1]",
    "jnp.linspace(0, 1, 3, dtype=int, retstep=True)[1]",
]


@pytest.mark.parametrize("expr", LINSPACE_CASES)
def test_linspace_matches_jax(expr):
    same_as_jax(*both(expr), exact=False)


def test_linspace_matches_numpy_and_errors():
    rng = np.random.default_rng(0)
    for _ in range(10):
        a, b = rng.normal(size=2) * 10
        n = int(rng.integers(0, 20))
        endpoint = bool(rng.integers(0, 2))
        np.testing.assert_allclose(np.asarray(jnp.linspace(a, b, n, endpoint)),
                                   np.linspace(a, b, n, endpoint, dtype=np.float32), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="Number of samples, -1, must be non-negative"):
        jnp.linspace(0, 1, -1)


GRID_CASES = [
    "jnp.eye(3)", "jnp.eye(3, 4, 1)", "jnp.eye(4, 2, k=-1, dtype=int)", "jnp.eye(0)", "jnp.eye(2, k=5)",
    "jnp.identity(3, jnp.bool_)", "jnp.tri(3)", "jnp.tri(3, 5, -1, int)", "jnp.tri(4, 2, 2)",
    "jnp.tril(np.arange(12).reshape(3, 4))", "jnp.tril(np.ones((2, 3, 3), np.float32), -1)",
    "jnp.triu(np.arange(12).reshape(4, 3), 1)", "jnp.triu(lax.full((2, 2), 1.0))", "jnp.tril(lax.full((2, 2), 1.0), 1)",
    "jnp.indices((2, 3))", "jnp.indices((2, 0, 4), dtype=jnp.int8)", "jnp.indices((3, 2), sparse=True)[1]",
    "jnp.meshgrid(jnp.arange(2), jnp.arange(3.0))[0]", "jnp.meshgrid(jnp.arange(2), jnp.arange(3.0))[1]",
    "jnp.meshgrid(np.arange(2), np.arange(3), np.arange(4), indexing='ij')[2]",
    "jnp.meshgrid(np.arange(2), np.arange(3), np.arange(4))[0]",
    "jnp.meshgrid(np.arange(2), np.arange(3), sparse=True)[1]",
    "jnp.diag(jnp.arange(3))", "jnp.diag(jnp.arange(3), 1)", "jnp.diag(jnp.arange(3.0), -2)",
    "jnp.diag(np.arange(12).reshape(3, 4))", "jnp.diag(np.arange(12).reshape(3, 4), 2)",
    "jnp.diag(np.arange(12).reshape(4, 3), -1)", "jnp.diag(np.arange(12).reshape(4, 3), 5)",
]


@pytest.mark.parametrize("expr", GRID_CASES)
def test_grids_match_jax(expr):
    same_as_jax(*both(expr))


def test_creation_errors_match_jax():
    with pytest.raises(TypeError, match="nonnegative"):
        jnp.zeros((2, -1))
    with pytest.raises(TypeError, match="Shapes must be 1D sequences"):
        jnp.ones((2.5,))
    with pytest.raises(ValueError, match="negative dimensions are not allowed"):
        jnp.eye(-1)
    with pytest.raises(TypeError, match="zeros_like requires ndarray or scalar"):
        jnp.zeros_like([1, 2])
    with pytest.raises(TypeError, match="scalar fill_value"):
        lax.full((2,), np.ones(2))
    with pytest.raises(ValueError, match="at least 2D"):
        jnp.tril(jnp.ones(3))
    with pytest.raises(ValueError, match="must be 1D"):
        jnp.meshgrid(jnp.ones((2, 2)))
    with pytest.raises(TypeError, match="does not support the dtype"):
        jnp.zeros(2, object)


def test_creation_inside_jit_produces_program_values():
    def f(x):
        return (jnp.zeros(3) + x, jnp.arange(4) * 2, jnp.eye(2), jnp.full((2,), 3) + 1,
                jnp.linspace(0, 1, 5) * x, jnp.array([x, 2 * x]), jnp.tril(jnp.ones((3, 3))),
                jnp.asarray(np.arange(3)) + 1)

    ours = mjax.jit(f)(jnp.float32(2))
    theirs = jax.jit(_rebind(f, jjnp))(np.float32(2))
    for o, t in zip(ours, theirs):
        same_as_jax(o, t, exact=False)
    jaxpr = str(mjax.make_jaxpr(lambda: (jnp.zeros(3), jnp.arange(5)))())
    assert "broadcast_in_dim" in jaxpr and "iota" in jaxpr


def _rebind(f, module):
    return type(f)(f.__code__, {**f.__globals__, "jnp": module}, f.__name__, f.__defaults__, f.__closure__)


# --- scalar types and dtype queries --------------------------------------------

SCALAR_TYPES = ["bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float32", "float64"]


@pytest.mark.parametrize("name", SCALAR_TYPES)
def test_scalar_types_behave_like_jax(name):
    ours, theirs, np_type = getattr(jnp, name), getattr(jjnp, name), getattr(np, name)
    assert ours == np_type and ours == np.dtype(np_type) and np.dtype(np_type) == ours
    assert hash(ours) == hash(np_type) and {np_type: 1}[ours] == 1
    assert jnp.dtype(ours) == np.dtype(np_type)
    assert isinstance(np_type(1), ours) and not isinstance(jnp.zeros(()), jnp.int8)
    assert ours.dtype == theirs.dtype
    same_as_jax(*both(f"jnp.{name}(1)"))
    same_as_jax(*both(f"jnp.{name}([0, 1, 1])"))
    same_as_jax(*both(f"jnp.zeros(2, jnp.{name})"))
    assert ours.__name__ == theirs.__name__


def test_scalar_type_aliases_and_constants():
    assert jnp.bool is jnp.bool_ and jnp.single is jnp.float32 and jnp.double is jnp.float64
    assert jnp.int_ is jnp.int64 and jnp.float_ is jnp.float64 and jnp.uint is jnp.uint64
    assert jnp.pi == np.pi and jnp.e == np.e and np.isinf(jnp.inf) and np.isnan(jnp.nan)
    assert jnp.newaxis is None


def canonical(dtype):
    return {"int64": np.int32, "uint64": np.uint32, "float64": np.float32}.get(np.dtype(dtype).name, dtype)


DTYPE_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float32", "float64"]


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype")
def test_promote_types_and_result_type_match_jax():
    for a in DTYPE_NAMES:
        for b in DTYPE_NAMES:
            # JAX's promote_types keeps 64-bit results; meshsim's is canonical (x64 off).
            assert jnp.promote_types(a, b) == canonical(jjnp.promote_types(a, b)), (a, b)
            assert jnp.result_type(a, b) == jjnp.result_type(a, b), (a, b)
        for scalar in (int, float, 1, 2.5, True):
            assert jnp.result_type(a, scalar) == jjnp.result_type(a, scalar), (a, scalar)
        assert jnp.promote_types(a, int) == canonical(jjnp.promote_types(a, int))
        assert jnp.promote_types(float, a) == canonical(jjnp.promote_types(float, a))
    cases = [(1.0,), (np.int64,), (1, np.int8), (jnp.float32,), (int,), (float,), (bool,),
             ("float32", 2), (np.ones(2, np.int8), 2), (np.float64(1),), (1, 1.0), (True, 1)]
    for args in cases:
        jargs = tuple(getattr(jjnp, a.__name__) if a is jnp.float32 else a for a in args)
        assert jnp.result_type(*args) == jjnp.result_type(*jargs), args
    assert jnp.result_type(jnp.ones(2, jnp.int8), 2) == np.int8
    assert jnp.result_type(lax.full((2,), 1.0), jnp.ones(2, jnp.int32)) == np.float32
    with pytest.raises(ValueError, match="at least one array or dtype"):
        jnp.result_type()


def test_dtype_predicates_match_jax():
    kinds = ["number", "integer", "signedinteger", "unsignedinteger", "inexact", "floating", "generic"]
    for name in DTYPE_NAMES:
        for kind in kinds:
            assert jnp.issubdtype(name, getattr(jnp, kind)) == jjnp.issubdtype(name, getattr(jjnp, kind))
            assert jnp.issubdtype(getattr(jnp, name if name != "bool" else "bool_"), getattr(jnp, kind)) == \
                jjnp.issubdtype(getattr(jjnp, name if name != "bool" else "bool_"), getattr(jjnp, kind))
        for other in DTYPE_NAMES:
            assert jnp.issubdtype(name, other) == jjnp.issubdtype(name, other)
            for casting in ("safe", "same_kind", "unsafe"):
                assert jnp.can_cast(name, other, casting) == jjnp.can_cast(name, other, casting)
        for kind in ("bool", "signed integer", "unsigned integer", "integral", "real floating", "numeric"):
            assert jnp.isdtype(name, kind) == jjnp.isdtype(name, kind), (name, kind)
    assert jnp.isdtype(jnp.float32, (jnp.int8, "real floating"))
    with pytest.raises(ValueError, match="kind"):
        jnp.isdtype("int8", "quaternion")


def test_iinfo_finfo():
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        ours, theirs = jnp.iinfo(getattr(jnp, name)), jjnp.iinfo(getattr(jjnp, name))
        assert (ours.min, ours.max, ours.bits) == (theirs.min, theirs.max, theirs.bits)
    assert jnp.iinfo(jnp.ones(2, jnp.int8)).max == 127
    for name in ("float32", "float64"):
        ours, theirs = jnp.finfo(getattr(jnp, name)), jjnp.finfo(getattr(jjnp, name))
        assert (ours.eps, ours.max, ours.tiny, ours.bits) == (theirs.eps, theirs.max, theirs.tiny, theirs.bits)
    assert jnp.finfo(jnp.ones(2)).bits == 32


def test_creation_under_explicit_set_mesh_matches_jax(real_jax):
    """Under set_mesh of an Explicit mesh, creation ops give arrays replicated over that mesh:
    NamedSharding(mesh, P(None, ...)), typed with the AbstractMesh."""
    def run(j):
        jnp = j.numpy
        m = j.make_mesh((2, 4), ("dp", "tp"), axis_types=(j.sharding.AxisType.Explicit,) * 2)
        out = []
        with j.set_mesh(m):
            for x in (jnp.zeros((4, 8)), jnp.ones(3), jnp.full((2, 2), 3.0), jnp.arange(5),
                      jnp.eye(3), jnp.zeros_like(jnp.ones(3)), jnp.zeros(()),
                      j.jit(lambda: jnp.ones((4, 8)))()):
                out.append((str(j.typeof(x)), str(x.sharding), str(j.typeof(x).sharding),
                            np.asarray(x).tolist()))
        return out
    assert run(mjax) == run(real_jax)


def _nested_list(rng, leaves, depth):
    """A nested list (`depth` levels, 1-3 elements each) of items drawn from `leaves`."""
    if depth == 0:
        return leaves[int(rng.integers(len(leaves)))]
    return [_nested_list(rng, leaves, depth - 1) for _ in range(int(rng.integers(1, 4)))]


@pytest.mark.parametrize("seed", range(12))
def test_array_of_a_traced_list_records_jaxs_equations(seed):
    """jnp.array of a (nested) list holding traced values: each element is converted and
    given its leading axis before the next, Python scalars stay literals, and ragged lists
    raise lax.concatenate's errors, as in JAX."""
    rng = np.random.default_rng(seed)
    dtypes = [None, "float32", "int8", "bfloat16", "int32"]
    dtype = dtypes[int(rng.integers(len(dtypes)))]
    depth = int(rng.integers(1, 3))
    shape = tuple(int(d) for d in rng.integers(1, 3, size=int(rng.integers(0, 2))))
    ragged = seed % 4 == 3
    layout = _nested_list(rng, ["a", "b", 2, 1.5, "ones"], depth)
    if ragged:
        layout = [layout, [layout, layout]] if isinstance(layout, list) else [layout, [layout]]

    def run(j):
        def build(a, b):
            fill = {"a": a, "b": b, "ones": np.ones(shape, np.int32)}

            def place(item):
                return [place(e) for e in item] if isinstance(item, list) else fill.get(item, item)

            return j.numpy.array(place(layout), dtype=dtype)

        a, b = np.ones(shape, np.float32), np.full(shape, 3, np.int32)
        try:
            return str(j.make_jaxpr(build)(a, b))
        except (TypeError, ValueError) as e:
            return type(e).__name__, str(e)

    assert run(mjax) == run(jax), layout

"""A generated sweep of bad (and borderline) inputs to the public API, run
against real JAX and meshsim in subprocesses (tests/hostile/): meshsim never
crashes, raises where JAX raises (the same built-in exception type, or any
clean error where JAX fails inside itself), and where both accept, gives
JAX's values. Plus focused regressions for the inputs that used to crash or
be accepted silently."""
import os
import sys

import numpy as np
import pytest

import meshsim as jax
import meshsim.numpy as jnp
from meshsim import lax
from meshsim.sharding import Mesh, PartitionSpec as P

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "hostile"))
import cases as hostile_cases  # noqa: E402
import sweep  # noqa: E402

# Where meshsim knowingly differs, and why. The sweep fails if any other case
# differs, and if one of these no longer does (so the list stays true).
KNOWN = {
    "out = jnp.zeros((0,), jnp.float32)[jnp.array([10])]": "gather from an empty axis fills instead of JAX's TypeError",
    "out = jnp.sum(jnp.ones((2, 3)), axis='a')": "named-axis reductions are not supported (TypeError, not NameError)",
    "out = jnp.mean(jnp.ones((2, 3)), axis='a')": "named-axis reductions are not supported",
    "out = jnp.max(jnp.ones((2, 3)), axis='a')": "named-axis reductions are not supported",
    "out = jnp.prod(jnp.ones((2, 3)), axis='a')": "named-axis reductions are not supported",
    "out = jnp.flip(jnp.ones((2, 3)), axis=(0, 0))": "NumPy's ValueError for a repeated axis, JAX's is a TypeError",
    "out = jnp.moveaxis(jnp.ones((2, 3)), (0, 0), (1, 0))": "NumPy's ValueError for a repeated axis, JAX's is a TypeError",
    "out = jnp.median(jnp.zeros((0,), jnp.float32))": "NaN as NumPy gives; JAX fails in its gather",
    "out = jnp.median(jnp.zeros((3, 0), jnp.float32), axis=1)": "NaN as NumPy gives; JAX fails in its gather",
    "out = jnp.tri(-1)": "ValueError for a negative size (JAX: TypeError from iota)",
    "out = jnp.histogram(jnp.arange(5.0), bins=-1)": "NumPy's ValueError; JAX fails in its bin search (IndexError)",
    "out = jnp.broadcast_to(jnp.ones(3), (-1, 3))": "ValueError for a negative size (JAX: TypeError)",
    "out = jnp.repeat(jnp.ones(3), -1)": "NumPy's ValueError for negative repeats (JAX: TypeError)",
    "out = lax.top_k(jnp.ones(3), 5)": "TypeError as jitted JAX raises it (eager JAX: ValueError)",
    "out = jax.make_mesh((2, 4), ('x', 'x'))": "a mesh naming an axis twice is refused (JAX builds it)",
    "out = Mesh(np.array(jax.devices()[:2] * 2), ('x',))": "a mesh holding a device twice is refused (JAX builds it)",
    "out = Mesh(np.array(jax.devices()), (1,))": "axis names must be strings (JAX takes any hashable)",
    "out = jax.random.permutation(jax.random.key(0), -3)": "a negative size raises (JAX returns an empty permutation)",
}
for _name in ("psum", "pmean"):
    KNOWN[hostile_cases._shard(f"lax.{_name}(a, ('x', 'z'))")] = \
        "NameError for the unbound axis (JAX: a ValueError about VMA)"
for _name in ("psum", "pmax", "pmin", "pmean"):
    KNOWN[hostile_cases._shard(f"lax.{_name}(a, 0)")] = \
        "a positional axis reduces the array's own axis; JAX fails inside shard_map"
for _name in ("pmax", "pmin"):
    KNOWN[hostile_cases._shard(f"lax.{_name}(a, ())")] = "TypeError for no axes (JAX: a ValueError about VMA)"
for _tmpl in (hostile_cases.COLLECTIVES["all_gather"], hostile_cases.COLLECTIVES["psum_scatter"],
              hostile_cases.COLLECTIVES["all_to_all"]):
    KNOWN[hostile_cases._shard(_tmpl.format(ax="0"))] = "NameError for an integer axis name (JAX: ValueError)"
KNOWN[hostile_cases._shard(hostile_cases.COLLECTIVES["psum_scatter"].format(ax="('x', 'z')"))] = \
    "NameError for the unbound axis (JAX: a ValueError about VMA)"


@pytest.fixture(scope="module")
def outcomes():
    cases = hostile_cases.all_cases()
    assert len(cases) >= 300
    return cases, sweep.run_cases("jax", cases), sweep.run_cases("meshsim", cases)


def test_generated_bad_inputs_behave_as_in_jax(outcomes):
    cases, jax_res, ms_res = outcomes
    crashes = [c for c, m in zip(cases, ms_res) if "crash" in m]
    assert not crashes, crashes
    diffs = {c: sweep.compare(j, m) for c, j, m in zip(cases, jax_res, ms_res)}
    unexpected = {c: d for c, d in diffs.items() if d and c not in KNOWN}
    assert not unexpected, "\n".join(f"{c}\n    {d}" for c, d in unexpected.items())
    stale = [c for c in KNOWN if c in diffs and not diffs[c]]
    assert not stale, f"no longer differ, remove from KNOWN: {stale}"
    assert all(c in diffs for c in KNOWN), [c for c in KNOWN if c not in diffs]


# ---- focused regressions ----------------------------------------------------

MESH42 = Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))


@pytest.mark.parametrize("body", [
    lambda a: lax.psum(a, ("x", "x")), lambda a: lax.pmin(a, ("x", "x")),
    lambda a: lax.pmax(a, ("y", "y")), lambda a: lax.pmean(a, ("x", "x")),
    lambda a: lax.all_gather(a, ("x", "x"), tiled=True)[:2],
    lambda a: lax.psum_scatter(jnp.tile(a, (16, 1)), ("x", "x"), tiled=True)[:2],
    lambda a: lax.all_to_all(jnp.tile(a, (16, 1)), ("x", "x"), 0, 0, tiled=True)[:2],
    lambda a: lax.pbroadcast(a, ("x", "x"), 0), lambda a: lax.ppermute(a, ("x", "x"), [(0, 1)]),
], ids=["psum", "pmin", "pmax", "pmean", "all_gather", "psum_scatter", "all_to_all", "pbroadcast",
        "ppermute"])
@pytest.mark.parametrize("jit", [True, False])
def test_collective_naming_an_axis_twice_raises_jax_error(body, jit):
    f = jax.shard_map(body, mesh=MESH42, in_specs=P("x"), out_specs=P("x"))
    with pytest.raises(ValueError, match="^repeated axis in `source` argument$"):
        (jax.jit(f) if jit else f)(jnp.arange(16.0).reshape(8, 2))


def test_collective_axis_index_over_a_repeated_axis_is_allowed_as_in_jax():
    f = jax.jit(jax.shard_map(lambda a: a + lax.axis_index(("x", "x")), mesh=MESH42, in_specs=P("x"),
                              out_specs=P("x")))
    got = np.asarray(f(jnp.zeros((8, 2))))
    np.testing.assert_array_equal(got[::2, 0], [0, 5, 10, 15])


@pytest.mark.parametrize("shape", [(2**62 + 1, 64), (2**31, 2**31, 4), (2**32, 2**32)])
def test_shape_products_that_overflow_raise(shape):
    x = jnp.zeros((64,))
    with pytest.raises(TypeError, match="cannot reshape array of shape"):
        x.reshape(shape)
    with pytest.raises(ValueError, match="more elements than an array can hold"):
        jax.jit(lambda: jnp.zeros(shape))()


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.int16, np.uint32])
def test_integer_sums_wrap_as_jax(dtype, real_jax):
    info = np.iinfo(dtype)
    x = np.full((16,), info.max // 3 + 1, dtype)
    for f in ("sum", "cumsum", "prod"):
        got = np.asarray(getattr(jnp, f)(jnp.asarray(x), dtype=dtype))
        want = np.asarray(getattr(real_jax.numpy, f)(x, dtype=dtype))
        np.testing.assert_array_equal(got, want)
    mesh = Mesh(jax.devices(), ("x",))
    f = jax.jit(jax.shard_map(lambda a: lax.psum(a, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
    rmesh = real_jax.sharding.Mesh(real_jax.devices(), ("x",))
    rf = real_jax.jit(real_jax.shard_map(lambda a: real_jax.lax.psum(a, "x"), mesh=rmesh,
                                         in_specs=real_jax.sharding.PartitionSpec("x"),
                                         out_specs=real_jax.sharding.PartitionSpec()))
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(x))), np.asarray(rf(x)))


@pytest.mark.parametrize("index", [2**31, -2**31 - 1, 2**63])
def test_python_int_index_beyond_int32_overflows_as_jax(index):
    with pytest.raises(OverflowError, match="too large to convert to int32"):
        jnp.arange(4.0)[index]


@pytest.mark.parametrize("kw, text", [
    (dict(static_argnums=3), r"static_argnums=\(3,\), but only accepts 1 positional"),
    (dict(donate_argnums=(2, -5)), r"donate_argnums=\(2, -5\), but only accepts 1 positional"),
    (dict(static_argnames="y"), r"invalid argnames \{'y'\} in static_argnames"),
    (dict(donate_argnums=0, static_argnums=0), "cannot intersect"),
])
def test_jit_argnums_out_of_range_raise_as_jax(kw, text):
    with pytest.raises(ValueError, match=text):
        jax.jit(lambda x: x, **kw)


def test_ppermute_pairs_must_be_integers():
    mesh = Mesh(jax.devices(), ("x",))
    for perm in ([(0.0, 1.0)], [("a", "b")]):
        f = jax.shard_map(lambda a: lax.ppermute(a, "x", perm), mesh=mesh, in_specs=P("x"),
                          out_specs=P("x"))
        with pytest.raises(TypeError, match="pairs of integers"):
            f(jnp.arange(8.0))


def test_list_in_specs_are_refused_as_jax_refuses_them():
    mesh = Mesh(jax.devices(), ("x",))
    f = jax.shard_map(lambda a: a, mesh=mesh, in_specs=[P("x")], out_specs=P("x"))
    with pytest.raises(ValueError, match="pytree structure error"):
        f(jnp.arange(8.0))


def test_make_mesh_with_a_zero_or_negative_axis_raises():
    for shape in ((0, 8), (-8,)):
        with pytest.raises(ValueError, match="must be positive"):
            jax.make_mesh(shape, ("x", "y")[:len(shape)])


def test_masked_array_input_is_refused_as_jax():
    with pytest.raises(ValueError, match="masked arrays are not supported"):
        jnp.asarray(np.ma.array([1.0, 2.0], mask=[0, 1]))


@pytest.mark.parametrize("op", ["pmax", "pmin"])
def test_pmax_pmin_with_nan_on_any_device_as_jax_cpu(op, real_jax):
    mesh = Mesh(jax.devices(), ("x",))
    rmesh = real_jax.sharding.Mesh(real_jax.devices(), ("x",))
    f = jax.jit(jax.shard_map(lambda a: getattr(lax, op)(a, "x"), mesh=mesh, in_specs=P("x"),
                              out_specs=P()))
    rf = real_jax.jit(real_jax.shard_map(lambda a: getattr(real_jax.lax, op)(a, "x"), mesh=rmesh,
                                         in_specs=real_jax.sharding.PartitionSpec("x"),
                                         out_specs=real_jax.sharding.PartitionSpec()))
    rng = np.random.default_rng(5)
    for nans in ([0], [7], [3], [0, 7], list(range(8))):
        v = rng.standard_normal((8, 3)).astype(np.float32)
        v[nans, 1] = np.nan
        np.testing.assert_array_equal(np.asarray(f(v)), np.asarray(rf(v)))

"""The smaller public names of JAX 0.10.2 meshsim provides, each compared with
real JAX: flatten_util, custom_gradient, make_array_from_*, multihost_utils and
mesh_utils for one process, distributed, lax.Precision/DotAlgorithmPreset,
jnp.vectorize, Array.real/.imag, clear_caches, live_arrays, disable_jit,
enable_x64, linear_transpose, jax.core and jax.typing."""
import numpy as np
import pytest

import meshsim
import meshsim.numpy as mnp
from meshsim.sharding import NamedSharding, PartitionSpec as P

RNG = np.random.default_rng(3)


def _err(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value).__name__, str(info.value)


# --- flatten_util --------------------------------------------------------------------

@pytest.mark.parametrize("tree", [
    {"a": np.ones((2, 3), np.float32), "b": (np.arange(3), 2.0)},
    [], {"x": np.arange(4, dtype=np.int32)}, (np.float32(1.5), [np.zeros((0, 2), np.float32)])])
def test_ravel_pytree_matches_jax(real_jax, tree):
    from jax.flatten_util import ravel_pytree as theirs
    from meshsim.flatten_util import ravel_pytree as ours
    f, unravel = ours(tree)
    g, unravel_jax = theirs(tree)
    assert f.dtype == g.dtype and f.shape == g.shape
    np.testing.assert_array_equal(np.asarray(f), np.asarray(g))
    back, back_jax = unravel(f), unravel_jax(g)
    assert meshsim.tree.structure(back) == meshsim.tree.structure(tree)
    for a, b in zip(meshsim.tree.leaves(back), real_jax.tree.leaves(back_jax)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_unravel_checks_dtype_as_jax(real_jax):
    from jax.flatten_util import ravel_pytree as theirs
    from meshsim.flatten_util import ravel_pytree as ours
    tree = {"a": np.ones(2, np.float32), "b": np.arange(2, dtype=np.int32)}
    f, unravel = ours(tree)
    g, unravel_jax = theirs(tree)
    assert _err(lambda: unravel(f.astype("int32"))) == _err(lambda: unravel_jax(g.astype("int32")))


# --- custom_gradient ---------------------------------------------------------------

def test_custom_gradient_matches_jax(real_jax):
    def make(jax, jnp):
        @jax.custom_gradient
        def clipped_square(x, y):
            return x * x * y, lambda g: (jnp.clip(g * 2 * x * y, -1, 1), g * x * x)
        return clipped_square
    x, y = np.float32(1.5), np.float32(0.25)
    ours = meshsim.jit(meshsim.grad(make(meshsim, mnp), argnums=(0, 1)))(x, y)
    theirs = real_jax.grad(make(real_jax, real_jax.numpy), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs))
    from meshsim.custom_derivatives import custom_gradient, custom_jvp, custom_vjp  # noqa: F401
    single = custom_gradient(lambda x: (mnp.sin(x), lambda g: g * 10.0))
    assert float(meshsim.grad(single)(0.3)) == 10.0


# --- building sharded arrays -------------------------------------------------------

def _meshes(jax):
    mesh = jax.make_mesh((4, 2), ("x", "y"))
    return mesh, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x", "y"))


def test_make_array_from_callback_matches_jax(real_jax):
    data = RNG.normal(size=(8, 6)).astype(np.float32)
    results = []
    for jax in (meshsim, real_jax):
        _, s = _meshes(jax)
        calls = []
        a = jax.make_array_from_callback((8, 6), s, lambda idx: (calls.append(idx), data[idx])[1])
        results.append((len(calls), str(jax.typeof(a)), a.committed, np.asarray(a)))
        results.append(_err(lambda: jax.make_array_from_callback((8, 6), s, lambda i: data[:1, :1])))
        results.append(_err(lambda: jax.make_array_from_callback((8, 6), s, lambda i: data[i],
                                                                 dtype=np.int32)))
    n = len(results) // 2
    for ours, theirs in zip(results[:n], results[n:]):
        if isinstance(ours[-1], np.ndarray):
            assert ours[:-1] == theirs[:-1]
            np.testing.assert_array_equal(ours[-1], theirs[-1])
        else:
            assert ours == theirs


def test_make_array_from_single_device_arrays_and_process_local_data(real_jax):
    data = RNG.normal(size=(8, 6)).astype(np.float32)
    out = []
    for jax in (meshsim, real_jax):
        _, s = _meshes(jax)
        pieces = [jax.device_put(data[idx], d) for d, idx in s.addressable_devices_indices_map((8, 6)).items()]
        a = jax.make_array_from_single_device_arrays((8, 6), s, pieces[::-1])
        b = jax.make_array_from_process_local_data(s, data)
        out.append((np.asarray(a), str(jax.typeof(a)), np.asarray(b), str(jax.typeof(b)),
                    _err(lambda: jax.make_array_from_single_device_arrays((8, 6), s, pieces[:3])),
                    _err(lambda: jax.make_array_from_process_local_data(s, data, (16, 6)))))
    ours, theirs = out
    for o, t in zip(ours, theirs):
        if isinstance(o, np.ndarray):
            np.testing.assert_array_equal(o, t)
        else:
            assert o == t


def test_multihost_utils_for_one_process(real_jax):
    from jax.experimental import multihost_utils as theirs
    from meshsim.experimental import multihost_utils as ours
    tree = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": 3}
    for fn, kwargs in [("process_allgather", {}), ("process_allgather", {"tiled": True}),
                       ("broadcast_one_to_all", {})]:
        o = getattr(ours, fn)({"a": mnp.asarray(tree["a"]), "b": tree["b"]}, **kwargs)
        t = getattr(theirs, fn)({"a": real_jax.numpy.asarray(tree["a"]), "b": tree["b"]}, **kwargs)
        for x, y in zip(meshsim.tree.leaves(o), real_jax.tree.leaves(t)):
            assert type(x) is type(y) and x.shape == y.shape
            np.testing.assert_array_equal(x, y)
    assert ours.sync_global_devices("x") is None and ours.assert_equal(tree) is None
    mesh, _ = _meshes(meshsim)
    g = ours.host_local_array_to_global_array({"w": tree["a"]}, mesh, {"w": P(None, None)})
    assert g["w"].sharding == NamedSharding(mesh, P(None, None))
    back = ours.global_array_to_host_local_array(g, mesh, P())
    np.testing.assert_array_equal(np.asarray(back["w"]), tree["a"])


def test_mesh_utils_match_jax(real_jax):
    from jax.experimental import mesh_utils as theirs
    from meshsim.experimental import mesh_utils as ours

    def ids(mesh):
        return np.vectorize(lambda d: d.id)(mesh)
    for shape in [(8,), (4, 2), (2, 2, 2)]:
        np.testing.assert_array_equal(ids(ours.create_device_mesh(shape)),
                                      ids(theirs.create_device_mesh(shape)))
    np.testing.assert_array_equal(ids(ours.create_device_mesh((4, 2), meshsim.devices()[::-1])),
                                  ids(theirs.create_device_mesh((4, 2), real_jax.devices()[::-1])))
    np.testing.assert_array_equal(
        ids(ours.create_hybrid_device_mesh((4, 2), (1, 1), process_is_granule=True)),
        ids(theirs.create_hybrid_device_mesh((4, 2), (1, 1), process_is_granule=True)))
    for fn in [lambda m: m.create_device_mesh((3, 2)),
               lambda m: m.create_hybrid_device_mesh((2, 2), (2, 1), process_is_granule=True),
               lambda m: m.create_hybrid_device_mesh((4, 2), (1, 1))]:
        assert _err(lambda: fn(ours)) == _err(lambda: fn(theirs))
    mesh = meshsim.sharding.Mesh(ours.create_device_mesh((2, 4)), ("a", "b"))
    assert mesh.shape == {"a": 2, "b": 4}


def test_distributed_is_one_process():
    from meshsim._src import distributed
    assert not meshsim.distributed.is_initialized()
    with pytest.raises(RuntimeError, match="before any JAX calls"):
        meshsim.devices()
        meshsim.distributed.initialize("localhost:1234", 1, 0)
    distributed._initialized = False


# --- dot precision -------------------------------------------------------------------

@pytest.mark.parametrize("precision", [
    None, "highest", "default", "bfloat16", "tensorfloat32", "fastest", "float32",
    ("high", "default"), "F32_F32_F32", "BF16_BF16_F32", "BF16_BF16_F32_X3", "TF32_TF32_F32",
    "F16_F16_F32", "ANY_F8_ANY_F8_F32", "bogus", 3, "HIGHEST"])
def test_dot_precision_accepted_and_rejected_as_jax(real_jax, precision):
    x = RNG.normal(size=(4, 4)).astype(np.float32)

    def run(jax, jnp):
        p = precision
        if isinstance(p, str) and p in jax.lax.DotAlgorithmPreset.__members__ and p != "HIGHEST":
            p = jax.lax.DotAlgorithmPreset[p]
        try:
            return np.asarray(jnp.dot(x, x, precision=p)), np.asarray(
                jax.lax.dot_general(x, x, (((1,), (0,)), ((), ())), precision=p))
        except Exception as e:  # noqa: BLE001 (compared with JAX's)
            return type(e).__name__, str(e)
    ours, theirs = run(meshsim, mnp), run(real_jax, real_jax.numpy)
    if isinstance(theirs[0], str):
        assert ours == theirs
    else:
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5)
        np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5)


def test_precision_enums_match_jax(real_jax):
    for ours_enum, theirs_enum in [(meshsim.lax.Precision, real_jax.lax.Precision),
                                   (meshsim.lax.DotAlgorithmPreset, real_jax.lax.DotAlgorithmPreset)]:
        assert list(ours_enum.__members__) == list(theirs_enum.__members__)
        for name in ours_enum.__members__:
            assert str(ours_enum[name]) == str(theirs_enum[name])
            assert repr(ours_enum[name]) == repr(theirs_enum[name])
    for s in ["highest", "high", "default", "bfloat16", "float32", "tensorfloat32"]:
        assert meshsim.lax.Precision(s).name == real_jax.lax.Precision(s).name


# --- vectorize, real/imag ------------------------------------------------------------

def test_vectorize_matches_jax(real_jax):
    jnp = real_jax.numpy
    a = RNG.normal(size=(3, 4, 5)).astype(np.float32)
    b = RNG.normal(size=(4, 5)).astype(np.float32)
    cases = [
        (lambda m: m.vectorize(m.dot, signature="(n),(n)->()"), (a, b)),
        (lambda m: m.vectorize(lambda x, y: x * 2 + y), (a, 1.0)),
        (lambda m: m.vectorize(lambda x: (x.sum(), x.max()), signature="(n)->(),()"), (a,)),
        (lambda m: m.vectorize(lambda x: m.outer(x, x), signature="(n)->(n,n)"), (b,)),
        (lambda m: m.vectorize(lambda x, p: x ** p, excluded={1}), (a, 2)),
    ]
    for make, args in cases:
        ours, theirs = make(mnp)(*args), make(jnp)(*args)
        for o, t in zip(meshsim.tree.leaves(ours), real_jax.tree.leaves(theirs)):
            assert o.shape == t.shape and o.dtype == t.dtype
            np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-5, atol=1e-6)
    for make, args in [(lambda m: m.vectorize(m.dot, signature="(n),(n)->()"), (a, np.ones((4, 3)))),
                       (lambda m: m.vectorize(m.dot, signature="(n),(n)->()"), (np.ones(()), b)),
                       (lambda m: m.vectorize(m.dot, signature="(n),(n)->()"), (a,))]:
        assert _err(lambda: make(mnp)(*args)) == _err(lambda: make(jnp)(*args))
    # under jit
    f = meshsim.jit(mnp.vectorize(mnp.dot, signature="(n),(n)->()"))
    np.testing.assert_allclose(np.asarray(f(a, b)), np.einsum("ijk,jk->ij", a, b), rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_real_imag_of_real_arrays(real_jax, dtype):
    x = (RNG.normal(size=(3, 2)) * 3).astype(dtype)
    for attr in ("real", "imag"):
        o = getattr(mnp.asarray(x), attr)
        t = getattr(real_jax.numpy.asarray(x), attr)
        assert o.dtype == t.dtype and o.shape == t.shape
        np.testing.assert_array_equal(np.asarray(o), np.asarray(t))
        traced = meshsim.jit(lambda v: getattr(v, attr) * 1)(x)
        np.testing.assert_array_equal(np.asarray(traced), np.asarray(t * 1))


# --- process controls ------------------------------------------------------------------

def test_clear_caches_retraces():
    traces = []

    @meshsim.jit
    def f(x):
        traces.append(1)
        return x + 1
    f(mnp.ones(3))
    f(mnp.ones(3))
    assert len(traces) == 1
    meshsim.clear_caches()
    assert float(f(mnp.ones(3))[0]) == 2.0 and len(traces) == 2


def test_live_arrays_tracks_arrays():
    x = mnp.arange(5) * 3
    live = meshsim.live_arrays()
    assert any(a is x for a in live)
    x.delete()
    assert not any(a is x for a in meshsim.live_arrays())


def test_disable_jit_and_enable_x64_match_jax(real_jax):
    for jax in (meshsim, real_jax):
        seen = []

        @jax.jit
        def f(x):
            seen.append(type(x).__name__)
            return x * 2
        with jax.disable_jit():
            f(jax.numpy.ones(2))
        f(jax.numpy.ones(2))
        assert "Tracer" not in seen[0] and "Tracer" in seen[1]
        with jax.enable_x64(True):
            assert jax.numpy.ones(2).dtype == np.float64
        assert jax.numpy.ones(2).dtype == np.float32


def test_linear_transpose_matches_jax(real_jax):
    for fun, primals, ct in [
            (lambda x, y: 2 * x + y, (1.0, 2.0), 3.0),
            (lambda x: {"a": x * 2, "b": x.sum()}, (np.ones(3, np.float32),),
             {"a": np.arange(3, dtype=np.float32), "b": np.float32(1)})]:
        ours = meshsim.linear_transpose(fun, *primals)(ct)
        theirs = real_jax.linear_transpose(fun, *primals)(ct)
        for o, t in zip(meshsim.tree.leaves(ours), real_jax.tree.leaves(theirs)):
            assert o.dtype == t.dtype and o.shape == t.shape
            np.testing.assert_allclose(np.asarray(o), np.asarray(t))
    f = meshsim.linear_transpose(lambda x: x * 3, meshsim.ShapeDtypeStruct((2,), np.float32))
    np.testing.assert_array_equal(np.asarray(f(mnp.ones(2))[0]), [3.0, 3.0])


def test_core_and_typing_names(real_jax):
    import meshsim.core as mc
    import meshsim.typing as mt
    x = mnp.ones((2, 3))
    assert isinstance(meshsim.typeof(x), mc.ShapedArray)
    assert isinstance(meshsim.typeof(x), mc.AbstractValue)
    seen = []
    meshsim.jit(lambda v: seen.append(isinstance(v, mc.Tracer)) or v)(x)
    assert seen == [True] and not isinstance(x, mc.Tracer)
    assert mc.max_dim(3, 4) == real_jax.core.max_dim(3, 4) == 4
    assert mc.min_dim(3, 4) == real_jax.core.min_dim(3, 4) == 3
    assert str(mc.ShapedArray((2, 3), np.float32).str_short()) == "float32[2,3]"
    import typing
    assert meshsim.Array in typing.get_args(mt.ArrayLike) and np.ndarray in typing.get_args(mt.ArrayLike)
    assert len(typing.get_args(mt.ArrayLike)) == len(typing.get_args(real_jax.typing.ArrayLike))


def test_jit_accepts_jax_keywords():
    f = meshsim.jit(lambda x, y: x * 2, keep_unused=True, inline=True,
                    compiler_options={"xla_cpu_enable_fast_math": False})
    np.testing.assert_array_equal(np.asarray(f(mnp.ones(2), 3)), [2.0, 2.0])
    with pytest.raises(TypeError, match="unexpected keyword"):
        meshsim.jit(lambda x: x, bogus=1)


def test_partition_spec_without_a_mesh_errors_match_jax(real_jax):
    def attempts(jax):
        jnp, P = jax.numpy, jax.sharding.PartitionSpec
        return [lambda: jax.reshard(jnp.ones(2), P("x")),
                lambda: jnp.zeros(2, out_sharding=P("x")),
                lambda: jax.jit(lambda a: jnp.matmul(a, a.T, out_sharding=P("x", None)))(jnp.ones((2, 2))),
                lambda: jax.jit(lambda a: jax.lax.with_sharding_constraint(a, P("x")))(jnp.ones(2))]
    for ours, theirs in zip(attempts(meshsim), attempts(real_jax)):
        assert _err(ours) == _err(theirs)


def test_error_classes_dtype_bits_and_effects_barrier(real_jax):
    for name in ("InconclusiveDimensionOperation", "JaxprTypeError"):
        ours, theirs = getattr(meshsim.errors, name), getattr(real_jax.errors, name)
        assert [c.__name__ for c in ours.__mro__[1:]] == [c.__name__ for c in theirs.__mro__[1:]]
    assert issubclass(meshsim.dtypes.TypePromotionError, ValueError)
    for dt in ("float32", np.int8, bool, mnp.int16, np.float64):
        assert meshsim.dtypes.itemsize_bits(dt) == real_jax.dtypes.itemsize_bits(dt)
    y = meshsim.jit(lambda v: v * 2)(mnp.ones(4))
    assert meshsim.effects_barrier() is None and y.is_ready()

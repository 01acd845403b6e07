"""Devices, config, meshes, partition specs, shardings, device_put and the
debug views, checked against NumPy and against JAX (8 CPU devices)."""
import importlib
import pickle

import numpy as np
import pytest

import meshsim as jax
from meshsim.sharding import (AbstractMesh, AxisType, Mesh, NamedSharding, PartitionSpec,
                              SingleDeviceSharding, get_abstract_mesh, set_mesh)

P = PartitionSpec
E, A = AxisType.Explicit, AxisType.Auto


def _jax_type(real_jax, name):
    return getattr(real_jax.sharding.AxisType, name.name)


def _both_meshes(real_jax, shape, names, types=None):
    """The same mesh in meshsim and in JAX."""
    ours = jax.make_mesh(shape, names, axis_types=types)
    theirs = real_jax.make_mesh(shape, names, axis_types=None if types is None else
                                tuple(_jax_type(real_jax, t) for t in types))
    return ours, theirs


# --- devices and config --------------------------------------------------------------------

def test_devices():
    devs = jax.devices()
    assert repr(devs) == "[" + ", ".join(f"CpuDevice(id={i})" for i in range(8)) + "]"
    assert jax.device_count() == jax.local_device_count() == len(jax.local_devices()) == 8
    d = devs[3]
    assert (d.id, d.platform, d.device_kind, str(d)) == (3, "cpu", "cpu", "cpu:3")
    assert d == jax.devices()[3] and hash(d) == hash(jax.devices()[3]) and d != devs[2]
    assert pickle.loads(pickle.dumps(d)) is d
    assert jax.devices("cpu") == devs
    with pytest.raises(RuntimeError, match="Unknown backend: 'gpu'"):
        jax.devices("gpu")


def test_device_memory_client_and_format_placement(real_jax):
    """What checkpointing libraries ask of devices, shardings and device_put, as JAX answers
    (for the one memory kind, 'device', that simulated devices have)."""
    def probe(jax):
        d = jax.devices()[3]
        mesh = jax.make_mesh((2, 4), ("x", "y"))
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("y"))
        Format = importlib.import_module(f"{jax.__name__}.experimental.layout").Format
        placed = jax.device_put(np.arange(8.0), Format(None, sharding))
        single = jax.sharding.SingleDeviceSharding(d)
        return (d.default_memory().kind, d.memory("device").kind, str(d.default_memory()).split("(")[0],
                d.default_memory().addressable_by_devices() == [d], d.client.platform,
                d.client.process_index(), d.client.device_count(), d.client.devices() == jax.devices(),
                sharding._device_assignment == tuple(mesh.devices.flat),
                single._addressable_device_assignment == (d,), placed.sharding == sharding,
                np.asarray(placed).tolist(), placed.copy_to_host_async())
    assert probe(jax) == probe(real_jax)
    with pytest.raises(Exception, match="Could not find memory addressable by device cpu"):
        jax.devices()[0].memory("host")


def test_config_device_count_is_frozen_once_devices_are_used():
    jax.devices()
    jax.config.update("jax_num_cpu_devices", 8)  # unchanged: fine
    with pytest.raises(RuntimeError, match="jax_num_cpu_devices config should be updated before"):
        jax.config.update("jax_num_cpu_devices", 4)
    assert jax.config.jax_num_cpu_devices == 8


def test_config_flags():
    assert jax.config.jax_enable_x64 is False
    jax.config.update("jax_enable_x64", True)
    try:
        assert jax.config.jax_enable_x64 and jax.config.read("jax_enable_x64")
        assert jax.device_put(np.arange(3)).dtype == np.int64
    finally:
        jax.config.update("jax_enable_x64", False)
    assert jax.device_put(np.arange(3)).dtype == np.int32
    jax.config.update("jax_platforms", "cpu")
    with pytest.raises(ValueError, match="jax_platforms"):
        jax.config.update("jax_platforms", "tpu")
    jax.config.update("jax_compilation_cache_dir", "/tmp/cache")  # a JAX option without effect here
    assert jax.config.jax_compilation_cache_dir == "/tmp/cache"
    jax.config.update("jax_compilation_cache_dir", None)
    assert jax.config.jax_threefry_partitionable is True


@pytest.mark.parametrize("name", ["jax_no_such_option", "not_a_flag", "jax_enable_x6", "check_vmaa"])
def test_config_rejects_what_jax_does_not_have(real_jax, name):
    """Unknown options raise JAX's exception, on update, read and attribute access."""
    def raised(config):
        texts = []
        for use in (lambda: config.update(name, 1), lambda: config.read(name), lambda: getattr(config, name)):
            with pytest.raises(AttributeError) as e:
                use()
            texts.append(str(e.value))
        return texts
    assert raised(jax.config) == raised(real_jax.config)


def test_config_accepts_every_jax_option(real_jax):
    """Each of JAX 0.10.2's options reads with JAX's default (for those without effect here)
    and takes its own value back."""
    for name, holder in real_jax.config._value_holders.items():
        value = jax.config.values[name]  # command-line flags are no attributes, as in JAX
        jax.config.update(name, value)
        if name not in ("jax_num_cpu_devices",):  # JAX's -1 is "not chosen"; ours is the count
            assert value == holder.value, name


# --- PartitionSpec -------------------------------------------------------------------------

SPEC_ARGS = [(), ("x",), (("x", "y"),), ("x", None), (["x", "y"], None), (("x",),), ((), "y"),
             (None,), ([],), ("",), (("x", None, "y"),), (P.UNCONSTRAINED,), ("x", "y"),
             ((None,),)]


@pytest.mark.parametrize("args", SPEC_ARGS)
def test_partition_spec_matches_jax(real_jax, args):
    ours, theirs = P(*args), real_jax.sharding.PartitionSpec(*args)
    assert repr(ours) == repr(theirs) == str(ours)
    assert [repr(p) for p in ours] == [repr(p) for p in theirs]
    assert ours == P(*args) and hash(ours) == hash(P(*args))


@pytest.mark.parametrize("kwargs", [dict(unreduced={"y"}), dict(reduced={"x"}),
                                    dict(unreduced={"X"}, reduced={"Y"})])
@pytest.mark.parametrize("args", [(), ("x",), (None, None)])
def test_partition_spec_reduction_sets(real_jax, args, kwargs):
    if any(a in kwargs.get("unreduced", ()) or a in kwargs.get("reduced", ()) for a in args):
        return
    assert repr(P(*args, **kwargs)) == repr(real_jax.sharding.PartitionSpec(*args, **kwargs))
    with pytest.raises(ValueError, match="dangerous"):
        list(P(*args, **kwargs))


def test_partition_spec_semantics():
    assert P("x") != ("x",) and P("x") != P("x", None) and P(("x",)) == P("x")
    assert P("x") + P("y") == P("x", "y") and P("x") + ("y",) == P("x", "y")
    assert ("y",) + P("x") == P("y", "x")
    assert P("x", None).index(None) == 1 and P(("x",), "y").index(("x",)) == 0
    assert P("x", unreduced={"z"}).partitions == ("x",)
    assert pickle.loads(pickle.dumps(P(("a", "b"), None, P.UNCONSTRAINED))) == \
        P(("a", "b"), None, P.UNCONSTRAINED)
    with pytest.raises(AttributeError):
        P("x").unreduced = frozenset()


@pytest.mark.parametrize("args, message", [
    ((("x", ("y",)),), "A tuple inside PartitionSpec cannot contain a nested tuple. Got "
                       "partition: ('x', ('y',)) and the nested tuple: ('y',)"),
    ((["x", ["y"]],), "Got partition: ['x', ['y']] and the nested tuple: ['y']"),
])
def test_partition_spec_nested_tuple_error(real_jax, args, message):
    with pytest.raises(ValueError) as ours:
        P(*args)
    with pytest.raises(ValueError) as theirs:
        real_jax.sharding.PartitionSpec(*args)
    assert str(ours.value) == str(theirs.value) and message in str(ours.value)


def test_partition_spec_reduction_errors():
    with pytest.raises(ValueError, match="partitions cannot overlap with unreduced axes"):
        P("x", unreduced={"x"})
    with pytest.raises(ValueError, match="cannot overlap"):
        P(unreduced={"x"}, reduced={"x"})
    with pytest.raises(TypeError, match="should of type `frozenset` or `set`"):
        P("x", unreduced=["y"])


# --- meshes --------------------------------------------------------------------------------

MESHES = [((8,), ("x",), None), ((4, 2), ("dp", "tp"), None), ((2, 4), ("dp", "tp"), (A, A)),
          ((2, 2, 2), ("a", "b", "c"), (E, A, E)), ((2, 2), ("x", "y"), None),
          ((1, 8), ("r", "d"), None)]


@pytest.mark.parametrize("shape, names, types", MESHES)
def test_mesh_matches_jax(real_jax, shape, names, types):
    ours, theirs = _both_meshes(real_jax, shape, names, types)
    assert repr(ours) == repr(theirs) and str(ours) == str(theirs)
    assert repr(ours.abstract_mesh) == repr(theirs.abstract_mesh)
    assert ours.shape == theirs.shape and list(ours.shape) == list(theirs.shape)
    assert ours.axis_names == theirs.axis_names and ours.axis_sizes == theirs.axis_sizes
    assert ours.size == theirs.size and ours.shape_tuple == theirs.shape_tuple
    assert repr(ours.axis_types) == repr(theirs.axis_types)
    assert ours.explicit_axes == theirs.explicit_axes and ours.auto_axes == theirs.auto_axes
    np.testing.assert_array_equal(ours.device_ids, theirs.device_ids)
    assert ours.devices.dtype == object and ours.devices.shape == shape
    assert [d.id for d in ours.devices.flat] == [d.id for d in theirs.devices.flat]


def test_mesh_constructor_and_interning(real_jax):
    devs = np.array(jax.devices()).reshape(2, 4)
    m = Mesh(devs, ("a", "b"))
    theirs = real_jax.sharding.Mesh(np.array(real_jax.devices()).reshape(2, 4), ("a", "b"))
    assert repr(m) == repr(theirs)  # Mesh(...) defaults to Auto, make_mesh to Explicit
    assert Mesh(devs, ("a", "b")) is m and Mesh(devs, ("a", "b"), (E, E)) is not m
    assert jax.make_mesh((2, 4), ("a", "b"), axis_types=(A, A)) is m
    assert repr(Mesh(jax.devices(), "a")) == \
        "Mesh(axis_sizes=(8,), axis_names=('a',), axis_types=(Auto,))"
    assert pickle.loads(pickle.dumps(m)) is m
    assert m.update(axis_types=(E, E)).axis_types == (E, E)
    assert repr(AxisType.Explicit) == "Explicit"
    assert [t.name for t in AxisType] == ["Auto", "Explicit", "Manual"]


def test_abstract_mesh_matches_jax(real_jax):
    JA = real_jax.sharding.AxisType
    cases = [((2, 4), ("a", "b"), None, None), ((8,), ("x",), (E,), (JA.Explicit,)),
             ((), (), None, None)]
    for sizes, names, ours_t, theirs_t in cases:
        ours = AbstractMesh(sizes, names, ours_t)
        theirs = real_jax.sharding.AbstractMesh(sizes, names, theirs_t)
        assert repr(ours) == repr(theirs)
    am = AbstractMesh((2, 4), ("a", "b"))
    same = AbstractMesh((2, 4), ("a", "b"))
    assert am == same and hash(am) == hash(same)
    assert am.update_axis_types({"a": AxisType.Manual}).axis_types == (AxisType.Manual, A)
    assert am.size == 8 and am.shape == {"a": 2, "b": 4}


@pytest.mark.parametrize("make, error, message", [
    (lambda: jax.make_mesh((4, 4), ("dp", "tp")), ValueError,
     r"Number of devices 8 must be >= the product of mesh_shape \(4, 4\)"),
    (lambda: jax.make_mesh((4, 2), ("dp",)), ValueError,
     r"devices.ndim == 2 and len\(axis_names\) == 1"),
    (lambda: jax.make_mesh((2, 2), ("dp", "tp"), axis_types=(A,)), ValueError,
     r"Number of axis names should match the number of axis_types. Got axis_names=\('dp', 'tp'\)"),
    (lambda: jax.make_mesh((2, 2), ("dp", "tp"), axis_types=("Explicit", "Auto")), TypeError,
     "axis_types passed to Mesh must be of type `jax.sharding.AxisType`"),
    (lambda: jax.make_mesh(4, ("dp",)), ValueError, "should be a sequence of ints"),
    (lambda: jax.make_mesh((4, 2), ("dp", "dp")), ValueError, "'dp'"),
    (lambda: Mesh(np.array([1, 2]), ("a",)), TypeError, "meshsim devices"),
])
def test_mesh_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_make_mesh_uses_first_devices():
    m = jax.make_mesh((2, 2), ("a", "b"))
    assert [[d.id for d in row] for row in m.devices] == [[0, 1], [2, 3]]
    m = jax.make_mesh((2,), ("a",), devices=jax.devices()[4:])
    assert [d.id for d in m.devices] == [4, 5]


# --- set_mesh and the context mesh ---------------------------------------------------------

def test_set_mesh_notebook_outputs():
    mesh = jax.make_mesh((4, 2), ("dp", "tp"), axis_types=(E, E))
    shown = ("AbstractMesh('dp': 4, 'tp': 2, axis_types=(Explicit, Explicit), "
             "device_kind=cpu, num_cores=None, platform=cpu)")
    set_mesh(None)
    with jax.set_mesh(mesh):
        assert str(get_abstract_mesh()) == shown
        assert jax.sharding.get_mesh() is mesh
    assert str(get_abstract_mesh()) == "AbstractMesh((), axis_types=())"
    jax.set_mesh(mesh)  # global setter
    try:
        assert str(get_abstract_mesh()) == shown
    finally:
        set_mesh(None)
    assert get_abstract_mesh().empty and jax.sharding.get_mesh().empty
    assert repr(jax.sharding.get_mesh()) == "Mesh(axis_sizes=(), axis_names=())"


def test_set_mesh_nests_and_restores():
    outer = jax.make_mesh((8,), ("x",))
    inner = jax.make_mesh((2, 4), ("a", "b"))
    with jax.set_mesh(outer):
        with jax.set_mesh(inner):
            assert get_abstract_mesh() == inner.abstract_mesh
        assert get_abstract_mesh() == outer.abstract_mesh
        with pytest.raises(KeyError):
            with jax.set_mesh(inner):
                raise KeyError  # restored even when the block raises
        assert jax.sharding.get_mesh() is outer
    assert get_abstract_mesh().empty


def test_set_mesh_errors_and_legacy_context():
    with pytest.raises(ValueError, match="Expected mesh of type `jax.sharding.Mesh`"):
        jax.set_mesh(AbstractMesh((8,), ("x",)))
    manual = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Manual,))
    with pytest.raises(ValueError, match="contains manual axes"):
        jax.set_mesh(manual)
    mesh = jax.make_mesh((8,), ("x",))
    with pytest.warns(DeprecationWarning, match="`with mesh:` context manager has been deprecated"):
        with mesh:
            assert jax.sharding.get_mesh() is mesh
    assert get_abstract_mesh().empty
    manual_abstract = mesh.abstract_mesh.update_axis_types({"x": AxisType.Manual})
    with jax.sharding.use_abstract_mesh(manual_abstract):
        assert get_abstract_mesh().manual_axes == ("x",)
    assert get_abstract_mesh().empty


# --- shardings -----------------------------------------------------------------------------

SHARDING_CASES = [((4, 2), ("dp", "tp"), None, ("dp", None)), ((4, 2), ("dp", "tp"), None, ("dp",)),
                  ((4, 2), ("dp", "tp"), None, ()), ((4, 2), ("dp", "tp"), None, (("tp", "dp"),)),
                  ((2, 2, 2), ("a", "b", "c"), (A, E, A), ("c", ("a", "b"))),
                  ((8, 1), ("d", "r"), None, ("r",)), ((8, 1), ("d", "r"), None, (None, "d"))]


@pytest.mark.parametrize("shape, names, types, spec", SHARDING_CASES)
def test_named_sharding_matches_jax(real_jax, shape, names, types, spec):
    mesh, jmesh = _both_meshes(real_jax, shape, names, types)
    ours = NamedSharding(mesh, P(*spec))
    theirs = real_jax.sharding.NamedSharding(jmesh, real_jax.sharding.PartitionSpec(*spec))
    assert repr(ours) == repr(theirs) == str(ours)
    assert ours.num_devices == theirs.num_devices
    assert {d.id for d in ours.device_set} == {d.id for d in theirs.device_set}
    assert ours.is_fully_replicated == theirs.is_fully_replicated
    assert ours.memory_kind == theirs.memory_kind == "device"
    global_shape = (16, 8, 4)[:max(len(spec), 2)]
    assert ours.shard_shape(global_shape) == theirs.shard_shape(global_shape)
    ours_map = {d.id: idx for d, idx in ours.devices_indices_map(global_shape).items()}
    theirs_map = {d.id: idx for d, idx in theirs.devices_indices_map(global_shape).items()}
    assert ours_map == theirs_map
    same = NamedSharding(mesh, P(*spec))
    assert ours == same and hash(ours) == hash(same)


def test_sharding_equality_and_single_device(real_jax):
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    assert NamedSharding(mesh, P("dp")) != NamedSharding(mesh, P("dp", None))  # as JAX
    assert NamedSharding(mesh, P("dp")).is_equivalent_to(NamedSharding(mesh, P("dp", None)), 2)
    assert not NamedSharding(mesh, P("dp")).is_equivalent_to(NamedSharding(mesh, P("tp")), 2)
    s = SingleDeviceSharding(jax.devices()[1])
    assert repr(s) == repr(real_jax.sharding.SingleDeviceSharding(real_jax.devices()[1]))
    assert s.device_set == {jax.devices()[1]} and s.num_devices == 1 and s.is_fully_replicated
    assert s.shard_shape((3, 4)) == (3, 4) and s == SingleDeviceSharding(jax.devices()[1])
    abstract = NamedSharding(mesh.abstract_mesh, P("dp", None))
    assert repr(abstract) == (
        "NamedSharding(mesh=AbstractMesh('dp': 4, 'tp': 2, axis_types=(Explicit, Explicit), "
        "device_kind=cpu, num_cores=None, platform=cpu), spec=P('dp', None))")
    with pytest.raises(ValueError, match="device_set is not implemented"):
        abstract.device_set


def _error_pair(ours_fn, theirs_fn):
    with pytest.raises(Exception) as ours:
        ours_fn()
    with pytest.raises(Exception) as theirs:
        theirs_fn()
    return ours.value, theirs.value


@pytest.mark.parametrize("spec", [("zz",), ("dp", "dp"), (("dp", "tp"), "dp"), ("dp", ("x", "tp"))])
def test_named_sharding_spec_errors_match_jax(real_jax, spec):
    mesh, jmesh = _both_meshes(real_jax, (4, 2), ("dp", "tp"))
    ours, theirs = _error_pair(lambda: NamedSharding(mesh, P(*spec)),
                               lambda: real_jax.sharding.NamedSharding(jmesh, real_jax.P(*spec)))
    assert str(ours) == str(theirs)
    assert isinstance(ours, ValueError) and type(ours).__name__ == type(theirs).__name__


def test_named_sharding_other_errors():
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    with pytest.raises(TypeError, match="must be a PartitionSpec"):
        NamedSharding(mesh, ("dp",))
    with pytest.raises(ValueError, match="cannot contain `P.UNCONSTRAINED` when no mesh axis_types"):
        NamedSharding(mesh, P(P.UNCONSTRAINED))
    with pytest.raises(ValueError, match="only the 'device' memory kind"):
        NamedSharding(mesh, P(), memory_kind="pinned_host")
    with pytest.raises(ValueError, match="axis 0 is partitioned 4 times, but the dimension size is 7"):
        NamedSharding(mesh, P("dp")).shard_shape((7,))


# --- device_put ----------------------------------------------------------------------------

def _random_case(rng):
    """A random mesh over a prefix of the 8 devices, a spec over it, and a shape it divides."""
    ndev = int(rng.choice([1, 2, 4, 8]))
    naxes = int(rng.integers(1, 4))
    sizes = [1] * naxes
    for _ in range(int(np.log2(ndev))):
        sizes[int(rng.integers(naxes))] *= 2
    names = tuple("abc"[:naxes])
    types = tuple([E, A][int(rng.integers(2))] for _ in range(naxes))
    ndim = int(rng.choice([0, 1, 2, 3], p=[0.1, 0.3, 0.3, 0.3]))
    # Deal most axes to a dimension, in a random order within each dimension.
    dims = [[] for _ in range(ndim)]
    for name in rng.permutation(names):
        if ndim and rng.random() < 0.75:
            dims[int(rng.integers(ndim))].append(str(name))
    spec_len = int(rng.integers(0, ndim + 1))
    if any(dims[spec_len:]):
        spec_len = ndim
    entries = [tuple(d) if len(d) > 1 else (d[0] if d else [None, ()][int(rng.integers(2))])
               for d in dims[:spec_len]]
    size_of = dict(zip(names, sizes))

    def dim_size(axes):  # a multiple of the number of blocks, sometimes 0
        blocks = int(np.prod([size_of[a] for a in axes]))
        return blocks * int(rng.integers(0 if rng.random() < 0.2 else 1, 4))

    shape = tuple(dim_size(d) for d in dims)
    return tuple(sizes), names, types, entries, shape


@pytest.mark.parametrize("seed", range(60))
def test_device_put_round_trip_matches_jax(real_jax, seed):
    rng = np.random.default_rng(seed)
    sizes, names, types, entries, shape = _random_case(rng)
    dtype = rng.choice([np.float32, np.int32, np.bool_, np.int8, np.uint32])
    value = (rng.standard_normal(shape) * 10).astype(dtype)
    mesh, jmesh = _both_meshes(real_jax, sizes, names, types)
    sharding = NamedSharding(mesh, P(*entries))
    x = jax.device_put(value, sharding)
    jx = real_jax.device_put(value, real_jax.sharding.NamedSharding(jmesh, real_jax.P(*entries)))

    np.testing.assert_array_equal(np.asarray(x), value)
    assert x.dtype == value.dtype and x.shape == shape
    assert str(jax.typeof(x)) == str(real_jax.typeof(jx))
    assert repr(jax.typeof(x)) == repr(real_jax.typeof(jx))
    assert repr(jax.typeof(x).sharding) == repr(real_jax.typeof(jx).sharding)
    assert x.sharding is sharding and repr(x.sharding) == repr(jx.sharding)
    assert x.committed and x.is_fully_replicated == jx.is_fully_replicated
    assert {d.id for d in x.devices()} == {d.id for d in jx.devices()}

    shards, jshards = x.addressable_shards, jx.addressable_shards
    assert len(shards) == len(jshards) == mesh.size
    for s, js in zip(shards, jshards):
        assert (s.device.id, s.index, s.replica_id) == (js.device.id, js.index, js.replica_id)
        np.testing.assert_array_equal(np.asarray(s.data), value[s.index])
        assert s.data.device == s.device and s.data.dtype == value.dtype
    if value.size:  # a replicated block is stored once: one buffer per JAX replica 0
        assert x.distinct_buffers() == sum(s.replica_id == 0 for s in jshards)
    np.testing.assert_array_equal(np.asarray(x.addressable_data(len(shards) - 1)),
                                  value[shards[-1].index])


def test_notebook_types():
    mesh = jax.make_mesh((4, 2), ("dp", "tp"), axis_types=(E, E))
    x = jax.device_put(np.zeros((1024, 4096), np.float32), NamedSharding(mesh, P("dp", None)))
    assert repr(jax.typeof(x)) == "ShapedArray(float32[1024@dp,4096])"
    assert str(jax.typeof(x)) == "float32[1024@dp,4096]"
    w = jax.device_put(np.zeros((4096, 256), np.float32), NamedSharding(mesh, P(None, "tp")))
    assert repr(jax.typeof(w)) == "ShapedArray(float32[4096,256@tp])"
    y = jax.device_put(np.arange(8, dtype=np.int32), NamedSharding(mesh, P(("tp", "dp"))))
    assert repr(jax.typeof(y)) == "ShapedArray(int32[8@(tp,dp)])"
    auto = jax.make_mesh((4, 2), ("dp", "tp"), axis_types=(A, A))
    z = jax.device_put(np.zeros((1024, 4096), np.float32), NamedSharding(auto, P("dp", "tp")))
    assert repr(jax.typeof(z)) == "ShapedArray(float32[1024,4096])"
    assert repr(x.sharding) == ("NamedSharding(mesh=Mesh('dp': 4, 'tp': 2, axis_types=(Explicit, "
                                "Explicit)), spec=P('dp', None), memory_kind=device)")


def test_device_put_placements(real_jax):
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    value = np.arange(32, dtype=np.float32).reshape(8, 4)
    x = jax.device_put(value)
    assert not x.committed and x.device == jax.devices()[0]
    assert x.sharding == SingleDeviceSharding(jax.devices()[0])
    assert x.addressable_shards[0].index == (slice(None), slice(None))
    value[0, 0] = 100.0  # device_put copied the (writable) input
    assert np.asarray(x)[0, 0] == 0.0
    d = jax.device_put(x, jax.devices()[3])
    assert d.committed and d.device == jax.devices()[3] and repr(d.sharding) == \
        "SingleDeviceSharding(device=CpuDevice(id=3), memory_kind=device)"
    assert jax.device_put(x) is x and jax.device_put(d) is d
    s = jax.device_put(3.0, NamedSharding(mesh, P()))
    assert repr(jax.typeof(s)) == "ShapedArray(float32[], weak_type=True)" and s.is_fully_replicated
    assert s.distinct_buffers() == 1
    with jax.set_mesh(mesh):
        y = jax.device_put(value, P("dp"))
    assert y.sharding == NamedSharding(mesh, P("dp")) and str(jax.typeof(y)) == "float32[8@dp,4]"
    assert y.device == y.sharding  # JAX: a multi-device array's `device` is its sharding


def test_device_put_reshards():
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    value = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    x = jax.device_put(value, NamedSharding(mesh, P("dp")))
    assert jax.device_put(x, NamedSharding(mesh, P("dp"))) is x
    for spec in [P("tp", "dp"), P(), P(("tp", "dp")), P(None, "tp")]:
        y = jax.device_put(x, NamedSharding(mesh, spec))
        assert y.sharding.spec == spec
        np.testing.assert_array_equal(np.asarray(y), value)
    other = jax.make_mesh((2, 4), ("a", "b"), axis_types=(A, A))
    z = jax.device_put(x, NamedSharding(other, P("b", "a")))
    assert str(jax.typeof(z)) == "float32[8,4]"
    np.testing.assert_array_equal(np.asarray(z), value)
    single = jax.device_put(z, jax.devices()[5])
    assert single.device.id == 5 and single.distinct_buffers() == 1
    np.testing.assert_array_equal(np.asarray(single), value)


def test_device_put_donate():
    mesh = jax.make_mesh((8,), ("x",))
    x = jax.device_put(np.arange(8.0, dtype=np.float32))
    y = jax.device_put(x, NamedSharding(mesh, P("x")), donate=True)
    assert x.is_deleted() and not y.is_deleted()


def test_device_put_pytrees(real_jax):
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    a, b = np.ones((8, 2), np.float32), np.zeros((4,), np.int32)
    out = jax.device_put({"a": a, "b": [b, 2.0]}, NamedSharding(mesh, P()))
    assert out["a"].sharding.spec == P() and out["b"][0].sharding.spec == P()
    assert out["b"][1].weak_type
    out = jax.device_put([a, (b, a)], [NamedSharding(mesh, P("dp")), jax.devices()[2]])
    assert out[0].sharding.spec == P("dp")
    assert out[1][0].device.id == 2 and out[1][1].device.id == 2
    out = jax.device_put([a, b], [None, NamedSharding(mesh, P("tp"))])
    assert not out[0].committed and out[1].sharding.spec == P("tp")
    with pytest.raises(ValueError, match="device_put device specification must be a tree prefix"):
        jax.device_put([a, a], [NamedSharding(mesh, P("dp"))])


DEVICE_PUT_ERRORS = [
    ((8, 4), ("dp", None, None), "One of device_put args is incompatible with its sharding"),
    ((6, 4), ("dp",), "Sharding spec ('dp',) implies that array axis 0 is partitioned 4 times, "
                      "but does not evenly divide the dimension size 6. Got shape: (6, 4)"),
    ((8, 3), (None, "tp"), "array axis 1 is partitioned 2 times"),
    ((8, 3), (None, ("dp", "tp")), "Sharding spec ('dp', 'tp') implies that array axis 1"),
]


@pytest.mark.parametrize("shape, spec, message", DEVICE_PUT_ERRORS)
def test_device_put_errors_match_jax(real_jax, shape, spec, message):
    mesh, jmesh = _both_meshes(real_jax, (4, 2), ("dp", "tp"))
    value = np.zeros(shape, np.float32)
    ours, theirs = _error_pair(
        lambda: jax.device_put(value, NamedSharding(mesh, P(*spec))),
        lambda: real_jax.device_put(value, real_jax.NamedSharding(jmesh, real_jax.P(*spec))))
    assert str(ours) == str(theirs) and message in str(ours) and isinstance(ours, ValueError)


CONTRACTIONS = {
    "dot": lambda jnp, lax, a, b, out: jnp.dot(a, b, out_sharding=out),
    "matmul": lambda jnp, lax, a, b, out: jnp.matmul(a, b, out_sharding=out),
    "einsum": lambda jnp, lax, a, b, out: jnp.einsum("ij,jk->ik", a, b, out_sharding=out),
    "dot_general": lambda jnp, lax, a, b, out: lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                                               out_sharding=out),
}


@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("name", CONTRACTIONS)
def test_contraction_out_sharding_that_does_not_divide_matches_jax(real_jax, name, jitted):
    # f32[8@X,4@Y] @ f32[4@Y,6] into P("X", "Y"): 6 columns over Y's 4 devices.
    def run(lib, mesh, spec):
        a = lib.device_put(np.ones((8, 4), np.float32), lib.NamedSharding(mesh, spec("X", "Y")))
        b = lib.device_put(np.ones((4, 6), np.float32), lib.NamedSharding(mesh, spec("Y", None)))
        out = lib.NamedSharding(mesh, spec("X", "Y"))
        op = CONTRACTIONS[name]
        f = lambda a, b: op(lib.numpy, lib.lax, a, b, out)  # noqa: E731
        return (lib.jit(f) if jitted else f)(a, b)
    mesh, jmesh = _both_meshes(real_jax, (2, 4), ("X", "Y"), (E, E))
    ours, theirs = _error_pair(lambda: run(jax, mesh, P), lambda: run(real_jax, jmesh, real_jax.P))
    assert str(ours) == str(theirs) and isinstance(ours, ValueError)


def test_device_put_indivisible_on_auto_mesh_matches_jax(real_jax):
    mesh, jmesh = _both_meshes(real_jax, (4, 2), ("dp", "tp"), (A, A))
    value = np.zeros((6, 4), np.float32)
    ours, theirs = _error_pair(
        lambda: jax.device_put(value, NamedSharding(mesh, P("dp"))),
        lambda: real_jax.device_put(value, real_jax.NamedSharding(jmesh, real_jax.P("dp"))))
    assert str(ours) == str(theirs) and type(ours).__name__ == "IndivisibleError"


def test_device_put_placement_errors(real_jax):
    value = np.zeros((8,), np.float32)
    set_mesh(None)
    for bad, jax_bad in [(P("dp"), real_jax.P("dp")), ("foo", "foo"), (3, 3)]:
        ours, theirs = _error_pair(lambda: jax.device_put(value, bad),
                                   lambda: real_jax.device_put(value, jax_bad))
        assert str(ours) == str(theirs) and isinstance(ours, ValueError)
    with pytest.raises(ValueError, match="For scalars the PartitionSpec should be P()"):
        jax.device_put(1.0, NamedSharding(jax.make_mesh((8,), ("x",)), P("x")))


# --- debug ---------------------------------------------------------------------------------

# JAX 0.10.2's drawings (rich, without colour) for mesh ('dp': 4, 'tp': 2).
DRAWINGS = {
    (("dp",), (8,)): """
┌───────┬───────┬───────┬───────┐
│CPU 0,1│CPU 2,3│CPU 4,5│CPU 6,7│
└───────┴───────┴───────┴───────┘""",
    (("dp", None), (8, 4)): """
┌──────────┐
│ CPU 0,1  │
├──────────┤
│ CPU 2,3  │
├──────────┤
│ CPU 4,5  │
├──────────┤
│ CPU 6,7  │
└──────────┘""",
    ((None, "tp"), (8, 4)): """
┌───────────┬───────────┐
│           │           │
│           │           │
│           │           │
│           │           │
│CPU 0,2,4,6│CPU 1,3,5,7│
│           │           │
│           │           │
│           │           │
│           │           │
└───────────┴───────────┘""",
    (("dp", "tp"), (8, 4)): """
┌───────┬───────┐
│ CPU 0 │ CPU 1 │
├───────┼───────┤
│ CPU 2 │ CPU 3 │
├───────┼───────┤
│ CPU 4 │ CPU 5 │
├───────┼───────┤
│ CPU 6 │ CPU 7 │
└───────┴───────┘""",
    ((("dp", "tp"),), (8,)): """
┌───────┬───────┬───────┬───────┬───────┬───────┬───────┬───────┐
│ CPU 0 │ CPU 1 │ CPU 2 │ CPU 3 │ CPU 4 │ CPU 5 │ CPU 6 │ CPU 7 │
└───────┴───────┴───────┴───────┴───────┴───────┴───────┴───────┘""",
    (("tp", "dp"), (4, 8)): """
┌──────────┬──────────┬──────────┬──────────┐
│          │          │          │          │
│  CPU 0   │  CPU 2   │  CPU 4   │  CPU 6   │
│          │          │          │          │
│          │          │          │          │
├──────────┼──────────┼──────────┼──────────┤
│          │          │          │          │
│  CPU 1   │  CPU 3   │  CPU 5   │  CPU 7   │
│          │          │          │          │
│          │          │          │          │
└──────────┴──────────┴──────────┴──────────┘""",
    ((), (8, 4)): """
┌───────────────────┐
│                   │
│                   │
│                   │
│                   │
│CPU 0,1,2,3,4,5,6,7│
│                   │
│                   │
│                   │
│                   │
└───────────────────┘""",
}


@pytest.mark.parametrize("spec, shape", list(DRAWINGS))
def test_visualize_array_sharding(capsys, spec, shape):
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    x = jax.device_put(np.zeros(shape, np.float32), NamedSharding(mesh, P(*spec)))
    jax.debug.visualize_array_sharding(x)
    assert capsys.readouterr().out == DRAWINGS[spec, shape].lstrip("\n") + "\n"


def test_visualize_errors_and_single_device(capsys):
    with pytest.raises(ValueError, match="only works for shapes with 1 and 2 dimensions"):
        jax.debug.visualize_array_sharding(jax.device_put(np.zeros((2, 2, 2))))
    jax.debug.visualize_array_sharding(jax.device_put(np.zeros((4, 4)), jax.devices()[3]))
    lines = capsys.readouterr().out.split("\n")
    assert len(lines) == 12 and lines[-1] == ""
    assert lines[5] == "│" + " " * 9 + "CPU 3" + " " * 9 + "│"


def test_inspect_array_sharding_eager_and_in_jit():
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    x = jax.device_put(np.ones((16, 8), np.float32), NamedSharding(mesh, P("dp", None)))
    w = jax.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh, P(None, "tp")))
    seen = []
    jax.debug.inspect_array_sharding([x, {"w": w}], callback=seen.append)
    assert seen == [x.sharding, w.sharding]

    printed = []

    @jax.jit
    def f(x, w):
        jax.debug.inspect_array_sharding(x, callback=lambda s: printed.append(f"x: {s}"))
        jax.debug.inspect_array_sharding(w, callback=lambda s: printed.append(f"w: {s}"))
        return x + 1.0

    f(x, w)
    f(x, w)  # traced once: the callbacks run once, as JAX's run at compile time
    assert printed == [  # what JAX 0.10.2 prints for the notebook's cell
        "x: NamedSharding(mesh=Mesh('dp': 4, 'tp': 2, axis_types=(Auto, Auto)), spec=P('dp',), "
        "memory_kind=device)",
        "w: NamedSharding(mesh=Mesh('dp': 4, 'tp': 2, axis_types=(Auto, Auto)), "
        "spec=P(None, 'tp'), memory_kind=device)"]

"""jnp.zeros_like/ones_like/full_like/empty_like of objects that only have a
shape and a dtype (ShapeDtypeStruct, as optax's gradient accumulation builds its
zero state from `jax.eval_shape`), against JAX 0.10.2: dtypes, weak types,
shardings outside and inside jit, and the error for other objects."""
import numpy as np
import pytest

import meshsim
import meshsim.numpy as jnp

LIKES = {
    "zeros_like": lambda m, a, **k: m.numpy.zeros_like(a, **k),
    "ones_like": lambda m, a, **k: m.numpy.ones_like(a, **k),
    "empty_like": lambda m, a, **k: m.numpy.zeros_like(a, **k),  # empty_like's contents are unspecified
    "full_like": lambda m, a, **k: m.numpy.full_like(a, 2.5, **k),
}


def _struct(lib, shape, dtype, sharding=None):
    return lib.ShapeDtypeStruct(shape, dtype, sharding=sharding)


def _same(ours, theirs):
    assert (ours.shape, ours.dtype, ours.weak_type) == (theirs.shape, theirs.dtype, theirs.weak_type)
    np.testing.assert_array_equal(np.asarray(ours, np.float64), np.asarray(theirs, np.float64))


@pytest.mark.parametrize("name", sorted(LIKES))
def test_like_of_shape_dtype_struct_matches_jax(real_jax, name):
    rng = np.random.default_rng(sum(map(ord, name)))
    for _ in range(4):
        shape = tuple(int(d) for d in rng.integers(0, 4, rng.integers(0, 4)))
        dtype = rng.choice([np.float32, np.int32, np.bool_, np.float16, np.int8])
        for kwargs in [{}, {"dtype": np.float32}, {"shape": (2, 1)}]:
            ours = LIKES[name](meshsim, _struct(meshsim, shape, dtype), **kwargs)
            theirs = LIKES[name](real_jax, _struct(real_jax, shape, dtype), **kwargs)
            _same(ours, theirs)
            ours = meshsim.jit(lambda: LIKES[name](meshsim, _struct(meshsim, shape, dtype), **kwargs))()
            _same(ours, theirs)


def test_like_of_duck_typed_array_and_error_for_lists_match_jax(real_jax):
    class Duck:
        shape, dtype = (3,), np.dtype(np.int16)

    _same(jnp.ones_like(Duck()), real_jax.numpy.ones_like(Duck()))
    with pytest.raises(TypeError) as ours:
        jnp.zeros_like([1, 2])
    with pytest.raises(TypeError) as theirs:
        real_jax.numpy.zeros_like([1, 2])
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("axis_type", ["Explicit", "Auto"])
def test_like_keeps_the_struct_sharding_outside_jit_only(real_jax, axis_type):
    results = []
    for lib in (meshsim, real_jax):
        mesh = lib.make_mesh((4, 2), ("a", "b"), axis_types=(getattr(lib.sharding.AxisType, axis_type),) * 2)
        spec = lib.sharding.PartitionSpec("a", None) if axis_type == "Explicit" else \
            lib.sharding.PartitionSpec(None, "b")
        struct = _struct(lib, (8, 4), np.float32, lib.sharding.NamedSharding(mesh, spec))
        eager = [LIKES[n](lib, struct).sharding for n in sorted(LIKES)]
        reshaped = lib.numpy.zeros_like(struct, shape=(2, 2)).sharding
        jitted = lib.jit(lambda: lib.numpy.zeros_like(struct))().sharding
        results.append([repr(s) for s in eager + [reshaped, jitted]])
    assert results[0] == results[1]


def test_zero_state_from_eval_shape_under_a_mesh_matches_jax(real_jax):
    results = []
    for lib in (meshsim, real_jax):
        mesh = lib.make_mesh((8,), ("x",), axis_types=(lib.sharding.AxisType.Explicit,))
        sharding = lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("x"))
        params = {"w": lib.device_put(lib.numpy.ones((8, 3)), sharding), "b": lib.numpy.ones(3)}
        with lib.set_mesh(mesh):
            zeros = lib.tree.map(lib.numpy.zeros_like, lib.eval_shape(lambda p: p, params))
        results.append([(repr(z.sharding), str(lib.typeof(z)), np.asarray(z).any())
                        for z in lib.tree.leaves(zeros)])
    assert results[0] == results[1]

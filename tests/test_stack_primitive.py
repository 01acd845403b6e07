"""The stack and unstack primitives (lax.stack / lax.unstack, bound by jnp.stack and jnp.unstack)
against JAX 0.10.2: printed programs (forward, grad, vmap, jit, shard_map), values over random
shapes, axes and dtypes, Explicit-mode shardings and their errors, the public primitive objects,
and layouts on Auto mesh axes against XLA's compiled programs. Where JAX keeps concatenate
(jnp.vstack, jnp.array of a list, jnp.stack of one array) meshsim does too."""
import ml_dtypes
import numpy as np
import pytest

import meshsim
from auto_oracle import assert_like_jax
from outcomes import outcome

RNG = np.random.default_rng(0)
A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = -np.arange(6, dtype=np.float32).reshape(2, 3)
BATCH = np.arange(24, dtype=np.float32).reshape(4, 2, 3)


def _programs(J):
    """name -> (function, arguments): programs whose printed jaxpr is compared."""
    jnp, lax = J.numpy, J.lax
    return {
        "stack": (lambda a, b: jnp.stack([a, b]), (A, B)),
        "stack_last_axis": (lambda a, b: jnp.stack([a, b], axis=-1), (A, B)),
        "stack_three_middle": (lambda a, b: jnp.stack((a, b, a), 1), (A, B)),
        "lax_stack": (lambda a, b: lax.stack([a, b], axis=2), (A, B)),
        "unstack": (lambda a: jnp.unstack(a, axis=1), (A,)),
        "lax_unstack": (lambda a: lax.unstack(a), (A,)),
        "unstack_negative_axis": (lambda a: jnp.unstack(a, axis=-2), (BATCH,)),
        "unstack_empty_axis": (lambda a: jnp.unstack(a), (np.ones((0, 3), np.float32),)),
        "stack_scalar_literal": (lambda a: jnp.stack([a, 1.0]), (np.float32(2),)),
        "stack_promoted": (lambda a, b: jnp.stack([a, b]), (A, B.astype(np.int32))),
        "stack_dtype": (lambda a, b: jnp.stack([a, b], dtype=jnp.int32), (A, B)),
        "stack_of_one_array": (lambda a: jnp.stack(a), (A,)),
        "concatenate_of_one_array": (lambda a: jnp.concatenate(a, axis=0), (BATCH,)),
        "iterate_tracer": (lambda a: list(a), (A,)),
        "iterate_1d": (lambda a: tuple(a), (A[0],)),
        "vstack_stays_concatenate": (lambda a, b: jnp.vstack([a, b]), (A, B)),
        "array_stays_concatenate": (lambda a, b: jnp.array([a, b]), (A, B)),
        "grad_stack": (J.grad(lambda a, b: (jnp.stack([a, b], 1) ** 2).sum(), argnums=(0, 1)), (A, B)),
        "grad_unstack": (J.grad(lambda a: jnp.unstack(a, axis=1)[0].sum()), (A,)),
        "grad_unstack_all": (J.grad(lambda a: sum(x.sum() for x in jnp.unstack(a))), (A,)),
        "grad_unstack_none": (J.grad(lambda a, b: jnp.unstack(b)[0].sum() + a.sum()), (A, B)),
        "vmap_stack": (J.vmap(lambda a, b: jnp.stack([a, b], 1)), (BATCH, BATCH)),
        "vmap_stack_moved_batch": (J.vmap(lambda a, b: jnp.stack([a, b], 0), in_axes=(2, 2)), (BATCH, BATCH)),
        "vmap_stack_unbatched": (J.vmap(lambda a, b: jnp.stack([a, b], 1), in_axes=(0, None)), (BATCH, A)),
        "vmap_stack_mixed_dims": (J.vmap(lambda a, b: jnp.stack([a, b]), in_axes=(0, 1)),
                                  (BATCH, BATCH.transpose(1, 0, 2))),
        "vmap_unstack": (J.vmap(lambda a: jnp.unstack(a, axis=1)), (BATCH,)),
        "vmap_unstack_before_batch": (J.vmap(lambda a: jnp.unstack(a, axis=0), in_axes=1), (BATCH,)),
        "jit_stack": (J.jit(lambda a, b: jnp.stack([a, b])), (A, B)),
        "jit_unstack": (J.jit(lambda a: jnp.unstack(a, axis=1)), (A,)),
    }


NAMES = list(_programs(meshsim))


@pytest.mark.parametrize("name", NAMES)
def test_printed_program_matches_jax(real_jax, name):
    f, args = _programs(real_jax)[name]
    g, _ = _programs(meshsim)[name]
    assert str(meshsim.make_jaxpr(g)(*args)) == str(real_jax.make_jaxpr(f)(*args))


@pytest.mark.parametrize("name", NAMES)
def test_values_match_jax(real_jax, name):
    f, args = _programs(real_jax)[name]
    g, _ = _programs(meshsim)[name]
    want, got = real_jax.tree.leaves(f(*args)), meshsim.tree.leaves(g(*args))
    assert len(got) == len(want)
    for w, o in zip(want, got):
        assert o.dtype == w.dtype and o.shape == w.shape
        np.testing.assert_array_equal(np.asarray(o), np.asarray(w))


DTYPES = [np.float32, ml_dtypes.bfloat16, np.int32, np.int8, np.uint8, np.bool_, np.float16]


def _random(shape, dtype):
    values = RNG.standard_normal(shape) * 5
    return (values > 0) if dtype == np.bool_ else values.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_random_shapes_axes_and_dtypes_against_numpy(dtype):
    jnp, lax = meshsim.numpy, meshsim.lax
    for _ in range(6):
        shape = tuple(int(n) for n in RNG.integers(0, 5, RNG.integers(0, 4)))
        count = int(RNG.integers(1, 5))
        parts = [_random(shape, dtype) for _ in range(count)]
        axis = int(RNG.integers(-len(shape) - 1, len(shape) + 1))
        want = np.stack(parts, axis)
        for stacked in (jnp.stack(parts, axis), lax.stack(parts, axis),
                        meshsim.jit(lambda *p, axis=axis: lax.stack(p, axis))(*parts)):
            assert stacked.dtype == want.dtype and stacked.shape == want.shape
            np.testing.assert_array_equal(np.asarray(stacked), want)
        back = jnp.unstack(stacked, axis=axis)
        assert len(back) == count
        for p, b in zip(parts, back):
            assert b.dtype == p.dtype
            np.testing.assert_array_equal(np.asarray(b), p)
        if shape:
            cut = int(RNG.integers(-len(shape), len(shape)))
            pieces = meshsim.jit(lambda x, cut=cut: lax.unstack(x, cut))(parts[0])
            want_pieces = list(np.moveaxis(parts[0], cut, 0))
            assert len(pieces) == len(want_pieces)
            for p, w in zip(pieces, want_pieces):
                np.testing.assert_array_equal(np.asarray(p), w)


def test_stack_and_concatenate_of_one_array(real_jax):
    """jnp.stack and jnp.concatenate of an array take its rows without unstacking them."""
    for axis in (0, 1, 2, -1):
        for J in (meshsim, real_jax):
            np.testing.assert_array_equal(np.asarray(J.numpy.stack(BATCH, axis)), np.stack(list(BATCH), axis))
            if axis < 2:
                np.testing.assert_array_equal(np.asarray(J.numpy.concatenate(BATCH, axis)),
                                              np.concatenate(list(BATCH), axis))
        eqns = meshsim.make_jaxpr(lambda a: meshsim.numpy.stack(a, axis))(BATCH).eqns
        assert "stack" not in {e.primitive.name for e in eqns}
    np.testing.assert_array_equal(np.asarray(meshsim.numpy.concatenate(BATCH, None)), BATCH.ravel())
    for J in (meshsim, real_jax):
        with pytest.raises(ValueError, match="Zero-dimensional arrays cannot be concatenated."):
            J.numpy.concatenate(np.ones(3, np.float32))
        with pytest.raises(ValueError, match="Need at least one array to concatenate."):
            J.numpy.concatenate(np.ones((0, 3), np.float32))


def test_strided_and_transposed_operands():
    """The kernels read operands of any layout (views: transposed, reversed, sliced)."""
    jnp = meshsim.numpy
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    v = jnp.asarray(x)
    parts = [v.T, v[::-1].T, jnp.flip(v, 2).T]
    want = [x.T, x[::-1].T, np.flip(x, 2).T]
    for axis in range(4):
        np.testing.assert_array_equal(np.asarray(jnp.stack(parts, axis)), np.stack(want, axis))
    for axis in range(3):
        for got, w in zip(jnp.unstack(v.T, axis=axis), np.moveaxis(x.T, axis, 0)):
            np.testing.assert_array_equal(np.asarray(got + 0), w)


def test_weak_types_follow_jax(real_jax):
    for J in (meshsim, real_jax):
        assert J.lax.stack([1.0, 2.0]).weak_type
        assert not J.lax.stack([np.float32(1), 2.0]).weak_type
        assert J.numpy.stack([1.0, 2.0]).weak_type
        assert all(p.weak_type for p in J.lax.unstack(J.lax.stack([1.0, 2.0])))


def test_gradients_are_transposes(real_jax):
    """⟨ct, vjp(t)⟩ = ⟨jvp(t), ct⟩ for both primitives, and the gradients equal JAX's."""
    x, y, z = (RNG.standard_normal((3, 4)).astype(np.float32) for _ in range(3))
    ct = RNG.standard_normal((3, 3, 4)).astype(np.float32)
    lax = meshsim.lax
    out, pullback = meshsim.vjp(lambda a, b, c: lax.stack([a, b, c], 1), x, y, z)
    tangent = (np.ones_like(x), 2 * np.ones_like(y), -np.ones_like(z))
    _, forward = meshsim.jvp(lambda a, b, c: lax.stack([a, b, c], 1), (x, y, z), tangent)
    lhs = sum(float((np.asarray(g) * t).sum()) for g, t in zip(pullback(ct), tangent))
    np.testing.assert_allclose(lhs, float((np.asarray(forward) * ct).sum()), rtol=1e-5)
    cts = [RNG.standard_normal((3, 4)).astype(np.float32) for _ in range(3)]
    _, pullback = meshsim.vjp(lambda s: lax.unstack(s, 1), out)
    _, forward = meshsim.jvp(lambda s: lax.unstack(s, 1), (out,), (ct,))
    np.testing.assert_allclose(float((np.asarray(pullback(tuple(cts))[0]) * ct).sum()),
                               sum(float((np.asarray(f) * c).sum()) for f, c in zip(forward, cts)), rtol=1e-5)

    def loss(J):
        return lambda a: (J.numpy.stack(J.numpy.unstack(a, axis=1)[::-1], axis=0) ** 3).sum()
    np.testing.assert_allclose(np.asarray(meshsim.grad(loss(meshsim))(x)),
                               np.asarray(real_jax.grad(loss(real_jax))(x)), rtol=1e-6)


def _errors(J):
    jnp, lax = J.numpy, J.lax
    one, three = jnp.ones(2), jnp.ones(3)
    return {
        "jnp_empty": lambda: jnp.stack([]),
        "lax_empty": lambda: lax.stack([]),
        "shapes": lambda: lax.stack([one, three]),
        "jnp_shapes": lambda: jnp.stack([one, three]),
        "ranks": lambda: lax.stack([one, jnp.ones((2, 1))]),
        "dtypes": lambda: lax.stack([one, jnp.ones(2, jnp.int32)]),
        "python_scalars_of_two_kinds": lambda: lax.stack([1, 2.0]),
        "jnp_nested_lists": lambda: jnp.stack([[1, 2], [3, 4]]),
        "jnp_unstack_list": lambda: jnp.unstack([[1, 2], [3, 4]]),
        "jit_shapes": lambda: J.jit(lambda a, b: lax.stack([a, b]))(one, three),
        "bind_no_operands": lambda: lax.stack_p.bind(axis=0),
    }


@pytest.mark.parametrize("name", [n for n in _errors(meshsim) if n != "bind_no_operands"])
def test_errors_match_jax(real_jax, name):
    assert outcome(_errors(meshsim)[name]) == outcome(_errors(real_jax)[name])


AXIS_ERRORS = {
    "stack_axis": lambda J: J.lax.stack([J.numpy.ones(2)] * 2, axis=2),
    "stack_negative_axis": lambda J: J.numpy.stack([J.numpy.ones(2)] * 2, axis=-3),
    "unstack_scalar": lambda J: J.numpy.unstack(J.numpy.ones(())),
    "unstack_axis": lambda J: J.lax.unstack(J.numpy.ones((2, 3)), axis=2),
}


@pytest.mark.parametrize("name", AXIS_ERRORS)
def test_axis_errors_match_jax(real_jax, name):
    """An axis out of range is JAX's ValueError and text (meshsim's is NumPy's AxisError, a ValueError)."""
    with pytest.raises(ValueError) as want:
        AXIS_ERRORS[name](real_jax)
    with pytest.raises(ValueError, match=f"^{want.value}$"):
        AXIS_ERRORS[name](meshsim)


def test_binding_the_primitives_directly(real_jax):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for J in (meshsim, real_jax):
        assert J.lax.stack_p.name == "stack" and not J.lax.stack_p.multiple_results
        assert J.lax.unstack_p.name == "unstack" and J.lax.unstack_p.multiple_results
    np.testing.assert_array_equal(np.asarray(meshsim.lax.stack_p.bind(x, x, axis=1)), np.stack([x, x], 1))
    parts = meshsim.lax.unstack_p.bind(x, axis=1)
    assert isinstance(parts, list) and len(parts) == 3
    np.testing.assert_array_equal(np.asarray(parts[2]), x[:, 2])
    eqns = meshsim.make_jaxpr(lambda a: meshsim.lax.unstack(meshsim.lax.stack([a, a])))(x).eqns
    assert [e.primitive for e in eqns] == [meshsim.lax.stack_p, meshsim.lax.unstack_p]
    assert eqns[0].params == {"axis": 0}
    with pytest.raises(ValueError, match="^stack expects at least one operand, got 0.$"):
        meshsim.lax.stack_p.bind(axis=0)
    with pytest.raises(ValueError, match="^stack axis 3 is out of bounds for array of dimension 3$"):
        meshsim.lax.stack_p.bind(x, x, axis=3)


def _explicit(J, body):
    P, AxisType = J.sharding.PartitionSpec, J.sharding.AxisType
    mesh = J.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    with J.set_mesh(mesh):
        x = J.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), P("x", "y"))
        y = J.device_put(np.ones((8, 4), np.float32), P("x", "y"))
        z = J.device_put(np.full((8, 4), 3, np.float32), P("x", None))
        return outcome(body, J, x, y, z)


EXPLICIT = {
    "stack_0": lambda J, x, y, z: J.typeof(J.numpy.stack([x, y])),
    "stack_1": lambda J, x, y, z: J.typeof(J.numpy.stack([x, y], axis=1)),
    "stack_last": lambda J, x, y, z: J.typeof(J.lax.stack([x, y, x], axis=-1)),
    "stack_values": lambda J, x, y, z: np.asarray(J.jit(lambda a, b: J.numpy.stack([a, b], 1))(x, y)),
    "stack_sharding": lambda J, x, y, z: J.jit(lambda a, b: J.numpy.stack([a, b], 1))(x, y).sharding.spec,
    "stack_mismatch": lambda J, x, y, z: J.numpy.stack([x, z]),
    "stack_replicated": lambda J, x, y, z: J.numpy.stack([x, J.numpy.ones((8, 4))]),
    "unstack_kept": lambda J, x, y, z: [J.typeof(p) for p in J.numpy.unstack(z, axis=1)],
    "unstack_values": lambda J, x, y, z: [np.asarray(p) for p in J.numpy.unstack(z, axis=1)],
    "unstack_sharded_axis": lambda J, x, y, z: J.numpy.unstack(x, axis=0),
    "unstack_jitted": lambda J, x, y, z: str(J.make_jaxpr(lambda a: J.lax.unstack(a, axis=1))(z)),
    "stack_jaxpr": lambda J, x, y, z: str(J.make_jaxpr(lambda a, b: J.lax.stack([a, b], 2))(x, y)),
    "grad_stack": lambda J, x, y, z: J.typeof(J.grad(lambda a, b: J.numpy.stack([a, b], 1).sum())(x, y)),
    "grad_unstack": lambda J, x, y, z: J.typeof(J.grad(lambda a: J.numpy.unstack(a, axis=1)[0].sum())(z)),
    "vmap_stack": lambda J, x, y, z: J.typeof(J.vmap(lambda a, b: J.numpy.stack([a, b]))(x, y)),
}


@pytest.mark.parametrize("name", EXPLICIT)
def test_explicit_sharding_matches_jax(real_jax, name):
    got, want = _explicit(meshsim, EXPLICIT[name]), _explicit(real_jax, EXPLICIT[name])
    assert got[0] == want[0]
    if isinstance(want[1], np.ndarray) or isinstance(want[1], list) and isinstance(want[1][0], np.ndarray):
        np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))
    else:
        assert str(got[1]) == str(want[1])


def _shard_map_program(J):
    P = J.sharding.PartitionSpec
    mesh = J.make_mesh((4, 2), ("x", "y"), axis_types=(J.sharding.AxisType.Auto,) * 2)

    def body(a, b):
        s = J.lax.stack([a, b], 1)  # a varies over x, b over nothing: b is pvary'd
        first, second = J.numpy.unstack(s, axis=0)
        return first * 2.0 - second

    return J.shard_map(body, mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x"))


def test_shard_map_varying_axes_match_jax(real_jax):
    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    b = np.ones((2, 4), np.float32)
    got, want = _shard_map_program(meshsim), _shard_map_program(real_jax)
    assert str(meshsim.make_jaxpr(got)(a, b)) == str(real_jax.make_jaxpr(want)(a, b))
    np.testing.assert_array_equal(np.asarray(got(a, b)), np.asarray(want(a, b)))


# name -> (mesh shape, axis names, operand shape, operand spec, program)
AUTO = {
    "stack_cols": ((4, 2), ("X", "Y"), (8, 4), (None, "X"), lambda J, a: J.numpy.stack([a, a * 2.0], 2)),
    "unstack_kept_cols": ((4, 2), ("X", "Y"), (8, 4), ("Y",), lambda J, a: J.numpy.unstack(a + 1.0, axis=1)),
    "stack_split_rows": ((4, 2), ("X", "Y"), (8, 4), ("X", "Y"), lambda J, a: J.numpy.stack([a, a * 2.0], 1)),
    "stack_then_sum": ((8,), ("X",), (16, 4), ("X",), lambda J, a: J.numpy.stack([a, J.numpy.sin(a)]).sum(0)),
    "unstack_kept_dim": ((4, 2), ("X", "Y"), (8, 4), ("X",), lambda J, a: J.numpy.unstack(a, axis=1)),
    "unstack_split_dim": ((4, 2), ("X", "Y"), (8, 4), ("X", "Y"), lambda J, a: J.numpy.unstack(a * 3.0)),
}


# Unstacking a split dim: XLA moves each slice from the device holding it (collective-permutes
# and an all-reduce), meshsim gathers the dim first; values and result layouts agree.
GATHERED_FIRST = {"unstack_split_dim"}


@pytest.mark.parametrize("name", AUTO)
def test_auto_axes_match_xla(name):
    mesh_shape, names, shape, spec, program = AUTO[name]

    def run(runner, mod):
        mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
        value = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
        x = mod.device_put(value, mod.sharding.NamedSharding(mesh, mod.sharding.PartitionSpec(*spec)))
        with mod.set_mesh(mesh):
            return runner(mod, lambda a: program(mod, a), [x])

    assert_like_jax(run, collectives=name not in GATHERED_FIRST, rtol=1e-6, atol=1e-6)

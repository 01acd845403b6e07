"""The seed notebook's Mixture-of-Experts layer (examples/ex_moe.py): the layer
against an independent NumPy reference on (2, 4) and (1, 8) meshes, top_k 1
and 2, with and without dropped tokens; the dispatcher's round trip; the drop
mask; gradients through the layer (ragged_all_to_all's and ragged_dot's
transposes) against a NumPy backprop; and the notebook's traced `jnp.ceil`
capacity failing as in JAX."""
import os
import sys

import numpy as np
import pytest

import meshsim as jax
import meshsim.numpy as jnp
from meshsim.sharding import Mesh, PartitionSpec as P

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import ex_moe  # noqa: E402

ENV = ex_moe.build(jax)


def mesh_of(shape):
    return Mesh(np.array(jax.devices()).reshape(shape), ("dp", "ep"))


@pytest.mark.parametrize("mesh_shape", [(2, 4), (1, 8)])
@pytest.mark.parametrize("top_k", [1, 2])
@pytest.mark.parametrize("capacity_factor", [0.25, 2.0])
def test_moe_layer_matches_numpy(mesh_shape, top_k, capacity_factor):
    rng = np.random.default_rng([mesh_shape[1], top_k, int(capacity_factor * 4)])
    x, rw, ew = ex_moe.random_problem(rng, mesh_shape)
    want, dropped = ex_moe.numpy_moe_layer(x, rw, ew, mesh_shape=mesh_shape, top_k=top_k,
                                           capacity_factor=capacity_factor)
    # A capacity of 2x the mean never drops; a quarter of it always does here.
    assert (dropped > 0) == (capacity_factor < 1)
    got = ENV["moe_layer"](x, rw, ew, mesh=mesh_of(mesh_shape), top_k=top_k, capacity_factor=capacity_factor)
    assert got.shape == x.shape and got.dtype == np.float32
    # jit with uncommitted (NumPy) inputs: the spec comes from the compiled
    # program's layout, which JAX prints without trailing Nones.
    assert got.sharding.spec == P("dp", "ep")
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def test_calculate_offsets_prints_as_the_notebook_says():
    assert repr(ENV["calculate_offsets"](jnp.array([2, 3, 1]))) == "Array([0, 2, 5], dtype=int32)"


@pytest.mark.parametrize("trial", range(3))
def test_drop_mask_matches_numpy(trial):
    rng = np.random.default_rng(100 + trial)
    n, experts = int(rng.integers(1, 40)), int(rng.integers(1, 6))
    ids = rng.integers(0, experts, n).astype(np.int32)
    probs = rng.random(n).astype(np.float32)
    if trial == 2:
        probs = np.round(probs, 1)  # ties keep their order
    capacity = int(rng.integers(0, n + 1))
    want = ex_moe.numpy_drop_mask(ids, probs, capacity)
    drop_mask = ENV["calculate_drop_token_mask"]
    np.testing.assert_array_equal(np.asarray(drop_mask(jnp.asarray(ids), jnp.asarray(probs), experts, capacity)),
                                  want)
    jitted = jax.jit(drop_mask, static_argnums=(2, 3))
    np.testing.assert_array_equal(np.asarray(jitted(jnp.asarray(ids), jnp.asarray(probs), experts, capacity)),
                                  want)


@pytest.mark.parametrize("mesh_shape", [(2, 4), (1, 8)])
def test_dispatcher_round_trip(mesh_shape):
    """dispatch_forward packs each receiver's rows sender by sender (kept rows
    only); dispatch_backward returns them to the slots they were read from."""
    ep, n = mesh_shape[1], 12
    mesh = mesh_of(mesh_shape)
    rng = np.random.default_rng(ep)
    devices = mesh_shape[0] * ep
    ids = rng.integers(0, ep, devices * n).astype(np.int32)
    dropped = rng.random(devices * n) < 0.3
    data = np.arange(devices * n * 2, dtype=np.float32).reshape(devices * n, 2)

    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=(P(("dp", "ep")),) * 3, out_specs=P(("dp", "ep")))
    def round_trip(data, ids, dropped):
        order = jnp.lexsort((dropped, ids))
        sent = data[order]
        plan = ENV["MOERaggedDispatcher"].from_target_device_ids(ids, axis_name="ep", mask=~dropped)
        received, valid = plan.dispatch_forward(sent, n * ep)
        back, back_valid = plan.dispatch_backward(received, n)
        return sent, received, valid, back, back_valid

    sent, received, valid, back, back_valid = (np.asarray(v) for v in round_trip(data, ids, dropped))
    cap = n * ep
    for d in range(devices):
        dp_row, e = divmod(d, ep)
        rows = slice(d * n, (d + 1) * n)
        order = np.lexsort((dropped[rows], ids[rows]))
        np.testing.assert_array_equal(sent[rows], data[rows][order])
        kept = ~dropped[rows][order]
        np.testing.assert_array_equal(back[rows][kept], sent[rows][kept])
        assert not back[rows][~kept].any()
        assert back_valid[rows].sum() == kept.sum()
        # What device e of this dp row receives: each sender's kept rows for it, in sender order.
        want = []
        for s in range(ep):
            src = slice((dp_row * ep + s) * n, (dp_row * ep + s + 1) * n)
            o = np.lexsort((dropped[src], ids[src]))
            want.append(data[src][o][(ids[src][o] == e) & ~dropped[src][o]])
        want = np.concatenate(want)
        got = received[d * cap:(d + 1) * cap]
        np.testing.assert_array_equal(got[:len(want)], want)
        assert not got[len(want):].any()
        assert valid[d * cap:(d + 1) * cap].sum() == len(want)


@pytest.mark.parametrize("mesh_shape,top_k,capacity_factor", [((2, 4), 2, 0.25), ((1, 8), 1, 2.0)])
def test_gradients_match_numpy_backprop(mesh_shape, top_k, capacity_factor):
    rng = np.random.default_rng(7)
    x, rw, ew = ex_moe.random_problem(rng, mesh_shape)
    ct = rng.standard_normal(x.shape).astype(np.float32)
    mesh = mesh_of(mesh_shape)

    def loss(x, rw, ew):
        out = ENV["moe_layer"](x, rw, ew, mesh=mesh, top_k=top_k, capacity_factor=capacity_factor)
        return (out * ct).sum()

    got = jax.grad(loss, argnums=(0, 1, 2))(x, rw, ew)
    want = ex_moe.numpy_moe_layer_grads(x, rw, ew, ct, mesh_shape=mesh_shape, top_k=top_k,
                                        capacity_factor=capacity_factor)
    for name, g, w in zip(("x", "router_weights", "expert_weights"), got, want):
        assert g.shape == w.shape, name
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4, err_msg=name)


def test_notebook_traced_capacity_raises_jax_type_error(real_jax):
    """The notebook's `expert_capacity = jnp.ceil(...)` is traced, so the
    dispatcher's `jnp.zeros((capacity,) ...)` cannot take it: TypeError in both."""
    x, rw, ew = ex_moe.random_problem(np.random.default_rng(0), (2, 4))
    message = r"^Shapes must be 1D sequences of concrete values of integer type, got \("
    for mod in (real_jax, jax):
        layer = ex_moe.build(mod, notebook_capacity=True)["moe_layer"]
        mesh = mod.sharding.Mesh(np.array(mod.devices()).reshape(2, 4), ("dp", "ep"))
        with pytest.raises(TypeError, match=message):
            layer(x, rw, ew, mesh=mesh, top_k=2)

"""HSDP with microbatched gradient accumulation (examples/ex_hsdp.py): a
`lax.scan` over microbatches inside `jit(shard_map)` on a ("replica", "fsdp")
mesh. For 1, 2 and 4 microbatches the loss and gradients must equal the
single-device baseline's on the whole batch, the NumPy backprop's and real
JAX's on the same code, and the step must execute exactly the collectives
the algorithm implies."""
import collections
import os
import sys

import numpy as np
import pytest

import meshsim

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))
import ex_hsdp  # noqa: E402
import ex_training  # noqa: E402

ATOL = 1e-5
MICROBATCHES = (1, 2, 4)


def flat(loss, grads):
    return [np.asarray(loss)] + [np.asarray(x) for l in grads.layers for x in (l.w, l.b)]


@pytest.fixture(scope="module", params=MICROBATCHES, ids=lambda m: f"{m}mb")
def env(request):
    e = ex_hsdp.build(meshsim, num_microbatches=request.param)
    e["result"] = e["step"]()
    e["num_microbatches"] = request.param
    return e


def test_matches_numpy_backprop_of_the_whole_batch(env):
    loss, grads = ex_hsdp.numpy_reference(env)
    want = [np.asarray(loss)] + [g for pair in grads for g in pair]
    for got, ref in zip(flat(*env["result"]), want):
        np.testing.assert_allclose(got, ref, rtol=ATOL, atol=ATOL)


def test_matches_the_single_device_baseline(env):
    base = env["loss_baseline"](env["model"], env["batch"])
    for got, ref in zip(flat(*env["result"]), flat(*base)):
        np.testing.assert_allclose(got, np.asarray(ref), rtol=ATOL, atol=ATOL)


def test_gradients_stay_sharded_like_the_weights(env):
    _, grads = env["result"]
    for g, w in zip(grads.layers, env["model"].layers):
        assert g.w.shape == w.w.shape and g.b.shape == w.b.shape
        assert g.w.sharding.spec == meshsim.sharding.PartitionSpec("fsdp", None)
        assert len(g.w.addressable_shards) == 8
        assert g.w.addressable_shards[0].data.shape == (w.w.shape[0] // 4, w.w.shape[1])


def test_matches_real_jax(env, real_jax):
    theirs = ex_hsdp.build(real_jax, num_microbatches=env["num_microbatches"])
    t_loss, t_grads = theirs["step"]()
    # Same code, same init (meshsim's random matches JAX's threefry bits).
    np.testing.assert_allclose(np.asarray(env["model"].layers[0].w), np.asarray(theirs["model"].layers[0].w),
                               rtol=1e-6, atol=1e-6)
    for got, ref in zip(flat(*env["result"]), flat(t_loss, t_grads)):
        np.testing.assert_allclose(got, np.asarray(ref), rtol=ATOL, atol=ATOL)


def test_collectives_per_step(env):
    """Per microbatch: the forward all-gathers the 4 weights and 4 biases over
    "fsdp"; the backward re-gathers (checkpoint) the weights it needs for the
    input gradients (layers 1-3: the first layer's input is data) and
    reduce-scatters the 8 gradients (the all-gather's transpose). After the
    loop: one all-reduce over "replica" per gradient, one for the loss."""
    m = env["num_microbatches"]
    with meshsim.debug.record_collectives() as records:
        env["step"]()
    counts = collections.Counter((r.name, r.axes) for r in records)
    assert counts == {("all_gather", ("fsdp",)): 11 * m,
                      ("reduce_scatter", ("fsdp",)): 8 * m,
                      ("psum_invariant", ("replica",)): 8,
                      ("psum_invariant", ("replica", "fsdp")): 1}
    # The weights' all-gathers move 3/4 of each full weight into every device.
    gathered = sum(r.bytes for r in records if r.name == "all_gather")
    sizes = ex_training.LAYER_SIZES
    full_w = [4 * a * b for a, b in zip(sizes[:-1], sizes[1:])]
    full_b = [4 * b for b in sizes[1:]]
    assert gathered == m * 3 * (sum(full_w) + sum(full_b) + sum(full_w[1:])) // 4


def test_the_step_is_one_scan_inside_shard_map(env):
    text = str(meshsim.make_jaxpr(env["train_step"])(env["model"], env["batch"]))
    assert text.count("scan[") == 1 and f"length={env['num_microbatches']}" in text

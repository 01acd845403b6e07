"""The small CNN of examples/ex_cnn.py (convolutions, batch norm, max and
average pooling, softmax cross-entropy) trained data-parallel on 8 simulated
devices, in shard_map and Explicit-sharding forms: losses and parameters
after each form's SGD steps match real JAX's, and the loss falls."""
import os
import sys

import numpy as np
import pytest

import meshsim

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import ex_cnn  # noqa: E402

jax = pytest.importorskip("jax")


@pytest.mark.parametrize("form", ["shard_map", "explicit"])
def test_data_parallel_cnn_training_matches_jax(form):
    ours, our_params = ex_cnn.train(meshsim, form, steps=4)
    theirs, their_params = ex_cnn.train(jax, form, steps=4)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    assert ours[-1] < 0.8 * ours[0]
    for a, b in zip(jax.tree.leaves(our_params), jax.tree.leaves(their_params)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_explicit_form_keeps_activations_batch_sharded():
    env = ex_cnn.build(meshsim)
    mesh = meshsim.make_mesh((8,), ("dp",))
    images, labels = ex_cnn.make_batch()
    with meshsim.set_mesh(mesh):
        params = ex_cnn.init_params(meshsim, meshsim.random.key(0))
        x = meshsim.device_put(images, meshsim.sharding.NamedSharding(mesh, meshsim.sharding.PartitionSpec("dp")))
        jaxpr = meshsim.make_jaxpr(lambda p, a: env["loss_fn"](p, a, labels))(params, x)
    convs = [line for line in str(jaxpr).splitlines() if "= conv_general_dilated" in line]
    assert len(convs) == 2 and all("@dp" in line for line in convs)


def test_shard_map_and_explicit_forms_agree_with_the_unsharded_loss():
    env = ex_cnn.build(meshsim)
    images, labels = ex_cnn.make_batch(seed=3)
    params = ex_cnn.init_params(meshsim, meshsim.random.key(3))
    whole = float(env["loss_fn"](params, images, labels))
    losses, _ = ex_cnn.train(meshsim, "shard_map", steps=1, seed=3)
    assert losses[0] == pytest.approx(whole, rel=1e-5)

"""The GPT of examples/gpt.py: its loss and every gradient under
jit(value_and_grad) equal the hand-written NumPy backprop's and real JAX's,
for several shapes."""
import dataclasses
import os
import sys

import numpy as np
import pytest

import meshsim

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))
import gpt  # noqa: E402

ATOL = 2e-5
CONFIGS = [gpt.CONFIG, dataclasses.replace(gpt.CONFIG, vocab=17, seq=5, dim=24, heads=3, hidden=40,
                                           layers=1, batch=3)]


def loss_and_grads(jax, cfg):
    model = gpt.build(jax, cfg)
    params = gpt.init_params(jax, cfg)
    tokens, targets = gpt.init_batch(jax, cfg)
    return params, tokens, targets, jax.jit(jax.value_and_grad(model["loss"]))(params, tokens, targets)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"L{c.layers}T{c.seq}H{c.heads}")
def test_matches_numpy_backprop(cfg):
    params, tokens, targets, (loss, grads) = loss_and_grads(meshsim, cfg)
    ref_loss, ref_grads = gpt.numpy_loss_and_grads(params, tokens, targets, cfg)
    np.testing.assert_allclose(np.asarray(loss), ref_loss, rtol=ATOL, atol=ATOL)
    for (k, g), (_, r) in zip(gpt.flatten(grads), gpt.flatten(ref_grads)):
        assert np.asarray(g).shape == r.shape
        np.testing.assert_allclose(np.asarray(g), r, rtol=ATOL, atol=ATOL, err_msg=k)


@pytest.mark.parametrize("cfg", CONFIGS[1:], ids=lambda c: f"L{c.layers}T{c.seq}H{c.heads}")
def test_matches_real_jax(cfg, real_jax):
    params, tokens, targets, (loss, grads) = loss_and_grads(meshsim, cfg)
    t_params, t_tokens, _, (t_loss, t_grads) = loss_and_grads(real_jax, cfg)
    np.testing.assert_array_equal(np.asarray(tokens), np.asarray(t_tokens))
    np.testing.assert_allclose(np.asarray(params["wte"]), np.asarray(t_params["wte"]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(loss), np.asarray(t_loss), rtol=ATOL, atol=ATOL)
    for (k, g), (_, r) in zip(gpt.flatten(grads), gpt.flatten(t_grads)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=ATOL, atol=ATOL, err_msg=k)


def test_the_numpy_reference_is_a_gradient():
    """A finite difference of the NumPy loss along the reference gradient."""
    cfg = CONFIGS[1]
    params = gpt.as_numpy(gpt.init_params(meshsim, cfg))
    tokens, targets = (np.asarray(a) for a in gpt.init_batch(meshsim, cfg))
    loss, grads = gpt.numpy_loss_and_grads(params, tokens, targets, cfg)
    eps = 1e-6
    for path in (("wte",), ("blocks", "wqkv"), ("blocks", "ln2_g"), ("wpe",)):
        shifted = gpt.as_numpy(params)
        g = grads
        for k in path[:-1]:
            shifted, g = shifted[k], g[k]
        shifted[path[-1]] = shifted[path[-1]] + eps * g[path[-1]]
        root = shifted if len(path) == 1 else {**params, path[0]: shifted}
        if len(path) == 1:
            root = {**params, path[0]: shifted[path[0]]}
        up, _ = gpt.numpy_loss_and_grads(root, tokens, targets, cfg)
        np.testing.assert_allclose((up - loss) / eps, np.sum(g[path[-1]] ** 2), rtol=1e-3)

"""The mesh-zoo strategies with bfloat16 parameters (examples/zoo_parallel.py,
examples/ex_zoo_pipeline.py): the step keeps JAX's dtypes (bfloat16 gradients,
the loss in the dtype JAX gives it), the loss equals real JAX's to bfloat16's
resolution, and every gradient is as close to the float64 NumPy backprop as
real JAX's own bfloat16 gradient is (both round every operation to bfloat16,
so neither is exact; a float32 step, a dropped rounding or a wrong gradient
lands far outside these bounds)."""
import os
import sys

import numpy as np
import pytest

import meshsim

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))
import ex_zoo_pipeline as zp  # noqa: E402
import gpt  # noqa: E402
import zoo_parallel  # noqa: E402

BF16_EPS = 2.0 ** -7   # bfloat16's spacing relative to a value (8 significand bits)
GRAD_TOL = 0.05        # max |g - exact| / max |exact| for a bfloat16 step of this GPT

CASES = {
    "gpipe pp4": lambda jax, dtype: zp.build(jax, "gpipe", stages=4, microbatches=4, dtype=dtype),
    "1f1b pp4": lambda jax, dtype: zp.build(jax, "1f1b", stages=4, microbatches=4, dtype=dtype),
    "interleaved pp2 x2": lambda jax, dtype: zp.build(jax, "interleaved", stages=2, microbatches=2,
                                                      dtype=dtype),
    "dp2 x cp4 ring": lambda jax, dtype: zoo_parallel.build(jax, (2, 4), ("dp", "cp"),
                                                            attention="ring", dtype=dtype),
    "dp2 x cp4 all-gather": lambda jax, dtype: zoo_parallel.build(jax, (2, 4), ("dp", "cp"),
                                                                  attention="allgather", dtype=dtype),
    "dp2 x tp4 sequence parallel": lambda jax, dtype: zoo_parallel.build(jax, (2, 4), ("dp", "tp"),
                                                                         dtype=dtype),
    "fsdp2 x cp2 x tp2": lambda jax, dtype: zoo_parallel.build(jax, (2, 2, 2), ("fsdp", "cp", "tp"),
                                                               dtype=dtype),
}


def relative_error(g, exact):
    g = np.asarray(g).astype(np.float64)
    return float(np.abs(g - exact).max() / max(np.abs(exact).max(), 1e-30))


@pytest.mark.parametrize("case", list(CASES))
def test_bfloat16_step_matches_real_jax_and_numpy(case, real_jax):
    ours = CASES[case](meshsim, meshsim.numpy.bfloat16)
    theirs = CASES[case](real_jax, real_jax.numpy.bfloat16)
    assert np.asarray(ours["params"]["wte"]).dtype == np.asarray(theirs["params"]["wte"]).dtype
    (loss, grads), (t_loss, t_grads) = ours["step"](), theirs["step"]()
    exact_loss, exact_grads = gpt.numpy_loss_and_grads(
        gpt.as_numpy(ours["params"]), np.asarray(ours["tokens"]), np.asarray(ours["targets"]),
        ours["cfg"])

    assert np.asarray(loss).dtype == np.asarray(t_loss).dtype
    np.testing.assert_allclose(np.asarray(loss, np.float64), np.asarray(t_loss, np.float64),
                               rtol=2 * BF16_EPS)
    np.testing.assert_allclose(np.asarray(loss, np.float64), exact_loss, rtol=2 * BF16_EPS)
    names = [k for k, _ in gpt.flatten(exact_grads)]
    assert [k for k, _ in gpt.flatten(grads)] == names == [k for k, _ in gpt.flatten(t_grads)]
    for (k, g), (_, t), (_, exact) in zip(gpt.flatten(grads), gpt.flatten(t_grads),
                                          gpt.flatten(exact_grads)):
        assert np.asarray(g).dtype == np.asarray(t).dtype, k
        assert np.asarray(g).shape == exact.shape, k
        ours_err, jax_err = relative_error(g, exact), relative_error(t, exact)
        assert ours_err <= max(GRAD_TOL, 2 * jax_err), (k, ours_err, jax_err)
        assert relative_error(g, np.asarray(t).astype(np.float64)) <= GRAD_TOL, k


def test_bfloat16_single_device_loss_is_jaxs(real_jax):
    """The unsharded GPT with bfloat16 parameters: the same loss as JAX's
    to the last bit of its bfloat16 result."""
    model, t_model = gpt.build(meshsim), gpt.build(real_jax)
    params = gpt.init_params(meshsim, dtype=meshsim.numpy.bfloat16)
    t_params = gpt.init_params(real_jax, dtype=real_jax.numpy.bfloat16)
    loss = meshsim.jit(model["loss"])(params, *gpt.init_batch(meshsim))
    t_loss = real_jax.jit(t_model["loss"])(t_params, *gpt.init_batch(real_jax))
    assert np.asarray(loss).dtype == np.asarray(t_loss).dtype
    assert np.asarray(loss) == np.asarray(t_loss)

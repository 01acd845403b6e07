"""Pipeline parallelism of the GPT (examples/ex_zoo_pipeline.py): every
schedule's loss and gradients equal the NumPy backprop's and real JAX's, the
schedules are valid (dependencies, one op per device per tick), and the
bubble measured from the profiler's per-device timeline is GPipe's textbook
(p-1)/(m+p-1) within 10%."""
import collections
import dataclasses
import os
import sys

import numpy as np
import pytest

import meshsim

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))
import ex_zoo_pipeline as zp  # noqa: E402
import gpt  # noqa: E402

ATOL = 2e-5
SMALL = dataclasses.replace(gpt.CONFIG, layers=8)


def assert_matches_numpy(env, loss, grads):
    ref_loss, ref_grads = gpt.numpy_loss_and_grads(env["params"], env["tokens"], env["targets"],
                                                   env["cfg"])
    np.testing.assert_allclose(np.asarray(loss), ref_loss, rtol=ATOL, atol=ATOL)
    names = [k for k, _ in gpt.flatten(ref_grads)]
    assert [k for k, _ in gpt.flatten(grads)] == names
    for (k, g), (_, r) in zip(gpt.flatten(grads), gpt.flatten(ref_grads)):
        np.testing.assert_allclose(np.asarray(g), r, rtol=ATOL, atol=ATOL, err_msg=k)


@pytest.mark.parametrize("name,stages,microbatches", [
    ("gpipe", 8, 8), ("1f1b", 8, 4), ("interleaved", 4, 2), ("interleaved_1f1b", 4, 4),
    ("gpipe", 2, 1), ("1f1b", 2, 8)])
def test_loss_and_every_gradient_match_numpy(name, stages, microbatches):
    env = zp.build(meshsim, name, stages=stages, microbatches=microbatches, cfg=SMALL)
    assert_matches_numpy(env, *env["step"]())


@pytest.mark.parametrize("name,stages,microbatches,mesh_axes", [
    ("1f1b", 2, 2, (("dp", 2), ("tp", 2))),
    ("gpipe", 2, 2, (("cp", 2), ("tp", 2))),
    ("interleaved", 2, 2, (("fsdp", 2), ("cp", 2))),
    ("interleaved_1f1b", 2, 4, (("fsdp", 4),))], ids=str)
def test_stages_that_are_themselves_parallel_match_numpy(name, stages, microbatches, mesh_axes):
    """Every stage runs zoo_parallel's step on its devices: the stage's
    collectives run inside the schedule's per-device lax.switch branches."""
    env = zp.build(meshsim, name, stages=stages, microbatches=microbatches, mesh_axes=mesh_axes)
    assert env["mesh"].axis_names == ("pp", *dict(mesh_axes))
    assert_matches_numpy(env, *env["step"]())


@pytest.mark.parametrize("name", zp.SCHEDULES)
@pytest.mark.parametrize("stages,microbatches", [(4, 8), (3, 5), (8, 2)])
def test_schedules_are_valid(name, stages, microbatches):
    virtual = 2 if name.startswith("interleaved") else 1
    s = zp.schedule(name, stages, microbatches, virtual)
    chunks = stages * virtual
    when = {}
    for t in range(s.ticks):
        for d in range(stages):
            op, j, i = s.ops[t, d, :3]
            if op != zp.IDLE:
                kind = "F" if op in (zp.F_FIRST, zp.F) else "B"
                when[kind, j * stages + d, i] = t
    assert len(when) == 2 * chunks * microbatches
    for (kind, c, i), t in when.items():
        if kind == "F" and c > 0:
            assert when["F", c - 1, i] < t
        if kind == "B":
            assert when["F", c, i] < t
            if c < chunks - 1:
                assert when["B", c + 1, i] < t
    if name == "gpipe":
        assert s.ticks == 2 * (microbatches + stages - 1)
        assert s.peak_in_flight() == microbatches
    if name == "1f1b":
        assert s.peak_in_flight() <= stages


def test_gpipe_bubble_in_the_timeline_is_the_textbook_fraction():
    env = zp.build(meshsim, "gpipe", stages=4, microbatches=8, cfg=SMALL)
    measured = zp.bubble_from_timeline(env)
    textbook = (4 - 1) / (8 + 4 - 1)
    assert abs(measured - textbook) <= 0.1 * textbook, (measured, textbook)
    # Virtual stages shrink it to (p-1)/(v m + p-1).
    env = zp.build(meshsim, "interleaved", stages=4, microbatches=4, cfg=SMALL)
    measured_v = zp.bubble_from_timeline(env)
    assert abs(measured_v - 3 / 11) <= 0.1 * 3 / 11 and measured_v < measured


def test_every_tick_moves_activations_and_cotangents_around_the_ring():
    env = zp.build(meshsim, "1f1b", stages=4, microbatches=4, cfg=SMALL)
    with meshsim.debug.record_collectives() as records:
        env["step"]()
    counts = collections.Counter((r.name, r.axes) for r in records)
    ticks = env["schedule"].ticks
    assert counts[("ppermute", ("pp",))] == 2 * ticks
    act_bytes = 4 * (env["cfg"].batch // 4) * env["cfg"].seq * env["cfg"].dim
    assert all(r.bytes == act_bytes for r in records if r.name == "ppermute")
    assert counts[("psum_invariant", ("pp",))] == 5  # loss + 4 shared parameters


def test_matches_real_jax(real_jax):
    """A GPipe step over pp whose stages are tensor + sequence parallel over tp."""
    kwargs = dict(stages=2, microbatches=2, cfg=dataclasses.replace(SMALL, layers=2),
                  mesh_axes=(("tp", 2),))
    ours = zp.build(meshsim, "gpipe", **kwargs)
    theirs = zp.build(real_jax, "gpipe", **kwargs)
    loss, grads = ours["step"]()
    t_loss, t_grads = theirs["step"]()
    np.testing.assert_allclose(np.asarray(loss), np.asarray(t_loss), rtol=ATOL, atol=ATOL)
    for (k, g), (_, r) in zip(gpt.flatten(grads), gpt.flatten(t_grads)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=ATOL, atol=ATOL, err_msg=k)

"""Knowledge distillation on two meshes (the seed notebook's "Knowledge
Distillation", examples/ex_distillation.py): the teacher's tensor-parallel
forward pass on devices 0-3, the student's data-parallel SGD step on devices
4-7 with its old model donated. The printed losses must be the notebook's,
the values real JAX's and an independent NumPy implementation's (1e-5), and
with asynchronous dispatch the two meshes' programs must run at the same time
when dispatched back to back (timed by the dispatch streams)."""
import os
import sys

import numpy as np
import pytest

import meshsim

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))
import ex_distillation  # noqa: E402

ATOL = 1e-5


@pytest.fixture(scope="module")
def env():
    return ex_distillation.build(meshsim)


@pytest.fixture(scope="module")
def reference(env):
    teacher = ex_distillation.as_numpy(env["model_teacher"])
    student = ex_distillation.as_numpy(env["model_student"])
    return ex_distillation.numpy_distillation(teacher, student,
                                              np.asarray(env["batch"].inputs, np.float64))


def test_losses_as_the_notebook_prints_them(env, capsys):
    ex_distillation.distill(env, print_losses=True)
    assert capsys.readouterr().out == (
        "Loss: 1.09\nLoss: 1.01\nLoss: 0.94\nLoss: 0.88\nLoss: 0.83\n")


@pytest.mark.parametrize("loop", ["distill", "pipelined"])
def test_losses_and_student_against_numpy(env, reference, loop):
    losses, model = getattr(ex_distillation, loop)(env)[:2]
    ref_losses, ref_student = reference
    np.testing.assert_allclose([float(l) for l in losses], ref_losses, rtol=ATOL, atol=ATOL)
    for layer, (w, b) in zip(model.layers, ref_student):
        np.testing.assert_allclose(np.asarray(layer.w), w, rtol=ATOL, atol=ATOL)
        np.testing.assert_allclose(np.asarray(layer.b), b, rtol=ATOL, atol=ATOL)


def test_values_match_real_jax(env, real_jax):
    ours_losses, ours_model, ours_y = ex_distillation.distill(env)
    theirs = ex_distillation.build(real_jax)
    their_losses, their_model, their_y = ex_distillation.distill(theirs)
    np.testing.assert_allclose(np.asarray(env["batch"].inputs), np.asarray(theirs["batch"].inputs),
                               rtol=ATOL, atol=ATOL)
    np.testing.assert_allclose([float(l) for l in ours_losses], [float(l) for l in their_losses],
                               rtol=ATOL, atol=ATOL)
    np.testing.assert_allclose(np.asarray(ours_y), np.asarray(their_y), rtol=ATOL, atol=ATOL)
    for a, b in zip(ours_model.layers, their_model.layers):
        np.testing.assert_allclose(np.asarray(a.w), np.asarray(b.w), rtol=ATOL, atol=ATOL)
        np.testing.assert_allclose(np.asarray(a.b), np.asarray(b.b), rtol=ATOL, atol=ATOL)
    # Same placements as JAX: the logits on mesh_train split over dp, the student replicated.
    assert str(ours_y.sharding.spec) == str(their_y.sharding.spec)
    assert str(ours_model.layers[0].w.sharding.spec) == str(their_model.layers[0].w.sharding.spec)


def _ids(sharding):
    return sorted(d.id for d in sharding.device_set)


def test_teacher_lives_on_devices_0_to_3_student_on_4_to_7(env):
    P = meshsim.sharding.PartitionSpec
    y = env["teacher_forward"](env["model_teacher"], env["batch"].inputs)
    assert _ids(y.sharding) == [0, 1, 2, 3] and y.sharding.spec == P(None, "tp")
    losses, model, y_train = ex_distillation.distill(env, steps=1)
    assert _ids(y_train.sharding) == [4, 5, 6, 7] and y_train.sharding.spec == P("dp", None)
    for leaf in meshsim.tree.leaves(model):
        assert _ids(leaf.sharding) == [4, 5, 6, 7] and leaf.sharding.spec == P()
    assert _ids(losses[0].sharding) == [4, 5, 6, 7]


def test_the_training_step_deletes_the_model_it_is_given(env):
    model = ex_distillation.fresh_student(env)
    x = env["to_train"](env["batch"].inputs)
    y = env["to_train"](env["teacher_forward"](env["model_teacher"], env["batch"].inputs))
    new_model, loss = env["train_student_step"](model, x, y)
    assert all(leaf.is_deleted() for leaf in meshsim.tree.leaves(model))
    assert not any(leaf.is_deleted() for leaf in meshsim.tree.leaves(new_model))
    assert not x.is_deleted() and not y.is_deleted()
    with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=float32\[32,4\]\."):
        np.asarray(model.layers[0].w)
    newer, _ = env["train_student_step"](new_model, x, y)  # chained: new_model may still be pending
    assert all(leaf.is_deleted() for leaf in meshsim.tree.leaves(new_model))
    assert float(loss) == pytest.approx(1.0899696, abs=1e-6)


def _overlap(a, b):
    return a.start < b.end and b.start < a.end


def test_the_two_meshes_run_at_the_same_time_when_dispatched_back_to_back():
    # Steps long enough to see, the student's about as long as the teacher's.
    env = ex_distillation.build(meshsim, batch_size=1024, student_sizes=(32, 256, 256, 4))
    ex_distillation.pipelined(env, steps=2)  # traced
    for _ in range(3):  # a busy machine may keep one stream from starting in time
        with meshsim.debug.record_dispatches() as log:
            losses, _ = ex_distillation.pipelined(env)
        teacher = [r for r in log if r.name == "teacher_forward"]
        student = [r for r in log if r.name == "train_student_step"]
        assert len(teacher) == len(student) == ex_distillation.STEPS
        assert all(r.devices == (0, 1, 2, 3) for r in teacher)
        assert all(r.devices == (4, 5, 6, 7) for r in student)
        # Each mesh runs its own programs in call order.
        for runs in (teacher, student):
            assert all(a.end <= b.start for a, b in zip(runs, runs[1:]))
        if any(_overlap(t, s) for t in teacher for s in student):
            break
    else:
        pytest.fail("the teacher's and the student's programs never ran at the same time")
    reference = ex_distillation.distill(env)[0]
    assert [float(l) for l in losses] == [float(l) for l in reference]

"""meshsim.scipy.spatial.transform (Rotation, Slerp) against JAX's: every conversion over
random batches in float32 and float64, gimbal-lock Euler angles, composition, application,
means and interpolation, under jit, vmap and grad, and the argument errors."""
import numpy as np
import pytest

import meshsim
from meshsim.scipy.spatial.transform import Rotation, Slerp

RNG = np.random.default_rng(0)
SEQUENCES = ["xyz", "zyx", "xzy", "ZXZ", "XYX", "zxz", "YZX", "yxy", "ZYZ", "XZY"]


@pytest.fixture(scope="module")
def jt(real_jax):
    from jax.scipy.spatial import transform
    return transform


@pytest.fixture(params=["float32", "float64"])
def dtype(request, x64_with_jax):
    return np.dtype(request.param)


def close(ours, theirs, dtype, scale=1.0):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    tol = 64 * np.finfo(dtype).eps * scale
    np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)


def random_quats(dtype, batch=None):
    batch = (int(RNG.integers(1, 6)),) if batch is None else batch
    return RNG.normal(size=batch + (4,)).astype(dtype)


def test_quaternion_conversions_match_jax(jt, dtype):
    for batch in [(), (int(RNG.integers(1, 7)),), (2, 3)]:
        quat = random_quats(dtype, batch)
        ours, theirs = Rotation.from_quat(quat), jt.Rotation.from_quat(quat)
        close(ours.quat, theirs.quat, dtype)
        assert ours.single == theirs.single
        for canonical in (False, True):
            for scalar_first in (False, True):
                close(ours.as_quat(canonical, scalar_first), theirs.as_quat(canonical, scalar_first), dtype)
        close(ours.as_matrix(), theirs.as_matrix(), dtype)
        close(ours.as_rotvec(), theirs.as_rotvec(), dtype)
        close(ours.as_rotvec(degrees=True), theirs.as_rotvec(degrees=True), dtype, 100)
        close(ours.as_mrp(), theirs.as_mrp(), dtype)
        close(ours.magnitude(), theirs.magnitude(), dtype)
        close(ours.inv().quat, theirs.inv().quat, dtype)
        matrix = theirs.as_matrix()
        close(Rotation.from_matrix(matrix).quat, jt.Rotation.from_matrix(matrix).quat, dtype)
        rotvec = theirs.as_rotvec()
        close(Rotation.from_rotvec(rotvec).quat, jt.Rotation.from_rotvec(rotvec).quat, dtype)
        degrees = np.rad2deg(np.asarray(rotvec))
        close(Rotation.from_rotvec(degrees, degrees=True).quat,
              jt.Rotation.from_rotvec(degrees, degrees=True).quat, dtype)
        mrp = theirs.as_mrp()
        close(Rotation.from_mrp(mrp).quat, jt.Rotation.from_mrp(mrp).quat, dtype)


def test_small_angles_and_canonical_edges(jt, dtype):
    # rotation vectors on both sides of the series cut-off, and quaternions whose leading
    # components are zero (the canonical form looks further along)
    rotvec = RNG.normal(size=(6, 3)) * np.array([1e-5, 1e-4, 9e-4, 1.1e-3, 1.0, 3.0])[:, None]
    rotvec = rotvec.astype(dtype)
    close(Rotation.from_rotvec(rotvec).quat, jt.Rotation.from_rotvec(rotvec).quat, dtype)
    close(Rotation.from_rotvec(rotvec).as_rotvec(), jt.Rotation.from_rotvec(rotvec).as_rotvec(), dtype)
    quat = np.array([[0, 0, -1, 0], [0, -1, 1, 0], [-1, 1, 0, 0], [1, 0, 0, -0.0], [0, 0, 0, -1]], dtype)
    ours, theirs = Rotation(meshsim.numpy.asarray(quat)), jt.Rotation(quat)
    close(ours.as_quat(canonical=True), theirs.as_quat(canonical=True), dtype)
    close(ours.as_mrp(), theirs.as_mrp(), dtype)
    # the trace pivot of from_matrix for each diagonal entry and the trace
    for angles in ([3.0, 0.1, 0.2], [0.1, 3.0, 0.2], [0.2, 0.1, 3.0], [0.1, 0.2, 0.3]):
        matrix = jt.Rotation.from_rotvec(np.asarray(angles, dtype)).as_matrix()
        close(Rotation.from_matrix(matrix).quat, jt.Rotation.from_matrix(matrix).quat, dtype)


@pytest.mark.parametrize("seq", SEQUENCES)
def test_euler_angles_match_jax(jt, dtype, seq):
    quat = random_quats(dtype)
    close(Rotation.from_quat(quat).as_euler(seq), jt.Rotation.from_quat(quat).as_euler(seq), dtype)
    close(Rotation.from_quat(quat).as_euler(seq, degrees=True),
          jt.Rotation.from_quat(quat).as_euler(seq, degrees=True), dtype, 100)
    for n in (1, 2, 3):
        axes = seq[:n]
        if len(set(axes.lower())) < n and axes[0] != axes[-1]:
            continue
        angles = RNG.uniform(-3, 3, (int(RNG.integers(1, 5)), n)).astype(dtype)
        close(Rotation.from_euler(axes, angles).quat, jt.Rotation.from_euler(axes, angles).quat, dtype)
        close(Rotation.from_euler(axes, angles[0]).quat, jt.Rotation.from_euler(axes, angles[0]).quat, dtype)
        degrees = np.rad2deg(angles)
        close(Rotation.from_euler(axes, degrees, degrees=True).quat,
              jt.Rotation.from_euler(axes, degrees, degrees=True).quat, dtype)


@pytest.mark.parametrize("seq", ["xyz", "ZXZ", "zxz", "XYZ"])
def test_euler_angles_in_gimbal_lock(jt, dtype, seq):
    # middle angle 0 or +-pi/2 (Tait-Bryan) / 0 or pi (proper Euler): the outer angles merge
    symmetric = seq[0] == seq[2]
    middles = [0.0, np.pi] if symmetric else [np.pi / 2, -np.pi / 2]
    angles = np.array([[RNG.uniform(-3, 3), m, RNG.uniform(-3, 3)] for m in middles], dtype)
    quat = jt.Rotation.from_euler(seq, angles).quat
    close(Rotation(meshsim.numpy.asarray(quat)).as_euler(seq), jt.Rotation(quat).as_euler(seq), dtype)
    identity = np.array([0, 0, 0, 1], dtype)
    close(Rotation(meshsim.numpy.asarray(identity)).as_euler(seq), jt.Rotation(identity).as_euler(seq), dtype)


def test_composition_application_and_mean(jt, dtype):
    n = int(RNG.integers(2, 6))
    p, q = random_quats(dtype, (n,)), random_quats(dtype, (n,))
    ours_p, ours_q = Rotation.from_quat(p), Rotation.from_quat(q)
    theirs_p, theirs_q = jt.Rotation.from_quat(p), jt.Rotation.from_quat(q)
    close((ours_p * ours_q).quat, (theirs_p * theirs_q).quat, dtype)
    close((ours_p[0] * ours_q).quat, (theirs_p[0] * theirs_q).quat, dtype)
    vectors = RNG.normal(size=(n, 3)).astype(dtype)
    for inverse in (False, True):
        close(ours_p.apply(vectors, inverse), theirs_p.apply(vectors, inverse), dtype)
        close(ours_p.apply(vectors[0], inverse), theirs_p.apply(vectors[0], inverse), dtype)
        close(ours_p[1].apply(vectors, inverse), theirs_p[1].apply(vectors, inverse), dtype)
    # the mean is an eigenvector: defined up to sign, so compare the rotation it stands for
    weights = RNG.uniform(0.1, 2.0, n).astype(dtype)
    close(ours_p.mean().as_matrix(), theirs_p.mean().as_matrix(), dtype, 10)
    close(ours_p.mean(weights).as_matrix(), theirs_p.mean(weights).as_matrix(), dtype, 10)
    both = Rotation.concatenate([ours_p, ours_q])
    close(both.quat, jt.Rotation.concatenate([theirs_p, theirs_q]).quat, dtype)
    assert len(both) == 2 * n and both[1:3].quat.shape == (2, 4)
    close(Rotation.identity(dtype=dtype).quat, jt.Rotation.identity(dtype=dtype).quat, dtype)


def test_slerp_matches_jax(jt, dtype):
    n = int(RNG.integers(2, 6))
    quat = random_quats(dtype, (n,))
    times = np.cumsum(RNG.uniform(0.2, 2.0, n)).astype(dtype)
    ours = Slerp.init(times, Rotation.from_quat(quat))
    theirs = jt.Slerp.init(times, jt.Rotation.from_quat(quat))
    for name in ("times", "timedelta", "rotvecs"):
        close(getattr(ours, name), getattr(theirs, name), dtype)
    at = np.concatenate([times, RNG.uniform(times[0] - 1, times[-1] + 1, 7)]).astype(dtype)
    close(ours(at).quat, theirs(at).quat, dtype, 10)
    close(ours(at[3]).quat, theirs(at[3]).quat, dtype, 10)
    close(ours(float(at[4])).quat, theirs(float(at[4])).quat, dtype, 10)


def test_transformations(jt, real_jax):
    quat = random_quats(np.float32, (4,))
    vectors = RNG.normal(size=(4, 3)).astype(np.float32)

    def angles(rotation_type, q, v):
        rotation = rotation_type.from_quat(q)
        return (rotation.as_euler("zyx").sum() + rotation.apply(v).sum()
                + rotation.as_rotvec().sum() + rotation.inv().as_mrp().sum())

    ours = meshsim.grad(lambda q, v: angles(Rotation, q, v), argnums=(0, 1))(quat, vectors)
    theirs = real_jax.grad(lambda q, v: angles(jt.Rotation, q, v), argnums=(0, 1))(quat, vectors)
    for a, b in zip(ours, theirs):
        close(a, b, np.float32, 4)
    close(meshsim.jit(lambda q: Rotation.from_quat(q).as_euler("ZXZ"))(quat),
          jt.Rotation.from_quat(quat).as_euler("ZXZ"), np.float32)
    # a Rotation is a pytree: it crosses jit and vmap
    rotated = meshsim.jit(lambda r, v: r.apply(v))(Rotation.from_quat(quat), vectors)
    close(rotated, jt.Rotation.from_quat(quat).apply(vectors), np.float32)
    mapped = meshsim.vmap(lambda q: Rotation.from_quat(q).as_matrix())(quat)
    close(mapped, jt.Rotation.from_quat(quat).as_matrix(), np.float32)
    out = meshsim.jit(lambda q: Rotation.from_quat(q).inv())(quat)
    assert isinstance(out, Rotation)
    slerp = Slerp.init([0.0, 1.0, 3.0, 4.0], Rotation.from_quat(quat))
    close(meshsim.jit(lambda s, t: s(t).quat)(slerp, np.float32([0.5, 2.5])),
          jt.Slerp.init([0.0, 1.0, 3.0, 4.0], jt.Rotation.from_quat(quat))(np.float32([0.5, 2.5])).quat,
          np.float32, 10)


def test_integer_inputs_give_jax_dtypes(jt):
    for ours, theirs in [
        (Rotation.from_euler("zxy", np.array([[90, 0, 0], [0, 45, 0]]), degrees=True),
         jt.Rotation.from_euler("zxy", np.array([[90, 0, 0], [0, 45, 0]]), degrees=True)),
        (Rotation.from_quat([0, 0, 1, 1]), jt.Rotation.from_quat([0, 0, 1, 1])),
        (Rotation.from_rotvec([0, 1, 0]), jt.Rotation.from_rotvec([0, 1, 0])),
        (Rotation.from_mrp([0, 1, 0]), jt.Rotation.from_mrp([0, 1, 0])),
        (Rotation.identity(), jt.Rotation.identity()),
    ]:
        close(ours.quat, theirs.quat, np.float32)


def errors(call):
    with pytest.raises(Exception) as info:
        call()
    return type(info.value), str(info.value)


@pytest.mark.parametrize("case", [
    lambda t: t.Rotation.from_euler("xyzx", [1.0, 2.0, 3.0, 4.0]),
    lambda t: t.Rotation.from_euler("", []),
    lambda t: t.Rotation.from_euler("xYz", [1.0, 2.0, 3.0]),
    lambda t: t.Rotation.from_euler("xxz", [1.0, 2.0, 3.0]),
    lambda t: t.Rotation.from_euler("xwz", [1.0, 2.0, 3.0]),
    lambda t: t.Rotation.identity().as_euler("xy"),
    lambda t: t.Rotation.identity().as_euler("XyZ"),
    lambda t: t.Rotation.identity().as_euler("zzy"),
    lambda t: t.Rotation.identity()[0],
    lambda t: len(t.Rotation.identity()),
    lambda t: t.Rotation.from_quat(np.ones((3, 4))).mean(np.ones(2)),
    lambda t: t.Rotation.from_quat(np.ones((3, 4))).mean(np.ones((3, 1))),
    lambda t: t.Rotation.random(None),
    lambda t: t.Slerp.init([0, 1], t.Rotation.identity()),
    lambda t: t.Slerp.init([0, 1], t.Rotation.from_quat(np.ones((1, 4)))),
    lambda t: t.Slerp.init([0, 1], np.ones((2, 4))),
    lambda t: t.Slerp.init([[0, 1]], t.Rotation.from_quat(np.ones((2, 4)))),
    lambda t: t.Slerp.init([0, 1, 2], t.Rotation.from_quat(np.ones((2, 4)))),
    lambda t: t.Slerp.init([0, 1], t.Rotation.from_quat(np.ones((2, 4))))(np.zeros((2, 2))),
])
def test_errors_match_jax(jt, case):
    from meshsim.scipy.spatial import transform
    assert errors(lambda: case(transform)) == errors(lambda: case(jt))

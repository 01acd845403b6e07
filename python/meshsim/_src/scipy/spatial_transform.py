"""`jax.scipy.spatial.transform`: 3-D rotations held as unit quaternions (x, y, z, w) in the
last axis of one array, and spherical linear interpolation between them.

Every conversion works on the whole batch at once: the quaternion components are read as
`q[..., n]` and the results stacked back, so any number of leading dimensions broadcast the
way `jnp.vectorize` would broadcast them. Axis sequences are Python strings, so which
components an Euler conversion reads is decided here, not traced."""
from __future__ import annotations

import re
import typing

import numpy as np

from meshsim._src.numpy import decompositions
from meshsim._src.numpy import namespace as jnp

__all__ = ["Rotation", "Slerp"]

_AXIS_INDEX = {"x": 0, "y": 1, "z": 2}
# |angle| below which the rotation-vector scale uses its Taylor series: sin(t/2)/t loses
# its digits there.
_SMALL_ANGLE = 1e-3
# Middle Euler angle this close to 0 or pi: the first and third axes coincide (gimbal lock).
_GIMBAL_EPS = 1e-7


def _euler_axes(seq: str, exactly_three: bool) -> tuple[list[int], bool]:
    """The axis indices of `seq` and whether they are extrinsic (lower case)."""
    if exactly_three and len(seq) != 3:
        raise ValueError(f"Expected 3 axes, got {seq}.")
    if not 1 <= len(seq) <= 3:
        raise ValueError("Expected axis specification to be a non-empty "
                         f"string of upto 3 characters, got {seq}")
    extrinsic = re.fullmatch(r"[xyz]{1,3}", seq) is not None
    if not extrinsic and re.fullmatch(r"[XYZ]{1,3}", seq) is None:
        raise ValueError("Expected axes from `seq` to be from ['x', 'y', "
                         f"'z'] or ['X', 'Y', 'Z'], got {seq}")
    if any(a == b for a, b in zip(seq, seq[1:])):
        raise ValueError(f"Expected consecutive axes to be different, got {seq}")
    return [_AXIS_INDEX[c] for c in seq.lower()], extrinsic


def _norm(v):
    return jnp.sqrt(jnp.sum(v * v, axis=-1))


def _normalized(quat):
    return quat / _norm(quat)[..., None]


def _product(p, q):
    """The quaternion p * q (apply q, then p)."""
    pv, qv = p[..., :3], q[..., :3]
    pw, qw = p[..., 3:], q[..., 3:]
    vector = pw * qv + qw * pv + jnp.cross(pv, qv)
    scalar = pw * qw - jnp.sum(pv * qv, axis=-1, keepdims=True)
    return jnp.concatenate([vector, scalar], axis=-1)


def _axis_quat(axis: int, angle):
    """Rotations by `angle` about one coordinate axis."""
    half = angle / 2
    parts = [jnp.zeros_like(angle)] * 3 + [jnp.cos(half)]
    parts[axis] = jnp.sin(half)
    return jnp.stack(parts, axis=-1)


def _matrix_to_quat(m):
    """Builds the quaternion from the largest of the diagonal entries and the trace (as
    Shepperd's method does), which keeps the division well away from zero."""
    trace = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    candidates = []
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        parts = [None] * 4
        parts[i] = 1 - trace + 2 * m[..., i, i]
        parts[j] = m[..., j, i] + m[..., i, j]
        parts[k] = m[..., k, i] + m[..., i, k]
        parts[3] = m[..., k, j] - m[..., j, k]
        candidates.append(jnp.stack(parts, axis=-1))
    candidates.append(jnp.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                                 m[..., 1, 0] - m[..., 0, 1], 1 + trace], axis=-1))
    pivot = jnp.argmax(jnp.stack([m[..., 0, 0], m[..., 1, 1], m[..., 2, 2], trace], axis=-1), axis=-1)
    chosen = jnp.take_along_axis(jnp.stack(candidates, axis=-2), pivot[..., None, None], axis=-2)
    return _normalized(chosen[..., 0, :])


def _rotvec_to_quat(rotvec):
    angle = _norm(rotvec)
    angle2 = angle * angle
    series = 0.5 - angle2 / 48 + angle2 * angle2 / 3840
    scale = jnp.where(angle <= _SMALL_ANGLE, series, jnp.sin(angle / 2) / angle)
    return jnp.concatenate([scale[..., None] * rotvec, jnp.cos(angle / 2)[..., None]], axis=-1)


def _quat_to_rotvec(quat):
    quat = jnp.where(quat[..., 3:] < 0, -quat, quat)  # w >= 0 keeps the angle in [0, pi]
    angle = 2 * jnp.arctan2(_norm(quat[..., :3]), quat[..., 3])
    angle2 = angle * angle
    series = 2 + angle2 / 12 + 7 * angle2 * angle2 / 2880
    scale = jnp.where(angle <= _SMALL_ANGLE, series, angle / jnp.sin(angle / 2))
    return scale[..., None] * quat[..., :3]


def _quat_to_euler(quat, axes: list[int], extrinsic: bool):
    """Euler angles by the quaternion method of Bernardes and Viollet (2022): the middle
    angle from the magnitudes of two component pairs, the outer two from their phases."""
    i, j, k = axes if extrinsic else axes[::-1]
    symmetric = i == k
    if symmetric:
        k = 3 - i - j
    sign = (i - j) * (j - k) * (k - i) // 2
    w = quat[..., 3]
    if symmetric:
        a, b, c, d = w, quat[..., i], quat[..., j], quat[..., k] * sign
    else:
        a, b = w - quat[..., j], quat[..., i] + quat[..., k] * sign
        c, d = quat[..., j] + w, quat[..., k] * sign - quat[..., i]
    middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
    half_sum, half_diff = jnp.arctan2(b, a), jnp.arctan2(d, c)
    # In gimbal lock the whole turn goes to the first angle and the third is zero.
    at_zero = jnp.abs(middle) <= _GIMBAL_EPS
    locked = at_zero | (jnp.abs(middle - np.pi) <= _GIMBAL_EPS)
    locked_first = jnp.where(at_zero, 2 * half_sum, 2 * half_diff * (-1 if extrinsic else 1))
    first, third = half_sum - half_diff, half_sum + half_diff
    if not extrinsic:
        first, third = third, first
    first = jnp.where(locked, locked_first, first)
    third = jnp.where(locked, jnp.zeros_like(third), third)
    if not symmetric:
        middle = middle - np.pi / 2
        if extrinsic:
            third = third * sign
        else:
            first = first * sign
    angles = jnp.stack([first, middle, third], axis=-1)
    return (angles + np.pi) % (2 * np.pi) - np.pi


def _canonical(quat):
    """Negates each quaternion whose first nonzero component of (w, x, y, z) is negative."""
    negate = jnp.zeros(quat.shape[:-1], dtype=bool)
    undecided = jnp.ones(quat.shape[:-1], dtype=bool)
    for n in (3, 0, 1, 2):
        negate = negate | (undecided & (quat[..., n] < 0))
        undecided = undecided & (quat[..., n] == 0)
    return jnp.where(negate[..., None], -quat, quat)


def _inexact(x):
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(jnp.result_type(x, float))


class Rotation(typing.NamedTuple):
    """Rotations in three dimensions, as `scipy.spatial.transform.Rotation`: one rotation
    when `quat` has shape (4,), a stack of them when it has leading dimensions."""
    quat: typing.Any

    @classmethod
    def concatenate(cls, rotations: typing.Sequence):
        """One object holding all rotations of the sequence, in order."""
        return cls(jnp.concatenate([r.quat for r in rotations]))

    @classmethod
    def from_euler(cls, seq: str, angles, degrees: bool = False):
        """Rotations composed of turns about the axes of `seq`: lower case about the fixed
        frame (extrinsic), upper case about the rotating one (intrinsic)."""
        axes, extrinsic = _euler_axes(seq, exactly_three=False)
        angles = _inexact(jnp.atleast_1d(angles))
        if degrees:
            angles = jnp.deg2rad(angles)
        if angles.shape[-1] != len(axes):
            raise ValueError(f"Expected angles of shape (..., {len(axes)}) for seq={seq!r}, "
                             f"got {angles.shape}")
        quat = _axis_quat(axes[0], angles[..., 0])
        for n in range(1, len(axes)):
            turn = _axis_quat(axes[n], angles[..., n])
            quat = _product(turn, quat) if extrinsic else _product(quat, turn)
        return cls(quat)

    @classmethod
    def from_matrix(cls, matrix):
        """Rotations from 3x3 rotation matrices."""
        return cls(_matrix_to_quat(_inexact(matrix)))

    @classmethod
    def from_mrp(cls, mrp):
        """Rotations from Modified Rodrigues Parameters."""
        mrp = _inexact(mrp)
        denominator = jnp.sum(mrp * mrp, axis=-1, keepdims=True) + 1
        return cls(jnp.concatenate([2 * mrp, 2 - denominator], axis=-1) / denominator)

    @classmethod
    def from_quat(cls, quat):
        """Rotations from (x, y, z, w) quaternions, normalized to unit length."""
        return cls(_normalized(_inexact(quat)))

    @classmethod
    def from_rotvec(cls, rotvec, degrees: bool = False):
        """Rotations from rotation vectors (axis times angle)."""
        rotvec = _inexact(rotvec)
        return cls(_rotvec_to_quat(jnp.deg2rad(rotvec) if degrees else rotvec))

    @classmethod
    def identity(cls, num: int | None = None, dtype=float):
        """The identity rotation (only a single one: `num` must be None)."""
        assert num is None
        return cls(jnp.array([0.0, 0.0, 0.0, 1.0], dtype=dtype))

    @classmethod
    def random(cls, random_key, num: int | None = None):
        """Not available, as in JAX."""
        raise NotImplementedError()

    @property
    def single(self) -> bool:
        """Whether this object holds one rotation rather than a stack."""
        return self.quat.ndim == 1

    def __len__(self):
        if self.single:
            raise TypeError("Single rotation has no len().")
        return self.quat.shape[0]

    def __getitem__(self, indexer):
        if self.single:
            raise TypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[indexer])

    def __mul__(self, other) -> Rotation:
        """The composition: `other` applied first, then this rotation."""
        return Rotation.from_quat(_product(self.quat, other.quat))

    def apply(self, vectors, inverse: bool = False):
        """The vectors rotated (by the inverse rotation when `inverse`)."""
        matrix = self.as_matrix()
        if inverse:
            matrix = jnp.swapaxes(matrix, -1, -2)
        return jnp.matmul(matrix, jnp.asarray(vectors)[..., None])[..., 0]

    def as_euler(self, seq: str, degrees: bool = False):
        """Euler angles for the axes of `seq` (three of them), each in [-pi, pi)."""
        axes, extrinsic = _euler_axes(seq, exactly_three=True)
        angles = _quat_to_euler(self.quat, axes, extrinsic)
        return jnp.rad2deg(angles) if degrees else angles

    def as_matrix(self):
        """3x3 rotation matrices."""
        x, y, z, w = (self.quat[..., n] for n in range(4))
        xx, yy, zz, ww = x * x, y * y, z * z, w * w
        xy, xz, yz, xw, yw, zw = x * y, x * z, y * z, x * w, y * w, z * w
        rows = [[xx - yy - zz + ww, 2 * (xy - zw), 2 * (xz + yw)],
                [2 * (xy + zw), -xx + yy - zz + ww, 2 * (yz - xw)],
                [2 * (xz - yw), 2 * (yz + xw), -xx - yy + zz + ww]]
        return jnp.stack([jnp.stack(row, axis=-1) for row in rows], axis=-2)

    def as_mrp(self):
        """Modified Rodrigues Parameters (of the quaternion with w >= 0)."""
        sign = jnp.where(self.quat[..., 3:] < 0, -1.0, 1.0).astype(self.quat.dtype)
        return sign * self.quat[..., :3] / (1 + sign * self.quat[..., 3:])

    def as_quat(self, canonical: bool = False, scalar_first: bool = False):
        """The quaternions, (x, y, z, w) or with `scalar_first` (w, x, y, z); `canonical`
        picks of q and -q the one whose first nonzero of (w, x, y, z) is positive."""
        quat = _canonical(self.quat) if canonical else self.quat
        return jnp.roll(quat, 1, axis=-1) if scalar_first else quat

    def as_rotvec(self, degrees: bool = False):
        """Rotation vectors: the axis scaled by the angle, in [0, pi]."""
        rotvec = _quat_to_rotvec(self.quat)
        return jnp.rad2deg(rotvec) if degrees else rotvec

    def inv(self):
        """The inverse rotations (the conjugate quaternions)."""
        return Rotation(jnp.concatenate([-self.quat[..., :3], self.quat[..., 3:]], axis=-1))

    def magnitude(self):
        """The rotation angles, in [0, pi]."""
        return 2 * jnp.arctan2(_norm(self.quat[..., :3]), jnp.abs(self.quat[..., 3]))

    def mean(self, weights=None):
        """The (weighted) mean rotation: the quaternion maximizing the weighted sum of its
        squared dot products with the rotations, the top eigenvector of their scatter."""
        quat = self.quat
        w = jnp.ones(quat.shape[0], dtype=quat.dtype) if weights is None else jnp.asarray(weights, dtype=quat.dtype)
        if w.ndim != 1:
            raise ValueError(f"Expected `weights` to be 1 dimensional, got shape {w.shape}.")
        if w.shape[0] != len(self):
            raise ValueError("Expected `weights` to have number of values equal to number of "
                             f"rotations, got {w.shape[0]} values and {len(self)} rotations.")
        _, vectors = decompositions.eigh(jnp.matmul((w[:, None] * quat).T, quat))
        return Rotation(vectors[:, -1])


class Slerp(typing.NamedTuple):
    """Spherical linear interpolation between key rotations at increasing key times, as
    `scipy.spatial.transform.Slerp`; build it with `Slerp.init(times, rotations)`."""
    times: typing.Any
    timedelta: typing.Any
    rotations: Rotation
    rotvecs: typing.Any

    @classmethod
    def init(cls, times, rotations: Rotation):
        """Keeps each interval's start rotation and the rotation vector leading to its end."""
        if not isinstance(rotations, Rotation):
            raise TypeError("`rotations` must be a `Rotation` instance.")
        if rotations.single or len(rotations) == 1:
            raise ValueError("`rotations` must be a sequence of at least 2 rotations.")
        times = jnp.asarray(times, dtype=rotations.quat.dtype)
        if times.ndim != 1:
            raise ValueError("Expected times to be specified in a 1 dimensional array, "
                             f"got {times.ndim} dimensions.")
        if times.shape[0] != len(rotations):
            raise ValueError("Expected number of rotations to be equal to number of timestamps "
                             f"given, got {len(rotations)} rotations and {times.shape[0]} timestamps.")
        starts = Rotation(rotations.quat[:-1])
        steps = starts.inv() * Rotation(rotations.quat[1:])
        return cls(times=times, timedelta=jnp.diff(times), rotations=starts, rotvecs=steps.as_rotvec())

    def __call__(self, times):
        """The interpolated rotations at `times` (one rotation for a scalar time); times
        outside the key times extrapolate the first or last interval."""
        at = jnp.asarray(times, dtype=self.times.dtype)
        if at.ndim > 1:
            raise ValueError("`times` must be at most 1-dimensional.")
        single = at.ndim == 0
        at = jnp.atleast_1d(at)
        interval = jnp.maximum(jnp.searchsorted(self.times, at) - 1, 0)
        fraction = (at - self.times[interval]) / self.timedelta[interval]
        result = self.rotations[interval] * Rotation.from_rotvec(self.rotvecs[interval] * fraction[:, None])
        return result[0] if single else result

"""Placement round trips, property-tested against the installed JAX: an array moved by
device_put between random meshes (1-3 axes, Explicit or Auto, different device counts) and
random specs (several axes on one dim, in either order), and made unreduced over a free
Explicit axis then reduced again by reshard, comes back with its exact values, and every
step has JAX's type, sharding and blocks (which device holds which index range)."""
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import meshsim

NAMES = ("a", "b", "c")


@st.composite
def _meshes(draw):
    sizes = tuple(draw(st.lists(st.sampled_from([2, 4]), min_size=1, max_size=3)
                       .filter(lambda s: np.prod(s) <= 8)))
    explicit = tuple(draw(st.lists(st.booleans(), min_size=len(sizes), max_size=len(sizes))))
    return sizes, explicit


@st.composite
def _specs(draw, mesh, ndim):
    """Per dim, the mesh axes it is split over (each axis at most once, any order)."""
    sizes, _ = mesh
    names = list(NAMES[: len(sizes)])
    dims = [draw(st.integers(-1, ndim - 1)) for _ in names]  # -1: not split
    order = draw(st.permutations(names))
    return tuple(tuple(a for a in order if dims[names.index(a)] == d) for d in range(ndim))


@st.composite
def _trips(draw):
    ndim = draw(st.integers(1, 3))
    first, second = draw(_meshes()), draw(_meshes())
    spec_a = draw(_specs(first, ndim))
    spec_b = draw(_specs(second, ndim))
    used = {a for entry in spec_a for a in entry}
    free_explicit = [n for n, e in zip(NAMES, first[1]) if e and n not in used]
    pending = draw(st.sampled_from([None, *free_explicit])) if free_explicit else None
    return ndim, first, spec_a, second, spec_b, pending


def _mesh(lib, mesh):
    sizes, explicit = mesh
    t = lib.sharding.AxisType
    devices = np.array(lib.devices()[: int(np.prod(sizes))]).reshape(sizes)
    return lib.sharding.Mesh(devices, NAMES[: len(sizes)],
                             axis_types=tuple(t.Explicit if e else t.Auto for e in explicit))


def _pspec(lib, spec, **pending):
    return lib.P(*[None if not e else e[0] if len(e) == 1 else e for e in spec], **pending)


def _blocks(x):
    """Which device holds which index range (JAX's addressable shards, sorted by device)."""
    return sorted((s.device.id, tuple((i.start, i.stop) for i in s.index)) for s in x.addressable_shards)


def _trip(lib, value, ndim, first, spec_a, second, spec_b, pending):
    """Each step's (type, spec, blocks) and the values that come back."""
    m1, m2 = _mesh(lib, first), _mesh(lib, second)
    seen, values = [], []

    def note(x):
        seen.append((str(lib.typeof(x)), repr(x.sharding.spec), _blocks(x)))

    a = lib.device_put(value, lib.sharding.NamedSharding(m1, _pspec(lib, spec_a)))
    note(a)
    b = lib.device_put(a, lib.sharding.NamedSharding(m2, _pspec(lib, spec_b)))
    note(b)
    back = lib.device_put(b, lib.sharding.NamedSharding(m1, _pspec(lib, spec_a)))
    note(back)
    values.append(np.asarray(back))
    if pending is not None:
        with lib.set_mesh(m1):
            u = lib.reshard(back, _pspec(lib, spec_a, unreduced={pending}))
            seen.append((str(lib.typeof(u)), repr(u.sharding.spec)))
            r = lib.reshard(u, _pspec(lib, spec_a))
            note(r)
            values.append(np.asarray(r))
    return seen, values


@settings(max_examples=50, deadline=None)
@given(_trips())
def test_device_put_round_trips_as_jax(real_jax, trip):
    ndim = trip[0]
    shape = tuple([8, 16, 8][:ndim])
    seed = zlib.crc32(repr(trip).encode())
    value = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    ours_seen, ours_values = _trip(meshsim, value, *trip)
    theirs_seen, theirs_values = _trip(real_jax, value, *trip)
    for v in ours_values:
        np.testing.assert_array_equal(v, value)  # moves and pending sums of one term are exact
    for v in theirs_values:
        np.testing.assert_array_equal(v, value)
    assert ours_seen == theirs_seen


@pytest.mark.parametrize("spec", [(("a", "b"), ()), (("b", "a"), ()), ((), ("b",)), (("a",), ("b",))],
                         ids=str)
def test_placements_of_moved_arrays_round_trip(spec):
    """DTensor's view of an array after a move names its layout, and from_placements gives
    the sharding it came from (several axes on one dim in both orders; Partial('sum'))."""
    from meshsim.sharding import from_placements, placements
    explicit = (meshsim.sharding.AxisType.Explicit,) * 2
    mesh = meshsim.make_mesh((2, 4), ("a", "b"), axis_types=explicit)
    with meshsim.set_mesh(mesh):
        x = meshsim.device_put(np.arange(64.0, dtype=np.float32).reshape(8, 8), _pspec(meshsim, spec))
        used = {a for e in spec for a in e}
        for pending in [None] + [a for a in ("a", "b") if a not in used]:
            y = x if pending is None else meshsim.reshard(x, _pspec(meshsim, spec, unreduced={pending}))
            back = from_placements(mesh, placements(y), y.ndim)
            assert back.spec.unreduced == y.sharding.spec.unreduced
            z = meshsim.reshard(y, back)
            assert placements(z) == placements(y)
            np.testing.assert_array_equal(np.asarray(meshsim.reshard(z, _pspec(meshsim, spec))), np.asarray(x))

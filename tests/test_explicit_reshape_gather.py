"""Explicit reshapes whose `out_sharding` is the reshape of a coarser operand layout (each dim
keeping a major part of its axes): XLA's partitioner gathers the operand to that layout once and
reshapes each block, where reshaping the blocks first and gathering the result would take one
all-gather per result dim (`(16,)` over `('tp', 'dp')` to `(2, 8)` with `out_sharding=P()`:
one all-gather of 56 bytes, not 24 then 32). meshsim's collectives must be XLA's."""
import numpy as np
import pytest

from auto_oracle import assert_like_jax
from auto_random_programs import MESHES, random_spec


def _reshape_case(seed):
    """(mesh shape, axis names, shape, new shape, operand spec, coarser layout of it): a dim split
    in two or two dims merged, the operand spread over the mesh at random, the coarser layout
    the operand's with a random minor part of some dims' axes dropped."""
    rng = np.random.default_rng(seed)
    mesh_shape, names = MESHES[1 + rng.integers(len(MESHES) - 1)]
    shape = [int(rng.choice((2, 4, 8, 16))) for _ in range(int(rng.integers(1, 4)))]
    if len(shape) > 1 and rng.random() < 0.4:
        d = int(rng.integers(len(shape) - 1))
        new_shape = shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2:]
    else:
        d = int(rng.integers(len(shape)))
        shape[d] = max(shape[d], 16)
        major = int(rng.choice([k for k in (2, 4, 8) if k < shape[d]]))
        new_shape = shape[:d] + [major, shape[d] // major] + shape[d + 1:]
    spec = random_spec(rng, shape, mesh_shape, names)
    coarser = []
    for entry in spec:
        axes = () if entry is None else (entry,) if isinstance(entry, str) else entry
        axes = axes[:int(rng.integers(len(axes) + 1))]
        coarser.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    return mesh_shape, names, tuple(shape), tuple(new_shape), spec, tuple(coarser)


def _target(case):
    """JAX's type of the reshape of the coarser layout: the `out_sharding` to ask for (None when
    JAX's rule gives that layout no reshape, or it asks for no gather)."""
    import jax
    mesh_shape, names, shape, new_shape, spec, coarser = case
    if tuple(coarser) == tuple(e for e in spec) + (None,) * (len(coarser) - len(spec)):
        return None
    mesh = jax.make_mesh(mesh_shape, names, axis_types=(jax.sharding.AxisType.Explicit,) * len(names))
    P = jax.sharding.PartitionSpec

    def reshaped(from_shape, to_shape, spec):
        with jax.set_mesh(mesh):
            return tuple(jax.eval_shape(
                lambda a: a.reshape(to_shape),
                jax.ShapeDtypeStruct(from_shape, np.float32,
                                     sharding=jax.sharding.NamedSharding(mesh, P(*spec)))).sharding.spec)
    try:
        target = reshaped(shape, new_shape, coarser)
        back = reshaped(new_shape, shape, target)
    except Exception:  # JAX's rule has no layout for it
        return None
    # only layouts that JAX's rule maps to each other both ways (a merge whose major dims are
    # split into blocks of more than one element maps back to another layout)
    return target if back == tuple(coarser) + (None,) * (len(shape) - len(coarser)) else None


def _cases(count):
    found, seed = [], 0
    while len(found) < count:
        case = _reshape_case(seed)
        target = _target(case)
        if target is not None:
            found.append((seed, case, target))
        seed += 1
    return found


CASES = _cases(24)


def _run(case, target):
    mesh_shape, names, shape, new_shape, spec, _ = case

    def run(runner, mod):
        mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Explicit,) * len(names))
        P = mod.sharding.PartitionSpec
        x = mod.device_put(np.random.default_rng(3).standard_normal(shape).astype(np.float32),
                           mod.sharding.NamedSharding(mesh, P(*spec)))
        with mod.set_mesh(mesh):
            return runner(mod, lambda a: mod.numpy.reshape(a, new_shape, out_sharding=P(*target)), [x])
    return run


def test_split_gathered_once_before_the_reshape():
    def run(runner, mod):
        mesh = mod.make_mesh((2, 4), ("tp", "dp"), axis_types=(mod.sharding.AxisType.Explicit,) * 2)
        P = mod.sharding.PartitionSpec
        x = mod.device_put(np.arange(16, dtype=np.float32), mod.sharding.NamedSharding(mesh, P(("tp", "dp"))))
        with mod.set_mesh(mesh):
            return runner(mod, lambda a: mod.numpy.reshape(a, (2, 8), out_sharding=P()), [x])
    assert dict(assert_like_jax(run)) == {("all-gather", ("tp", "dp"), 56): 1}


@pytest.mark.parametrize("seed,case,target", CASES, ids=[str(s) for s, _, _ in CASES])
def test_random_reshape_to_a_coarser_layout(seed, case, target):
    assert_like_jax(_run(case, target))

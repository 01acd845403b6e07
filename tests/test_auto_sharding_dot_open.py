"""Contractions of a value the program computes (its layout open to propagation) with an
argument split along the contracted dim: Shardy gives the open operand the argument's axes
on that dim before XLA's partitioner weighs any move, so each device contracts its blocks
and the partial results are all-reduced, where gathering the argument would be chosen
between arguments laid out so. Random shapes, meshes and layouts against the collectives
of XLA's compiled program."""
import numpy as np
import pytest

from auto_oracle import assert_like_jax

MESHES = [((2, 4), ("X", "Y")), ((4, 2), ("X", "Y")), ((2, 2, 2), ("X", "Y", "Z"))]


def _case(seed):
    rng = np.random.default_rng(seed)
    mesh_shape, names = MESHES[int(rng.integers(len(MESHES)))]
    m, k, n = (int(rng.choice([4, 8, 16])) for _ in range(3))
    axes = [str(a) for a in rng.permutation(names)]
    x_spec = (axes[0] if rng.random() < 0.7 else None, None)
    w_spec = (axes[1], axes[2] if len(axes) > 2 and rng.random() < 0.4 else None)
    computed = int(rng.integers(2))  # which operand the program computes
    return mesh_shape, names, [(m, k), (k, n)], [x_spec, w_spec], computed


CASES = [_case(seed) for seed in range(20)]


def _run(runner, mod, case):
    mesh_shape, names, shapes, specs, computed = case
    mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
    rng = np.random.default_rng(0)
    args = [mod.device_put(rng.standard_normal(s).astype(np.float32),
                           mod.sharding.NamedSharding(mesh, mod.sharding.PartitionSpec(*sp)))
            for s, sp in zip(shapes, specs)]
    if computed == 0:
        def fun(x, w):
            return mod.numpy.tanh(x) @ w
    else:
        def fun(x, w):
            return x @ mod.numpy.tanh(w)
    with mod.set_mesh(mesh):
        return runner(mod, fun, args)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}-computed{c[4]}" for c in CASES])
def test_contraction_with_computed_operand_as_xla(case):
    assert_like_jax(lambda runner, mod: _run(runner, mod, case), rtol=2e-5, atol=2e-5)


def test_cases_include_partial_results():
    """Some cases all-reduce partial results of a computed operand in XLA's program."""
    import jax
    from auto_oracle import run_jax
    reduced = [c for c in CASES if c[4] == 0
               and any(k[0] == "all-reduce" for k in _run(run_jax, jax, c)[1])]
    assert len(reduced) >= 3

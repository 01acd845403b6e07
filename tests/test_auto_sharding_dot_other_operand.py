"""A matmul whose result is split only along free dims of one operand, laid out there as that
operand has them: XLA's partitioner groups the devices by those axes and computes within each
group, so the other operand, when it is split over the groups' axes too, must first be brought
to every group. When it leaves no mesh axis unused it takes the first operand's layout of the
contracted dim (all-gathered whole, then sliced), and the contraction stays split as that
operand has it (an all-reduce of the results); when one of its dims holds exactly the groups'
axes and it leaves as many devices' worth of axes unused, that dim takes the unused axes (a
collective-permute), and the contraction is split when both operands then split it alike.
When the first operand does not split the contraction, the other is gathered whole. An
other operand moved so and used whole is then gathered within each group, one all-gather per
dim, the minor dim first. Random shapes and axis roles on 2x2x2 against the collectives of
XLA's compiled program."""
import numpy as np
import pytest

from auto_oracle import assert_like_jax, placed_on_auto_mesh

NAMES = ("X", "Y", "Z")
VARIANTS = ("other_uses_every_axis", "other_swaps_group_axes", "first_keeps_contraction_whole")


def _case(seed):
    """(variant, shapes, specs) of `x @ w`: the result is split over the group axis `g` along
    x's free dim (or, in the last variant, along w's)."""
    rng = np.random.default_rng(700 + seed)
    g, a, b = (str(n) for n in rng.permutation(NAMES))
    variant = VARIANTS[seed % 3]
    k, n = (int(rng.choice([8, 16])) for _ in range(2))
    if variant == "other_uses_every_axis":
        # x, larger than w, keeps g on its free dim; w's free dim leads with g, so the result
        # is split along x's dim only.
        rest = tuple(str(c) for c in rng.permutation([a, b]))
        return variant, [(16, k), (k, 8)], [(g, a), (None, (g,) + rest)]
    if variant == "other_swaps_group_axes":
        return variant, [(int(rng.choice([8, 16])), k), (k, n)], [(g, tuple(sorted((a, b), key=NAMES.index))), (g,)]
    return variant, [(k,), (k, n)], [(tuple(str(c) for c in rng.permutation(NAMES)),), (None, g)]


CASES = [_case(seed) for seed in range(18)]


def _run(runner, mod, case):
    _, shapes, specs = case
    _, args = placed_on_auto_mesh(mod, (2, 2, 2), NAMES, shapes, specs, seed=5)
    return runner(mod, lambda x, w: mod.numpy.tanh(x @ w), args)


@pytest.mark.parametrize("case", CASES, ids=[f"{seed}-{c[0]}" for seed, c in enumerate(CASES)])
def test_other_operand_brought_to_groups(case):
    j_coll = assert_like_jax(lambda runner, mod: _run(runner, mod, case))
    kinds = {kind for kind, _, _ in j_coll}
    if case[0] == "first_keeps_contraction_whole":
        # w's contracted dim is whole: x (float32) is gathered whole over every axis and
        # nothing is all-reduced.
        assert j_coll == {("all-gather", NAMES, 4 * case[1][0][0] * 7 // 8): 1}
    else:
        # The contraction stays split: its partial results are all-reduced.
        assert "all-reduce" in kinds
        if case[0] == "other_swaps_group_axes":
            assert "collective-permute" in kinds and "all-gather" not in kinds


def _gathered_case(seed):
    """(kind, shapes, specs): x splits a free or batch dim over `g`, which w's free dim (larger
    than x) holds for the result; x leaves one axis unused and is used whole."""
    rng = np.random.default_rng(800 + seed)
    g, a, b = (str(n) for n in rng.permutation(NAMES))
    if seed % 2 == 0:
        m, k = (int(rng.choice([4, 8])) for _ in range(2))
        return "matmul", [(m, k), (k, 16)], [(g, a), (None, g)]
    batch, i, j, k = int(rng.choice([8, 16])), int(rng.choice([2, 4])), int(rng.choice([8, 16])), int(rng.choice([4, 8]))
    w_batch = tuple(str(n) for n in rng.permutation([a, b]))
    return "batch_dot", [(batch, i, j), (batch, j, k)], [(g, None, a), (w_batch, None, g)]


GATHERED = [_gathered_case(seed) for seed in range(12)]


@pytest.mark.parametrize("case", GATHERED, ids=[f"{seed}-{c[0]}" for seed, c in enumerate(GATHERED)])
def test_other_operand_gathered_within_groups(case):
    """x's dim split over `g` moves onto the unused axis `b` (a collective-permute of its
    blocks); then x is all-gathered over its other dim's axis `a`, and then over `b`."""
    kind, shapes, specs = case

    def run(runner, mod):
        mesh = mod.make_mesh((2, 2, 2), NAMES, axis_types=(mod.sharding.AxisType.Auto,) * 3)
        rng = np.random.default_rng(6)
        args = [mod.device_put(rng.standard_normal(s).astype(np.float32),
                               mod.sharding.NamedSharding(mesh, mod.sharding.PartitionSpec(*sp)))
                for s, sp in zip(shapes, specs)]
        if kind == "matmul":
            return runner(mod, lambda x, w: mod.numpy.tanh(x @ w), args)
        return runner(mod, lambda x, w: mod.numpy.einsum("bij,bjk->bik", x, w), args)

    j_coll = assert_like_jax(run)
    g, a = specs[0][0], specs[0][-1]
    b = next(n for n in NAMES if n not in (g, a))
    block = int(np.prod(shapes[0]))  # bytes of x's float32 block over g and a: a quarter of it
    assert j_coll[("collective-permute", NAMES, block)] == 1
    assert j_coll[("all-gather", (a,), block)] == 1
    assert j_coll[("all-gather", (b,), 2 * block)] == 1

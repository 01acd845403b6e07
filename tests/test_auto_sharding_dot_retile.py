"""A batched contraction whose operand's batch dim, split already, takes further mesh axes
the operand does not use while another of its dims gives up as many devices' worth of axes
(`P('Y', 'Z')` used as `P(('Y', 'X'))` on 2x2x2): XLA's partitioner first permutes the
operand's blocks so the arriving axes stand where the leaving ones stood, then runs an
all-to-all over the arriving axes (a reshard outside a contraction runs the all-to-all over
the leaving axes and permutes after). And an operand used in a finer layout that lists a
dim's axes other than in mesh order is permuted twice: to the layout in mesh order, then to
its use's. An operand whose split moves onto its unsplit batch dim together with axes it does
not use (`P(None, 'Y', None)` used as `P(('Y', 'X'), None, None)` against `P(('Y', 'X'), None,
'Z')`) is sliced over those axes and re-tiled by an all-to-all over the moving ones, a permute
following where the use orders them otherwise, though the use leaves an axis unused (a
reshard elsewhere gathers then). Random shapes and axis roles against the collectives of
XLA's compiled program."""
import numpy as np
import pytest

from auto_oracle import assert_like_jax, placed_on_auto_mesh

NAMES = ("X", "Y", "Z")


def _case(seed):
    """(shapes, specs, arriving axis): the batch dot's lhs (b, i, j) and rhs (b, j, k); the
    operand re-tiled gives up its axis on the contracted dim j or on its free dim."""
    rng = np.random.default_rng(900 + seed)
    own, arriving, leaving = (str(a) for a in rng.permutation(NAMES))
    b = int(rng.choice([8, 16]))
    i, j, k = (int(rng.choice([4, 8, 16])) for _ in range(3))
    variant = ("rhs_contracted", "rhs_free", "lhs_contracted")[seed % 3]
    # The re-tiled operand no larger than the other (else XLA keeps its layout and moves the other).
    i, k = (max(i, k), min(i, k)) if variant.startswith("rhs") else (min(i, k), max(i, k))
    if variant == "rhs_contracted":
        specs = [((own, arriving), leaving), (own, leaving)]
    elif variant == "rhs_free":
        specs = [((own, arriving), leaving), (own, None, leaving)]
    else:
        specs = [(own, None, leaving), ((own, arriving), None, leaving)]
    return [(b, i, j), (b, j, k)], specs, arriving


CASES = [_case(seed) for seed in range(15)]


def _run(runner, mod, case):
    shapes, specs, _ = case
    _, args = placed_on_auto_mesh(mod, (2, 2, 2), NAMES, shapes, specs, seed=3)
    return runner(mod, lambda x, w: mod.numpy.einsum("bij,bjk->bik", x, w), args)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_batch_operand_retiled_through_permute(case):
    j_coll = assert_like_jax(lambda runner, mod: _run(runner, mod, case))
    kinds = {(kind, axes) for kind, axes, _ in j_coll}
    assert ("all-to-all", (case[2],)) in kinds
    assert "collective-permute" in {kind for kind, _ in kinds}


def _reordered_case(seed):
    """(shapes, specs, whether the lhs's use lists its contracted dim's axes other than in mesh
    order): the lhs's contracted dim split over (A, M), the rhs's batch dim over M and its
    contracted dim over (B, A), so the lhs is used as (M, None, (B, A)), each new block within
    an old one."""
    rng = np.random.default_rng(950 + seed)
    moving, a, b = (str(x) for x in rng.permutation(NAMES))
    batch, i = int(rng.choice([4, 8])), int(rng.choice([2, 4]))
    specs = [(None, None, (a, moving)), (moving, (b, a))]
    return [(batch, i, 16), (batch, 16, 4)], specs, NAMES.index(b) > NAMES.index(a)


REORDERED = [_reordered_case(seed) for seed in range(12)]


@pytest.mark.parametrize("case", REORDERED, ids=[f"{c[0]}-{c[1]}" for c in REORDERED])
def test_operand_reordered_through_mesh_order(case):
    """XLA permutes the lhs's blocks to its use with the contracted dim's axes in mesh order,
    then, when the use orders them otherwise, once more to the use's order."""
    j_coll = assert_like_jax(lambda runner, mod: _run(runner, mod, case))
    permutes = sum(n for (kind, _, _), n in j_coll.items() if kind == "collective-permute")
    assert permutes == (2 if case[2] else 1)


def _onto_batch_case(seed):
    """(shapes, specs, whether the use orders the batch axes other than arriving-then-moving):
    the lhs splits its free or contracted dim over `a`; the rhs, larger, splits its batch dim
    over `a` and `b` (in either order) and its free dim over `c`."""
    rng = np.random.default_rng(900 + seed)
    a, b, c = (str(x) for x in rng.permutation(NAMES))
    batch, i, j = (int(rng.choice([4, 8])) for _ in range(3))
    lhs = [None, None, None]
    lhs[1 + seed % 2] = a
    rhs_batch = (a, b) if rng.random() < 0.5 else (b, a)
    return [(batch, i, j), (batch, j, 16)], [tuple(lhs), (rhs_batch, None, c)], rhs_batch != (b, a)


ONTO_BATCH = [_onto_batch_case(seed) for seed in range(12)]


@pytest.mark.parametrize("case", ONTO_BATCH, ids=[f"{c[0]}-{c[1]}" for c in ONTO_BATCH])
def test_operand_retiled_onto_batch_dim(case):
    """The lhs is re-tiled by one all-to-all over its axis, then permuted when the rhs orders
    the batch axes with the moving one first; nothing is gathered."""
    j_coll = assert_like_jax(lambda runner, mod: _run(runner, mod, case))
    moving = next(e for e in case[1][0] if e is not None)
    assert {(kind, axes) for kind, axes, _ in j_coll} <= {("all-to-all", (moving,)), ("collective-permute", NAMES)}
    assert sum(n for (kind, _, _), n in j_coll.items() if kind == "all-to-all") == 1
    assert sum(n for (kind, _, _), n in j_coll.items() if kind == "collective-permute") == int(case[2])

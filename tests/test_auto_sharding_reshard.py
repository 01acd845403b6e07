"""Reshards that move whole blocks between devices, against XLA's compiled programs: where
the old and new layouts cut every dimension into the same number of blocks (only the devices
holding them differ), or each new block lies within one old block, XLA's partitioner sends
each new block with one collective-permute over every device, those keeping theirs included; where one dim's blocks move to another dim
(other dims perhaps gathered whole), or a dim's minor axes to a dim split already, an
all-to-all re-tiles them and a collective-permute takes them to the new devices. meshsim
records the same (kind, axes, bytes)."""
import itertools

import numpy as np
import pytest

from auto_oracle import assert_like_jax

# name -> (mesh shape, axis names, shape, argument spec, target spec)
CASES = {
    "tuple_order": ((4, 2), ("X", "Y"), (16,), (("X", "Y"),), (("Y", "X"),)),
    "swap_dims": ((2, 2, 2), ("X", "Y", "Z"), (8, 8), ("X", "Y"), ("Y", "X")),
    "other_axis": ((2, 2, 2), ("X", "Y", "Z"), (8, 8), ("X",), ("Z",)),
    "other_axis_dim1": ((2, 2, 2), ("X", "Y", "Z"), (4, 8, 2), (None, "X"), (None, "Z")),
    "three_axes": ((2, 2, 2), ("X", "Y", "Z"), (8, 4), (("X", "Y", "Z"),), (("Z", "Y", "X"),)),
    "stays_put": ((4, 2), ("X", "Y"), (8, 8), ("X", None), (None, "X")),  # an all-to-all
    # one dim's blocks move to another dim over other devices: an all-to-all, then a permute
    "retile": ((2, 2, 2), ("X", "Y", "Z"), (8, 8), ("X",), (None, "Y")),
    "retile_tuple": ((4, 2), ("X", "Y"), (8, 8), (("X", "Y"),), (None, ("Y", "X"))),
    "retile_and_move": ((2, 2, 2), ("X", "Y", "Z"), (8, 8, 4), ("X", None, "Z"), ("Y", "X")),
    # ... after gathering the other dims that lose their blocks
    "gather_then_retile": ((2, 2, 2), ("X", "Y", "Z"), (8, 4, 8), ("X", "Z"), (None, None, "Y")),
    "gather_then_move": ((2, 2, 2), ("X", "Y", "Z"), (8, 4, 8), ("X", "Z"), (None, None, "Z")),
    "too_few_blocks": ((2, 4), ("X", "Y"), (8, 8), ("X",), (None, "Y")),  # an all-gather
    # one dim's minor axes move to a dim that keeps its own: an all-to-all over them (landing
    # minor to the kept axes), then a permute when the target orders the axes otherwise
    "retile_onto_split": ((4, 2), ("X", "Y"), (16, 16), ("X", "Y"), (None, ("X", "Y"))),
    "retile_onto_split_in_order": ((4, 2), ("X", "Y"), (16, 16), ("X", "Y"), (None, ("Y", "X"))),
    "retile_onto_split_3d": ((2, 2, 2), ("X", "Y", "Z"), (8, 8, 8), ("X", "Y", "Z"), (None, ("X", "Y"), "Z")),
    "retile_tuple_onto_split": ((2, 2, 2), ("X", "Y", "Z"), (8, 8), (("X", "Z"), "Y"), (None, ("X", "Z", "Y"))),
    "retile_onto_split_2x4": ((2, 4), ("X", "Y"), (16, 16), ("X", "Y"), (None, ("X", "Y"))),
    # each new block lies within one old block (a finer split over other axes): cut
    # from there and sent with one collective-permute
    "finer": ((2, 4), ("X", "Y"), (16,), ("X",), ("Y",)),
    "finer_dim1": ((2, 4), ("X", "Y"), (8, 16), (None, "X"), (None, "Y")),
    "finer_tuple": ((2, 2, 2), ("X", "Y", "Z"), (16, 8), ("X",), (("Y", "Z"),)),
    "finer_and_other_dim": ((2, 4), ("X", "Y"), (16, 8), ("X", None), ("Y", "X")),
}
NO_PERMUTE = {"stays_put", "gather_then_move", "too_few_blocks", "retile_onto_split_in_order"}


def _run(runner, mod, name, explicit):
    return _resharding(CASES[name], explicit, seed=5)(runner, mod)


@pytest.mark.parametrize("explicit", [False, True], ids=["auto", "explicit"])
@pytest.mark.parametrize("name", CASES)
def test_reshard_collectives_match_xla(name, explicit):
    j_coll = assert_like_jax(lambda runner, mod: _run(runner, mod, name, explicit), rtol=0, atol=0)
    permutes = [k for k in j_coll if k[0] == "collective-permute"]
    assert bool(permutes) == (name not in NO_PERMUTE)


def _random_finer(seed):
    """A dim split over some axes re-split over other axes into a multiple of as many blocks."""
    rng = np.random.default_rng(seed)
    mesh_shape, names = [((2, 4), ("X", "Y")), ((2, 2, 2), ("X", "Y", "Z"))][int(rng.integers(2))]
    sizes = dict(zip(names, mesh_shape))
    rank = int(rng.integers(1, 4))
    dim = int(rng.integers(rank))
    old = str(rng.choice([a for a in names if sizes[a] == 2]))
    rest = [a for a in names if a != old]
    new = tuple(str(a) for a in rng.permutation(rest)[:int(rng.integers(1, len(rest) + 1))])
    shape = [int(rng.choice([4, 8])) for _ in range(rank)]
    shape[dim] = 16
    spec, target = [None] * rank, [None] * rank
    spec[dim] = old
    target[dim] = new if len(new) > 1 else new[0]
    if rank > 1 and rng.random() < 0.5:  # the old axis moves to another dim
        other = (dim + 1) % rank
        target[other] = old
    return mesh_shape, names, tuple(shape), tuple(spec), tuple(target)


def _resharding(case, explicit=False, seed=2):
    """`run(runner, module)` of a random array laid out as `case` says and resharded (a
    sharding constraint, or `reshard` on an Explicit mesh) to the case's target."""
    mesh_shape, names, shape, spec, target = case

    def run(runner, mod):
        kind = mod.sharding.AxisType.Explicit if explicit else mod.sharding.AxisType.Auto
        mesh = mod.make_mesh(mesh_shape, names, axis_types=(kind,) * len(names))
        P = mod.sharding.PartitionSpec
        x = mod.device_put(np.random.default_rng(seed).standard_normal(shape).astype(np.float32),
                           mod.sharding.NamedSharding(mesh, P(*spec)))
        move = mod.sharding.reshard if explicit else mod.lax.with_sharding_constraint
        with mod.set_mesh(mesh):
            return runner(mod, lambda a: move(a * 2.0, P(*target)) + 1.0, [x])
    return run


FINER = [_random_finer(seed) for seed in range(12)]


@pytest.mark.parametrize("case", FINER, ids=[f"{c[0]}-{c[2]}-{c[3]}-{c[4]}" for c in FINER])
def test_finer_reshard_is_one_permute(case):
    j_coll = assert_like_jax(_resharding(case, seed=2), rtol=0, atol=0)
    assert [k[0] for k in j_coll] == ["collective-permute"]


def _axes(entry):
    """A spec entry's axes as a tuple."""
    return (entry,) if isinstance(entry, str) else entry or ()


def _spec_blocks(sizes, spec):
    return [int(np.prod([sizes[a] for a in _axes(e)])) for e in spec]


def _random_spec(rng, names, rank):
    entries = [[] for _ in range(rank)]
    for a in rng.permutation(names):
        if rng.random() < 0.7:
            entries[int(rng.integers(rank))].append(str(a))
    return tuple(None if not e else e[0] if len(e) == 1 else tuple(e) for e in entries)


def _random_coarser(seed):
    """A layout resharded to one cutting every dim into a divisor of its blocks, whose blocks
    a plain all-gather does not leave in place (axes come or move)."""
    rng = np.random.default_rng(seed)
    while True:
        mesh_shape, names = [((4, 2), ("X", "Y")), ((2, 4), ("X", "Y")),
                             ((2, 2, 2), ("X", "Y", "Z"))][int(rng.integers(3))]
        sizes = dict(zip(names, mesh_shape))
        rank = int(rng.integers(1, 4))
        spec, target = _random_spec(rng, names, rank), _random_spec(rng, names, rank)
        old, new = _spec_blocks(sizes, spec), _spec_blocks(sizes, target)
        if old == new or any(o % t for o, t in zip(old, new)):
            continue
        flat = [(a, d, i) for d, e in enumerate(spec) for i, a in enumerate(_axes(e))]
        kept = {(a, d, i) for d, e in enumerate(target) for i, a in enumerate(_axes(e))}
        if kept <= set(flat):  # axes only leave: a plain all-gather
            continue
        shape = tuple(int(rng.choice([8, 16])) for _ in range(rank))
        return mesh_shape, names, shape, spec, target


COARSER = [_random_coarser(seed) for seed in range(16)]


@pytest.mark.parametrize("explicit", [False, True], ids=["auto", "explicit"])
@pytest.mark.parametrize("case", COARSER, ids=[f"{c[0]}-{c[2]}-{c[3]}-{c[4]}" for c in COARSER])
def test_coarser_reshard_permutes_then_gathers_sub_axes(case, explicit):
    j_coll = assert_like_jax(_resharding(case, explicit, seed=3), rtol=0, atol=0)
    assert sorted({k[0] for k in j_coll}) == ["all-gather", "collective-permute"]


def _random_gather(seed):
    """A layout losing axes on several dims, perhaps keeping some (a plain all-gather)."""
    rng = np.random.default_rng(100 + seed)
    while True:
        mesh_shape, names = [((4, 2), ("X", "Y")), ((2, 4), ("X", "Y")),
                             ((2, 2, 2), ("X", "Y", "Z"))][int(rng.integers(3))]
        rank = int(rng.integers(2, 4))
        spec = _random_spec(rng, names, rank)
        entries = [_axes(e) for e in spec]
        kept = [entry[:int(rng.integers(len(entry) + 1))] if rng.random() < 0.5 else () for entry in entries]
        if sum(len(k) < len(e) for k, e in zip(kept, entries)) < 2:
            continue
        target = tuple(None if not k else k[0] if len(k) == 1 else tuple(k) for k in kept)
        return mesh_shape, names, tuple(int(rng.choice([8, 16])) for _ in range(rank)), spec, target


GATHERS = [_random_gather(seed) for seed in range(12)]


@pytest.mark.parametrize("case", GATHERS, ids=[f"{c[0]}-{c[2]}-{c[3]}-{c[4]}" for c in GATHERS])
def test_gather_of_several_dims_is_one_all_gather_per_dim(case):
    j_coll = assert_like_jax(_resharding(case, seed=4), rtol=0, atol=0)
    assert {k[0] for k in j_coll} == {"all-gather"} and sum(j_coll.values()) >= 2


def _random_retile_onto_new_axes(seed):
    """One dim's axes moving to an unsplit dim that axes the layout does not use split too, a
    third dim perhaps kept as it is."""
    rng = np.random.default_rng(200 + seed)
    mesh_shape, names = [((4, 2), ("X", "Y")), ((2, 4), ("X", "Y")),
                         ((2, 2, 2), ("X", "Y", "Z"))][int(rng.integers(3))]
    rank = int(rng.integers(2, 4))
    losing, gaining = [int(d) for d in rng.permutation(rank)[:2]]
    axes = [str(a) for a in rng.permutation(names)]
    moving = int(rng.integers(1, len(names)))
    arriving = int(rng.integers(1, len(names) - moving + 1))
    rest = axes[moving + arriving:]
    spec, target = [None] * rank, [None] * rank
    spec[losing] = tuple(axes[:moving])
    target[gaining] = tuple(axes[i] for i in rng.permutation(moving + arriving))
    if rest and rank > 2 and rng.random() < 0.5:
        kept = [d for d in range(rank) if d not in (losing, gaining)][0]
        spec[kept] = target[kept] = tuple(rest)
    shape = tuple(int(rng.choice([8, 16])) for _ in range(rank))
    return mesh_shape, names, shape, tuple(spec), tuple(target)


RETILES = [_random_retile_onto_new_axes(seed) for seed in range(16)]


@pytest.mark.parametrize("explicit", [False, True], ids=["auto", "explicit"])
@pytest.mark.parametrize("case", RETILES, ids=[f"{c[0]}-{c[2]}-{c[3]}-{c[4]}" for c in RETILES])
def test_retile_onto_new_axes(case, explicit):
    """An all-to-all after slicing over the new axes (a permute when the target orders the
    axes otherwise) where the target uses every mesh axis; an all-gather otherwise."""
    j_coll = assert_like_jax(_resharding(case, explicit, seed=6), rtol=0, atol=0)
    kinds = {k[0] for k in j_coll}
    assert kinds in ({"all-gather"}, {"all-to-all"}, {"all-to-all", "collective-permute"})


def _random_partial_move(seed):
    """A dim split over several axes, some of which move to an unsplit dim while the others
    leave."""
    rng = np.random.default_rng(300 + seed)
    mesh_shape, names = [((4, 2), ("X", "Y")), ((2, 4), ("X", "Y")),
                         ((2, 2, 2), ("X", "Y", "Z"))][int(rng.integers(3))]
    rank = int(rng.integers(2, 4))
    losing, gaining = [int(d) for d in rng.permutation(rank)[:2]]
    axes = [str(a) for a in rng.permutation(names)][:int(rng.integers(2, len(names) + 1))]
    moving = [str(a) for a in rng.permutation(axes)[:int(rng.integers(1, len(axes)))]]
    spec, target = [None] * rank, [None] * rank
    spec[losing], target[gaining] = tuple(axes), tuple(moving)
    shape = tuple(int(rng.choice([8, 16])) for _ in range(rank))
    return mesh_shape, names, shape, tuple(spec), tuple(target)


PARTIAL_MOVES = [_random_partial_move(seed) for seed in range(12)]


@pytest.mark.parametrize("explicit", [False, True], ids=["auto", "explicit"])
@pytest.mark.parametrize("case", PARTIAL_MOVES, ids=[f"{c[0]}-{c[2]}-{c[3]}-{c[4]}" for c in PARTIAL_MOVES])
def test_partial_move_gathers_the_dim_whole(case, explicit):
    """Only some of a dim's axes move to another dim: XLA gathers the dim over all of them."""
    j_coll = assert_like_jax(_resharding(case, explicit, seed=7), rtol=0, atol=0)
    assert [k[0] for k in j_coll] == ["all-gather"]


def _random_retile_onto_split_dim(seed):
    """A dim's minor axes moving to a dim split already, which the target cuts into as many
    more blocks: over the moving axes and its own in any order, or over axes the layout
    leaves unused; a third dim perhaps kept as it is."""
    rng = np.random.default_rng(400 + seed)
    while True:
        mesh_shape, names = [((4, 2), ("X", "Y")), ((2, 4), ("X", "Y")),
                             ((2, 2, 2), ("X", "Y", "Z"))][int(rng.integers(3))]
        sizes = dict(zip(names, mesh_shape))
        rank = int(rng.integers(2, 4))
        losing, gaining = [int(d) for d in rng.permutation(rank)[:2]]
        axes = [str(a) for a in rng.permutation(names)]
        own_count = int(rng.integers(1, len(names)))
        own, rest = axes[:own_count], axes[own_count:]
        lose = rest[:int(rng.integers(1, len(rest) + 1))]
        kept = lose[:int(rng.integers(len(lose)))]
        unused = [a for a in names if a not in own and a not in lose]
        blocks = int(np.prod([sizes[a] for a in own + lose[len(kept):]]))
        free = own + lose[len(kept):] + unused
        choices = [p for k in range(1, len(free) + 1) for p in itertools.permutations(free, k)
                   if int(np.prod([sizes[a] for a in p])) == blocks]
        spec, target = [None] * rank, [None] * rank
        spec[gaining], spec[losing] = tuple(own), tuple(lose)
        target[gaining] = choices[int(rng.integers(len(choices)))]
        target[losing] = tuple(kept) or None
        shape = [int(rng.choice([8, 16])) for _ in range(rank)]
        shape[gaining] = 16
        return mesh_shape, names, tuple(shape), tuple(spec), tuple(target)


SPLIT_RETILES = [_random_retile_onto_split_dim(seed) for seed in range(20)]


@pytest.mark.parametrize("explicit", [False, True], ids=["auto", "explicit"])
@pytest.mark.parametrize("case", SPLIT_RETILES, ids=[f"{c[0]}-{c[2]}-{c[3]}-{c[4]}" for c in SPLIT_RETILES])
def test_retile_onto_split_dim(case, explicit):
    """An all-to-all over the moving axes, then a permute when the target lays the dim out
    otherwise than its own axes followed by the moved ones."""
    j_coll = assert_like_jax(_resharding(case, explicit, seed=8), rtol=0, atol=0)
    assert "all-to-all" in {k[0] for k in j_coll}


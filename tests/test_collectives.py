"""The data-moving collectives (all_gather, all_gather_invariant, psum_scatter,
ppermute, all_to_all, ragged_all_to_all, pbroadcast) inside shard_map.

Each is checked against a NumPy model acting on the list of per-device blocks
(replica groups as JAX builds them: members in the tuple order of
`axis_name`; ppermute indexes devices in mesh order), over random meshes,
specs, shapes and dtypes; then against real JAX on fixed cases (values, VMA
types, jaxpr names and params, error texts)."""
import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import meshsim as jax
from meshsim import lax
from meshsim.sharding import Mesh, PartitionSpec as P

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)

# (shape, names, number of devices used): full meshes of the 8 devices and
# meshes on a subset of them.
MESHES = [((8,), ("x",), 8), ((4, 2), ("x", "y"), 8), ((2, 4), ("x", "y"), 8),
          ((2, 2, 2), ("x", "y", "z"), 8), ((4,), ("x",), 4), ((2, 2), ("x", "y"), 4),
          ((1, 4), ("x", "y"), 4)]

_mesh_cache = {}


def make_mesh(shape, names, ndev):
    key = (shape, names, ndev)
    if key not in _mesh_cache:
        if ndev == 8:
            _mesh_cache[key] = jax.make_mesh(shape, names)
        else:
            _mesh_cache[key] = Mesh(np.array(jax.devices()[:ndev]).reshape(shape), names)
    return _mesh_cache[key]


# --- the NumPy model -------------------------------------------------------------


def ref_groups(shape, names, axes):
    """JAX's replica groups (pxla._axis_groups): mesh positions, members in
    the tuple order of `axes`."""
    iota = np.arange(math.prod(shape)).reshape(shape)
    pos = [names.index(a) for a in axes]
    g = np.moveaxis(iota, pos, list(range(len(pos)))).reshape(
        math.prod(shape[p] for p in pos), -1)
    return [[int(i) for i in col] for col in g.T]


def sub_groups(groups, index_groups):
    if index_groups is None:
        return groups
    return [[g[i] for i in ig] for g in groups for ig in index_groups]


def spec_axes(entry):
    return () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)


def split_blocks(x, spec, shape, names):
    """Each device's block of global `x` under `spec`, by mesh position."""
    blocks = []
    for pos in range(math.prod(shape)):
        coords = np.unravel_index(pos, shape)
        index = []
        for d in range(x.ndim):
            axes = spec_axes(spec[d] if d < len(spec) else None)
            k, n = 0, 1
            for a in axes:
                i = names.index(a)
                k, n = k * shape[i] + coords[i], n * shape[i]
            size = x.shape[d] // n
            index.append(slice(k * size, (k + 1) * size))
        blocks.append(x[tuple(index)])
    return blocks


def model_all_gather(blocks, groups, axis, tiled):
    out = [None] * len(blocks)
    for g in groups:
        parts = [blocks[m] for m in g]
        value = np.concatenate(parts, axis) if tiled else np.stack(parts, axis)
        for m in g:
            out[m] = value
    return out


def model_psum_scatter(blocks, groups, dim, tiled):
    out = [None] * len(blocks)
    for g in groups:
        total = sum(blocks[m] for m in g)
        chunks = np.split(total, len(g), axis=dim)
        for r, m in enumerate(g):
            out[m] = chunks[r] if tiled else np.squeeze(chunks[r], dim)
    return out


def model_ppermute(blocks, groups, perm):
    out = [np.zeros_like(b) for b in blocks]
    for g in groups:
        g = sorted(g)  # JAX <= 0.11: indices count devices in mesh order
        for src, dst in perm:
            out[g[dst]] = blocks[g[src]]
    return out


def model_all_to_all(blocks, groups, split, concat, tiled):
    out = [None] * len(blocks)
    for g in groups:
        n = len(g)
        for j, m in enumerate(g):
            if tiled:
                out[m] = np.concatenate([np.split(blocks[k], n, split)[j] for k in g], concat)
            else:
                out[m] = np.stack([np.take(blocks[k], j, split) for k in g], concat)
    return out


def model_ragged(operands, outputs, io, ss, oo, groups):
    """The docstring's pseudo-code: entry i of sender s goes to member
    i // per; writes land in sender order."""
    result = [o.copy() for o in outputs]
    for g in groups:
        per = len(io[g[0]]) // len(g)
        for s in g:
            for i in range(len(io[s])):
                dst = g[i // per]
                result[dst][oo[s][i]:oo[s][i] + ss[s][i]] = operands[s][io[s][i]:io[s][i] + ss[s][i]]
    return result


# --- running a body on every device -----------------------------------------------


def per_device(mesh, body, x, spec, check_vma=True):
    """Runs `body` on the blocks of `x` under `spec`; each device's result
    block, by mesh position."""
    out_spec = P(tuple(mesh.axis_names))
    f = jax.shard_map(lambda v: body(v)[None], mesh=mesh, in_specs=spec, out_specs=out_spec,
                      check_vma=check_vma)
    return list(np.asarray(f(x)))


def assert_blocks_equal(got, want):
    assert len(got) == len(want)
    for pos, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, pos
        np.testing.assert_array_equal(g, w, err_msg=f"device at mesh position {pos}")


# --- hypothesis strategies ------------------------------------------------------------

DTYPES = [np.float32, np.int32, np.bool_]


@st.composite
def mesh_and_axes(draw):
    """A mesh and a non-empty tuple of its axes in random order."""
    shape, names, ndev = draw(st.sampled_from(MESHES))
    axes = draw(st.permutations(names))
    axes = tuple(axes[:draw(st.integers(1, len(names)))])
    return (shape, names, ndev), axes


@st.composite
def spec_for(draw, names, ndim):
    """A spec for a rank-`ndim` array: every mesh axis used at most once,
    tuple entries in random order."""
    free = list(draw(st.permutations(names)))
    entries = []
    for _ in range(ndim):
        k = draw(st.integers(0, len(free)))
        taken, free = free[:k], free[k:]
        entries.append(None if not taken else taken[0] if len(taken) == 1 else tuple(taken))
    while entries and entries[-1] is None and draw(st.booleans()):
        entries.pop()
    return P(*entries)


def global_input(rng, local_shape, spec, mesh_case, dtype):
    """A global array whose blocks under `spec` have `local_shape`."""
    shape, names, _ = mesh_case
    factors = [math.prod(shape[names.index(a)] for a in spec_axes(spec[d] if d < len(spec) else None))
               for d in range(len(local_shape))]
    gshape = tuple(s * f for s, f in zip(local_shape, factors))
    if dtype == np.bool_:
        return rng.random(gshape) < 0.5
    return rng.integers(-50, 50, gshape).astype(dtype)  # integer values: exact float sums


@st.composite
def index_groups(draw, n):
    """None, or a random split of range(n) into equal groups."""
    sizes = [k for k in range(1, n + 1) if n % k == 0]
    if n == 1 or not draw(st.booleans()):
        return None
    k = draw(st.sampled_from(sizes))
    order = draw(st.permutations(range(n)))
    return [list(order[i:i + k]) for i in range(0, n, k)]


def axis_total(mesh_case, axes):
    shape, names, _ = mesh_case
    return math.prod(shape[names.index(a)] for a in axes)


# --- property tests against the model ------------------------------------------------


@SETTINGS
@given(data=st.data())
def test_all_gather_matches_model(data):
    case, axes = data.draw(mesh_and_axes())
    shape, names, _ = case
    ndim = data.draw(st.integers(1, 3))
    spec = data.draw(spec_for(names, ndim))
    local = tuple(data.draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    dtype = data.draw(st.sampled_from(DTYPES))
    tiled = data.draw(st.booleans())
    axis = data.draw(st.integers(-ndim - (not tiled), ndim - 1 + (not tiled)))
    groups = data.draw(index_groups(axis_total(case, axes)))
    invariant = groups is None and data.draw(st.booleans())
    x = global_input(np.random.default_rng(data.draw(st.integers(0, 99))), local, spec, case, dtype)

    def body(v):
        if invariant:
            return lax.all_gather_invariant(v, axes, axis=axis, tiled=tiled)
        return lax.all_gather(v, axes, axis=axis, tiled=tiled, axis_index_groups=groups)

    got = per_device(make_mesh(*case), body, x, spec)
    blocks = split_blocks(x, spec, shape, names)
    want = model_all_gather(blocks, sub_groups(ref_groups(shape, names, axes), groups),
                            axis % (ndim + (not tiled)), tiled)
    assert_blocks_equal(got, want)


@SETTINGS
@given(data=st.data())
def test_psum_scatter_matches_model(data):
    case, axes = data.draw(mesh_and_axes())
    shape, names, _ = case
    groups = data.draw(index_groups(axis_total(case, axes)))
    n = len(groups[0]) if groups else axis_total(case, axes)
    ndim = data.draw(st.integers(1, 3))
    spec = data.draw(spec_for(names, ndim))
    dim = data.draw(st.integers(-ndim, ndim - 1))
    tiled = data.draw(st.booleans())
    local = list(data.draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    local[dim] = n * (data.draw(st.integers(1, 2)) if tiled else 1)
    dtype = data.draw(st.sampled_from([np.float32, np.int32]))
    x = global_input(np.random.default_rng(data.draw(st.integers(0, 99))), local, spec, case, dtype)

    # Without VMA checks: the model sums the blocks as they are, also over axes
    # the operand is invariant over (with checks, JAX refuses a mix of both).
    got = per_device(make_mesh(*case), lambda v: lax.psum_scatter(
        v, axes, scatter_dimension=dim, tiled=tiled, axis_index_groups=groups), x, spec,
        check_vma=False)
    blocks = split_blocks(x, spec, shape, names)
    want = model_psum_scatter(blocks, sub_groups(ref_groups(shape, names, axes), groups),
                              dim % ndim, tiled)
    assert_blocks_equal(got, want)


@SETTINGS
@given(data=st.data())
def test_ppermute_matches_model(data):
    case, axes = data.draw(mesh_and_axes())
    shape, names, _ = case
    n = axis_total(case, axes)
    srcs = data.draw(st.permutations(range(n)))
    dsts = data.draw(st.permutations(range(n)))
    perm = list(zip(srcs, dsts))[:data.draw(st.integers(0, n))]
    ndim = data.draw(st.integers(1, 2))
    spec = data.draw(spec_for(names, ndim))
    local = data.draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim))
    dtype = data.draw(st.sampled_from(DTYPES))
    x = global_input(np.random.default_rng(data.draw(st.integers(0, 99))), local, spec, case, dtype)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        got = per_device(make_mesh(*case), lambda v: lax.ppermute(v, axes, perm), x, spec)
    want = model_ppermute(split_blocks(x, spec, shape, names), ref_groups(shape, names, axes), perm)
    assert_blocks_equal(got, want)


@SETTINGS
@given(data=st.data())
def test_all_to_all_matches_model(data):
    case, axes = data.draw(mesh_and_axes())
    shape, names, _ = case
    groups = data.draw(index_groups(axis_total(case, axes)))
    n = len(groups[0]) if groups else axis_total(case, axes)
    ndim = data.draw(st.integers(1, 3))
    spec = data.draw(spec_for(names, ndim))
    split = data.draw(st.integers(-ndim, ndim - 1))
    concat = data.draw(st.integers(-ndim, ndim - 1))
    tiled = data.draw(st.booleans())
    local = list(data.draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    local[split] = n * (data.draw(st.integers(1, 2)) if tiled else 1)
    dtype = data.draw(st.sampled_from(DTYPES))
    x = global_input(np.random.default_rng(data.draw(st.integers(0, 99))), local, spec, case, dtype)

    got = per_device(make_mesh(*case), lambda v: lax.all_to_all(
        v, axes, split, concat, tiled=tiled, axis_index_groups=groups), x, spec)
    blocks = split_blocks(x, spec, shape, names)
    want = model_all_to_all(blocks, sub_groups(ref_groups(shape, names, axes), groups),
                            split % ndim, concat % ndim, tiled)
    assert_blocks_equal(got, want)


@SETTINGS
@given(data=st.data())
def test_ragged_all_to_all_matches_model(data):
    case, axes = data.draw(mesh_and_axes())
    shape, names, ndev = case
    n = axis_total(case, axes)
    per = data.draw(st.integers(1, 2))
    rows_in, rows_out, width = 4, 6, data.draw(st.integers(1, 3))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    dtype = data.draw(st.sampled_from(DTYPES))
    groups = ref_groups(shape, names, axes)
    k = n * per
    ss = rng.integers(0, 3, (ndev, k))
    io = np.array([[rng.integers(0, rows_in - s + 1) for s in row] for row in ss])
    oo = np.array([[rng.integers(0, rows_out - s + 1) for s in row] for row in ss])
    rs = np.zeros_like(ss)  # recv_sizes: send_sizes transposed within each group
    for g in groups:
        for s_rank, s in enumerate(g):
            for i in range(k):
                rs[g[i // per], s_rank * per + i % per] = ss[s, i]
    operand = global_input(rng, (rows_in, width), P(), case, dtype).reshape(1, rows_in, width)
    operand = np.concatenate([operand + i if dtype != np.bool_ else operand ^ (i % 2 == 1)
                              for i in range(ndev)])
    output = np.zeros((ndev, rows_out, width), dtype)
    idx = [a.astype(np.int32) for a in (io, ss, oo, rs)]
    mesh = make_mesh(*case)
    spec = P(tuple(names))

    def body(op, out, a, b, c, d):
        r = lax.ragged_all_to_all(op[0], out[0], a[0], b[0], c[0], d[0], axis_name=axes)
        return r[None]

    f = jax.shard_map(body, mesh=mesh, in_specs=(spec,) * 6, out_specs=spec)
    got = list(np.asarray(f(operand, output, *idx)))
    want = model_ragged(list(operand), list(output), io, ss, oo, groups)
    assert_blocks_equal(got, want)


# --- the notebook's examples --------------------------------------------------------


def _ring_shift_simple(block, axis_name, offset=1):
    n = lax.axis_size(axis_name)
    return lax.ppermute(block, axis_name, perm=[(i, (i + offset) % n) for i in range(n)])


def test_notebook_ring_shift_over_tuple_uses_mesh_order():
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    spec = P(("tp", "dp"))
    f = jax.shard_map(lambda b: (_ring_shift_simple(b, ("tp", "dp"), 1),
                                 _ring_shift_simple(b, ("tp", "dp"), -1)),
                      mesh=mesh, in_specs=spec, out_specs=(spec, spec))
    with pytest.warns(UserWarning, match=r"mesh order, i.e. row-major over \('dp', 'tp'\)"):
        fwd, bwd = f(np.arange(8, dtype=np.int32))
    assert str(jax.typeof(fwd)) == "int32[8@(tp,dp)]"
    np.testing.assert_array_equal(fwd, [7, 4, 5, 6, 0, 1, 2, 3])
    np.testing.assert_array_equal(bwd, [4, 5, 6, 7, 1, 2, 3, 0])


def test_notebook_generalized_ring_shift():
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    axes = ("tp", "dp")
    logical = {a: mesh.shape[a] for a in axes}
    in_mesh = [a for a in mesh.axis_names if a in axes]

    def to_mesh_index(i):
        coords = dict(zip(axes, np.unravel_index(i, [logical[a] for a in axes])))
        return int(np.ravel_multi_index([coords[a] for a in in_mesh], [logical[a] for a in in_mesh]))

    def ring_shift(b, offset):
        perm = [(to_mesh_index(i), to_mesh_index((i + offset) % 8)) for i in range(8)]
        return lax.ppermute(b, axes, perm)

    spec = P(axes)
    f = jax.shard_map(lambda b: (ring_shift(b, 1), ring_shift(b, -1)), mesh=mesh,
                      in_specs=spec, out_specs=(spec, spec))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fwd, bwd = f(np.arange(8, dtype=np.int32))
    np.testing.assert_array_equal(fwd, [7, 0, 1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(bwd, [1, 2, 3, 4, 5, 6, 7, 0])


def test_notebook_ring_shift_single_axis():
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    types = []

    def body(b):
        out = _ring_shift_simple(b, "dp", 1), _ring_shift_simple(b, "dp", -1)
        types.append(str(jax.typeof(out[0])))
        return out

    f = jax.shard_map(body, mesh=mesh, in_specs=P("tp", "dp"),
                      out_specs=(P("tp", "dp"), P("tp", "dp")))
    fwd, bwd = f(np.arange(8, dtype=np.int32).reshape(2, 4))
    assert types == ["int32[1,1]{V:(dp,tp)}"]
    np.testing.assert_array_equal(fwd, [[3, 0, 1, 2], [7, 4, 5, 6]])
    np.testing.assert_array_equal(bwd, [[1, 2, 3, 0], [5, 6, 7, 4]])


def test_notebook_all_to_all_cells():
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    with jax.set_mesh(mesh):
        x = 10 * np.arange(8, dtype=np.int32)[:, None] + np.arange(8, dtype=np.int32)[None, :]
        types = []

        @jax.shard_map(in_specs=P(("dp", "tp")), out_specs=P(("dp", "tp")))
        def tiled_demo(b):
            y = lax.all_to_all(b, axis_name=("dp", "tp"), split_axis=0, concat_axis=0, tiled=True)
            types.append((str(jax.typeof(b)), str(jax.typeof(y))))
            return y

        np.testing.assert_array_equal(np.asarray(tiled_demo(x.ravel())).reshape(8, 8), x.T)
        assert types == [("int32[8]{V:(dp,tp)}", "int32[8]{V:(dp,tp)}")]

        @jax.shard_map(in_specs=P("dp", "tp"), out_specs=P(("tp", "dp")))
        def untiled_demo(b):
            y = lax.all_to_all(b, axis_name="dp", split_axis=1, concat_axis=0, tiled=False)
            types.append((str(jax.typeof(b)), str(jax.typeof(y))))
            return y.reshape(1, -1)

        out = untiled_demo(x)
        np.testing.assert_array_equal(out, x.T)
        assert str(jax.typeof(out)) == "int32[8@(tp,dp),8]"
        assert types[1] == ("int32[2,4]{V:(dp,tp)}", "int32[4,2]{V:(dp,tp)}")


def test_notebook_psum_scatter_and_all_gather_cells():
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    x = np.arange(8, dtype=np.int32).reshape(2, 4)

    def rs(dim, tiled, out):
        return jax.shard_map(lambda b: lax.psum_scatter(b, "tp", scatter_dimension=dim,
                                                        tiled=tiled),
                             mesh=mesh, in_specs=P(None, "tp"), out_specs=out)(x)

    np.testing.assert_array_equal(rs(0, True, P("tp")), [[2, 4], [10, 12]])
    np.testing.assert_array_equal(rs(1, True, P(None, "tp")), [[2, 4], [10, 12]])
    np.testing.assert_array_equal(rs(0, False, P("tp")), [2, 4, 10, 12])
    np.testing.assert_array_equal(rs(1, True, P("tp")), [[2], [10], [4], [12]])
    np.testing.assert_array_equal(rs(1, False, P("tp")), [2, 10, 4, 12])

    def ag(fn, out):
        return jax.shard_map(fn, mesh=mesh, in_specs=P("tp"), out_specs=out)(np.arange(4, dtype=np.int32))

    y = ag(lambda w: lax.all_gather_invariant(w, "tp", axis=0, tiled=True), P())
    np.testing.assert_array_equal(y, [0, 1, 2, 3])
    assert str(jax.typeof(y)) == "int32[4]"
    np.testing.assert_array_equal(ag(lambda w: lax.all_gather_invariant(w, "tp"), P()),
                                  [[0, 1], [2, 3]])
    np.testing.assert_array_equal(ag(lambda w: lax.all_gather_invariant(w, "tp", axis=1), P()),
                                  [[0, 2], [1, 3]])
    y = ag(lambda w: lax.all_gather(w, "tp", axis=0, tiled=True), P("tp"))
    np.testing.assert_array_equal(y, [0, 1, 2, 3, 0, 1, 2, 3])
    assert str(jax.typeof(y)) == "int32[8@tp]"


# --- VMA types -----------------------------------------------------------------------


def _types_in_body(fn, in_spec=P("dp", "tp"), out_spec=P("dp", "tp"), check_vma=True,
                   x=np.zeros((8, 4), np.float32)):
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    seen = []

    def body(v):
        out = fn(v)
        seen.append(str(jax.typeof(out)))
        return v

    jax.shard_map(body, mesh=mesh, in_specs=in_spec, out_specs=out_spec, check_vma=check_vma)(x)
    return seen[0]


@pytest.mark.parametrize("fn, want", [
    (lambda v: lax.all_gather(v, "tp"), "float32[2,2,2]{V:(dp,tp)}"),
    (lambda v: lax.all_gather(v, "tp", to="invarying"), "float32[2,2,2]{V:dp}"),
    (lambda v: lax.all_gather_invariant(v, ("tp", "dp"), tiled=True), "float32[16,2]"),
    (lambda v: lax.psum_scatter(v, "tp", scatter_dimension=1, tiled=True), "float32[2,1]{V:(dp,tp)}"),
    (lambda v: lax.ppermute(v, "dp", [(0, 1)]), "float32[2,2]{V:(dp,tp)}"),
    (lambda v: lax.all_to_all(v, "tp", 0, 1, tiled=True), "float32[1,4]{V:(dp,tp)}"),
    (lambda v: lax.pbroadcast(v, "tp", 1), "float32[2,2]{V:(dp,tp)}"),
    # the implicit pvary: a value invariant over the named axes becomes varying
    (lambda v: lax.all_gather(v[0, 0] * 0 + 1.0, "tp"), "float32[2]{V:(dp,tp)}"),
])
def test_vma_of_results(fn, want):
    assert _types_in_body(fn) == want


def test_vma_implicit_pvary_of_invariant_operand():
    # the operand is invariant over tp: all_gather first casts it to varying
    got = _types_in_body(lambda v: lax.all_gather(v, "tp", tiled=True), in_spec=P("dp"),
                         out_spec=P("dp"))
    assert got == "float32[4,4]{V:(dp,tp)}"
    got = _types_in_body(lambda v: lax.all_gather_invariant(v, "tp", tiled=True), in_spec=P("dp"),
                         out_spec=P("dp"))
    assert got == "float32[4,4]{V:dp}"


def test_vma_without_checking():
    got = _types_in_body(lambda v: lax.all_gather(v, "tp"), check_vma=False)
    assert got == "float32[2,2,2]"


def test_all_gather_result_cannot_leave_replicated_but_invariant_can():
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    x = np.arange(8, dtype=np.float32)
    with pytest.raises(ValueError, match="could not infer replication"):
        jax.shard_map(lambda v: lax.all_gather(v, "tp", tiled=True), mesh=mesh,
                      in_specs=P("tp"), out_specs=P("dp"))(x)
    y = jax.shard_map(lambda v: lax.all_gather_invariant(v, "tp", tiled=True), mesh=mesh,
                      in_specs=P("tp"), out_specs=P())(x)
    np.testing.assert_array_equal(y, x)


def test_ragged_all_to_all_result_varies_over_its_axes():
    mesh = make_mesh((2,), ("i",), 2)
    seen = []

    def body(op, io, ss, oo, rs):
        out = lax.ragged_all_to_all(op, np.zeros(4, np.float32), io, ss, oo, rs, axis_name="i")
        seen.append(str(jax.typeof(out)))
        return out

    spec = P("i")
    ones = np.ones(4, np.int32)
    jax.shard_map(body, mesh=mesh, in_specs=(spec,) * 5, out_specs=spec)(
        np.ones(6, np.float32), 0 * ones, ones, np.array([0, 0, 1, 1], np.int32), ones)
    assert seen == ["float32[4]{V:i}"]


# --- errors ---------------------------------------------------------------------------


def _run(fn, x=np.zeros((8, 4), np.float32), spec=P("dp", "tp"), out=P("dp", "tp"), **kw):
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    return jax.shard_map(fn, mesh=mesh, in_specs=spec, out_specs=out, **kw)(x)


@pytest.mark.parametrize("fn, exc, message", [
    (lambda v: lax.ppermute(v, "dp", [(0, 1), (0, 2)]), ValueError,
     "ppermute sources and destinations must be unique, got ((0, 1), (0, 2))."),
    (lambda v: lax.ppermute(v, "dp", [(0, 1), (2, 1)]), ValueError,
     "ppermute sources and destinations must be unique, got ((0, 1), (2, 1))."),
    (lambda v: lax.ppermute(v, "dp", [(0, 3), (1, -1)]), ValueError,
     "ppermute sources and destinations must be unique, got ((0, 3), (1, -1))."),
    (lambda v: lax.ppermute(v, "dp", [(0, 4)]), ValueError,
     "ppermute index 4 in perm entry (0, 4) is out of range for axis_name ('dp',) of size 4: "
     "indices must be in [0, 4)"),
    (lambda v: lax.ppermute(v, ("dp", "tp"), [(-9, 0)]), ValueError,
     "ppermute index -9 in perm entry (-9, 0) is out of range for axis_name ('dp', 'tp') of "
     "size 8"),
    (lambda v: lax.ppermute(v, "dp", zip([0], [1])), TypeError,
     "`perm` passed to `jax.lax.ppermute` must be a list or a tuple. Got perm of type "
     "<class 'zip'>"),
    (lambda v: lax.all_gather(v, "dp", to="foo"), ValueError,
     "Got unexpected `to` value for `jax.lax.all_gather`. Allowed `to` values are: "),
    (lambda v: lax.all_gather(v, "dp", axis=3), ValueError,
     "axis 3 is out of bounds for array of dimension 3"),
    (lambda v: lax.all_gather(v, "dp", axis=2, tiled=True), ValueError,
     "axis 2 is out of bounds for array of dimension 2"),
    (lambda v: lax.all_gather(v, "dp", to="invarying", axis_index_groups=[[0, 1], [2, 3]]),
     NotImplementedError, ""),
    (lambda v: lax.psum_scatter(v, "dp"), ValueError,
     "reduce_scatter operand scatter dimension size 2 must match shard count 4"),
    (lambda v: lax.psum_scatter(v, "dp", tiled=True, scatter_dimension=1), ValueError,
     "tiled reduce_scatter operand scatter dimension size 2 must be divisible by shard_count 4"),
    (lambda v: lax.psum_scatter(v > 0, "tp"), TypeError,
     "add does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes "
     "of integer, floating, complexfloating."),
    (lambda v: lax.all_to_all(v, "dp", 0, 0), ValueError,
     "all_to_all requires the size of the mapped axis axis_name to equal x.shape[split_axis], "
     "but they are 4 and 2 respectively."),
    (lambda v: lax.all_to_all(v, ("dp", "tp"), 1, 0, tiled=True), ValueError,
     "The size of all_to_all split_axis (2) has to be divisible by the size of the named axis "
     "('dp', 'tp') (8)"),
    (lambda v: lax.all_to_all(v, "dp", 1, 0, tiled=True), ValueError,
     "The size of all_to_all split_axis (2) has to be divisible by the size of the named axis "
     "dp (4)"),
    (lambda v: lax.all_gather(v, "dp", axis_index_groups=[[0, 1], [1, 2]]), ValueError,
     "axis_index_groups must cover all indices exactly once"),
    (lambda v: lax.all_gather(v, "dp", axis_index_groups=[[0, 1, 2], [3]]), ValueError,
     "Replica groups must be equally sized"),
    (lambda v: lax.all_gather(v, "zz"), NameError,
     "Found an unbound axis name: zz. To fix this, please call all_gather under "
     "`jax.shard_map`."),
    (lambda v: lax.pbroadcast(v, "tp", 2), ValueError,
     "pbroadcast source 2 is out of range for axis_name ('tp',) of size 2"),
])
def test_error_messages(fn, exc, message):
    with pytest.raises(exc) as info:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            _run(fn)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("fn", [
    lambda x: lax.all_gather(x, "i"),
    lambda x: lax.psum_scatter(x, "i"),
    lambda x: lax.ppermute(x, "i", [(0, 1)]),
    lambda x: lax.all_to_all(x, "i", 0, 0),
])
def test_collectives_outside_shard_map_raise_name_error(fn):
    with pytest.raises(NameError, match="Found an unbound axis name: i"):
        fn(np.zeros(4, np.float32))


def test_pbroadcast_of_invariant_value_is_a_vma_error():
    with pytest.raises(ValueError) as info:
        _run(lambda v: lax.pbroadcast(np.zeros((2, 2), np.float32), "tp", 0) + v)
    assert str(info.value).startswith(
        "Collective pbroadcast must be applied to a device-varying  type, but got frozenset() "
        "for collective acting over axis name ('tp',).")


def test_ppermute_tuple_order_warns_or_raises():
    body = lambda v: lax.ppermute(v, ("tp", "dp"), [(0, 1)])  # noqa: E731
    with pytest.warns(UserWarning, match="mesh order"):
        _run(body)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run(lambda v: lax.ppermute(v, ("dp", "tp"), [(0, 1)]))  # mesh order: no warning
    jax.config.update("jax_raise_on_ppermute_sort_diff", True)
    try:
        with pytest.raises(RuntimeError, match="Make sure that the axis_name passed to "
                           r"jax.lax.ppermute is in the same order as the axis_names declared"):
            _run(body)
        with jax.raise_on_ppermute_sort_diff(False):
            with pytest.warns(UserWarning):
                _run(body)
    finally:
        jax.config.update("jax_raise_on_ppermute_sort_diff", False)


RAGGED_ARGS = [np.array([[1, 2, 2], [3, 4, 0]], np.float32), np.zeros((2, 4), np.float32),
               np.array([[0, 1], [0, 1]], np.int32), np.array([[1, 2], [1, 1]], np.int32),
               np.array([[0, 0], [1, 2]], np.int32), np.array([[1, 1], [2, 1]], np.int32)]


def _ragged(*args):
    mesh = make_mesh((2,), ("i",), 2)

    def body(op, out, io, ss, oo, rs):
        return lax.ragged_all_to_all(op[0], out[0], io[0], ss[0], oo[0], rs[0],
                                     axis_name="i")[None]

    return np.asarray(jax.shard_map(body, mesh=mesh, in_specs=(P("i"),) * 6,
                                    out_specs=P("i"))(*args))


def test_ragged_all_to_all_reference_example():
    np.testing.assert_array_equal(_ragged(*RAGGED_ARGS), [[1, 3, 0, 0], [2, 2, 4, 0]])


@pytest.mark.parametrize("index, value, message", [
    (3, [[1, 3], [1, 1]], r"on device 0 \(index 0 along axis_name \('i',\)\), input_offsets\[1\] "
     r"= 1 and send_sizes\[1\] = 3 select rows outside the operand, which has 3 rows"),
    (4, [[0, 3], [1, 2]], r"on device 0 \(index 0 along axis_name \('i',\)\), output_offsets\[1\] "
     r"= 3 and send_sizes\[1\] = 2 select rows outside the output of device 1 \(index 1 along "
     r"axis_name \('i',\)\), which has 4 rows"),
    (2, [[0, 1], [-1, 1]], r"on device 1 .* input_offsets\[0\] = -1"),
    (5, [[1, 1], [1, 1]], r"device 0 \(index 0 along axis_name \('i',\)\) sends 2 rows "
     r"\(send_sizes\[1\]\) to device 1 \(index 1 along axis_name \('i',\)\), which expects 1 "
     r"\(recv_sizes\[0\]\)"),
])
def test_ragged_all_to_all_overrun_raises_once_and_mesh_stays_usable(index, value, message):
    args = list(RAGGED_ARGS)
    args[index] = np.array(value, np.int32)
    if index == 3:  # keep recv_sizes consistent so that the overrun is what fails
        args[5] = np.array([[1, 1], [3, 1]], np.int32)
    inputs = [a.copy() for a in args]
    with pytest.raises(ValueError, match="ragged_all_to_all: " + message):
        _ragged(*args)
    for a, b in zip(args, inputs):
        np.testing.assert_array_equal(a, b)  # nothing written into the inputs
    np.testing.assert_array_equal(_ragged(*RAGGED_ARGS), [[1, 3, 0, 0], [2, 2, 4, 0]])


@pytest.mark.parametrize("change, exc, message", [
    ({2: np.zeros((2, 2), np.float32)}, ValueError,
     "ragged_all_to_all input_offsets must be integer type."),
    ({5: np.zeros((2, 2), np.float32)}, ValueError,
     "ragged_all_to_all recv_sizes must be integer type."),
    ({3: np.zeros((2, 1, 2), np.int32)}, ValueError,
     "ragged_all_to_all send_sizes must be rank 1 with positive dimension size, but got shape "
     "(1, 2)"),
    ({4: np.zeros((2, 3), np.int32)}, ValueError,
     "ragged_all_to_all input_offsets, send_sizes, output_offsets and recv_sizes must have the "
     "same length"),
    ({2: np.zeros((2, 3), np.int32), 3: np.zeros((2, 3), np.int32),
      4: np.zeros((2, 3), np.int32), 5: np.zeros((2, 3), np.int32)}, ValueError,
     "ragged_all_to_all offsets and sizes have 3 entries, which is not a multiple of the size 2"),
    ({1: np.zeros((2, 4), np.int32)}, TypeError,
     "ragged_all_to_all operand and output must have the same dtype"),
])
def test_ragged_all_to_all_trace_time_errors(change, exc, message):
    args = list(RAGGED_ARGS)
    for i, v in change.items():
        args[i] = v
    with pytest.raises(exc) as info:
        _ragged(*args)
    assert str(info.value).startswith(message)


# --- against real JAX -----------------------------------------------------------------

def _jax_all_gather_invariant(real_jax):
    from jax._src.lax.parallel import all_gather_invariant
    return all_gather_invariant


def _bodies(j, agi):
    L = j.lax
    return {
        "all_gather": (lambda v: L.all_gather(v, "tp", axis=1), P("dp", "tp")),
        "all_gather_tuple": (lambda v: L.all_gather(v, ("tp", "dp"), tiled=True), P("dp", "tp")),
        "all_gather_groups": (lambda v: L.all_gather(v, "dp", axis_index_groups=[[0, 2], [3, 1]]),
                              P("dp", "tp")),
        "all_gather_invariant": (lambda v: agi(v, ("dp", "tp"), axis=1, tiled=True), P()),
        "all_gather_to_invarying": (lambda v: L.all_gather(v, "tp", to="invarying"), P("dp")),
        "psum_scatter": (lambda v: L.psum_scatter(v, ("tp", "dp"), scatter_dimension=1,
                                                  tiled=True), P("dp", "tp")),
        "psum_scatter_untiled": (lambda v: L.psum_scatter(v, ("tp", "dp"), scatter_dimension=0),
                                 P(("dp", "tp"))),
        "psum_scatter_groups": (lambda v: L.psum_scatter(v, "dp", scatter_dimension=1, tiled=True,
                                                         axis_index_groups=[[0, 2], [3, 1]]),
                                P("dp", "tp")),
        "ppermute": (lambda v: L.ppermute(v, "dp", [(0, 1), (1, 3), (3, 0)]), P("dp", "tp")),
        "ppermute_tuple_mesh_order": (lambda v: L.ppermute(v, ("dp", "tp"),
                                                           [(i, (i + 3) % 8) for i in range(8)]),
                                      P("dp", "tp")),
        "ppermute_tuple_other_order": (lambda v: L.ppermute(v, ("tp", "dp"),
                                                            [(i, (i + 3) % 8) for i in range(8)]),
                                       P("dp", "tp")),
        "all_to_all": (lambda v: L.all_to_all(v, ("tp", "dp"), 0, 1), P("dp", "tp")),
        "all_to_all_one_axis": (lambda v: L.all_to_all(v.reshape(4, 16), "dp", 0, 1),
                                P("dp", "tp")),
        "all_to_all_tiled_tuple": (lambda v: L.all_to_all(v, ("tp", "dp"), 1, 0, tiled=True),
                                   P("dp", "tp")),
        "all_to_all_groups": (lambda v: L.all_to_all(v, "dp", 0, 0, tiled=True,
                                                     axis_index_groups=[[0, 2], [3, 1]]),
                              P("dp", "tp")),
    }


X4 = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)  # blocks of (8, 8)


def _run_both(real_jax, name, check_vma=True):
    """Runs case `name` under meshsim and JAX on a (4, 2) Explicit mesh; the
    results, the VMA types seen in the bodies and the bodies' jaxprs."""
    results = []
    for j in (jax, real_jax):
        agi = lax.all_gather_invariant if j is jax else _jax_all_gather_invariant(real_jax)
        fn, out_spec = _bodies(j, agi)[name]
        mesh = j.make_mesh((4, 2), ("dp", "tp"))
        spec = P("dp", "tp") if j is jax else j.sharding.PartitionSpec("dp", "tp")
        if j is not jax:
            out_spec = j.sharding.PartitionSpec(*out_spec)
        seen = []

        def body(v):
            y = fn(v)
            seen.append(str(j.typeof(y)))
            return y

        x = j.device_put(X4, j.sharding.NamedSharding(mesh, spec))
        f = j.shard_map(body, mesh=mesh, in_specs=spec, out_specs=out_spec, check_vma=check_vma)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = np.asarray(f(x))
            jaxpr = str(j.make_jaxpr(f)(x))
        results.append((value, seen[0], jaxpr))
    return results


def _collective_eqns(text):
    """`name[k=v ...]` of each collective in a printed jaxpr, params in one line."""
    names = ("all_gather_invariant", "all_gather", "reduce_scatter", "ppermute", "all_to_all")
    flat = re.sub(r"\s+", " ", text)
    out = []
    for m in re.finditer(r"= (%s)\[(.*?)\]" % "|".join(names), flat):
        params = m.group(2).replace("( ", "(").strip()
        out.append(f"{m.group(1)}[{params}]")
    return out


@pytest.mark.jax
@pytest.mark.parametrize("name", list(_bodies(jax, lax.all_gather_invariant)))
def test_matches_jax(real_jax, name):
    (ours, our_type, our_jaxpr), (theirs, their_type, their_jaxpr) = _run_both(real_jax, name)
    np.testing.assert_array_equal(ours, theirs)
    assert our_type == their_type
    assert _collective_eqns(our_jaxpr) == _collective_eqns(their_jaxpr)
    assert _collective_eqns(our_jaxpr)


@pytest.mark.jax
def test_matches_jax_without_vma_checks(real_jax):
    (ours, our_type, _), (theirs, their_type, _) = _run_both(real_jax, "all_to_all",
                                                              check_vma=False)
    np.testing.assert_array_equal(ours, theirs)
    assert our_type == their_type == "float32[8,8]"


@pytest.mark.jax
@pytest.mark.parametrize("build, exc", [
    (lambda L: L.psum_scatter(np.zeros((3, 2), np.float32) + L.axis_index("dp"), "dp"),
     ValueError),
    (lambda L: L.psum_scatter(np.zeros((3, 2), np.float32) + L.axis_index("dp"), "dp",
                              tiled=True), ValueError),
    (lambda L: L.all_to_all(np.zeros((3, 2), np.float32) + L.axis_index("dp"), "dp", 0, 1),
     ValueError),
    (lambda L: L.all_to_all(np.zeros((3, 2), np.float32) + L.axis_index("dp"), ("dp", "tp"), 0,
                            1, tiled=True), ValueError),
    (lambda L: L.ppermute(np.zeros(2, np.float32) + L.axis_index("dp"), "dp", [(0, 1), (2, 1)]),
     ValueError),
])
def test_error_texts_match_jax(real_jax, build, exc):
    messages = []
    for j in (jax, real_jax):
        mesh = j.make_mesh((4, 2), ("dp", "tp"))
        with pytest.raises(exc) as info:
            f = j.shard_map(lambda: build(j.lax), mesh=mesh, in_specs=(),
                            out_specs=j.sharding.PartitionSpec())
            f()
        messages.append(str(info.value))
    assert messages[0] == messages[1]


@pytest.mark.jax
def test_weak_types_match_jax(real_jax):
    types = []
    for j in (jax, real_jax):
        mesh = j.make_mesh((4, 2), ("dp", "tp"))
        seen = []

        def body():
            L = j.lax
            seen.extend(str(j.typeof(y)) for y in (
                L.all_gather(1.0, "dp"), L.ppermute(1.0, "dp", [(0, 1)]),
                L.all_to_all(j.numpy.ones(4) * 1.0, "dp", 0, 0),
                L.psum_scatter(j.numpy.ones(4) * 2, "dp", tiled=True)))
            return j.numpy.zeros(())

        j.shard_map(body, mesh=mesh, in_specs=(), out_specs=j.sharding.PartitionSpec())()
        types.append(seen)
    assert types[0] == types[1]


# --- psum family with positional (integer) axes ---------------------------------------


@pytest.mark.jax
@pytest.mark.parametrize("name", ["psum", "pmax", "pmin"])
@pytest.mark.parametrize("axes", [(0,), (0, "dp"), ("tp", 1), (0, 1)])
def test_positional_axes_match_jax(real_jax, name, axes):
    # JAX 0.10.2 supports integer axes only with check_vma=False and not in
    # pmean; meshsim supports them everywhere
    results = []
    for j in (jax, real_jax):
        mesh = j.make_mesh((4, 2), ("dp", "tp"))
        spec = j.sharding.PartitionSpec("dp", "tp")
        x = j.device_put(X4[:8, :4], j.sharding.NamedSharding(mesh, spec))
        f = j.shard_map(lambda v: getattr(j.lax, name)(v, axes)[None], mesh=mesh, in_specs=spec,
                        out_specs=j.sharding.PartitionSpec(("dp", "tp")), check_vma=False)
        results.append(np.asarray(f(x)))
    np.testing.assert_allclose(results[0], results[1])
    ours = jax.shard_map(lambda v: getattr(lax, name)(v, axes)[None], mesh=jax.make_mesh(
        (4, 2), ("dp", "tp")), in_specs=P("dp", "tp"), out_specs=P(("dp", "tp")))(X4[:8, :4])
    np.testing.assert_allclose(ours, results[1])


def test_positional_axes_outside_shard_map():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(lax.psum(x, 0), x.sum(0))
    np.testing.assert_array_equal(lax.pmean(x, (0, -1)), x.mean())
    np.testing.assert_array_equal(lax.pmax(x, (1,)), x.max(1))
    np.testing.assert_array_equal(lax.psum(x > 2, 1), [0, 3])
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    got = jax.shard_map(lambda v: lax.pmean(v, (0, "dp")), mesh=mesh, in_specs=P("dp", "tp"),
                        out_specs=P("tp"))(X4[:8, :4])
    np.testing.assert_allclose(got, X4[:8, :4].mean(0))
    with pytest.raises(ValueError, match="axis_index_groups only supported for sums over just "
                       "named axes"):
        lax.psum(x, 0, axis_index_groups=[[0]])


@pytest.mark.jax
@pytest.mark.parametrize("build", [
    lambda L: (lambda v: L.all_gather(v, ("b", "a"), axis=1, tiled=True)),
    lambda L: (lambda v: L.psum_scatter(v, ("b", "a"), scatter_dimension=1, tiled=True)),
    lambda L: (lambda v: L.ppermute(v, ("b", "a"), [(0, 2), (2, 3), (3, 0)])),
    lambda L: (lambda v: L.all_to_all(v, ("b", "a"), 1, 0, tiled=True)),
    lambda L: (lambda v: L.all_to_all(v.reshape(2, 8), "a", 0, 1, tiled=False)),
])
def test_subset_mesh_with_auto_axes_matches_jax(real_jax, build):
    # a 2x2 mesh on devices 4..7, in_specs naming the axes in the other order
    x = np.arange(4 * 16, dtype=np.float32).reshape(4, 16)
    results = []
    for j in (jax, real_jax):
        mesh = j.sharding.Mesh(np.array(j.devices()[4:]).reshape(2, 2), ("a", "b"))
        spec = j.sharding.PartitionSpec(("b", "a"))
        f = j.shard_map(build(j.lax), mesh=mesh, in_specs=spec, out_specs=spec)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results.append(np.asarray(f(x)))
    np.testing.assert_array_equal(results[0], results[1])


def test_record_collectives_sees_shard_map_bodies():
    """Collectives executed inside shard_map bodies are recorded with the ring's bytes per
    device, eagerly and under jit."""
    mesh = jax.make_mesh((2, 4), ("dp", "tp"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    f = jax.shard_map(lambda b, w: jax.lax.psum(b @ w, "tp"), mesh=mesh,
                      in_specs=(P("dp", "tp"), P("tp", None)), out_specs=P("dp", None))
    g = jax.shard_map(lambda b: (jax.lax.all_gather(b, "tp", axis=1, tiled=True),
                                 jax.lax.psum_scatter(b, "dp", scatter_dimension=0, tiled=True)),
                      mesh=mesh, in_specs=P(None, "tp"), out_specs=(P(None, "tp"), P("dp", "tp")))
    x = np.ones((8, 8), np.float32)
    w = np.ones((8, 4), np.float32)
    for call in (f, jax.jit(f)):
        with jax.debug.record_collectives() as log:
            call(x, w)
        # psum of a [4,4] f32 block over 4 devices: 2 * 64 * 3/4 bytes.
        assert [r for r in log if r.name == "psum_invariant"] == [("psum_invariant", ("tp",), 96)]
    with jax.debug.record_collectives() as log:
        g(x)
    body = [r for r in log if r.name in ("all_gather", "reduce_scatter") and r.bytes in (192, 32)]
    # all_gather of [8,2] over 4: 64 * 3 bytes; reduce_scatter to [4,2] over 2: 32 * 1 bytes.
    assert ("all_gather", ("tp",), 192) in body and ("reduce_scatter", ("dp",), 32) in body


def test_ragged_all_to_all_gradient():
    """JAX's transpose: each sent row's cotangent comes back from where it landed;
    the output buffer keeps the cotangent of the rows nothing overwrote."""
    op, out, io, ss, oo, rs = RAGGED_ARGS
    ct = np.random.default_rng(0).standard_normal(out.shape).astype(np.float32)
    mesh = make_mesh((2,), ("i",), 2)

    def body(op, out, io, ss, oo, rs):
        return lax.ragged_all_to_all(op[0], out[0], io[0], ss[0], oo[0], rs[0], axis_name="i")[None]

    f = jax.shard_map(body, mesh=mesh, in_specs=(P("i"),) * 6, out_specs=P("i"))
    d_op, d_out = jax.grad(lambda a, b: (f(a, b, io, ss, oo, rs) * ct).sum(), argnums=(0, 1))(op, out)
    want_op, want_out = np.zeros_like(op), ct.copy()
    for s in range(2):
        for i in range(2):  # entry i goes to device i
            want_op[s, io[s, i]:io[s, i] + ss[s, i]] += ct[i, oo[s, i]:oo[s, i] + ss[s, i]]
            want_out[i, oo[s, i]:oo[s, i] + ss[s, i]] = 0
    np.testing.assert_allclose(np.asarray(d_op), want_op, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(d_out), want_out, rtol=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_ragged_all_to_all_is_recorded_and_estimated_with_its_bytes(seed):
    """ragged_all_to_all's traffic depends on the run-time send_sizes: each device sends
    the rows it sends to the other members (what it keeps moves nothing)."""
    rng = np.random.default_rng(seed)
    case = [((4,), ("x",), 4), ((2, 4), ("x", "y"), 8), ((4, 2), ("x", "y"), 8)][seed % 3]
    shape, names, ndev = case
    axes = names[-1] if seed % 2 else names
    axes = (axes,) if isinstance(axes, str) else tuple(axes)
    n = math.prod(shape[names.index(a)] for a in axes)
    per, rows_in, rows_out, width = 1 + seed % 2, 5, 8, 3
    groups = ref_groups(shape, names, axes)
    k = n * per
    ss = rng.integers(0, 3, (ndev, k))
    io = np.array([[rng.integers(0, rows_in - s + 1) for s in row] for row in ss])
    oo = np.array([[rng.integers(0, rows_out - s + 1) for s in row] for row in ss])
    rs = np.zeros_like(ss)
    for g in groups:
        for s_rank, s in enumerate(g):
            for i in range(k):
                rs[g[i // per], s_rank * per + i % per] = ss[s, i]
    operand = rng.standard_normal((ndev, rows_in, width)).astype(np.float32)
    output = np.zeros((ndev, rows_out, width), np.float32)
    idx = [a.astype(np.int32) for a in (io, ss, oo, rs)]
    mesh = make_mesh(*case)
    spec = P(tuple(names))
    f = jax.shard_map(lambda op, out, a, b, c, d: lax.ragged_all_to_all(
        op[0], out[0], a[0], b[0], c[0], d[0], axis_name=axes)[None],
        mesh=mesh, in_specs=(spec,) * 6, out_specs=spec)

    row_bytes = width * 4
    sent, received = np.zeros(ndev, np.int64), np.zeros(ndev, np.int64)
    for g in groups:
        for s_rank, s in enumerate(g):
            for i in range(k):
                dst = i // per
                if dst != s_rank:
                    sent[s] += ss[s, i] * row_bytes
                    received[g[dst]] += ss[s, i] * row_bytes
    ids = [d.id for d in mesh.devices.flat]
    with jax.debug.record_collectives() as log:
        f(operand, output, *idx)
    records = [r for r in log if r.name == "ragged_all_to_all"]
    if not received.any():
        assert records == []
        return
    assert records == [("ragged_all_to_all", tuple(a for a in names if a in axes), received.max())]
    assert records[0].bytes_sent == {ids[p]: int(sent[p]) for p in range(ndev)}
    assert records[0].bytes_received == {ids[p]: int(received[p]) for p in range(ndev)}
    assert records[0].steps == 1

    est = jax.profiler.estimate(f, operand, output, *idx)
    comm = [o for o in est.ops if o.name == "ragged_all_to_all"]
    assert len(comm) == 1 and comm[0].kind == "communication"
    p = ids.index(est.device)
    assert (comm[0].bytes_sent, comm[0].bytes_received) == (sent[p], received[p])
    hw = est.hardware
    assert comm[0].time == pytest.approx(hw.link_latency + max(sent[p], received[p]) / (
        hw.link_bandwidth * (len(axes) if hw.multi_axis_links else 1)))

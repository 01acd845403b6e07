"""What a jitted program does on a mesh with Auto axes, under meshsim or JAX: the
specs of its results and the multiset of collectives it runs, each as
(kind, mesh axes, bytes one device receives). For JAX they are read from the
text of the compiled program (XLA's HLO), for meshsim from
`debug.record_collectives`."""
import re
from collections import Counter

import numpy as np

from meshsim import _core

_ITEMSIZE = {"f32": 4, "s32": 4, "u32": 4, "f64": 8, "s64": 8, "bf16": 2, "f16": 2, "pred": 1,
             "u8": 1, "s8": 1}
_OP = re.compile(r"= (\(?[^=]*?\)?) (all-gather|all-reduce|reduce-scatter|all-to-all|"
                 r"collective-permute)(-start)?\(")


def _groups(line: str):
    """The replica groups of an HLO collective, as lists of device ids."""
    m = re.search(r"replica_groups=\[([\d,]+)\]<=\[([\d,]+)\](T\(([\d,]+)\))?", line)
    if m:
        gshape = [int(v) for v in m.group(1).split(",")]
        ids = np.arange(int(np.prod([int(v) for v in m.group(2).split(",")])))
        ids = ids.reshape([int(v) for v in m.group(2).split(",")])
        if m.group(4):
            ids = ids.transpose([int(v) for v in m.group(4).split(",")])
        return ids.reshape(gshape).tolist()
    m = re.search(r"replica_groups=mesh\[([^\]]*)\](, device_ids=\(([^)]*\)?)\))? \{([^}]*)\}", line)
    if m:
        axes = re.findall(r"'(\w+)'=(\d+)", m.group(1))
        names, sizes = [a for a, _ in axes], [int(v) for _, v in axes]
        ids = np.arange(int(np.prod(sizes)))
        if m.group(3):  # the devices in mesh order: an iota, reshaped and transposed
            d = re.match(r"\[([\d,]+)\](T\(([\d,]+)\))?", m.group(3))
            ids = ids.reshape([int(v) for v in d.group(1).split(",")])
            if d.group(3):
                ids = ids.transpose([int(v) for v in d.group(3).split(",")])
        # A group over a sub-axis (`'axis_1':(2)2`: size 2 after a major part of size 2)
        # spans only those digits of the axis's coordinate.
        chosen = re.findall(r"'(\w+)'(?::\((\d+)\)(\d+))?", m.group(4))
        sub = {a: (int(pre), int(n)) for a, pre, n in chosen if pre}
        parts, part_sizes = [], []
        for a, n in zip(names, sizes):
            pre, k = sub.get(a, (1, n))
            for part, size in (("major", pre), ("chosen", k), ("minor", n // (pre * k))):
                parts.append((a, part))
                part_sizes.append(size)
        ids = ids.reshape(part_sizes)
        sel = [parts.index((a, "chosen")) for a, _, _ in chosen]
        rest = [k for k in range(len(parts)) if k not in sel]
        ids = ids.transpose(rest + sel)
        return ids.reshape(-1, int(np.prod([part_sizes[k] for k in sel]))).tolist()
    m = re.search(r"replica_groups=\{(\{[\d,{} ]*\})\}", line)
    if m:
        return [[int(v) for v in g.split(",") if v] for g in re.findall(r"\{([\d,]*)\}", m.group(1))]
    m = re.search(r"source_target_pairs=\{(.*?)\}\}", line)
    if m:
        return [[int(v) for v in p.split(",")] for p in re.findall(r"\{([\d,]+)", m.group(1) + "}")]
    return None


def _nbytes(shape_text: str) -> int:
    m = re.match(r"(\w+)\[([\d,]*)\]", shape_text)
    dims = [int(d) for d in m.group(2).split(",") if d]
    return int(np.prod(dims)) * _ITEMSIZE[m.group(1)]


def _axes_of(group, mesh_ids, axis_names) -> tuple:
    coords = [np.argwhere(mesh_ids == d)[0] for d in group]
    return tuple(axis_names[k] for k in range(mesh_ids.ndim) if len({int(c[k]) for c in coords}) > 1)


def hlo_collectives(text: str, mesh_ids: np.ndarray, axis_names) -> Counter:
    """(kind, axes, bytes one device receives) of each collective in XLA's program text."""
    found = Counter()
    for line in text.splitlines():
        line = re.sub(r"/\*.*?\*/", "", line)
        m = _OP.search(line)
        if not m:
            continue
        kind = m.group(2)
        out_bytes = sum(_nbytes(s) for s in re.findall(r"\w+\[[\d,]*\]", m.group(1)))
        groups = _groups(line)
        if kind == "collective-permute":
            ids = sorted({d for pair in groups for d in pair})
            found[(kind, _axes_of(ids, mesh_ids, axis_names), out_bytes)] += 1
            continue
        n = len(groups[0])
        if n < 2:
            continue
        axes = _axes_of(groups[0], mesh_ids, axis_names)
        received = {"all-gather": out_bytes * (n - 1) // n, "all-reduce": 2 * out_bytes * (n - 1) // n,
                    "reduce-scatter": out_bytes * (n - 1), "all-to-all": out_bytes * (n - 1) // n}[kind]
        found[(kind, axes, received)] += 1
    return found


def meshsim_collectives(log, axis_names) -> Counter:
    found = Counter()
    for r in log:
        axes = tuple(a for a in axis_names if a in r.axes)
        found[(_core.collective_instruction(r.name) or r.name, axes, r.bytes)] += 1  # XLA's kind, as declared
    return found


def run_jax(jax, fun, args):
    """JAX's result specs and collectives for `jax.jit(fun)(*args)`."""
    jf = jax.jit(fun)
    out = jf(*args)
    text = jf.lower(*args).compile().as_text()
    mesh = args[0].sharding.mesh
    ids = np.vectorize(lambda d: d.id)(mesh.devices)
    specs = [tuple(o.sharding.spec) for o in jax.tree.leaves(out)]
    return specs, hlo_collectives(text, ids, mesh.axis_names), out


def run_meshsim(meshsim, fun, args):
    jf = meshsim.jit(fun)
    jf(*args)  # traced and planned once
    with meshsim.debug.record_collectives() as log:
        out = jf(*args)
    mesh = args[0].sharding.mesh
    specs = [tuple(o.sharding.spec) for o in meshsim.tree.leaves(out)]
    return specs, meshsim_collectives(log, mesh.axis_names), out


def placed_on_auto_mesh(mod, mesh_shape, names, shapes, specs, seed):
    """(mesh, arguments): an all-Auto mesh of `mod` (meshsim or JAX) and float32 normal
    arguments of `shapes` drawn from `seed`, laid out by `specs` (tuples of PartitionSpec entries)."""
    mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
    rng = np.random.default_rng(seed)
    args = [mod.device_put(rng.standard_normal(s).astype(np.float32),
                           mod.sharding.NamedSharding(mesh, mod.sharding.PartitionSpec(*sp)))
            for s, sp in zip(shapes, specs)]
    return mesh, args


def normalized(spec: tuple) -> tuple:
    """A spec without trailing Nones, entries of one axis as the axis."""
    entries = [e[0] if isinstance(e, tuple) and len(e) == 1 else e for e in spec]
    while entries and entries[-1] is None:
        entries.pop()
    return tuple(entries)


def assert_like_jax(run, collectives=True, rtol=1e-5, atol=1e-5):
    """`run(runner, module)` under JAX (`run_jax`) and meshsim (`run_meshsim`): meshsim must give
    JAX's values and result specs and, when `collectives`, the collectives of XLA's program.
    Returns XLA's collectives."""
    import jax
    import meshsim
    j_specs, j_coll, j_out = run(run_jax, jax)
    m_specs, m_coll, m_out = run(run_meshsim, meshsim)
    for a, b in zip(jax.tree.leaves(j_out), meshsim.tree.leaves(m_out)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=rtol, atol=atol)
    assert [normalized(s) for s in m_specs] == [normalized(s) for s in j_specs]
    if collectives:
        assert m_coll == j_coll
    return j_coll


MESHES = {1: ((8,), ("X",)), 2: ((4, 2), ("X", "Y")), 3: ((2, 2, 2), ("X", "Y", "Z"))}


class Lib:
    """`jax` or `meshsim` on an all-Auto mesh of 1, 2 or 3 axes (`MESHES`), for programs written
    once as functions of it."""

    def __init__(self, mod, rank):
        self.jax = mod
        self.jnp = mod.numpy
        shape, names = MESHES[rank]
        self.mesh_axes = names
        self.mesh = mod.make_mesh(shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))

    def spec(self, entries):
        names = self.mesh_axes
        conv = [None if e is None else names[e] if isinstance(e, int) else tuple(names[k] for k in e)
                for e in entries]
        return self.jax.sharding.PartitionSpec(*conv)

    def args(self, shapes, specs):
        rng = np.random.default_rng(0)
        return [self.jax.device_put(rng.standard_normal(s).astype(np.float32),
                                    self.jax.sharding.NamedSharding(self.mesh, self.spec(sp)))
                for s, sp in zip(shapes, specs)]


def assert_matches_xla(jax_outcome, meshsim_outcome, jax_leaves, meshsim_leaves) -> None:
    """Values, output shardings and collectives of one program: meshsim's against JAX's."""
    j_specs, j_coll, j_out = jax_outcome
    m_specs, m_coll, m_out = meshsim_outcome
    for a, b in zip(jax_leaves(j_out), meshsim_leaves(m_out)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=2e-5, atol=2e-5)
    assert [normalized(s) for s in m_specs] == [normalized(s) for s in j_specs]
    assert m_coll == j_coll

"""Abstract compilation: what a traced program does on each device, from its
types alone (`jit(f).lower(*ShapeDtypeStructs).compile()`).

Nothing is allocated and no kernel runs. The program's equations are walked in
order with each value's per-device size (a shard_map body's types are already
per-device blocks; a global type is divided as its sharding says):

- work: each primitive's own `cost` hook (flops, bytes accessed) on the
  per-device types, times the trip count of the scans around it;
- communication: every collective with its mesh axes, group size, replica
  groups and the bytes each device sends (the ring schedules of
  `_core.collective_bytes`); on global Explicit-sharded types also the
  collectives the sharding implies (a contraction or reduction over a sharded
  dimension all-reduces, a contraction sharded on one side all-gathers the
  other, a change of spec all-gathers or all-to-alls);
- memory: buffer liveness in program order (below).

Calls: a nested jit is analysed as its equations written in place of the call
(`Program.with_calls_inlined`, the pass the executors compile with), as XLA
inlines calls before it fuses and schedules: a call's results and the
residuals it saves die where their last reader is, not when the call ends.

SPMD: every device of a mesh runs the same program on blocks of the same size,
so the walk is done once, for device 0, whatever the device count; the
replica groups of a collective are computed with NumPy when asked for.

Liveness follows what XLA's buffer assignment does, approximately:
- fusion: an elementwise, broadcast, convert or layout-only result whose every
  reader can fuse it (elementwise ops, reductions, layout ops) gets no buffer
  (it is recomputed inside its readers, as XLA's loop fusion does); its bytes
  are not written nor read back;
- bitcasts (reshape, squeeze, pvary, ...) share their operand's buffer;
- an elementwise result writes in place over an operand of its size whose
  last reader it is (XLA's buffer reuse);
- arguments live throughout (donated ones until their last reader), results
  from where they are computed; a scan, while, cond or remat adds the temporary
  peak of its body while it runs (loop carries are updated in place);
- order: each program's peak is the smaller of its own order's and a depth-first
  post-order's from its results (XLA's scheduler keeps the best of such
  schedules); what is live at the peak is kept by writer;
- the results' buffers are allocated for the whole program, and XLA places a
  temporary in one not yet written when it fits there, so `temp` is the peak of
  the live temporaries less those so placed (a temporary larger than every
  result left to write takes bytes of its own: an MLP gradient's activations
  do not fit in its weights' gradients); a sub-program's temporaries are what is live at its peak
  besides its results (which its caller counts from the equation on), and a
  result aliased to a donated argument is written into that argument's buffer.
It cannot see XLA's operand fusions into dots, its rematerialisation or its
scheduling, so on CPU `temp_size_in_bytes` differs from JAX's (tests/
test_stages.py measures by how much); arguments and results are exact."""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import numpy as np

from meshsim import _core

# How XLA's buffer assignment treats each primitive, as the primitive declares
# where it is registered (ir/primitive.h: fused_into_readers, fuses_operands,
# result_is_operand_view, partials_reduction, has_effects, sub_program_params).
@functools.cache
def _declared(name: str) -> dict:
    return _core.primitive_info(name)


def _fused(name: str, elementwise: bool) -> bool:
    """Its result is recomputed inside its readers (no buffer) when every reader fuses."""
    return elementwise or _declared(name)["fused_into_readers"]


def _fusing_reader(name: str, elementwise: bool) -> bool:
    """It fuses the fusible results it reads."""
    return _fused(name, elementwise) or _declared(name)["fuses_operands"]


def _bitcast(name: str) -> bool:
    """Its result is its operand's buffer viewed anew."""
    return _declared(name)["result_is_operand_view"]


def _partials_all_reduce(name: str) -> str | None:
    """The all-reduce XLA combines a reduction's partial results with, when a reduced
    dimension is sharded. No collective multiplies: a product's is counted as a sum's."""
    info = _declared(name)
    reduction = info["partials_reduction"]
    if not reduction or info["kind"] != "local":
        return None
    return _core.partials_all_reduce("sum" if reduction == "prod" else reduction)


# Fused kernels (a library kernel such as flash attention, written as a named
# custom_vjp function): each hook maps (function name, operands' per-device
# shapes) to (flops, matmul dims) or None. Such a call is one op: it reads its
# operands and writes its results, and what it computes in between stays on
# chip (no buffers, no bytes). Kernels register here where they are defined.
FUSED_KERNEL_COSTS: list = []


def _fused_kernel(name, params, in_avals) -> tuple | None:
    if name != "custom_vjp_call":
        return None
    shapes = [local_shape(a) for a in in_avals]
    return next((c for hook in FUSED_KERNEL_COSTS
                 if (c := hook(str(params.get("name", "")), shapes)) is not None), None)


def _live_equations(program, eqns) -> list:
    """Dead-code elimination, as JAX's and XLA's: the equations whose results the
    program's results depend on, and those with effects (a callback). A
    collective nobody reads is removed too, as XLA removes it."""
    needed = set(program.outvars)
    keep = [False] * len(eqns)
    for k in range(len(eqns) - 1, -1, -1):
        name, ins, outs = eqns[k][:3]
        if _declared(name)["has_effects"] or any(o in needed for o in outs):
            keep[k] = True
            needed.update(ins)
    return [e for e, kept in zip(eqns, keep) if kept]


def _nbytes(shape, dtype) -> int:
    return int(math.prod(shape)) * np.dtype(dtype).itemsize


def local_shape(aval) -> tuple:
    """The per-device block shape of a (possibly sharded) type."""
    shape = tuple(aval.shape)
    mesh = aval.mesh
    if mesh is None or not aval.spec:
        return shape
    sizes = dict(zip(mesh.axis_names, mesh.axis_sizes))
    return tuple(d // math.prod(sizes[a] for a in axes) if axes else d
                 for d, axes in zip(shape, aval.spec))


def local_bytes(aval) -> int:
    return _nbytes(local_shape(aval), aval.dtype)


@dataclasses.dataclass
class Collective:
    """A collective one device takes part in: `bytes_sent` per execution (ring
    schedule), `count` executions (the trip count of the loops around it)."""
    name: str
    axes: tuple
    group_size: int
    bytes_sent: int
    mesh: Any  # the core mesh its groups are over
    count: int = 1
    implicit: bool = False  # implied by a sharded type rather than written in the program
    dtype: Any = None

    def replica_groups(self) -> np.ndarray:
        """Device ids, one row per group (members in the axes' order)."""
        ids = np.asarray(self.mesh.device_ids).reshape(tuple(self.mesh.axis_sizes))
        names = list(self.mesh.axis_names)
        where = [names.index(a) for a in self.axes]
        rest = [i for i in range(len(names)) if i not in where]
        return ids.transpose(rest + where).reshape(-1, self.group_size)


@dataclasses.dataclass
class Op:
    """One primitive application on one device (`count` times): its flops and
    the bytes it reads and writes after fusion; or a collective."""
    name: str
    flops: float
    bytes_accessed: float
    count: int
    shapes: str  # its results' per-device types
    collective: Collective | None = None
    matmul_dims: tuple | None = None  # (batch, m, n, k) of a dot_general
    dtype: Any = None
    depth: int = 0  # nesting in sub-programs
    # Scheduling (profiler.estimate(..., overlap=True)): the ops of the same
    # program whose results it reads, and for an op running sub-programs, their
    # ops as (ops of one run, runs).
    deps: list = dataclasses.field(default_factory=list, repr=False)
    children: list = dataclasses.field(default_factory=list, repr=False)


@dataclasses.dataclass
class Analysis:
    """A program's work, communication and memory on one device of its mesh."""
    ops: list
    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    temp_bytes: int
    peak_bytes: int
    mesh: Any  # the core mesh of the program (None: one device)
    top: list = dataclasses.field(default_factory=list, repr=False)  # the program's own ops
    # What is live at the peak: bytes per "<writer> <dtype>[<per-device shape>]"
    # (a sub-program's prefixed "<its equation> > "), "donated arguments" and
    # "arguments" (those not donated), largest first; they add up to the peak.
    live_at_peak: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def flops(self) -> float:
        return sum(o.flops * o.count for o in self.ops)

    @property
    def bytes_accessed(self) -> float:
        return sum(o.bytes_accessed * o.count for o in self.ops)

    @property
    def collectives(self) -> list:
        return [o.collective for o in self.ops if o.collective is not None]

    def collective_bytes_by_axes(self) -> dict:
        """Bytes one device sends, by the mesh axes of the collectives."""
        out: dict = {}
        for c in self.collectives:
            out[c.axes] = out.get(c.axes, 0) + c.bytes_sent * c.count
        return out


class _Walker:
    """Walks a program (and its sub-programs) collecting ops, and returns each
    program's temporary peak for the liveness of the program around it."""

    def __init__(self):
        self.ops: list = []  # every op, in program order, sub-programs' included
        self.block: list = []  # the ops of the program being walked
        # What is live at the peak of the program last walked: bytes per label
        # (the equation that wrote the buffer, with its per-device type).
        self.peak_parts: dict = {}

    def program(self, program, mesh, count: int, depth: int, donated=None) -> tuple:
        """(temp peak, results' bytes, its own ops) of running `program` once;
        its ops are appended with `count` executions."""
        outer_block, self.block = self.block, []
        try:
            temp, out_bytes = self._program(program, mesh, count, depth, donated)
            return temp, out_bytes, self.block
        finally:
            self.block = outer_block

    def _program(self, program, mesh, count, depth, donated):
        avals = program.avals
        eqns = _live_equations(program, program.equations())
        size = [local_bytes(a) for a in avals]

        def size_of(v):
            return size[v]
        readers: dict[int, list] = {}  # per value: (name, elementwise) of each reader
        for name, ins, outs, _p, _f, _b, _c, elementwise in eqns:
            for v in ins:
                readers.setdefault(v, []).append((name, elementwise))
        outvars = set(program.outvars)
        inputs = set(program.invars) | set(program.constvars)

        # Fused results have no buffer; bitcasts share their operand's. A
        # transpose of a matmul's result is a bitcast: the matmul writes that layout.
        producer = {o: k for k, e in enumerate(eqns) for o in e[2]}
        relayouts = {k for k, (name, ins, *_rest) in enumerate(eqns)
                     if name == "transpose" and ins[0] in producer
                     and eqns[producer[ins[0]]][0] == "dot_general"
                     and len(readers.get(ins[0], ())) == 1 and ins[0] not in outvars}
        fused = set()
        buffer = {v: v for v in range(len(avals))}
        for k, (name, ins, outs, _p, _f, _b, _c, elementwise) in enumerate(eqns):
            if (_bitcast(name) or k in relayouts) and ins:
                for o, v in zip(outs, ins if len(outs) > 1 else ins[:1] * len(outs)):
                    buffer[o] = buffer[v]
            elif _fused(name, elementwise):
                for o in outs:
                    r = readers.get(o, [])
                    if o not in outvars and r and all(_fusing_reader(n, ew) for n, ew in r):
                        fused.add(o)
                    elif name == "transpose" and r and all(
                            n == "dot_general"
                            or (_bitcast(n) and _only_matmuls(o, readers, eqns))
                            for n, _ in r):
                        fused.add(o)  # a matmul reads its operand in either layout
        # A matmul whose only reader adds it to a value of its size writes the sum
        # itself (cuBLAS's beta=1 / XLA's GEMM epilogue): accumulation is free. Its
        # result may reach the add through a change of layout (the matmul writes
        # that layout) and a widening cast (the matmul accumulates in float32 and
        # writes float32: Megatron-LM's gradient accumulation into `main_grad`).
        def matmul_behind(v) -> tuple:
            """(matmul equation, values on the way) when `v` is a matmul's only use."""
            path = []
            while v in producer and v not in outvars and len(readers.get(v, ())) == 1:
                path.append(v)
                j = producer[v]
                name, ins = eqns[j][0], eqns[j][1]
                if name == "dot_general":
                    return j, path
                if not (name == "transpose" or _bitcast(name)
                        or (name == "convert_element_type" and _widens(avals[ins[0]], avals[v]))):
                    break
                v = ins[0]
            return None, path
        epilogue: dict[int, int] = {}  # add equation -> matmul equation
        for k, (name, ins, outs, *_rest) in enumerate(eqns):
            if name in ("add", "add_any") and len(ins) == 2:
                for v in ins:
                    j, path = matmul_behind(v)
                    if j is not None and size_of(v) == size_of(outs[0]):
                        epilogue[k] = j
                        fused.update(path)
                        break
        # A fused value's readers read what it was computed from.
        source: dict[int, list] = {}

        def sources(v):
            if v not in fused:
                return [buffer[v]]
            if v not in source:
                source[v] = []
            return source[v]
        for name, ins, outs, *_ in eqns:
            srcs = [b for v in ins for b in sources(v)]
            for o in outs:
                if o in fused:
                    source[o] = srcs
        op_of_eqn: dict[int, Op] = {}
        op_of_var: dict[int, Op] = {}
        transients, inner_parts = [], []
        for i, eqn in enumerate(eqns):
            name, ins, outs, params, flops, nbytes, is_collective, elementwise = eqn
            in_avals = [avals[v] for v in ins]
            out_avals = [avals[v] for v in outs]
            flops, nbytes = self._local_cost(name, params, in_avals, out_avals, flops, nbytes)
            kernel = _fused_kernel(name, params, in_avals)
            if kernel is not None:
                flops = kernel[0]
                nbytes = float(sum(local_bytes(a) for a in in_avals + out_avals))
            if _bitcast(name) or i in relayouts:
                flops = nbytes = 0.0  # a new view of the same buffer
            # Fusion: fused inputs are not read back, fused results not written.
            nbytes -= sum(size[v] for v in ins if v in fused)
            nbytes -= sum(size[v] for v in outs if v in fused)
            self.peak_parts = {}
            transient, children = (0, []) if kernel is not None else \
                self.sub_programs(name, params, in_avals, mesh, count, depth)
            transients.append(transient)
            inner_parts.append({f"{name} > {label}": n for label, n in self.peak_parts.items()})
            op = Op(name, flops, max(nbytes, 0.0), count,
                    " ".join(a.str_short(True) if a.mesh is None else str(a) for a in out_avals),
                    dtype=out_avals[0].dtype if out_avals else None, depth=depth,
                    deps=list({id(d): d for v in ins if (d := op_of_var.get(v))}.values()),
                    children=children)
            if name == "dot_general":
                op.matmul_dims = _matmul_dims(in_avals, params)
                op_of_eqn[i] = op
            elif kernel is not None:
                op.matmul_dims = kernel[1]
            if i in epilogue:  # the matmul reads the addend and writes the sum
                op_of_eqn[epilogue[i]].bytes_accessed += op.bytes_accessed
                op.flops = op.bytes_accessed = 0.0
            self.ops.append(op)
            self.block.append(op)
            sub_mesh = params.get("mesh", mesh) if name == "shard_map" else mesh
            last_op = op
            if is_collective:
                op.collective = _collective(name, params, in_avals, out_avals, sub_mesh, count)
            elif depth == 0 or mesh is not None:
                last_op = self._implicit_collectives(op, params, in_avals, out_avals, count, depth)
            for o in outs:
                op_of_var[o] = last_op

        donated_in = set()
        if donated:
            donated_in = {v for v, d in zip(program.invars, donated) if d}

        def liveness(order, result_storage=None) -> tuple:
            """(peak, peak of temporaries, what is live at the peak, the buffers the
            results end up in) running the equations in `order`. At the top level,
            given those buffers (from a first run), the peak of temporaries counts
            neither results, donated arguments nor temporaries placed in a result's
            buffer before the result is written."""
            top = depth == 0 and result_storage is not None
            last: dict[int, int] = {}
            for i, k in enumerate(order):
                for v in eqns[k][1]:
                    for b in sources(v):
                        last[b] = i
            for v in program.outvars:
                for b in sources(v):
                    last[b] = len(order)
            frees_at: dict[int, list] = {}
            for b, i in last.items():
                frees_at.setdefault(i, []).append(b)
            live = sum(size[v] for v in donated_in)
            owned = {buffer[v] for v in donated_in}  # buffers counted in `live`
            donated_bufs = sorted(owned)
            live_results = peak_temps = 0
            peak = live
            labels = {b: "donated arguments" for b in owned}
            peak_parts = {"donated arguments": live} if live else {}
            storage = {b: b for b in owned}  # buffer -> the buffer whose storage it took
            not_temporary = owned | (result_storage or set())
            live_temps = 0
            written_at = {}  # result buffer -> when it is first written
            if top:
                for i, k in enumerate(order):
                    for o in eqns[k][2]:
                        if o in result_storage:
                            written_at.setdefault(o, i)
            for i, k in enumerate(order):
                name, ins, outs, params, _f, _b, _c, elementwise = eqns[k]
                # Results take buffers (unless fused, bitcast or written in place).
                for o in outs:
                    if o in fused or buffer[o] != o or o in inputs:
                        continue
                    reuse = None
                    if elementwise:
                        # (through fused operands: a fusion may write over what it reads)
                        reuse = next((b for v in ins for b in sources(v) if b in owned
                                      and last.get(b) == i and size[b] == size[o]), None)
                    elif _declared(name)["kind"] == "control flow":
                        # A loop's final state takes over its initial state's buffer, and a
                        # conditional's result an operand's, when that dies here (updated
                        # in place).
                        reuse = next((b for v in _in_place_operands(name, params, ins, outs, o)
                                      for b in sources(v) if b in owned and last.get(b) == i
                                      and size[b] == size[o]), None)
                    elif o in outvars:
                        # A result aliased to a donated argument read last here is written
                        # into that argument's buffer (XLA's input-output aliasing).
                        reuse = next((b for b in donated_bufs if b in owned and last.get(b) == i
                                      and size[b] == size[o]), None)
                    if reuse is not None:
                        owned.discard(reuse)  # o takes over its storage: live does not change
                        storage[o] = storage[reuse]
                    else:
                        live += size[o]
                        storage[o] = o
                        if o not in not_temporary:
                            live_temps += size[o]
                    owned.add(o)
                    # (a buffer written in place keeps its first writer's name)
                    labels[o] = labels.get(reuse) or _label(name, avals[o])
                    if o in outvars:
                        live_results += size[o]
                transient = transients[k]
                if top:
                    if live_temps + transient > peak_temps:
                        temps = [size[b] for b in owned if storage[b] not in not_temporary]
                        free = [size[b] for b, at in written_at.items() if at > i]
                        here = live_temps + transient - _hosted(temps + [transient], free)
                        if here > peak_temps:
                            peak_temps = here
                            peak_parts = _parts(owned, size, labels, (), inner_parts[k])
                    peak = max(peak, live + transient)
                    for b in frees_at.get(i, ()):
                        if b in owned:
                            owned.discard(b)
                            live -= size[b]
                            if storage[b] not in not_temporary:
                                live_temps -= size[b]
                    continue
                here = live + transient if depth == 0 else live - live_results + transient
                if here > (peak if depth == 0 else peak_temps):
                    peak_parts = _parts(owned, size, labels, () if depth == 0 else outvars,
                                        inner_parts[k])
                peak = max(peak, live + transient)
                peak_temps = max(peak_temps, live - live_results + transient)
                for b in frees_at.get(i, ()):
                    if b in owned:
                        owned.discard(b)
                        live -= size[b]
            return peak, peak_temps, peak_parts, {storage.get(b, b) for v in program.outvars
                                                  for b in sources(v)}

        # XLA schedules for memory: of its schedulers' orders (list, depth-first,
        # post-order) it keeps the one with the smallest peak. Here the program's
        # order and each equation moved as late as its readers allow (a
        # depth-first post-order from the results: a value recomputed for the
        # backward pass is computed where it is read, not where the replayed
        # forward pass had it). (A greedy list order, most bytes freed first, came
        # out below XLA's own CPU peaks: XLA schedules fusions, not primitives.)
        orders = [range(len(eqns))]
        late = _late_order(eqns, producer, outvars)
        if late != list(range(len(eqns))):
            orders.append(late)
        runs = [liveness(order) for order in orders]
        if depth == 0:
            runs = [liveness(order, run[3]) for order, run in zip(orders, runs)]
        # (A sub-program's results are the caller's, live there from the equation
        # on: its temporaries are what else is live at its peak.)
        _peak, peak_temps, peak_parts, _ = min(runs, key=lambda r: r[1])
        out_bytes = sum(size[v] for v in set(program.outvars) if v not in inputs)
        self.peak_parts = peak_parts
        return peak_temps, out_bytes

    def _local_cost(self, name, params, in_avals, out_avals, flops, nbytes):
        """The primitive's cost on one device's blocks of global sharded types."""
        if not any(a.mesh is not None and a.spec and any(a.spec) for a in in_avals + out_avals):
            return flops, nbytes
        global_bytes = sum(_nbytes(a.shape, a.dtype) for a in in_avals + out_avals)
        per_device = sum(local_bytes(a) for a in in_avals + out_avals)
        # Work is split over every mesh axis sharding an operand or a result.
        axes = {}
        for a in in_avals + out_avals:
            if a.mesh is not None:
                sizes = dict(zip(a.mesh.axis_names, a.mesh.axis_sizes))
                for dim_axes in a.spec:
                    for ax in dim_axes:
                        axes[ax] = sizes[ax]
        share = math.prod(axes.values()) if axes else 1
        return flops / share, nbytes * (per_device / global_bytes if global_bytes else 1.0)

    def sub_programs(self, name, params, in_avals, mesh, count, depth) -> tuple:
        """Appends the ops of an equation's sub-programs; returns their temporary
        peak and their ops as (ops of one run, runs) for scheduling."""
        if name == "cond":
            # One branch runs: count the costliest one's work, the largest peak.
            best, best_block, peak, parts = None, [], 0, {}
            for branch in params["branches"]:
                walker = _Walker()
                temp, _, block = walker.program(branch, mesh, count, depth + 1)
                if temp >= peak:
                    peak, parts = temp, walker.peak_parts
                if best is None or _flops(walker.ops) > _flops(best):
                    best, best_block = walker.ops, block
            self.ops.extend(best or [])
            self.peak_parts = parts
            return peak, [(best_block, 1)]
        keys = _declared(name)["sub_program_params"]
        if not keys:
            return 0, []
        runs = int(params["length"]) if name == "scan" else 1
        count *= runs
        if name == "shard_map":
            mesh = params["mesh"]
        peak, children, parts = 0, [], {}
        for key in keys:
            sub = params.get(key)
            if sub is not None:
                temp, outs, block = self.program(sub, mesh, count, depth + 1)
                children.append((block, runs))
                # A loop body's results are its carries, updated in place.
                # (Its results are the equation's, counted live by the caller.)
                if temp >= peak:
                    peak, parts = temp, self.peak_parts
        self.peak_parts = parts
        return peak, children

    def _implicit_collectives(self, op, params, in_avals, out_avals, count, depth) -> Op:
        """Appends the collectives a global Explicit-sharded equation implies;
        returns the last (what reads the equation's results waits for)."""
        last = op
        for c in _implied(op.name, params, in_avals, out_avals):
            c.count = count
            last = Op(c.name, 0.0, 0.0, count, "", collective=c, depth=depth, deps=[last])
            self.ops.append(last)
            self.block.append(last)
        return last


def _late_order(eqns, producer, outvars) -> list:
    """The equations in a depth-first post-order from the program's results:
    each runs just before its first reader needs it (those nothing reads, in
    program order, anchor the walk)."""
    read = {v for _n, ins, *_ in eqns for v in ins}
    order, done = [], set()
    for root, (_n, _i, outs, *_rest) in enumerate(eqns):
        if any(o in read and o not in outvars for o in outs):
            continue
        stack = [(root, False)]
        while stack:
            k, expanded = stack.pop()
            if k in done:
                continue
            if expanded:
                done.add(k)
                order.append(k)
                continue
            stack.append((k, True))
            # operands pushed last-first, so they are visited in operand order
            for v in reversed(eqns[k][1]):
                j = producer.get(v)
                if j is not None and j not in done:
                    stack.append((j, False))
    order.extend(k for k in range(len(eqns)) if k not in done)  # (nothing should remain)
    return order


def _hosted(temps, free) -> int:
    """Bytes of the temporaries `temps` (sizes) placed in results' buffers not yet
    written (`free`, sizes): each buffer takes the largest temporary that fits."""
    temps = sorted(temps, reverse=True)
    hosted = 0
    for n in sorted(free, reverse=True):
        fit = next((j for j, t in enumerate(temps) if t <= n), None)
        if fit is not None:
            hosted += temps.pop(fit)
    return hosted


def _label(name, aval) -> str:
    """A buffer's line in a memory breakdown: what wrote it, and its per-device type."""
    return f"{name} {np.dtype(aval.dtype).name}{list(local_shape(aval))}"


def _parts(owned, size, labels, excluded, inner) -> dict:
    """Bytes per label of the buffers live now (less `excluded` values) and of
    the running sub-program's peak (`inner`)."""
    parts: dict = {}
    for b in owned:
        if b not in excluded:
            parts[labels[b]] = parts.get(labels[b], 0) + size[b]
    for label, n in inner.items():
        parts[label] = parts.get(label, 0) + n
    return parts


def _only_matmuls(v, readers, eqns) -> bool:
    """Whether every bitcast reading `v` is read by matmuls only."""
    for k, (name, ins, outs, *_rest) in enumerate(eqns):
        if v in ins and _bitcast(name):
            if not all(n == "dot_general" for o in outs for n, _ in readers.get(o, [("", 0)])):
                return False
    return True


def _in_place_operands(name, params, ins, outs, o) -> list:
    """The operands whose buffer result `o` of a loop or conditional may take, read off the
    links the primitive declares to its sub-programs: a loop's result takes the buffer of
    the operand carried into it; a result nothing is carried into and that is not stacked
    (a conditional's) may take any operand passed to a sub-program."""
    links = _core.sub_program_links(name, params)
    k = outs.index(o)
    carried, passed, loops = [], [], False
    for _program, in_operand, in_result, _out_result in links["programs"]:
        for i, r in zip(in_operand, in_result):
            loops = loops or r >= 0
            if i >= 0:
                passed.append(ins[i])
                if r == k:
                    carried.append(ins[i])
    stacked = links["stacked_results"]
    if carried or loops or (stacked is not None and k >= stacked):
        return list(dict.fromkeys(carried))
    return list(dict.fromkeys(passed))


def _widens(src, dst) -> bool:
    """Whether a cast from `src` to `dst` only widens a floating-point type."""
    a, b = np.dtype(src.dtype), np.dtype(dst.dtype)
    return (a.kind == "f" or "float" in a.name) and b.kind == "f" and b.itemsize >= a.itemsize


def _flops(ops) -> float:
    return sum(o.flops * o.count for o in ops)


def _matmul_dims(in_avals, params) -> tuple:
    """(batch, m, n, k) of a dot_general on per-device blocks."""
    lc, rc, lb, rb = params["dimension_numbers"]
    lhs, rhs = local_shape(in_avals[0]), local_shape(in_avals[1])
    batch = math.prod(lhs[d] for d in lb)
    k = math.prod(lhs[d] for d in lc)
    m = math.prod(s for d, s in enumerate(lhs) if d not in lc and d not in lb)
    n = math.prod(s for d, s in enumerate(rhs) if d not in rc and d not in rb)
    return batch, m, n, k


def _axes_param(params) -> tuple:
    axes = params.get("axes", params.get("axis_name"))
    if axes is None:
        return ()
    return (axes,) if isinstance(axes, str) else tuple(axes)


def _collective(name, params, in_avals, out_avals, mesh, count) -> Collective | None:
    axes = _axes_param(params)
    if mesh is None or not axes:
        return None
    sizes = dict(zip(mesh.axis_names, mesh.axis_sizes))
    n = math.prod(sizes[a] for a in axes)
    # The collective's communication model (a bound where sizes are known at run time only).
    sent = sum(_core.collective_bytes(name, a, b, n) for a, b in zip(in_avals, out_avals))
    return Collective(name, axes, n, int(sent), mesh, count,
                      dtype=in_avals[0].dtype if in_avals else None)


def _spec_axes(spec) -> set:
    return {a for dim in spec for a in dim}


def _implied(name, params, in_avals, out_avals) -> list:
    """The collectives a global equation's sharded types imply."""
    out = []
    if not in_avals or in_avals[0].mesh is None:
        return out
    mesh = in_avals[0].mesh
    sizes = dict(zip(mesh.axis_names, mesh.axis_sizes))

    def coll(cname, axes, sent):
        axes = tuple(a for a in mesh.axis_names if a in axes)
        n = math.prod(sizes[a] for a in axes)
        return Collective(cname, axes, n, int(sent), mesh, implicit=True,
                          dtype=in_avals[0].dtype)
    if name == "dot_general" and len(in_avals) == 2:
        lc, rc, _, _ = params["dimension_numbers"]
        lspec, rspec = in_avals[0].spec, in_avals[1].spec
        lax_ = {a for d in lc for a in (lspec[d] if lspec else ())}
        rax = {a for d in rc for a in (rspec[d] if rspec else ())}
        both, only_l, only_r = lax_ & rax, lax_ - rax, rax - lax_
        if both:
            n = math.prod(sizes[a] for a in both)
            out.append(coll("psum", both, 2 * local_bytes(out_avals[0]) * (n - 1) // n))
        for axes, operand in ((only_l, in_avals[0]), (only_r, in_avals[1])):
            if axes:
                n = math.prod(sizes[a] for a in axes)
                out.append(coll("all_gather", axes, local_bytes(operand) * (n - 1)))
    elif (all_reduce := _partials_all_reduce(name)) and in_avals[0].spec:
        reduced = {a for d in params.get("axes", ()) for a in in_avals[0].spec[d]}
        if reduced:
            n = math.prod(sizes[a] for a in reduced)
            sent = 2 * local_bytes(out_avals[0]) * (n - 1) // n
            out.append(coll(all_reduce, reduced, sent))
    elif _declared(name)["layout_only"] and out_avals:
        before, after = _spec_axes(in_avals[0].spec or ()), _spec_axes(out_avals[0].spec or ())
        gathered, moved = before - after, before & after
        if gathered:
            n = math.prod(sizes[a] for a in gathered)
            out.append(coll("all_gather", gathered, local_bytes(in_avals[0]) * (n - 1)))
        if moved and [tuple(d) for d in in_avals[0].spec] != [tuple(d) for d in out_avals[0].spec]:
            n = math.prod(sizes[a] for a in moved)
            out.append(coll("all_to_all", moved, local_bytes(out_avals[0]) * (n - 1) // n))
    return out


def _tuple_table_bytes(n_outputs: int) -> int:
    """XLA returns several results as a tuple: a table of one pointer each."""
    return 8 * n_outputs if n_outputs > 1 else 0


def analyze(program, donated=None, arg_local_bytes=None) -> Analysis:
    """The per-device analysis of a traced top-level program. `donated`: per
    input, whether its buffer is given to an aliased result; `arg_local_bytes`:
    per input, its per-device size when its sharding is not in its type."""
    program = program.with_calls_inlined()
    walker = _Walker()
    temp, _, block = walker.program(program, None, 1, 0, donated)
    avals = program.avals
    in_bytes = [local_bytes(avals[v]) for v in program.invars]
    if arg_local_bytes is not None:
        in_bytes = list(arg_local_bytes)
    out_bytes = sum(local_bytes(avals[v]) for v in program.outvars)
    out_bytes += _tuple_table_bytes(len(program.outvars))
    alias = sum(b for b, d in zip(in_bytes, donated or ()) if d)
    args = sum(in_bytes)
    mesh = _program_mesh(program)
    parts = dict(walker.peak_parts)
    if args > alias:
        parts["arguments"] = args - alias
    peak = args + out_bytes - alias + temp
    if peak > sum(parts.values()):
        parts["results not yet written"] = peak - sum(parts.values())
    parts = dict(sorted(parts.items(), key=lambda kv: -kv[1]))
    return Analysis(walker.ops, args, out_bytes, alias, temp, peak, mesh, block, parts)


def _program_mesh(program):
    for a in program.avals:
        if a.mesh is not None:
            return a.mesh
    for name, _i, _o, params, *_ in program.equations():
        if name == "shard_map":
            return params["mesh"]
    return None

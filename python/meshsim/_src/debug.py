"""`meshsim.debug`: seeing where an array's blocks live.

`visualize_array_sharding` prints the table JAX draws with `rich` (its
uncoloured form: same cell sizes and labels) as plain text. Inside a
shard_map body it draws the mesh instead, one cell per device, numbering the
distinct blocks the value's type allows (its VMA): devices along an axis the
value is invariant over hold the same block. That picture is drawn when the
body is traced (once under jit), from the type alone."""
from __future__ import annotations

import itertools
import math
from typing import Callable, NamedTuple

from meshsim import _core
from meshsim._src import core, tree_util
from meshsim._src import devices as devices_lib
from meshsim._src.sharding.mesh import AxisType, Mesh
from meshsim._src.sharding.named_sharding import NamedSharding, Sharding, SingleDeviceSharding
from meshsim._src.sharding.partition_spec import PartitionSpec


def _traced_sharding(aval) -> Sharding:
    """What JAX reports inside jit: the compiled sharding, over the same
    devices with Auto axes and no trailing unsharded dimensions. Inside a
    shard_map body each device sees its whole block: `P()` on the mesh."""
    env = _core.current_axis_env()
    if env is not None:
        return NamedSharding(Mesh.from_core(env[0]), PartitionSpec())
    if aval.mesh is None:
        return SingleDeviceSharding(devices_lib.device(0))
    return _compiled_sharding(Mesh.from_core(aval.mesh), aval.spec)


def _compiled_sharding(mesh: Mesh, spec) -> NamedSharding:
    """A sharding as XLA reports a compiled one: every axis Auto, no trailing
    unsharded dimensions."""
    entries = [None if not axes else axes[0] if len(axes) == 1 else tuple(axes) for axes in spec]
    while entries and entries[-1] is None:
        entries.pop()
    return NamedSharding(mesh.update(axis_types=(AxisType.Auto,) * len(mesh.axis_names)),
                         PartitionSpec(*entries))


class _CollectiveFields(NamedTuple):
    name: str
    axes: tuple
    bytes: int


class Collective(_CollectiveFields):
    """One collective a program ran: JAX's name for it, the mesh axes it spans
    and the bytes the most-receiving device received (as a ring schedule moves
    them); `bytes_sent` and `bytes_received` give each device's share, by
    device id. Compares and unpacks as the tuple `(name, axes, bytes)`."""

    def __new__(cls, name: str, axes: tuple, bytes: int, bytes_sent: dict | None = None,
                bytes_received: dict | None = None, steps: int = 0):
        self = super().__new__(cls, name, axes, bytes)
        self.bytes_sent = dict(bytes_sent or {})
        self.bytes_received = dict(bytes_received or {})
        self.steps = steps  # sequential latency steps of the collective's algorithm
        return self


class record_collectives:
    """`with record_collectives() as log:` lists, in `log`, the collectives
    run inside the block: those global-view code (jitted programs and eager
    ops over explicitly sharded arrays) runs (reshards, all-gathers of
    one-sided sharded contractions, all-reduces of reduced sharded
    dimensions), and those shard_map bodies execute, by their primitive's name
    (`psum_invariant`, `all_gather`, `reduce_scatter`, `all_to_all`,
    `ppermute`, ...) with the bytes one device receives: an all-gather of a
    result of B bytes over n devices B(n-1)/n, a reduce-scatter of a result of
    B bytes B(n-1), an all-reduce of B bytes 2B(n-1)/n, an all-to-all of B
    bytes B(n-1)/n, a ppermute B (only its sources send, only its destinations
    receive). Each record also has `bytes_sent`/`bytes_received` per device
    id. Casts (`pvary`) move nothing and are not listed."""

    def __enter__(self) -> list:
        self.log: list = []
        _core.wait_all_dispatched()  # what was dispatched before does not belong here
        _core.push_collective_recorder()  # (programs run synchronously while it is open)
        return self.log

    def __exit__(self, *exc):
        self.log.extend(Collective(*r) for r in _core.pop_collective_recorder())
        return False


class Dispatch(NamedTuple):
    """One program a dispatch stream ran: its function's name (`device_put`
    for a transfer), the ids of the devices it ran on, the stream (-1: run on
    the calling thread), and when it started and ended, after its inputs were
    ready (seconds of `time.monotonic()`)."""
    name: str
    devices: tuple
    stream: int
    start: float
    end: float
    failed: bool


class record_dispatches:
    """`with record_dispatches() as log:` lists, in `log`, the programs that
    ran asynchronously while the block ran, as the streams timed them (on
    leaving, the block waits for everything dispatched in it). Two programs
    whose intervals intersect ran at the same time."""

    def __enter__(self) -> list:
        self.log: list = []
        _core.wait_all_dispatched()
        _core.push_dispatch_recorder()
        return self.log

    def __exit__(self, *exc):
        _core.wait_all_dispatched()
        self.log.extend(Dispatch(**r) for r in _core.pop_dispatch_recorder())
        return False


_deferred: list | None = None  # (tracer, sharding while traced, callback) waiting for jit's program


class deferred_inspections:
    """While jit traces a function, `inspect_array_sharding` callbacks wait
    until the program is complete (JAX calls them when it compiles). With
    `resolve(trace, program, args)`, values on a mesh with Auto axes are
    reported with the layout sharding propagation gives them for `args`."""

    def __enter__(self):
        global _deferred
        self.outermost = _deferred is None
        self.layouts = None
        if self.outermost:
            _deferred = []
        return self

    def resolve(self, trace, program, args) -> None:
        if self.outermost and _deferred and all(isinstance(a, _core.ArrayImpl) for a in args):
            found = program.auto_layouts(list(args))
            if found is not None:
                self.layouts = (trace, Mesh.from_core(found[0]), found[1])

    def _sharding(self, tracer, traced: Sharding) -> Sharding:
        if self.layouts is None:
            return traced
        trace, mesh, specs = self.layouts
        var = tracer.var_in(trace)
        return traced if var < 0 else _compiled_sharding(mesh, specs[var])

    def __exit__(self, exc_type, *exc):
        global _deferred
        if self.outermost:
            pending, _deferred = _deferred, None
            if exc_type is None:
                for tracer, traced, callback in pending:
                    callback(self._sharding(tracer, traced))
        return False


def inspect_array_sharding(value, *, callback: Callable[[Sharding], None]) -> None:
    """Calls `callback(sharding)` for each array of the pytree `value`: at once
    for concrete arrays; inside `jit`, once the function has been traced."""
    def inspect(x):
        if not isinstance(x, core.Tracer):
            return callback(x.sharding)
        sharding = _traced_sharding(x.aval)
        if _deferred is None:
            return callback(sharding)
        _deferred.append((x, sharding, callback))
    tree_util.tree_map(inspect, value)


def visualize_array_sharding(arr, **kwargs) -> None:
    """Prints which devices hold which block of a 1-D or 2-D array; inside a
    shard_map body, which devices hold the same block of any value."""
    env = _core.current_axis_env()
    if env is not None and isinstance(arr, core.Tracer):
        print(_block_picture(arr.aval, *env, max_width=kwargs.get("max_width", 80)))
        return
    inspect_array_sharding(arr, callback=lambda s: visualize_sharding(arr.shape, s, **kwargs))


def _block_picture(aval, mesh, manual, check_vma: bool, max_width: int = 80) -> str:
    """The mesh as a grid (rows: its first axis; columns: the others, row-major),
    each device labelled with the number of the block it holds. Blocks are
    numbered row-major over the manual axes the value varies over; with
    check_vma=False nothing is known, so every device gets its own number."""
    names, sizes = list(mesh.axis_names), list(mesh.axis_sizes)
    varying = [a for a in names if a in manual and (a in aval.vma or not check_vma)]
    coords = list(itertools.product(*[range(n) for n in sizes]))
    labels = []
    for pos, c in enumerate(coords):
        block = 0
        for a in varying:
            i = names.index(a)
            block = block * sizes[i] + c[i]
        labels.append(f"CPU {mesh.device_ids[pos]}: block {block}")
    count = math.prod(sizes[names.index(a)] for a in varying)
    same = [a for a in names if a not in varying]
    how = (f"varies over {','.join(varying)}" if varying else "the same on every device")
    if varying and same:
        how += f", the same along {','.join(same)}"
    if not check_vma:
        how = "check_vma=False: no VMA, so every device's block counts as its own"
    axes = ", ".join(f"'{a}': {n}" for a, n in zip(names, sizes))
    header = (f"{aval.str_short()}: {count} distinct block{'s' if count != 1 else ''} over "
              f"Mesh({axes}) ({how})")
    rows = sizes[0] if len(sizes) > 1 else 1
    cols = len(labels) // rows
    table = [[(0, 1, 0, 1, labels[r * cols + c]) for c in range(cols)] for r in range(rows)]
    return header + "\n" + _render(table, max_width)


def _chunk_index(index: slice) -> int:
    return 0 if index.start is None else index.start // (index.stop - index.start)


def _fraction(size: int, index: slice) -> float:
    return 1.0 if index.start is None else (index.stop - index.start) / size


def visualize_sharding(shape, sharding: Sharding, *, use_color: bool = True, scale: float = 1.,
                       min_width: int = 9, max_width: int = 80, color_map=None) -> None:
    """Prints the block table of an array of `shape` laid out by `sharding`
    (plain text: `use_color` and `color_map` are accepted and ignored)."""
    shape = tuple(shape)
    if len(shape) not in (1, 2):
        raise ValueError("`visualize_sharding` only works for shapes with 1 and 2 dimensions.")
    if 0 in shape:
        raise ValueError(f"`visualize_sharding` cannot draw an empty array, got shape {shape}")
    rows_cols = shape if len(shape) == 2 else (1, shape[0])
    base_height = int(10 * scale)
    base_width = int(base_height * (shape[1] if len(shape) == 2 else 1) / shape[0])
    kind = next(iter(sharding.device_set)).platform.upper()
    cells: dict[tuple, list] = {}  # (row, col) -> [device ids, height, width]
    for device, index in sharding.devices_indices_map(shape).items():
        index = index if len(shape) == 2 else (slice(None), *index)
        key = tuple(_chunk_index(s) for s in index)
        height = _fraction(rows_cols[0], index[0]) if len(shape) == 2 else None
        cell = cells.setdefault(key, [[], height, _fraction(rows_cols[1], index[1])])
        cell[0].append(device.id)
    table = [[_cell_layout(f"{kind} " + ",".join(map(str, sorted(ids))), height, width,
                          base_height, base_width, min_width, max_width)
              for (r, c), (ids, height, width) in sorted(cells.items()) if r == row]
             for row in range(max(r for r, _ in cells) + 1)]
    try:
        import rich.console  # what JAX draws the table with; meshsim draws its own without it
    except ModuleNotFoundError:
        print(_render(table, max_width))
        return
    _print_with_rich(table, max_width)


def _print_with_rich(table: list[list[tuple]], max_width: int) -> None:
    """Prints the cells through rich's table layout, which narrows, wraps and crops labels of
    columns wider than the console the way JAX's output shows them (without colours)."""
    import rich.align
    import rich.box
    import rich.console
    import rich.padding
    import rich.table
    grid = rich.table.Table(show_header=False, show_lines=True, padding=0, highlight=True,
                            pad_edge=False, box=rich.box.SQUARE)
    for row in table:
        grid.add_row(*(rich.padding.Padding(rich.align.Align(label, "center", vertical="middle"),
                                            (top, right, bottom, left))
                       for top, right, bottom, left, label in row))
    rich.console.Console(width=max_width).print(grid, end="\n\n")


def _cell_layout(label: str, height: float | None, width: float, base_height: int,
                base_width: int, min_width: int, max_width: int) -> tuple:
    """A cell as (padding top, right, bottom, left, label), sized as JAX sizes it."""
    w = min(max(int(width * base_width * 2.5), min_width), max_width)
    h = 1 if height is None else int(height * base_height)
    left, extra = divmod(w - len(label) - 2, 2)
    top, extra_v = divmod(h - 2, 2)
    return (max(top, 0), max(left + extra, 0), max(top + extra_v, 0), max(left, 0), label)


def _render(table: list[list[tuple]], max_width: int) -> str:
    """Draws cells in a box-drawing grid, each column as wide as its widest
    cell, narrowed to fit `max_width` but never below its labels (where rich
    would crop them)."""
    columns = list(zip(*table))
    widths = _fit([max(left + len(label) + right for _, right, _, left, label in col)
                   for col in columns],
                  [max(len(label) for *_, label in col) for col in columns], max_width)

    def rule(left: str, middle: str, right: str) -> str:
        return left + middle.join("─" * w for w in widths) + right

    lines = [rule("┌", "┬", "┐")]
    for i, row in enumerate(table):
        if i:
            lines.append(rule("├", "┼", "┤"))
        height = max(top + 1 + bottom for top, _, bottom, _, _ in row)
        grid = [[" " * w for w in widths] for _ in range(height)]
        for j, (top, right, _, left, label) in enumerate(row):
            inner = widths[j] - left - right
            if inner < len(label):  # a narrowed column: centre the label in it
                left, right, inner = 0, 0, widths[j]
            pad = inner - len(label)
            grid[top][j] = " " * (left + pad // 2) + label + " " * (right + pad - pad // 2)
        lines += ["│" + "│".join(cols) + "│" for cols in grid]
    lines.append(rule("└", "┴", "┘"))
    return "\n".join(lines)


def _fit(widths: list[int], minimum: list[int], max_width: int) -> list[int]:
    """Narrows the widest columns one character at a time until the table
    (with its borders) fits in `max_width` or every column is at its minimum."""
    widths = list(widths)
    while sum(widths) + len(widths) + 1 > max_width:
        j = max(range(len(widths)), key=lambda k: (widths[k] > minimum[k], widths[k], k))
        if widths[j] <= minimum[j]:
            break
        widths[j] -= 1
    return widths

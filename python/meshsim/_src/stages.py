"""jit's staging API, as `jax.stages` has it: `jit(f).trace(*args)` gives a
`Traced` (its `.jaxpr`), `.lower()` a `Lowered`, `.compile()` a `Compiled`
whose `memory_analysis()` and `cost_analysis()` come from abstract compilation
(`_src/planning.py`): arguments may be `ShapeDtypeStruct`s with shardings over
any mesh, including the thousands of devices of a topology description
(`meshsim.experimental.topologies`); nothing is allocated. `as_text()` prints
our program (a jaxpr), not StableHLO or HLO."""
from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import numpy as np

from meshsim import _core
from meshsim._src import core, planning, tracing, tree_util
from meshsim._src.abstract import ShapeDtypeStruct


@dataclasses.dataclass(frozen=True)
class ArgInfo:
    """An argument's type and whether it is donated (`Traced.args_info`)."""
    _aval: Any
    donated: bool

    @property
    def shape(self):
        return self._aval.shape

    @property
    def dtype(self):
        return self._aval.dtype

    def __repr__(self):
        return f"ArgInfo(_aval={self._aval!r}, donated={self.donated})"


@dataclasses.dataclass(frozen=True)
class CompiledMemoryStats:
    """`Compiled.memory_analysis()`: bytes on the largest device, JAX's fields.
    `hbm_capacity_in_bytes` is the device's memory when the mesh's devices come
    from a topology description (None for the simulated CPU devices)."""
    generated_code_size_in_bytes: int
    argument_size_in_bytes: int
    output_size_in_bytes: int
    alias_size_in_bytes: int
    temp_size_in_bytes: int
    peak_memory_in_bytes: int
    host_generated_code_size_in_bytes: int = 0
    host_argument_size_in_bytes: int = 0
    host_output_size_in_bytes: int = 0
    host_alias_size_in_bytes: int = 0
    host_temp_size_in_bytes: int = 0
    hbm_capacity_in_bytes: int | None = None
    device_kind: str | None = None
    # meshsim's own: what is live on the device at its peak, bytes by the
    # equation that wrote each buffer and its per-device type (a sub-program's
    # buffers prefixed by its equation, "shard_map > scan > ..."), largest first.
    live_at_peak: dict = dataclasses.field(default_factory=dict, compare=False)

    @property
    def fits(self) -> bool:
        return self.hbm_capacity_in_bytes is None or \
            self.peak_memory_in_bytes <= self.hbm_capacity_in_bytes

    def summary(self) -> str:
        """A plain statement of the per-device footprint and whether it fits."""
        gib = 2.0 ** 30
        text = (f"per device: arguments {self.argument_size_in_bytes / gib:.2f} GiB, outputs "
                f"{self.output_size_in_bytes / gib:.2f} GiB (aliased "
                f"{self.alias_size_in_bytes / gib:.2f} GiB), temporaries "
                f"{self.temp_size_in_bytes / gib:.2f} GiB, peak "
                f"{self.peak_memory_in_bytes / gib:.2f} GiB")
        if self.hbm_capacity_in_bytes is not None:
            cap = self.hbm_capacity_in_bytes / gib
            if self.fits:
                text += f"; fits in the {cap:.0f} GiB of HBM of a {self.device_kind}"
            else:
                text += (f"; does NOT fit: a {self.device_kind} has {cap:.0f} GiB of HBM, "
                         f"{(self.peak_memory_in_bytes - self.hbm_capacity_in_bytes) / gib:.2f} "
                         "GiB short")
        return text


class Stage:
    """What every stage knows: the arguments' and results' types and trees."""
    fun_name: str
    args_info: Any
    in_tree: Any
    out_tree: Any

    @property
    def in_avals(self):
        return tree_util.tree_map(lambda a: a._aval, self.args_info)

    @property
    def donate_argnums(self) -> tuple:
        flat = tree_util.tree_leaves(self.args_info[0])
        return tuple(i for i, a in enumerate(flat) if a.donated)

    @property
    def out_info(self):
        return tree_util.tree_unflatten(self.out_tree, [planning_struct(a) for a in
                                                        self._program.out_avals])


def planning_struct(aval) -> ShapeDtypeStruct:
    from meshsim._src.abstract import _struct_of
    return _struct_of(aval)


class Traced(Stage):
    """`jit(f).trace(*args)`: the traced program; `.jaxpr`, `.lower()`."""

    def __init__(self, program, out_tree, in_tree, args_info, arg_shardings, fun_name, jitted,
                 arg_values=None, arg_names=None):
        self._program = program
        self._arg_names = arg_names  # each argument leaf's name (`x`, `params['w']`), as errors give it
        self._arg_values = arg_values  # the arrays traced with (None: some were abstract)
        self.out_tree = out_tree
        self.in_tree = in_tree
        self.args_info = args_info
        self._arg_shardings = arg_shardings
        self.fun_name = fun_name
        self._jitted = jitted

    @property
    def jaxpr(self):
        from meshsim._src.jaxpr import ClosedJaxpr
        return ClosedJaxpr(self._program, out_tree=self.out_tree)

    @property
    def out_avals(self):
        return tree_util.tree_unflatten(self.out_tree, list(self._program.out_avals))

    def lower(self, *, lowering_platforms=None, _private_parameters=None) -> Lowered:
        return Lowered(self)


class Lowered(Stage):
    """`Traced.lower()`: `.as_text()`, `.cost_analysis()`, `.compile()`."""

    def __init__(self, traced: Traced):
        self._traced = traced
        self._program = traced._program
        self.out_tree, self.in_tree = traced.out_tree, traced.in_tree
        self.args_info, self.fun_name = traced.args_info, traced.fun_name

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        return str(self._program)

    def compiler_ir(self, dialect: str | None = None):
        return self._program

    def cost_analysis(self) -> dict:
        return self.compile().cost_analysis()

    def compile(self, compiler_options=None) -> Compiled:
        return Compiled(self._traced)


class Compiled(Stage):
    """`Lowered.compile()`: abstract compilation of the program over its mesh."""

    def __init__(self, traced: Traced):
        self._traced = traced
        self._program = traced._program
        self.out_tree, self.in_tree = traced.out_tree, traced.in_tree
        self.args_info, self.fun_name = traced.args_info, traced.fun_name
        donated = [a.donated for a in tree_util.tree_leaves(self.args_info)]
        usable = _usable_donations(self._program, donated)
        local = [_local_bytes_of(a, s) for a, s in
                 zip(self._program.in_avals, traced._arg_shardings)]
        self.analysis = planning.analyze(self._program, usable, local)
        self.topology = _topology_of(self.analysis.mesh)
        stats = self.memory_analysis()
        if not stats.fits:
            warnings.warn(f"{self.fun_name}: {stats.summary()}", ResourceWarning, stacklevel=3)

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        """Our program, then the collectives each device runs, under XLA's instruction names
        (so a search for 'all-reduce(' finds the all-reduce a sharded reduction implies)."""
        lines = [str(self._program).rstrip("\n")]
        collectives = self.analysis.collectives
        if collectives:
            lines.append("// collectives, per device:")
        for c in collectives:
            kind = _core.collective_instruction(c.name) or c.name
            groups = c.replica_groups().tolist()
            lines.append(f"//   {kind}({np.dtype(c.dtype).name if c.dtype is not None else ''}) "
                         f"over {','.join(c.axes)}: replica_groups={groups}, "
                         f"{c.bytes_sent} bytes sent x {c.count}")
        return "\n".join(lines) + "\n"

    def memory_analysis(self) -> CompiledMemoryStats:
        a = self.analysis
        hbm = kind = None
        if self.topology is not None:
            hbm, kind = self.topology.chip.hbm_bytes, self.topology.device_kind
        return CompiledMemoryStats(
            generated_code_size_in_bytes=0, argument_size_in_bytes=a.argument_bytes,
            output_size_in_bytes=a.output_bytes, alias_size_in_bytes=a.alias_bytes,
            temp_size_in_bytes=a.temp_bytes, peak_memory_in_bytes=a.peak_bytes,
            hbm_capacity_in_bytes=hbm, device_kind=kind, live_at_peak=dict(a.live_at_peak))

    def cost_analysis(self) -> dict:
        """flops and bytes accessed of one device, and the bytes it sends in
        collectives: in all (`collective bytes`) and per mesh axes
        (`collective bytes (fsdp, tp)`)."""
        a = self.analysis
        out = {"flops": float(a.flops), "bytes accessed": float(a.bytes_accessed)}
        by_axes = a.collective_bytes_by_axes()
        out["collective bytes"] = float(sum(by_axes.values()))
        for axes, n in sorted(by_axes.items()):
            out[f"collective bytes ({', '.join(axes)})"] = float(n)
        return out

    @property
    def input_shardings(self):
        shardings = [_sharding_of(a, s) for a, s in
                     zip(self._program.in_avals, self._traced._arg_shardings)]
        return tree_util.tree_unflatten(self.in_tree, shardings)

    @property
    def output_shardings(self):
        """The results' shardings as JAX reports them: jit's out_shardings as given; over
        Explicit axes the results' types; over Auto axes the layouts propagation gives the
        arrays traced with, named as a call's results are (auto_names)."""
        from meshsim._src.sharding import auto_names, jit_shardings
        avals = list(self._program.out_avals)
        given = [None] * len(avals)
        out_shardings = self._traced._jitted._out_shardings
        if out_shardings is not None:
            example = tree_util.tree_unflatten(self.out_tree, avals)
            given = [s if s is None else jit_shardings._resolved(s, "out_shardings",
                                                                 self._traced._jitted._api)
                     for s in jit_shardings._broadcast(out_shardings, example, "out_shardings")]
        layouts = self._auto_layouts()
        shardings = []
        for i, (aval, sharding) in enumerate(zip(avals, given)):
            if sharding is None and layouts is not None and layouts[i] is not None:
                sharding = auto_names.jax_name(layouts[i], self._origin, len(aval.shape))
            shardings.append(_sharding_of(aval, sharding))
        return tree_util.tree_unflatten(self.out_tree, shardings)

    def _auto_layouts(self) -> list | None:
        """Per result, the NamedSharding propagation lays it out as over a mesh with Auto
        axes, for the arrays traced with (None without such a mesh or arrays)."""
        from meshsim._src.debug import _compiled_sharding
        from meshsim._src.sharding.mesh import Mesh
        values = self._traced._arg_values
        self._origin = None
        if values is None:
            return None
        from meshsim._src.sharding import auto_names
        self._origin = auto_names.origin_of(values)
        found = self._program.auto_layouts(list(values))
        if found is None:
            return None
        mesh, specs = Mesh.from_core(found[0]), found[1]
        return [_compiled_sharding(mesh, specs[v]) if 0 <= v < len(specs) else None
                for v in self._program.outvars]

    def _check_argument_types(self, leaves) -> None:
        names = self._traced._arg_names or []
        mismatches = [
            f"Argument '{names[i] if i < len(names) else f'args[{i}]'}' compiled with "
            f"{info._aval.str_short()} and called with {x.aval.str_short()}"
            for i, (x, info) in enumerate(zip(leaves, tree_util.tree_leaves(self.args_info)))
            if (x.aval.shape, x.aval.dtype) != (info._aval.shape, info._aval.dtype)]
        if mismatches:
            shown = 5
            which = f"The first {shown} of {len(mismatches)}" if len(mismatches) >= shown else "The"
            raise TypeError(
                "Argument types differ from the types for which this computation was compiled. Perhaps "
                "you are calling the compiled executable with a different enable_x64 mode than when it "
                f"was AOT compiled? {which} mismatches are:\n" + "\n".join(mismatches[:shown]))

    def __call__(self, *args, **kwargs):
        if self.topology is not None:
            raise ValueError(f"{self.fun_name} was compiled for {self.topology.name}, whose "
                             "devices describe hardware and cannot run programs; compile it "
                             "for a mesh of jax.devices() to run it")
        jitted = self._traced._jitted
        if jitted._in_shardings is not None:
            from meshsim._src.sharding import jit_shardings
            args = jit_shardings.place_arguments(jitted._in_shardings, args,
                                                 _dynamic_names(jitted._sig), api=jitted._api)
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        if in_tree != self.in_tree:
            raise TypeError(f"Function compiled with input pytree does not match the input "
                            f"pytree it was called with. Expected {self.in_tree}, got {in_tree}")
        # A transformation would change the signature the program was compiled for.
        tracer = next((x for x in leaves if isinstance(x, core.Tracer)), None)
        if tracer is not None:
            raise TypeError("Cannot apply JAX transformations to a function lowered and compiled for a "
                            f"particular signature. Detected argument of Tracer type {type(tracer)}.")
        leaves = [core.asarray_value(x) for x in leaves]
        self._check_argument_types(leaves)
        donated = [a.donated for a in tree_util.tree_leaves(self.args_info)]
        usable = _usable_donations(self._program, donated) if any(donated) else None
        paths = [tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path((args, kwargs))[0]]
        return jitted.run_program(
            self._program, self.out_tree, usable, leaves,
            lambda i: f"{self.fun_name}{paths[i]}" if i < len(paths) else f"args[{i}]")


Wrapped = None  # set by `meshsim.stages` to the jit wrapper's class


def trace(jitted, args: tuple, kwargs: dict) -> Traced:
    """`jitted.trace(*args, **kwargs)`: array or ShapeDtypeStruct leaves."""
    sig = jitted._sig
    static, dyn_args, dyn_kwargs = sig.split(args, kwargs)
    if jitted._in_shardings is not None:
        from meshsim._src.sharding import jit_shardings
        dyn_args = jit_shardings.place_arguments(jitted._in_shardings, tuple(dyn_args),
                                                 _dynamic_names(sig), api=jitted._api)
    program, out_tree = jitted._trace_for_types(static, list(dyn_args), dyn_kwargs)
    leaves, in_tree = tree_util.tree_flatten((list(dyn_args), dyn_kwargs))
    in_tree = tree_util.tree_structure((tuple(dyn_args), dyn_kwargs))
    donated = sig.donated_leaf_mask(args, kwargs)
    shardings = [getattr(x, "sharding", None) for x in leaves]
    infos = [ArgInfo(a, d) for a, d in zip(program.in_avals, donated)]
    args_info = tree_util.tree_unflatten(in_tree, infos)
    name = getattr(jitted._fun, "__name__", "")
    values = _stand_ins(leaves)
    names = tracing.argument_names(
        jitted._fun, tuple(tracing.STATIC if i in sig.static_argnums else a for i, a in enumerate(args)),
        {k: tracing.STATIC if k in sig.static_argnames else v for k, v in kwargs.items()})
    return Traced(program, out_tree, in_tree, args_info, shardings, name, jitted, values, names)


def _dynamic_names(sig) -> list[str]:
    """The names of the positional parameters that are not static (a Compiled's arguments)."""
    return [n for i, n in enumerate(sig.params) if i not in sig.static_argnums]


def _stand_ins(leaves: list) -> list | None:
    """Arrays laid out as the traced arguments, to ask propagation for the results' layouts:
    the arrays themselves, a ShapeDtypeStruct's zeros (a broadcast: one element's buffer)
    where its sharding is over simulated devices; None when some argument has no stand-in."""
    from meshsim._src.sharding.named_sharding import NamedSharding
    out = []
    for x in leaves:
        if isinstance(x, _core.ArrayImpl):
            out.append(x)
            continue
        sharding = getattr(x, "sharding", None)
        if not isinstance(x, ShapeDtypeStruct) or not (
                sharding is None or isinstance(sharding, NamedSharding)):
            return None
        if sharding is not None:
            devices = getattr(sharding.mesh, "devices", None)  # None: an abstract mesh
            if devices is None or devices.size == 0 or \
                    getattr(devices.flat[0], "topology", None) is not None:
                return None
        from meshsim._src.numpy.creation import zeros
        out.append(zeros(x.shape, x.dtype, device=sharding))
    return out


def _usable_donations(program, donated: list) -> list:
    if not any(donated):
        return donated
    from meshsim._src.api import usable_donations
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return usable_donations(program, donated)


def _spec_entries(sharding) -> list | None:
    spec = getattr(sharding, "spec", None)
    if spec is None:
        return None
    # The partitions alone: pending sums (unreduced/reduced) do not split the blocks.
    return [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec.partitions]


def _local_bytes_of(aval, sharding) -> int:
    """An argument's per-device bytes: its type's sharding, or the one it came with."""
    entries = _spec_entries(sharding)
    mesh = getattr(sharding, "mesh", None)
    if entries is None or mesh is None:
        return planning.local_bytes(aval)
    sizes = dict(zip(mesh.axis_names, mesh.axis_sizes))
    shape = list(aval.shape)
    for d, axes in enumerate(entries):
        shape[d] //= math.prod(sizes[a] for a in axes)
    return int(math.prod(shape)) * np.dtype(aval.dtype).itemsize


def _sharding_of(aval, given):
    from meshsim._src.sharding.mesh import AbstractMesh, Mesh
    from meshsim._src.sharding.named_sharding import (NamedSharding, SingleDeviceSharding,
                                                      sharding_from_core)
    from meshsim._src import devices as devices_lib
    if given is not None and not isinstance(given, SingleDeviceSharding) and \
            hasattr(given, "spec"):
        return given
    sharding = getattr(aval, "sharding", None)
    if aval.mesh is not None and sharding is not None:
        if isinstance(sharding, _core.ShardingCore):
            return sharding_from_core(sharding)
        if isinstance(aval.mesh, _core.MeshCore) and isinstance(sharding.mesh, AbstractMesh):
            # The type names the abstract mesh; a compiled program runs on the concrete one.
            return NamedSharding(Mesh.from_core(aval.mesh), sharding.spec)
        return sharding
    return given if given is not None else SingleDeviceSharding(devices_lib.device(0))


def _topology_of(core_mesh):
    """The topology description a mesh's devices come from (None: CPU devices)."""
    if core_mesh is None:
        return None
    from meshsim._src import topologies
    return topologies.topology_of_mesh(core_mesh)

"""shard_map: write the program one device runs, on its local blocks.

`shard_map(f, mesh=, in_specs=, out_specs=)(*args)` splits each argument into
blocks as its in_spec says, traces `f` once on the block types (each block
varies over the mesh axes its spec names: VMA typing), checks every output
against its out_spec, and binds one `shard_map` primitive whose body runs on
every device of the mesh (runtime/mesh_executor.h). Its results are global
arrays assembled from the blocks as out_specs say."""
from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable

from meshsim import _core
from meshsim._src import core, tree_util
from meshsim._src.sharding.mesh import AbstractMesh, AxisType, Mesh, context_mesh, use_abstract_mesh
from meshsim._src.sharding.partition_spec import PartitionSpec

__all__ = ["shard_map"]


class _Infer:
    """`in_specs` left out: taken from each argument's sharding."""

    def __repr__(self):
        return "Infer"


Infer = _Infer()


class DuplicateSpecError(ValueError):
    """A spec maps one mesh axis to two dimensions."""


def shard_map(f: Callable | None = None, /, *, out_specs, in_specs=Infer, mesh=None,
              axis_names=frozenset(), check_vma: bool = True):
    """Maps `f` over blocks of its arguments on every device of `mesh` (the
    context mesh when None). `in_specs`/`out_specs` are pytree prefixes of the
    arguments/results whose leaves are PartitionSpecs; `axis_names` are the
    mesh axes made manual (all of them by default)."""
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                 axis_names=axis_names, check_vma=check_vma)
    if not callable(f):
        raise TypeError(f"shard_map requires a callable for its first argument, but got {f!r}")
    return _ShardMapped(f, mesh, in_specs, out_specs, frozenset(axis_names), check_vma)


def _spec_leaf(x) -> bool:
    return x is None or isinstance(x, PartitionSpec)


def _fun_name(f) -> str:
    return getattr(f, "__name__", type(f).__name__)


def _as_spec(spec) -> PartitionSpec:
    return PartitionSpec() if spec is None else spec


def _spec_axes(spec: PartitionSpec) -> list[str]:
    return [a for d in range(len(spec)) for a in spec.axes_of(d)]


def _core_spec(spec: PartitionSpec, ndim: int) -> list[list[str]]:
    return [list(spec.axes_of(d)) for d in range(min(len(spec), ndim))]


class _ShardMapped:
    def __init__(self, f, mesh, in_specs, out_specs, axis_names, check_vma):
        functools.update_wrapper(self, f)
        self.f = f
        self.mesh = mesh
        self.in_specs = in_specs
        self.out_specs = out_specs
        self.axis_names = axis_names
        self.check_vma = check_vma

    # --- the mesh and its manual axes ---------------------------------------

    def _resolve_mesh(self) -> Mesh:
        mesh = self.mesh
        if mesh is None or isinstance(mesh, AbstractMesh):
            ctx = context_mesh()
            if ctx.empty:
                raise ValueError("The context mesh cannot be empty. Use `jax.set_mesh(mesh)` to "
                                 "enter into a mesh context, or pass `mesh=` to `jax.shard_map`.")
            if mesh is not None and ctx.abstract_mesh != mesh:
                raise ValueError(f"shard_map's mesh {mesh} does not match the context mesh {ctx}")
            mesh = ctx
        if not isinstance(mesh, Mesh):
            raise TypeError(f"shard_map requires a `jax.sharding.Mesh` instance for its `mesh` "
                            f"argument, but got {mesh} of type {type(mesh)}.")
        if mesh.empty:
            raise ValueError("shard_map requires a non-empty mesh")
        unknown = [a for a in self.axis_names if a not in mesh.axis_names]
        if unknown:
            raise ValueError(f"shard_map axis_names {sorted(self.axis_names)} include "
                             f"{unknown[0]!r}, which is not an axis of the mesh {mesh}")
        return mesh

    def _manual_axes(self, mesh: Mesh) -> list[str]:
        return [a for a in mesh.axis_names if not self.axis_names or a in self.axis_names]

    # --- specs --------------------------------------------------------------

    def _broadcast_specs(self, specs, tree, what: str) -> list:
        try:
            return tree_util.tree_leaves(tree_util.tree_broadcast(specs, tree, is_leaf=_spec_leaf),
                                         is_leaf=_spec_leaf)
        except ValueError:
            err = next(tree_util._prefix_error((), specs, tree, _spec_leaf), None)
            if err is None:
                raise
            raise err(f"shard_map {what}") from None

    def _check_spec(self, spec, mesh: Mesh, manual: list[str], what: str) -> PartitionSpec:
        if not isinstance(spec, PartitionSpec):
            raise TypeError(f"shard_map {what} must be PartitionSpecs (or None), got {spec!r}")
        seen = set()
        for a in _spec_axes(spec):
            if a not in manual:
                raise ValueError(
                    f"shard_map {what} argument must refer to an axis marked as manual "
                    f"({frozenset(manual)}), but:\n\n  {what} refers to {a!r}\n\n"
                    f"Check the {what} values passed to shard_map.")
            if a in seen:
                raise DuplicateSpecError(
                    "A single NamedSharding spec specification can map every mesh axis to at "
                    f"most one positional dimension, but {spec} has duplicate entries for `{a}`")
            seen.add(a)
        return spec

    def _arg_desc(self, i: int) -> str:
        try:
            names = list(inspect.signature(self.f).parameters)
        except (TypeError, ValueError):
            names = []
        where = f"args[{i}]"
        if i < len(names):
            return f"{where}, where {where} is bound to {_fun_name(self.f)}'s parameter '{names[i]}'"
        return where

    def _check_arg(self, i: int, x, spec: PartitionSpec, mesh: Mesh) -> None:
        aval = x.aval
        name = _fun_name(self.f)
        if len(spec) > aval.ndim:
            raise ValueError(
                f"shard_map applied to the function '{name}' was given an in_specs entry which is "
                "too long to be compatible with the corresponding input value from the "
                f"function:\n\nin_specs is {spec} which has length {len(spec)}, but the passed "
                f"{self._arg_desc(i)}, has shape {aval.str_short()}, which has rank {aval.ndim} "
                f"(and {aval.ndim} < {len(spec)})\n\nEntries in in_specs must be of length no "
                "greater than the number of axes in the corresponding input value.\n\nEither "
                f"revise the spec to be shorter, or modify '{name}' so that its inputs have "
                "sufficient rank.")
        for d in range(len(spec)):
            axes = spec.axes_of(d)
            size = math.prod(mesh.shape[a] for a in axes)
            if aval.shape[d] % size:
                where = (f"mesh axis {axes[0]!r} (of size {size})" if len(axes) == 1 else
                         f"mesh axes {axes} (of total size {size})")
                raise ValueError(
                    f"shard_map applied to the function '{name}' was given argument arrays with "
                    "axis sizes that are not evenly divisible by the corresponding mesh axis "
                    f"sizes:\n\nThe mesh given has shape {tuple(mesh.shape.values())} with corresponding "
                    f"axis names {mesh.axis_names}.\n\nthe passed {self._arg_desc(i)} of shape "
                    f"{aval.str_short()}, corresponds to in_specs of value {spec}, which maps "
                    f"array axis {d} (of size {aval.shape[d]}) to {where}, but {size} does not "
                    f"evenly divide {aval.shape[d]}\n\nArray arguments' axis sizes must be evenly "
                    "divisible by the mesh axis or axes indicated by the corresponding elements "
                    "of the argument's in_specs entry. Consider checking that in_specs are "
                    f"correct, and if so consider changing the mesh axis sizes or else padding "
                    f"the input and adapting '{name}' appropriately.")
        # An argument already sharded over Explicit axes must be sharded as its in_spec
        # says (JAX asks for an explicit reshard); unsharded values are split here.
        typed = [tuple(axes) for axes in aval.spec]
        if any(typed):
            want = [tuple(a for a in spec.axes_of(d) if a in mesh.explicit_axes)
                    for d in range(aval.ndim)]
            if typed != want:
                have = PartitionSpec(*[None if not t else t[0] if len(t) == 1 else t
                                       for t in typed])
                raise ValueError(
                    f"in_specs passed to shard_map: {spec.padded(aval.ndim)} does not match the "
                    f"specs of the input: {have} for arg: {aval.str_short()}. `in_specs` is an "
                    "optional argument so you can omit specifying it and shard_map will infer the "
                    "in_specs from the arguments. If you want to reshard your inputs, you can use "
                    "`jax.reshard` on the arguments and then pass those args to shard_map.")

    def _infer_spec(self, x, mesh: Mesh) -> PartitionSpec:
        sharding = getattr(x, "sharding", None) if isinstance(x, core.Array) else None
        spec = getattr(sharding, "spec", None)
        if spec is not None and getattr(sharding, "mesh", None) == mesh:
            return spec
        if x.aval.spec and any(x.aval.spec):
            return PartitionSpec(*[None if not t else t[0] if len(t) == 1 else tuple(t)
                                   for t in x.aval.spec])
        return PartitionSpec()

    # --- the output check ---------------------------------------------------

    def _check_outputs(self, outs, specs, mesh: Mesh, manual: list[str], out_tree) -> list:
        """Implicitly casts each output to varying over its spec's axes, then
        checks it varies over nothing else (JAX's replication check)."""
        failures = []
        checked = []
        paths = [tree_util.keystr(p) for p, _ in
                 tree_util.tree_flatten_with_path(tree_util.tree_unflatten(out_tree, outs))[0]]
        for x, spec, path in zip(outs, specs, paths):
            if len(spec) > x.ndim:
                raise ValueError(
                    f"shard_map applied to the function '{_fun_name(self.f)}' was given out_specs "
                    f"which are too long to be compatible with the corresponding output value: "
                    f"out_specs{path} is {spec} which has length {len(spec)}, but the "
                    f"corresponding output has shape {x.aval.str_short()}, of rank {x.ndim}.")
            if self.check_vma:
                axes = _spec_axes(spec)
                missing = tuple(a for a in manual if a in axes and a not in x.aval.vma)
                if missing:
                    x = core.bind1("pvary", x, axes=missing)
                extra = [a for a in manual if a in x.aval.vma and a not in axes]
                if extra:
                    failures.append((path, spec, axes, x.aval.vma, extra))
            checked.append(x)
        if failures:
            raise ValueError(self._replication_error(failures, mesh, manual))
        return checked

    def _replication_error(self, failures, mesh: Mesh, manual: list[str]) -> str:
        order = lambda names: ",".join(a for a in mesh.axis_names if a in names)  # noqa: E731
        msgs = []
        for path, spec, axes, vma, extra in failures:
            unmentioned = [a for a in manual if a not in axes]
            if len(unmentioned) > 1:
                msgs.append(
                    f"out_specs{path} is {spec} which implies that the corresponding output value "
                    f"is only varying across mesh axes {{{order(axes)}}} and not "
                    f"{{{order(extra)}}}, but it was inferred to be possibly varying over "
                    f"{{{order(vma)}}}")
            else:
                msgs.append(
                    f"out_specs{path} is {spec} which implies that the corresponding output value "
                    f"is replicated across mesh axis '{unmentioned[0]}', but could not infer "
                    "replication over any axes")
        body = msgs[0] if len(msgs) == 1 else "\n\n".join("* " + m for m in msgs)
        return (f"shard_map applied to the function '{_fun_name(self.f)}' was given out_specs "
                "which require replication which can't be statically inferred given the mesh:\n\n"
                f"The mesh given has shape {tuple(mesh.shape.values())} with corresponding axis names "
                f"{mesh.axis_names}.\n\n{body}\n\nCheck if these output values are meant to be "
                "replicated over those mesh axes. If not, consider revising the corresponding "
                "out_specs entries. If so, consider disabling the check by passing the "
                "check_vma=False argument to `jax.shard_map`.")

    # --- the call -----------------------------------------------------------

    def __call__(self, *args):
        mesh = self._resolve_mesh()
        manual = self._manual_axes(mesh)
        leaves, in_tree = tree_util.tree_flatten(args)
        leaves = [core.asarray_value(x) for x in leaves]
        if self.in_specs is Infer:
            in_specs = [self._infer_spec(x, mesh) for x in leaves]
        else:
            specs = self.in_specs
            if isinstance(specs, list):
                specs = tuple(specs)
            if not (_spec_leaf(specs) or isinstance(specs, tuple)):
                raise TypeError(f"shard_map in_specs must be a tuple (one entry per argument) or "
                                f"a PartitionSpec, got {specs!r}")
            in_specs = [_as_spec(s) for s in self._broadcast_specs(specs, tuple(args), "in_specs")]
        for i, (x, spec) in enumerate(zip(leaves, in_specs)):
            self._check_spec(spec, mesh, manual, "in_specs")
            self._check_arg(i, x, spec, mesh)

        body, out_tree, out_specs, captures = self._trace(leaves, in_tree, in_specs, mesh, manual)
        ndims = [x.ndim for x in leaves] + [c.ndim for c in captures]
        all_specs = in_specs + [PartitionSpec()] * len(captures)
        outs = _core.bind_shard_map(
            list(leaves) + list(captures), body, mesh.core_mesh,
            [_core_spec(s, n) for s, n in zip(all_specs, ndims)],
            [_core_spec(s, a.ndim) for s, a in zip(out_specs, body.out_avals)],
            manual, self.check_vma)
        return tree_util.tree_unflatten(out_tree, list(outs))

    def _trace(self, leaves, in_tree, in_specs, mesh: Mesh, manual: list[str]):
        block_mesh = mesh.abstract_mesh.update_axis_types({a: AxisType.Manual for a in manual})
        trace = _core.push_trace()
        _core.push_axis_env(mesh.core_mesh, manual, self.check_vma)
        try:
            with use_abstract_mesh(block_mesh):
                tracers = []
                for x, spec in zip(leaves, in_specs):
                    vma = [a for a in manual if a in _spec_axes(spec)] if self.check_vma else []
                    aval = _core.block_aval(x.aval, mesh.core_mesh, _core_spec(spec, x.ndim), vma)
                    tracers.append(trace.new_input(aval))
                out = self.f(*tree_util.tree_unflatten(in_tree, tracers))
                out_leaves, out_tree = tree_util.tree_flatten(out)
                out_leaves = [core.asarray_value(x) for x in out_leaves]
                specs = self.out_specs
                if isinstance(specs, list):
                    specs = tuple(specs)
                out_specs = [_as_spec(s) for s in self._broadcast_specs(specs, out, "out_specs")]
                for spec in out_specs:
                    self._check_spec(spec, mesh, manual, "out_specs")
                out_leaves = self._check_outputs(out_leaves, out_specs, mesh, manual, out_tree)
                body, captures = trace.finish_capturing(out_leaves)
        finally:
            _core.pop_axis_env()
            _core.pop_trace(trace)
        return body, out_tree, out_specs, captures


def axis_env():
    """(mesh, manual axes, check_vma) of the shard_map body being traced, or None."""
    return _core.current_axis_env()

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
from meshsim._src import core, eager_shard_map, tracing, tree_util
from meshsim._src.sharding.mesh import (AbstractMesh, AxisType, Mesh, context_mesh,
                                        get_abstract_mesh, use_abstract_mesh)
from meshsim._src.sharding.named_sharding import NamedSharding
from meshsim._src.sharding.partition_spec import PartitionSpec

__all__ = ["shard_map"]


def _spec_entries(typed) -> list:
    """PartitionSpec entries for per-dimension axis tuples (a lone axis by name)."""
    return [None if not t else t[0] if len(t) == 1 else t for t in typed]


def _in_spec_mismatch(spec, have, aval) -> ValueError:
    return ValueError(
        f"in_specs passed to shard_map: {spec.padded(aval.ndim)} does not match the "
        f"specs of the input: {have} for arg: {aval.str_short()}. `in_specs` is an "
        "optional argument so you can omit specifying it and shard_map will infer the "
        "in_specs from the arguments. If you want to reshard your inputs, you can use "
        "`jax.reshard` on the arguments and then pass those args to shard_map.")


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
    return _ShardMapped(f, mesh, in_specs, out_specs, axis_names, check_vma)


def _spec_leaf(x) -> bool:
    return x is None or isinstance(x, PartitionSpec)


def _is_spec(x) -> bool:
    return isinstance(x, PartitionSpec)


class _Keyed:
    """A spec and its key path in the specs pytree (e.g. "[0]['w']")."""

    __slots__ = ("path", "spec")

    def __init__(self, path: str, spec):
        self.path, self.spec = path, spec


def _is_keyed(x) -> bool:
    return isinstance(x, _Keyed)


def _fun_name(f) -> str:
    return getattr(f, "__name__", type(f).__name__)


def _as_spec(spec):
    return PartitionSpec() if spec is None else spec


def _spec_axes(spec: PartitionSpec) -> list[str]:
    return [a for d in range(len(spec)) for a in spec.axes_of(d)]


def _core_spec(spec: PartitionSpec, ndim: int) -> list[list[str]]:
    return [list(spec.axes_of(d)) for d in range(min(len(spec), ndim))]


def _bullets(msgs: list[str]) -> str:
    """One message as is; several as "* " bullets separated by blank lines."""
    return msgs[0] if len(msgs) == 1 else "\n\n".join("* " + m for m in msgs)


def _in_eager_body() -> bool:
    """Whether the innermost shard_map body runs un-jitted, on concrete per-device values."""
    return bool(eager_shard_map._frames) and eager_shard_map._frames[-1].trace is _core.current_trace()


def _rank_error(name: str, kind: str, msgs: list[str]) -> str:
    return (f"shard_map applied to the function '{name}' was given an {kind}_specs entry which "
            f"is too long to be compatible with the corresponding {kind}put value from the "
            f"function:\n\n{_bullets(msgs)}\n\nEntries in {kind}_specs must be of length no "
            f"greater than the number of axes in the corresponding {kind}put value.\n\nEither "
            f"revise the spec to be shorter, or modify '{name}' so that its {kind}puts have "
            "sufficient rank.")


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
        """The concrete mesh, checked as JAX checks it when the function is called."""
        mesh = self.mesh
        ctx = get_abstract_mesh()
        if mesh is None:
            if ctx.empty:
                raise ValueError("The context mesh cannot be empty. Use `jax.set_mesh(mesh)` to "
                                 "enter into a mesh context")
        elif not isinstance(mesh, (Mesh, AbstractMesh)):
            raise TypeError("shard_map requires a `jax.sharding.Mesh` or a "
                            "`jax.sharding.AbstractMesh` instance for its second argument, but "
                            f"got {mesh} of type {type(mesh)}.")
        elif not ctx.empty and mesh.abstract_mesh != ctx:
            raise ValueError(f"The context mesh {ctx} should match the mesh passed to shard_map "
                             f"{mesh}")
        if mesh is None or isinstance(mesh, AbstractMesh):
            mesh = context_mesh()  # the devices behind the (abstract) context mesh
            if mesh.empty:
                raise ValueError("shard_map with an AbstractMesh (or inside another shard_map) "
                                 "needs a concrete context mesh: use `jax.set_mesh(mesh)`")
        if mesh.empty:
            raise ValueError(f"shard_map requires a non-empty mesh. Got {mesh}")
        names = self.axis_names
        if not isinstance(names, (frozenset, set)):
            raise TypeError("`axis_names` argument of shard_map should be of type `frozenset` or "
                            f"`set`. Got type: {type(names)}")
        if not frozenset(names) <= frozenset(mesh.axis_names):
            raise ValueError(f"jax.shard_map requires axis_names={frozenset(names)} to be a subset "
                             f"of mesh.axis_names={frozenset(mesh.axis_names)}")
        return mesh

    def _manual_axes(self, mesh: Mesh) -> list[str]:
        return [a for a in mesh.axis_names if not self.axis_names or a in self.axis_names]

    # --- specs ---------------------------------------------------------------

    def _check_specs(self, specs, manual: list[str], what: str) -> None:
        """Every leaf is a PartitionSpec (or None for in_specs) naming manual
        axes, each at most once (JAX's `_check_specs` messages)."""
        entries = [(tree_util.keystr(k), x) for k, x in
                   tree_util.tree_leaves_with_path(specs, is_leaf=_spec_leaf) if x is not None]
        msgs = [f"  {what}{k} is {x} of type {type(x).__name__}, "
                for k, x in entries if not isinstance(x, PartitionSpec)]
        if msgs:
            raise TypeError(f"shard_map {what} argument must be a pytree of "
                            "`jax.sharding.PartitionSpec` instances, but:\n\n" + "\n\n".join(msgs)
                            + f"\n\nCheck the {what} values passed to shard_map.")
        msgs = [f"  {what}{k} refers to {a!r}" for k, x in entries for a in _spec_axes(x)
                if a not in manual]
        if msgs:
            raise ValueError(f"shard_map {what} argument must refer to an axis marked as manual "
                             f"({frozenset(manual)}), but:\n\n" + "\n\n".join(msgs)
                             + f"\n\nCheck the {what} values passed to shard_map.")
        for _, spec in entries:
            axes = _spec_axes(spec)
            dup = next((a for i, a in enumerate(axes) if a in axes[:i]), None)
            if dup is not None:
                raise DuplicateSpecError(
                    "A single NamedSharding spec specification can map every mesh axis to at "
                    f"most one positional dimension, but {spec} has duplicate entries for `{dup}`")

    def _keyed_specs(self, specs, tree, what: str) -> list[_Keyed]:
        """The spec of each leaf of `tree` with its key path in `specs`, which
        is a pytree prefix of `tree`. None in in_specs is a spec (replicated);
        in out_specs it is an empty subtree, as in JAX."""
        is_leaf = _spec_leaf if what == "in_specs" else _is_spec
        keyed = tree_util.tree_map_with_path(
            lambda k, s: _Keyed(tree_util.keystr(k), _as_spec(s)), specs, is_leaf=is_leaf)
        try:
            return tree_util.broadcast_prefix(keyed, tree, is_leaf=_is_keyed)
        except ValueError:
            err = next(tree_util._prefix_error((), specs, tree, is_leaf), None)
            if err is None:
                raise
            raise err(f"shard_map {what}") from None

    def _arg_extra(self, args: tuple, i: int) -> str:
        """How JAX names positional argument `i` after `args[i]`."""
        name = _fun_name(self.f)
        try:
            bound = inspect.signature(self.f).bind(*args)
        except (TypeError, ValueError):
            return ""
        params = [p for p in bound.signature.parameters.values()
                  if p.kind not in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD)]
        if i >= len(params) or params[i].kind == inspect.Parameter.VAR_POSITIONAL:
            return (f", where args[{i}] is the index {i - len(params) + 1} component of {name}'s "
                    f"varargs parameter '{params[-1].name}',")
        return f", where args[{i}] is bound to {name}'s parameter '{params[i]}',"

    def _check_args(self, args: tuple, arg_paths, leaves, keyed, mesh: Mesh) -> None:
        """JAX's rank and divisibility errors, one bullet per failing argument."""
        name = _fun_name(self.f)
        too_long = [(k, x, p) for k, x, p in zip(keyed, leaves, arg_paths) if len(k.spec) > x.ndim]
        if too_long:
            msgs = [f"in_specs{k.path} is {k.spec} which has length {len(k.spec)}, but the passed "
                    f"args{tree_util.keystr(p)}{self._arg_extra(args, p[0].idx)} has shape "
                    f"{x.aval.str_short()}, which has rank {x.ndim} (and {x.ndim} < {len(k.spec)})"
                    for k, x, p in too_long]
            msg = _rank_error(name, "in", msgs)
            if any(x.ndim == 0 for _, x, _ in too_long):
                msg += ("\n\nFor scalar values (rank 0), consider using an in_specs entry of "
                        "`P()`, where `P = jax.sharding.PartitionSpec`.")
            raise ValueError(msg)
        msgs = []
        for k, x, p in zip(keyed, leaves, arg_paths):
            for d in range(len(k.spec)):
                axes = k.spec.axes_of(d)
                size = math.prod(mesh.shape[a] for a in axes)
                if x.shape[d] % size:
                    where = (f"axis '{axes[0]}' (of size {size})" if len(axes) == 1 else
                             f"axes {tuple(axes)} (of total size {size})")
                    msgs.append(
                        f"the passed args{tree_util.keystr(p)} of shape {x.aval.str_short()}"
                        f"{self._arg_extra(args, p[0].idx)} corresponds to in_specs{k.path} of "
                        f"value {k.spec}, which maps array axis {d} (of size {x.shape[d]}) to mesh "
                        f"{where}, but {size} does not evenly divide {x.shape[d]}")
        if msgs:
            raise ValueError(
                f"shard_map applied to the function '{name}' was given argument arrays with axis "
                "sizes that are not evenly divisible by the corresponding mesh axis sizes:\n\n"
                f"The mesh given has shape {tuple(mesh.shape.values())} with corresponding axis "
                f"names {mesh.axis_names}.\n\n{_bullets(msgs)}\n\nArray arguments' axis sizes "
                "must be evenly divisible by the mesh axis or axes indicated by the corresponding "
                "elements of the argument's in_specs entry. Consider checking that in_specs are "
                "correct, and if so consider changing the mesh axis sizes or else padding the "
                f"input and adapting '{name}' appropriately.")
        for x, spec in zip(leaves, (k.spec for k in keyed)):
            self._check_explicit(x, spec, mesh)

    def _check_explicit(self, x, spec: PartitionSpec, mesh: Mesh) -> None:
        """An argument already sharded over Explicit axes must be sharded as
        its in_spec says (JAX asks for an explicit reshard); unsharded values
        are split here (a deliberate leniency: JAX refuses them too)."""
        aval = x.aval
        typed = [tuple(axes) for axes in aval.spec]
        pending = (frozenset(aval.unreduced), frozenset(aval.reduced))
        if pending != (spec.unreduced, spec.reduced):  # pending sums must be named as they are
            have = PartitionSpec(*_spec_entries(typed) or [None] * aval.ndim,
                                 unreduced=pending[0], reduced=pending[1])
            raise _in_spec_mismatch(spec, have, aval)
        if not any(typed):
            return
        manual = self._manual_axes(mesh)
        want = [tuple(a for a in spec.axes_of(d) if a in mesh.explicit_axes)
                for d in range(aval.ndim)]
        if [tuple(a for a in t if a in manual) for t in typed] != want:
            have = PartitionSpec(*_spec_entries(typed))
            raise _in_spec_mismatch(spec, have, aval)

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

    def _check_outputs(self, outs, keyed, out_paths, mesh: Mesh, manual: list[str]) -> list:
        """Implicitly casts each output to varying over its spec's axes, then
        checks it varies over nothing else (JAX's replication check)."""
        name = _fun_name(self.f)
        if self.check_vma:
            outs = [self._vary_over_spec(x, k.spec, manual) for x, k in zip(outs, keyed)]
        too_long = [(k, x, p) for k, x, p in zip(keyed, outs, out_paths) if len(k.spec) > x.ndim]
        if too_long:
            # Un-jitted, JAX checks the per-device results, concrete arrays that vary over nothing.
            shape = ((lambda x: core.ShapedArray(x.shape, x.dtype).str_short()) if _in_eager_body()
                     else (lambda x: x.aval.str_short()))
            msgs = [f"out_specs{k.path} is {k.spec} which has length {len(k.spec)}, but "
                    f"{name}(*args){tree_util.keystr(p)} has shape {shape(x)}, which has "
                    f"rank {x.ndim} (and {x.ndim} < {len(k.spec)})" for k, x, p in too_long]
            msg = _rank_error(name, "out", msgs)
            if any(x.ndim == 0 for _, x, _ in too_long):
                msg += ("\n\nFor scalar values (rank 0), consider using an out_specs entry of "
                        "`P()`, where `P = jax.sharding.PartitionSpec`. In particular, for rank 0 "
                        "outputs which are not constant over the mesh, add at least one "
                        "(singleton) axis to them so that they can be concatenated using out_specs.")
            raise ValueError(msg)
        if not self.check_vma:
            return list(outs)
        failures = [(k, _spec_axes(k.spec), x.aval.vma) for x, k in zip(outs, keyed)
                    if any(a in x.aval.vma and a not in _spec_axes(k.spec) for a in manual)]
        if failures:
            raise ValueError(self._replication_error(failures, mesh, manual))
        return list(outs)

    @staticmethod
    def _vary_over_spec(x, spec: PartitionSpec, manual: list[str]):
        """`x` cast to varying over the manual axes its out_spec names, and to unreduced over
        those it names unreduced (JAX's implicit casts: each device's block is its term)."""
        axes = _spec_axes(spec)
        x = _core.vary_over(x, [a for a in manual if a in axes])
        unreduced = [a for a in manual if a in spec.unreduced and a not in x.aval.unreduced]
        if unreduced:
            x = _core.vary_over(x, unreduced)
            x = core.bind1("vary_unreduced_cast_p", x, axes=tuple(unreduced))
        for kind in ("unreduced", "reduced"):
            if getattr(spec, kind) != frozenset(getattr(x.aval, kind)):
                raise ValueError(f"out_specs passed to shard_map should be equal to the {kind} present "
                                 f"on the out_aval. Got out_specs={spec} and "
                                 f"out_aval={x.aval.str_short(True)}")
        return x

    def _replication_error(self, failures, mesh: Mesh, manual: list[str]) -> str:
        order = lambda names: ",".join(a for a in mesh.axis_names if a in names)  # noqa: E731
        # Un-jitted, JAX checks each output by itself in its eager path: it reports the first
        # one, without its path, and names the function that path wraps the body in.
        eager = _in_eager_body()
        msgs = []
        for k, axes, vma in failures[:1] if eager else failures:
            path = "" if eager else k.path
            unmentioned = [a for a in manual if a not in axes]
            if len(unmentioned) > 1:
                msgs.append(
                    f"out_specs{path} is {k.spec} which implies that the corresponding output "
                    f"value is only varying across mesh axes {{{order(axes)}}} and not "
                    f"{{{order([a for a in unmentioned if a in vma])}}}, but it was inferred to be "
                    f"possibly varying over {{{order(vma)}}}")
            else:
                msgs.append(
                    f"out_specs{path} is {k.spec} which implies that the corresponding output "
                    f"value is replicated across mesh axis '{unmentioned[0]}', but could not infer "
                    "replication over any axes")
        name = "_rem_singleton" if eager else _fun_name(self.f)
        return (f"shard_map applied to the function '{name}' was given out_specs "
                "which require replication which can't be statically inferred given the mesh:\n\n"
                f"The mesh given has shape {tuple(mesh.shape.values())} with corresponding axis names "
                f"{mesh.axis_names}.\n\n{_bullets(msgs)}\n\nCheck if these output values are meant "
                "to be replicated over those mesh axes. If not, consider revising the corresponding "
                "out_specs entries. If so, consider disabling the check by passing the "
                "check_vma=False argument to `jax.shard_map`.")

    # --- the call -----------------------------------------------------------

    def __call__(self, *args):
        mesh = self._resolve_mesh()
        manual = self._manual_axes(mesh)
        with_paths, in_tree = tree_util.tree_flatten_with_path(args)
        arg_paths = [p for p, _ in with_paths]
        leaves = [core.asarray_value(x) for _, x in with_paths]
        if self.in_specs is Infer:
            if not all(mesh.axis_types[mesh.axis_names.index(a)] == AxisType.Explicit
                       for a in manual):
                types = ", ".join(str(mesh.axis_types[mesh.axis_names.index(a)])
                                  for a in frozenset(manual))
                raise TypeError("shard_map in_specs argument must be a pytree of "
                                "`jax.sharding.PartitionSpec` instances, but it was `None` when "
                                f"axis_names={frozenset(manual)} are of type {types}")
            in_specs = [self._infer_spec(x, mesh) for x in leaves]
            keyed = [_Keyed(f"[{p[0].idx}]", s) for p, s in zip(arg_paths, in_specs)]
        else:
            specs = self.in_specs  # a list is not a prefix of the args' tuple: JAX's error
            self._check_specs(specs, manual, "in_specs")
            keyed = self._keyed_specs(specs, args, "in_specs")
            in_specs = [k.spec for k in keyed]
        self._check_args(args, arg_paths, leaves, keyed, mesh)

        body, out_tree, out_specs, captures = self._trace(leaves, in_tree, in_specs, mesh, manual)
        ndims = [x.ndim for x in leaves] + [c.ndim for c in captures]
        all_specs = in_specs + [PartitionSpec()] * len(captures)
        outs = _core.bind_shard_map(
            list(leaves) + list(captures), body, mesh.core_mesh,
            [_core_spec(s, n) for s, n in zip(all_specs, ndims)],
            [_core_spec(s, a.ndim) for s, a in zip(out_specs, body.out_avals)],
            manual, self.check_vma, self.mesh is None,
            [sorted(s.unreduced) for s in out_specs], [sorted(s.reduced) for s in out_specs])
        if _core.current_trace() is None and isinstance(mesh, Mesh):
            # Un-jitted, JAX names each result by its out_specs entry as written (trailing
            # Nones kept or absent), not by the layout read back or the type.
            for o, spec in zip(outs, out_specs):
                if not spec.unreduced:
                    o._sharding = NamedSharding(mesh, spec)
        return tree_util.tree_unflatten(out_tree, list(outs))

    def _trace(self, leaves, in_tree, in_specs, mesh: Mesh, manual: list[str]):
        block_mesh = mesh.abstract_mesh.update_axis_types({a: AxisType.Manual for a in manual})
        eager = None
        if _core.current_trace() is None and len(manual) == len(mesh.axis_names):
            # Un-jitted over the whole mesh: the body's values are concrete (eager_shard_map).
            eager = eager_shard_map.Frame(None, list(leaves),
                                          [_core_spec(s, x.ndim) for s, x in zip(in_specs, leaves)],
                                          mesh, self.check_vma)
        with tracing.open_trace() as trace:
            _core.push_axis_env(mesh.core_mesh, manual, self.check_vma)
            if eager is not None:
                eager.trace = trace
                eager_shard_map.push(eager)
            try:
                with use_abstract_mesh(block_mesh):
                    tracers = []
                    for x, spec in zip(leaves, in_specs):
                        vma = [a for a in manual if a in _spec_axes(spec)] if self.check_vma else []
                        aval = _core.block_aval(x.aval, mesh.core_mesh, _core_spec(spec, x.ndim), vma)
                        tracers.append(trace.new_input(aval))
                    out = self.f(*tree_util.tree_unflatten(in_tree, tracers))
                    with_paths, out_tree = tree_util.tree_flatten_with_path(out)
                    out_leaves = [core.asarray_value(x) for _, x in with_paths]
                    specs = self.out_specs
                    if isinstance(specs, list) and isinstance(out, tuple):  # lenient, as in_specs
                        specs = tuple(specs)
                    self._check_specs(specs, manual, "out_specs")
                    keyed = self._keyed_specs(specs, out, "out_specs")
                    out_leaves = self._check_outputs(out_leaves, keyed, [p for p, _ in with_paths],
                                                     mesh, manual)
                    body, captures = trace.finish_capturing(out_leaves)
            finally:
                if eager is not None:
                    eager_shard_map.pop(eager)
                _core.pop_axis_env()
        return body, out_tree, [k.spec for k in keyed], captures


def axis_env():
    """(mesh, manual axes, check_vma) of the shard_map body being traced, or None."""
    return _core.current_axis_env()


def _axis_spec(axis_name, axis) -> PartitionSpec:
    """The spec mapping array axis `axis` (None: none) over mesh axis `axis_name`."""
    return PartitionSpec() if axis is None else PartitionSpec(*[None] * axis, axis_name)


def smap(f: Callable | None = None, /, *, in_axes=Infer, out_axes, axis_name):
    """shard_map over the one mesh axis `axis_name` (the others stay automatic), with
    vmap-style axes: `in_axes`/`out_axes` say which array axis is split over it."""
    if f is None:
        return lambda g: smap(g, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)
    if isinstance(axis_name, (list, tuple)):
        raise TypeError(f"smap axis_name should be a `str` or a `Hashable`, but got {axis_name}")
    if in_axes is not None and in_axes is not Infer and not isinstance(in_axes, (int, tuple)):
        raise TypeError("smap in_axes must be an int, None, jax.sharding.Infer, or a tuple of entries "
                        "corresponding to the positional arguments passed to the function, but got "
                        f"{in_axes}.")
    if in_axes is not Infer and not all(isinstance(a, int) for a in tree_util.tree_leaves(in_axes)):
        raise TypeError("smap in_axes must be an int, None, jax.sharding.Infer, or (nested) container "
                        f"with those types as leaves, but got {in_axes}.")
    if not all(isinstance(a, int) for a in tree_util.tree_leaves(out_axes)):
        raise TypeError("smap out_axes must be an int, None, or (nested) container with those types "
                        f"as leaves, but got {out_axes}.")
    spec = functools.partial(_axis_spec, axis_name)
    in_specs = Infer if in_axes is Infer else \
        tree_util.tree_map(spec, in_axes, is_leaf=lambda x: x is None)
    out_specs = tree_util.tree_map(spec, out_axes, is_leaf=lambda x: x is None)
    return shard_map(f, in_specs=in_specs, out_specs=out_specs, axis_names={axis_name})

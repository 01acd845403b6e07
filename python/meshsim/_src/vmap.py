"""vmap: JAX's batching transform.

The function is traced once on one example (mapped arguments become inputs of
their per-example type; unmapped ones are passed as they are, so they may be
any Python value). The C++ transform (`_core.batch_eval`,
cpp/meshsim/transforms/batching.h) then applies the program to the whole
batch, one batching rule per equation: on arrays it runs, inside an enclosing
trace (jit, grad, another vmap) it inlines. Python handles pytrees, in_axes /
out_axes and JAX's errors."""
from __future__ import annotations

import collections
import functools
import inspect
from typing import Any, Callable

import numpy as np

from meshsim import _core
from meshsim._src import core, tracing, tree_util, vmap_collectives
from meshsim._src.lax import structural as lax_structural
from meshsim._src import ref as ref_lib
from meshsim._src.tracing import trace_flat
from meshsim._src.sharding import placement
from meshsim._src.prng import PRNGKeyArray

__all__ = ["vmap"]


def _is_key(x) -> bool:
    return isinstance(x, PRNGKeyArray)


def _is_none(x) -> bool:
    return x is None


class _Axis:
    """An axis spec as a leaf (None included) while broadcasting a prefix tree."""
    __slots__ = ("axis",)

    def __init__(self, axis):
        self.axis = axis


def _flatten_axes(name: str, tree, axes, kws: bool = False) -> list:
    """The axis spec of each leaf of `tree`, from the prefix tree `axes` (None is a leaf)."""
    wrapped = tree_util.tree_map(_Axis, axes, is_leaf=_is_none)
    is_axis = lambda x: isinstance(x, _Axis)  # noqa: E731
    try:
        full = tree_util.broadcast_prefix(wrapped, tree, is_leaf=is_axis)
    except ValueError:
        # JAX reports mismatches of the positional arguments only.
        prefix, target = (axes[0], tree[0]) if kws else (axes, tree)
        error = tree_util.prefix_mismatch(name, prefix, target, _is_none)
        if error is None:
            raise
        raise error from None
    return [a.axis for a in full]


def _is_array_like(x) -> bool:
    return (core.is_value(x) or _is_key(x) or isinstance(x, (np.ndarray, np.generic, bool, int, float, complex))
            or hasattr(x, "__jax_array__"))


def _shape(x) -> tuple:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _type_str(x) -> str:
    try:
        return (x.aval if _is_key(x) else core.typeof(x)).str_short()
    except TypeError:
        return "unknown"


def _inconsistent_sizes(fun, args, kwargs, leaves, axes, sizes, axis_size) -> ValueError:
    """JAX's message: the most common size first, one example of each."""
    try:
        params = list(inspect.signature(fun).bind(*args, **kwargs).signature.parameters)
    except (TypeError, ValueError):
        params = None

    def arg_name(path):
        i = path[0].idx
        if params is None or i >= len(params):
            return f"args{tree_util.keystr(path)}"
        return f"argument {params[i]}" + (tree_util.keystr(path[1:]) if len(path) > 1 else "")

    paths = [f"{arg_name(p)} of type {_type_str(x)}"
             for p, x in tree_util.tree_flatten_with_path(tuple(args), is_leaf=_is_key)[0]]
    paths += [f"kwargs{tree_util.keystr(p)} of type {_type_str(x)}"
              for p, x in tree_util.tree_flatten_with_path(kwargs, is_leaf=_is_key)[0]]
    counts = collections.Counter(s for s in sizes if s is not None).most_common()
    msg = ["vmap got inconsistent sizes for array axes to be mapped:\n"]
    if axis_size is not None:
        msg.append(f"  * the `axis_size` argument was {axis_size};\n")
    for k, (sz, ct) in enumerate(counts):
        i = sizes.index(sz)
        where = f"axis {axes[i]} of {paths[i]}"
        if ct == 1:
            msg.append(f"  * one axis had size {sz}: {where};\n")
        else:
            msg.append(f"  * {'most' if k == 0 else 'some'} axes ({ct} of them) had size {sz}, e.g. {where};\n")
    return ValueError("".join(msg)[:-2])


def _mapped_size(fun, args, kwargs, leaves, axes, axis_size) -> int:
    if not leaves:
        if axis_size is not None:
            return axis_size
        raise ValueError("vmap wrapped function must be passed at least one argument containing an array "
                         f"or axis_size must be specified, got empty *args={args} and **kwargs={kwargs}")
    sizes = []
    for x, d in zip(leaves, axes):
        if d is None or not (_is_array_like(x) or isinstance(x, ref_lib.Ref)):
            sizes.append(None)
            continue
        shape = _shape(x)
        if not -len(shape) <= d < len(shape):
            min_rank = d + 1 if d >= 0 else -d
            raise ValueError(f"vmap was requested to map its argument along axis {d}, which implies that "
                             f"its rank should be at least {min_rank}, but is only {len(shape)} (its shape "
                             f"is {shape})")
        sizes.append(shape[d])
    distinct = set(s for s in sizes if s is not None)
    if axis_size is not None:
        distinct.add(axis_size)
    if len(distinct) == 1:
        return distinct.pop()
    if not distinct:
        raise ValueError("vmap must have at least one non-None value in in_axes or axis_size must be "
                         "specified")
    raise _inconsistent_sizes(fun, args, kwargs, leaves, axes, sizes, axis_size)


def _check_axes(in_axes, out_axes):
    if not (in_axes is None or type(in_axes) in (int, tuple)):
        raise TypeError("vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
                        f"positional arguments passed to the function, but got {in_axes}.")
    if not all(type(a) is int for a in tree_util.tree_leaves(in_axes)):
        raise TypeError("vmap in_axes must be an int, None, or (nested) container with those types as "
                        f"leaves, but got {in_axes}.")
    if not all(type(a) is int for a in tree_util.tree_leaves(out_axes)):
        raise TypeError("vmap out_axes must be an int, None, or (nested) container with those types as "
                        f"leaves, but got {out_axes}.")


def _place(x, src, dst: int, size: int):
    """The output `x` (batched on `src`, or None) with the batch at `dst`."""
    from meshsim._src.numpy import structural
    if src is None:  # one broadcast_in_dim, as JAX's matchaxis
        shape = (*x.shape[:dst], size, *x.shape[dst:])
        return lax_structural.broadcast_in_dim(x, shape, [d for d in range(len(shape)) if d != dst])
    return structural.moveaxis(x, src, dst)


def vmap(fun: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_name=None, axis_size: int | None = None,
         spmd_axis_name=None) -> Callable:
    """Vectorizes `fun` over the axes `in_axes` of its arguments; the results carry the
    batch at `out_axes` (pytree prefixes; None: not mapped)."""
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    if spmd_axis_name is not None and not isinstance(spmd_axis_name, tuple):
        spmd_axis_name = (spmd_axis_name,)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    _check_axes(in_axes, out_axes)

    @functools.wraps(fun)
    def vmap_f(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError("vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
                             "positional arguments passed to the function, "
                             f"but got len(in_axes)={len(in_axes)}, len(args)={len(args)}")
        leaves, in_tree = tree_util.tree_flatten((args, kwargs), is_leaf=_is_key)
        axes = _flatten_axes("vmap in_axes", (args, kwargs), (in_axes, 0), kws=True)
        size = _mapped_size(fun, args, kwargs, leaves, axes, axis_size)
        spmd_axes = _spmd_axes(spmd_axis_name, leaves, axes)

        mapped, data, dims = [], [], []
        refs = []  # (leaf index, Ref, axis): mapped Refs, whose per-example views are written back
        for i, (x, d) in enumerate(zip(leaves, axes)):
            if d is None:
                continue
            if isinstance(x, ref_lib.Ref):
                refs.append((i, x, d % x.ndim))
                continue
            if not _is_array_like(x):
                raise TypeError(f"Argument '{x}' of type '{type(x)}' is not a valid JAX type")
            mapped.append(i)
            data.append(x._base if _is_key(x) else core.asarray_value(x))
            dims.append(d % len(_shape(x)))
        for i, r, d in refs:  # a mapped Ref's value is one more mapped input
            mapped.append(i)
            data.append(ref_lib.freeze(r))
            dims.append(d)
        out_info = {}
        # With an axis name, the example's index is one more mapped input (vmap_collectives).
        frame = None if axis_name is None else vmap_collectives.Frame(axis_name, size)
        if frame is not None:
            data.append(core.asarray_value(np.arange(size, dtype=np.int32)))
            dims.append(0)

        def per_example(*tracers):
            out_info["trace"] = _core.current_trace()
            tracing.batched_traces[out_info["trace"]] = (size, {id(t): d for t, d in zip(tracers, dims)})
            full = list(leaves)
            for i, t in zip(mapped, tracers):
                full[i] = PRNGKeyArray(t) if _is_key(leaves[i]) else \
                    ref_lib.new_ref(t) if isinstance(leaves[i], ref_lib.Ref) else t
            views = [full[i] for i, _, _ in refs]
            f_args, f_kwargs = tree_util.tree_unflatten(in_tree, full)
            ref_lib.VMAPPED_TRACES.append(_core.current_trace())
            try:
                if frame is None:
                    out = fun(*f_args, **f_kwargs)
                else:
                    frame.index = tracers[-1]
                    vmap_collectives._frames.append(frame)
                    try:
                        out = fun(*f_args, **f_kwargs)
                    finally:
                        vmap_collectives._frames.remove(frame)
            finally:
                ref_lib.VMAPPED_TRACES.pop()
            out_leaves, out_info["tree"] = tree_util.tree_flatten(out, is_leaf=_is_key)
            out_info["keys"] = [_is_key(o) for o in out_leaves]
            for o in out_leaves:
                if not _is_key(o) and not core.is_jax_value(o):
                    raise TypeError(f"Output from batched function {o!r} with type {type(o)} is not a "
                                    "valid JAX type")
            return (*(o._base if _is_key(o) else o for o in out_leaves),
                    *(ref_lib.freeze(v) for v in views))

        mesh = placement.eager_mesh()
        if mesh is not None:  # under jax.set_mesh, computed over the mesh
            data = placement.onto_mesh(data, mesh, as_operands=True)
        flat_tree = tree_util.tree_structure(tuple(range(len(data))))
        # Inside a shard_map body, a batch split over manual axes varies over them; its
        # examples do not, and the results vary over them again.
        manual_spmd = _manual_axes(spmd_axes)
        try:
            program, captures, _ = trace_flat(per_example, flat_tree,
                                               [x.aval.without_dim(d, manual_spmd) for x, d in zip(data, dims)])
        finally:
            tracing.batched_traces.pop(out_info.get("trace"), None)
        vmap_collectives._batching.append(frame)
        try:
            outs, out_dims = _core.batch_eval(program, [*data, *captures],
                                              [*dims, *[None] * len(captures)], size, list(spmd_axes))
        finally:
            vmap_collectives._batching.pop()

        if refs:  # each mapped Ref takes the values its examples left in their views
            outs, written, written_dims = outs[:-len(refs)], outs[-len(refs):], out_dims[-len(refs):]
            out_dims = out_dims[:-len(refs)]
            for (_, r, d), x, src in zip(refs, written, written_dims):
                r[...] = _place(x, src, d, size)
        out_tree, keys = out_info["tree"], out_info["keys"]
        dsts = _flatten_axes("vmap out_axes", tree_util.tree_unflatten(out_tree, [0] * len(outs)), out_axes)
        results = []
        for j, (x, src, dst, key) in enumerate(zip(outs, out_dims, dsts, keys)):
            if dst is None:
                if src is not None:
                    raise _out_axes_none_error(out_tree, out_axes, dsts, j, src)
            else:
                ndim = x.ndim - (1 if key else 0) + (0 if src is not None else 1)
                if not -ndim <= dst < ndim:
                    raise ValueError(f"axis {dst} is out of bounds for array of dimension {ndim}")
                x = _place(x, src, dst % ndim, size)
                if manual_spmd:
                    x = _core.vary_over(x, manual_spmd)
            results.append(PRNGKeyArray(x) if key else x)
        return tree_util.tree_unflatten(out_tree, results)

    return vmap_f


def _manual_axes(axes) -> list:
    """Those of `axes` an enclosing shard_map body binds, when it checks varying types."""
    env = _core.current_axis_env()
    if not axes or env is None or not env[2]:
        return []
    return [a for a in env[0].axis_names if a in axes and a in env[1]]


def _explicit_spec_entry(x, d):
    """The spec entry of the mapped dimension `d` of `x`'s type: the Explicit axes it is typed over."""
    try:
        return core.typeof(x).sharding.spec[d]
    except (IndexError, TypeError, AttributeError):
        return None


def _spmd_axes(spmd_axis_name, leaves, axes) -> tuple:
    """The mesh axes the batch is split over: `spmd_axis_name`, which must agree with the
    Explicit axes the mapped dimensions are typed over (JAX's checks and texts)."""
    explicit, seen = None, False
    for x, d in zip(leaves, axes):
        if d is None or not _is_array_like(x) or _is_key(x):
            continue
        entry = _explicit_spec_entry(x, d)
        if seen and entry != explicit:
            raise ValueError("Mapped away dimension of inputs passed to vmap should be sharded the same. "
                             f"Got inconsistent axis specs: {explicit} vs {entry}")
        explicit, seen = entry, True
    if explicit is not None and not isinstance(explicit, tuple):
        explicit = (explicit,)
    if explicit is not None:
        for x, d in zip(leaves, axes):
            if d is not None or not core.is_value(x):
                continue
            spec = core.typeof(x).sharding.spec
            used = {n for e in spec if e is not None for n in (e if isinstance(e, tuple) else (e,))}
            if used & set(explicit):
                raise ValueError("Unmapped values passed to vmap cannot be sharded along the mesh axis "
                                 f"you are vmapping over. Got type: {core.typeof(x).str_short(True)}, "
                                 f"in_axes: {d} and vmapped mesh axis: {explicit}")
    if spmd_axis_name is None or explicit is None:
        return spmd_axis_name or ()
    if tuple(spmd_axis_name) != explicit:
        raise ValueError("Only one of spmd_axis_name or arrays sharded on `Explicit` mesh axis type is "
                         f"allowed. Got spmd_axis_name={spmd_axis_name!r} and arrays sharded on "
                         f"explicit_mesh_axis={explicit!r}")
    return ()  # the arrays' own types already split the batch


def _out_axes_none_error(out_tree, out_axes, dsts, j, src) -> ValueError:
    full = tree_util.tree_unflatten(out_tree, dsts)
    path, _ = tree_util.tree_flatten_with_path(full, is_leaf=_is_none)[0][j]
    return ValueError(f"at vmap out_axes{tree_util.keystr(path)}, got axis spec None but output was "
                      f"batched on axis {src}")

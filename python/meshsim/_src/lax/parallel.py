"""meshsim.lax: collectives over the manual axes of a shard_map body, and the
VMA casts (as jax.lax: psum, pmean, all_gather, ppermute, pvary, pcast, ...).

As in JAX, the wrappers first cast an operand to varying over the named axes
it is invariant over (`pvary`, free at run time), so a reduction over an
axis a value is invariant on sums identical copies."""
from __future__ import annotations

import math
import warnings

import numpy as np

from meshsim import _core
from meshsim._src import core, tree_util, vmap_collectives
from meshsim._src.config import config
from meshsim._src.lax import reduction
from meshsim._src.lax.structural import canonicalize_axis, expand_dims, squeeze

__all__ = ["psum", "pmean", "pmax", "pmin", "axis_index", "axis_size", "pvary", "pcast",
           "all_gather", "all_gather_invariant", "psum_scatter", "ppermute", "pshuffle",
           "all_to_all", "pswapaxes", "ragged_all_to_all", "pbroadcast"]


def _axis_tuple(axis_name) -> tuple:
    if isinstance(axis_name, (tuple, list)):
        return tuple(axis_name)
    return (axis_name,)


# Ops whose axis tuples may name an axis twice (as in JAX: an index or size over ('x', 'x')).
_REPEATS_ALLOWED = frozenset({"axis_size", "axis_index", "pvary", "pcast"})


def _env(op: str, axes: tuple):
    """The body's (mesh, manual axes, check_vma); NameError for unbound axes,
    ValueError (JAX's text) for a collective naming an axis twice."""
    if op not in _REPEATS_ALLOWED and len(set(axes)) != len(axes):
        raise ValueError("repeated axis in `source` argument")
    env = _core.current_axis_env()
    for a in axes:
        if env is None or a not in env[1]:
            raise NameError(f"Found an unbound axis name: {a}. To fix this, please call {op} "
                            "under `jax.shard_map`.")
    return env


def _in_mesh_order(env, axes) -> tuple:
    return tuple(a for a in env[0].axis_names if a in axes)


def _vary_over(x, axes: tuple, env):
    """`x` cast to varying over those of `axes` it is invariant over."""
    return _core.vary_over(x, list(axes)) if env[2] else x


def _check_same_state(op: str, x, axes: tuple, env) -> None:
    """A sum over axes some of which `x` varies over and some not is refused,
    as JAX refuses it (only all-varying or all-invariant are meaningful)."""
    if not env[2] or not isinstance(x, core.Tracer):
        return
    varying = {a in x.aval.vma for a in axes}
    if len(varying) > 1:
        raise ValueError(f"jax.lax.{op} can only accept axis_name which corresponds to one of "
                         "varying, unreduced, reduced or invarying state of the input. Got input "
                         f"type: {x.aval.str_short()}, axes: {axes} and input state: "
                         "{'invarying', 'varying'}")


def _operand(x):
    x = core.asarray_value(x)
    if not isinstance(x, core.Tracer) and _core.current_axis_env() is None:
        raise TypeError("collectives apply to values inside a shard_map body, got a concrete "
                        f"array of type {x.aval.str_short()}")
    return x


def _vmapped(axis_name, op: str, whole: bool = False):
    """The vmap frame when `axis_name` names a vmapped axis (vmap_collectives), else None;
    `whole`: the op cannot also span other axes in the same call."""
    frame, mapped, rest = vmap_collectives.split_names(axis_name)
    if frame is not None and whole and (rest or len(mapped) > 1):
        raise NotImplementedError(f"{op} over a vmapped axis together with other axes")
    return frame


# --- over a vmapped axis ---------------------------------------------------------
# Each collective's form over `vmap(..., axis_name=...)`: what it does on the whole batch
# and its VJP, recorded through vmap_collectives.collective.

def _reduce_over_vmap(op: str):
    def batched(xs, lead):
        jnp = vmap_collectives.jnp()
        reduce = {"psum": jnp.sum, "pmax": jnp.max, "pmin": jnp.min}[op]
        return [reduce(xs[0], axis=0)], [False]
    return batched


def _psum_vjp(frame, xs, cts, index):
    return [None if cts[0] is None else _psum_over_vmap(frame, cts[0], index)]


def _no_vjp(op: str):
    def vjp(frame, xs, cts, index):
        raise NotImplementedError(f"Differentiation rule for '{op}' not implemented")
    return vjp


def _psum_over_vmap(frame, x, index=None):
    x = core.asarray_value(x)
    if x.dtype == np.bool_:
        x = core.convert_element_type(x, np.int32)
    return vmap_collectives.collective(frame, x, _reduce_over_vmap("psum"), _psum_vjp, x.shape, x.dtype, index)


def _pmax_over_vmap(frame, x, index=None):
    x = core.asarray_value(x)
    return vmap_collectives.collective(frame, x, _reduce_over_vmap("pmax"), _no_vjp("pmax"), x.shape, x.dtype, index)


def _pmin_over_vmap(frame, x, index=None):
    x = core.asarray_value(x)
    return vmap_collectives.collective(frame, x, _reduce_over_vmap("pmin"), _no_vjp("pmin"), x.shape, x.dtype, index)


def _all_gather_over_vmap(frame, x, axis: int, tiled: bool, index=None):
    x = core.asarray_value(x)
    n = frame.size

    def batched(xs, lead):
        jnp = vmap_collectives.jnp()
        g = jnp.moveaxis(xs[0], 0, lead + axis)
        if tiled:
            shape = g.shape
            g = jnp.reshape(g, (*shape[:lead + axis], shape[lead + axis] * shape[lead + axis + 1],
                                *shape[lead + axis + 2:]))
        return [g], [False]

    def vjp(frame, xs, cts, index):
        if cts[0] is None:
            return [None]
        from meshsim._src.lax import indexing
        total = _psum_over_vmap(frame, cts[0], index)
        if tiled:
            k = x.shape[axis]
            return [indexing.dynamic_slice_in_dim(total, index * k, k, axis)]
        return [indexing.dynamic_index_in_dim(total, index, axis, keepdims=False)]

    shape = list(x.shape)
    if tiled:
        shape[axis] *= n
    else:
        shape.insert(axis, n)
    return vmap_collectives.collective(frame, x, batched, vjp, tuple(shape), x.dtype, index)


def _ppermute_over_vmap(frame, x, perm, index=None):
    x = core.asarray_value(x)
    n = frame.size
    perm = tuple((int(a), int(b)) for a, b in perm)
    if sorted(a for a, _ in perm) != list(range(n)) or sorted(b for _, b in perm) != list(range(n)):
        # JAX's batching rule asserts this; say what is wrong.
        raise ValueError(f"ppermute over the vmapped axis {frame.name!r} needs a permutation of all "
                         f"{n} indices, got perm={list(perm)}")
    src = np.full(n, -1, np.int32)
    for a, b in perm:
        src[b] = a

    def batched(xs, lead):
        jnp = vmap_collectives.jnp()
        taken = jnp.take(xs[0], np.maximum(src, 0), axis=0)
        mask = (src >= 0).reshape((n,) + (1,) * (taken.ndim - 1))
        return [jnp.where(mask, taken, jnp.zeros_like(taken))], [True]

    def vjp(frame, xs, cts, index):
        return [None if cts[0] is None else _ppermute_over_vmap(frame, cts[0], [(b, a) for a, b in perm], index)]

    return vmap_collectives.collective(frame, x, batched, vjp, x.shape, x.dtype, index)


def _all_to_all_over_vmap(frame, x, split_axis: int, concat_axis: int, tiled: bool, index=None):
    x = core.asarray_value(x)
    n = frame.size

    def batched(xs, lead):
        s = vmap_collectives.jnp()
        v = xs[0]
        sa, ca = 1 + lead + split_axis, 1 + lead + concat_axis
        if not tiled:
            # out_j[.., i at concat, ..] = x_i[.., j at split, ..]
            y = s.moveaxis(v, sa, 0)
            return [s.moveaxis(y, 1, ca)], [True]
        k = v.shape[sa] // n
        v = s.reshape(v, (*v.shape[:sa], n, k, *v.shape[sa + 1:]))
        y = s.moveaxis(v, sa, 0)          # [j, i, lead.., data (k at split)..]
        y = s.moveaxis(y, 1, ca)          # i just before the concat dim
        shape = y.shape
        return [s.reshape(y, (*shape[:ca], shape[ca] * shape[ca + 1], *shape[ca + 2:]))], [True]

    def vjp(frame, xs, cts, index):
        if cts[0] is None:
            return [None]
        return [_all_to_all_over_vmap(frame, cts[0], concat_axis, split_axis, tiled, index)]

    shape = list(x.shape)
    if tiled:
        shape[split_axis] //= n
        shape[concat_axis] *= n
    else:
        del shape[split_axis]
        shape.insert(concat_axis, n)
    return vmap_collectives.collective(frame, x, batched, vjp, tuple(shape), x.dtype, index)


_OVER_VMAP = {"psum": _psum_over_vmap, "pmax": _pmax_over_vmap, "pmin": _pmin_over_vmap}


def axis_size(axis_name) -> int:
    """The number of devices along `axis_name` (the product for a tuple)."""
    frame, mapped, rest = vmap_collectives.split_names(axis_name)
    if frame is not None:
        return frame.size ** len(mapped) * (axis_size(rest) if rest else 1)
    axes = _axis_tuple(axis_name)
    mesh = _env("axis_size", axes)[0]
    return math.prod(mesh.axis_sizes[mesh.axis_names.index(a)] for a in axes)


def axis_index(axis_name):
    """This device's index along `axis_name` (int32, varying over it); for a
    tuple, row-major over the axes in the order given."""
    frame = _vmapped(axis_name, "axis_index", whole=True)
    if frame is not None:
        return frame.index  # the example's index
    axes = _axis_tuple(axis_name)
    _env("axis_index", axes)
    if not axes:  # one device along no axes
        return core.asarray_value(np.int32(0))
    index = None
    for a in axes:
        i = core.bind1("axis_index", axis_name=a)
        index = i if index is None else index * axis_size(a) + i
    return index


def _split_axes(axis_name) -> tuple[tuple, tuple]:
    """The (positional, named) entries of `axis_name`: integers are array axes."""
    axes = _axis_tuple(axis_name)
    is_pos = [isinstance(a, (int, np.integer)) for a in axes]
    return (tuple(int(a) for a, p in zip(axes, is_pos) if p),
            tuple(a for a, p in zip(axes, is_pos) if not p))


_POSITIONAL = {"psum": reduction.reduce_sum, "pmax": reduction.reduce_max,
               "pmin": reduction.reduce_min}


def _scaled_constant(v, n: int):
    """psum of a constant: it is invariant everywhere, so summing its copies scales it. As in
    JAX, a Python number stays a Python number (`psum(1, 'i')` is the axis size, usable in
    `range`) and a NumPy value stays NumPy; booleans count as int32."""
    if isinstance(v, (bool, np.bool_)) or getattr(v, "dtype", None) == np.bool_:
        return core.convert_element_type(core.asarray_value(v), np.int32) * n
    if isinstance(v, (int, float, complex)):
        return type(v)(n) * v
    if isinstance(v, (np.ndarray, np.generic)):
        return np.asarray(n, v.dtype) * v
    return core.asarray_value(v) * n


def _all_reduce(name: str, x, axis_name, axis_index_groups):
    frame, mapped, rest = vmap_collectives.split_names(axis_name)
    if frame is not None:
        if axis_index_groups is not None:
            raise NotImplementedError(f"{name} over a vmapped axis with axis_index_groups")
        op = _OVER_VMAP[name]
        x = tree_util.tree_map(lambda v: op(frame, v), x)
        return _all_reduce(name, x, rest, None) if rest else x
    positional, axes = _split_axes(axis_name)
    if name == "psum" and not axes and not positional:  # a sum over no devices (JAX: the operand)
        return x
    if positional and axis_index_groups is not None:
        raise ValueError("axis_index_groups only supported for sums over just named axes")
    if axis_index_groups is not None:
        raise NotImplementedError(f"{name} with axis_index_groups is not supported")
    env = _env(name, axes) if axes or not positional else None

    def leaf(v):
        if positional:
            # Integer entries reduce the array's own axes first (as JAX's psum).
            v = core.asarray_value(v)
            if name == "psum" and v.dtype == np.bool_:
                v = core.convert_element_type(v, np.int32)
            dims = tuple(sorted({canonicalize_axis(a, v.ndim) for a in positional}))
            v = _POSITIONAL[name](v, dims)
            if not axes:
                return v
        if not isinstance(v, core.Tracer) and name == "psum":
            return _scaled_constant(v, axis_size(axes))
        v = _operand(v)
        if name == "psum" and v.dtype == np.bool_:
            v = core.convert_element_type(v, np.int32)
        if name == "psum" and env[2] and _state_of(v, axes, "jax.lax.psum") == "unreduced":
            return core.bind1("unreduced_psum", v, axes=_in_mesh_order(env, axes))  # the pending sum
        if name == "psum":
            _check_same_state("psum", v, axes, env)
        if name == "psum" and env[2]:
            return core.bind1("psum_invariant", _vary_over(v, axes, env), axes=axes)
        # JAX's psum, pmax and pmin print their (here always absent) index groups.
        return core.bind1(name, _vary_over(v, axes, env), axes=axes, axis_index_groups=None)

    return tree_util.tree_map(leaf, x)


def psum(x, axis_name, *, axis_index_groups=None):
    """Sums `x` (a pytree) over the devices along `axis_name`; the result is
    invariant over those axes."""
    return _all_reduce("psum", x, axis_name, axis_index_groups)


def pmax(x, axis_name, *, axis_index_groups=None):
    return _all_reduce("pmax", x, axis_name, axis_index_groups)


def pmin(x, axis_name, *, axis_index_groups=None):
    return _all_reduce("pmin", x, axis_name, axis_index_groups)


def pmean(x, axis_name, *, axis_index_groups=None):
    """psum divided by the number of values summed: the devices along the
    named axes (times the sizes of any integer, positional, axes)."""
    positional, axes = _split_axes(axis_name)
    n = axis_size(axes) if axes else 1
    if axis_index_groups is not None and not positional:
        n = len(_index_groups(axis_index_groups, axes)[0])

    def leaf(v):
        v = core.asarray_value(v)
        count = n * math.prod(v.shape[canonicalize_axis(a, v.ndim)] for a in set(positional))
        return psum(v, axis_name, axis_index_groups=axis_index_groups) / count

    return tree_util.tree_map(leaf, x)


def pvary(x, axis_name):
    """Casts `x` from invariant to varying over `axis_name` (no data moves)."""
    axes = _axis_tuple(axis_name)
    env = _env("pvary", axes)
    if not env[2]:
        return x
    return tree_util.tree_map(
        lambda v: core.bind1("pvary", _operand(v), axes=_in_mesh_order(env, axes)), x)


_PCAST_TARGETS = ("unreduced", "reduced", "varying")
# (from, to) -> the free cast between those manual types (JAX's table)
_PCASTS = {("invarying", "varying"): "pvary", ("invarying", "reduced"): "preduced",
           ("varying", "unreduced"): "vary_unreduced_cast_p",
           ("reduced", "varying"): "reduced_vary_cast_p"}


def _state_of(v, axes: tuple, op: str) -> str:
    """The one manual state `v` is in over all of `axes`."""
    aval = v.aval
    states = {"varying" if a in aval.vma else "unreduced" if a in aval.unreduced
              else "reduced" if a in aval.reduced else "invarying" for a in axes}
    if len(states) > 1:
        raise ValueError(f"{op} can only accept axis_name which corresponds to one of varying, "
                         "unreduced, reduced or invarying state of the input. Got input type: "
                         f"{aval.str_short()}, axes: {axes} and input state: {states}")
    return states.pop()


def pcast(x, axis_name, *, to: str):
    """Casts `x` among the manual types over `axis_name` with no communication:
    invariant to varying (pvary) or reduced, varying to unreduced, reduced to varying."""
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"axis_name={axis_name} must be a tuple or a str. Got {axis_name}")
    axes = _axis_tuple(axis_name)
    if not axes:
        return x
    if to not in _PCAST_TARGETS:
        raise ValueError(f"Got unexpected `to` value. Allowed `to` values are: {set(_PCAST_TARGETS)}")
    env = _env("pcast", axes)

    def leaf(v):
        v = _operand(v)
        if not env[2]:
            return v
        from_ = _state_of(v, axes, "jax.lax.pcast")
        prim = _PCASTS.get((from_, to))
        if prim is None:
            raise ValueError(f"Unsupported pcast from={from_}, to={to!r}")
        return core.bind1(prim, v, axes=_in_mesh_order(env, axes))

    return tree_util.tree_map(leaf, x)


# --- data-moving collectives ---------------------------------------------------


def _index_groups(axis_index_groups, axes: tuple):
    """`axis_index_groups` as a tuple of tuples (the collective's abstract evaluation
    checks that they split the indices along `axes` into groups of one size)."""
    if axis_index_groups is None:
        return None
    return tuple(tuple(int(i) for i in g) for g in axis_index_groups)


def _group_size(axes: tuple, groups) -> int:
    return len(groups[0]) if groups else axis_size(axes)


def all_gather(x, axis_name, *, axis_index_groups=None, axis=0, tiled=False, to="varying"):
    """Gathers `x` (a pytree) from every device along `axis_name`: stacked in
    a new dimension `axis` (or concatenated along it when `tiled`), in
    axis_index order. The result varies over the axes (`to='varying'`), or is
    invariant over them with `to='invarying'` (= `all_gather_invariant`)."""
    allowed = {"varying", "reduced", "invarying"}
    if to not in allowed:
        raise ValueError("Got unexpected `to` value for `jax.lax.all_gather`. Allowed `to` "
                         f"values are: {allowed}")
    if to == "invarying":
        if axis_index_groups is not None:
            raise NotImplementedError("all_gather(..., to='invarying') does not support "
                                      "axis_index_groups")
        return all_gather_invariant(x, axis_name, axis=axis, tiled=tiled)
    if to == "reduced":
        # Varying -> reduced: every device gets the whole gathered value, typed as equal blocks
        # whose cotangent is unreduced (JAX's all_gather_reduced).
        axes = _axis_tuple(axis_name)
        env = _env("all_gather", axes)
        gathered = all_gather_invariant(x, axis_name, axis=axis, tiled=tiled)
        return tree_util.tree_map(
            lambda v: core.bind1("preduced", v, axes=_in_mesh_order(env, axes)), gathered)
    frame = _vmapped(axis_name, "all_gather", whole=True)
    if frame is not None:
        return tree_util.tree_map(
            lambda v: _all_gather_over_vmap(
                frame, v, canonicalize_axis(axis, np.ndim(v) if tiled else np.ndim(v) + 1), tiled), x)
    axes = _axis_tuple(axis_name)
    if not axes:
        return x
    env = _env("all_gather", axes)
    groups = _index_groups(axis_index_groups, axes)
    size = _group_size(axes, groups)

    def leaf(v):
        v = _operand(v)
        dim = canonicalize_axis(axis, v.ndim if tiled else v.ndim + 1)
        return core.bind1("all_gather", _vary_over(v, axes, env), all_gather_dimension=dim,
                          axis_index_groups=groups, axis_name=axes, axis_size=size,
                          tiled=bool(tiled))

    return tree_util.tree_map(leaf, x)


def all_gather_invariant(x, axis_name, *, axis=0, tiled=False):
    """all_gather whose result is invariant over `axis_name` (every device
    holds the same gathered value, so it may be returned with out_specs P())."""
    axes = _axis_tuple(axis_name)
    if not axes:
        return x
    env = _env("all_gather_invariant", axes)
    size = axis_size(axes)

    def leaf(v):
        v = _operand(v)
        dim = canonicalize_axis(axis, v.ndim if tiled else v.ndim + 1)
        return core.bind1("all_gather_invariant", _vary_over(v, axes, env),
                          all_gather_dimension=dim, axis_name=axes, axis_size=size,
                          tiled=bool(tiled))

    return tree_util.tree_map(leaf, x)


def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):
    """Sums `x` (a pytree) over `axis_name` and leaves device k only chunk k of
    the sum along `scatter_dimension` (that dimension removed unless `tiled`).
    Appears in jaxprs as `reduce_scatter`, as in JAX."""
    axes = _axis_tuple(axis_name)
    if not axes:
        return x
    env = _env("psum_scatter", axes)
    groups = _index_groups(axis_index_groups, axes)
    size = _group_size(axes, groups)

    def leaf(v):
        v = _operand(v)
        dim = canonicalize_axis(scatter_dimension, v.ndim)
        if env[2] and _state_of(v, axes, "jax.lax.psum_scatter") == "unreduced":
            return _unreduced_psum_scatter(v, axes, env, dim, size, tiled)
        _check_same_state("psum_scatter", v, axes, env)
        return core.bind1("reduce_scatter", _vary_over(v, axes, env), axis_index_groups=groups,
                          axis_name=axes, axis_size=size, scatter_dimension=dim,
                          tiled=bool(tiled))

    return tree_util.tree_map(leaf, x)


def _unreduced_psum_scatter(v, axes: tuple, env, dim: int, size: int, tiled: bool):
    """Unreduced -> varying (JAX's unreduced_reduce_scatter): the pending sum performed as a
    reduce-scatter, each device keeping its chunk along `dim` (the dim dropped unless
    `tiled`; its abstract evaluation checks that the dim splits over the devices)."""
    return core.bind1("unreduced_reduce_scatter", v, axis_name=_in_mesh_order(env, axes),
                      axis_size=size, scatter_dimension=dim, tiled=bool(tiled))


_PPERMUTE_SORT_DIFF = (
    "Make sure that the axis_name passed to jax.lax.ppermute is in the same order as the "
    "axis_names declared on the mesh. If you want to allow different order, you can disable the "
    "check via `with jax.raise_on_ppermute_sort_diff(False):` context manager.")


def _check_ppermute_order(env, axes: tuple) -> None:
    """Indices in a ppermute over several axes count devices in mesh order
    (as in JAX <= 0.11); say so when the tuple names the axes otherwise."""
    mesh_order = _in_mesh_order(env, axes)
    if mesh_order == axes:
        return
    if config.jax_raise_on_ppermute_sort_diff:
        raise RuntimeError(_PPERMUTE_SORT_DIFF)
    warnings.warn(
        f"ppermute over axis_name={axes}: the indices in `perm` refer to the devices in mesh "
        f"order, i.e. row-major over {mesh_order}, not in the order the tuple names them "
        "(as in JAX <= 0.11; axis_index uses the tuple order). Newer JAX raises a RuntimeError "
        "here; set meshsim.config.update('jax_raise_on_ppermute_sort_diff', True) to do the same.",
        UserWarning, stacklevel=3)


def ppermute(x, axis_name, perm):
    """Sends each device's `x` (a pytree) to another along `axis_name`: `perm`
    lists (source, destination) index pairs; devices no pair sends to get
    zeros. Over a tuple of axes, indices count devices in mesh order."""
    if not isinstance(perm, (list, tuple)):
        raise TypeError("`perm` passed to `jax.lax.ppermute` must be a list or a tuple. Got perm "
                        f"of type {type(perm)}")
    frame = _vmapped(axis_name, "ppermute", whole=True)
    if frame is not None:
        return tree_util.tree_map(lambda v: _ppermute_over_vmap(frame, v, perm), x)
    axes = _axis_tuple(axis_name)
    env = _env("ppermute", axes)
    for pair in perm:  # the primitive checks the pairs and their indices
        if not isinstance(pair, (list, tuple)) or not all(isinstance(i, (int, np.integer)) for i in pair):
            raise TypeError("`perm` passed to `jax.lax.ppermute` must be a sequence of "
                            f"(source, destination) pairs of integers, got {perm!r}")
    perm = tuple(tuple(int(i) for i in pair) for pair in perm)
    if len(axes) > 1:
        _check_ppermute_order(env, axes)

    def leaf(v):
        return core.bind1("ppermute", _vary_over(_operand(v), axes, env), axis_name=axes,
                          perm=perm)

    return tree_util.tree_map(leaf, x)


def pshuffle(x, axis_name, perm):
    """ppermute where `perm[i]` is the source of index i."""
    if set(perm) != set(range(len(perm))):
        raise ValueError(f"`perm` does not represent a permutation: {perm}")
    return ppermute(x, axis_name, list(zip(perm, range(len(perm)))))


def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None, tiled=False):
    """Splits `x` (a pytree) along `split_axis` into one chunk per device of
    `axis_name`, sends chunk j to device j, and concatenates what arrives
    along `concat_axis` in source order (untiled: the split dimension must
    equal the axis size; it is removed and a new one inserted at
    `concat_axis`)."""
    frame = _vmapped(axis_name, "all_to_all", whole=True)
    if frame is not None:
        return tree_util.tree_map(
            lambda v: _all_to_all_over_vmap(frame, v, canonicalize_axis(split_axis, np.ndim(v)),
                                            canonicalize_axis(concat_axis, np.ndim(v)), tiled), x)
    axes = _axis_tuple(axis_name)
    env = _env("all_to_all", axes)
    groups = _index_groups(axis_index_groups, axes)
    n = _group_size(axes, groups)
    name_param = axes if isinstance(axis_name, (tuple, list)) else axis_name

    def leaf(v):
        v = _operand(v)
        split = canonicalize_axis(split_axis, v.ndim)
        concat = canonicalize_axis(concat_axis, v.ndim)
        if tiled:  # JAX's text names the axis as given (the primitive's names a tuple)
            if v.shape[split] % n != 0:
                raise ValueError(f"The size of all_to_all split_axis ({v.shape[split]}) has to be "
                                 f"divisible by the size of the named axis {axis_name} ({n})")
        else:
            if n != v.shape[split]:
                raise ValueError("all_to_all requires the size of the mapped axis axis_name to "
                                 "equal x.shape[split_axis], but they are "
                                 f"{n} and {v.shape[split]} respectively.")
            if split < concat:
                concat += 1
                v = expand_dims(v, (concat,))
            elif split > concat:
                v = expand_dims(v, (concat,))
                split += 1
        out = core.bind1("all_to_all", _vary_over(v, axes, env), axis_index_groups=groups,
                         axis_name=name_param, concat_axis=concat, split_axis=split,
                         tiled=bool(tiled))
        if not tiled and split != concat:
            out = squeeze(out, (split,))
        return out

    return tree_util.tree_map(leaf, x)


def pswapaxes(x, axis_name, axis, *, axis_index_groups=None):
    """all_to_all with split_axis = concat_axis = `axis`."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


def ragged_all_to_all(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
                      axis_name, axis_index_groups=None):
    """all_to_all of ragged row ranges: entry i of this device's offsets and
    sizes sends rows `operand[input_offsets[i]:][:send_sizes[i]]` to device
    `i // (len(send_sizes) // axis_size)`, where they land at rows
    `output_offsets[i]:` of its copy of `output`; `recv_sizes` says how many
    rows arrive from each sender. Slices that overrun a buffer raise
    ValueError when the program runs."""
    axes = _axis_tuple(axis_name)
    _env("ragged_all_to_all", axes)
    groups = _index_groups(axis_index_groups, axes)
    args = [_operand(a) for a in (operand, output, input_offsets, send_sizes, output_offsets,
                                   recv_sizes)]
    return core.bind1("ragged_all_to_all", *args, axis_index_groups=groups, axis_name=axes)


def pbroadcast(x, axis_name, source):
    """Every device along `axis_name` gets the `x` (a pytree) of the device at
    index `source`. Like JAX, the operand must already vary over the axes and
    the result is typed varying."""
    axes = _axis_tuple(axis_name)
    _env("pbroadcast", axes)
    return tree_util.tree_map(
        lambda v: core.bind1("pbroadcast", _operand(v), axis_name=axes, source=int(source)), x)

"""Collectives over a vmapped axis: `vmap(f, axis_name='b')` with `psum`, `pmean`, `pmax`,
`pmin`, `all_gather`, `axis_index`, `ppermute` and `all_to_all` over 'b' inside `f`.

While `f` is traced on one example, the example's index is an extra mapped input
(`axis_index('b')` is that index). A collective over 'b' records one
`host_rule_collective` equation whose operands are the example's values and that index,
so it is always batched. Its batching rule (computed here, through the core's host
rules) does on the whole batch what the collective does across examples: a sum over the
batch dimension, a stack of it, a permutation of it. When an inner vmap batches it
first, the inner batch is carried as a leading data dimension and the equation is
recorded again for the outer vmap. Its VJP binds the transposed collective over the
same axis (psum <-> psum, all_gather -> the own chunk of a psum, ppermute -> the inverse
permutation, all_to_all -> the swapped all_to_all), so per-example gradients compose."""
from __future__ import annotations

import dataclasses
import itertools
from typing import Callable

import numpy as np

from meshsim import _core
from meshsim._src import core


@dataclasses.dataclass(eq=False)
class Frame:
    """One vmap with an axis name, while its function is traced and its program batched."""
    name: object
    size: int
    index: object = None  # the example's index (a tracer of the per-example trace)


_frames: list[Frame] = []   # vmaps whose function is being traced, innermost last
_batching: list[Frame] = []  # vmaps whose program is being batched, innermost last


def frame_of(name) -> Frame | None:
    for frame in reversed(_frames):
        if frame.name == name:
            return frame
    return None


def split_names(axis_name) -> tuple[Frame | None, tuple, tuple]:
    """(the innermost vmap frame `axis_name` names, its names there, the other names)."""
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    frames = [frame_of(n) for n in names if not isinstance(n, (int, np.integer))]
    frames = [f for f in frames if f is not None]
    if not frames:
        return None, (), names
    frame = max(frames, key=_frames.index)
    mapped = tuple(n for n in names if n == frame.name)
    return frame, mapped, tuple(n for n in names if n != frame.name)


# --- the rules ----------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class Rule:
    """What one recorded collective does on the batch (`batched(xs, lead)`, batch at dim 0 and
    `lead` carried inner-batch dims after it; returns results and whether each is batched) and
    its VJP (`vjp(frame, xs, cts)` at the per-example level)."""
    frame: Frame
    batched: Callable
    vjp: Callable
    out_avals: list  # per example: [(shape, dtype)]
    lead: int = 0


_rules: dict[int, Rule] = {}
_ids = itertools.count()


def _jnp():
    from meshsim._src.numpy import namespace as jnp
    return jnp


def _at_front(v, d, size):
    jnp = _jnp()
    if d is None:
        return jnp.broadcast_to(jnp.expand_dims(v, 0), (size, *v.shape))
    return jnp.moveaxis(v, d, 0)


def _batch_rule(rule_id: int, values: list, dims: list, size: int):
    rule = _rules[rule_id]
    xs = [_at_front(v, d, size) for v, d in zip(values[:-1], dims[:-1])]
    if _batching and _batching[-1] is rule.frame:
        outs, batched = rule.batched(xs, rule.lead)
        return list(outs), [0 if b else None for b in batched]
    # An inner vmap batches it first: its batch becomes a leading data dimension.
    index = values[-1]
    if dims[-1] is not None:
        raise NotImplementedError("a collective over an outer vmap's axis whose index is batched")
    carried = Rule(rule.frame, rule.batched, rule.vjp,
                   [((size, *shape), dtype) for shape, dtype in rule.out_avals], rule.lead + 1)
    return list(_record(carried, xs, index)), [0] * len(carried.out_avals)


def _vjp_rule(rule_id: int, values: list, cts: list):
    rule = _rules[rule_id]
    if rule.lead:
        raise NotImplementedError("differentiating a collective over a vmapped axis inside an "
                                  "inner vmap")
    # The transposed collectives take the example's index from this equation's operands (the
    # backward pass is traced apart from the per-example trace that holds frame.index).
    return list(rule.vjp(rule.frame, values[:-1], cts, values[-1])) + [None]


_core.set_host_rules(_batch_rule, _vjp_rule)


def _record(rule: Rule, xs: list, index) -> tuple:
    rule_id = next(_ids)
    _rules[rule_id] = rule
    return core.bind("host_rule_collective", *xs, index, rule=rule_id,
                     result_shapes=tuple(tuple(int(d) for d in s) for s, _ in rule.out_avals),
                     result_dtypes=tuple(np.dtype(t).name for _, t in rule.out_avals))


def _collective(frame: Frame, x, batched: Callable, vjp: Callable, out_shape, out_dtype, index):
    """Records one collective over `frame`'s axis on the per-example value `x`."""
    x = core.asarray_value(x)
    index = frame.index if index is None else index
    return _record(Rule(frame, batched, vjp, [(tuple(out_shape), out_dtype)]), [x], index)[0]


# --- the collectives ------------------------------------------------------------

def _reduce(op: str):
    def batched(xs, lead):
        jnp = _jnp()
        reduce = {"psum": jnp.sum, "pmax": jnp.max, "pmin": jnp.min}[op]
        return [reduce(xs[0], axis=0)], [False]
    return batched


def _psum_vjp(frame, xs, cts, index):
    return [None if cts[0] is None else psum(frame, cts[0], index)]


def _no_vjp(op: str):
    def vjp(frame, xs, cts, index):
        raise NotImplementedError(f"Differentiation rule for '{op}' not implemented")
    return vjp


def psum(frame: Frame, x, index=None):
    x = core.asarray_value(x)
    if x.dtype == np.bool_:
        x = core.convert_element_type(x, np.int32)
    return _collective(frame, x, _reduce("psum"), _psum_vjp, x.shape, x.dtype, index)


def pmax(frame: Frame, x, index=None):
    x = core.asarray_value(x)
    return _collective(frame, x, _reduce("pmax"), _no_vjp("pmax"), x.shape, x.dtype, index)


def pmin(frame: Frame, x, index=None):
    x = core.asarray_value(x)
    return _collective(frame, x, _reduce("pmin"), _no_vjp("pmin"), x.shape, x.dtype, index)


def axis_index(frame: Frame):
    return frame.index


def all_gather(frame: Frame, x, axis: int, tiled: bool, index=None):
    x = core.asarray_value(x)
    n = frame.size

    def batched(xs, lead):
        jnp = _jnp()
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
        total = psum(frame, cts[0], index)
        if tiled:
            k = x.shape[axis]
            return [indexing.dynamic_slice_in_dim(total, index * k, k, axis)]
        return [indexing.dynamic_index_in_dim(total, index, axis, keepdims=False)]

    shape = list(x.shape)
    if tiled:
        shape[axis] *= n
    else:
        shape.insert(axis, n)
    return _collective(frame, x, batched, vjp, tuple(shape), x.dtype, index)


def ppermute(frame: Frame, x, perm, index=None):
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
        jnp = _jnp()
        taken = jnp.take(xs[0], np.maximum(src, 0), axis=0)
        mask = (src >= 0).reshape((n,) + (1,) * (taken.ndim - 1))
        return [jnp.where(mask, taken, jnp.zeros_like(taken))], [True]

    def vjp(frame, xs, cts, index):
        return [None if cts[0] is None else ppermute(frame, cts[0], [(b, a) for a, b in perm], index)]

    return _collective(frame, x, batched, vjp, x.shape, x.dtype, index)


def all_to_all(frame: Frame, x, split_axis: int, concat_axis: int, tiled: bool, index=None):
    x = core.asarray_value(x)
    n = frame.size

    def batched(xs, lead):
        s = _jnp()
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
        return [all_to_all(frame, cts[0], concat_axis, split_axis, tiled, index)]

    shape = list(x.shape)
    if tiled:
        shape[split_axis] //= n
        shape[concat_axis] *= n
    else:
        del shape[split_axis]
        shape.insert(concat_axis, n)
    return _collective(frame, x, batched, vjp, tuple(shape), x.dtype, index)


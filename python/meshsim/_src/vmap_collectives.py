"""Collectives over a vmapped axis: `vmap(f, axis_name='b')` with `psum`, `pmean`, `pmax`,
`pmin`, `all_gather`, `axis_index`, `ppermute` and `all_to_all` over 'b' inside `f`. The
machinery is here; each collective's form over the batch is written beside its wrapper
(lax/parallel.py) with `collective`.

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


def jnp():
    """meshsim.numpy, for the collectives' batched forms (written with NumPy functions)."""
    from meshsim._src.numpy import namespace
    return namespace


def _at_front(v, d, size):
    np_ = jnp()
    if d is None:
        return np_.broadcast_to(np_.expand_dims(v, 0), (size, *v.shape))
    return np_.moveaxis(v, d, 0)


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


def collective(frame: Frame, x, batched: Callable, vjp: Callable, out_shape, out_dtype, index):
    """Records one collective over `frame`'s axis on the per-example value `x`: its
    wrapper (lax/parallel.py) gives what it does on the whole batch (`batched(xs, lead)`)
    and its VJP (`vjp(frame, xs, cts, index)`), see Rule; `index` (None: the
    example's own) is the example's index along the axis."""
    x = core.asarray_value(x)
    index = frame.index if index is None else index
    return _record(Rule(frame, batched, vjp, [(tuple(out_shape), out_dtype)]), [x], index)[0]

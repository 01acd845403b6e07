"""Checkpointing (`jax.checkpoint` / `remat`) and its policies (`jax.checkpoint_policies`).

A checkpointed function is bound as one `remat2` equation holding its program; the
C++ transform (cpp/meshsim/transforms/vjp.h) recomputes it in the backward pass,
keeping only what the policy saves. Policies written in Python are asked, per
primitive, while the transform runs (`_evaluate_policy`), never while programs execute."""
from __future__ import annotations

import dataclasses
import functools
import operator
import types
from typing import Any, Callable

from meshsim import _core
from meshsim._src import core, tracing, tree_util

@dataclasses.dataclass(frozen=True)
class _PrimitiveView:
    """What a checkpoint policy receives as the primitive: `.name` is JAX's name.
    `saved_as_dot`: None unless the primitive declares JAX's dots policies save it
    (Primitive::saved_as_dot), then whether this application has no batch dims."""
    name: str
    saved_as_dot: bool | None = None

    def __str__(self):
        return self.name


class _Policy:
    """A checkpoint policy: callable as JAX's are; the built-in ones are also known to
    the C++ transform by name and never call back into Python."""

    def __init__(self, name: str, fn: Callable, builtin: bool):
        self.name, self._fn, self.builtin = name, fn, builtin

    def __call__(self, prim, *args, **params):
        return self._fn(prim, *args, **params)

    def __repr__(self):
        return self.name


class _PolicyAnswer:
    """What a checkpoint policy may return besides a bool (see _saves)."""

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return self._name


Saveable = _PolicyAnswer("Saveable")
Recompute = _PolicyAnswer("Recompute")


@dataclasses.dataclass(frozen=True)
class Offloadable:
    """Save the value in memory kind `dst` (host and device memory are one here: saved in place)."""
    src: Any
    dst: Any


def _saves(answer) -> bool:
    """Whether a policy's answer (a bool, Saveable, Recompute or Offloadable) saves the value."""
    if answer is Recompute:
        return False
    return answer is Saveable or isinstance(answer, Offloadable) or bool(answer)


def _offload_dot_no_batch(offload_src, offload_dst):
    return _Policy("offload_dot_with_no_batch_dims",
                   lambda *a, **k: Offloadable(offload_src, offload_dst) if _dot_no_batch(*a, **k)
                   else Recompute, builtin=False)


def _save_and_offload_names(*, names_which_can_be_saved, names_which_can_be_offloaded, offload_src,
                            offload_dst):
    def policy(prim, *_, **params):
        if getattr(prim, "name", None) != "name":
            return Recompute
        if params["name"] in names_which_can_be_saved:
            return Saveable
        if params["name"] in names_which_can_be_offloaded:
            return Offloadable(offload_src, offload_dst)
        return Recompute
    return _Policy("save_and_offload_only_these_names", policy, builtin=False)


def _dot_no_batch(prim, *_, **__) -> bool:
    return bool(getattr(prim, "saved_as_dot", None))


def _names_policy(label: str, keep: Callable[[str], bool]) -> _Policy:
    def policy(prim, *_, **params):
        return getattr(prim, "name", None) == "name" and keep(params["name"])
    return _Policy(label, policy, builtin=False)


def _save_only_these_names(*names):
    return _names_policy(f"save_only_these_names{names}", lambda n: n in names)


def _save_any_names_but_these(*names):
    return _names_policy(f"save_any_names_but_these{names}", lambda n: n not in names)


def _save_from_both_policies(policy_1, policy_2):
    return _Policy(f"save_from_both_policies({policy_1!r}, {policy_2!r})",
                   lambda *a, **k: _saves(policy_1(*a, **k)) or _saves(policy_2(*a, **k)), builtin=False)


_everything = _Policy("everything_saveable", lambda *_, **__: True, builtin=True)
_nothing = _Policy("nothing_saveable", lambda *_, **__: False, builtin=True)
_dots = _Policy("dots_saveable", lambda prim, *_, **__: getattr(prim, "saved_as_dot", None) is not None,
                builtin=True)
_dots_no_batch = _Policy("dots_with_no_batch_dims_saveable", _dot_no_batch, builtin=True)

checkpoint_policies = types.SimpleNamespace(
    everything_saveable=_everything,
    nothing_saveable=_nothing,
    dots_saveable=_dots,
    checkpoint_dots=_dots,
    dots_with_no_batch_dims_saveable=_dots_no_batch,
    checkpoint_dots_with_no_batch_dims=_dots_no_batch,
    save_only_these_names=_save_only_these_names,
    save_any_names_but_these=_save_any_names_but_these,
    save_anything_except_these_names=lambda *names: _everything,  # as JAX implements it today
    save_from_both_policies=_save_from_both_policies,
    offload_dot_with_no_batch_dims=_offload_dot_no_batch,
    save_and_offload_only_these_names=_save_and_offload_names,
)

# Python policies by the name the remat2 equation carries.
_POLICIES: dict[str, Callable] = {}


def _policy_key(policy) -> str | None:
    if policy is None:
        return None
    if isinstance(policy, _Policy) and policy.builtin:
        return policy.name
    if not callable(policy):
        raise TypeError(f"checkpoint policy must be callable, got {policy!r}")
    base = policy.name if isinstance(policy, _Policy) else getattr(policy, "__name__", type(policy).__name__)
    key = f"{base}#{id(policy):x}"
    _POLICIES[key] = policy
    return key


def _jax_params(prim: str, params: dict) -> dict:
    if prim == "dot_general" and "dimension_numbers" in params:
        lc, rc, lb, rb = params["dimension_numbers"]
        params = dict(params, dimension_numbers=((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))))
    return params


def _evaluate_policy(key: str, prim: str, avals, params: dict, dot: bool | None) -> bool:
    """Called by the C++ transform for policies it does not know."""
    policy = _POLICIES.get(key)
    if policy is None:
        raise ValueError(f"unknown checkpoint policy {key!r}")
    return _saves(policy(_PrimitiveView(prim, dot), *avals, **_jax_params(prim, params)))


def checkpoint(fun: Callable | None = None, *, prevent_cse: bool = True, policy: Callable | None = None,
               static_argnums: int | tuple[int, ...] = ()):
    """`fun` whose intermediate values are recomputed in the backward pass instead of
    saved, except those `policy(prim, *avals, **params)` says may be saved."""
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy,
                                 static_argnums=static_argnums)
    static = {operator.index(i) for i in ((static_argnums,) if isinstance(static_argnums, int) else static_argnums)}
    key = _policy_key(policy)

    @functools.wraps(fun)
    def remat_f(*args, **kwargs):
        # Traced even when called eagerly, as JAX does: Python control flow on a non-static
        # argument raises the same TracerBoolConversionError everywhere.
        nums = {i % len(args) if args else i for i in static}
        dyn = [a for i, a in enumerate(args) if i not in nums]
        raw, in_tree = tree_util.tree_flatten((dyn, kwargs))
        leaves = [core.asarray_value(x) for x in raw]

        def flat(dyn_args, dyn_kwargs):
            it = iter(dyn_args)
            full = [args[i] if i in nums else next(it) for i in range(len(args))]
            return fun(*full, **dyn_kwargs)

        program, consts, out_tree = tracing.trace_flat(flat, in_tree, [x.aval for x in leaves])
        outs = core.bind("remat2", *leaves, *consts, jaxpr=program, prevent_cse=bool(prevent_cse),
                         differentiated=False, policy=key)
        return tree_util.tree_unflatten(out_tree, outs)

    return remat_f


remat = checkpoint

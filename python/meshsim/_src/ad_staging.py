"""Autodiff helpers around the VJP transform: `fwd_and_bwd` (a forward and a backward
function that can each be jitted once) and what a function saves for its backward pass
(`saved_residuals`, `print_saved_residuals`)."""
from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

from meshsim import _core
from meshsim._src import ad, tracing, tree_util


def fwd_and_bwd(fun: Callable, argnums: int | Sequence[int], has_aux: bool = False,
                jitted: bool = True) -> tuple[Callable, Callable]:
    """(fwd, bwd): `fwd(*args)` returns `(fun(*args), residuals)` (with `aux` last when
    `has_aux`) and `bwd(residuals, cotangent)` the cotangents of the arguments at `argnums`.
    The residuals are the arguments themselves: bwd runs the forward pass again inside
    the backward program, so both functions keep one compiled program per signature."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    def fwd(*args):
        out = fun(*args)
        if has_aux:
            out, aux = out
            return out, args, aux
        return out, args

    def bwd(residuals, cotangent):
        def of_chosen(*chosen):
            full = list(residuals)
            for i, value in zip(nums, chosen):
                full[i] = value
            result = fun(*full)
            return result[0] if has_aux else result
        _, pullback = ad.vjp(of_chosen, *[residuals[i] for i in nums])
        cts = pullback(cotangent)
        return cts[0] if isinstance(argnums, int) else cts

    if jitted:
        from meshsim._src.api import jit
        return jit(fwd), jit(bwd)
    return fwd, bwd


def _argument_names(fun: Callable, args: tuple, kwargs: dict) -> list[str]:
    """Per array leaf of (args, kwargs): its name as JAX's messages write it (`x`, `p['w']`)."""
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for i, a in enumerate(args):
        base = params[i] if i < len(params) else f"args[{i}]"
        names += [base + tree_util.keystr(path) for path, _ in tree_util.tree_flatten_with_path(a)[0]]
    for k, v in kwargs.items():
        names += [k + tree_util.keystr(path) for path, _ in tree_util.tree_flatten_with_path(v)[0]]
    return names


def saved_residuals(f: Callable, *args, **kwargs) -> list[tuple[Any, str]]:
    """(type, where it comes from) for every value `jax.grad(f)` keeps from the forward pass
    for the backward pass: arguments first, then operations' results in program order."""
    leaves, in_tree = ad._flatten_values((args, kwargs))
    program, captures, out_tree = tracing.trace_flat(lambda a, k: f(*a, **k), in_tree,
                                                 [x.aval for x in leaves])
    fwd = _core.vjp_program(program, [True] * len(leaves) + [False] * len(captures),
                            [True] * out_tree.num_leaves, ad._evaluate_policy)[0]
    names = _argument_names(f, args, kwargs)
    producer = {}
    for position, ((prim, _, outs, params, *_), source) in enumerate(zip(fwd.equations(),
                                                                           fwd.source_infos())):
        for v in outs:
            producer[v] = (position, prim, params, f" from {source}" if source else "")
    residual_vars = fwd.outvars[out_tree.num_leaves:]
    from_args, from_ops, from_literals = [], [], []
    for v in residual_vars:
        aval = fwd.avals[v]
        if v in fwd.invars:
            i = fwd.invars.index(v)
            what = f"from the argument {names[i]}" if i < len(names) else "from a value closed over"
            from_args.append((i, aval, what))
        elif v in producer:
            position, prim, params, where = producer[v]
            what = (f"named '{params['name']}'" if prim == "name" else
                    f"output of jitted function '{params['name']}'" if prim == "jit" else
                    f"output of {prim}") + where
            from_ops.append((position, aval, what))
        else:
            from_literals.append((aval, "from a literal"))
    # JAX's order: literals, arguments, then operations' results in program order.
    return from_literals + [(aval, what) for _, aval, what in sorted(from_args, key=lambda t: t[0])] + \
        [(aval, what) for _, aval, what in sorted(from_ops, key=lambda t: t[0])]


def print_saved_residuals(f: Callable, *args, **kwargs) -> None:
    """Prints `saved_residuals(f, *args, **kwargs)`, one value a line."""
    for aval, what in saved_residuals(f, *args, **kwargs):
        print(f"{aval.str_short(short_dtypes=True)} {what}")

"""Refs under reverse-mode autodiff, as JAX 0.10.2 has them.

- A Ref passed to `vjp` as a primal is read and written by the forward pass like any Ref
  argument; its cotangent would have to be a Ref, so asking for it (a plain call of the VJP,
  or a Ref or GradValue() in `with_refs`) is JAX's ValueError, and only DontWant() goes.
- A differentiated function writing a Ref made outside it has the Ref discharged as jit
  does (ref.py): its value is an extra input, its final value an extra output that is not
  differentiated. Writing a value that depends on the differentiated inputs (other than
  through `stop_gradient`) is JAX's error; the dependence is read off the traced program.
- A custom_vjp backward rule writing a Ref made outside it (stashing a cotangent) writes it
  when the backward pass runs: the write becomes an ordered host callback in the backward
  program, so eagerly, under jit and inside a grad of a jit alike the Ref ends up holding the
  cotangent."""
from __future__ import annotations

import contextlib

import numpy as np

from meshsim import _core
from meshsim._src import core, dtype_kinds, ref, tree_util


def aval_text(value) -> str:
    return str(core.typeof(value)).lstrip("~")


# --- Ref primals of vjp ------------------------------------------------------------------------

def unref_primals(leaves: list) -> tuple[list, list[int]]:
    """The leaves with each Ref replaced by its value, and the Refs' positions."""
    where = [i for i, x in enumerate(leaves) if isinstance(x, ref.Ref)]
    return [x._typed_value() if isinstance(x, ref.Ref) else x for x in leaves], where


def with_ref_arguments(fun, in_tree, where: list[int]):
    """`fun` taking the values of the Ref primals at `where` and returning (result, the Refs'
    final values): while it runs, fresh Refs holding those values stand for the caller's."""
    def traced(*args):
        flat = tree_util.tree_leaves(args)
        refs = [ref.Ref(flat[i]) for i in where]
        for i, r in zip(where, refs):
            flat[i] = r
        result = fun(*tree_util.tree_unflatten(in_tree, flat))
        return result, [r._value for r in refs]
    return traced


def refuse_ref_cotangents(in_leaves: list, where: list[int], wanted) -> None:
    """JAX's error when a Ref primal's cotangent is asked for as a value."""
    for i in where:
        if wanted is None or wanted[i]:
            text = aval_text(in_leaves[i])
            raise ValueError(f"Expected cotangent type Ref{{{text}}} but got {text}")


# --- Refs a differentiated function closes over --------------------------------------------------

def _sub_dependence(program, deps: list[bool], on_dependent=None) -> list[bool]:
    """Which outputs of `program` depend, other than through stop_gradient, on the inputs
    flagged in `deps`. `on_dependent(name, params)` is called for each equation, sub-programs'
    included, that reads such a value."""
    env = dict(zip(program.invars, deps))
    avals = program.avals
    for name, ins, outs, params, *_ in program.equations():
        in_deps = [env.get(v, False) for v in ins]
        if on_dependent is not None and any(in_deps):
            on_dependent(name, params)
        out_deps = _equation_dependence(name, in_deps, params, len(outs), on_dependent)
        for v, d in zip(outs, out_deps):
            env[v] = d and dtype_kinds.issubdtype(avals[v].dtype, np.inexact)
    return [env.get(v, False) for v in program.outvars]


def _equation_dependence(name: str, in_deps: list[bool], params: dict, n_out: int,
                         on_dependent=None) -> list[bool]:
    declared = _core.primitive_info(name)
    # A primitive whose derivative is zero (stop_gradient, floor, sign, ...) gives JAX's
    # symbolic zero: its results are not differentiated values.
    if declared["zero_derivative"] or not any(in_deps):
        return [False] * n_out
    if declared["sub_program_links"]:
        return _control_flow_dependence(_core.sub_program_links(name, params), in_deps, n_out,
                                        on_dependent)
    for key in declared["sub_program_params"]:
        sub = params.get(key)
        if sub is not None and hasattr(sub, "equations") and len(sub.invars) == len(in_deps) \
                and len(sub.outvars) == n_out:
            return _sub_dependence(sub, in_deps, on_dependent)
    return [True] * n_out


def _control_flow_dependence(links: dict, in_deps: list[bool], n_out: int,
                             on_dependent=None) -> list[bool]:
    """Follows the dependence through the sub-programs a control-flow primitive declares it
    passes its operands to (cond's branches, a loop's body) to the fixed point of the
    carries. A carried result may be its initial value (a loop that runs no step)."""
    out = [False] * n_out
    for program, in_operand, in_result, _ in links["programs"]:
        for i, r in zip(in_operand, in_result):
            if i >= 0 and r >= 0 and in_deps[i]:
                out[r] = True
    while True:
        grown = list(out)
        for program, in_operand, in_result, out_result in links["programs"]:
            sub_in = [(i >= 0 and in_deps[i]) or (r >= 0 and out[r])
                      for i, r in zip(in_operand, in_result)]
            for r, d in zip(out_result, _sub_dependence(program, sub_in, on_dependent)):
                if r >= 0 and d:
                    grown[r] = True
        if grown == out:
            return out
        out = grown


def refuse_forward_mode_custom_vjp(program, wrt: list[bool]) -> None:
    """JAX's error when a tangent would flow through a custom_vjp function, whose rule only
    says how to pull cotangents back (JAX raises when the linearized function is evaluated
    forward: jvp, jacfwd, calling linearize's function). meshsim's own custom_vjp functions
    standing for what JAX differentiates both ways are marked `forward_mode`."""
    def refuse(name: str, params: dict) -> None:
        if name == "custom_vjp_call" and not params.get("forward_mode", False):
            raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")
    avals = program.avals  # integer inputs have no tangent (float0)
    _sub_dependence(program, [w and dtype_kinds.issubdtype(avals[v].dtype, np.inexact)
                              for v, w in zip(program.invars, wrt)], refuse)


def refuse_reverse_mode(program, wrt: list[bool]) -> None:
    """JAX's error when a cotangent would flow back through what JAX differentiates only
    forward (a custom_linear_solve given no transpose_solve): its custom_vjp_call holds the
    text as `reverse_refusal`."""
    def refuse(name: str, params: dict) -> None:
        if name == "custom_vjp_call" and params.get("reverse_refusal"):
            raise TypeError(params["reverse_refusal"])
    avals = program.avals
    _sub_dependence(program, [w and dtype_kinds.issubdtype(avals[v].dtype, np.inexact)
                              for v, w in zip(program.invars, wrt)], refuse)


def refuse_differentiated_writes(program, wrt: list[bool], refs: list, first_ref_output: int) -> None:
    """JAX's error when a closed-over Ref's final value depends on a differentiated input."""
    deps = _sub_dependence(program, wrt)
    for r, d in zip(refs, deps[first_ref_output:first_ref_output + len(refs)]):
        if d:
            raise Exception(  # noqa: TRY002 - JAX raises a bare Exception here
                "performing a set/swap operation with a differentiated value on a non-differentiated "
                f"array reference of type Ref{{{aval_text(r._value)}}}. Move the array reference to be "
                "an argument of the differentiated function?")


# --- custom_vjp backward rules writing Refs ------------------------------------------------------

class RefSlots:
    """The Refs among some pytree leaves, which a traced rule passes through untraced: each is
    replaced by a placeholder scalar and put back where the rule sees its arguments."""

    def __init__(self, leaves: list):
        self.refs = {i: x for i, x in enumerate(leaves) if isinstance(x, ref.Ref)}

    def placeholders(self, leaves: list) -> list:
        return [np.int32(0) if i in self.refs else x for i, x in enumerate(leaves)]

    def restore(self, tree):
        if not self.refs:
            return tree
        leaves, treedef = tree_util.tree_flatten(tree)
        return tree_util.tree_unflatten(treedef, [self.refs.get(i, x) for i, x in enumerate(leaves)])


@contextlib.contextmanager
def writes_at_run_time():
    """While the innermost trace opened inside the block (a custom_vjp backward rule) is traced,
    its writes of traced values into Refs made eagerly happen when the traced program runs:
    each becomes an ordered host callback."""
    ref.RUN_TIME_WRITES.append(_write_at_run_time)
    try:
        yield
    finally:
        ref.RUN_TIME_WRITES.pop()


def _write_at_run_time(target: ref.Ref, op: str, idx, value) -> None:
    from meshsim._src import callback

    def write(v):
        v = core.asarray_value(v)
        if op == "swap":
            target[idx] = v
        else:
            target.addupdate(v, idx)

    target._run_time_writes = True
    callback.debug_callback(write, value, ordered=True)

"""Control flow (as jax.lax): cond, switch, while_loop, fori_loop, scan, map.

Each traces its functions into programs (inside the current axis environment,
so bodies may use collectives) and binds one primitive holding them: `cond`,
`while` or `scan` (cpp/meshsim/primitives/control_flow.cpp). Values the
functions close over become the primitive's leading operands, as JAX's
constants do. The checks with pytree paths and JAX's texts live here."""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from meshsim import _core
from meshsim._src import core, ref, tracing, tree_util
from meshsim._src import dtype_kinds

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]


class _NoOperand:
    pass


_no_operand_sentinel = _NoOperand()


# --- tracing -------------------------------------------------------------------

class _Traced:
    """A function traced on flat input types: its program (inputs: the flat
    arguments, then the values it closes over: tracers of enclosing traces and,
    traced eagerly, arrays of one or more dims), those values, its output tree
    and output types."""

    def __init__(self, fun: Callable, in_tree, avals: Sequence, discharges_refs: bool = False,
                 traced_for: str = ""):
        eager = _core.current_trace() is None
        with tracing.open_trace() as trace:
            tracers = [trace.new_input(a) for a in avals]
            args = tree_util.tree_unflatten(in_tree, tracers)
            # Errors name the user's function: a wrapper says which, with its arguments.
            describe = getattr(fun, "describe", None) or (lambda args: (fun, traced_for, args, {}))
            with ref.recording(trace, discharges=discharges_refs) as refs, \
                    tracing.describing(trace, *describe(args)):
                out = fun(*args)
                leaves, self.out_tree = tree_util.tree_flatten(out)
                leaves = [core.asarray_value(x) for x in leaves]
            self.program, captures = trace.finish_capturing(leaves)
        if eager:
            # JAX passes the arrays a body closes over as operands: called eagerly, XLA compiles
            # the loop or branch with them as parameters (under jit, as constants).
            self.program, arrays = self.program.with_array_consts_as_inputs()
            captures = [*captures, *arrays]
        # Refs made outside that the function writes: the loop carries them (see ref.py).
        self.written_refs = refs.written
        self.consts = list(captures)
        self.num_args = len(avals)
        self.out_avals = list(self.program.out_avals)

    def consts_first(self, all_consts: Sequence) -> Any:
        """The program taking `all_consts` (a superset of its own) then its arguments."""
        const_avals = [c.aval for c in all_consts]
        in_avals = self.program.in_avals
        where = [len(all_consts) + i for i in range(self.num_args)]
        where += [_index_of(all_consts, c) for c in self.consts]
        return self.program.with_inputs([*const_avals, *in_avals[:self.num_args]], where)


def _index_of(values: Sequence, x) -> int:
    return next(i for i, v in enumerate(values) if v is x)


def _merge_consts(traced: Sequence[_Traced]) -> list:
    merged: list = []
    for t in traced:
        for c in t.consts:
            if not any(c is m for m in merged):
                merged.append(c)
    return merged


def _flatten(tree):
    leaves, treedef = tree_util.tree_flatten(tree)
    return [core.asarray_value(x) for x in leaves], treedef


# --- JAX's error texts -------------------------------------------------------------

def _capitalize(s: str) -> str:
    return s[0].capitalize() + s[1:]


def _typematch(a, b) -> bool:  # as core.typematch: weak types aside
    return a.shape == b.shape and a.dtype == b.dtype and a.vma == b.vma


def _mismatch_extra(a, b) -> str:
    problems = []
    if a.dtype != b.dtype:
        problems.append("the dtypes do not match")
    if a.shape != b.shape:
        problems.append("the shapes do not match")
    if a.vma != b.vma:
        problems.append("the manual axis types do not match")
    if not problems:
        return ""
    if len(problems) == 1:
        return ", so " + problems[0]
    return ", so " + ", ".join(problems[:-1]) + ", and " + problems[-1]


def _pcast_tuple(axes) -> str:
    return str(tuple(sorted(axes)))


def _listing(items: list[str], sep: str) -> str:
    if len(items) == 1:
        return f"{_capitalize(items[0])}.\n"
    return sep.join(f"  * {d};" + ("\n" if sep == "\n" else "") for d in items[:-1]) + \
        ("\n" if sep != "\n" else "") + f"  * {items[-1]}.\n"


def _paths(tree) -> list:
    try:
        example = tree_util.tree_unflatten(tree, [0] * tree.num_leaves)
        return [p for p, _ in tree_util.tree_flatten_with_path(example)[0]]
    except Exception:  # noqa: BLE001 - a tree whose nodes cannot be rebuilt from zeros
        return [()] * tree.num_leaves


def _check_carry_type(name: str, body_fun: Callable, in_tree, in_avals, out_tree, out_avals):
    try:
        carry_name = list(inspect.signature(body_fun).parameters)[0]
    except (ValueError, TypeError, IndexError):
        carry_name = None
    if carry_name:
        component = lambda p: (f"the input carry component {carry_name}{tree_util.keystr(p)}"
                               if p else f"the input carry {carry_name}")
    else:
        component = lambda p: (f"the input carry at path {tree_util.keystr(p)}"
                               if p else "the input carry")
    if in_tree != out_tree:
        diffs = [f"{component(p)} is a {a} but the corresponding component of the carry "
                 f"output is a {b}, so {why}"
                 for p, a, b, why in _equality_errors((), _example(in_tree, in_avals),
                                                      _example(out_tree, out_avals))]
        if not diffs:
            differences = (f"the input tree structure is:\n{in_tree}\n"
                           f"the output tree structure is:\n{out_tree}\n")
        elif len(diffs) == 1:
            differences = f"{_capitalize(diffs[0])}.\n"
        else:
            differences = "\n".join(f"  * {d};\n" for d in diffs[:-1]) + f"  * {diffs[-1]}.\n"
        raise TypeError(
            f"{name} function carry input and carry output must have the same "
            "pytree structure, but they differ:\n\n"
            f"{differences}\n"
            "Revise the function so that the carry output has the same pytree "
            "structure as the carry input.")
    if all(_typematch(a, b) for a, b in zip(in_avals, out_avals)):
        return
    paths = _paths(in_tree)
    diffs = [f"{component(p)} has type {a.str_short()} but the corresponding output carry "
             f"component has type {b.str_short()}{_mismatch_extra(a, b)}"
             for p, a, b in zip(paths, in_avals, out_avals) if not _typematch(a, b)]
    differences = (f"{_capitalize(diffs[0])}.\n" if len(diffs) == 1 else
                   "\n".join(f"  * {d};\n" for d in diffs[:-1]) + f"  * {diffs[-1]}.\n")
    pvary = [f"applying `jax.lax.pcast(..., {_pcast_tuple(b.vma - a.vma)}, to='varying')`, "
             f"to the initial carry value corresponding to {component(p)}"
             for p, a, b in zip(paths, in_avals, out_avals)
             if not _typematch(a, b) and a.vma != b.vma and b.vma - a.vma]
    if not pvary:
        pvary_msg = ""
    elif len(pvary) == 1:
        pvary_msg = f"This might be fixed by {pvary[0]}.\n"
    else:
        pvary_msg = ("This might be fixed by:\n" + "\n".join(f"  * {d};\n" for d in pvary[:-1])
                     + f"  * {pvary[-1]}.\n")
    if pvary_msg:
        pvary_msg += ("See https://docs.jax.dev/en/latest/notebooks/shard_map.html#scan-vma "
                      "for more information.\n\n")
    raise TypeError(
        f"{name} function carry input and carry output must have equal types, "
        "but they differ:\n\n"
        f"{differences}\n"
        f"{pvary_msg}"
        "Revise the function so that all output types match the corresponding "
        "input types.")


def _example(tree, avals):
    try:
        return tree_util.tree_unflatten(tree, list(avals))
    except Exception:  # noqa: BLE001 - a node that cannot be rebuilt from types
        return None


def _equality_errors(path, t1, t2):
    """JAX's tree_util.equality_errors for the common cases: Python types,
    lengths and numbers of children that differ."""
    is_leaf = lambda t: tree_util.treedef_is_leaf(tree_util.tree_structure(t))
    if t1 is None or t2 is None or (is_leaf(t1) and is_leaf(t2)):
        return
    if type(t1) != type(t2):
        yield path, str(type(t1)), str(type(t2)), "their Python types differ"
        return
    if isinstance(t1, (list, tuple)) and len(t1) != len(t2):
        yield (path, f"{type(t1).__name__} of length {len(t1)}", f"{type(t2).__name__} of length {len(t2)}",
               "the lengths do not match")
        return
    c1, c2 = tree_util.flatten_one_level_with_keys(t1)[0], tree_util.flatten_one_level_with_keys(t2)[0]
    c1, c2 = list(c1), list(c2)
    if len(c1) != len(c2):
        plural = lambda n: "ren" if n > 1 else ""
        yield (path, f"{type(t1)} with {len(c1)} child{plural(len(c1))}",
               f"{type(t2)} with {len(c2)} child{plural(len(c2))}", "the numbers of children do not match")
        return
    for (k1, v1), (_, v2) in zip(c1, c2):
        yield from _equality_errors((*path, k1), v1, v2)


def _check_branch_outputs(api_name, name1, name2, f1, f2, t1: _Traced, t2: _Traced):
    info1, info2 = tracing.fun_sourceinfo(f1), tracing.fun_sourceinfo(f2)
    if t1.out_tree != t2.out_tree:
        differences = (f"{name1} output is a {_describe(t1.out_tree)} but {name2} output is a "
                       f"{_describe(t2.out_tree)}, so their structures differ.\n")
        raise TypeError(
            f"{api_name} branch outputs must have the same pytree structure, but "
            "they differ:\n\n"
            f"{name1} is {info1}\n" + f"{name2} is {info2}\n\n"
            f"{differences}\n"
            f"Revise {name1} and/or {name2} so that they have the same pytree "
            "structure.")
    avals1, avals2 = t1.out_avals, t2.out_avals
    if all(_typematch(a, b) for a, b in zip(avals1, avals2)):
        return
    paths = _paths(t1.out_tree)
    component = lambda p: f" at path {tree_util.keystr(p)}" if p else ""
    diffs = [f"the output of {name1}{component(p)} has type {a.str_short()}"
             f" but the corresponding output of {name2} has type "
             f"{b.str_short()}{_mismatch_extra(a, b)}"
             for p, a, b in zip(paths, avals1, avals2) if not _typematch(a, b)]
    differences = (f"{_capitalize(diffs[0])}.\n" if len(diffs) == 1 else
                   "\n".join(f"  * {d};" for d in diffs[:-1]) + f"\n  * {diffs[-1]}.\n")
    pvary = [f"applying `jax.lax.pcast(..., {_pcast_tuple(a.vma - b.vma)}, to='varying')` to the"
             f" output of {n}{component(p)}"
             for p, aval1, aval2 in zip(paths, avals1, avals2)
             for n, a, b in [(name1, aval2, aval1), (name2, aval1, aval2)]
             if not _typematch(a, b) and a.vma != b.vma and b.vma - a.vma]
    if not pvary:
        pvary_msg = ""
    elif len(pvary) == 1:
        pvary_msg = f"This might be fixed by {pvary[0]}.\n"
    else:
        pvary_msg = ("This might be fixed by:\n" + "\n".join(f"  * {d};" for d in pvary[:-1])
                     + f"\n  * {pvary[-1]}.\n")
    if pvary_msg:
        pvary_msg += ("See https://docs.jax.dev/en/latest/notebooks/shard_map.html#scan-vma "
                      "for more information.\n\n")
    raise TypeError(
        f"{api_name} branches must have equal output types but they differ.\n\n"
        f"{name1} is {info1}\n" + f"{name2} is {info2}\n\n"
        f"{differences}\n"
        f"{pvary_msg}"
        f"Revise {name1} and/or {name2} so that all output types match.")


def _describe(tree) -> str:
    return "pytree leaf" if tree_util.treedef_is_leaf(tree) else str(tree)


def _result_dtype(x) -> np.dtype:
    if core.is_value(x):
        return np.dtype(x.dtype)
    if core.is_python_scalar(x):
        return core.python_scalar_dtype(x)
    try:
        return core.canonicalize_dtype(np.result_type(x))
    except TypeError:
        raise
    except Exception as err:  # noqa: BLE001 - NumPy's errors for objects it cannot type
        raise TypeError(str(err)) from err


# --- cond and switch ---------------------------------------------------------------

def _call(f: Callable, traced_for: str) -> Callable:
    """`f` taking the (args, kwargs) pair operands are flattened as."""
    def call(args, kwargs):
        return f(*args, **kwargs)
    call.describe = lambda pair: (f, traced_for, *pair)
    return call


def _bind_cond(index, branches: Sequence[Callable], names: Sequence[str], operands: tuple):
    leaves, in_tree = _flatten((operands, {}))
    avals = [x.aval for x in leaves]
    traced = [_Traced(_call(f, "switch"), in_tree, avals, discharges_refs=True) for f in branches]
    refs = _union(*(t.written_refs for t in traced))
    if refs:
        return _cond_carrying_refs(lambda bs, ops: _bind_cond(index, bs, names, ops), branches, operands, refs)
    for i in range(1, len(traced)):
        _check_branch_outputs("switch", names[0], names[i], branches[0], branches[i],
                              traced[0], traced[i])
    consts = _merge_consts(traced)
    programs = tuple(t.consts_first(consts) for t in traced)
    outs = core.bind("cond", index, *consts, *leaves, branches=programs)
    return tree_util.tree_unflatten(traced[0].out_tree, list(outs))


def _cond_carrying_refs(bind: Callable, branches: Sequence[Callable], operands: tuple, refs: list):
    """The conditional with the Refs its branches write (made outside them) as an extra operand
    and an extra result: `bind(branches, operands)` binds it."""
    def carrying(f):
        def branch(values, *ops):
            with ref.bound(refs, values):
                return f(*ops), [r._value for r in refs]
        return branch

    out, values = bind([carrying(f) for f in branches], ([r._value for r in refs], *operands))
    ref.write_back(refs, values)
    return out


def _operands(operand, operands) -> tuple:
    if operand is not _no_operand_sentinel:
        if operands:
            raise TypeError("if 'operand' keyword is passed then no positional "
                            f"operands can be passed, got {operand=} "
                            f"and positional operands {operands}")
        return (operand,)
    return operands


def cond(pred, true_fun: Callable, false_fun: Callable, *operands,
         operand=_no_operand_sentinel):
    """Conditionally applies ``true_fun`` or ``false_fun`` (as ``jax.lax.cond``)."""
    if not (callable(true_fun) and callable(false_fun)):
        raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    operands = _operands(operand, operands)
    if pred is None:
        raise TypeError("cond predicate is None")
    if isinstance(pred, Sequence) or np.ndim(pred) != 0:
        raise TypeError(
            f"Pred must be a scalar, got {pred} of " +
            (f"type {type(pred)}" if isinstance(pred, Sequence) else f"shape {np.shape(pred)}."))
    try:
        pred_dtype = _result_dtype(pred)
    except TypeError as err:
        raise TypeError(f"Pred type must be either boolean or number, got {pred}.") from err
    if pred_dtype.kind != "b":
        if pred_dtype.kind not in "iuf":
            raise TypeError(f"Pred type must be either boolean or number, got {pred_dtype}.")
        pred = core.asarray_value(pred) != 0
    index = core.convert_element_type(pred, np.int32)
    # Traced (and checked) true_fun first, as JAX; bound as branches=(false, true).
    leaves, in_tree = _flatten((operands, {}))
    avals = [x.aval for x in leaves]
    t_true = _Traced(_call(true_fun, "cond"), in_tree, avals, discharges_refs=True)
    t_false = _Traced(_call(false_fun, "cond"), in_tree, avals, discharges_refs=True)
    refs = _union(t_true.written_refs, t_false.written_refs)
    if refs:
        return _cond_carrying_refs(lambda bs, ops: cond(pred, *bs, *ops), (true_fun, false_fun), operands, refs)
    _check_branch_outputs("cond", "true_fun", "false_fun", true_fun, false_fun, t_true, t_false)
    consts = _merge_consts([t_true, t_false])
    programs = (t_false.consts_first(consts), t_true.consts_first(consts))
    outs = core.bind("cond", index, *consts, *leaves, branches=programs)
    return tree_util.tree_unflatten(t_true.out_tree, list(outs))


def switch(index, branches: Sequence[Callable], *operands, operand=_no_operand_sentinel):
    """Applies ``branches[index]`` (clamped to the valid range), as ``jax.lax.switch``."""
    if not isinstance(branches, Sequence) or not all(callable(b) for b in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    operands = _operands(operand, operands)
    if len(np.shape(index)) != 0:
        raise TypeError(f"Branch index must be scalar, got {index} of shape {np.shape(index)}.")
    try:
        index_dtype = _result_dtype(index)
    except TypeError as err:
        raise TypeError(f"Index type must be an integer, got {index}.") from err
    if index_dtype.kind not in "iu":
        raise TypeError(f"Index type must be an integer, got {index} as {index_dtype}")
    branches = tuple(branches)
    if len(branches) == 0:
        raise ValueError("Empty branch sequence")
    if len(branches) == 1:
        return branches[0](*operands)
    from meshsim._src.lax import elementwise
    index = core.convert_element_type(index, np.int32)
    lo = core.asarray_value(np.array(0, np.int32))
    hi = core.asarray_value(np.array(len(branches) - 1, np.int32))
    index = elementwise.clamp(lo, index, hi)
    names = ["branch 0"] + [f"branch{i}" for i in range(1, len(branches))]
    return _bind_cond(index, branches, names, operands)


# --- loops -----------------------------------------------------------------------

def _promote_weak(init: list, in_avals, out_avals) -> tuple[list, bool]:
    """JAX's _promote_weak_typed_input: a weakly typed initial carry takes the
    type the body gives it."""
    changed = False
    out = []
    for x, a, b in zip(init, in_avals, out_avals):
        if a.weak_type and not _typematch(a, b):
            dtype, _ = core.result_type(x, np.dtype(b.dtype))
            x = core.convert_element_type(x, dtype)
            changed = True
        out.append(x)
    return out, changed


def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """Repeats ``body_fun`` while ``cond_fun`` holds (as ``jax.lax.while_loop``)."""
    if not (callable(cond_fun) and callable(body_fun)):
        raise TypeError("lax.while_loop: body_fun and cond_fun arguments should be callable.")
    init, in_tree = _flatten(init_val)

    def trace(init):
        avals = [x.aval for x in init]
        t_cond = _Traced(cond_fun, tree_util.treedef_tuple([in_tree]), avals, discharges_refs=True,
                         traced_for="while_cond")
        t_body = _Traced(body_fun, tree_util.treedef_tuple([in_tree]), avals, discharges_refs=True,
                         traced_for="while_body")
        if not tree_util.treedef_is_leaf(t_cond.out_tree) or len(t_cond.out_avals) != 1:
            raise TypeError(f"cond_fun must return a boolean scalar, but got pytree {t_cond.out_tree}.")
        pred = t_cond.out_avals[0]
        if pred.shape != () or pred.dtype != np.bool_:
            raise TypeError("cond_fun must return a boolean scalar, but got output type(s) "
                            f"{t_cond.out_avals}.")
        return avals, t_cond, t_body

    avals, t_cond, t_body = trace(init)
    refs = _union(t_cond.written_refs, t_body.written_refs)
    if refs:
        return _while_carrying_refs(cond_fun, body_fun, init_val, refs)
    if len(t_body.out_avals) != len(avals) or t_body.out_tree != in_tree:
        _check_carry_type("while_loop body", body_fun, in_tree, avals, t_body.out_tree, t_body.out_avals)
    init, changed = _promote_weak(init, avals, t_body.out_avals)
    if changed:
        avals, t_cond, t_body = trace(init)
    _check_carry_type("while_loop body", body_fun, in_tree, avals, t_body.out_tree, t_body.out_avals)
    outs = core.bind("while", *t_cond.consts, *t_body.consts, *init,
                     body_jaxpr=t_body.consts_first(t_body.consts), body_nconsts=len(t_body.consts),
                     cond_jaxpr=t_cond.consts_first(t_cond.consts), cond_nconsts=len(t_cond.consts))
    return tree_util.tree_unflatten(in_tree, list(outs))


def _scan_length(xs: list, length) -> int:
    lengths = []
    for x in xs:
        if not x.shape:
            raise ValueError(f"scan got value with no leading axis to scan over: {x}.")
        lengths.append(x.shape[0])
    if length is not None:
        try:
            length = int(length)
        except TypeError:
            raise TypeError("The `length` argument to `scan` expects a concrete `int` value."
                            " For scan-like iteration with a dynamic length, use `while_loop`"
                            " or `fori_loop`.") from None
        if not all(length == n for n in lengths):
            raise ValueError(f"scan got `length` argument of {length} which disagrees with "
                             f"leading axis sizes {lengths}.")
        return length
    if len(set(lengths)) > 1:
        raise ValueError("scan got values with different leading axis sizes: "
                         f"{', '.join(str(n) for n in lengths)}.")
    if not lengths:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    return lengths[0]


def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1, _split_transpose: bool = False):
    """Scans ``f`` over the leading axis of ``xs`` carrying state (as ``jax.lax.scan``)."""
    if not callable(f):
        raise TypeError("lax.scan: f argument should be a callable.")
    init_flat, init_tree = _flatten(init)
    xs_flat, xs_tree = _flatten(xs)
    length = _scan_length(xs_flat, length)
    x_avals = [_core.element_aval(x.aval) for x in xs_flat]
    in_tree = tree_util.treedef_tuple([init_tree, xs_tree])

    def trace(init_flat):
        t = _Traced(f, in_tree, [*[x.aval for x in init_flat], *x_avals], discharges_refs=True,
                    traced_for="scan")
        children = tree_util.treedef_children(t.out_tree)
        if t.out_tree.num_nodes and (len(children) != 2 or not _is_pair(t.out_tree)):
            raise TypeError(f"scan body output must be a pair, got {t.out_tree}.")
        return t, children

    t, (carry_tree, ys_tree) = trace(init_flat)
    if t.written_refs:
        return _scan_carrying_refs(f, init, xs, t.written_refs, length=length, reverse=reverse,
                                   unroll=unroll)
    num_carry = len(init_flat)
    carry_avals = t.out_avals[:carry_tree.num_leaves]
    in_avals = [x.aval for x in init_flat]
    if carry_tree.num_leaves != num_carry:
        _check_carry_type("scan body", f, init_tree, in_avals, carry_tree, carry_avals)
    init_flat, changed = _promote_weak(init_flat, in_avals, carry_avals)
    if changed:
        t, (carry_tree, ys_tree) = trace(init_flat)
        in_avals = [x.aval for x in init_flat]
        carry_avals = t.out_avals[:num_carry]
    _check_carry_type("scan body", f, init_tree, in_avals, carry_tree, carry_avals)
    if isinstance(unroll, bool):
        unroll = max(length, 1) if unroll else 1
    if unroll < 0:
        raise ValueError("`unroll` must be a `bool` or a non-negative `int`.")
    outs = core.bind("scan", *t.consts, *init_flat, *xs_flat, jaxpr=t.consts_first(t.consts),
                     length=length, num_carry=num_carry, num_consts=len(t.consts),
                     reverse=bool(reverse), unroll=int(unroll))
    outs = list(outs)
    return (tree_util.tree_unflatten(carry_tree, outs[:num_carry]),
            tree_util.tree_unflatten(ys_tree, outs[num_carry:]))


def _union(*lists: list) -> list:
    out: list = []
    for r in (r for refs in lists for r in refs):
        if all(r is not x for x in out):
            out.append(r)
    return out


def _while_carrying_refs(cond_fun, body_fun, init_val, refs: list):
    """The while loop with the Refs its functions write (made outside them) as extra carry."""
    def cond(state):
        carry, values = state
        with ref.bound(refs, values):
            return cond_fun(carry)

    def body(state):
        carry, values = state
        with ref.bound(refs, values):
            return body_fun(carry), [r._value for r in refs]

    out, values = while_loop(cond, body, (init_val, [r._value for r in refs]))
    ref.write_back(refs, values)
    return out


def _scan_carrying_refs(f, init, xs, refs: list, **options):
    """The scan with the Refs its body writes (made outside it) as extra carry."""
    def body(state, x):
        carry, values = state
        with ref.bound(refs, values):
            carry, y = f(carry, x)
            return (carry, [r._value for r in refs]), y

    (out, values), ys = scan(body, (init, [r._value for r in refs]), xs, **options)
    ref.write_back(refs, values)
    return out, ys


def _is_pair(tree) -> bool:
    try:
        out = tree_util.tree_unflatten(tree, [0] * tree.num_leaves)
    except Exception:  # noqa: BLE001
        return False
    return isinstance(out, (tuple, list)) and len(out) == 2


def fori_loop(lower, upper, body_fun: Callable, init_val, *, unroll: int | bool | None = None):
    """Loops ``body_fun(i, val)`` for i in [lower, upper) (as ``jax.lax.fori_loop``): a scan
    when the bounds are concrete (so it is reverse-differentiable), a while loop otherwise."""
    if not callable(body_fun):
        raise TypeError("lax.fori_loop: body_fun argument should be callable.")
    lower_dtype, upper_dtype = _result_dtype(lower), _result_dtype(upper)
    if lower_dtype == upper_dtype:
        dtype = lower_dtype
    else:
        dtype = None
        if (dtype_kinds.issubdtype(lower_dtype, np.signedinteger) and
                dtype_kinds.issubdtype(upper_dtype, np.signedinteger)):
            lower_weak, upper_weak = _is_weak(lower), _is_weak(upper)
            if lower_weak and not upper_weak:
                dtype = upper_dtype
            elif not lower_weak and upper_weak:
                dtype = lower_dtype
        if dtype is None:
            raise TypeError("lower and upper arguments to fori_loop must have equal "
                            f"types, got {lower_dtype.name} and {upper_dtype.name}")
    concrete = [b for b in (lower, upper) if not isinstance(b, core.Tracer)]
    if len(concrete) == 2:
        lower_, upper_ = int(lower), int(upper)
        if unroll is None:
            unroll = False
        length = max(upper_ - lower_, 0)

        def scanned(loop_carry, _):  # JAX's name: carry errors say "loop_carry[1]..."
            i, x = loop_carry
            return (i + 1, body_fun(i, x)), None
        scanned.describe = lambda args: (body_fun, "fori_loop", args[0], {})

        (_, result), _ = scan(scanned, (lower_, init_val), None, length=length, unroll=unroll)
        return result
    if unroll is not None and unroll is not False and unroll != 1:
        raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds "
                         "are statically known.")
    lower = core.convert_element_type(lower, dtype) if lower_dtype != dtype else lower
    upper = core.convert_element_type(upper, dtype) if upper_dtype != dtype else upper

    def cond_fun(carry):
        i, stop, _ = carry
        return core.bind1("lt", i, stop)  # lax.lt: no promotion

    def body(loop_carry):
        i, stop, x = loop_carry
        return core.bind1("add", i, core.asarray_value(np.array(1, i.dtype))), stop, body_fun(i, x)  # lax.add: no promotion

    _, _, result = while_loop(cond_fun, body, (lower, upper, init_val))
    return result


def _is_weak(x) -> bool:
    if core.is_value(x):
        return bool(x.weak_type)
    return core.is_python_scalar(x)


def map(f: Callable, xs, *, batch_size: int | None = None):
    """Maps ``f`` over the leading axis of ``xs`` with a scan (as ``jax.lax.map``);
    ``batch_size`` applies it to that many elements per iteration."""
    if batch_size is None:
        _, ys = scan(lambda _, x: ((), f(x)), (), xs)
        return ys
    leaves, treedef = _flatten(xs)
    n = leaves[0].shape[0] if leaves else 0
    num_batches, remainder = divmod(n, batch_size)
    batched = functools.partial(_apply_to_batch, f)
    ys = None
    if num_batches:
        scan_xs = [x[:num_batches * batch_size].reshape(num_batches, batch_size, *x.shape[1:])
                   for x in leaves]
        _, ys = scan(lambda _, x: ((), batched(x)), (), tree_util.tree_unflatten(treedef, scan_xs))
        ys = tree_util.tree_map(lambda y: y.reshape(-1, *y.shape[2:]), ys)
    if remainder:
        rest = batched(tree_util.tree_unflatten(treedef, [x[num_batches * batch_size:] for x in leaves]))
        if ys is None:
            return rest
        from meshsim._src.lax import structural
        ys = tree_util.tree_map(lambda a, b: structural.concatenate([a, b], 0), ys, rest)
    return ys


def _apply_to_batch(f: Callable, xs):
    """`f` over a batch's leading axis: vmapped when meshsim has vmap, else a scan."""
    from meshsim._src import api
    vmap = getattr(api, "vmap", None)
    if vmap is not None:
        return vmap(f)(xs)
    _, ys = scan(lambda _, x: ((), f(x)), (), xs)
    return ys

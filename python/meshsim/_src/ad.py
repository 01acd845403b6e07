"""Reverse-mode autodiff: grad, value_and_grad, vjp, jvp, linearize, custom_vjp,
checkpoint (remat) with policies, stop_gradient; Jacobians (jacfwd, jacrev,
hessian) as vmaps of jvp and vjp over a standard basis.

A differentiated function is traced into a Program; the C++ transform
(`_core.vjp_program`, cpp/meshsim/transforms/vjp.h) splits it into a forward
program (inputs -> outputs + residuals) and a backward program (output
cotangents + residuals -> input cotangents). Both are applied with
`_core.eval_program`, which runs them on arrays or, inside an enclosing trace
(jit, make_jaxpr, another grad), inlines them into it. Python only traces and
handles pytrees; checkpoint policies written in Python are consulted while the
transform runs, never while the programs execute."""
from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import operator
import types
from typing import Any, Callable, Sequence

import numpy as np

from meshsim import _core
from meshsim._src import ad_refs, core, ref, tracing, tree_util
from meshsim._src.remat import (Offloadable, Recompute, Saveable, _evaluate_policy,  # noqa: F401
                                 checkpoint, checkpoint_policies, remat)
from meshsim._src.sharding import auto_names, device_assignment, placement
from meshsim._src import dtype_kinds
from meshsim._src.float0 import float0, float0_zeros

__all__ = [
    "grad", "value_and_grad", "vjp", "jvp", "linearize", "custom_vjp", "custom_jvp", "checkpoint", "remat",
    "checkpoint_policies", "checkpoint_name", "stop_gradient", "float0", "jacfwd", "jacrev", "jacobian",
    "hessian", "VJP", "GradValue", "DontWant", "DidntWant", "GradRef",
]


def _is_inexact(dtype) -> bool:
    return dtype_kinds.issubdtype(dtype, np.inexact)


# --- tracing ----------------------------------------------------------------

def _flatten_values(tree):
    leaves, treedef = tree_util.tree_flatten(tree)
    return [core.asarray_value(x) for x in leaves], treedef


def _aval_str(x) -> str:
    return str(core.typeof(x)).lstrip("~")


# --- vjp ----------------------------------------------------------------------

def _with_integer_primals_as_given(fun, in_tree, given: list, leaves: list, ref_positions):
    """`fun` called with its integer and boolean primals as the caller gave them (a Python int,
    a NumPy or meshsim array, an enclosing trace's tracer) instead of as traced inputs, as JAX
    does: their tangents are float0 zeros, so nothing about them is differentiated, and the
    function may use them as concrete values (`np.asarray(n)`, `range(n)`)."""
    integer = [i for i, x in enumerate(leaves)
               if not _is_inexact(x.dtype) and i not in ref_positions]
    if not integer:
        return fun

    def with_given_integers(*args):
        flat = tree_util.tree_leaves(args)
        for i in integer:
            flat[i] = given[i]
        return fun(*tree_util.tree_unflatten(in_tree, flat))
    return with_given_integers


class _Linearized:
    """A function traced and split at some primals: forward run, backward pending."""

    def __init__(self, fun, primals: tuple, has_aux: bool, check_output=None):
        self.fun_name = getattr(fun, "__name__", repr(fun))
        raw, self.in_tree = tree_util.tree_flatten(primals)
        values, self.ref_primals = ad_refs.unref_primals(raw)
        leaves = [core.asarray_value(x) for x in values]
        self.mesh = placement.eager_mesh()  # under jax.set_mesh: computed over the mesh
        if self.mesh is not None:
            leaves = placement.onto_mesh(leaves, self.mesh, as_operands=True)
        self.in_leaves = leaves
        returned = []  # (its trace, what the function returned): values it did not compute are given back

        def fun_returning(*args):
            result = fun(*args)
            returned.append((_core.current_trace(), tree_util.tree_leaves(args), result))
            return result
        if has_aux:
            def traced(*args):
                result = fun_returning(*args)
                if not (isinstance(result, (tuple, list)) and len(result) == 2):
                    raise TypeError("expected function with aux output to return a two-element tuple, "
                                    f"but got type {type(result)} with value {result!r}")
                _check_valid_jax_types(tree_util.tree_leaves(result[0]), "output")
                # aux may hold anything (strings, Python numbers): what is no JAX value is traced
                # as a placeholder and handed back as it was.
                aux_leaves, aux_tree = tree_util.tree_flatten(result[1])
                return result[0], tree_util.tree_unflatten(
                    aux_tree, [x if core.is_jax_value(x) else 0 for x in aux_leaves])
        else:
            def traced(*args):
                result = fun_returning(*args)
                _check_valid_jax_types(tree_util.tree_leaves(result), "output")
                return result
        traced = _with_integer_primals_as_given(traced, self.in_tree, values, leaves, self.ref_primals)
        if self.ref_primals:  # (result, the Ref primals' final values)
            traced = ad_refs.with_ref_arguments(traced, self.in_tree, self.ref_primals)
        program, captures, out_tree, closed = self._trace(traced, leaves)
        if self.ref_primals:
            out_tree, _ = tree_util.treedef_children(out_tree)
        if has_aux:
            self.out_tree, self.aux_tree = tree_util.treedef_children(out_tree)
        else:
            self.out_tree, self.aux_tree = out_tree, None
        n_out = self.out_tree.num_leaves
        n_aux = out_tree.num_leaves - n_out
        refs = [raw[i] for i in self.ref_primals] + closed
        self.out_avals = program.out_avals[:n_out]
        # Inputs: the primals, the closed-over Refs' values, the captures; outputs: the results,
        # aux, the Refs' final values (not differentiated), then the residuals.
        wrt = [True] * len(leaves) + [False] * (len(closed) + len(captures))
        ad_refs.refuse_differentiated_writes(program, wrt, closed, n_out + n_aux + len(self.ref_primals))
        self.program, self.wrt = program, wrt  # what a forward-mode evaluation checks
        out_mask = [True] * n_out + [False] * (n_aux + len(refs))
        fwd, self.bwd, _, self.ct_in, self.ct_out = _core.vjp_program(program, wrt, out_mask,
                                                                      _evaluate_policy)
        # After the rules ran, as JAX checks the output once the function is differentiated
        # (a primitive without a rule is the error even when the output is not a scalar).
        if check_output is not None:
            check_output(self.out_avals)
        # Computed from arrays committed to a device, values and cotangents stay there.
        self.device = placement.committed_device([*leaves, *captures], lambda i: f"args[{i}] of {self.fun_name}")
        self.forward_committed = any(type(x) is core.Array and x.committed for x in leaves)
        results = _core.eval_program(fwd, [*leaves, *(r._value for r in closed), *captures])
        if self.device is not None:
            results = placement.place(results, self.device)
        n = n_out + n_aux
        if self.device is None and self.mesh is not None:  # what the caller sees (not residuals)
            seen = placement.onto_mesh(results[:n], self.mesh, as_operands=False)
            auto_names.name_typed_results(seen)
            results = [*seen, *results[n:]]
        self.out_leaves = list(results[:n_out])
        # A result that is no tracer of this trace (a constant, an integer primal) is returned as
        # the function returned it, as JAX does; out_leaves keep the arrays the backward pass uses.
        # A primal returned unchanged is given back as the caller passed it.
        trace_of_fun, arguments, result = returned[-1]
        given = tree_util.tree_leaves(result[0] if has_aux else result)
        as_passed = {id(a): v for a, v in zip(arguments, values) if isinstance(a, core.Tracer)} \
            if len(arguments) == len(values) else {}
        self.returned_leaves = [
            as_passed.get(id(g), o) if isinstance(g, core.Tracer) and g.trace is trace_of_fun else g
            for g, o in zip(given, self.out_leaves)] if len(given) == n_out else self.out_leaves
        self.aux_leaves = list(results[n_out:n])
        if has_aux:  # likewise for aux: only what the function computed from the primals is traced
            given_aux = tree_util.tree_leaves(result[1])
            if len(given_aux) == n_aux:
                self.aux_leaves = [o if isinstance(g, core.Tracer) and g.trace is trace_of_fun else g
                                   for g, o in zip(given_aux, self.aux_leaves)]
        ref.write_back(refs, results[n:n + len(refs)])
        self.residuals = list(results[n + len(refs):])
        # Per residual: the primal leaf it is, if it is one (a VJP object keeps those as args_res).
        primal_var = {v: i for i, v in enumerate(fwd.invars[:len(leaves)])}
        self.residual_sources = [primal_var.get(v) for v in fwd.outvars[n + len(refs):]]
        self.primal_leaves = list(leaves)

    def _trace(self, traced, leaves):
        """The traced program, captures and output tree, and the Refs made outside that the
        function writes: those are bound to extra inputs after the primals, and their final
        values are extra outputs after the function's (see ad_refs)."""
        avals = [x.aval for x in leaves]

        def recorded(*args):
            scope.trace = _core.current_trace()
            return traced(*args)

        with ref.recording(None) as scope:
            program, captures, out_tree = tracing.trace_flat(recorded, self.in_tree, avals, leaves)
        closed = list(scope.written)
        if not closed:
            return program, captures, out_tree, []
        n = len(leaves)

        def with_closed(*flat):
            with ref.bound(closed, flat[n:]):
                return traced(*tree_util.tree_unflatten(self.in_tree, flat[:n])), [r._value for r in closed]

        program, captures, out_tree = tracing.trace_flat(
            with_closed, tree_util.tree_structure(tuple(range(n + len(closed)))),
            [*avals, *(core.typeof(r._value) for r in closed)], [*leaves, *(r._value for r in closed)])
        return program, captures, tree_util.treedef_children(out_tree)[0], closed

    def out(self):
        return tree_util.tree_unflatten(self.out_tree, self.returned_leaves)

    def aux(self):
        return tree_util.tree_unflatten(self.aux_tree, self.aux_leaves)

    def check_batched_pullback(self, batch: int) -> None:
        """JAX's device-assignment error for an eager pullback vmapped over `batch` uncommitted
        cotangents (jacrev's basis), raised before the pass runs."""
        cts = [object() for takes in self.ct_in if takes]  # uncommitted, whatever their values
        device_assignment.check_pullback(self.bwd, [*cts, *self.residuals], self.forward_committed,
                                         batch)

    def pullback_flat(self, ct_leaves: Sequence, wanted: Sequence[bool] | None = None,
                      transposed: bool = False) -> list:
        """Input cotangents (one per input leaf; float0 zeros for non-inexact ones). With
        `wanted`, only those inputs' cotangents are computed (None for the others).
        `transposed`: the pullback is being transposed (forward mode), not run in reverse."""
        ad_refs.refuse_ref_cotangents(self.in_leaves, self.ref_primals, wanted)
        if not transposed:
            ad_refs.refuse_reverse_mode(self.program, self.wrt)
        cts = []
        for ct, out, takes in zip(ct_leaves, self.out_leaves, self.ct_in):
            if not takes:
                continue
            ct = core.asarray_value(ct)
            if ct.shape != out.shape:
                raise ValueError("unexpected JAX type (e.g. shape/dtype) for argument to VJP function: got "
                                 f"{_aval_str(ct)}, but expected {_aval_str(out)} because the corresponding "
                                 f"output of the differentiated function had JAX type {_aval_str(out)}")
            if ct.dtype != out.dtype:
                ct = core.convert_element_type(ct, out.dtype, ct.weak_type)
            cts.append(ct)
        wanted = [True] * len(self.in_leaves) if wanted is None else list(wanted)
        bwd = self.bwd
        if not all(w for w, takes in zip(wanted, self.ct_out) if takes):
            bwd = _core.keep_outputs(bwd, [w for w, takes in zip(wanted, self.ct_out) if takes])
        if _core.current_trace() is None:  # eager: each operation placed by its own operands
            device_assignment.check_pullback(bwd, [*cts, *self.residuals], self.forward_committed)
        grads = _core.eval_program(bwd, [*cts, *self.residuals])
        if self.device is not None:
            grads = placement.place(grads, self.device)
        elif self.mesh is not None and _core.current_trace() is None:
            grads = placement.onto_mesh(grads, self.mesh, as_operands=False)
            auto_names.name_typed_results(grads)
        grads = iter(grads)
        return [None if not w else next(grads) if takes else float0_zeros(x.shape)
                for x, takes, w in zip(self.in_leaves, self.ct_out, wanted)]

    def check_ct(self, ct) -> list:
        """The leaves of an output cotangent, checked to have the outputs' structure."""
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != self.out_tree:
            raise ValueError(
                "unexpected tree structure.\nThe argument to a VJP function returned by `jax.vjp` must "
                f"match the pytree structure of the differentiated function {self.fun_name}.\n"
                f"But the tree structures differ: got {ct_tree}, expected {self.out_tree}.")
        return ct_leaves

    def pullback(self, ct):
        return tree_util.tree_unflatten(self.in_tree, self.pullback_flat(self.check_ct(ct)))


def vjp(fun: Callable, *primals, has_aux: bool = False, reduce_axes=()):
    """(fun(*primals), vjp_fun) where vjp_fun(cotangent) returns the primals' cotangents
    as a tuple; with has_aux, (out, vjp_fun, aux)."""
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    lin = _Linearized(fun, primals, has_aux)
    vjp_fun = VJP(lin)
    if has_aux:
        return lin.out(), vjp_fun, lin.aux()
    return lin.out(), vjp_fun


class _PullbackFrame:
    """What a pullback is besides its residuals (its backward program, trees and
    types); treedefs holding the same frame are equal."""

    def __init__(self, lin: _Linearized):
        self.lin = lin

    def __eq__(self, other) -> bool:
        return isinstance(other, _PullbackFrame) and other.lin is self.lin

    def __hash__(self) -> int:
        return id(self.lin)


class GradValue:
    """`VJP.with_refs` placeholder: return this argument's cotangent as a value."""

    def __repr__(self) -> str:
        return "GradValue()"


class DontWant:
    """`VJP.with_refs` placeholder: this argument's cotangent is not wanted."""

    def __repr__(self) -> str:
        return "DontWant()"


class DidntWant:
    """What `VJP.with_refs` returns for an argument whose cotangent was not wanted."""

    def __repr__(self) -> str:
        return "DidntWant()"


class GradRef:
    """What `VJP.with_refs` returns for an argument whose cotangent went into a Ref."""

    def __repr__(self) -> str:
        return "GradRef()"


for _marker in (DidntWant, GradRef):  # results of a VJP call that hold no arrays
    tree_util.register_pytree_node(_marker, lambda m: ((), None), lambda _, __, cls=_marker: cls())


class NotNeeded:
    """In a VJP object's args_res: a primal leaf the backward pass does not read."""

    def __repr__(self) -> str:
        return "NotNeeded()"


tree_util.register_pytree_node(NotNeeded, lambda m: ((), None), lambda _, __: NotNeeded())


def _tuple_tree(treedef, leaves: list) -> Any:
    """`leaves` arranged as `treedef` with every container a tuple, as JAX's tuptree_map."""
    children = tree_util.treedef_children(treedef)
    if not children and treedef.num_leaves == 1:
        return leaves[0]
    out, at = [], 0
    for child in children:
        out.append(_tuple_tree(child, leaves[at:at + child.num_leaves]))
        at += child.num_leaves
    return tuple(out)


class VJP:
    """The function `vjp` returns: called with the outputs' cotangent, it returns the primals'
    cotangents; `with_refs(...)` says per primal where its cotangent goes (a Ref it is added
    into, GradValue() or DontWant()). As JAX's, it holds the primals the backward pass reads
    (`args_res`, one entry per primal, NotNeeded() for a leaf it does not read) apart from
    the other residuals (`opaque_residuals`); both may be replaced before the call."""

    def __init__(self, lin: _Linearized, targets: tuple | None = None, args_res: list | None = None,
                 opaque_residuals: list | None = None):
        self._lin, self._targets = lin, targets
        self.__name__ = "vjp_fun"
        if args_res is None:
            used = {i for i in lin.residual_sources if i is not None}
            per_leaf = [x if i in used else NotNeeded() for i, x in enumerate(lin.primal_leaves)]
            args_res = list(_tuple_tree(lin.in_tree, per_leaf))
            opaque_residuals = [r for r, i in zip(lin.residuals, lin.residual_sources) if i is None]
        self.args_res, self.opaque_residuals = args_res, opaque_residuals

    def with_refs(self, *targets) -> VJP:
        return VJP(self._lin, targets, self.args_res, self.opaque_residuals)

    def _with_residuals(self) -> _Linearized:
        """The linearization with the residuals this object holds now."""
        primal = tree_util.tree_leaves(self.args_res, is_leaf=lambda x: isinstance(x, NotNeeded))
        opaque = iter(self.opaque_residuals)
        lin = copy.copy(self._lin)
        lin.residuals = [core.asarray_value(next(opaque) if i is None else primal[i])
                         for i in lin.residual_sources]
        return lin

    # A pytree whose leaves are the residuals, as JAX's: a pullback can be returned
    # from jit, stacked by a scan and applied later (a pipeline schedule keeps each
    # microbatch's residuals until its backward pass).
    def _flatten(self):
        return (self.args_res, self.opaque_residuals), (_PullbackFrame(self._lin), self._targets)

    @classmethod
    def _unflatten(cls, aux, children):
        frame, targets = aux
        args_res, opaque_residuals = children
        return cls(frame.lin, targets, list(args_res), list(opaque_residuals))

    def __call__(self, ct):
        lin = self._with_residuals()
        if self._targets is None:
            return lin.pullback(ct)
        in_tree = lin.in_tree
        if len(self._targets) != len(tree_util.treedef_children(in_tree)):
            raise Exception()  # JAX's own bare exception for a count mismatch  # noqa: TRY002
        wanted = [not isinstance(t, DontWant) for t in self._targets]
        leaf_wanted = _per_leaf(in_tree, wanted)
        cts = tree_util.tree_unflatten(in_tree, lin.pullback_flat(lin.check_ct(ct), leaf_wanted))
        from meshsim._src.ref import Ref
        out = []
        for target, g in zip(self._targets, cts):
            if isinstance(target, Ref):
                target.addupdate(g)
                out.append(GradRef())
            else:
                out.append(DidntWant() if isinstance(target, DontWant) else g)
        return tuple(out)


tree_util.register_pytree_node(VJP, VJP._flatten, VJP._unflatten)


def _per_leaf(in_tree, per_arg: list[bool]) -> list[bool]:
    """A flag per leaf of the primals tuple `in_tree`, from one per primal."""
    flags = []
    for child, flag in zip(tree_util.treedef_children(in_tree), per_arg):
        flags += [flag] * child.num_leaves
    return flags


# --- grad ---------------------------------------------------------------------

def _argnums_tuple(argnums) -> tuple[int, ...]:
    if isinstance(argnums, int):
        return (operator.index(argnums),)
    return tuple(operator.index(a) for a in argnums)


def _check_valid_jax_types(leaves, form: str) -> None:
    """JAX's error for a leaf that is not an array or scalar, in its three forms: grad's
    inputs ("input": the text ends with a period), jvp's ("quoted": the type is quoted),
    and a differentiated function's outputs ("output")."""
    for x in leaves:
        if not core.is_jax_value(x):
            if form == "quoted":
                raise TypeError(f"Argument '{x}' of type '{type(x)}' is not a valid JAX type") from None
            end = "." if form == "input" else ""
            raise TypeError(f"Argument '{x}' of type {type(x)} is not a valid JAX type{end}") from None


def _check_grad_inputs(leaves, allow_int: bool, holomorphic: bool = False):
    _check_valid_jax_types(leaves, "input")
    for x in leaves:
        dtype = core.typeof(x).dtype
        _check_holomorphic("grad", "inputs", holomorphic, dtype)
        if not _is_inexact(dtype) and not allow_int:
            raise TypeError(
                "grad requires real- or complex-valued inputs (input dtype that is a sub-dtype of "
                f"np.inexact), but got {dtype.name}. If you want to use Boolean- or integer-valued "
                "inputs, use vjp or set allow_int to True.")


def _check_scalar_output(avals, holomorphic: bool = False):
    (aval,) = avals
    if aval.shape != ():
        raise TypeError(f"Gradient only defined for scalar-output functions. Output had shape: {aval.shape}.")
    _check_holomorphic("grad", "outputs", holomorphic, aval.dtype)
    if not holomorphic and dtype_kinds.issubdtype(aval.dtype, np.complexfloating):
        raise TypeError(
            "grad requires real-valued outputs (output dtype that is a sub-dtype of np.floating), but got "
            f"{aval.dtype.name}. For holomorphic differentiation, pass holomorphic=True. For differentiation "
            "of non-holomorphic functions involving complex outputs, use jax.vjp directly.")
    if not _is_inexact(aval.dtype):
        raise TypeError(
            "grad requires real-valued outputs (output dtype that is a sub-dtype of np.floating), but got "
            f"{aval.dtype.name}. For differentiation of functions with integer outputs, use jax.vjp directly.")


def value_and_grad(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
                   allow_int: bool = False, reduce_axes=()):
    """A function returning (fun(*args), gradient of fun with respect to args[argnums]);
    with has_aux, ((value, aux), gradient)."""
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    nums = _argnums_tuple(argnums)

    @functools.wraps(fun)
    def value_and_grad_f(*args, **kwargs):
        needed = max(nums) + 1 if nums else 0
        if len(args) < needed:
            raise TypeError(f"differentiating with respect to argnums={argnums} requires at least {needed} "
                            f"positional arguments to be passed by the caller, but got only {len(args)} "
                            "positional arguments.")
        diff_args = tuple(args[i] for i in nums)
        leaves, _ = tree_util.tree_flatten(diff_args)
        _check_grad_inputs(leaves, allow_int, holomorphic)

        def partial_fun(*dargs):
            full = list(args)
            for i, a in zip(nums, dargs):
                full[i] = a
            return fun(*full, **kwargs)

        partial_fun.__name__ = getattr(fun, "__name__", "fun")
        lin = _Linearized(partial_fun, diff_args, has_aux,
                          check_output=functools.partial(_check_scalar_output, holomorphic=holomorphic))
        (out,) = lin.out_leaves
        if _core.current_trace() is None:  # eager: the seed is a Python 1 typed over out's mesh
            device_assignment.check_results(lin.out_avals, device_assignment.context_device_count())
        one = core.Array.from_numpy(np.ones((), out.dtype), weak_type=out.weak_type)
        mesh = out.aval.mesh
        if (mesh is not None and _core.AxisType.Explicit in mesh.axis_types and _core.current_axis_env() is None
                and not out.aval.unreduced and not out.aval.reduced):
            # As JAX seeds a result typed over Explicit axes: the 1 typed over its mesh. (A result
            # with pending sums keeps the plain 1, whose cotangent type the pullback gives.)
            one = core.bind1("reshard", one, mesh=mesh, spec=[])
        grads = tree_util.tree_unflatten(lin.in_tree, lin.pullback_flat([one]))
        g = grads[0] if isinstance(argnums, int) else tuple(grads)
        value = lin.out()
        return ((value, lin.aux()), g) if has_aux else (value, g)

    return value_and_grad_f


def grad(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
         allow_int: bool = False, reduce_axes=()):
    """The gradient of scalar-valued `fun` with respect to args[argnums]; with has_aux,
    (gradient, aux)."""
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int)

    @functools.wraps(fun)
    def grad_f(*args, **kwargs):
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]

    return grad_f


# --- forward mode, by transposing the (linear) backward pass --------------------

def _check_jvp_args(primals, tangents):
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("primal and tangent arguments to jax.jvp must be tuples or lists; found "
                        f"{type(primals).__name__} and {type(tangents).__name__}.")
    p_tree = tree_util.tree_structure(tuple(primals))
    t_tree = tree_util.tree_structure(tuple(tangents))
    if p_tree != t_tree:
        raise TypeError("primal and tangent arguments to jax.jvp must have the same tree structure; primals "
                        f"have tree structure {p_tree} whereas tangents have tree structure {t_tree}.")
    _check_valid_jax_types(tree_util.tree_leaves(tuple(primals)), "quoted")
    for p, t in zip(tree_util.tree_leaves(tuple(primals)), tree_util.tree_leaves(tuple(tangents))):
        p_dtype, t_dtype = _jvp_dtype(p), _jvp_dtype(t)
        expected = p_dtype if _is_inexact(p_dtype) else float0
        if t_dtype != expected:
            raise TypeError("primal and tangent arguments to jax.jvp do not match; dtypes must be equal, or in "
                            "case of int/bool primal dtype the tangent dtype must be float0."
                            f"Got primal dtype {p_dtype} and so expected tangent dtype {expected}, but got "
                            f"tangent dtype {t_dtype} instead.")
        if np.shape(p) != np.shape(t):
            raise ValueError("jvp called with different primal and tangent shapes;"
                             f"Got primal shape {np.shape(p)} and tangent shape as {np.shape(t)}")


def _jvp_dtype(x) -> np.dtype:
    """x's dtype as jvp compares primals and tangents: canonical (float64 is float32
    unless x64 is on; a Python scalar has its weak type's dtype), float0 as it is."""
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return core.python_scalar_dtype(x)
    if dtype == float0:
        return float0
    return core.canonicalize_dtype(dtype) if isinstance(dtype, np.dtype) else dtype


class _Pushforward:
    """The JVP of a linearized function: the transpose of its pullback, found by
    differentiating the pullback (linear in the cotangent) at a zero cotangent."""

    def __init__(self, lin: _Linearized):
        self.lin = lin
        outs = lin.out_leaves
        self.float_out = [_is_inexact(o.dtype) for o in outs]
        self.float_in = list(lin.ct_out)

        def pullback(*cts):
            it = iter(cts)
            full = [next(it) if f else o for o, f in zip(outs, self.float_out)]
            grads = lin.pullback_flat(full, transposed=True)
            return [g for g, f in zip(grads, self.float_in) if f]

        zeros = [_zeros_like(o) for o, f in zip(outs, self.float_out) if f]
        self.transposed = _Linearized(pullback, tuple(zeros), has_aux=False)

    def tangent_leaves(self, tangent_leaves: Sequence) -> list:
        ad_refs.refuse_forward_mode_custom_vjp(self.lin.program, self.lin.wrt)
        ins = self.lin.in_leaves
        ts = []
        for t, x, f in zip(tangent_leaves, ins, self.float_in):
            if f:
                t = core.asarray_value(t)
                if t.shape != x.shape:
                    raise ValueError("jvp called with different primal and tangent shapes;"
                                     f"Got primal shape {x.shape} and tangent shape as {t.shape}")
                ts.append(t if t.dtype == x.dtype else core.convert_element_type(t, x.dtype))
        if not self.transposed.out_leaves:  # no differentiable input at all
            outs = []
        else:
            outs = list(self.transposed.pullback(ts))
        it = iter(outs)
        return [next(it) if f else float0_zeros(o.shape)
                for o, f in zip(self.lin.out_leaves, self.float_out)]

    def __call__(self, *tangents):
        leaves, _ = tree_util.tree_flatten(tuple(tangents))
        return tree_util.tree_unflatten(self.lin.out_tree, self.tangent_leaves(leaves))


def _zeros_like(x):
    return core.Array.from_numpy(np.zeros(x.shape, x.dtype), weak_type=x.weak_type) \
        if not isinstance(x, core.Tracer) else x * 0


def jvp(fun: Callable, primals, tangents, has_aux: bool = False):
    """(fun(*primals), the directional derivative along `tangents`); with has_aux, also aux."""
    _check_jvp_args(primals, tangents)
    lin = _Linearized(fun, tuple(primals), has_aux)
    push = _Pushforward(lin)
    t_leaves, _ = tree_util.tree_flatten(tuple(tangents))
    t_out = tree_util.tree_unflatten(lin.out_tree, push.tangent_leaves(t_leaves))
    if has_aux:
        return lin.out(), t_out, lin.aux()
    return lin.out(), t_out


def linearize(fun: Callable, *primals, has_aux: bool = False):
    """(fun(*primals), f_jvp) with f_jvp(*tangents) the JVP at primals; with has_aux, also aux."""
    lin = _Linearized(fun, primals, has_aux)
    f_jvp = _Pushforward(lin)
    if has_aux:
        return lin.out(), f_jvp, lin.aux()
    return lin.out(), f_jvp


# --- Jacobians: vmap of jvp / vjp over a standard basis --------------------------

def _shape(x) -> tuple:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _argnums_partial(fun, argnums, args, kwargs):
    nums = _argnums_tuple(argnums)
    for i in nums:
        if not -len(args) <= i < len(args):
            raise TypeError(f"Jacobian requires argnums to be within the number of positional arguments "
                            f"({len(args)}), got argnums={argnums}")
    nums = tuple(i % len(args) for i in nums)

    def f_partial(*dyn):
        full = list(args)
        for i, a in zip(nums, dyn):
            full[i] = a
        return fun(*full, **kwargs)

    return f_partial, tuple(args[i] for i in nums)


def _std_basis(tree):
    """The identity matrix over the flattened leaves of `tree`: each leaf becomes
    (n, *leaf.shape), n the total number of elements."""
    from meshsim._src.numpy import promotion
    leaves = tree_util.tree_leaves(tree)
    n = sum(int(np.prod(_shape(x))) for x in leaves)
    dtype = promotion.result_type(*leaves)[0]
    eye = core.Array.from_numpy(np.eye(n, dtype=dtype))
    basis = _unravel(tree, 1, None, eye)
    return tree_util.tree_map(_sharded_like, basis, tree)


def _sharded_like(part, leaf):
    """A basis part (n, *leaf.shape) laid out as `leaf` over the context mesh, as JAX types its
    basis: a tangent or cotangent that never meets the primal keeps the primal's sharding."""
    from meshsim._src.sharding import explicit, mesh as mesh_lib
    from meshsim._src.sharding.partition_spec import PartitionSpec
    sharding = getattr(core.typeof(leaf), "sharding", None)
    spec = getattr(sharding, "spec", None)
    if spec is None or not any(e is not None for e in spec.partitions) or spec.unreduced or spec.reduced \
            or mesh_lib.get_abstract_mesh().empty:
        return part
    return explicit.reshard(part, PartitionSpec(None, *spec.partitions))


def _unravel(tree, axis: int, example, arr):
    """`arr` split along `axis` into the leaves of `tree`, each axis replaced by the
    leaf's shape and cast to `example`'s dtype and weak type (or the leaf's)."""
    from meshsim._src.numpy import structural
    leaves, treedef = tree_util.tree_flatten(tree)
    axis = axis % arr.ndim
    sizes = [int(np.prod(_shape(x))) for x in leaves]
    parts = structural.split(arr, list(np.cumsum(sizes[:-1])), axis) if len(leaves) > 1 else [arr]
    out = []
    for part, leaf in zip(parts, leaves):
        part = structural.reshape(part, (*arr.shape[:axis], *_shape(leaf), *arr.shape[axis + 1:]))
        ref = core.typeof(leaf if example is None else example)
        out.append(core.convert_element_type(part, ref.dtype, ref.weak_type))
    return tree_util.tree_unflatten(treedef, out)


def _check_holomorphic(name: str, what: str, holomorphic: bool, dtype) -> None:
    if holomorphic and not dtype_kinds.issubdtype(dtype, np.complexfloating):
        raise TypeError(f"{name} with holomorphic=True requires {what} with complex dtype, but got {dtype.name}.")


def _check_jacfwd_input(holomorphic: bool, x) -> None:
    dtype = core.typeof(x).dtype
    _check_holomorphic("jacfwd", "inputs", holomorphic, dtype)
    if not holomorphic and not dtype_kinds.issubdtype(dtype, np.floating):
        raise TypeError("jacfwd requires real-valued inputs (input dtype that is a sub-dtype of np.floating), "
                        f"but got {dtype.name}. For holomorphic differentiation, pass holomorphic=True. For "
                        "differentiation of non-holomorphic functions involving complex inputs or integer "
                        "inputs, use jax.jvp directly.")


def _check_jacrev_input(holomorphic: bool, allow_int: bool, x) -> None:
    dtype = core.typeof(x).dtype
    _check_holomorphic("jacrev", "inputs", holomorphic, dtype)
    if dtype_kinds.issubdtype(dtype, np.integer) or dtype_kinds.issubdtype(dtype, np.bool_):
        if not allow_int:
            raise TypeError("jacrev requires real- or complex-valued inputs (input dtype that is a sub-dtype "
                            f"of np.inexact), but got {dtype.name}. If you want to use Boolean- or "
                            "integer-valued inputs, use vjp or set allow_int to True.")
    elif not dtype_kinds.issubdtype(dtype, np.inexact):
        raise TypeError("jacrev requires numerical-valued inputs (input dtype that is a sub-dtype of "
                        f"np.bool_ or np.number), but got {dtype.name}.")


def _check_jacrev_output(holomorphic: bool, x) -> None:
    dtype = core.typeof(x).dtype
    _check_holomorphic("jacrev", "outputs", holomorphic, dtype)
    if not holomorphic and not dtype_kinds.issubdtype(dtype, np.floating):
        raise TypeError("jacrev requires real-valued outputs (output dtype that is a sub-dtype of np.floating), "
                        f"but got {dtype.name}. For differentiation of functions with integer outputs, use "
                        "jax.vjp directly.")


def jacfwd(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False) -> Callable:
    """The Jacobian of `fun` by forward mode: one JVP per input element, vmapped.
    Each leaf has shape out.shape + in.shape; with has_aux, (jacobian, aux)."""
    from meshsim._src.vmap import vmap
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    _argnums_tuple(argnums)

    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        f_partial, dyn_args = _argnums_partial(fun, argnums, args, kwargs)
        tree_util.tree_map(functools.partial(_check_jacfwd_input, holomorphic), dyn_args)

        def pushfwd(tangents):
            return jvp(f_partial, dyn_args, tangents, has_aux=has_aux)

        out_axes = (None, -1, None) if has_aux else (None, -1)
        y, jac, *aux = vmap(pushfwd, out_axes=out_axes)(_std_basis(dyn_args))
        tree_util.tree_map(lambda o: _check_holomorphic("jacfwd", "outputs", holomorphic, core.typeof(o).dtype), y)
        example = dyn_args[0] if isinstance(argnums, int) else dyn_args
        jac_tree = tree_util.tree_map(lambda leaf, j: _unravel(example, -1, leaf, j), y, jac)
        return (jac_tree, *aux) if has_aux else jac_tree

    return jacfun


def jacrev(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False,
           allow_int: bool = False) -> Callable:
    """The Jacobian of `fun` by reverse mode: one VJP per output element, vmapped.
    Each leaf has shape out.shape + in.shape; with has_aux, (jacobian, aux)."""
    from meshsim._src.vmap import vmap
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")

    @functools.wraps(fun)
    def jacfun(*args, **kwargs):
        f_partial, dyn_args = _argnums_partial(fun, argnums, args, kwargs)
        tree_util.tree_map(functools.partial(_check_jacrev_input, holomorphic, allow_int), dyn_args)
        y, pullback, *aux = vjp(f_partial, *dyn_args, has_aux=has_aux)
        tree_util.tree_map(functools.partial(_check_jacrev_output, holomorphic), y)
        basis = _std_basis(y)
        if _core.current_trace() is None:
            pullback._lin.check_batched_pullback(tree_util.tree_leaves(basis)[0].shape[0])
        jac = vmap(pullback)(basis)
        jac = jac[0] if isinstance(argnums, int) else jac
        example = dyn_args[0] if isinstance(argnums, int) else dyn_args
        jac_tree = tree_util.tree_map(lambda leaf, j: _unravel(y, 0, leaf, j), example, jac)
        jac_tree = tree_util.tree_transpose(tree_util.tree_structure(example), tree_util.tree_structure(y),
                                            jac_tree)
        return (jac_tree, *aux) if has_aux else jac_tree

    return jacfun


jacobian = jacrev


def hessian(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False) -> Callable:
    """The Hessian of `fun`: jacfwd of jacrev. Each leaf has shape
    out.shape + in_1.shape + in_2.shape."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums,
                  has_aux=has_aux, holomorphic=holomorphic)


# --- stop_gradient, checkpoint_name ---------------------------------------------

def stop_gradient(x):
    """x, through which no gradient flows (over a pytree; non-float leaves pass through)."""
    def stop(leaf):
        leaf = core.asarray_value(leaf)
        if not _is_inexact(leaf.dtype):
            return leaf
        return core.bind1("stop_gradient", leaf)
    return tree_util.tree_map(stop, x)


def checkpoint_name(x, name: str):
    """Names x for checkpoint policies (save_only_these_names, ...)."""
    def tag(leaf):
        return _core.bind("name", (core.asarray_value(leaf),), {"name": str(name)})[0]
    return tree_util.tree_map(tag, x)


# --- custom_vjp ------------------------------------------------------------------

class custom_vjp:
    """A function with a user-defined VJP: `f.defvjp(fwd, bwd)`, where
    fwd(*args) -> (out, residuals) and bwd(*nondiff_args, residuals, out_ct) -> a tuple with
    one cotangent (or None) per differentiable argument."""

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd = None
        self.bwd = None
        self.symbolic_zeros = False
        self._tracing_rules = 0  # fwd/bwd calling the function itself get the plain function
        # Set by meshsim's own rules for what JAX differentiates in both modes (its bwd is
        # linear in the cotangent, so transposing it gives the JVP); a user's function refuses
        # forward mode as JAX's does.
        self._forward_mode = False
        # Set by those whose reverse mode JAX refuses (a linear solve given no transpose): the
        # TypeError's text.
        self._reverse_refusal = ""

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False,
               optimize_remat: bool = False) -> None:
        """With `symbolic_zeros`, fwd receives each differentiable argument leaf as a
        CustomVJPPrimal (every one is perturbed here: reverse mode differentiates them all)
        and bwd may return SymbolicZeros."""
        self.fwd, self.bwd, self.symbolic_zeros = fwd, bwd, symbolic_zeros

    def _resolve(self, args, kwargs) -> tuple:
        if not kwargs:
            return args
        try:
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
        except (TypeError, ValueError) as e:
            raise TypeError(str(e)) from None
        bound.apply_defaults()
        return bound.args

    def __call__(self, *args, **kwargs):
        name = getattr(self.fun, "__name__", repr(self.fun))
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using defvjp.")
        args = self._resolve(args, kwargs)
        if _core.current_trace() is None or self._tracing_rules:
            return self.fun(*args)
        nondiff = {i % len(args): args[i] for i in self.nondiff_argnums}
        diff_pos = [i for i in range(len(args)) if i not in nondiff]
        diff_args = tuple(args[i] for i in diff_pos)
        raw, in_tree = tree_util.tree_flatten(diff_args)
        # Refs among the arguments are passed through as they are (a placeholder goes in their place).
        arg_refs = ad_refs.RefSlots(raw)
        leaves = [core.asarray_value(x) for x in arg_refs.placeholders(raw)]
        avals = [x.aval for x in leaves]

        def full_args(dargs):
            dargs = arg_refs.restore(dargs)
            full = list(args)
            for i, a in zip(diff_pos, dargs):
                full[i] = a
            return full

        # The rules' writes of traced values into Refs made outside happen when their
        # programs run (the primal's when called, fwd's in a forward pass), as in JAX.
        with ad_refs.writes_at_run_time():
            call, call_consts, out_tree = tracing.trace_flat(lambda *d: self.fun(*full_args(d)), in_tree, avals)
        self._tracing_rules += 1
        try:
            fwd, fwd_consts, bwd, bwd_consts, res_tree = self._trace_rules(
                name, args, nondiff, diff_args, full_args, in_tree, avals, call, out_tree)
        finally:
            self._tracing_rules -= 1
        params = dict(name=name, call_jaxpr=call, fwd_jaxpr=fwd, bwd_jaxpr=bwd, num_args=len(leaves),
                      num_call_consts=len(call_consts), num_fwd_consts=len(fwd_consts), symbolic_zeros=False)
        if self._forward_mode:
            params["forward_mode"] = True
        if self._reverse_refusal:
            params["reverse_refusal"] = self._reverse_refusal
        outs = _core.bind("custom_vjp_call", (*leaves, *call_consts, *fwd_consts, *bwd_consts), params)
        return tree_util.tree_unflatten(out_tree, outs)

    def _trace_rules(self, name, args, nondiff, diff_args, full_args, in_tree, avals, call, out_tree):

        def fwd_flat(*d):
            if self.symbolic_zeros:
                from meshsim._src.custom_gradient import CustomVJPPrimal
                d = tree_util.tree_map(lambda v: CustomVJPPrimal(v, True), d)
            result = self.fwd(*full_args(d))
            if not (isinstance(result, (tuple, list)) and len(result) == 2):
                raise TypeError(f"Custom VJP fwd rule {getattr(self.fwd, '__name__', self.fwd)} for function "
                                f"{name} must produce a pair (list or tuple of length two) representing primal "
                                f"outputs and residuals (values stored from the forward pass for use on the "
                                f"backward pass), got {result!r}.")
            out, res = result
            res_leaves, tree = tree_util.tree_flatten(res)
            _refuse_new_ref_residuals(self.fwd, res, tree_util.tree_leaves(args))
            res_refs.__init__(res_leaves)
            return out, tree_util.tree_unflatten(tree, res_refs.placeholders(res_leaves))

        res_refs = ad_refs.RefSlots([])  # Refs among the residuals, passed to bwd as they are
        with ad_refs.writes_at_run_time():
            fwd, fwd_consts, fwd_tree = tracing.trace_flat(fwd_flat, in_tree, avals)
        fwd_out_tree, res_tree = tree_util.treedef_children(fwd_tree)
        n_out = out_tree.num_leaves
        out_avals, fwd_avals = call.out_avals, fwd.out_avals
        if fwd_out_tree != out_tree or [(a.shape, a.dtype) for a in fwd_avals[:n_out]] != \
                [(a.shape, a.dtype) for a in out_avals]:
            raise TypeError(f"Custom VJP fwd rule {getattr(self.fwd, '__name__', self.fwd)} for function {name} "
                            "must produce primal outputs with equal container (pytree) structures and array "
                            "shapes/dtypes as the primal function, but got "
                            f"{fwd_out_tree} and {out_tree} respectively.")
        res_avals = fwd_avals[n_out:]
        nondiff_vals = [args[i] for i in sorted(nondiff)]

        def bwd_flat(*flat):
            res = res_refs.restore(tree_util.tree_unflatten(res_tree, flat[:len(res_avals)]))
            ct = tree_util.tree_unflatten(out_tree, flat[len(res_avals):])
            arg_cts = self.bwd(*nondiff_vals, res, ct)
            if not isinstance(arg_cts, (tuple, list)) or len(arg_cts) != len(diff_args):
                raise TypeError(
                    "Custom VJP bwd rule must produce an output with the same container (pytree) structure "
                    "as the args tuple of the primal function, and in particular must produce a tuple of "
                    "length equal to the number of arguments to the primal function, but got bwd output "
                    f"structure {tree_util.tree_structure(arg_cts)} for primal input structure "
                    f"{tree_util.tree_structure(diff_args)}.")
            flat_cts = []
            for ct_i, arg in zip(arg_cts, diff_args):
                arg_leaves = tree_util.tree_leaves(arg)
                if ct_i is None:
                    ct_leaves = [None] * len(arg_leaves)
                else:
                    ct_leaves = tree_util.tree_structure(arg).flatten_up_to(ct_i)
                for c, a in zip(ct_leaves, arg_leaves):
                    a = core.typeof(a._value if isinstance(a, ref.Ref) else a)
                    if c is None or (isinstance(c, np.ndarray) and c.dtype == float0) or \
                            type(c).__name__ == "SymbolicZero":
                        flat_cts.append(core.Array.from_numpy(np.zeros(a.shape, a.dtype),
                                                              weak_type=a.weak_type))
                    else:
                        flat_cts.append(core.convert_element_type(c, a.dtype, core.typeof(c).weak_type)
                                        if core.typeof(c).dtype != a.dtype else c)
            return flat_cts

        bwd_tree = tree_util.tree_structure(tuple(range(len(res_avals) + n_out)))
        with ad_refs.writes_at_run_time():
            bwd, bwd_consts, _ = tracing.trace_flat(bwd_flat, bwd_tree, [*res_avals, *out_avals])
        return fwd, fwd_consts, bwd, bwd_consts, res_tree


def _refuse_new_ref_residuals(fwd, res, arg_leaves) -> None:
    """JAX's error for a Ref among a fwd rule's residuals that is not one of the arguments
    (a Ref made inside the rule would outlive the trace that made it)."""
    passed = {id(x) for x in arg_leaves if isinstance(x, ref.Ref)}
    for path, leaf in tree_util.tree_flatten_with_path(res)[0]:
        if isinstance(leaf, ref.Ref) and id(leaf) not in passed:
            raise ValueError(
                f"custom_vjp fwd function {functools.partial(fwd)!r} returned a mutable array reference of "
                f"type {core.typeof(leaf)} at output tree path [1]{tree_util.keystr(path)} that was not an "
                "argument.")


# --- custom_jvp ------------------------------------------------------------------

# How many derivatives of a custom_jvp function whose rule calls the function itself use the
# rule (hessian needs 2); the rule of the last is differentiated as written.
_NESTED_RULE_ORDERS = 3


class custom_jvp:
    """A function with a user-defined JVP: `f.defjvp(jvp)`, where
    jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out), or
    `f.defjvps(*per_argument_jvps)`.

    Called under a trace it is recorded as JAX records it, a custom_jvp_call of the
    function's program; the equation also holds the rule's program, traced when the function
    is called, which differentiation uses in place of the function (see the primitive)."""

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp = None
        self.symbolic_zeros = False
        self._rule_depth = 0  # how many of this function's rules are being traced, one inside another

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        self.jvp, self.symbolic_zeros = jvp, symbolic_zeros
        return jvp

    def defjvps(self, *jvps) -> None:
        if self.nondiff_argnums:
            raise TypeError("Can't use ``defjvps`` with ``nondiff_argnums``.")

        def jvp(primals, tangents):
            out = self(*primals)
            terms = [rule(t, out, *primals) for rule, t in zip(jvps, tangents) if rule is not None]
            tangent_out = functools.reduce(
                lambda a, b: tree_util.tree_map(lambda x, y: x + y, a, b), terms) if terms else \
                tree_util.tree_map(_zeros_like, out)
            return out, tangent_out

        self.jvp = jvp

    def __call__(self, *args, **kwargs):
        name = getattr(self.fun, "__name__", repr(self.fun))
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using defjvp.")
        args = custom_vjp._resolve(self, args, kwargs)
        # A rule calling the function itself records it again, with its rule traced in turn:
        # after _NESTED_RULE_ORDERS levels the function is called as written.
        if _core.current_trace() is None or self._rule_depth >= _NESTED_RULE_ORDERS:
            return self.fun(*args)
        nondiff_pos = sorted(i % len(args) for i in self.nondiff_argnums)
        nondiff = [args[i] for i in nondiff_pos]
        diff_pos = [i for i in range(len(args)) if i not in nondiff_pos]
        raw, in_tree = tree_util.tree_flatten(tuple(args[i] for i in diff_pos))
        leaves = [core.asarray_value(x) for x in raw]
        avals = [x.aval for x in leaves]

        def call(*diff_args):
            full = list(args)
            for i, a in zip(diff_pos, diff_args):
                full[i] = a
            return self.fun(*full)

        # Traced over the primals' values where they are known (an eager grad's), so that Python
        # control flow on them works in the function and its rule, as with JAX's concrete primals.
        program, consts, out_tree = tracing.trace_flat(call, in_tree, avals, leaves)
        const_avals = [c.aval for c in consts]
        if consts:  # JAX's call_jaxpr reads the values it closed over first
            program = program.with_inputs([*const_avals, *avals],
                                          [*range(len(consts), len(consts) + len(avals)), *range(len(consts))])
        self._rule_depth += 1
        try:
            rule, rule_consts = self._trace_rule(name, nondiff, in_tree, leaves, out_tree, program.out_avals)
        finally:
            self._rule_depth -= 1
        # The rule's inputs: the function's consts, args, tangents, then the other values it
        # closed over (those the function closed over too are read from its consts).
        const_index = {id(c): i for i, c in enumerate(consts)}
        extra = [c for c in rule_consts if id(c) not in const_index]
        first_extra = len(consts) + 2 * len(avals)
        where = list(range(len(consts), first_extra))
        extra_index = {id(c): first_extra + k for k, c in enumerate(extra)}
        where += [const_index.get(id(c), extra_index.get(id(c))) for c in rule_consts]
        rule = rule.with_inputs([*const_avals, *avals, *avals, *(c.aval for c in extra)], where)
        params = dict(name=name, call_jaxpr=program, jvp_jaxpr=rule,
                      jvp_name=getattr(self.jvp, "__name__", repr(self.jvp)), num_consts=len(consts),
                      symbolic_zeros=self.symbolic_zeros)
        outs = _core.bind("custom_jvp_call", (*consts, *leaves, *extra), params)
        return tree_util.tree_unflatten(out_tree, outs)

    def _trace_rule(self, name, nondiff, in_tree, leaves, out_tree, out_avals):
        """The rule's program: (args, tangents, the values it closed over) -> (outputs, tangents
        of the outputs), every tangent an array (symbolic zeros are made real). Traced over the
        primals' values where known (the tangents stand for any value: zeros)."""
        avals = [x.aval for x in leaves]
        n = len(avals)
        rule_name = getattr(self.jvp, "__name__", repr(self.jvp))

        def rule_flat(*flat):
            primals = tree_util.tree_unflatten(in_tree, flat[:n])
            tangents = tree_util.tree_unflatten(in_tree, flat[n:])
            result = self.jvp(*nondiff, tuple(primals), tuple(tangents))
            if not (isinstance(result, (tuple, list)) and len(result) == 2):
                raise TypeError(f"Custom JVP rule {rule_name} for function {name} must produce a pair (list "
                                "or tuple of length two) representing primal and tangent outputs, but got "
                                f"{result}.")
            out, tangent_out = result
            out_leaves, got_tree = tree_util.tree_flatten(out)
            tangent_leaves, tangent_tree = tree_util.tree_flatten(tangent_out)
            if got_tree != tangent_tree:
                raise TypeError(f"Custom JVP rule {rule_name} for function {name} must produce primal and "
                                "tangent outputs with equal container (pytree) structures, but got "
                                f"{got_tree} and {tangent_tree} respectively.")
            if got_tree != out_tree:
                def typed(tree, avals):
                    return str(tree_util.tree_unflatten(tree, [a.str_short() for a in avals])).replace("'", "")
                raise TypeError(
                    f"Custom JVP rule {rule_name} for function {name} must produce a pair (list or tuple of "
                    "length two) where the first element represents the primal output (equal in value to "
                    f"the output of the custom_jvp-decorated function {name}, and in particular of the same "
                    "container/pytree structure), but instead the JVP rule output's first element had "
                    f"container/pytree structure:\n    {typed(got_tree, [core.typeof(x) for x in out_leaves])}"
                    f"\nwhile the custom_jvp-decorated function {name} had output container/pytree "
                    f"structure:\n    {typed(out_tree, out_avals)}.")
            tangent_leaves = [_tangent_like(t, a) for t, a in zip(tangent_leaves, out_avals)]
            return [*out_leaves, *tangent_leaves]

        flat_tree = tree_util.tree_structure(tuple(range(2 * n)))
        tangents = [core.Array.from_numpy(np.zeros(a.shape, a.dtype)) for a in avals]
        rule, rule_consts, _ = tracing.trace_flat(rule_flat, flat_tree, [*avals, *avals], [*leaves, *tangents])
        return rule, rule_consts


def _tangent_like(t, aval):
    """A rule's tangent output as an array (a symbolic zero made real), of its primal's shape."""
    if t is None or type(t).__name__ == "SymbolicZero" or \
            (isinstance(t, np.ndarray) and t.dtype == float0):
        return core.Array.from_numpy(np.zeros(aval.shape, aval.dtype), weak_type=aval.weak_type)
    return core.asarray_value(t)


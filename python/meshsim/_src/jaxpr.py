"""JAX's object model of a traced program (`jax.core.ClosedJaxpr`, `Jaxpr`, `JaxprEqn`, `Var`,
`Literal`) over meshsim's C++ Program, for code that walks programs: counting primitives or
collectives, reading avals and params, evaluating a program with `eval_jaxpr`.

A view is built on first use and kept: the same variable is the same `Var` object wherever it
occurs, and a sub-program held twice (a shared branch) is the same `Jaxpr`. Scalar constants are
`Literal`s in place of a variable, as JAX inlines them; larger constants are the constvars whose
values are `ClosedJaxpr.consts`. Printing is the C++ printer's, unchanged."""
from __future__ import annotations

import contextlib
import functools
from typing import Any

import numpy as np

from meshsim import _core
from meshsim._src import core
from meshsim._src.primitive_handles import handle_of_equation, jax_params


class Var:
    """A program variable: its abstract value (a ShapedArray)."""
    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"Var(id={id(self)}):{self.aval.str_short()}"


class DropVar(Var):
    """A result no equation reads (JAX's type; meshsim's views give every result a Var)."""

    def __repr__(self):
        return "_"


class Literal:
    """A scalar constant written in place of a variable: its value and abstract value."""
    __slots__ = ("val", "aval")

    def __init__(self, val, aval):
        self.val, self.aval = val, aval

    def __repr__(self):
        return f"Literal({self.val.item()!r})"


class SourceInfo:
    """Where an equation was traced from; meshsim records no source locations."""
    traceback = None
    name_stack = ""


_NO_SOURCE = SourceInfo()


class EquationContext:
    """The settings an equation was traced under (JAX's JaxprEqnContext); meshsim's equations
    carry none, so re-entering them changes nothing."""

    @property
    def manager(self):
        return contextlib.nullcontext()


_NO_CONTEXT = EquationContext()


class JaxprEqn:
    """One equation: its primitive, operands (Var or Literal), results and params."""
    __slots__ = ("invars", "outvars", "primitive", "params", "effects", "source_info", "ctx")

    def __init__(self, invars, outvars, primitive, params, effects=frozenset(), source_info=None,
                 ctx=None):
        self.invars, self.outvars, self.primitive, self.params = invars, outvars, primitive, params
        self.effects, self.source_info = effects, source_info or _NO_SOURCE
        self.ctx = ctx or _NO_CONTEXT

    def replace(self, **changes) -> "JaxprEqn":
        fields = {k: getattr(self, k) for k in self.__slots__}
        fields.update(changes)
        return JaxprEqn(**fields)

    def __str__(self):
        names: dict[int, str] = {}

        def atom(v, typed):
            if isinstance(v, Literal):
                return f"{v.val.item()!r}:{v.aval.str_short(short_dtypes=True)}"
            name = names.setdefault(id(v), _var_name(len(names)))
            return f"{name}:{v.aval.str_short(short_dtypes=True)}" if typed else name

        lhs = " ".join(atom(v, True) for v in self.outvars)
        params = " ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        rhs = self.primitive.name + (f"[{params}]" if params else "")
        rhs += "".join(" " + atom(v, False) for v in self.invars)
        return f"{lhs} = {rhs}" if lhs else rhs

    __repr__ = __str__


def _var_name(i: int) -> str:
    letters = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        letters = chr(ord("a") + r) + letters
    return letters


class Jaxpr:
    """A program without its constants' values: constvars, invars, equations and outvars."""

    def __init__(self, program, views: "_Views | None" = None):
        self.program = program
        self._views = views or _Views()
        self._built = False

    def _build(self):
        if self._built:
            return
        p, views = self.program, self._views
        avals = p.avals
        atoms: dict[int, Any] = {}
        constvars, consts = [], []
        if p.constvars:
            for v, value in zip(p.constvars, p.consts):
                if value.ndim == 0:
                    atoms[v] = Literal(np.asarray(value), avals[v])
                else:
                    atoms[v] = Var(avals[v])
                    constvars.append(atoms[v])
                    consts.append(value)

        def atom(v):
            a = atoms.get(v)
            if a is None:
                a = atoms[v] = Var(avals[v])
            return a

        self._invars = [atom(v) for v in p.invars]
        self._constvars, self._consts = constvars, consts
        eqns = []
        for name, ins, outs, params, *_ in p.equations():
            eqns.append(JaxprEqn([atom(v) for v in ins], [atom(v) for v in outs], handle_of_equation(name),
                                 views.params(name, params, avals[ins[0]] if ins else None,
                                              len(ins), len(outs))))
        self._eqns = eqns
        self._outvars = [atom(v) for v in p.outvars]
        self._built = True

    @property
    def constvars(self) -> list:
        self._build()
        return self._constvars

    @property
    def invars(self) -> list:
        self._build()
        return self._invars

    @property
    def outvars(self) -> list:
        self._build()
        return self._outvars

    @property
    def eqns(self) -> list:
        self._build()
        return self._eqns

    def consts_values(self) -> list:
        """The values of `constvars` the program was traced with."""
        self._build()
        return list(self._consts)

    effects = frozenset()
    debug_info = None

    @property
    def in_avals(self) -> list:
        return list(self.program.in_avals)

    @property
    def out_avals(self) -> list:
        return list(self.program.out_avals)

    def __str__(self):
        return str(self.program)

    __repr__ = __str__


class ClosedJaxpr:
    """A traced program as `make_jaxpr` returns it: its Jaxpr and the constants' values."""

    def __init__(self, jaxpr, consts=None, out_tree=None):
        if isinstance(jaxpr, Jaxpr):
            self._jaxpr = jaxpr
        else:  # a C++ Program
            self._jaxpr = Jaxpr(jaxpr)
        self._consts = None if consts is None else list(consts)
        self.out_tree = out_tree

    @property
    def program(self):
        return self._jaxpr.program

    @property
    def jaxpr(self) -> Jaxpr:
        return self._jaxpr

    @property
    def consts(self) -> list:
        return self._jaxpr.consts_values() if self._consts is None else self._consts

    @property
    def eqns(self) -> list:
        return self._jaxpr.eqns

    @property
    def in_avals(self) -> list:
        return self._jaxpr.in_avals

    @property
    def out_avals(self) -> list:
        return self._jaxpr.out_avals

    @property
    def literals(self) -> list:
        return [a for e in self._jaxpr.eqns for a in e.invars if isinstance(a, Literal)]

    effects = frozenset()

    def __str__(self):
        return str(self.program)

    __repr__ = __str__


# Params holding sub-programs, and whether JAX holds each open (a Jaxpr) rather than closed.
_OPEN_SUB_PROGRAMS = {("shard_map", "jaxpr"), ("remat2", "jaxpr")}


class _Views:
    """The views of one program tree's sub-programs, one per C++ program."""

    def __init__(self):
        self._jaxprs: dict[int, tuple[Any, Jaxpr]] = {}

    def jaxpr(self, program) -> Jaxpr:
        kept = self._jaxprs.get(id(program))
        if kept is None:
            kept = self._jaxprs[id(program)] = (program, Jaxpr(program, self))
        return kept[1]

    def sub(self, name: str, key: str, program):
        jaxpr = self.jaxpr(program)
        return jaxpr if (name, key) in _OPEN_SUB_PROGRAMS else ClosedJaxpr(jaxpr)

    def params(self, name: str, params: dict, first_operand=None, num_in: int = 0, num_out: int = 0) -> dict:
        out = {}
        for key, value in params.items():
            if isinstance(value, _core.Program):
                value = self.sub(name, key, value)
            elif isinstance(value, tuple) and value and all(isinstance(v, _core.Program) for v in value):
                value = tuple(self.sub(name, key, v) for v in value)
            out[key] = value
        if name == "custom_vjp_call":
            out = _custom_vjp_params(out)
        if name == "custom_jvp_call":
            out = _custom_jvp_params(out)
        if name == "jit":
            out = _jit_params(out, num_in, num_out)
        if name.startswith("scatter") and "dimension_numbers" in params:
            # JAX's scatters hold the program combining an update with the operand (none: set).
            combine = name[len("scatter_"):]
            out["update_jaxpr"] = _update_jaxpr(combine, first_operand.dtype) if combine else None
            out["update_consts"] = ()
        return jax_params(name, out)


@functools.lru_cache(maxsize=None)
def _update_jaxpr(combine: str, dtype) -> Jaxpr:
    """`{ lambda ; a b. let c = <combine> a b in (c,) }` over scalars of `dtype`."""
    from meshsim._src.api import make_jaxpr
    scalar = np.zeros((), dtype)
    return make_jaxpr(lambda a, b: core.bind1(combine, a, b))(scalar, scalar).jaxpr


class _ForwardThunk:
    """custom_vjp_call's `fwd_jaxpr_thunk`: gives the forward program and its constants. It keeps
    the equation's own params (`recorded`), by which the handle's bind records it again."""

    def __init__(self, fwd: ClosedJaxpr, recorded: dict):
        self.fwd, self.recorded = fwd, recorded

    def __call__(self, *zeros):
        return self.fwd.jaxpr, self.fwd.consts


def _custom_vjp_params(params: dict) -> dict:
    """custom_vjp_call's params as JAX names them: the forward program as a thunk giving
    (jaxpr, consts), the backward one as a function of residuals and cotangents."""
    bwd = params["bwd_jaxpr"]

    def bwd_fun(*res_and_cts):
        return eval_jaxpr(bwd.jaxpr, bwd.consts, *res_and_cts)

    recorded = {k: getattr(v, "program", v) for k, v in params.items()}
    return {"call_jaxpr": params["call_jaxpr"],
            "fwd_jaxpr_thunk": _ForwardThunk(params["fwd_jaxpr"], recorded),
            "num_consts": params["num_call_consts"], "bwd": bwd_fun,
            "out_trees": lambda: None, "symbolic_zeros": params["symbolic_zeros"]}


class _RuleFunction:
    """custom_jvp_call's `jvp_jaxpr_fun`: names the rule (`debug_info.func_name`, as the
    printer shows it) and keeps the equation's own params (`recorded`), by which the handle's
    bind records it again."""

    def __init__(self, name: str, recorded: dict):
        self.debug_info = _DebugInfo(name)
        self.recorded = recorded

    def __repr__(self):
        return self.debug_info.func_name


class _DebugInfo:
    def __init__(self, func_name: str):
        self.func_name = func_name


def _custom_jvp_params(params: dict) -> dict:
    """custom_jvp_call's params as JAX names them: the function's program, and the rule
    (JAX's is a function tracing it; meshsim's program is traced with the call)."""
    recorded = {k: getattr(v, "program", v) for k, v in params.items()}
    return {"call_jaxpr": params["call_jaxpr"],
            "jvp_jaxpr_fun": _RuleFunction(params["jvp_name"], recorded),
            "num_consts": params["num_consts"], "symbolic_zeros": params["symbolic_zeros"]}


class UnspecifiedValue:
    """A jit's in/out sharding left to the compiler (JAX's UNSPECIFIED)."""

    def __repr__(self):
        return "UnspecifiedValue"


UNSPECIFIED = UnspecifiedValue()


def _jit_params(params: dict, num_in: int, num_out: int) -> dict:
    """A nested jit's params as JAX's equation holds them, in JAX's order: meshsim records the
    program, its name and a context mesh; shardings, layouts and donation are the defaults a
    nested call has, as are keep_unused, inline and compiler options."""
    from meshsim._src.sharding.mesh import Mesh
    ctx_mesh = params.get("ctx_mesh")
    return {"jaxpr": params["jaxpr"], "in_shardings": (UNSPECIFIED,) * num_in,
            "out_shardings": (UNSPECIFIED,) * num_out, "in_layouts": (None,) * num_in,
            "out_layouts": (None,) * num_out, "donated_invars": (False,) * num_in,
            "ctx_mesh": Mesh(np.empty((), object), ()) if ctx_mesh is None else ctx_mesh,
            "name": params["name"], "keep_unused": False, "inline": False, "compiler_options_kvs": ()}


def eval_jaxpr(jaxpr, consts, *args, propagate_source_info: bool = True) -> list:
    """Runs `jaxpr` with `consts` as its constvars' values on `args` (or records it into an open
    trace); returns its results as a list. A ClosedJaxpr stands for its jaxpr and constants."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr, consts = jaxpr.jaxpr, (consts if consts else jaxpr.consts)
    consts = list(consts)
    if len(consts) != len(jaxpr.constvars):
        raise TypeError(f"eval_jaxpr: the jaxpr has {len(jaxpr.constvars)} constvars, "
                        f"got {len(consts)} consts")
    program = jaxpr.program
    ins = [core.asarray_value(a) for a in args]
    if all(c is own for c, own in zip(consts, jaxpr.consts_values())):
        return list(_core.eval_program(program, ins))
    # Other constants: evaluate equation by equation, as JAX's interpreter does.
    env = dict(zip(program.constvars, program.consts))
    env.update((id_of, core.asarray_value(c)) for id_of, c in zip(_named_constvars(program), consts))
    env.update(zip(program.invars, ins))
    for name, eq_ins, eq_outs, params, *_ in program.equations():
        env.update(zip(eq_outs, core.bind(name, *(env[v] for v in eq_ins), **params)))
    return [env[v] for v in program.outvars]


def _named_constvars(program) -> list:
    """The constvars that are not literals (those `Jaxpr.constvars` lists), by variable id."""
    return [v for v, value in zip(program.constvars, program.consts) if value.ndim != 0]


def jaxpr_as_fun(closed: ClosedJaxpr):
    """`closed` as a function of its inputs returning the list of its results."""
    def fun(*args):
        return eval_jaxpr(closed.jaxpr, closed.consts, *args)
    return fun

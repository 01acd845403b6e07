"""`jax.interpreters.partial_eval`: evaluating a function on partly known inputs. flax uses
it to find which outputs of a function do not depend on some of its inputs, and their values
(linen's scan: variables broadcast over the loop; `lazy_init`: variables made from shapes)."""
from __future__ import annotations

from meshsim import _core
from meshsim._src import core, tracing


class PartialVal(tuple):
    """`(aval, None)` for a value known only by its type, `(None, value)` for a known one."""

    def __new__(cls, xs):
        return tuple.__new__(cls, xs)

    @classmethod
    def known(cls, value):
        return cls((None, value))

    @classmethod
    def unknown(cls, aval):
        return cls((aval, None))

    def is_known(self) -> bool:
        return self[0] is None

    def get_known(self):
        return self[1] if self[0] is None else None

    def get_aval(self):
        return core.typeof(self[1]) if self[0] is None else self[0]


def trace_to_jaxpr_nounits(fun, pvals, instantiate=False):
    """Calls `fun` (a `linear_util.WrappedFun` of flat inputs) with the known inputs' values
    and tracers for the unknown ones. Operations on known values alone run at once, as JAX's
    partial evaluator runs them (values closed over from enclosing traces count as known);
    the rest is recorded and split by meshsim's partial evaluator. Returns (the staged
    program: residuals and unknown inputs -> the unknown outputs, one PartialVal per output,
    the residuals' values)."""
    pvals = [PartialVal(pv) for pv in pvals]
    with tracing.open_trace() as trace, core.known_values_evaluated():
        inputs = [pv[1] if pv.is_known() else trace.new_input(pv[0]) for pv in pvals]
        outs = list(fun.call_wrapped(*inputs))
        program, captures = trace.finish_capturing([core.asarray_value(o) for o in outs])
    n_unknown = sum(not pv.is_known() for pv in pvals)
    instantiate = ([bool(instantiate)] * len(outs) if isinstance(instantiate, bool)
                   else list(instantiate))
    known, staged, out_known, num_residuals = _core.partial_eval(
        program, [False] * n_unknown + [True] * len(captures), instantiate)
    known_values = list(_core.eval_program(known, list(captures)))
    residuals = known_values[len(known_values) - num_residuals:]
    out_pvals, next_known = [], 0
    for out, is_known in zip(outs, out_known):
        if is_known:
            value = known_values[next_known]
            next_known += 1
            # A result that is not this trace's own (a known input or an enclosing trace's
            # value passed through) is given back as it came.
            if not (isinstance(out, _core.Tracer) and out.var_in(trace) >= 0):
                value = out
            out_pvals.append(PartialVal.known(value))
        else:
            out_pvals.append(PartialVal.unknown(out.aval))
    return staged, out_pvals, residuals

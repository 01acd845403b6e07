"""meshsim.core (as jax.core): the types of traced values and their abstract values."""
from meshsim._src.core_types import AbstractValue, ShapedArray, Trace, Tracer, max_dim, min_dim  # noqa: F401
from meshsim._src.core import ensure_compile_time_eval, eval_context  # noqa: F401
from meshsim._src.jaxpr import (  # noqa: F401,E402
    ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, Var, eval_jaxpr, jaxpr_as_fun)
from typing import Any as _Any  # noqa: E402

ParamDict = dict[str, _Any]  # an equation's parameters, as JAX types them

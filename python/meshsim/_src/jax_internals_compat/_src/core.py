"""`jax._src.core`: meshsim's `jax.core` plus `physical_aval`, which meshsim cannot honour
(its arrays have no extended dtypes to map to physical ones)."""
from __future__ import annotations

from meshsim._src.jaxpr import (  # noqa: F401
    ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, Var, eval_jaxpr, jaxpr_as_fun)
from meshsim._src.core import ensure_compile_time_eval, eval_context  # noqa: F401
from meshsim._src.core_types import (  # noqa: F401
    AbstractValue, ShapedArray, Trace, Tracer, max_dim, min_dim)
from meshsim._src.jax_internals_compat import unsupported


def physical_aval(aval):
    raise unsupported("jax._src.core.physical_aval", "meshsim arrays have no extended dtypes")

"""`jax.interpreters.pxla`: XLA's result handlers for compiled programs. orbax imports the
module (for its Pathways plugin path); meshsim builds results without them."""
from __future__ import annotations

from meshsim._src.jax_internals_compat import unsupported

global_result_handlers: dict = {}


def global_avals_to_results_handler(*args, **kwargs):
    raise unsupported("jax.interpreters.pxla.global_avals_to_results_handler",
                      "meshsim builds arrays without XLA's result handlers")

"""meshsim.experimental.pjit (as jax.experimental.pjit): `pjit`, deprecated in JAX 0.10.2 in
favour of `jax.jit` (reading it warns as JAX does). It is jit with pjit's signature (the
shardings may be positional) and pjit's context: PartitionSpecs in in_shardings and
out_shardings name the axes of the mesh a `with mesh:` block entered, and errors say pjit."""
import functools as _functools

from meshsim._src.deprecation import warn_deprecated
from meshsim._src.api import _jit


def _pjit(fun, in_shardings=None, out_shardings=None, static_argnums=None, static_argnames=None,
          donate_argnums=None, donate_argnames=None, keep_unused=False, device=None, backend=None,
          inline=False, compiler_options=None):
    """`jax.experimental.pjit.pjit` has been deprecated. Please use `jax.jit`."""
    return _jit(fun, in_shardings, out_shardings, static_argnums, static_argnames, donate_argnums,
                donate_argnames, device, backend, api="pjit")


_pjit.__name__ = _pjit.__qualname__ = "pjit"


@_functools.cache  # JAX warns on a name's first read only
def __getattr__(name):
    if name == "pjit":
        warn_deprecated("jax.experimental.pjit.pjit has been deprecated. Please use `jax.jit` instead.")
        return _pjit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""meshsim.experimental.pjit (as jax.experimental.pjit): `pjit` is `jit`, and reading it warns
as JAX 0.10.2 does (it is deprecated there in favour of `jax.jit`)."""
import warnings as _warnings

from meshsim._src.api import jit as _jit


def __getattr__(name):
    if name == "pjit":
        _warnings.warn("jax.experimental.pjit.pjit has been deprecated. Please use `jax.jit` instead.",
                       DeprecationWarning, stacklevel=2)
        return _jit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

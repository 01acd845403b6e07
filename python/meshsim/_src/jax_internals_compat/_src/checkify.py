"""`jax._src.checkify`: functionalized run-time checks. meshsim does not implement
checkify; the names a library refers to when it is imported (flax's `nnx.checkify` takes
`user_checks` as a default) exist, and calling `checkify` raises naming it."""
from __future__ import annotations

from typing import TypeVar

from meshsim._src.jax_internals_compat import unsupported

Out = TypeVar("Out")


class JaxException(Exception):
    """The base of the errors checkify can functionalize."""


class FailedCheckError(JaxException):
    """A `checkify.check` that failed."""


class Error:
    """The error value checkify returns alongside the function's output."""

    def __init__(self, *args, **kwargs):
        raise unsupported("jax._src.checkify.Error", "checkify is not available")


user_checks = frozenset({FailedCheckError})


def checkify(fun, errors=user_checks):
    raise unsupported("jax._src.checkify.checkify",
                      "meshsim cannot functionalize checks (flax's nnx.checkify uses it)")

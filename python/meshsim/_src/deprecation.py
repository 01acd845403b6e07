"""Deprecation warnings that point at the program's line, as JAX's do."""
from __future__ import annotations

import sys
import warnings


def warn_deprecated(message: str) -> None:
    """Warns with DeprecationWarning at the first frame outside meshsim that led here.

    A module's `__getattr__` is reached either straight from the program or through the
    `jax` alias's attribute wrapper; the warning must name the program's line both ways, or
    Python's default filter (which shows DeprecationWarning only for `__main__`) hides it."""
    level, frame = 3, sys._getframe(2)  # 1: this function, 2: its caller, 3: the caller's caller
    while frame is not None and frame.f_globals.get("__name__", "").startswith("meshsim"):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, DeprecationWarning, stacklevel=level)

"""The types JAX annotates arguments with: `ArrayLike` (what an array
operation accepts) and `DTypeLike` (what names a dtype)."""
from __future__ import annotations

from typing import Any, Protocol, Union

import numpy as np

from meshsim._src.basearray import Array


class SupportsDType(Protocol):
    @property
    def dtype(self) -> np.dtype: ...


ArrayLike = Union[Array, np.ndarray, np.bool_, np.number, bool, int, float, complex]
DTypeLike = Union[str, type[Any], np.dtype, SupportsDType]

"""meshsim.numpy: indexing."""
from __future__ import annotations

__all__: list[str] = []


def _getitem(x, idx):
    raise NotImplementedError("indexing is not implemented yet")

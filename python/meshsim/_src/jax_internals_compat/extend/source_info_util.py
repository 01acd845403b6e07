"""`jax.extend.source_info_util`: paths whose frames JAX leaves out of the source
locations it records for traced operations. meshsim records no source locations per
operation, so registered paths are only kept."""
from __future__ import annotations

_exclude_paths: list[str] = []


def register_exclusion(path: str) -> None:
    _exclude_paths.append(path)

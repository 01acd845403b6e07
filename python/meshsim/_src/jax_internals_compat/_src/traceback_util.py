"""`jax._src.traceback_util`: JAX hides its own frames from tracebacks of errors raised
through its API; libraries register their files to be hidden as well. meshsim does not
filter tracebacks, so `api_boundary` returns the function as it is and the registered
paths are only recorded (flax adds and removes them from `_exclude_paths`)."""
from __future__ import annotations

_exclude_paths: list[str] = []


def register_exclusion(path: str) -> None:
    _exclude_paths.append(path)


def api_boundary(fun=None, **_options):
    """Marks `fun` as an entry point of a library's API; meshsim's tracebacks show every frame."""
    if fun is None:
        return api_boundary
    return fun


def include_filename(filename: str) -> bool:
    """Whether a frame of `filename` would be shown: not under a registered path."""
    import os
    return not any(os.path.commonpath([os.path.abspath(filename), os.path.abspath(path)]) ==
                   os.path.abspath(path) for path in _exclude_paths)


def include_frame(frame) -> bool:
    return include_filename(frame.f_code.co_filename)

"""The ``jax.ref`` namespace: mutable array references and their operations."""
from meshsim._src.ref import (  # noqa: F401
    AbstractRef,
    Ref,
    addupdate,
    empty_ref,
    free_ref,
    freeze,
    get,
    new_ref,
    set,
    swap,
)

"""64-bit mode in tests, for meshsim and for real JAX (the oracle) alike."""
import contextlib


@contextlib.contextmanager
def x64(*libraries, enabled=True):
    """Inside the block, `jax_enable_x64` is `enabled` in each of `libraries` (modules with
    JAX's `config`: meshsim, real jax); afterwards each flag is what it was before, even when
    the block raised."""
    before = [lib.config.jax_enable_x64 for lib in libraries]
    for lib in libraries:
        lib.config.update("jax_enable_x64", enabled)
    try:
        yield
    finally:
        for lib, was in zip(libraries, before):
            lib.config.update("jax_enable_x64", was)

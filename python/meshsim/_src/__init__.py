"""meshsim's implementation modules."""


def __getattr__(name: str):
    # Under the `jax` alias, `import jax._src.X as m` imports `jax._src.X` (the alias answers it
    # from jax_internals_compat) and then reads `_src`, then `X`, as attributes starting from
    # `jax`, which is meshsim: `jax._src` read that way is this package. Its missing
    # attributes are the compat modules imported under those names. Only while the alias is in
    # place: with real JAX imported beside meshsim, `jax._src.core` is JAX's own module, and
    # `from meshsim._src import core` must not resolve to it before meshsim's is imported.
    import sys
    if sys.modules.get("jax") is not sys.modules.get("meshsim"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = sys.modules.get(f"jax._src.{name}")
    if module is not None and sys.modules.get("jax._src") is not None:
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The few JAX internals that libraries written for JAX import, as meshsim implements them.

Libraries such as flax reach past JAX's public API into `jax._src`, `jax.extend`,
`jax.interpreters` and `jax.experimental.hijax`. Under the `jax` alias
(`meshsim._src.jax_alias`) every such import resolves to the module of the same path
below this package: `jax._src.state.types` is `jax_internals_compat._src.state.types`.
This package holds only names a library was seen to use, each implemented for what that
library uses it for; README's "JAX programs and libraries unchanged" lists them. A name
meshsim cannot honour (checkify, hijax primitives) imports, and raises
NotImplementedError naming itself when used. A module not here fails to import with
ModuleNotFoundError naming the `jax.` path."""

# The `jax.` paths answered from this package: these roots and everything below them.
INTERNAL_ROOTS = ("jax._src", "jax.extend", "jax.interpreters", "jax.api_util",
                  "jax.experimental.hijax")


def is_internal(jax_name: str) -> bool:
    return any(jax_name == root or jax_name.startswith(root + ".") for root in INTERNAL_ROOTS)


def compat_name(jax_name: str) -> str:
    """`jax._src.state.types` -> `meshsim._src.jax_internals_compat._src.state.types`."""
    return __name__ + jax_name[len("jax"):]


def unsupported(name: str, why: str) -> NotImplementedError:
    """The error a JAX internal meshsim imports but cannot honour raises when used."""
    return NotImplementedError(f"{name} is a JAX internal that meshsim does not implement: {why}")

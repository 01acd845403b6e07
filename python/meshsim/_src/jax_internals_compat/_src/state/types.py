"""`jax._src.state.types`: `AbstractRef`, the type of a `jax.Ref` (`jax.typeof(ref)`)."""
from meshsim._src.ref import AbstractRef  # noqa: F401

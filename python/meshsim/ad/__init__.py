"""The ``jax.ad`` namespace: where `vjp(...)[1].with_refs(...)` puts each cotangent."""
from meshsim._src.ad import DidntWant, DontWant, GradRef, GradValue  # noqa: F401

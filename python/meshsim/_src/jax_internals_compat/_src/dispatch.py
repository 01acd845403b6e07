"""`jax._src.dispatch`: `wait_for_tokens`, which waits for ordered effects to finish
(meshsim runs effects in program order, so there is nothing to wait for)."""


def wait_for_tokens() -> None:
    return None

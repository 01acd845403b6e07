"""meshsim.test_util (as jax.test_util): derivative checks against finite differences."""
from meshsim._src.gradient_checks import check_grads, check_jvp, check_vjp  # noqa: F401

"""meshsim.nn: activations, softmax, one_hot, attention and initializers (as jax.nn)."""
from meshsim._src.nn import *  # noqa: F401,F403
from meshsim._src.nn import __all__  # noqa: F401
from meshsim.nn import initializers  # noqa: F401,E402
from meshsim._src.nn_scaled import scaled_dot_general, scaled_matmul  # noqa: F401,E402

"""`jax.extend` under meshsim: the submodules a library was seen to use."""
from . import core, ifrt_programs, linear_util, source_info_util  # noqa: F401

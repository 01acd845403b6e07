"""`jax.stages`: the stages of jit's ahead-of-time path (trace, lower, compile)."""
from meshsim._src.api import PjitFunction as Wrapped  # noqa: F401
from meshsim._src.stages import (  # noqa: F401
    ArgInfo, Compiled, CompiledMemoryStats, Lowered, Stage, Traced)

# The options `Lowered.compile(compiler_options=...)` and `jit(compiler_options=...)` take.
CompilerOptions = dict[str, "str | bool"]

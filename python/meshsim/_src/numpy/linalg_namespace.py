"""NumPy's linalg namespace (what `meshsim.numpy.linalg` re-exports): norms and matrix functions."""
from meshsim._src.numpy.matrix import *  # noqa: F401,F403
from meshsim._src.numpy.decompositions import *  # noqa: F401,F403,E402

__all__ = [name for name in dir() if not name.startswith("_")]

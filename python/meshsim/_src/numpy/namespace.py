"""The NumPy API as one namespace: what `meshsim.numpy` re-exports.

Implementation modules that compose many NumPy functions import it (lazily, inside the
function, when the module is itself part of it) as `jnp`, so no module under `_src`
reaches up into the public packages (scripts/check_layers.py checks)."""
from meshsim._src.numpy.dtypes import *  # noqa: F401,F403
from meshsim._src.numpy.creation import *  # noqa: F401,F403
from meshsim._src.numpy.ufuncs import *  # noqa: F401,F403
from meshsim._src.numpy.reductions import *  # noqa: F401,F403
from meshsim._src.numpy.structural import *  # noqa: F401,F403
from meshsim._src.numpy.linalg import *  # noqa: F401,F403
from meshsim._src.numpy.indexing import *  # noqa: F401,F403
from meshsim._src.numpy.selection import *  # noqa: F401,F403
from meshsim._src.numpy.sorting import *  # noqa: F401,F403
from meshsim._src.numpy.setops import *  # noqa: F401,F403
from meshsim._src.numpy.polynomial import *  # noqa: F401,F403
from meshsim._src.numpy.vectorize import *  # noqa: F401,F403
from meshsim._src.numpy.windows import *  # noqa: F401,F403
from meshsim._src.numpy.construction import *  # noqa: F401,F403
from meshsim._src.numpy.functional import *  # noqa: F401,F403
from meshsim._src.numpy.indexing import _getitem  # noqa: F401  (Array.__getitem__)
from meshsim._src.core import Array as ndarray  # noqa: F401
from meshsim._src.numpy import fft, linalg_namespace as linalg  # noqa: F401,E402
from meshsim._src.numpy.fitting_io import *  # noqa: F401,F403,E402
from meshsim._src.numpy.histograms import *  # noqa: F401,F403,E402
# jnp.add, jnp.multiply, ... as ufunc objects (with .reduce, .at, ...) replace the plain functions.
from meshsim._src.numpy.ufunc_objects import *  # noqa: F401,F403,E402

# The public names; the subnamespaces fft and linalg are meshsim.numpy's own subpackages there.
__all__ = [name for name in dir() if not name.startswith("_") and name not in ("fft", "linalg")]

"""meshsim.numpy: the NumPy API on meshsim arrays (as jax.numpy)."""
from meshsim._src.numpy.dtypes import *  # noqa: F401,F403
from meshsim._src.numpy.creation import *  # noqa: F401,F403
from meshsim._src.numpy.ufuncs import *  # noqa: F401,F403
from meshsim._src.numpy.reductions import *  # noqa: F401,F403
from meshsim._src.numpy.structural import *  # noqa: F401,F403
from meshsim._src.numpy.linalg import *  # noqa: F401,F403
from meshsim._src.numpy.indexing import *  # noqa: F401,F403
from meshsim._src.numpy.sorting import *  # noqa: F401,F403
from meshsim._src.numpy.setops import *  # noqa: F401,F403
from meshsim._src.numpy.polynomial import *  # noqa: F401,F403
from meshsim._src.numpy.vectorize import *  # noqa: F401,F403
from meshsim._src.numpy.windows import *  # noqa: F401,F403
from meshsim._src.numpy.construction import *  # noqa: F401,F403
from meshsim._src.numpy.functional import *  # noqa: F401,F403
from meshsim._src.numpy.indexing import _getitem  # noqa: F401  (Array.__getitem__)
from meshsim._src.core import Array as ndarray  # noqa: F401
from meshsim.numpy import fft, linalg  # noqa: F401,E402
from meshsim._src.numpy.fitting_io import *  # noqa: F401,F403,E402
from meshsim._src.numpy.histograms import *  # noqa: F401,F403,E402

"""The lax API as one namespace: what `meshsim.lax` re-exports.

Implementation modules that compose many lax operations import it (lazily, inside the
function, when the module is itself part of it) as `lax`, so no module under `_src`
reaches up into the public packages (scripts/check_layers.py checks)."""
from meshsim._src.lax.elementwise import *  # noqa: F401,F403
from meshsim._src.lax.structural import *  # noqa: F401,F403
from meshsim._src.lax.reduction import *  # noqa: F401,F403
from meshsim._src.lax.linalg import *  # noqa: F401,F403
from meshsim._src.lax.convolution import *  # noqa: F401,F403
from meshsim._src.lax.fft import *  # noqa: F401,F403
from meshsim._src.lax.indexing import *  # noqa: F401,F403
from meshsim._src.lax.sorting import *  # noqa: F401,F403
from meshsim._src.lax.parallel import *  # noqa: F401,F403
from meshsim._src.lax.control_flow import *  # noqa: F401,F403
from meshsim._src.ad import stop_gradient  # noqa: F401,E402
from meshsim._src.sharding.explicit import with_sharding_constraint  # noqa: F401
from meshsim._src.lax.precision import DotAlgorithmPreset, Precision  # noqa: F401,E402
from meshsim._src.lax.composed import *  # noqa: F401,F403,E402
from meshsim._src.lax.special import *  # noqa: F401,F403,E402
from meshsim._src.lax import decompositions as linalg  # noqa: F401,E402  (jax.lax.linalg)
from meshsim._src.lax.implicit_solves import *  # noqa: F401,F403,E402
from meshsim._src.lax.gather_scatter import *  # noqa: F401,F403,E402
from meshsim._src.lax.bit_arithmetic import *  # noqa: F401,F403,E402

# The public names; the subnamespace linalg is meshsim.lax's own subpackage there.
__all__ = [name for name in dir() if not name.startswith("_") and name != "linalg"]

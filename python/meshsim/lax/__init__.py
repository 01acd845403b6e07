"""meshsim.lax: the primitive operations (as jax.lax)."""
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
from meshsim.lax import linalg  # noqa: F401,E402  (jax.lax.linalg)
from meshsim._src.lax.implicit_solves import *  # noqa: F401,F403,E402
from meshsim._src.lax.gather_scatter import *  # noqa: F401,F403,E402
from meshsim._src.lax.bit_arithmetic import *  # noqa: F401,F403,E402

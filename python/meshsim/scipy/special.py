"""meshsim.scipy.special (as jax.scipy.special)."""
from meshsim._src.scipy.special import *  # noqa: F401,F403
from meshsim._src.scipy.special_series import *  # noqa: F401,F403,E402
from meshsim._src.scipy.special_integrals import *  # noqa: F401,F403,E402
from meshsim._src.scipy.special_hypergeometric import *  # noqa: F401,F403,E402
from meshsim._src.scipy.special_harmonics import *  # noqa: F401,F403,E402

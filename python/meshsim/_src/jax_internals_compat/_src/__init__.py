"""`jax._src` under meshsim: only the submodules a library was seen to import (see the
package above). meshsim's own internals are `meshsim._src`, a different module."""

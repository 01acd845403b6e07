"""The debug_nans / debug_infs checks: a nan (or inf) in what an operation or a
jitted function returns raises FloatingPointError naming the operation. A jitted
function is run again op by op first (as JAX calls the "de-optimized" function),
so that the error names the operation that produced the value."""
from __future__ import annotations

import numpy as np

from meshsim import _core
from meshsim._src import tree_util
from meshsim._src.config import config, disable_jit


def _invalid_kind(outs) -> str | None:
    check_nans, check_infs = config._values["jax_debug_nans"], config._values["jax_debug_infs"]
    for x in outs:
        if type(x) is not _core.ArrayImpl or x.dtype.kind not in "fc":
            continue
        values = np.asarray(x.to_numpy())
        if check_nans and np.isnan(values).any():
            return "nan"
        if check_infs and np.isinf(values).any():
            return "inf"
    return None


def check_operation(name: str, outs) -> None:
    """Raises if an eagerly applied operation produced an invalid value."""
    kind = _invalid_kind(outs)
    if kind is not None:
        # Each eager operation is a compiled program in JAX: its notice (which says nan for
        # infs too) is printed as well.
        print("Invalid nan value encountered in the output of a jax.jit function. "
              "Calling the de-optimized version.")
        raise FloatingPointError(f"invalid value ({kind}) encountered in {name}")


def checked_jit_call(call, fun, name: str, args, kwargs):
    """`call(*args, **kwargs)`; an invalid value in its results runs `fun` op by op,
    which raises at the operation that produced it."""
    out = call(*args, **kwargs)
    kind = _invalid_kind(tree_util.tree_leaves(out))
    if kind is None:
        return out
    print("Invalid nan value encountered in the output of a jax.jit function. "
          "Calling the de-optimized version.")
    with disable_jit():
        fun(*args, **kwargs)
    raise FloatingPointError(
        f"invalid value ({kind}) encountered in jit({name}), but the de-optimized function (the "
        "function without `jit`) did not produce it: the value may come from a nan/inf literal "
        "among the function's inputs or outputs.")

"""NumPy-style dtype promotion and broadcasting on top of lax's strict ops."""
from __future__ import annotations

import numpy as np

import warnings

from meshsim._src import core
from meshsim._src.config import config
from meshsim._src import dtype_kinds


# Defined in core, the layer below, which needs it to convert lists.
result_type = core.result_type


def broadcast_to_shape(x, shape: tuple[int, ...]):
    """Broadcasts `x` to `shape` (a zero-copy view in the kernel)."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    if len(x.shape) > len(shape):
        raise ValueError(f"Incompatible shapes for broadcasting: {x.shape} and requested shape {shape}")
    lead = len(shape) - len(x.shape)
    for i, d in enumerate(x.shape):
        if d != 1 and d != shape[lead + i]:
            raise ValueError(f"Incompatible shapes for broadcasting: {x.shape} and requested shape {shape}")
    return core.bind1("broadcast_in_dim", x, shape=shape,
                      broadcast_dimensions=tuple(range(lead, len(shape))))


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError("Incompatible shapes for broadcasting: shapes=[" +
                             ", ".join(str(tuple(s)) for s in shapes) + "]")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _convert(x, dtype, weak):
    """`x` as `dtype`. A concrete scalar converts on the host, as JAX converts
    Python and NumPy scalars: a traced program gets the constant itself (a
    literal, `2.0:f32[]`), not a conversion of it. A committed scalar converts where it
    lives, so that what is computed from it stays there."""
    x = core.asarray_value(x)
    if isinstance(x, core.Array) and x.ndim == 0 and (x.dtype != dtype or x.weak_type != weak) \
            and not x.committed:
        return core.Array.from_numpy(x.to_numpy().astype(dtype), weak_type=weak)
    return core.convert_element_type(x, dtype, weak)


def _check_rank_promotion(shapes) -> None:
    """The jax_numpy_rank_promotion flag: 'warn' or 'raise' when operands of different
    ranks (scalars aside) would be broadcast."""
    mode = config._values["jax_numpy_rank_promotion"]
    if mode == "allow" or len({len(s) for s in shapes if s}) < 2:
        return
    listed = " ".join(str(tuple(s)) for s in shapes)
    more = " For more information, see https://docs.jax.dev/en/latest/rank_promotion_warning.html."
    if mode == "raise":
        raise ValueError(f"Operands could not be broadcast together on shapes {listed} and with the "
                         f"config option jax_numpy_rank_promotion='raise'.{more}")
    warnings.warn(f"Following NumPy automatic rank promotion on shapes {listed}. Set the "
                  "jax_numpy_rank_promotion config option to 'allow' to disable this warning;" + more,
                  stacklevel=4)


def _convert_and_broadcast(args, dtype, weak, keep_scalars=False):
    vals = [_convert(a, dtype, weak) for a in args]
    _check_rank_promotion([v.shape for v in vals])
    try:
        shape = broadcast_shapes(*(v.shape for v in vals))
    except ValueError:
        # As in JAX, operands of one rank are left to the lax op, which raises
        # TypeError naming itself and the shapes ("add got incompatible shapes
        # for broadcasting: (2, 3), (4, 3)."); differing ranks raise ValueError here.
        if len({v.ndim for v in vals if v.ndim}) == 1:
            return vals
        raise
    # As JAX promotes shapes: operands of several ranks are broadcast to the common
    # rank only, size-1 dims kept (`f32[1,8]`), and the lax op broadcasts size-1 dims
    # itself; scalars stay scalars where the op takes them.
    ranks = {v.ndim for v in vals if v.ndim}
    return [(v if keep_scalars else broadcast_to_shape(v, shape)) if v.ndim == 0
            else broadcast_to_rank(v, len(shape)) if len(ranks) > 1 else v for v in vals]


def broadcast_to_rank(x, rank: int):
    """`x` with size-1 dims put in front up to `rank` (JAX's broadcast_to_rank)."""
    lead = rank - x.ndim
    if lead == 0:
        return x
    return core.bind1("broadcast_in_dim", x, shape=(1,) * lead + tuple(x.shape),
                      broadcast_dimensions=tuple(range(lead, rank)))


def promote_args(*args, keep_scalars: bool = False):
    """Converts operands to one dtype and one broadcast shape, as jnp ufuncs do;
    with `keep_scalars`, scalar operands stay scalars (for lax binary operations,
    which broadcast them)."""
    return _convert_and_broadcast(args, *result_type(*args), keep_scalars)


def promote_args_inexact(*args, keep_scalars: bool = False):
    """As promote_args, but integers and bools promote to the default float
    (keeping the weak-type flag: `jnp.sin(2)` is weak, `jnp.sin(int8_array)` is not)."""
    dtype, weak = result_type(*args)
    if not dtype_kinds.issubdtype(dtype, np.inexact):
        dtype = core.canonicalize_dtype(np.float64)
    return _convert_and_broadcast(args, dtype, weak, keep_scalars)


def promote_args_numeric(*args, keep_scalars: bool = False):
    """As promote_args, but bools promote to the default integer."""
    dtype, weak = result_type(*args)
    if dtype == np.bool_:
        dtype = core.canonicalize_dtype(np.int64)
    return _convert_and_broadcast(args, dtype, weak, keep_scalars)


def promote_dtypes(*args):
    """Converts operands to their promoted dtype, leaving their shapes alone."""
    dtype, weak = result_type(*args)
    return [core.convert_element_type(core.asarray_value(a), dtype, weak) for a in args]


def promote_dtypes_inexact(*args):
    """As promote_dtypes, with integers and bools promoted to the default float."""
    dtype, weak = result_type(*args)
    if not dtype_kinds.issubdtype(dtype, np.inexact):
        dtype = core.canonicalize_dtype(np.float64)
    return [core.convert_element_type(core.asarray_value(a), dtype, weak) for a in args]

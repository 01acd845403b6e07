"""meshsim.lax: dot_general and the products built on it (as jax.lax).

The primitive's `dimension_numbers` parameter is JAX's
((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)) flattened to four
tuples, which is how the C++ rule reads it. `precision` is accepted and
ignored: every product runs at full precision here."""
from __future__ import annotations

import dataclasses
import operator

from meshsim._src import core
from meshsim._src.lax.precision import canonicalize_precision
from meshsim._src.sharding import explicit

__all__ = ["dot_general", "dot", "batch_matmul", "ragged_dot", "ragged_dot_general",
           "RaggedDotDimensionNumbers"]


def _index_tuple(dims, what: str) -> tuple[int, ...]:
    try:
        return tuple(operator.index(d) for d in dims)
    except TypeError:
        raise TypeError(f"dot_general {what} must be a sequence of ints, got {dims!r}") from None


def _flat_dimension_numbers(dimension_numbers) -> tuple[tuple[int, ...], ...]:
    try:
        (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    except (TypeError, ValueError):
        raise TypeError("dot_general dimension_numbers must be ((lhs_contracting, rhs_contracting), "
                        f"(lhs_batch, rhs_batch)), got {dimension_numbers!r}") from None
    return (_index_tuple(lhs_contract, "lhs_contracting"), _index_tuple(rhs_contract, "rhs_contracting"),
            _index_tuple(lhs_batch, "lhs_batch"), _index_tuple(rhs_batch, "rhs_batch"))


def _dot_general_shape(lhs_shape, rhs_shape, dims):
    """The result's shape (batch, lhs free, rhs free), or None for dimension numbers the
    primitive's own check refuses."""
    lhs_contract, rhs_contract, lhs_batch, rhs_batch = dims
    if not (all(0 <= d < len(lhs_shape) for d in lhs_contract + lhs_batch)
            and all(0 <= d < len(rhs_shape) for d in rhs_contract + rhs_batch)):
        return None
    lhs_free = [d for d in range(len(lhs_shape)) if d not in lhs_contract + lhs_batch]
    rhs_free = [d for d in range(len(rhs_shape)) if d not in rhs_contract + rhs_batch]
    return tuple([lhs_shape[d] for d in lhs_batch] + [lhs_shape[d] for d in lhs_free]
                 + [rhs_shape[d] for d in rhs_free])


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None,
                out_sharding=None):
    canonicalize_precision(precision)  # checked as JAX checks it; CPU computes float32 dots fully
    preferred = None if preferred_element_type is None else core.canonicalize_dtype(preferred_element_type)
    lhs, rhs = core.asarray_value(lhs), core.asarray_value(rhs)
    dims = _flat_dimension_numbers(dimension_numbers)
    params = dict(dimension_numbers=dims, precision=None, preferred_element_type=preferred)
    explicit.check_explicit_axes(out_sharding, "dot_general")
    if out_sharding is None:
        return core.bind1("dot_general", lhs, rhs, **params)
    if lhs.aval.mesh is None and rhs.aval.mesh is None:  # nothing sharded: lay out the result
        return explicit.reshard(core.bind1("dot_general", lhs, rhs, **params,
                                           **explicit.out_unreduced_param(out_sharding)),
                                out_sharding)
    ndim = lhs.ndim + rhs.ndim - 2 * len(dims[0]) - len(dims[2])
    shape = _dot_general_shape(lhs.shape, rhs.shape, dims)
    if shape is not None:
        explicit.check_out_divisible(out_sharding, shape)
    return core.bind1("dot_general", lhs, rhs, **params,
                      out_sharding=explicit.out_sharding_param(out_sharding, ndim, pending_ok=True),
                      **explicit.out_unreduced_param(out_sharding))


def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None,
        out_sharding=None):
    lhs, rhs = core.asarray_value(lhs), core.asarray_value(rhs)
    if dimension_numbers is None:
        if not (1 <= lhs.ndim <= 2 and 1 <= rhs.ndim <= 2 and lhs.shape[-1] == rhs.shape[0]):
            raise ValueError("jax.lax.dot: dimension_numbers must be specified when not performing "
                             "simple un-batched matrix-matrix, matrix-vector, or vector-vector "
                             f"products; got lhs_shape={lhs.shape} rhs_shape={rhs.shape}")
        dimension_numbers = (((lhs.ndim - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type,
                       out_sharding=out_sharding)


def batch_matmul(lhs, rhs, precision=None):
    """Matrix products over the last two dimensions, the leading ones batched."""
    lhs, rhs = core.asarray_value(lhs), core.asarray_value(rhs)
    if min(lhs.ndim, rhs.ndim) < 2:
        raise ValueError(f"Arguments to batch_matmul must be at least 2D, got {lhs.ndim}, {rhs.ndim}")
    if lhs.ndim != rhs.ndim:
        raise ValueError(f"Arguments to batch_matmul must have same ndim, got {lhs.ndim}, {rhs.ndim}")
    batch = tuple(range(lhs.ndim - 2))
    return dot_general(lhs, rhs, (((lhs.ndim - 1,), (rhs.ndim - 2,)), (batch, batch)), precision)


@dataclasses.dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """Describes ragged, group, and dot dimensions for ragged dot general (as JAX's)."""
    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: tuple
    rhs_group_dimensions: tuple

    def __init__(self, dot_dimension_numbers, lhs_ragged_dimensions, rhs_group_dimensions):
        object.__setattr__(self, "dot_dimension_numbers",
                           tuple(tuple(map(tuple, t)) for t in dot_dimension_numbers))
        object.__setattr__(self, "lhs_ragged_dimensions", tuple(lhs_ragged_dimensions))
        object.__setattr__(self, "rhs_group_dimensions", tuple(rhs_group_dimensions))


_BASIC_RAGGED_DOT_DIMENSION_NUMBERS = RaggedDotDimensionNumbers(
    dot_dimension_numbers=(([1], [1]), ([], [])), lhs_ragged_dimensions=[0], rhs_group_dimensions=[0])


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, out_sharding=None):
    """Ragged matrix multiplication over JAX's three modes (lhs ragged dimension
    non-contracting, contracting or batch); `precision` is accepted and ignored."""
    if not isinstance(ragged_dot_dimension_numbers, RaggedDotDimensionNumbers):
        raise TypeError("ragged_dot_general ragged_dot_dimension_numbers must be a "
                        f"RaggedDotDimensionNumbers, got {ragged_dot_dimension_numbers!r}")
    if group_offset is not None:
        raise NotImplementedError("Unimplemented group_offset support.")
    dn = ragged_dot_dimension_numbers
    dims = _flat_dimension_numbers(dn.dot_dimension_numbers) + (
        _index_tuple(dn.lhs_ragged_dimensions, "lhs_ragged_dimensions"),
        _index_tuple(dn.rhs_group_dimensions, "rhs_group_dimensions"))
    preferred = None if preferred_element_type is None else core.canonicalize_dtype(preferred_element_type)
    lhs, rhs, group_sizes = (core.asarray_value(v) for v in (lhs, rhs, group_sizes))
    out = core.bind1("ragged_dot_general", lhs, rhs, group_sizes, group_offset=None, out_sharding=None,
                     precision=None, preferred_element_type=preferred,
                     ragged_dot_dimension_numbers=dims)
    return out if out_sharding is None else explicit.reshard(out, out_sharding)


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None, group_offset=None,
               out_sharding=None):
    """Ragged matrix multiplication: lhs (m, k), rhs (g, k, n), group_sizes (g,) ->
    (m, n), rows of group i multiplied by rhs[i]; rows past sum(group_sizes) are zero."""
    return ragged_dot_general(lhs, rhs, group_sizes, _BASIC_RAGGED_DOT_DIMENSION_NUMBERS, precision,
                              preferred_element_type, group_offset, out_sharding)

"""meshsim.numpy: products of arrays — matmul, dot, vdot, inner, outer, tensordot, einsum.

Each is one dot_general (plus zero-copy squeezes and transposes) where JAX's
is, with JAX's dtype rule: operands keep their types, the product is computed
in their promoted type (or `preferred_element_type`)."""
from __future__ import annotations

import string
from collections import Counter

import numpy as np

from meshsim._src import api, core
from meshsim._src.lax import linalg as lax_linalg
from meshsim._src.lax import reduction as lax_reduction
from meshsim._src.lax import structural as lax_structural
from meshsim._src.lax.structural import canonicalize_axis
from meshsim._src.numpy import selection, ufuncs
from meshsim._src.numpy.creation import user_dtype
from meshsim._src.numpy.promotion import promote_dtypes, result_type

__all__ = ["matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum", "kron", "cross", "trace", "matvec",
           "vecmat", "vecdot"]


def _operands(name: str, *args):
    for i, a in enumerate(args):
        if isinstance(a, (list, tuple)):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(a)} at position {i}.")
    return [core.asarray_value(a) for a in args]


def _output_type(preferred_element_type, *operands) -> tuple[np.dtype, bool]:
    """The dtype (and weak-type flag) of a product: promoted, or as preferred."""
    if preferred_element_type is None:
        return result_type(*operands)
    return user_dtype(preferred_element_type), False


def _dot_general(a, b, dimension_numbers, precision, dtype, weak, out_sharding=None):
    out = lax_linalg.dot_general(a, b, dimension_numbers, precision, preferred_element_type=dtype,
                                 out_sharding=out_sharding)
    return core.convert_element_type(out, dtype, weak)


@api.jitted_when_traced(static_argnames=('precision', 'preferred_element_type', 'out_sharding'), inline=True)
def dot(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    a, b = _operands("dot", a, b)
    dtype, weak = _output_type(preferred_element_type, a, b)
    if a.ndim == 0 or b.ndim == 0:
        contract = ((), ())
    else:
        contract = ((a.ndim - 1,), (0 if b.ndim == 1 else b.ndim - 2,))
    return _dot_general(a, b, (contract, ((), ())), precision, dtype, weak, out_sharding)


def _spec_entries(out_sharding, ndim: int):
    """The entries of an `out_sharding` (NamedSharding or PartitionSpec), padded to `ndim`."""
    from meshsim._src.sharding.partition_spec import PartitionSpec
    spec = out_sharding if isinstance(out_sharding, PartitionSpec) else out_sharding.spec
    return list(spec.partitions) + [None] * (ndim - len(spec))


def _with_spec(out_sharding, entries):
    """`out_sharding` with its spec's entries replaced by `entries` (its pending axes kept)."""
    from meshsim._src.sharding.partition_spec import PartitionSpec
    old = out_sharding if isinstance(out_sharding, PartitionSpec) else out_sharding.spec
    spec = PartitionSpec(*entries, unreduced=old.unreduced, reduced=old.reduced)
    return spec if isinstance(out_sharding, PartitionSpec) else out_sharding.update(spec=spec)


@api.jitted_when_traced(static_argnames=('precision', 'preferred_element_type', 'out_sharding'), inline=True)
def matmul(a, b, *, precision=None, preferred_element_type=None, out_sharding=None):
    """Matrix products over the last two axes, leading axes broadcast (size-1 axes
    become free dimensions of dot_general rather than being materialised)."""
    a, b = _operands("matmul", a, b)
    for i, x in enumerate((a, b)):
        if x.ndim < 1:
            raise ValueError(f"matmul input operand {i} must have ndim at least 1, but it has ndim {x.ndim}")
    dtype, weak = _output_type(preferred_element_type, a, b)
    a_is_mat, b_is_mat = a.ndim > 1, b.ndim > 1
    a_batch = a.shape[:-2] if a_is_mat else ()
    b_batch = b.shape[:-2] if b_is_mat else ()
    nbatch = max(len(a_batch), len(b_batch))
    a_batch = (None,) * (nbatch - len(a_batch)) + a_batch
    b_batch = (None,) * (nbatch - len(b_batch)) + b_batch

    a_squeeze, b_squeeze, both_squeeze = [], [], []
    a_batch_dims, b_batch_dims = [], []
    # Output position of each dimension, in the order dot_general emits them.
    idx_batch, idx_a_free, idx_b_free = [], [], []
    for i, (ba, bb) in enumerate(zip(a_batch, b_batch)):
        if ba is None:
            idx_b_free.append(i)
        elif bb is None:
            idx_a_free.append(i)
        elif ba == 1 and bb == 1:
            a_squeeze.append(len(idx_batch) + len(idx_a_free) + len(a_squeeze))
            b_squeeze.append(len(idx_batch) + len(idx_b_free) + len(b_squeeze))
            both_squeeze.append(i)
        elif ba == 1:
            idx_b_free.append(i)
            a_squeeze.append(len(idx_batch) + len(idx_a_free) + len(a_squeeze))
        elif bb == 1:
            idx_a_free.append(i)
            b_squeeze.append(len(idx_batch) + len(idx_b_free) + len(b_squeeze))
        elif ba == bb:
            a_batch_dims.append(len(idx_batch) + len(idx_a_free))
            b_batch_dims.append(len(idx_batch) + len(idx_b_free))
            idx_batch.append(i)
        else:
            raise ValueError(f"Incompatible types for matmul arguments: {core.typeof(a).str_short()} and "
                             f"{core.typeof(b).str_short()}")
    if a_is_mat:
        idx_a_free.append(nbatch)
    if b_is_mat:
        idx_b_free.append(nbatch + a_is_mat)
    perm = tuple(int(p) for p in np.argsort(idx_batch + idx_a_free + idx_b_free))

    a = lax_structural.squeeze(a, a_squeeze)
    b = lax_structural.squeeze(b, b_squeeze)
    contract = ((a.ndim - 1,), (b.ndim - 1 - b_is_mat,))
    dg_sharding = None
    if out_sharding is not None:  # the result's spec, in dot_general's dimension order
        final = [e for i, e in enumerate(_spec_entries(out_sharding, len(perm) + len(both_squeeze)))
                 if i not in both_squeeze]
        entries = [None] * len(perm)
        for i, p in enumerate(perm):
            entries[p] = final[i]
        dg_sharding = _with_spec(out_sharding, entries)
    out = _dot_general(a, b, (contract, (tuple(a_batch_dims), tuple(b_batch_dims))), precision, dtype,
                       weak, dg_sharding)
    if perm != tuple(range(len(perm))):
        out = lax_structural.transpose(out, perm)
    return lax_structural.expand_dims(out, both_squeeze) if both_squeeze else out


@api.jitted_when_traced(static_argnames=('precision', 'preferred_element_type'), inline=True)
def vdot(a, b, *, precision=None, preferred_element_type=None):
    a, b = _operands("vdot", a, b)
    if np.issubdtype(a.dtype, np.complexfloating):  # the first operand is conjugated
        a = ufuncs.conj(a)
    return dot(lax_structural.reshape(a, (a.size,)), lax_structural.reshape(b, (b.size,)),
               precision=precision, preferred_element_type=preferred_element_type)


@api.jitted_when_traced(static_argnames=('precision', 'preferred_element_type'), inline=True)
def inner(a, b, *, precision=None, preferred_element_type=None):
    a, b = _operands("inner", a, b)
    if a.ndim == 0 or b.ndim == 0:
        if preferred_element_type is not None:
            a, b = (core.convert_element_type(x, user_dtype(preferred_element_type)) for x in (a, b))
        return ufuncs.multiply(a, b)
    return tensordot(a, b, (-1, -1), precision=precision, preferred_element_type=preferred_element_type)


@api.jitted_when_traced(inline=True)
def outer(a, b, out=None):
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.outer is not supported.")
    a, b = _operands("outer", a, b)
    dtype, weak = result_type(a, b)
    a, b = (core.convert_element_type(x, dtype, weak) for x in (a, b))
    return ufuncs.multiply(lax_structural.reshape(a, (a.size, 1)), lax_structural.reshape(b, (1, b.size)))


def _tensordot_axes(axes, a_ndim: int, b_ndim: int, a_shape, b_shape):
    if type(axes) is int:
        if axes > min(a_ndim, b_ndim):
            raise TypeError(f"Number of tensordot axes (axes {axes}) exceeds input ranks ({a_shape} and {b_shape})")
        return tuple(range(a_ndim - axes, a_ndim)), tuple(range(axes))
    if isinstance(axes, (tuple, list)) and len(axes) == 2:
        ax1, ax2 = axes
        if isinstance(ax1, int) and isinstance(ax2, int):
            return (canonicalize_axis(ax1, a_ndim),), (canonicalize_axis(ax2, b_ndim),)
        if isinstance(ax1, (tuple, list)) and isinstance(ax2, (tuple, list)):
            if len(ax1) != len(ax2):
                raise TypeError(f"tensordot requires axes lists to have equal length, got {ax1} and {ax2}.")
            return (tuple(canonicalize_axis(i, a_ndim) for i in ax1),
                    tuple(canonicalize_axis(i, b_ndim) for i in ax2))
        raise TypeError(f"tensordot requires both axes lists to be either ints, tuples or lists, got {ax1} and {ax2}")
    raise TypeError("tensordot axes argument must be an int, a pair of ints, or a pair of lists/tuples of ints.")


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    a, b = _operands("tensordot", a, b)
    dtype, weak = _output_type(preferred_element_type, a, b)
    contract = _tensordot_axes(axes, a.ndim, b.ndim, a.shape, b.shape)
    return _dot_general(a, b, (contract, ((), ())), precision, dtype, weak)


# --- einsum ----------------------------------------------------------------------

def _interleaved(args) -> tuple[str, list]:
    """einsum(x, [0, 1], y, [1, 2], [0, 2]) as a subscripts string and operands."""
    def letters(sublist):
        return "".join("..." if s is Ellipsis else string.ascii_letters[s] for s in sublist)
    operands, terms = list(args[0::2]), [letters(s) for s in args[1::2]]
    output = letters(operands.pop()) if len(args) % 2 else None
    spec = ",".join(terms[:len(operands)])
    return (spec if output is None else f"{spec}->{output}"), operands


def _expand_ellipses(inputs: list[str], ndims: list[int], output: str | None, spare: list[str]):
    """Subscripts with each '...' replaced by letters for the dimensions it covers
    (right-aligned, so operands broadcast), and the output made explicit."""
    expanded, widest = [], 0
    for i, (term, ndim) in enumerate(zip(inputs, ndims)):
        n = ndim - len(term.replace("...", ""))
        if "..." in term and n >= 0:
            term = term.replace("...", "".join(spare[len(spare) - n:]))
            widest = max(widest, n)
        # Any character but the separators is a label, as in JAX's parser ("3dkh")
        if len(term) != ndim or any(c in ".-> " for c in term):
            raise ValueError(f"Einstein sum subscript '{inputs[i]}' does not contain the correct number "
                             f"of indices for operand {i}.")
        expanded.append(term)
    broadcast = "".join(spare[len(spare) - widest:])
    if output is None:
        counts = Counter("".join(expanded))
        return expanded, broadcast + "".join(sorted(c for c, k in counts.items()
                                                    if k == 1 and c not in broadcast))
    output = output.replace("...", broadcast)
    for c in output:
        if output.count(c) > 1:
            raise ValueError(f"Output character '{c}' appeared more than once in the output.")
        if not any(c in term for term in expanded):
            raise ValueError(f"Output character '{c}' did not appear in the input")
    return expanded, output


def _parse(subscripts: str, ndims: list[int]) -> tuple[list[str], str]:
    subscripts = subscripts.replace(" ", "")
    lhs, arrow, output = subscripts.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(ndims):
        raise ValueError(f"Number of einsum subscripts, {len(inputs)}, must be equal to the number of "
                         f"operands, {len(ndims)}.")
    spare = [c for c in string.ascii_letters if c not in subscripts][:max(ndims, default=0)]
    return _expand_ellipses(inputs, ndims, output if arrow else None, spare)


def _take_diagonals(x, term: str, operand: int):
    """A label repeated within one operand selects its diagonal."""
    while len(set(term)) != len(term):
        c = next(c for c in term if term.count(c) > 1)
        p = term.index(c)
        q = term.index(c, p + 1)
        if x.shape[p] != x.shape[q]:
            raise ValueError(f"Size of label '{c}' for operand {operand} ({x.shape[q]}) does not match "
                             f"previous terms ({x.shape[p]}).")
        x = selection.diagonal(x, 0, p, q)
        term = term[:p] + term[p + 1:q] + term[q + 1:] + c
    return x, term


def _broadcast_labels(terms):
    """Checks label sizes across operands; a size-1 label meeting a larger one is
    squeezed out of its operand (it broadcasts)."""
    sizes = {}
    for i, (x, term) in enumerate(terms):
        for c, n in zip(term, x.shape):
            if n != 1 and sizes.get(c, 1) not in (1, n):
                raise ValueError(f"Size of label '{c}' for operand {i} ({n}) does not match previous "
                                 f"terms ({sizes[c]}).")
            if n != 1 or c not in sizes:
                sizes[c] = n
    out = []
    for x, term in terms:
        drop = [d for d, c in enumerate(term) if x.shape[d] == 1 and sizes[c] != 1]
        out.append((lax_structural.squeeze(x, drop), "".join(c for d, c in enumerate(term) if d not in drop)))
    return out


def _sum_labels(x, term: str, keep: set[str], dtype):
    """Sums out the labels of `term` not in `keep` (an or for bools, as JAX)."""
    axes = tuple(d for d, c in enumerate(term) if c not in keep)
    if not axes:
        return x, term
    x = core.convert_element_type(x, result_type(x.dtype, dtype)[0])
    reduce = lax_reduction.reduce_or if x.dtype == np.bool_ else lax_reduction.reduce_sum
    return reduce(x, axes), "".join(c for c in term if c not in set(term[d] for d in axes))


def _contract(lhs, rhs, keep: set[str], precision, dtype, out_labels=None):
    """One dot_general: labels in both operands are batch dimensions if still
    needed (`keep`), contracted otherwise (in label order, as JAX). `out_labels`:
    (output labels, out_sharding) of the einsum, for its last contraction,
    which is laid out as JAX lays it out: batch labels in the output's order,
    the operands in their given order when the result then needs no
    transpose, else swapped."""
    (x, xt), (y, yt) = lhs, rhs
    shared = [c for c in xt if c in yt]
    batch = [c for c in shared if c in keep]
    contract = sorted(c for c in shared if c not in keep)
    if out_labels is not None:
        batch = [c for c in out_labels[0] if c in batch]
        in_order = "".join(batch) + "".join(c for c in xt if c not in yt) + "".join(c for c in yt if c not in xt)
        if in_order != out_labels[0]:
            (x, xt), (y, yt) = (y, yt), (x, xt)
    dims = ((tuple(xt.index(c) for c in contract), tuple(yt.index(c) for c in contract)),
            (tuple(xt.index(c) for c in batch), tuple(yt.index(c) for c in batch)))
    term = "".join(batch) + "".join(c for c in xt if c not in yt) + "".join(c for c in yt if c not in xt)
    sharding = None
    if out_labels is not None and out_labels[1] is not None:
        output, out_sharding = out_labels
        entries = _spec_entries(out_sharding, len(output))
        sharding = _with_spec(out_sharding, [entries[output.index(c)] if c in output else None
                                             for c in term])
    out = lax_linalg.dot_general(x, y, dims, precision, preferred_element_type=dtype,
                                 out_sharding=sharding)
    return out, term


def einsum(subscripts, /, *operands, out=None, optimize="auto", precision=None, preferred_element_type=None,
           out_sharding=None):
    """Einstein summation, contracting operands pairwise from the left (`optimize`
    is accepted; the order does not change the result)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.einsum is not supported.")
    if out_sharding is not None:
        from meshsim._src.sharding.explicit import check_explicit_axes
        check_explicit_axes(out_sharding, "einsum")
    if not isinstance(subscripts, str):
        subscripts, operands = _interleaved((subscripts,) + operands)
    operands = [core.asarray_value(x) for x in operands]
    inputs, output = _parse(subscripts, [x.ndim for x in operands])
    dtype, weak = _output_type(preferred_element_type, *operands)
    common = result_type(*operands)[0]
    terms = [_take_diagonals(core.convert_element_type(x, common), t, i)
             for i, (x, t) in enumerate(zip(operands, inputs))]
    terms = _broadcast_labels(terms)

    def needed(others) -> set[str]:
        return set(output).union(*(t for _, t in others))

    result = _sum_labels(*terms[0], needed(terms[1:]), dtype)
    for k in range(1, len(terms)):
        later = terms[k + 1:]
        rhs = _sum_labels(*terms[k], needed([result] + later), dtype)
        result = _sum_labels(*result, needed([rhs] + later), dtype)
        result = _contract(result, rhs, needed(later), precision, dtype,
                           None if later else (output, out_sharding))
    if len(terms) == 1 and out_sharding is not None:
        from meshsim._src.sharding.explicit import reshard
        x, term = _sum_labels(*result, set(output), dtype)
        perm = tuple(term.index(c) for c in output)
        x = lax_structural.transpose(x, perm) if perm != tuple(range(len(perm))) else x
        return reshard(core.convert_element_type(x, dtype, weak), out_sharding)
    x, term = _sum_labels(*result, set(output), dtype)
    perm = tuple(term.index(c) for c in output)
    if perm != tuple(range(len(perm))):
        x = lax_structural.transpose(x, perm)
    return core.convert_element_type(x, dtype, weak)


# --- products built from the above ----------------------------------------------------

def kron(a, b):
    """The Kronecker product: blocks a[i, j] * b."""
    from meshsim._src.numpy import namespace as jnp
    a, b = promote_dtypes(*_operands("kron", a, b))
    if a.ndim < b.ndim:
        a = jnp.expand_dims(a, tuple(range(b.ndim - a.ndim)))
    elif b.ndim < a.ndim:
        b = jnp.expand_dims(b, tuple(range(a.ndim - b.ndim)))
    a_reshaped = jnp.expand_dims(a, tuple(range(1, 2 * a.ndim, 2)))
    b_reshaped = jnp.expand_dims(b, tuple(range(0, 2 * b.ndim, 2)))
    out_shape = tuple(int(s) for s in np.multiply(a.shape, b.shape))
    return jnp.reshape(a_reshaped * b_reshaped, out_shape)


def cross(a, b, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis=None):
    """The cross product of 2- or 3-vectors along the given axes."""
    from meshsim._src.numpy import namespace as jnp
    a, b = _operands("cross", a, b)
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = jnp.moveaxis(a, axisa, -1), jnp.moveaxis(b, axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError("Dimension must be either 2 or 3 for cross product")
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    a0, a1 = a[..., 0], a[..., 1]
    a2 = a[..., 2] if a.shape[-1] == 3 else jnp.zeros_like(a0)
    b0, b1 = b[..., 0], b[..., 1]
    b2 = b[..., 2] if b.shape[-1] == 3 else jnp.zeros_like(b0)
    c = jnp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])
    return jnp.moveaxis(c, 0, axisc)


@api.jitted_when_traced(static_argnames=('axis1', 'axis2', 'dtype'))
def trace(a, offset=0, axis1: int = 0, axis2: int = 1, dtype=None, out=None):
    """The sum along diagonal `offset` of the (axis1, axis2) planes."""
    from meshsim._src.numpy import namespace as jnp
    (a,) = _operands("trace", a)
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.trace is not supported.")
    if canonicalize_axis(axis1, a.ndim) == canonicalize_axis(axis2, a.ndim):
        raise ValueError(f"axis1 and axis2 can not be same. axis1={axis1} and axis2={axis2}")
    n, m = a.shape[axis1], a.shape[axis2]
    a = jnp.moveaxis(a, (axis1, axis2), (-2, -1))
    a = jnp.where(jnp.eye(n, m, k=offset, dtype=bool), a, jnp.zeros_like(a))
    return jnp.sum(a, axis=(-2, -1), dtype=dtype)


def matvec(x1, x2, /):
    """Batched matrix-vector products: (..., n, m) x (..., m) -> (..., n)."""
    x1, x2 = _operands("matvec", x1, x2)
    if x1.ndim < 2 or x2.ndim < 1 or x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"matvec: shapes {x1.shape} and {x2.shape} do not fit signature (n,m),(m)->(n)")
    return matmul(x1, x2[..., None])[..., 0]


def vecmat(x1, x2, /):
    """Batched vector-matrix products: (..., n) x (..., n, m) -> (..., m)."""
    x1, x2 = _operands("matvec", x1, x2)
    if x1.ndim < 1 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-2]:
        raise ValueError(f"vecmat: shapes {x1.shape} and {x2.shape} do not fit signature (n),(n,m)->(m)")
    return matmul(x1[..., None, :], x2)[..., 0, :]


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    """The dot product of vectors along `axis`, broadcasting the other dims."""
    from meshsim._src.numpy import namespace as jnp
    x1, x2 = _operands("jnp.vecdot", x1, x2)
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(f"axes must match; got shapes {x1.shape} and {x2.shape} with axis={axis}")
    x1, x2 = jnp.moveaxis(x1, axis, -1), jnp.moveaxis(x2, axis, -1)
    return matmul(x1[..., None, :], x2[..., :, None], precision=precision,
                  preferred_element_type=preferred_element_type)[..., 0, 0]

"""`jnp.vectorize`: a function on core dimensions (a gufunc signature such as
"(n),(n)->()") applied over the broadcast loop dimensions with `vmap`, one
vmap per loop dimension."""
from __future__ import annotations

import functools
import re

__all__ = ["vectorize"]

_DIM = r"\w+"
_CORE = rf"(?:{_DIM}(?:,{_DIM})*)?"
_ARG = rf"\({_CORE}\)"
_ARGS = rf"{_ARG}(?:,{_ARG})*"
_SIGNATURE = rf"^{_ARGS}->{_ARGS}$"


def _parse_args(text: str) -> list[tuple[str, ...]]:
    return [tuple(re.findall(_DIM, arg)) for arg in re.findall(_ARG, text)]


def _parse_signature(signature: str):
    compact = signature.replace(" ", "")
    if not re.match(_SIGNATURE, compact):
        raise ValueError(f"not a valid gufunc signature: {signature}")
    ins, outs = compact.split("->")
    return _parse_args(ins), _parse_args(outs)


def _bind_excluded(pyfunc, excluded, args):
    """`pyfunc` with the excluded positional arguments fixed, and the rest."""
    excluded = {i for i in excluded if i < len(args)}
    if not excluded:
        return pyfunc, args
    static = {i: args[i] for i in excluded}
    dynamic = [a for i, a in enumerate(args) if i not in excluded]

    def call(*dyn, **kwargs):
        it = iter(dyn)
        full = [static[i] if i in static else next(it) for i in range(len(args))]
        return pyfunc(*full, **kwargs)
    return call, dynamic


def _check_outputs(out, out_core, dim_sizes, signature):
    outs = out if isinstance(out, tuple) else (out,)
    if len(out_core) != len(outs) and not (len(out_core) == 1 and not isinstance(out, tuple)):
        raise ValueError(f"wrong number of output arguments: expected {len(out_core)}, "
                         f"got {len(outs)}")
    for o, core in zip(outs, out_core):
        if len(getattr(o, "shape", ())) != len(core):
            raise ValueError(f"output shape {getattr(o, 'shape', ())} does not match core "
                             f"dimensions {core} on vectorized function with excluded=..., "
                             f"signature={signature!r}")
        for name, size in zip(core, o.shape):
            if dim_sizes.setdefault(name, size) != size:
                raise ValueError(f"inconsistent size for core dimension {name!r}: {size} vs "
                                 f"{dim_sizes[name]}")


def vectorize(pyfunc, *, excluded=frozenset(), signature: str | None = None):
    """`pyfunc` mapped over its arguments' leading (loop) dimensions, broadcast
    together; `signature` names each argument's and result's trailing core
    dimensions; `excluded` positions are passed through unvectorized."""
    if any(not isinstance(e, int) for e in excluded):
        raise ValueError("jax.numpy.vectorize can only exclude integer arguments, "
                         f"but excluded={excluded!r}")
    if any(e < 0 for e in excluded):
        raise ValueError(f"excluded={excluded!r} contains negative numbers")

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        from meshsim._src.numpy import namespace as jnp
        from meshsim._src.vmap import vmap
        func, args = _bind_excluded(pyfunc, excluded, args)
        args = [jnp.asarray(a) for a in args]
        if signature is None:
            in_core, out_core = [()] * len(args), None
        else:
            in_core, out_core = _parse_signature(signature)
        where = (f" on vectorized function with excluded={excluded!r} and "
                 f"signature={signature!r}")
        if len(in_core) != len(args):
            raise TypeError(f"wrong number of positional arguments: expected {len(in_core)}, "
                            f"got {len(args)}{where}")
        dim_sizes: dict[str, int] = {}
        loop_shapes = []
        for a, core in zip(args, in_core):
            if a.ndim < len(core):
                raise ValueError(f"input with shape {a.shape!r} does not have enough dimensions "
                                 f"for all core dimensions {core!r}{where}")
            core_shape = a.shape[a.ndim - len(core):]
            for name, size in zip(core, core_shape):
                if dim_sizes.setdefault(name, size) != size:
                    raise ValueError(f"inconsistent size for core dimension {name!r}: {size} vs "
                                     f"{dim_sizes[name]}{where}")
            loop_shapes.append(a.shape[:a.ndim - len(core)])
        loop_shape = jnp.broadcast_shapes(*loop_shapes) if loop_shapes else ()

        def core_func(*core_args):
            out = func(*core_args, **kwargs)
            if out_core is not None:
                _check_outputs(out, out_core, dim_sizes, signature)
            return out

        mapped = core_func
        for _ in loop_shape:
            mapped = vmap(mapped)
        args = [jnp.broadcast_to(a, tuple(loop_shape) + a.shape[a.ndim - len(core):])
                for a, core in zip(args, in_core)]
        return mapped(*args)

    return wrapped

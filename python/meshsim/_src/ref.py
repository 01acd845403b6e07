"""Mutable array references (`jax.new_ref`, `jax.Ref`, `jax.freeze`, `jax.free_ref`).

A Ref holds an array that `ref[idx] = v` replaces (functionally: the new value is
`value.at[idx].set(v)`) and `ref[idx]` reads. Programs stay pure: a Ref created
inside a traced function just holds traced values, and a jitted function given
Refs as arguments is traced with their values as extra inputs and their final
values as extra outputs, which are written back into the caller's Refs after
the call (how JAX discharges the state effects of a jitted function).

Refs a traced function closes over are discharged the same way. While a jitted
function or a loop body is traced, a `RefScope` records the Refs made outside it
that it writes (and, for jit, the eagerly made Refs it reads); their values are
restored when tracing ends, and the function is traced again with those Refs bound
to extra inputs (`bound`) whose final values are extra outputs: a jitted function's
extra arguments and results, a loop's extra carry. After the call they are written
back into the Refs."""
from __future__ import annotations

import contextlib
import enum
import threading
import types
from typing import Any, Sequence

import numpy as np

from meshsim._src import core

__all__ = ["Ref", "AbstractRef", "new_ref", "freeze", "free_ref", "empty_ref", "get", "set",
           "swap", "addupdate", "Slice", "ds"]


class Slice:
    """`size` elements from `start` (an int or a traced integer) every `stride`: an index of a
    Ref whose start may be traced (`ref[jax.ds(i, 2)]`)."""
    __slots__ = ("start", "size", "stride")

    def __init__(self, start, size: int, stride: int = 1):
        self.start, self.size, self.stride = start, size, stride

    def is_dynamic_start(self) -> bool:
        return core.is_value(self.start) and not isinstance(self.start, core.Array)

    def static_slice(self) -> slice | None:
        """The Python slice this is, when its start is known."""
        if self.is_dynamic_start():
            return None
        start = int(self.start)
        return slice(start, start + self.size * self.stride, self.stride)

    def __repr__(self) -> str:
        return f"Slice(start={self.start}, size={self.size}, stride={self.stride})"


def ds(start, size: int | None = None, stride: int | None = None):
    """`Slice(start, size, stride)`; `ds(n)` is the first n elements, `ds(None)` all of them."""
    if start is None:
        return slice(None, None, stride)
    if size is None:
        start, size = 0, start
    return Slice(start, size, 1 if stride is None else stride)


class MemorySpace(enum.Enum):
    """Where a Ref's buffer lives (`new_ref(x, memory_space=...)`); one memory here."""
    Device = enum.auto()
    Host = enum.auto()
    Any = enum.auto()

    def __repr__(self) -> str:
        return f"MemorySpace.{self.name}"


memory = types.SimpleNamespace(Space=MemorySpace)  # jax.memory


def _plain_index(idx):
    """`idx` with its statically known Slices as Python slices; None if a start is traced."""
    items = idx if isinstance(idx, tuple) else (idx,)
    out = []
    for item in items:
        if isinstance(item, Slice):
            item = item.static_slice()
            if item is None:
                return None
        out.append(item)
    return tuple(out) if isinstance(idx, tuple) else out[0]


def _is_whole(idx) -> bool:
    """Whether `idx` selects the whole array (`...` or `()`); compared by identity, since an
    index may hold arrays."""
    if idx is Ellipsis:
        return True
    return isinstance(idx, tuple) and (len(idx) == 0 or (len(idx) == 1 and idx[0] is Ellipsis))


def _dynamic_starts(idx, ndim: int):
    """(start per axis, size per axis) of an index made of Slices (stride 1) and full slices."""
    items = idx if isinstance(idx, tuple) else (idx,)
    starts, sizes = [], []
    for item in items:
        if isinstance(item, Slice) and item.stride == 1:
            starts.append(item.start)
            sizes.append(item.size)
        elif isinstance(item, slice) and item == slice(None):
            starts.append(0)
            sizes.append(None)
        else:
            raise NotImplementedError(f"indexing a Ref by {idx!r}: a traced start goes with stride 1 "
                                      "and full slices on the other axes")
    return starts + [0] * (ndim - len(starts)), sizes + [None] * (ndim - len(sizes))


class AbstractRef:
    """The type of a Ref: `Ref{float32[4]}`."""
    __slots__ = ("inner_aval",)

    def __init__(self, inner_aval):
        self.inner_aval = inner_aval

    shape = property(lambda self: self.inner_aval.shape)
    dtype = property(lambda self: self.inner_aval.dtype)
    ndim = property(lambda self: self.inner_aval.ndim)

    def str_short(self, *args, **kwargs) -> str:
        return f"Ref{{{self.inner_aval.str_short()}}}"

    __str__ = __repr__ = str_short

    def __eq__(self, other):
        return isinstance(other, AbstractRef) and other.inner_aval == self.inner_aval

    def __hash__(self):
        return hash(("Ref", self.inner_aval.shape, str(self.inner_aval.dtype)))


class Ref:
    """A mutable reference to an array (see the module's text)."""
    __slots__ = ("_value", "_trace", "_weak", "_run_time_writes", "__weakref__")

    def __init__(self, value):
        from meshsim import _core
        self._value = value
        self._trace = _core.current_trace()  # the trace it was made in (None: eagerly)
        # The Ref's type is fixed when it is made: reads keep its weak type even after a
        # write stored a strongly typed value (a step counter made from a Python int).
        self._weak = bool(core.typeof(value).weak_type)
        # Whether some dispatched program writes it when it runs (a host callback): an eager
        # read waits for those programs, as a Ref read after a call sees the call's writes.
        self._run_time_writes = False

    @property
    def aval(self) -> AbstractRef:
        return AbstractRef(core.typeof(self._value))

    shape = property(lambda self: tuple(self._value.shape))
    dtype = property(lambda self: self._value.dtype)
    ndim = property(lambda self: self._value.ndim)
    size = property(lambda self: self._value.size)
    sharding = property(lambda self: self._value.sharding)
    committed = property(lambda self: self._value.committed)

    def __array__(self, *args, **kwargs):
        raise TypeError("cannot convert Ref to a meshsim array")

    def __len__(self):
        return len(self._value)

    def __getitem__(self, idx):
        self._note_read()
        value = self._typed_value()
        if _is_whole(idx):
            return value
        plain = _plain_index(idx)
        if plain is not None:
            return value[plain]
        from meshsim._src.lax.indexing import dynamic_slice
        starts, sizes = _dynamic_starts(idx, self.ndim)
        return dynamic_slice(value, starts, [d if n is None else n for n, d in zip(sizes, self.shape)])

    def _typed_value(self):
        """The stored value with the Ref's own weak type."""
        value = self._value
        if core.typeof(value).weak_type != self._weak:
            value = core.convert_element_type(value, value.dtype, self._weak)
        return value

    def __setitem__(self, idx, value):
        self._update("swap", idx, value, lambda old, v: v)

    def addupdate(self, value, idx=Ellipsis) -> None:
        """Adds `value` (of the shape and dtype of the part `idx`) into the referenced array."""
        self._update("addupdate", idx, value, lambda old, v: old + v)

    def _update(self, op: str, idx, value, combine) -> None:
        value, whole = self._checked(op, idx, value)
        if self._written_at_run_time(op, idx, value):
            return
        self._check_same_trace(value)
        if whole:
            self._value = combine(self._value, value)
            return
        plain = _plain_index(idx)
        if plain is not None:
            at = self._value.at[plain]
            self._value = at.set(value) if op == "swap" else at.add(value)
            return
        from meshsim._src.lax.indexing import dynamic_update_slice
        starts, _ = _dynamic_starts(idx, self.ndim)
        self._value = dynamic_update_slice(self._value, combine(self[idx], value), starts)

    def _check_same_trace(self, value) -> None:
        """A traced value written into a Ref made outside the function being traced is recorded
        by that function's RefScope (which discharges it); without one (a grad, vmap or cond
        branch closing over the Ref) it is refused."""
        from meshsim import _core
        trace = _core.current_trace()
        if trace is None or trace is self._trace:
            return
        scope = _SCOPES.stack[-1] if _SCOPES.stack else None
        if any(t is trace for t in VMAPPED_TRACES):
            raise Exception(  # noqa: TRY002 - JAX raises a bare Exception here
                "performing a set/swap operation with vmapped value on an unbatched array reference "
                f"of type Ref{{{core.typeof(self._value).str_short()}}}. Move the array reference to "
                "be an argument to the vmapped function?")
        if scope is None or scope.trace is not trace or not scope.discharges:
            raise NotImplementedError(
                "writing a traced value into a Ref that a differentiated, vmapped or cond-branch "
                "function closes over is not supported: pass the Ref to the jitted function as an "
                "argument, or carry the value through the loop")
        scope.record(self, written=True)

    def _written_at_run_time(self, op: str, idx, value) -> bool:
        """A traced value written into a Ref made eagerly, while a rule whose writes happen when
        its program runs (RUN_TIME_WRITES) is traced: emits that write."""
        from meshsim import _core
        if not RUN_TIME_WRITES or self._trace is not None or _core.current_trace() is None:
            return False
        RUN_TIME_WRITES[-1](self, op, idx, value)
        return True

    def _note_read(self) -> None:
        """An eager read waits for the programs writing the Ref when they run; a jitted
        function reading a Ref made eagerly takes its value as an input (so that a later call
        sees the Ref's value then, not the one it had when traced)."""
        if self._run_time_writes:
            from meshsim import _core
            if _core.current_trace() is None:
                _core.wait_all_dispatched()
        if self._trace is None and _SCOPES.stack:
            from meshsim import _core
            if _core.current_trace() is not None:
                for scope in _SCOPES.stack:
                    if scope.records_reads:
                        scope.record(self, written=False)
                        break

    def _checked(self, op: str, idx, value):
        """`value` as written at `idx` by `op`, with JAX's errors for a wrong shape or dtype."""
        value = core.asarray_value(value)
        whole = _is_whole(idx)
        expected = self.shape if whole else tuple(core.typeof(self[idx]).shape)
        if tuple(value.shape) != expected:
            transforms = "()" if whole else f"({idx!r},)"
            raise ValueError(f"Invalid shape for `{op}`. Ref shape: {self.shape}. Expected shape: "
                             f"{expected}. Value shape: {tuple(value.shape)}. Transforms: {transforms}. ")
        if value.dtype != self.dtype and not (value.weak_type and _weak_fits(value.dtype, self.dtype)):
            raise ValueError(f"Invalid dtype for `{op}`. Ref dtype: {self.dtype}. Value dtype: "
                             f"{value.dtype}. ")
        # What is written takes the Ref's dtype; as in JAX, a value swapped in is no longer
        # weakly typed (a counter made from a Python int prints as int32 once written), one
        # added in keeps the Ref's weak type.
        weak = op == "addupdate" and core.typeof(self._value).weak_type
        return core.convert_element_type(value, self.dtype, weak), whole

    def __repr__(self) -> str:
        value = self._value
        if isinstance(value, core.Tracer):
            return f"Ref({value!r})"
        return "Ref" + repr(value)[len("Array"):]

    __str__ = __repr__


def _weak_fits(weak: np.dtype, dtype: np.dtype) -> bool:
    """A weakly typed Python scalar takes a Ref's dtype of its own kind (a float into a float16
    Ref), not of another (an int into a float Ref)."""
    return np.dtype(weak).kind == np.dtype(dtype).kind


# Innermost last: how the rule being traced writes Refs made eagerly when its program runs
# (ad_refs: a custom_vjp backward rule stashing a cotangent).
RUN_TIME_WRITES: list = []

# The traces vmap is tracing its function's examples in (innermost last): a Ref they close over
# is unbatched, so writing a traced value into it is an error.
VMAPPED_TRACES: list = []


def new_ref(init_val: Any, *, memory_space: Any = None, kind: str | None = None) -> Ref:
    """A mutable reference holding `init_val` (an array, a scalar, ...)."""
    return Ref(core.asarray_value(init_val))


def freeze(ref: Ref):
    """The referenced array's final value."""
    ref._note_read()
    return ref._typed_value()


def free_ref(ref: Ref) -> None:
    """Declares `ref` no longer used (its value stays readable, as in JAX eagerly)."""


def empty_ref(ty, memory_space: Any = None) -> Ref:
    """A Ref of type `ty` (a ShapedArray) whose contents are not to be read before a write.
    Only inside a traced function, as in JAX (which has no eager rule for it)."""
    from meshsim import _core
    if _core.current_trace() is None:
        raise NotImplementedError("Evaluation rule for 'empty_ref' not implemented")
    return Ref(core.asarray_value(np.zeros(ty.shape, ty.dtype)))


def _index(idx):
    return Ellipsis if idx is None else idx


def get(ref: Ref, idx=None):
    """`ref[idx]` (the whole array when `idx` is None)."""
    return ref[_index(idx)]


def set(ref: Ref, idx, value) -> None:  # noqa: A001 - JAX's name (jax.ref.set)
    """`ref[idx] = value` (the whole array when `idx` is None)."""
    ref[_index(idx)] = value


def swap(ref: Ref, idx, value):
    """Writes `value` at `idx` and returns what was there."""
    old = ref[_index(idx)]
    ref[_index(idx)] = value
    return old


def addupdate(ref: Ref, idx, x) -> None:
    """Adds `x` into the part `idx` of the referenced array."""
    ref.addupdate(x, _index(idx))


def is_ref(x) -> bool:
    return isinstance(x, Ref)


def operand_error(name: str, position: int, jitted: bool) -> TypeError:
    """JAX's error for a Ref given to a jax.numpy function. JAX names the type the function saw:
    its functions that are themselves jitted (jnp.sin, jnp.sum, ...) see a tracer of the Ref's
    value, the others the Ref; the class paths are JAX's own."""
    seen = "jax._src.interpreters.partial_eval.DynamicJaxprTracer" if jitted else "jax._src.core.Ref"
    return TypeError(f"{name} requires ndarray or scalar arguments, got <class '{seen}'> at position {position}.")


def _sourceinfo(fun) -> str:
    from meshsim._src import tracing
    return tracing.fun_sourceinfo(fun)


def _type_text(r: Ref) -> str:
    return f"Ref{{{str(core.typeof(r._value)).lstrip('~')}}}"


def _refuse_returned_refs(fun, result, arg_refs: list, paths: list) -> None:
    """JAX's error for a jitted function returning one of its Ref arguments."""
    from meshsim._src import tree_util
    for path, leaf in tree_util.tree_flatten_with_path(result)[0]:
        for r, name in zip(arg_refs, paths):
            if leaf is r:
                where = f" at output tree path result{tree_util.keystr(path)}" if path else ""
                raise ValueError(
                    f"function {_sourceinfo(fun)} traced for jit returned a mutable array reference of "
                    f"type {_type_text(r)}{where}, but mutable array references cannot be returned.\n\n"
                    f"The returned mutable array was passed in as the argument {name}.")


def call_with_refs(jitted, fun, args: tuple, kwargs: dict):
    """`fun(*args, **kwargs)` jitted when some leaves of the arguments are Refs: their values go
    in as inputs, fresh Refs stand for them while tracing, and their final values come out as
    extra results that are written back into the caller's Refs. Returns (result,), or None when
    there are no Refs."""
    from meshsim._src import tree_util
    leaves, tree = tree_util.tree_flatten((args, kwargs))
    where = tuple(i for i, x in enumerate(leaves) if isinstance(x, Ref))
    if not where:
        return None
    paths = [jitted._sig.describe_leaf(args, kwargs)(i).rsplit(" of ", 1)[0] for i in where]
    for a, i in enumerate(where):
        for b, j in enumerate(where[:a]):
            if leaves[i] is leaves[j]:
                raise ValueError(
                    "only one reference to a mutable array may be passed as an argument to a function, "
                    f"but when tracing {_sourceinfo(fun)} for jit the mutable array reference of type "
                    f"{_type_text(leaves[i])} appeared at both {paths[b]} and {paths[a]}.")
    key = (tree, where)
    inner = jitted._ref_variants.get(key)
    if inner is None:
        def with_refs(*flat):
            flat = list(flat)
            refs = [Ref(flat[i]) for i in where]
            for i, r in zip(where, refs):
                flat[i] = r
            a, k = tree_util.tree_unflatten(tree, flat)
            result = fun(*a, **k)
            _refuse_returned_refs(fun, result, refs, paths)
            return result, [r._value for r in refs]
        inner = jitted._ref_variants[key] = type(jitted)(with_refs)
    # A Ref's value goes in with the Ref's weak type, so the inner Ref (and the trace made for
    # it) has the caller's type even after a write stored a strongly typed value.
    out, values = inner(*[x._typed_value() if isinstance(x, Ref) else x for x in leaves])
    for i, path in zip(where, paths):
        if any(leaves[i] is r for r in inner._closed_refs):
            raise ValueError(f"when tracing {_sourceinfo(fun)} for jit, a mutable array reference of type "
                             f"{_type_text(leaves[i])} was both closed over and passed as the argument {path}")
    for i, v in zip(where, values):
        leaves[i]._value = v
    return (out,)


# --- discharging Refs that traced functions close over ----------------------------------------

class _ScopeStack(threading.local):
    def __init__(self):
        self.stack: list[RefScope] = []


_SCOPES = _ScopeStack()


class RefScope:
    """The Refs made outside one traced function that it writes (and, when `records_reads`,
    the eagerly made Refs it reads), in first-touched order."""

    def __init__(self, trace, records_reads: bool, discharges: bool = True):
        self.trace, self.records_reads, self.discharges = trace, records_reads, discharges
        self.refs: list[Ref] = []
        self.written: list[Ref] = []
        self._saved: dict[int, tuple] = {}

    def record(self, ref: Ref, written: bool) -> None:
        if id(ref) not in self._saved:
            self._saved[id(ref)] = (ref, ref._value, ref._trace)
            self.refs.append(ref)
        if written and all(r is not ref for r in self.written):
            self.written.append(ref)

    def restore(self) -> None:
        """Undoes what tracing wrote (the function runs later, as a program)."""
        for ref, value, trace in self._saved.values():
            ref._value, ref._trace = value, trace


@contextlib.contextmanager
def recording(trace, records_reads: bool = False, discharges: bool = True):
    """Records into a RefScope while `trace` is traced; restores the Refs after."""
    scope = RefScope(trace, records_reads, discharges)
    _SCOPES.stack.append(scope)
    try:
        yield scope
    finally:
        _SCOPES.stack.pop()
        scope.restore()


@contextlib.contextmanager
def bound(refs: Sequence[Ref], values: Sequence):
    """Within the block, each Ref holds the matching value and belongs to the current trace
    (so the function being traced reads and writes it as its own)."""
    from meshsim import _core
    saved = [(r._value, r._trace) for r in refs]
    trace = _core.current_trace()
    for r, v in zip(refs, values):
        r._value, r._trace = v, trace
    try:
        yield
    finally:
        for r, (v, t) in zip(refs, saved):
            r._value, r._trace = v, t


def write_back(refs: Sequence[Ref], values: Sequence) -> None:
    """Stores a call's final Ref values into the Refs (recorded by the enclosing scope, if a
    trace is open and the Ref was made outside it)."""
    for r, v in zip(refs, values):
        r._check_same_trace(v)
        r._value = v


class ClosedOverRefs(Exception):
    """Raised out of a jitted function's first trace: it touches these Refs made outside it."""

    def __init__(self, refs: list):
        super().__init__(f"{len(refs)} Refs closed over")
        self.refs = refs


def call_with_closed_refs(jitted, fun, refs: list, args: tuple, kwargs: dict):
    """`fun(*args, **kwargs)` jitted with the Refs it closes over bound to extra inputs and
    their final values returned as extra results, which are written back into the Refs."""
    key = tuple(id(r) for r in refs)
    inner = jitted._ref_variants.get(key)
    if inner is None:
        def with_refs(ref_values, *a, **k):
            with bound(refs, ref_values):
                return fun(*a, **k), [r._value for r in refs]
        sig = jitted._sig
        inner = jitted._ref_variants[key] = type(jitted)(
            with_refs, static_argnums=tuple(i + 1 for i in sig.static_argnums) or None,
            static_argnames=tuple(sig.static_argnames) or None)
    out, values = inner([r._typed_value() for r in refs], *args, **kwargs)
    write_back(refs, values)
    return out

"""Transformations of Python functions: jit and make_jaxpr.

A function is traced once per input signature into a Program held by the C++
core; later calls with the same signature run that program without Python."""
from __future__ import annotations

import atexit
import contextlib
import functools
import inspect

import numpy as np
import warnings
import weakref
from typing import Any, Callable, Sequence

from meshsim import _core
from meshsim._src import core, debug, flags, ref, tracing, tree_util, vmap_collectives
from meshsim._src.abstract import ShapeDtypeStruct
from meshsim._src.float0 import Float0Zeros, float0_zeros, is_float0
from meshsim._src.jaxpr import ClosedJaxpr
from meshsim._src.config import config as _config
from meshsim._src import float_checks as flags_check
from meshsim._src.sharding import auto_names, device_assignment, placement
from meshsim._src.sharding import jit_shardings
from meshsim._src.sharding.mesh import AxisType, _context as _mesh_context


def _as_tuple(x) -> tuple:
    if x is None:
        return ()
    if isinstance(x, (int, str)):
        return (x,)
    return tuple(x)


class _Signature:
    """Splits a call's arguments into static values and array leaves."""

    def __init__(self, fun, static_argnums, static_argnames, donate_argnums, donate_argnames):
        try:
            self.params = inspect.signature(fun).parameters
        except (TypeError, ValueError):
            self.params = {}
        self.fun_name = getattr(fun, "__qualname__", getattr(fun, "__name__", repr(fun)))
        names = list(self.params)
        self._check_argnums("static_argnums", _as_tuple(static_argnums))
        self._check_argnums("donate_argnums", _as_tuple(donate_argnums))
        self._check_argnames("static_argnames", _as_tuple(static_argnames))
        self._check_argnames("donate_argnames", _as_tuple(donate_argnames))
        self.static_argnums = {self._normalize(i) for i in _as_tuple(static_argnums)}
        self.static_argnames = set(_as_tuple(static_argnames))
        # Static names and positions imply each other where the signature says so.
        for i in list(self.static_argnums):
            if 0 <= i < len(names):
                self.static_argnames.add(names[i])
        for n in list(self.static_argnames):
            if n in names:
                self.static_argnums.add(names.index(n))
        self.donate_argnums = {self._normalize(i) for i in _as_tuple(donate_argnums)}
        for n in _as_tuple(donate_argnames):
            if n in names:
                self.donate_argnums.add(names.index(n))
        self.donate_argnames = set(_as_tuple(donate_argnames))
        both = {names[i] for i in self.static_argnums & self.donate_argnums if 0 <= i < len(names)}
        both |= self.static_argnames & self.donate_argnames
        if both:
            raise ValueError("static_argnames and donate_argnames cannot intersect. Argument names "
                             f"{both} appear in both static_argnames and donate_argnames")

    def _kinds(self) -> set:
        return {p.kind for p in self.params.values()}

    def _check_argnums(self, what: str, nums: tuple):
        """JAX's ValueError for positions the function does not have (when its signature is known)."""
        if not self.params or inspect.Parameter.VAR_POSITIONAL in self._kinds():
            return
        positional = [p for p in self.params.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        n = len(positional)
        for i in nums:
            if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
                raise TypeError(f"{what} must be ints, got {nums!r}")
        if any(not -n <= i < n for i in nums):
            raise ValueError(f"Jitted function has {what}={tuple(nums)}, but only accepts {n} "
                             "positional arguments.")

    def _check_argnames(self, what: str, names: tuple):
        if not self.params or inspect.Parameter.VAR_KEYWORD in self._kinds():
            return
        bad = {n for n in names if n not in self.params or
               self.params[n].kind == inspect.Parameter.POSITIONAL_ONLY}
        if bad:
            raise ValueError(f"Jitted function has invalid argnames {bad} in {what}. Function does "
                             "not take these args.")

    def _normalize(self, i: int) -> int:
        if i < 0:
            i += len(self.params)
        return i

    def split(self, args, kwargs):
        static = []
        dyn_args = []
        for i, a in enumerate(args):
            if i in self.static_argnums:
                static.append((i, a))
            else:
                dyn_args.append(a)
        dyn_kwargs = {}
        for k, v in kwargs.items():
            if k in self.static_argnames:
                static.append((k, v))
            else:
                dyn_kwargs[k] = v
        for _, value in static:
            try:
                hash(value)
            except TypeError as e:
                raise ValueError(
                    "Non-hashable static arguments are not supported. An error occurred while trying to "
                    f"hash an object of type {type(value)}, {value}. The error was:\n"
                    f"{type(e).__name__}: {e}\n") from None
        static_key = tuple(static)
        return static_key, dyn_args, dyn_kwargs

    def overflow_error(self, args, kwargs) -> OverflowError:
        """JAX's error for a Python int argument out of the default integer's range,
        naming the argument by its path (`x`, `y['a']`)."""
        names = list(self.params)
        named = [(names[i] if i < len(names) else f"args[{i}]", a) for i, a in enumerate(args)
                 if i not in self.static_argnums]
        named += [(k, v) for k, v in kwargs.items() if k not in self.static_argnames]
        for name, arg in named:
            for path, leaf in tree_util.tree_flatten_with_path(arg)[0]:
                try:
                    core.asarray_value(leaf)
                except OverflowError:
                    return OverflowError(
                        "An overflow was encountered while parsing an argument to a jitted "
                        f"computation, whose argument path is {name}{tree_util.keystr(path)}. "
                        f"Got {type(leaf)} with value {leaf}")
        return OverflowError("An overflow was encountered while parsing an argument to a jitted "
                             "computation")

    def _leaf_paths(self, args, kwargs) -> list[tuple[str, object]]:
        """Each dynamic leaf of a call with its path as JAX's messages write it (`p['a']`)."""
        names = list(self.params)
        named = []
        for k, a in enumerate(args):
            if k in self.static_argnums:
                continue
            param = self.params.get(names[k]) if k < len(names) else None
            if param is not None and param.kind == param.VAR_POSITIONAL:
                named += [(f"{names[k]}[{j}]", b) for j, b in enumerate(args[k:])]
                break
            named.append((names[k] if k < len(names) else f"args[{k}]", a))
        named += [(k, v) for k, v in kwargs.items() if k not in self.static_argnames]
        return [(name + tree_util.keystr(path), leaf) for name, arg in named
                for path, leaf in tree_util.tree_flatten_with_path(arg)[0]]

    def describe_leaf(self, args, kwargs):
        """Names array leaf i of a call as JAX's messages do: "p['a'] of f"."""
        def describe(i: int) -> str:
            return f"{self._leaf_paths(args, kwargs)[i][0]} of {self.fun_name}"
        return describe

    def not_an_array_error(self, fun, args, kwargs) -> TypeError:
        """JAX's error for an argument that is neither an array nor marked static."""
        for path, leaf in self._leaf_paths(args, kwargs):
            try:
                core.asarray_value(leaf)
            except TypeError as refused:
                if isinstance(leaf, (np.ndarray, np.generic)):
                    return refused  # an array of a dtype JAX refuses keeps its own message
                return TypeError(
                    f"Error interpreting argument to {fun} as an abstract array. The problematic "
                    f"value is of type {type(leaf)} and was passed to the function at path {path}.\n"
                    "This typically means that a jit-wrapped function was called with a non-array "
                    "argument, and this argument was not marked as static using the static_argnums "
                    "or static_argnames parameters of jax.jit.")
        return TypeError(f"Error interpreting an argument to {fun} as an abstract array.")

    def donated_leaf_mask(self, args, kwargs) -> list[bool]:
        """Per array leaf: whether it was donated."""
        mask = []
        for i, a in enumerate(args):
            if i not in self.static_argnums:
                mask += [i in self.donate_argnums] * len(tree_util.tree_leaves(a))
        for k, v in kwargs.items():
            if k not in self.static_argnames:
                mask += [k in self.donate_argnames] * len(tree_util.tree_leaves(v))
        return mask


_Array = _core.ArrayImpl


def usable_donations(program, donated: list[bool]) -> list[bool]:
    """Which donated arguments give their buffer to a result (one of the same
    shape and dtype, matched in order, as XLA aliases them): those are deleted
    by the call. JAX warns about the others the program uses, which stay alive."""
    free = [(a.shape, a.dtype) for a in program.out_avals]
    usable, unusable = [], []
    for aval, d, used in zip(program.in_avals, donated, program.used_inputs()):
        key = (aval.shape, aval.dtype)
        usable.append(d and used and key in free)
        if usable[-1]:
            free.remove(key)
        elif d and used:
            unusable.append(aval.str_short())
    if unusable:
        warnings.warn(f"Some donated buffers were not usable: {', '.join(unusable)}.\n"
                      "See an explanation at https://docs.jax.dev/en/latest/faq.html#buffer-donation.",
                      UserWarning, stacklevel=4)
    return usable


def _mesh_devices(x):
    """The ids of the devices an array (or ShapeDtypeStruct) is laid out over by a mesh, in the
    mesh's order: a program traced for one device set places its results there, so arrays of
    one type on another set of devices are traced for their own (None without a mesh)."""
    if isinstance(x, core.Tracer):
        return None
    mesh = getattr(getattr(x, "sharding", None), "mesh", None)
    devices = getattr(mesh, "devices", None)
    return None if devices is None else tuple(d.id for d in np.ravel(devices))


def _leaf_key(x):
    return x.signature


def trace_to_program(fun: Callable, args: Sequence, kwargs: dict, static: tuple = (),
                     discharge_refs: bool = False, captures_ok: bool = False):
    """Traces `fun(*args, **kwargs)` (array leaves become inputs) into a Program.

    Returns (program, output treedef). With `discharge_refs`, raises ref.ClosedOverRefs when
    the function touches Refs made outside it (the caller traces it again binding them).
    With `captures_ok`, `fun` may close over tracers of enclosing traces (only the program's
    types are wanted: eval_shape)."""
    leaves, in_tree = tree_util.tree_flatten((list(args), kwargs))
    # ShapeDtypeStructs stand in for arrays of their type.
    try:
        leaves = [x if isinstance(x, ShapeDtypeStruct) else core.asarray_value(x) for x in leaves]
    except TypeError:
        if static:
            raise
        raise _Signature(fun, (), (), (), ()).not_an_array_error(fun, args, kwargs) from None
    with tracing.open_trace() as trace:
        with debug.deferred_inspections() as inspections:  # their callbacks run once the program is complete
            tracers = [trace.new_input(x.aval) for x in leaves]
            t_args, t_kwargs = tree_util.tree_unflatten(in_tree, tracers)
            t_args = _reinsert_static(t_args, static)
            for k, v in static:
                if isinstance(k, str):
                    t_kwargs[k] = v
            statics = {k for k, _ in static}
            described_args = tuple(tracing.STATIC if i in statics else a for i, a in enumerate(t_args))
            described_kwargs = {k: tracing.STATIC if k in statics else v for k, v in t_kwargs.items()}
            with ref.recording(trace, records_reads=discharge_refs, discharges=discharge_refs) as refs, \
                    tracing.describing(trace, fun, "jit", described_args, described_kwargs):
                out = fun(*t_args, **t_kwargs)
            if refs.refs:
                raise ref.ClosedOverRefs(refs.refs)
            out_leaves, out_tree = tree_util.tree_flatten(_float0_outside_the_program(out))
            results = _as_results(fun, out, out_leaves)
            program = trace.finish_capturing(results)[0] if captures_ok else trace.finish(results)
            program.name = getattr(fun, "__name__", "")  # the profiler's PjitFunction(name)
            inspections.resolve(trace, program, leaves)
    return program, out_tree


tree_util.register_pytree_node(Float0Zeros, lambda z: ((), z.shape), lambda shape, _: float0_zeros(shape))


def _as_results(fun, out, out_leaves) -> list:
    """The traced function's result leaves as values, or JAX's error naming the first
    leaf that is not an array, tracer or scalar (by its path in the result)."""
    try:
        return [core.asarray_value(x) for x in out_leaves]
    except TypeError as error:
        for path, leaf in tree_util.tree_flatten_with_path(out)[0]:
            if not core.is_jax_value(leaf):
                raise TypeError(f"function {tracing.fun_sourceinfo(fun)} traced for jit returned a value of "
                                f"type {type(leaf)} at output component {tree_util.keystr(path)}, which is "
                                "not a valid JAX type") from None
        raise error


def _float0_outside_the_program(out):
    """A traced function's results with each float0 value (integer inputs' tangents, which hold
    no data) put in the output tree itself, as JAX returns them without computing anything."""
    return tree_util.tree_map(lambda x: Float0Zeros(x.shape) if is_float0(x) else x, out)


def _reinsert_static(dyn_args: list, static: tuple) -> list:
    args = list(dyn_args)
    for k, v in sorted((kv for kv in static if isinstance(kv[0], int)), key=lambda kv: kv[0]):
        args.insert(k, v)
    return args


def _context_meshes() -> tuple:
    """The context mesh a trace resolves PartitionSpecs against, and how it was entered (jit
    takes set_mesh's, pjit a `with mesh:` block's): part of what selects a traced program."""
    return _mesh_context.mesh, _mesh_context.legacy


def _jit_ctx_mesh() -> str | None:
    """The context mesh JAX records on a nested jit equation, as its printer shows it: the mesh
    set by set_mesh (also inside a shard_map of it, or under another abstract mesh), else an
    abstract mesh with an Explicit axis; none for a `with mesh:` block."""
    mesh, abstract = _mesh_context.mesh, _mesh_context.abstract_mesh
    if _mesh_context.legacy:
        return None
    if mesh is not None and not mesh.empty:
        return str(mesh)
    if abstract is not None and not abstract.empty and AxisType.Explicit in abstract.axis_types:
        return repr(abstract)
    return None


# Every jitted function, so `clear_caches()` can empty their caches.
_ALL_JITTED: weakref.WeakSet = weakref.WeakSet()


class PjitFunction:
    """The result of `jit(fun)`: callable, cached per input signature (named as JAX's is)."""

    def __init__(self, fun, static_argnums=None, static_argnames=None, donate_argnums=None,
                 donate_argnames=None, in_shardings=None, out_shardings=None, api: str = "jit",
                 inline: bool = False):
        functools.update_wrapper(self, fun)
        if not hasattr(self, "__name__"):  # a partial: named, as in JAX, by the function it wraps
            inner = fun
            while isinstance(inner, functools.partial):
                inner = inner.func
            self.__name__ = self.__qualname__ = getattr(inner, "__name__", "<unnamed function>")
        _ALL_JITTED.add(self)
        self._fun = fun
        self._arguments = dict(  # what a copy is made with
            static_argnums=static_argnums, static_argnames=static_argnames,
            donate_argnums=donate_argnums, donate_argnames=donate_argnames,
            in_shardings=in_shardings, out_shardings=out_shardings, api=api, inline=inline)
        self._api = api  # "pjit": the deprecated jax.experimental.pjit (its context mesh, its name)
        self._in_shardings = in_shardings
        self._out_shardings = out_shardings
        if out_shardings is not None:  # results constrained at the end of the program
            fun = jit_shardings.constrain_outputs(fun, out_shardings, api)
        self._traced_fun = fun
        self._sig = _Signature(fun, static_argnums, static_argnames, donate_argnums, donate_argnames)
        self._cache: dict[Any, tuple] = {}
        self._traces: dict[Any, tuple] = {}  # the traced (program, out_tree) of each key
        # Calls whose arguments are all positional Arrays skip splitting and
        # flattening: their key is the tuple of the arrays' signatures alone.
        sig = self._sig
        self._fast = not (sig.static_argnums or sig.static_argnames or sig.donate_argnums
                          or sig.donate_argnames or in_shardings is not None)
        self._fast_cache: dict[tuple, tuple] = {}
        self._ref_variants: dict = {}  # Ref arguments: the variants ref.call_with_refs traces
        self._closed_refs: list = []  # Refs the function closes over (see ref.call_with_closed_refs)
        self._unplaced: dict[int, Any] = {}  # id(program): a result only a context mesh places
        self._inline = inline  # called while tracing: written in place, not a `jit` equation
        self._copied = False  # made by copy.copy/deepcopy (printed without its function)
        self._nested: dict = {}  # the programs of calls while tracing (see _call_nested)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __repr__(self):
        return "<PjitFunction>" if self._copied else f"<PjitFunction of {self._fun!r}>"

    def __copy__(self):
        """A new jitted function of the same `fun` and options, as copying JAX's gives
        (libraries deep-copy models that hold jitted functions); JAX's copy no longer names
        the function in its repr."""
        copied = PjitFunction(self._fun, **self._arguments)
        copied._copied = True
        _share_traces(copied, self._fun, self._in_shardings, self._out_shardings, self._api)
        return copied

    def __deepcopy__(self, memo):
        return self.__copy__()

    def _lookup(self, args, kwargs):
        static, dyn_args, dyn_kwargs = self._sig.split(args, kwargs)
        leaves, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
        try:
            leaves = [core.asarray_value(x) for x in leaves]
        except OverflowError:
            raise self._sig.overflow_error(args, kwargs) from None
        except TypeError:
            raise self._sig.not_an_array_error(self._fun, args, kwargs) from None
        mesh = placement.eager_mesh()
        if mesh is not None:  # traced with the types the arguments have on the mesh
            placed = placement.onto_mesh(leaves, mesh, as_operands=True)
            if placed is not leaves:
                leaves = placed
                dyn_args, dyn_kwargs = tree_util.tree_unflatten(in_tree, leaves)
        key = (static, in_tree, tuple(_leaf_key(x) for x in leaves), flags.trace_context(),
               _context_meshes())
        entry = self._cache.get(key)
        if entry is None:
            traced = self._traces.get(key)
            if traced is None:
                # A program traced for these types by make_jaxpr, trace() or a call while
                # another function was traced serves (JAX traces a function once per type).
                typed_key = self._typed_key(static, in_tree, leaves)
                traced = self._traced_alike(typed_key)
                placed_inside = None
                if traced is None:
                    self._before_tracing(key, leaves)
                    with placement.jit_arguments(leaves, self._sig.describe_leaf(args, kwargs)), \
                            device_assignment.recording_placements() as placements:
                        traced = trace_to_program(self._traced_fun, dyn_args, dyn_kwargs,
                                                  static, discharge_refs=True)
                    placed_inside = placements.count
                    self._remember_alike(typed_key, traced)
                self._note_placement(traced[0], leaves, placed_inside)
                self._traces[key] = traced
            program, out_tree = traced
            donated = None
            if self._sig.donate_argnums or self._sig.donate_argnames:
                donated = usable_donations(program, self._sig.donated_leaf_mask(args, kwargs))
            entry = self._cache[key] = (program, out_tree, donated)
        return entry, leaves

    def _note_placement(self, program, leaves, placed_inside) -> None:
        """Remembers a program whose results need the context mesh to be placed (JAX's
        device assignment: see device_assignment)."""
        result = device_assignment.unplaced_result(program.out_avals)
        if result is None:
            return
        count = device_assignment.program_device_count(program, leaves, placed_inside)
        if count is None:
            self._unplaced[id(program)] = result
        elif count != device_assignment.CONFLICTING:
            device_assignment.check_results(program.out_avals, count)

    def _check_placement(self, program) -> None:
        result = self._unplaced.get(id(program))
        if result is not None:
            device_assignment.check_results([result], device_assignment.context_device_count())

    def _before_tracing(self, key, leaves) -> None:
        """What the tracing flags ask for before a new signature is traced."""
        values = _config._values
        name = self.__name__
        if values["jax_no_tracing"]:
            code = getattr(self._fun, "__code__", None)
            where = f" at {code.co_filename}:{code.co_firstlineno}" if code else ""
            raise RuntimeError(f"re-tracing function {name}{where} for `jit`, but 'no_tracing' is set")
        if values["jax_explain_cache_misses"]:
            why = ("never seen function" if not self._traces else
                   "the arguments' types, static values or tracing context differ from the "
                   f"{len(self._traces)} traced before")
            flags.logger.warning("TRACING CACHE MISS for %s because: %s", name, why)
        if values["jax_log_compiles"]:
            types = ", ".join(str(x.aval).lstrip("~") for x in leaves)
            flags.logger.warning("Compiling %s with global shapes and types [%s].", name, types)

    def __call__(self, *args, **kwargs):
        if _config._values["jax_disable_jit"]:
            return self._traced_fun(*args, **kwargs)
        if _core.current_trace() is not None:
            if self._inline:
                return self._traced_fun(*args, **kwargs)
            if core.evaluated_now(tree_util.tree_leaves((args, kwargs))):
                # Run now as a call outside any trace runs it: compiled, so its values
                # are the bits an eager call gives (flax's lazy_init against init).
                return self._call(*args, **kwargs)
            return self._call_nested(args, kwargs, self._nested)
        if _config._values["jax_debug_nans"] or _config._values["jax_debug_infs"]:
            return flags_check.checked_jit_call(self._call, self._traced_fun, self._sig.fun_name,
                                                args, kwargs)
        return self._call(*args, **kwargs)

    def _call_nested(self, args, kwargs, programs: dict | None = None):
        """Called while another function is traced: one `jit` equation holding this function's
        program, as JAX records a nested jit (the executors run the program in place). What the
        function closes over from the enclosing traces comes first among the operands, as in JAX.
        A function touching Refs made outside it is written in place instead. `programs` keeps
        the programs traced without captures by signature, so that calls alike share one (JAX's
        printer then shows it once, as `let _where = { ... } in`)."""
        static, dyn_args, dyn_kwargs = self._sig.split(args, kwargs)
        leaves, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
        if any(ref.is_ref(x) for x in leaves):
            return self._traced_fun(*args, **kwargs)
        try:
            leaves = [core.asarray_value(x) for x in leaves]
        except TypeError:
            raise self._sig.not_an_array_error(self._fun, args, kwargs) from None
        key = traced = None
        if programs is not None:
            key = self._typed_key(static, in_tree, leaves)
            traced = None if key is None else programs.get(key)
        if traced is None:
            traced = self._trace_nested(static, in_tree, leaves)
            if traced is None:
                return self._traced_fun(*args, **kwargs)
            if key is not None and not traced[1]:
                programs[key] = traced
        program, captures, out_tree = traced
        params = {"name": program.name, "jaxpr": program}
        mesh = _jit_ctx_mesh()
        if mesh is not None:
            params["ctx_mesh"] = mesh
        outs = _core.bind("jit", [*captures, *leaves], params)
        return tree_util.tree_unflatten(out_tree, outs)

    @staticmethod
    def _typed_key(static, in_tree, leaves):
        """What selects a traced program whatever the arguments' placement: their types (the
        mesh of their sharding included, as in JAX's avals: a program traced on one mesh is
        not run on another) and the tracing context (None for an unhashable static argument)."""
        key = (static, in_tree,
               tuple((str(x.aval), x.aval.weak_type, str(getattr(x.aval, "sharding", None)), _mesh_devices(x))
                     for x in leaves),
               flags.trace_context(), _context_meshes(), str(_core.current_axis_env()),
               tuple(id(f) for f in vmap_collectives._frames))
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def _traced_alike(self, typed_key):
        """(program, out_tree) traced before for these types, if any."""
        traced = None if typed_key is None else self._nested.get(typed_key)
        return None if traced is None else (traced[0], traced[2])

    def _remember_alike(self, typed_key, traced) -> None:
        if typed_key is not None:
            program, out_tree = traced
            self._nested.setdefault(typed_key, (program, [], out_tree))

    def _trace_for_types(self, static: tuple, dyn_args: list, dyn_kwargs: dict):
        """(program, out_tree) on these arguments' types (arrays or ShapeDtypeStructs) for
        trace() and make_jaxpr, shared with the calls; a function touching Refs made outside
        it is traced for the caller alone."""
        leaves, in_tree = tree_util.tree_flatten((dyn_args, dyn_kwargs))
        try:
            typed = [x if isinstance(x, ShapeDtypeStruct) else core.asarray_value(x) for x in leaves]
        except TypeError:
            typed = None
        key = None if typed is None else self._typed_key(static, in_tree, typed)
        traced = self._traced_alike(key)
        if traced is not None:
            return traced
        if key is not None:
            try:
                traced = trace_to_program(self._traced_fun, dyn_args, dyn_kwargs, static,
                                          discharge_refs=True)
            except ref.ClosedOverRefs:
                pass
            else:
                self._remember_alike(key, traced)
                return traced
        return trace_to_program(self._traced_fun, dyn_args, dyn_kwargs, static)

    def _trace_nested(self, static, in_tree, leaves):
        """(program, captures, out_tree) of the function on `leaves`' types, with the values it
        closes over as its leading inputs; None when it touches Refs made outside it."""
        with tracing.open_trace() as trace:
            t_args, t_kwargs = tree_util.tree_unflatten(in_tree, [trace.new_input(x.aval) for x in leaves])
            t_args = _reinsert_static(t_args, static)
            t_kwargs.update((k, v) for k, v in static if isinstance(k, str))
            with ref.recording(trace, records_reads=True) as refs:
                out = self._traced_fun(*t_args, **t_kwargs)
            if refs.refs:
                return None
            out_leaves, out_tree = tree_util.tree_flatten(_float0_outside_the_program(out))
            program, captures = trace.finish_capturing(_as_results(self._traced_fun, out, out_leaves))
        captures = list(captures)
        if captures:
            n = len(captures)
            program = program.with_inputs([c.aval for c in captures] + [x.aval for x in leaves],
                                          [n + i for i in range(len(leaves))] + list(range(n)))
        program.name = self.__name__
        return program, captures, out_tree

    def _call(self, *args, **kwargs):
        try:
            if self._closed_refs:
                return ref.call_with_closed_refs(self, self._traced_fun, self._closed_refs, args, kwargs)
            return self._call_program(*args, **kwargs)
        except ref.ClosedOverRefs as found:
            self._closed_refs = [*self._closed_refs,
                                 *(r for r in found.refs if all(r is not c for c in self._closed_refs))]
            self.clear_cache()
            return ref.call_with_closed_refs(self, self._traced_fun, self._closed_refs, args, kwargs)

    def _call_program(self, *args, **kwargs):
        mesh = placement.eager_mesh()  # under jax.set_mesh the call is compiled for the mesh
        if self._fast and not kwargs:
            if mesh is not None:
                args = placement.onto_mesh(args, mesh, as_operands=True)
            key = tuple([x.signature for x in args if type(x) is _Array])
            if len(key) == len(args):
                key += (_mesh_context.mesh, _mesh_context.legacy)
                if flags.USER_CONTEXTS:
                    key += (flags.trace_context(),)
                entry = self._fast_cache.get(key)
                if entry is None:
                    (program, out_tree, _), _ = self._lookup(args, kwargs)
                    entry = self._fast_cache[key] = (program, out_tree,
                                                     out_tree.num_nodes == out_tree.num_leaves == 1)
                program, out_tree, single = entry
                if self._unplaced:
                    self._check_placement(program)
                device = placement.committed_device(args, self._sig.describe_leaf(args, kwargs))
                outs = program.run(args)
                if mesh is not None:
                    outs = placement.onto_mesh(outs, mesh, as_operands=False)
                if device is not None:
                    outs = placement.place(outs, device)
                else:
                    self._name_layouts(outs, auto_names.origin_of(args), out_tree)
                return outs[0] if single else tree_util.tree_unflatten(out_tree, outs)
        if not (self._sig.static_argnums or self._sig.static_argnames):
            with_refs = ref.call_with_refs(self, self._fun, args, kwargs)
            if with_refs is not None:
                return with_refs[0]
        if self._in_shardings is not None:
            args = jit_shardings.place_arguments(self._in_shardings, args, list(self._sig.params),
                                                 self._sig.static_argnums, self._api)
        (program, out_tree, donated), leaves = self._lookup(args, kwargs)
        return self.run_program(program, out_tree, donated, leaves,
                                self._sig.describe_leaf(args, kwargs))

    def run_program(self, program, out_tree, donated, leaves, describe):
        """Runs a program traced from this function on the array `leaves` (donating those
        `donated` marks) and places and names its results as a call does."""
        if self._unplaced:
            self._check_placement(program)
        device = placement.committed_device(leaves, describe)
        origin = auto_names.origin_of(leaves) if device is None else None
        # Donated arguments are deleted by the call (their values now belong to the program).
        outs = program.run(leaves) if donated is None else program.run(leaves, donated)
        mesh = placement.eager_mesh()
        if mesh is not None:
            outs = placement.onto_mesh(outs, mesh, as_operands=False)
        if device is not None:
            outs = placement.place(outs, device)
        else:
            self._name_layouts(outs, origin, out_tree)
        return tree_util.tree_unflatten(out_tree, outs)

    def _name_layouts(self, outs, origin, out_tree) -> None:
        """The results' shardings as JAX names them: an out_sharding as given, a layout
        propagation chose over Auto axes after the first argument, one over Explicit axes
        by the result's type (auto_names)."""
        auto_names.remember_origin(outs, origin)
        auto_names.name_typed_results(outs)
        if self._out_shardings is not None:
            jit_shardings.name_outputs(tree_util.tree_unflatten(out_tree, outs), self._out_shardings,
                                       self._api)

    def clear_cache(self) -> None:
        """Forgets every traced signature: the next call traces again."""
        self._cache.clear()
        self._traces.clear()
        self._fast_cache.clear()
        self._unplaced.clear()
        self._nested.clear()

    def trace_count(self) -> int:
        """How many signatures have been traced so far."""
        return len(self._traces)

    # --- The staging API (jax.stages): implemented in _src/stages.py ---------
    def trace(self, *args, **kwargs):
        """The traced program for these arguments (arrays or ShapeDtypeStructs)."""
        from meshsim._src import stages
        return stages.trace(self, args, kwargs)

    def lower(self, *args, **kwargs):
        """`trace(*args, **kwargs).lower()`: compile it for an abstract dry run."""
        return self.trace(*args, **kwargs).lower()

    def eval_shape(self, *args, **kwargs):
        """The shapes, dtypes and shardings this function returns for these arguments."""
        from meshsim._src import abstract
        return abstract.eval_shape(self, *args, **kwargs)
    # --- end of the staging API ----------------------------------------------


def jit(fun: Callable | None = None, *, in_shardings=None, out_shardings=None,
        static_argnums=None, static_argnames=None, donate_argnums=None, donate_argnames=None,
        keep_unused: bool = False, device=None, backend: str | None = None, inline: bool = False,
        compiler_options: dict | None = None, **unsupported):
    """Traces `fun` once per input signature and runs it as one compiled program.

    With `inline`, a call while another function is traced is written in place
    (otherwise it is one `jit` equation holding the function's program, as in
    JAX). `keep_unused` changes nothing here (unused arguments are never copied), nor
    `compiler_options` (XLA's flags; meshsim has no XLA). `device` and `backend`
    (JAX's older placement arguments, passed as None by libraries such as flax)
    are accepted when they ask for nothing."""
    if unsupported:  # Python's own text, as for JAX's jit (which takes no **kwargs)
        raise TypeError(f"jit() got an unexpected keyword argument {next(iter(unsupported))!r}")
    return _jit(fun, in_shardings, out_shardings, static_argnums, static_argnames, donate_argnums,
                donate_argnames, device, backend, inline=inline)


def _jit(fun, in_shardings, out_shardings, static_argnums, static_argnames, donate_argnums,
         donate_argnames, device, backend, api: str = "jit", inline: bool = False):
    """jit's (and the deprecated pjit's) wrapper of `fun`; `api` names it in errors."""
    if device is not None or backend not in (None, "cpu"):
        raise NotImplementedError(
            f"jit(device={device!r}, backend={backend!r}): place the inputs with "
            "jax.device_put or give in_shardings instead")
    if fun is None:
        return functools.partial(jit, in_shardings=in_shardings, out_shardings=out_shardings,
                                 static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                                 inline=inline)
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")
    wrapped = PjitFunction(fun, static_argnums, static_argnames, donate_argnums, donate_argnames,
                         in_shardings, out_shardings, api, inline)
    _share_traces(wrapped, fun, in_shardings, out_shardings, api)
    return wrapped


class JittedWhenTraced:
    """`fun` as JAX writes the jax.numpy and jax.nn functions it implements under jit (`_where`,
    `silu`, ...): called while a function is traced, one `jit` equation named after `fun` holding
    its program, as make_jaxpr shows; called on arrays, applied operation by operation. It is
    JAX's jitted function to a user: its repr (which equinox prints for a model's activation),
    `.lower`, `.trace` and `.eval_shape`."""

    def __init__(self, fun: Callable, static_argnames=(), inline: bool = False):
        functools.update_wrapper(self, fun)
        self._jitted = jit(fun, static_argnames=static_argnames, inline=inline)
        self._static_argnames = static_argnames
        self._inline = inline

    def __call__(self, *args, **kwargs):
        fun = self.__wrapped__
        if self._inline or _core.current_trace() is None or _config._values["jax_disable_jit"]:
            return fun(*args, **kwargs)
        if core.evaluated_now(tree_util.tree_leaves((args, kwargs))):
            return fun(*args, **kwargs)
        return self._jitted._call_nested(args, kwargs, self._jitted._nested)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._jitted, name)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __copy__(self):
        """A new jitted function of the same `fun`, as copying JAX's gives (a model holding
        `jnp.tanh` is deep-copied by libraries)."""
        copied = JittedWhenTraced(self.__wrapped__, self._static_argnames, self._inline)
        copied._jitted._copied = True
        return copied

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __repr__(self):
        return repr(self._jitted)


def jitted_when_traced(fun: Callable | None = None, *, static_argnames=(), inline: bool = False):
    """Decorates `fun` as a JittedWhenTraced; `inline` ones (JAX's `jit(inline=True)`) trace
    into their caller's program with no `jit` equation of their own."""
    if fun is None:
        return functools.partial(jitted_when_traced, static_argnames=static_argnames, inline=inline)
    return JittedWhenTraced(fun, static_argnames, inline)


# The traces of every `jit(fun, ...)` made from one function with the same static arguments and
# shardings: as in JAX, `jit(f)(x)` twice traces `f` once (its Python side effects happen once),
# and donation, which only changes how the program runs, does not trace again.
_SHARED_TRACES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _share_traces(wrapped: PjitFunction, fun, in_shardings, out_shardings, api: str) -> None:
    sig = wrapped._sig
    tracing = (tuple(sorted(sig.static_argnums)), tuple(sorted(sig.static_argnames)),
               in_shardings, out_shardings, api)
    donation = (tuple(sorted(sig.donate_argnums)), tuple(sorted(sig.donate_argnames)))
    try:
        by_options = _SHARED_TRACES.setdefault(fun, {})
        traces = by_options.setdefault(tracing, (wrapped._traces, wrapped._ref_variants,
                                                 wrapped._unplaced, wrapped._nested))
        calls = by_options.setdefault((tracing, donation), (wrapped._cache, wrapped._fast_cache))
    except TypeError:  # an unhashable or unreferenceable callable or option: its own caches
        return
    wrapped._traces, wrapped._ref_variants, wrapped._unplaced, wrapped._nested = traces
    wrapped._cache, wrapped._fast_cache = calls


def make_jaxpr(fun: Callable, static_argnums=()):
    """Returns a function that traces `fun` and gives back its program."""
    static_argnums = set(_as_tuple(static_argnums))

    @functools.wraps(fun)
    def make(*args, **kwargs):
        static = tuple((i, a) for i, a in enumerate(args) if i in static_argnums)
        dyn = [a for i, a in enumerate(args) if i not in static_argnums]
        if static or isinstance(fun, PjitFunction):  # a jitted function shows as its equation
            program, out_tree = trace_to_program(fun, dyn, kwargs, static)
        else:  # traced once per type with jit(fun)'s calls, as JAX traces it
            program, out_tree = jit(fun)._trace_for_types((), dyn, kwargs)
        return ClosedJaxpr(program, out_tree=out_tree)

    return make


@contextlib.contextmanager
def named_scope(name: str):
    """Names the operations traced inside (JAX shows them in profiles and HLO
    metadata, not in jaxprs); checks the name as JAX does."""
    if not isinstance(name, str):
        raise TypeError("named_scope name argument must be a string.")
    yield


def named_call(fun: Callable, *, name: str | None = None) -> Callable:
    """`fun`, staged under `name` (a profiling name; the program is unchanged)."""
    return fun


def block_until_ready(x):
    """Waits for every array in the pytree `x` (raising the error computing one
    raised, if any); returns `x`."""
    for leaf in tree_util.tree_leaves(x):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x


# Programs still running when the interpreter exits finish first.
atexit.register(_core.wait_all_dispatched)

"""How many devices a computation runs on, decided as JAX decides it before compiling, and
JAX's refusal of results typed over an all-Explicit mesh of another size.

JAX compiles every eager operation and every jitted call for a device assignment taken from
the first committed argument it uses (closed-over arrays do not count), a sharding fixed inside
the program (a `with_sharding_constraint`, a `shard_map`'s mesh, a `device_put`), the context
mesh set by `jax.set_mesh`, or else the default device alone. A result whose type names an
all-Explicit mesh of another size raises its ValueError. So an eager `jax.grad` over arrays
on such a mesh fails without `jax.set_mesh` (the cotangent seed of the loss is made from a
Python 1 typed over the loss's mesh), as does a jitted function whose only inputs are
closed-over arrays or uncommitted ones."""
from __future__ import annotations

import threading

from meshsim import _core
from meshsim._src.sharding.mesh import _context, context_mesh, get_abstract_mesh


def _explicit_mesh_size(aval) -> int | None:
    """The size of `aval`'s mesh when that mesh is non-empty and all its axes are Explicit."""
    sharding = getattr(aval, "sharding", None)
    mesh = getattr(sharding, "mesh", None)
    if mesh is None or mesh.empty or not mesh.are_all_axes_explicit:
        return None
    return mesh.size


def _describe(aval, batch: int | None = None) -> str:
    """`f32[8@x]({Explicit: ('x',)})`; with `batch`, as vmap's batched type shows it
    (`f32[1,8@x]`)."""
    names = tuple(aval.sharding.mesh.axis_names)
    text = aval.str_short(True)
    if batch is not None:
        head, dims = text.split("[", 1)
        text = f"{head}[{batch}{',' if dims != ']' else ''}{dims}"
    return f"{text}({{Explicit: {names!r}}})"


def _error(device_count: int, mesh_size: int, described: str) -> ValueError:
    return ValueError(
        f"Length of device assignment {device_count} is not equal to the size of the mesh "
        f"{mesh_size} of aval {described}. Please enter your `jit` into a mesh context via "
        "`jax.set_mesh`.")


def mismatch_error(aval, device_count: int, batch: int | None = None) -> ValueError:
    return _error(device_count, aval.sharding.mesh.size, _describe(aval, batch))


def check_abstract_placement(x, sharding) -> None:
    """An operation asked to type its result `x` by a sharding over an AbstractMesh (as taken
    from `jax.typeof(...).sharding`) without a context mesh: eagerly it runs on one device,
    which an all-Explicit mesh of more refuses (so does a jitted one, short of committed
    arguments on such a mesh, which we do not look for)."""
    mesh = sharding.mesh
    if not context_mesh().empty and not _context.legacy:
        return
    if mesh.empty or not mesh.are_all_axes_explicit or mesh.size == 1:
        return
    dims = []
    for i, n in enumerate(x.shape):
        axes = sharding.spec[i] if i < len(sharding.spec) else None
        if axes is None:
            dims.append(f"{n}")
        elif isinstance(axes, tuple):
            dims.append(f"{n}@({','.join(axes)})")
        else:
            dims.append(f"{n}@{axes}")
    dtype = x.aval.str_short(True).split("[")[0].lstrip("~")
    described = f"{dtype}[{','.join(dims)}]({{Explicit: {tuple(mesh.axis_names)!r}}})"
    raise _error(1, mesh.size, described)


def context_device_count() -> int:
    """Devices of a computation nothing else places: the context mesh's, or the default device.
    Under an abstract context mesh alone there are none, which JAX refuses."""
    mesh = context_mesh()
    if not mesh.empty and not _context.legacy:
        return mesh.size
    abstract = get_abstract_mesh()
    if mesh.empty and not abstract.empty:
        raise ValueError(
            "Passing lowering_platforms via jax.export or jit(f).trace(*args).lower("
            "lowering_platforms=...) is required when only AbstractMesh exists in a jitted "
            f"computation. Got context mesh: {abstract}")
    return 1


def check_results(avals, device_count: int) -> None:
    """Raises JAX's ValueError for the first of `avals` typed over an all-Explicit mesh whose
    size is not `device_count`."""
    for aval in avals:
        size = _explicit_mesh_size(aval)
        if size is not None and size != device_count:
            raise mismatch_error(aval, device_count)


def unplaced_result(avals) -> object | None:
    """The first of `avals` that would need a context mesh: typed over an all-Explicit mesh of
    more than one device (None when there is none)."""
    for aval in avals:
        size = _explicit_mesh_size(aval)
        if size is not None and size != 1:
            return aval
    return None


def _array_device_count(x) -> int | None:
    if type(x) is not _core.ArrayImpl or not x.committed:
        return None
    mesh = x.sharding_core.mesh
    return 1 if mesh is None else len(mesh.device_ids)


def _sub_programs(params: dict):
    for value in params.values():
        if isinstance(value, _core.Program):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from (v for v in value if isinstance(v, _core.Program))


def _fixed_inside(program) -> int | None:
    """Devices named by a sharding fixed inside `program` (a constraint or a shard_map's mesh)."""
    for name, _, _, params, *_ in program.equations():
        if name in ("sharding_constraint", "shard_map") and params.get("mesh") is not None:
            return len(params["mesh"].device_ids)
        for sub in _sub_programs(params):
            found = _fixed_inside(sub)
            if found is not None:
                return found
    return None


CONFLICTING = 0  # a device count no result is checked against


def program_device_count(program, leaves, placed_inside: int | None) -> int | None:
    """The device count a jitted `program` called with `leaves` is compiled for, when its
    arguments or its own shardings decide it (None: the context decides)."""
    counts = {_array_device_count(x) for x, is_used in zip(leaves, program.used_inputs()) if is_used}
    counts.discard(None)
    mesh = context_mesh()
    if counts and not mesh.empty and not _context.legacy:
        counts.add(mesh.size)
    if counts:  # arguments on other devices fail later with JAX's "incompatible devices"
        return counts.pop() if len(counts) == 1 else CONFLICTING
    fixed = _fixed_inside(program)
    return fixed if fixed is not None else placed_inside


# Devices of the device_puts made while a jitted function is traced (placement records them).
_tracing = threading.local()


class recording_placements:
    """While a jitted function is traced: remembers the first device_put's device count."""

    def __enter__(self):
        self.outer = getattr(_tracing, "value", None)
        _tracing.value = self
        self.count = None
        return self

    def __exit__(self, *exc):
        _tracing.value = self.outer
        return False


def note_device_put(device_count: int) -> None:
    recorder = getattr(_tracing, "value", None)
    if recorder is not None and recorder.count is None:
        recorder.count = device_count


def check_pullback(program, inputs, consts_committed: bool = False,
                   batch: int | None = None) -> None:
    """An eager backward pass, as JAX runs it one operation at a time: an operation none of
    whose operands is committed (computed from uncommitted cotangents alone) runs on the
    context's devices, so a result it types over an all-Explicit mesh needs that mesh.
    `consts_committed`: the forward pass ran on committed arrays, so the array constants the
    backward program holds are residuals JAX's forward operations left committed (scalar
    ones may be a transpose rule's own literals, which are not).
    `batch`: the pass runs under vmap over that many cotangents (jacrev), as errors show."""
    device_count = context_device_count()
    committed = {}
    for var, x in zip(program.invars, inputs):
        committed[var] = _array_device_count(x) is not None
    avals = program.avals
    for var in program.constvars:  # a constant typed over a mesh was an array laid out there
        mesh = getattr(avals[var].sharding, "mesh", None)
        committed[var] = (consts_committed and avals[var].ndim > 0) or (
            mesh is not None and not mesh.empty)
    # Values computed from the cotangents: the rest (constants and what is computed from
    # them alone) JAX computes in the forward pass, as committed residuals.
    from_cts = {var for var, x in zip(program.invars, inputs) if not committed[var]}
    equations = program.equations()
    for i, (_, ins, outs, *_) in enumerate(equations):
        derived = any(v in from_cts for v in ins)
        if derived:
            from_cts.update(outs)
        if (ins and any(committed.get(v, False) for v in ins)) or (consts_committed and not derived):
            for v in outs:
                committed[v] = True
            continue
        named = {a for v in ins for a in _axes_named(avals[v])}
        for v in outs:
            committed[v] = False
            size = _explicit_mesh_size(avals[v])
            # A layout its operands' types already name follows them (a transpose, a reshape of
            # the cotangent); one the operation adds (a transpose rule's out_sharding) is placed.
            if size is not None and size != device_count and not _axes_named(avals[v]) <= named:
                raise mismatch_error(avals[_through_reshards(equations[i + 1:], v)], device_count,
                                     batch)


def _axes_named(aval) -> set:
    return {a for axes in aval.spec for a in axes}


def _through_reshards(following, var: int) -> int:
    """`var`, or the result of the reshards applied to it next: JAX's transposes type their
    results at once where our backward programs broadcast first and lay out after."""
    for name, ins, outs, *_ in following:
        if name == "reshard" and list(ins) == [var]:
            var = outs[0]
    return var

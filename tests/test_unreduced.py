"""Unreduced and reduced types (JAX's {U:x} and {R:x}) against the installed JAX:
the types and errors of every op that meets them, the values once reduced, the
collectives of the reshards that perform the pending sums (against the text of
XLA's compiled program), their autodiff, the DTensor view (`Partial('sum')`),
and the examples of JAX's sharding documentation."""
import re

import numpy as np
import pytest

import meshsim
from auto_oracle import hlo_collectives, meshsim_collectives
from meshsim.sharding import placements as ms_placements


class Lib:
    """One library (meshsim or JAX) on a 2x4 mesh of Explicit axes X, Y."""

    def __init__(self, jax):
        self.jax = jax
        self.jnp = jax.numpy
        self.lax = jax.lax
        self.P = jax.sharding.PartitionSpec
        explicit = (jax.sharding.AxisType.Explicit,) * 2
        self.mesh = jax.make_mesh((2, 4), ("X", "Y"), axis_types=explicit)

    def put(self, value, *spec, **pending):
        return self.jax.device_put(np.asarray(value, np.float32), self.P(*spec, **pending))

    def arr(self, shape, *spec):
        return self.put(np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 7, *spec)


def _u(m, shape=(8, 8), *spec, axes=("X",)):
    """A value unreduced over `axes` (from a layout split over them)."""
    src = m.arr(shape, "X", "Y")
    return m.jax.reshard(src, m.P(*(spec or (None,) * len(shape)), unreduced=set(axes)))


def _r(m, shape=(8, 8), axes=("X",)):
    return m.jax.reshard(m.arr(shape), m.P(*(None,) * len(shape), reduced=set(axes)))


def _dot_u(m):
    a, b = m.arr((8, 4), None, "X"), m.arr((4, 8), "X", None)
    return m.jnp.dot(a, b, out_sharding=m.P(None, None, unreduced={"X"}))


_U = type("_Unreduced", (), {"__get__": lambda self, obj, cls=None: None})  # placeholder, see _sm


def _sm(m, body, in_spec, out_spec, x):
    """shard_map of `body` over the whole mesh; `_U` stands for P(None, None, unreduced={'X'})."""
    spec = lambda s: m.P(None, None, unreduced={"X"}) if s is _U else s  # noqa: E731
    return m.jax.shard_map(body, in_specs=spec(in_spec), out_specs=spec(out_spec))(x)


CASES = {
    # creating unreduced / reduced values
    "reshard_to_unreduced": lambda m: _u(m),
    "reshard_to_unreduced_keeps_X": lambda m: _u(m, (8, 8), "X", None, axes=("Y",)),
    "reshard_to_unreduced_both": lambda m: m.jax.reshard(m.arr((8, 8), "X", "Y"),
                                                         m.P(unreduced={"X", "Y"})),
    "reshard_replicated_to_unreduced": lambda m: m.jax.reshard(m.arr((8, 8)), m.P(None, None, unreduced={"Y"})),
    "reshard_to_reduced": lambda m: _r(m),
    "device_put_array_unreduced": lambda m: m.jax.device_put(m.arr((4, 4), "X", "Y"),
                                                             m.P("X", None, unreduced={"Y"})),
    "device_put_host_unreduced": lambda m: m.jax.device_put(np.ones((4, 4), np.float32),
                                                            m.P(None, None, unreduced={"X"})),
    "dot_out_unreduced": _dot_u,
    "dot_out_unreduced_sharded": lambda m: m.jnp.dot(m.arr((8, 4), None, "X"), m.arr((4, 8), "X", None),
                                                     out_sharding=m.P("Y", None, unreduced={"X"})),
    "einsum_out_unreduced": lambda m: m.jnp.einsum("ij,jk->ik", m.arr((8, 4), None, "X"), m.arr((4, 8), "X", None),
                                                   out_sharding=m.P(None, None, unreduced={"X"})),
    "dot_out_unreduced_wrong_axis": lambda m: m.jnp.dot(m.arr((8, 4), None, "X"), m.arr((4, 8), "X", None),
                                                        out_sharding=m.P(None, None, unreduced={"Y"})),
    "dot_out_unreduced_unsharded": lambda m: m.jnp.dot(m.arr((8, 4)), m.arr((4, 8)),
                                                       out_sharding=m.P(None, None, unreduced={"X"})),
    "dot_out_unreduced_mismatch": lambda m: m.jnp.dot(m.arr((8, 4), None, "X"), m.arr((4, 8), "Y", None),
                                                      out_sharding=m.P(None, None, unreduced={"X"})),
    "dot_ambiguous": lambda m: m.jnp.dot(m.arr((8, 4), None, "X"), m.arr((4, 8), "X", None)),
    "dot_of_unreduced": lambda m: m.jnp.dot(_u(m), _u(m).T),
    # which ops take unreduced operands
    "add": lambda m: _u(m) + _u(m),
    "add_mixed": lambda m: _u(m) + m.arr((8, 8)),
    "add_mixed_rhs": lambda m: m.arr((8, 8)) + _u(m),
    "add_scalar": lambda m: _u(m) + 1.0,
    "add_different_axes": lambda m: _u(m) + _u(m, axes=("Y",)),
    "sub": lambda m: _u(m) - _u(m),
    "neg": lambda m: -_u(m),
    "cos": lambda m: m.jnp.cos(_u(m)),
    "sin": lambda m: m.jnp.sin(_u(m)),
    "exp": lambda m: m.jnp.exp(_u(m)),
    "mul_scalar": lambda m: _u(m) * 2.0,
    "mul_reduced": lambda m: _u(m) * _r(m),
    "mul_reduced_lhs": lambda m: _r(m) * _u(m),
    "mul_both_unreduced": lambda m: _u(m) * _u(m),
    "sum0": lambda m: _u(m).sum(0),
    "sum_all": lambda m: _u(m).sum(),
    "transpose": lambda m: _u(m).T,
    "astype": lambda m: _u(m).astype(m.jnp.bfloat16),
    "dot_add": lambda m: _dot_u(m) + _dot_u(m),
    # reduced values
    "reduced_sin": lambda m: m.jnp.sin(_r(m)),
    "reduced_add": lambda m: _r(m) + _r(m),
    "reduced_mixed_axes": lambda m: _r(m) + _r(m, axes=("Y",)),
    "reduced_with_sharded": lambda m: _r(m) + m.arr((8, 8), "X", None),
    # parallel.md's four readings of jnp.dot(f32[8,4@X], f32[4@X,16]), each asked for by out_sharding
    "doc_dot_all_reduce": lambda m: m.jnp.dot(m.arr((8, 4), None, "X"), m.arr((4, 16), "X", None),
                                              out_sharding=m.P(None, None)),
    "doc_dot_reduce_scatter_rows": lambda m: m.jnp.dot(m.arr((8, 4), None, "X"), m.arr((4, 16), "X", None),
                                                       out_sharding=m.P("X", None)),
    "doc_dot_reduce_scatter_cols": lambda m: m.jnp.dot(m.arr((8, 4), None, "X"), m.arr((4, 16), "X", None),
                                                       out_sharding=m.P(None, "X")),
    "doc_dot_unreduced": lambda m: m.jnp.dot(m.arr((8, 4), None, "X"), m.arr((4, 16), "X", None),
                                             out_sharding=m.P(None, None, unreduced={"X"})),
    # reduced axes in a contraction's out_sharding are dropped (the result is not reduced)
    "dot_out_reduced_dropped": lambda m: m.jnp.dot(m.arr((8, 4), None, "X"), m.arr((4, 16), "X", None),
                                                   out_sharding=m.P(None, None, reduced={"Y"})),
    "dot_out_sharded_reduced_dropped": lambda m: m.jnp.dot(
        m.arr((8, 4), None, "X"), m.arr((4, 16), "X", None), out_sharding=m.P("Y", None, reduced={"X"})),
    "dot_out_unreduced_and_reduced": lambda m: m.jnp.dot(
        m.arr((8, 4), None, "X"), m.arr((4, 16), "X", None),
        out_sharding=m.P(None, None, unreduced={"X"}, reduced={"Y"})),
    "dot_general_out_unreduced": lambda m: m.lax.dot_general(
        m.arr((8, 4), None, "X"), m.arr((4, 16), "X", None), (((1,), (0,)), ((), ())),
        out_sharding=m.P(None, None, unreduced={"X"})),
    "matmul_out_unreduced": lambda m: m.jnp.matmul(m.arr((8, 4), None, "X"), m.arr((4, 16), "X", None),
                                                   out_sharding=m.P(None, None, unreduced={"X"})),
    # gradients: a weight reduced over the batch axis gets its gradient unreduced there
    "grad_of_reduced_weight": lambda m: m.jax.grad(lambda w, b: m.jnp.dot(b, w).sum())(
        _r(m, (16, 8)), m.arr((8, 16), "X", None)),
    "grad_of_reduced_weight_closure": lambda m: (lambda b: m.jax.grad(lambda w: m.jnp.dot(b, w).sum())(
        _r(m, (16, 8))))(m.arr((8, 16), "X", None)),
    "grad_of_reduced_weight_jit": lambda m: m.jax.jit(m.jax.grad(lambda w, b: (m.jnp.dot(b, w) ** 2).sum()))(
        _r(m, (16, 8)), m.arr((8, 16), "X", None)),
    "vjp_of_reduced_weight": lambda m: (lambda b: m.jax.vjp(lambda w: m.jnp.dot(b, w), _r(m, (16, 8)))[1](
        m.jnp.ones((8, 8), out_sharding=m.P("X", None)))[0])(m.arr((8, 16), "X", None)),
    "grad_through_unreduced_closure": lambda m: (lambda y: m.jax.grad(lambda x: m.jax.reshard(
        m.jnp.dot(x, y, out_sharding=m.P(None, None, unreduced={"X"})), m.P()).sum())(
        m.arr((8, 4), None, "X")))(m.arr((4, 16), "X", None)),
    # moving unreduced values: only a reshard keeping the pending sums transfers them
    "device_put_unreduced_same": lambda m: m.jax.device_put(_u(m), m.P(None, None, unreduced={"X"})),
    "device_put_unreduced_resplit": lambda m: m.jax.device_put(_u(m), m.P("Y", None, unreduced={"X"})),
    "device_put_unreduced_replicated": lambda m: m.jax.device_put(_u(m), m.P()),
    "device_put_unreduced_reduced": lambda m: m.jax.device_put(_u(m), m.P(None, None, reduced={"X"})),
    "device_put_unreduced_device": lambda m: m.jax.device_put(_u(m), m.jax.devices()[0]),
    "device_put_unreduced_none": lambda m: m.jax.device_put(_u(m)),
    "device_put_reduced_to_unreduced": lambda m: m.jax.device_put(_r(m), m.P(None, None, unreduced={"X"})),
    "copy_unreduced": lambda m: m.jnp.array(_u(m)),
    "jit_identity_unreduced": lambda m: m.jax.jit(lambda a: a)(_u(m)),
    # shard_map bodies meeting pending sums (in_specs/out_specs carrying them, JAX's casts)
    "sm_in_unreduced_identity": lambda m: _sm(m, lambda v: v, _U, _U, _dot_u(m)),
    "sm_in_unreduced_psum": lambda m: _sm(m, lambda v: m.lax.psum(v, "X"), _U, m.P(), _dot_u(m)),
    "sm_in_unreduced_psum_other_axis": lambda m: _sm(m, lambda v: m.lax.psum(v, "Y"), _U, _U, _dot_u(m)),
    "sm_psum_scatter_unreduced": lambda m: _sm(m, lambda v: m.lax.psum_scatter(v, "X", tiled=True),
                                               _U, m.P("X", None), _dot_u(m)),
    "sm_psum_scatter_unreduced_dim1": lambda m: _sm(
        m, lambda v: m.lax.psum_scatter(v, "X", scatter_dimension=1, tiled=True), _U, m.P(None, "X"), _dot_u(m)),
    "sm_psum_scatter_unreduced_untiled": lambda m: _sm(
        m, lambda v: m.lax.psum_scatter(v[:2], "X"), _U, m.P("X"), _dot_u(m)),
    "sm_all_gather_reduced": lambda m: _sm(m, lambda v: m.lax.all_gather(v, "X", tiled=True, to="reduced"),
                                           m.P("X", None), m.P(None, None, reduced={"X"}), m.arr((8, 8), "X", None)),
    "sm_all_gather_reduced_axis1": lambda m: _sm(
        m, lambda v: m.lax.all_gather(v, "Y", axis=1, tiled=True, to="reduced"), m.P("X", "Y"),
        m.P("X", None, reduced={"Y"}), m.arr((8, 8), "X", "Y")),
    "sm_all_gather_reduced_untiled": lambda m: _sm(m, lambda v: m.lax.all_gather(v, "X", to="reduced"),
                                                   m.P("X", None), m.P(None, None, None, reduced={"X"}),
                                                   m.arr((8, 8), "X", None)),
    "sm_out_unreduced_cast": lambda m: _sm(m, lambda v: m.lax.pcast(v, "X", to="unreduced"), m.P("X", None),
                                           _U, m.arr((8, 8), "X", None)),
    "sm_out_unreduced_implicit": lambda m: _sm(m, lambda v: v, m.P("X", None), _U, m.arr((8, 8), "X", None)),
    "sm_out_reduced": lambda m: _sm(m, lambda v: m.lax.pcast(v, "X", to="reduced"), m.P(),
                                    m.P(None, None, reduced={"X"}), m.arr((8, 8))),
    "sm_out_reduced_missing": lambda m: _sm(m, lambda v: v, m.P(), m.P(None, None, reduced={"X"}), m.arr((8, 8))),
    "sm_in_spec_drops_unreduced": lambda m: _sm(m, lambda v: v, m.P(), m.P(), _dot_u(m)),
    "sm_in_spec_adds_unreduced": lambda m: _sm(m, lambda v: v, _U, _U, m.arr((8, 8))),
    "sm_pmax_unreduced": lambda m: _sm(m, lambda v: m.lax.pmax(v, "X"), _U, m.P(), _dot_u(m)),
    "sm_all_gather_unreduced": lambda m: _sm(m, lambda v: m.lax.all_gather(v, "X"), _U, m.P(), _dot_u(m)),
    "sm_ppermute_unreduced": lambda m: _sm(m, lambda v: m.lax.ppermute(v, "X", [(0, 1), (1, 0)]), _U, _U,
                                           _dot_u(m)),
    # performing the reduction
    "reshard_from_unreduced_replicated": lambda m: m.jax.reshard(_u(m), m.P()),
    "reshard_from_unreduced_sharded": lambda m: m.jax.reshard(_u(m), m.P("X", None)),
    "reshard_from_unreduced_both": lambda m: m.jax.reshard(_u(m), m.P("X", "Y")),
    "reshard_dot_to_sharded": lambda m: m.jax.reshard(_dot_u(m), m.P("X", "Y")),
}


@pytest.fixture(scope="module")
def libs(real_jax):
    return Lib(meshsim), Lib(real_jax)


def _sets_sorted(text: str) -> str:
    """A Python set of frozensets in a message, its members sorted (a set prints in hash order)."""
    return re.sub(r"\{(frozenset\(\{[^}]*\}\)(, frozenset\(\{[^}]*\}\))+)\}",
                  lambda m: "{" + ", ".join(sorted(re.findall(r"frozenset\(\{[^}]*\}\)", m.group(1)))) + "}",
                  text)


def outcome(lib: Lib, case):
    """The result's type, or the error's class name and message."""
    with lib.jax.set_mesh(lib.mesh):
        try:
            return "ok", str(lib.jax.typeof(case(lib)))
        except Exception as e:  # noqa: BLE001 - the class name is compared
            return type(e).__name__, _sets_sorted(str(e))


@pytest.mark.parametrize("name", sorted(CASES))
def test_types_and_errors_match_jax(libs, name):
    ours, theirs = (outcome(lib, CASES[name]) for lib in libs)
    assert ours == theirs


def _reduced_value(lib: Lib, case):
    """The case's value once its pending sums are performed (a reshard to replicated)."""
    with lib.jax.set_mesh(lib.mesh):
        x = case(lib)
        return np.asarray(lib.jax.reshard(x, lib.P(*(None,) * x.ndim)), np.float32)


@pytest.mark.parametrize("name", [n for n in sorted(CASES) if n not in {
    "add_mixed", "add_mixed_rhs", "add_scalar", "add_different_axes", "sub", "neg", "cos", "sin", "exp",
    "mul_scalar", "mul_both_unreduced", "dot_of_unreduced", "dot_ambiguous", "reduced_mixed_axes",
    "reduced_with_sharded", "dot_out_unreduced_wrong_axis", "dot_out_unreduced_unsharded",
    "dot_out_unreduced_mismatch", "device_put_host_unreduced", "device_put_unreduced_replicated",
    "device_put_unreduced_reduced", "device_put_unreduced_device", "sm_out_reduced_missing",
    "sm_in_spec_drops_unreduced", "sm_in_spec_adds_unreduced", "sm_pmax_unreduced", "sm_all_gather_unreduced",
    "sm_ppermute_unreduced"}])
def test_values_match_jax(libs, name):
    ours, theirs = (_reduced_value(lib, CASES[name]) for lib in libs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-2 if name == "astype" else 1e-5)


def _blocks(x):
    return [np.asarray(s.data) for s in x.addressable_shards]


@pytest.mark.parametrize("make", ["reshard_to_unreduced", "reshard_to_unreduced_keeps_X",
                                  "reshard_to_unreduced_both", "reshard_replicated_to_unreduced",
                                  "device_put_array_unreduced", "dot_out_unreduced", "add", "sum0"])
def test_each_device_holds_jaxs_partial_sum(libs, make):
    """The blocks themselves (not only their sum) are JAX's: a reshard keeps each device's
    own part, zeros elsewhere."""
    ours, theirs = [], []
    for lib, out in zip(libs, (ours, theirs)):
        with lib.jax.set_mesh(lib.mesh):
            out.extend(_blocks(CASES[make](lib)))
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_unreduced_has_no_host_value(libs):
    for lib in libs:
        with lib.jax.set_mesh(lib.mesh):
            y = _u(lib)
            with pytest.raises(NotImplementedError, match="device_indices_map doesn't work with unreduced"):
                np.asarray(y)
    ours, theirs = (repr(_u_in(lib)) for lib in libs)
    assert ours.replace("memory_kind=device", "") == theirs.replace("memory_kind=device", "")


def _u_in(lib):
    with lib.jax.set_mesh(lib.mesh):
        return _u(lib)


def test_shardings_print_as_jax(libs):
    for attr in ("sharding", "typeof"):
        ours, theirs = [], []
        for lib, out in zip(libs, (ours, theirs)):
            with lib.jax.set_mesh(lib.mesh):
                for make in (_u, _r, _dot_u):
                    x = make(lib)
                    s = x.sharding if attr == "sharding" else lib.jax.typeof(x).sharding
                    out.append((repr(s.spec), s.spec.unreduced, s.spec.reduced, repr(lib.jax.typeof(x))))
        assert ours == theirs


PROGRAMS = {
    "dot_unreduced": lambda m, a, b: m.jnp.dot(a, b, out_sharding=m.P(None, None, unreduced={"X"})),
    "dot_unreduced_then_replicated": lambda m, a, b: m.jax.reshard(
        m.jnp.dot(a, b, out_sharding=m.P(None, None, unreduced={"X"})), m.P()),
    "dot_unreduced_then_sharded": lambda m, a, b: m.jax.reshard(
        m.jnp.dot(a, b, out_sharding=m.P(None, None, unreduced={"X"})), m.P("X", None)),
    "dot_unreduced_then_both": lambda m, a, b: m.jax.reshard(
        m.jnp.dot(a, b, out_sharding=m.P(None, None, unreduced={"X"})), m.P("X", "Y")),
    "two_dots_added_then_reduced": lambda m, a, b: m.jax.reshard(
        m.jnp.dot(a, b, out_sharding=m.P(None, None, unreduced={"X"}))
        + m.jnp.dot(a, b * 2, out_sharding=m.P(None, None, unreduced={"X"})), m.P(None, "Y")),
    "dot_out_reduced_dropped": lambda m, a, b: m.jnp.dot(a, b, out_sharding=m.P("Y", None, reduced={"X"})),
    "dot_out_split_over_other_axis": lambda m, a, b: m.jnp.dot(a, b, out_sharding=m.P(None, "Y")),
    "psum_scatter_of_unreduced": lambda m, a, b: _sm(
        m, lambda v: m.lax.psum_scatter(v, "X", tiled=True), _U, m.P("X", None),
        m.jnp.dot(a, b, out_sharding=m.P(None, None, unreduced={"X"}))),
    "psum_scatter_of_unreduced_dim1": lambda m, a, b: _sm(
        m, lambda v: m.lax.psum_scatter(v, "X", scatter_dimension=1, tiled=True), _U, m.P(None, "X"),
        m.jnp.dot(a, b, out_sharding=m.P(None, None, unreduced={"X"}))),
    "sum_of_unreduced": lambda m, a, b: m.jax.reshard(
        m.jnp.dot(a, b, out_sharding=m.P(None, None, unreduced={"X"})).sum(0), m.P()),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_collectives_match_xlas(libs, name):
    """The pending sums cost what XLA's compiled program spends: none while unreduced, an
    all-reduce of each device's block where a reshard performs them (then local slices)."""
    ms, jx = libs
    results = []
    for lib in libs:
        with lib.jax.set_mesh(lib.mesh):
            a, b = lib.arr((8, 16), None, "X"), lib.arr((16, 8), "X", None)
            fn = lib.jax.jit(lambda a, b, lib=lib: PROGRAMS[name](lib, a, b))
            out = fn(a, b)
            if lib is jx:
                text = fn.lower(a, b).compile().as_text()
                ids = np.vectorize(lambda d: d.id)(lib.mesh.devices)
                found = hlo_collectives(text, ids, lib.mesh.axis_names)
            else:
                with lib.jax.debug.record_collectives() as log:
                    out = fn(a, b)
                found = meshsim_collectives(log, lib.mesh.axis_names)
            results.append((found, str(lib.jax.typeof(out))))
    assert results[0] == results[1]


def _loss(m, a, b, target):
    c = m.jnp.dot(a, b, out_sharding=m.P(None, None, unreduced={"X"}))
    return (m.jax.reshard(c, target) ** 2).sum()


@pytest.mark.parametrize("target", [(), ("X", None)], ids=str)
def test_grad_through_unreduced(libs, target):
    """The cotangent of a value reduced from unreduced is reduced (JAX's transpose of the
    reshard), and the gradients are JAX's in value and type."""
    outs = []
    for lib in libs:
        with lib.jax.set_mesh(lib.mesh):
            a, b = lib.arr((8, 4), None, "X"), lib.arr((4, 8), "X", None)
            grad = lib.jax.grad(lambda a, b: _loss(lib, a, b, lib.P(*target)), argnums=(0, 1))
            ga, gb = grad(a, b)
            jga, jgb = lib.jax.jit(grad)(a, b)
            jaxpr_types = re.findall(r"f32\[[^\]]*\]\{[UR]:[^}]*\}", str(lib.jax.make_jaxpr(grad)(a, b)))
            outs.append((np.asarray(ga), np.asarray(gb), np.asarray(jga), str(lib.jax.typeof(ga)),
                         str(lib.jax.typeof(gb)), jaxpr_types))
    (ours, theirs) = outs
    for x, y in zip(ours[:3], theirs[:3]):
        np.testing.assert_allclose(x, y, rtol=1e-4)
    assert ours[3:] == theirs[3:]


def test_placements_show_partial_sum_and_round_trip(libs):
    ms = libs[0]
    with ms.jax.set_mesh(ms.mesh):
        for make, want in ((_u, "(Partial(sum), Replicate())"),
                           (lambda m: _u(m, (8, 8), "X", None, axes=("Y",)), "(Shard(dim=0), Partial(sum))"),
                           (lambda m: ms.jax.reshard(m.arr((8, 8), "X", "Y"), m.P(unreduced={"X", "Y"})),
                            "(Partial(sum), Partial(sum))")):
            x = make(ms)
            p = ms_placements(x)
            assert str(p) == want
            back = meshsim.sharding.from_placements(ms.mesh, p, x.ndim)
            assert back.spec.unreduced == x.sharding.spec.unreduced
            assert ms_placements(back) == p
            y = ms.jax.reshard(ms.arr((8, 8), "X", "Y"), back)
            assert ms_placements(y) == p
            np.testing.assert_allclose(np.asarray(ms.jax.reshard(y, ms.P())), np.asarray(ms.arr((8, 8))),
                                       rtol=1e-6)


# JAX 0.10.2's documentation: parallel.md (cells 16-18) and the manual types of
# shard_map (new_shard_map.md), run as written with `jax` either library.
DOC_PROGRAMS = {
    "parallel_md_unreduced": """
mesh = jax.make_mesh((4, 2), ('X', 'Y'), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
with jax.set_mesh(mesh):
    x = jnp.arange(8 * 4.).reshape(8, 4)
    x = jax.device_put(x, jax.P('X', 'Y'))
    y = jax.device_put(x, jax.P('X', None, unreduced={'Y'}))
    print(y.sharding)
    for s in y.addressable_shards:
        print(s.device, s.data, sep='\\n', end='\\n\\n')
""",
    "shard_map_manual_types": """
mesh = jax.make_mesh((2,), ('i',), axis_types=(jax.sharding.AxisType.Explicit,))
with jax.set_mesh(mesh):
    x_sharded = jax.device_put(jnp.arange(8.), jax.P('i'))
    x_replicated = jnp.arange(4.)
    x_unreduced = jnp.einsum('i,i->', x_sharded, x_sharded,
                             out_sharding=jax.P(unreduced={'i'}))
    x_reduced = jax.reshard(x_replicated, jax.P(reduced={'i'}))

    @jax.shard_map(in_specs=(jax.P('i'), jax.P(), jax.P(unreduced={'i'}),
                             jax.P(reduced={'i'})),
                   out_specs=jax.P('i'))
    def f(a, b, c, d):
        print(jax.typeof(a))
        print(jax.typeof(b))
        print(jax.typeof(c))
        print(jax.typeof(d))
        return a

    _ = f(x_sharded, x_replicated, x_unreduced, x_reduced)
    print(np.asarray(_))
""",
    "shard_map_pcast_and_psum": """
mesh = jax.make_mesh((2, 4), ('i', 'j'), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
with jax.set_mesh(mesh):
    x = jax.device_put(jnp.arange(32.).reshape(8, 4), jax.P('i', 'j'))

    traced = []  # print while tracing once (a grad may trace the body again)

    @jax.jit
    @jax.shard_map(in_specs=jax.P('i', 'j'), out_specs=jax.P(None, 'j'))
    def f(a):
        print = __builtins__["print"] if not traced else (lambda *a: None)
        traced.append(1)
        u = jax.lax.pcast(a, 'i', to='unreduced')
        print(jax.typeof(u), jax.typeof(u + u))
        for bad in ('reduced', 'varying'):
            try:
                jax.lax.pcast(u, 'i', to=bad)
            except ValueError as e:
                print(type(e).__name__, e)
        try:
            jnp.sin(u)
        except NotImplementedError as e:
            print(type(e).__name__, e)
        r = jax.lax.pcast(jax.lax.psum(a, 'i'), 'i', to='reduced')
        v = jax.lax.pcast(r, 'i', to='varying')
        print(jax.typeof(r), jax.typeof(v), jax.typeof(u * r))
        s = jax.lax.psum(u + u, 'i')
        print(jax.typeof(s))
        return s

    print(jax.typeof(f(x)), np.asarray(f(x)).tolist())
    g = jax.grad(lambda x: f(x).sum())(x)
    print(jax.typeof(g), np.asarray(g).tolist())
""",
}


def _run_doc(lib, src: str) -> str:
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(src, {"jax": lib, "jnp": lib.numpy, "np": np})  # noqa: S102 - the documentation's program
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(DOC_PROGRAMS))
def test_documentation_examples_print_as_jax(real_jax, name):
    ours, theirs = (_run_doc(lib, DOC_PROGRAMS[name]) for lib in (meshsim, real_jax))
    assert ours.replace("TFRT_CPU_", "cpu:") == theirs.replace("TFRT_CPU_", "cpu:")


def test_grad_through_psum_scatter_of_unreduced(libs):
    """psum_scatter of a pending sum (JAX's unreduced_reduce_scatter) transposes to a gather
    typed reduced: the gradients are JAX's in value and type."""
    outs = []
    for lib in libs:
        with lib.jax.set_mesh(lib.mesh):
            a, b = lib.arr((8, 16), None, "X"), lib.arr((16, 8), "X", None)

            def loss(a, b, lib=lib):
                c = lib.jnp.dot(a, b, out_sharding=lib.P(None, None, unreduced={"X"}))
                d = _sm(lib, lambda v: lib.lax.psum_scatter(v, "X", tiled=True), _U, lib.P("X", None), c)
                return (d ** 2).sum()

            ga, gb = lib.jax.grad(loss, argnums=(0, 1))(a, b)
            outs.append((np.asarray(ga), np.asarray(gb), str(lib.jax.typeof(ga)), str(lib.jax.typeof(gb))))
    (ours, theirs) = outs
    for x, y in zip(ours[:2], theirs[:2]):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-4)
    assert ours[2:] == theirs[2:]

"""shard_map: semantics against NumPy and real JAX, error texts against JAX's,
and the simulated mesh executor (determinism, large meshes, failures)."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import meshsim as jax
import meshsim.numpy as jnp
from meshsim.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P



@pytest.fixture
def mesh():
    return jax.make_mesh((4, 2), ("dp", "tp"))


def _auto_mesh(j, shape=(4, 2), names=("dp", "tp")):
    """The same mesh under meshsim or JAX (`j`), with Auto axes so that JAX
    accepts plain NumPy inputs."""
    return j.make_mesh(shape, names, axis_types=(j.sharding.AxisType.Auto,) * len(shape))


def _message(fn, exc=ValueError) -> str:
    with pytest.raises(exc) as info:
        fn()
    return str(info.value)


def _same_error(real_jax, build, exc=ValueError, normalize=lambda s: s):
    """`build(j)` makes a call under module `j`; both must raise `exc` with the
    same text (after `normalize`)."""
    ours = normalize(_message(lambda: build(jax), exc))
    theirs = normalize(_message(lambda: build(real_jax), exc))
    assert ours == theirs


def _sorted_frozensets(text: str) -> str:
    """frozenset reprs print in hash order; compare them sorted."""
    return re.sub(r"frozenset\(\{([^}]*)\}\)",
                  lambda m: "frozenset({" + ", ".join(sorted(m.group(1).split(", "))) + "})", text)


def _tracer_class(text: str) -> str:
    return re.sub(r"<class '[\w.]*Tracer'>", "<class 'Tracer'>", text)


X = np.arange(32, dtype=np.float32).reshape(8, 4)


# --- forms and the mesh -------------------------------------------------------

def test_decorator_and_function_forms_agree(mesh):
    def body(a):
        return a * 2

    decorated = jax.shard_map(mesh=mesh, in_specs=P("dp"), out_specs=P("dp"))(body)

    @jax.shard_map(mesh=mesh, in_specs=P("dp"), out_specs=P("dp"))
    def stacked(a):
        return a * 2

    called = jax.shard_map(body, mesh=mesh, in_specs=P("dp"), out_specs=P("dp"))
    for f in (decorated, stacked, called, jax.jit(called)):
        np.testing.assert_array_equal(np.asarray(f(X)), X * 2)
    assert called.__name__ == "body"


def test_specs_are_keyword_only(real_jax):
    def build(j):
        return j.shard_map(lambda a: a, _auto_mesh(j), j.P(), j.P())
    _same_error(real_jax, build, TypeError)


def test_mesh_none_uses_the_context_mesh(mesh):
    f = jax.shard_map(lambda a: jax.lax.psum(a, "dp"), in_specs=P("dp"), out_specs=P())
    with jax.set_mesh(mesh):
        np.testing.assert_array_equal(np.asarray(f(X)), X.reshape(4, 2, 4).sum(0))
        assert str(jax.typeof(jax.jit(f)(X))) == "float32[2,4]"
    jax.set_mesh(jax.make_mesh((2, 4), ("dp", "tp")))  # global, until cleared
    try:
        g = jax.shard_map(lambda a: jax.lax.psum(a, "dp"), in_specs=P("dp"), out_specs=P())
        np.testing.assert_array_equal(np.asarray(g(X)), X.reshape(2, 4, 4).sum(0))
    finally:
        jax.set_mesh(None)


def test_mesh_must_match_the_context_mesh(real_jax):
    def build(j):
        with j.set_mesh(_auto_mesh(j, (2, 4))):
            return j.shard_map(lambda a: a, mesh=_auto_mesh(j), in_specs=j.P("dp"),
                               out_specs=j.P("dp"))(X)
    _same_error(real_jax, build)


def test_nested_shard_map_with_a_concrete_mesh_matches_jax(real_jax):
    def build(j):
        m = _auto_mesh(j)
        inner = j.shard_map(lambda b: b * 2, mesh=m, in_specs=j.P("tp"), out_specs=j.P("tp"),
                            axis_names={"tp"})
        return j.shard_map(inner, mesh=m, in_specs=j.P("dp"), out_specs=j.P("dp"),
                           axis_names={"dp"})(np.arange(16, dtype=np.float32))
    _same_error(real_jax, build)


@pytest.mark.parametrize("case", ["axis_names_unknown", "axis_names_list", "mesh_not_a_mesh",
                                  "in_specs_inferred_on_auto_mesh"])
def test_mesh_and_axis_names_errors_match_jax(real_jax, case):
    def build(j):
        m = _auto_mesh(j)
        kwargs = {"axis_names_unknown": dict(mesh=m, axis_names={"zz"}, in_specs=j.P()),
                  "axis_names_list": dict(mesh=m, axis_names=["dp"], in_specs=j.P()),
                  "mesh_not_a_mesh": dict(mesh=3, in_specs=j.P()),
                  "in_specs_inferred_on_auto_mesh": dict(mesh=_auto_mesh(j, (8,), ("i",)))}[case]
        return j.shard_map(lambda a: a, out_specs=j.P(), **kwargs)(X)
    exc = ValueError if case == "axis_names_unknown" else TypeError
    _same_error(real_jax, build, exc, normalize=_sorted_frozensets)


def test_mesh_none_without_context_mesh_matches_jax(real_jax):
    msg = _message(lambda: jax.shard_map(lambda a: a, in_specs=P(), out_specs=P())(X))
    with pytest.raises(ValueError) as info:
        real_jax.shard_map(lambda a: a, in_specs=P(), out_specs=P())(X)
    assert msg == str(info.value)


# --- specs as pytree prefixes ---------------------------------------------------

def test_dict_tuple_and_list_arguments_and_outputs(mesh):
    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=({"x": P("dp"), "w": P(None, "tp")}, [P(), None]),
                   out_specs={"y": P("dp", "tp"), "pair": (P("dp"), [P()])})
    def f(params, extra):
        y = params["x"] @ params["w"]
        return {"y": y + extra[0], "pair": (params["x"], [extra[1] * 2])}

    w = np.arange(8, dtype=np.float32).reshape(4, 2)
    out = f({"x": X, "w": w}, [np.float32(1.0), np.arange(3, dtype=np.int32)])
    np.testing.assert_array_equal(np.asarray(out["y"]), X @ w + 1)
    np.testing.assert_array_equal(np.asarray(out["pair"][0]), X)
    assert isinstance(out["pair"][1], list)
    np.testing.assert_array_equal(np.asarray(out["pair"][1][0]), np.arange(3) * 2)
    assert str(jax.typeof(out["y"])) == "float32[8@dp,2@tp]"


def test_spec_leaf_is_a_prefix_of_a_subtree(mesh):
    f = jax.shard_map(lambda d: {k: v + 1 for k, v in d.items()}, mesh=mesh,
                      in_specs=P("dp"), out_specs=P("dp"))
    out = f({"a": X, "b": X[:, :2]})
    np.testing.assert_array_equal(np.asarray(out["b"]), X[:, :2] + 1)
    assert str(jax.typeof(out["a"])) == "float32[8@dp,4]"


def test_none_in_specs_means_replicated(real_jax):
    def run(j):
        f = j.shard_map(lambda a, b: a + b, mesh=_auto_mesh(j), in_specs=(None, j.P("dp")),
                        out_specs=j.P("dp"))
        return np.asarray(j.jit(f)(X[:2], X))
    np.testing.assert_array_equal(run(jax), run(real_jax))
    np.testing.assert_array_equal(run(jax), X + np.tile(X[:2], (4, 1)))


@pytest.mark.parametrize("case", [
    "in_specs_too_many", "in_specs_dict_keys", "out_specs_too_many", "out_specs_tuple_for_leaf",
    "out_specs_none"])
def test_spec_tree_mismatch_matches_jax(real_jax, case):
    def build(j):
        m = _auto_mesh(j)
        sm = j.shard_map
        f = {
            "in_specs_too_many": lambda: sm(lambda a, b: a, mesh=m, in_specs=(j.P(), j.P(), j.P()),
                                            out_specs=j.P())(X, X),
            "in_specs_dict_keys": lambda: sm(lambda d: d["u"], mesh=m, in_specs=({"v": j.P()},),
                                             out_specs=j.P())({"u": X}),
            "out_specs_too_many": lambda: sm(lambda a: (a, a), mesh=m, in_specs=j.P(),
                                             out_specs=(j.P(), j.P(), j.P()))(X),
            "out_specs_tuple_for_leaf": lambda: sm(lambda a: a, mesh=m, in_specs=j.P(),
                                                   out_specs=(j.P(), j.P()))(X),
            "out_specs_none": lambda: sm(lambda a: a, mesh=m, in_specs=j.P(), out_specs=None)(X),
        }[case]
        return j.jit(lambda: f())()
    _same_error(real_jax, build, normalize=_tracer_class)


def test_list_out_specs_for_list_outputs(real_jax):
    def run(j):
        f = j.shard_map(lambda a: [a, a * 2], mesh=_auto_mesh(j), in_specs=j.P(),
                        out_specs=[j.P(), j.P("dp")])
        return [np.asarray(v) for v in f(X)]
    for ours, theirs in zip(run(jax), run(real_jax)):
        np.testing.assert_array_equal(ours, theirs)


# --- tracing ------------------------------------------------------------------------

def test_body_traced_once_under_jit(mesh, capsys):
    traces = []

    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=P("dp"), out_specs=P("dp"))
    def f(a):
        traces.append(a.shape)
        print("tracing", jax.typeof(a))
        return a + 1

    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(f(X)), X + 1)
    assert traces == [(2, 4)]
    assert capsys.readouterr().out == "tracing float32[2,4]{V:dp}\n"
    f(np.zeros((16, 4), np.float32))  # a new signature: one more trace
    assert traces == [(2, 4), (4, 4)]


def test_types_inside_the_body_and_of_results(mesh):
    seen = {}

    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=(P("dp", None), P(None, "tp"), P(("tp", "dp"))),
                   out_specs=(P("dp", "tp"), P(("tp", "dp")), P(), P("dp")))
    def f(x, w, v):
        y = x @ w
        s = jax.lax.psum(y, ("dp", "tp"))
        seen.update(x=jax.typeof(x), w=jax.typeof(w), v=jax.typeof(v), y=jax.typeof(y),
                    s=jax.typeof(s), i=jax.typeof(jax.lax.axis_index("tp")))
        return y, v, s, s

    x = np.ones((1024, 4096), np.float32)
    w = np.ones((4096, 256), np.float32)
    y, v, s, s_dp = f(x, w, np.arange(8, dtype=np.int32))
    assert {k: str(t) for k, t in seen.items()} == {
        "x": "float32[256,4096]{V:dp}", "w": "float32[4096,128]{V:tp}",
        "v": "int32[1]{V:(dp,tp)}", "y": "float32[256,128]{V:(dp,tp)}",
        "s": "float32[256,128]", "i": "int32[]{V:tp}"}
    assert repr(seen["y"]) == "ShapedArray(float32[256,128]{V:(dp,tp)})"
    assert str(jax.typeof(y)) == "float32[1024@dp,256@tp]"
    assert str(jax.typeof(v)) == "int32[8@(tp,dp)]"
    assert str(jax.typeof(s)) == "float32[256,128]"
    assert str(jax.typeof(s_dp)) == "float32[1024@dp,128]"
    np.testing.assert_array_equal(np.asarray(v), np.arange(8))
    np.testing.assert_array_equal(np.asarray(s), np.full((256, 128), 4096 * 8, np.float32))


def test_types_match_jax_on_explicit_mesh(real_jax):
    def run(j):
        m = j.make_mesh((4, 2), ("dp", "tp"))
        NS = j.sharding.NamedSharding
        x = j.device_put(np.ones((64, 32), np.float32), NS(m, j.P("dp", "tp")))
        v = j.device_put(np.arange(8, dtype=np.int32), NS(m, j.P(("tp", "dp"))))
        seen = []

        @j.jit
        @j.shard_map(mesh=m, in_specs=(j.P("dp", "tp"), j.P(("tp", "dp"))),
                     out_specs=(j.P("dp", "tp"), j.P(("tp", "dp")), j.P(None, "tp")))
        def f(a, b):
            c = j.lax.psum(a, "dp")
            seen.extend(str(j.typeof(t)) for t in (a, b, a * b[0], c, c + 1.5))
            return a, b, c

        return seen + [str(j.typeof(r)) for r in f(x, v)]
    assert run(jax) == run(real_jax)


def test_replicated_outputs_are_stored_once(mesh):
    @jax.shard_map(mesh=mesh, in_specs=P("dp", "tp"), out_specs=(P(), P("dp"), P("dp", "tp"),
                                                                 P(None, "tp")))
    def f(a):
        s = jax.lax.psum(a, ("dp", "tp"))
        return s, jax.lax.psum(a, "tp"), a, jax.lax.psum(a, "dp")

    whole, rows, blocks, cols = f(X)
    assert [r.distinct_buffers() for r in (whole, rows, blocks, cols)] == [1, 4, 8, 2]
    np.testing.assert_array_equal(np.asarray(whole), X.reshape(4, 2, 2, 2).sum((0, 2)))
    np.testing.assert_array_equal(np.asarray(blocks), X)


def test_invariant_output_under_sharded_out_spec_repeats_it(real_jax):
    def run(j):
        f = j.shard_map(lambda a: jnp_of(j).ones(2) * a.sum(), mesh=_auto_mesh(j),
                        in_specs=j.P(), out_specs=j.P("dp"))
        return np.asarray(j.jit(f)(X))
    np.testing.assert_array_equal(run(jax), run(real_jax))
    np.testing.assert_array_equal(run(jax), np.full(8, X.sum(), np.float32))


def jnp_of(j):
    return jnp if j is jax else j.numpy


# --- replication check ----------------------------------------------------------

# (mesh shape, axis names, body, in_specs, out_specs) with specs built from `P`.
REPLICATION_CASES = {
    "two_axes_P()": lambda P: ((4, 2), ("dp", "tp"), lambda a: a, P("dp"), P()),
    "one_axis_unmentioned": lambda P: ((4, 2), ("dp", "tp"), lambda a: a, P("dp", "tp"),
                                       P("dp")),
    "one_axis_mesh": lambda P: ((8,), ("i",), lambda a: a, P("i"), P()),
    "three_axes": lambda P: ((2, 2, 2), ("x", "y", "z"), lambda a: a, P("x", ("y", "z")),
                             P("x")),
    "rank0": lambda P: ((4, 2), ("dp", "tp"), lambda a: a.sum(), P("dp"), P()),
    "several_outputs": lambda P: ((4, 2), ("dp", "tp"), lambda a: {"a": a, "b": (a, a)},
                                  P("dp", "tp"), {"a": P(), "b": (P("dp"), P(("tp", "dp")))}),
    "prefix_spec": lambda P: ((4, 2), ("dp", "tp"), lambda a: (a, a), P("dp"), P()),
}


@pytest.mark.parametrize("case", sorted(REPLICATION_CASES))
def test_replication_error_matches_jax(real_jax, case):
    def build(j):
        shape, names, body, in_spec, out_spec = REPLICATION_CASES[case](j.P)

        def varying_output(a):
            return body(a)

        f = j.shard_map(varying_output, mesh=_auto_mesh(j, shape, names), in_specs=in_spec,
                        out_specs=out_spec)
        return j.jit(f)(X)
    _same_error(real_jax, build)


def test_check_vma_false(real_jax):
    def run(j):
        seen = []

        @j.jit
        @j.shard_map(mesh=_auto_mesh(j), in_specs=j.P("dp"), out_specs=(j.P(), j.P("dp")),
                     check_vma=False)
        def f(a):
            s = j.lax.psum(a, "tp")  # invariant data, summed anyway: 2x
            seen.extend(str(j.typeof(t)) for t in (a, s))
            return a, s
        a, s = f(X)
        return seen, np.asarray(a), np.asarray(s)
    ours, theirs = run(jax), run(real_jax)
    assert ours[0] == theirs[0] == ["float32[2,4]", "float32[2,4]"]
    np.testing.assert_array_equal(ours[1], theirs[1])  # one device's block: the first
    np.testing.assert_array_equal(ours[1], X[:2])
    np.testing.assert_array_equal(ours[2], X * 2)


def test_psum_of_invariant_value_scales_by_axis_size(real_jax):
    def run(j):
        f = j.shard_map(lambda a: (j.lax.psum(a, "tp"), j.lax.psum(j.lax.psum(a, "dp"), "dp")),
                        mesh=_auto_mesh(j), in_specs=j.P("dp"), out_specs=(j.P("dp"), j.P()))
        return [np.asarray(r) for r in j.jit(f)(X)]
    for ours, theirs in zip(run(jax), run(real_jax)):
        np.testing.assert_array_equal(ours, theirs)


# --- closures, scalars, edge shapes -------------------------------------------

def test_closure_over_outer_jit_tracer(real_jax):
    def run(j):
        def outer(a, c):
            scale = c * 2
            inner = j.shard_map(lambda b: b * scale + scale.sum(), mesh=_auto_mesh(j),
                                in_specs=j.P("dp"), out_specs=j.P("dp"))
            return inner(a)
        return np.asarray(j.jit(outer)(X, np.arange(4, dtype=np.float32)))
    np.testing.assert_array_equal(run(jax), run(real_jax))
    np.testing.assert_array_equal(run(jax), X * np.arange(4) * 2 + 12)


def test_closure_over_concrete_array(mesh):
    c = jnp.arange(4.0)
    seen = []

    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=P("dp"), out_specs=P("dp"))
    def f(a):
        seen.append(str(jax.typeof(c)))
        return a + c

    np.testing.assert_array_equal(np.asarray(f(X)), X + np.arange(4))
    assert seen == ["float32[4]"]  # a closed-over array is invariant


def test_python_scalars_returned(real_jax):
    def run(j):
        f = j.shard_map(lambda a: (3, 2.5, True), mesh=_auto_mesh(j), in_specs=j.P("dp"),
                        out_specs=j.P())
        outs = j.jit(f)(X)
        return [(str(j.typeof(o)), np.asarray(o).item()) for o in outs]
    assert run(jax) == run(real_jax) == [("~int32[]", 3), ("~float32[]", 2.5), ("bool[]", True)]


def test_zero_size_blocks(real_jax):
    def run(j):
        m = _auto_mesh(j)
        rows = j.shard_map(lambda a: a * 2, mesh=m, in_specs=j.P("dp"), out_specs=j.P("dp"))
        cols = j.shard_map(lambda a: a.sum(0), mesh=m, in_specs=j.P(None, "dp"),
                           out_specs=j.P("dp"))
        r = rows(np.zeros((0, 3), np.float32))
        c = cols(np.zeros((0, 8), np.float32))
        return r.shape, np.asarray(c)
    ours, theirs = run(jax), run(real_jax)
    assert ours[0] == theirs[0] == (0, 3)
    np.testing.assert_array_equal(ours[1], theirs[1])


def test_rank0_inputs_and_outputs(real_jax):
    def run(j):
        f = j.shard_map(lambda s, a: (s * 2, j.lax.psum(a.sum(), ("dp", "tp"))),
                        mesh=_auto_mesh(j), in_specs=(j.P(), j.P("dp", "tp")), out_specs=j.P())
        return [(str(j.typeof(o)), np.asarray(o).item()) for o in j.jit(f)(np.float32(3), X)]
    assert run(jax) == run(real_jax) == [("float32[]", 6.0), ("float32[]", float(X.sum()))]


# --- meshes on some of the devices ----------------------------------------------------

def test_mesh_on_a_subset_of_devices():
    mesh4 = Mesh(np.array(jax.devices()[:4]), ("tp",))
    f = jax.shard_map(lambda a: jax.lax.psum(a, "tp"), mesh=mesh4, in_specs=P("tp"),
                      out_specs=P())
    out = jax.jit(f)(np.arange(8.0, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(out), [12.0, 16.0])
    assert {d.id for d in out.sharding.device_set} == {0, 1, 2, 3}
    assert jax.shard_map(lambda a: jax.lax.axis_index("tp")[None], mesh=mesh4, in_specs=P(),
                         out_specs=P("tp"))(X).tolist() == [0, 1, 2, 3]


def test_two_meshes_sharing_devices():
    devices = jax.devices()
    a = Mesh(np.array(devices[:4]), ("i",))
    b = Mesh(np.array(devices[2:6]).reshape(2, 2), ("x", "y"))
    fa = jax.jit(jax.shard_map(lambda v: v * (jax.lax.axis_index("i") + 1), mesh=a,
                               in_specs=P("i"), out_specs=P("i")))
    fb = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "y"), mesh=b, in_specs=P(("x", "y")),
                               out_specs=P("x")))
    v = np.ones(8, np.float32)
    ra = fa(v)
    rb = fb(ra)  # placed on `a`, split again for `b`
    np.testing.assert_array_equal(np.asarray(ra), [1, 1, 2, 2, 3, 3, 4, 4])
    np.testing.assert_array_equal(np.asarray(rb), [3, 3, 7, 7])
    assert {d.id for d in rb.sharding.device_set} == {2, 3, 4, 5}
    np.testing.assert_array_equal(np.asarray(fa(v)), np.asarray(ra))  # `a` still works


# --- spec errors against JAX ---------------------------------------------------------

SPEC_ERRORS = {
    "unknown_axis": lambda j, m: j.shard_map(lambda a: a, mesh=m, in_specs=j.P("zz"),
                                             out_specs=j.P())(X),
    "unknown_axes_nested": lambda j, m: j.shard_map(
        lambda a, b: a, mesh=m, in_specs=(j.P("q"), {"z": j.P(None, "r")}),
        out_specs=j.P())(X, {"z": X}),
    "unknown_out_axis": lambda j, m: j.shard_map(lambda a: a, mesh=m, in_specs=j.P("dp"),
                                                 out_specs=j.P("zz"))(X),
    "in_spec_too_long": lambda j, m: j.shard_map(lambda a: a, mesh=m,
                                                 in_specs=j.P("dp", None, None),
                                                 out_specs=j.P())(X),
    "in_spec_too_long_varargs": lambda j, m: j.shard_map(
        lambda a, *rest: a, mesh=m, in_specs=(j.P(), j.P("dp", None, None)), out_specs=j.P())(X, X),
    "in_spec_too_long_nested": lambda j, m: j.shard_map(
        lambda d: d["a"], mesh=m, in_specs=({"a": j.P("dp", None, None)},), out_specs=j.P())(
        {"a": X}),
    "in_spec_too_long_rank0": lambda j, m: j.shard_map(lambda a: a, mesh=m, in_specs=j.P("dp"),
                                                       out_specs=j.P())(np.float32(3)),
    "out_spec_too_long": lambda j, m: j.shard_map(lambda a: a, mesh=m, in_specs=j.P("dp"),
                                                  out_specs=j.P("dp", None, None))(X),
    "out_spec_too_long_rank0": lambda j, m: j.shard_map(
        lambda a: (a, {"k": a.sum()}), mesh=m, in_specs=j.P("dp"),
        out_specs=(j.P("dp"), {"k": j.P("dp")}))(X),
    "not_divisible": lambda j, m: j.shard_map(lambda a: a, mesh=m, in_specs=j.P(None, "dp"),
                                              out_specs=j.P())(np.zeros((8, 6), np.float32)),
    "not_divisible_multi_axis": lambda j, m: j.shard_map(
        lambda a: a, mesh=m, in_specs=j.P(("dp", "tp")), out_specs=j.P())(np.zeros(12, np.float32)),
    "not_divisible_several": lambda j, m: j.shard_map(
        lambda a, b: a, mesh=m, in_specs=({"w": j.P(None, "dp")}, j.P("dp")), out_specs=j.P())(
        {"w": np.zeros((4, 6), np.float32)}, np.zeros(3, np.float32)),
}


@pytest.mark.parametrize("case", sorted(SPEC_ERRORS))
def test_spec_error_matches_jax(real_jax, case):
    def build(j):
        m = _auto_mesh(j)
        return j.jit(lambda: SPEC_ERRORS[case](j, m))()
    _same_error(real_jax, build, normalize=_sorted_frozensets)


def test_duplicate_axis_matches_jax(real_jax):
    # Eager: under jit JAX 0.10.2 reports a replication error for this spec instead.
    # JAX's DuplicateSpecError is no ValueError; ours is (it names a bad value).
    def build(j):
        return j.shard_map(lambda a: a, mesh=_auto_mesh(j), in_specs=j.P("dp", "dp"),
                           out_specs=j.P("dp", "dp"))(X)
    _same_error(real_jax, build, Exception)
    with pytest.raises(ValueError):
        build(jax)


def test_spec_leaf_of_wrong_type(real_jax):
    def build(j):
        return j.shard_map(lambda a, b: a, mesh=_auto_mesh(j), in_specs=(j.P(), 3),
                           out_specs=j.P())(X, X)
    _same_error(real_jax, build, TypeError)


# --- Explicit meshes: plain inputs are split (a deliberate leniency) ----------------

def test_explicit_mesh_accepts_plain_and_replicated_inputs(mesh):
    f = jax.shard_map(lambda a: a * 2, mesh=mesh, in_specs=P("dp", "tp"),
                      out_specs=P("dp", "tp"))
    replicated = jax.device_put(X, NamedSharding(mesh, P()))
    for arg in (X, jnp.asarray(X), replicated):
        out = f(arg)
        np.testing.assert_array_equal(np.asarray(out), X * 2)
        assert str(jax.typeof(out)) == "float32[8@dp,4@tp]"


def test_explicit_mesh_plain_input_is_refused_by_jax(real_jax):
    m = real_jax.make_mesh((4, 2), ("dp", "tp"))
    with pytest.raises(ValueError, match="does not match the specs of the input"):
        real_jax.shard_map(lambda a: a, mesh=m, in_specs=real_jax.P("dp"),
                           out_specs=real_jax.P("dp"))(X)


@pytest.mark.parametrize("have", [P("tp"), P("tp", "dp"), P(None, "dp")])
def test_explicit_mesh_differently_sharded_input_matches_jax(real_jax, have):
    def build(j):
        m = j.make_mesh((4, 2), ("dp", "tp"))
        x = j.device_put(X, j.sharding.NamedSharding(m, j.P(*have)))
        return j.jit(j.shard_map(lambda a: a, mesh=m, in_specs=j.P("dp"), out_specs=j.P("dp")))(x)
    _same_error(real_jax, build)


def test_partial_manual_keeps_explicit_sharding_of_other_axes(mesh):
    x = jax.device_put(X, NamedSharding(mesh, P("dp", "tp")))
    f = jax.jit(jax.shard_map(lambda a: a * 2, mesh=mesh, in_specs=P("dp"), out_specs=P("dp"),
                              axis_names={"dp"}))
    np.testing.assert_array_equal(np.asarray(f(x)), X * 2)


def test_partial_manual_types_match_jax(real_jax):
    # Only the manual axis shrinks the block; the still-Explicit tp dimension keeps its global
    # size and annotation (float32[2,8@tp]{V:dp}), and the result is typed over both.
    def run(j):
        m = j.make_mesh((4, 2), ("dp", "tp"))
        x = j.device_put(X, j.sharding.NamedSharding(m, j.P("dp", "tp")))
        seen = []
        f = j.jit(j.shard_map(lambda a: seen.append(str(j.typeof(a))) or a, mesh=m,
                              in_specs=j.P("dp"), out_specs=j.P("dp"), axis_names={"dp"}))
        out = f(x)
        return seen + [str(j.typeof(out)), str(out.sharding.spec), np.asarray(out).tolist()]
    assert run(jax) == run(real_jax)


def test_explicit_mesh_inferred_in_specs(real_jax):
    def run(j):
        m = j.make_mesh((4, 2), ("dp", "tp"))
        x = j.device_put(X, j.sharding.NamedSharding(m, j.P("tp", "dp")))
        out = j.shard_map(lambda a: a + 1, mesh=m, out_specs=j.P("tp", "dp"))(x)
        return str(j.typeof(out)), np.asarray(out)
    ours, theirs = run(jax), run(real_jax)
    assert ours[0] == theirs[0] == "float32[8@tp,4@dp]"
    np.testing.assert_array_equal(ours[1], theirs[1])


# --- the mesh executor ---------------------------------------------------------------

def _run_python(code: str, env_extra=None, timeout=120) -> str:
    # The subprocess imports the meshsim this process imported (in-tree or installed).
    package_root = os.path.dirname(os.path.dirname(jax.__file__))
    env = dict(os.environ, PYTHONPATH=package_root, **(env_extra or {}))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


DETERMINISM = """
    import hashlib, os, sys
    # Threads the process has before meshsim (a sanitizer's runtime may add its own).
    threads_before = len(os.listdir("/proc/self/task"))
    cpus = sys.argv[1:] and int(sys.argv[1])
    if cpus:  # before TBB starts: its default concurrency follows the affinity mask
        os.sched_setaffinity(0, set(range(cpus)))
    import numpy as np
    import meshsim as jax
    from meshsim.sharding import PartitionSpec as P
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 512)).astype(np.float32)
    w = rng.standard_normal((512, 64)).astype(np.float32)

    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=(P("dp", "tp"), P("tp")), out_specs=(P("dp"), P()))
    def f(a, b):
        y = jax.lax.psum(a @ b, "tp")
        return y, jax.lax.pmax(jax.lax.psum(y.sum(0), "dp"), "tp")

    h = hashlib.sha256()
    for _ in range(3):
        for out in f(x, w):
            h.update(np.asarray(out).tobytes())
    print(h.hexdigest(), len(os.listdir("/proc/self/task")) - threads_before)
"""


def test_results_bit_identical_across_runs_and_thread_counts():
    script = DETERMINISM.replace("sys.argv[1:] and int(sys.argv[1])", "{cpus}")
    one, threads = _run_python(script.format(cpus=1)).split()
    # One thread added, the mesh's dispatch stream: every device ran on the stream's thread.
    # ThreadSanitizer's runtime starts its own background thread with the first thread made.
    under_tsan = "libtsan" in os.environ.get("LD_PRELOAD", "")
    assert threads == ("2" if under_tsan else "1")
    default = _run_python(script.format(cpus=0)).split()[0]
    again = _run_python(script.format(cpus=0)).split()[0]
    assert one == default == again


@pytest.mark.parametrize("devices,shape", [(64, (8, 8)), (512, (8, 8, 8))])
def test_large_meshes(devices, shape):
    out = _run_python(f"""
        import time
        import numpy as np
        import meshsim as jax
        from meshsim.sharding import PartitionSpec as P
        start = time.perf_counter()
        assert jax.device_count() == {devices}
        names = ("a", "b", "c")[:{len(shape)}]
        mesh = jax.make_mesh({shape}, names)
        x = np.arange({devices} * 64, dtype=np.float32).reshape({devices} * 4, 16) / 64
        w = np.arange(128, dtype=np.float32).reshape(16, 8) / 64

        @jax.jit
        @jax.shard_map(mesh=mesh, in_specs=(P(names), P()), out_specs=(P(names), P()))
        def f(xb, wb):
            y = xb @ wb
            return y, jax.lax.psum(y.sum(0), names)

        y, s = f(x, w)
        np.testing.assert_allclose(np.asarray(y), x @ w, rtol=1e-5)
        np.testing.assert_allclose(np.asarray(s), (x @ w).sum(0), rtol=1e-4)
        print(jax.typeof(y), s.distinct_buffers(), time.perf_counter() - start)
    """, {"MESHSIM_NUM_DEVICES": str(devices)})
    typ, buffers, seconds = out.split()
    assert typ == f"float32[{devices * 4}@({','.join('abc'[:len(shape)])}),8]"
    assert buffers == "1"
    assert float(seconds) < 20


def test_error_on_the_devices_is_raised_once_and_the_mesh_stays_usable(mesh):
    @jax.shard_map(mesh=mesh, in_specs=P("dp"), out_specs=P("dp"))
    def too_big(a):
        # Types fine, but every device fails to allocate 256 TiB when it runs.
        return (jnp.ones((2 ** 46,), np.float32) * a.sum())[:2]

    with pytest.raises(MemoryError):
        too_big(X)
    out = jax.jit(too_big)(X)  # raised when the result is awaited, as JAX does
    with pytest.raises(MemoryError):
        out.block_until_ready()
    with pytest.raises(MemoryError):  # and at every read
        np.asarray(out)
    ok = jax.jit(jax.shard_map(lambda a: jax.lax.psum(a, "dp"), mesh=mesh, in_specs=P("dp"),
                               out_specs=P()))
    np.testing.assert_array_equal(np.asarray(ok(X)), X.reshape(4, 2, 4).sum(0))


def test_collective_runtime_error_is_raised_once_and_the_mesh_stays_usable():
    mesh = jax.make_mesh((4,), ("i",))

    def exchange(x, sizes):
        offsets = jnp.zeros(4, jnp.int32)
        return jax.lax.ragged_all_to_all(x, jnp.zeros_like(x), offsets, sizes, offsets, sizes,
                                         axis_name="i")

    f = jax.jit(jax.shard_map(exchange, mesh=mesh, in_specs=(P("i"), P("i")), out_specs=P("i"),
                              check_vma=False))
    bad = np.zeros(16, np.int32)
    bad[8] = 100  # only device 2 asks to send rows it does not have
    with pytest.raises(ValueError, match=r"^ragged_all_to_all: .*device 2 .*100"):
        np.asarray(f(np.arange(16, dtype=np.float32), bad))
    np.testing.assert_array_equal(np.asarray(f(np.arange(16, dtype=np.float32),
                                               np.zeros(16, np.int32))), np.zeros(16))


# --- debugging views inside the body ------------------------------------------------------

def test_inspect_array_sharding_inside_the_body_matches_jax(real_jax):
    def run(j):
        m = j.make_mesh((4, 2), ("dp", "tp"))
        x = j.device_put(X, j.sharding.NamedSharding(m, j.P("dp", "tp")))
        seen = []

        def body(a):
            j.debug.inspect_array_sharding(a, callback=lambda s: seen.append(repr(s)))
            return a
        j.block_until_ready(j.jit(j.shard_map(body, mesh=m, in_specs=j.P("dp", "tp"),
                                              out_specs=j.P("dp", "tp")))(x))
        return seen
    assert run(jax) == run(real_jax)


def test_visualize_array_sharding_inside_the_body(mesh, capsys):
    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=P("dp"), out_specs=P())
    def f(a):
        jax.debug.visualize_array_sharding(a)
        jax.debug.visualize_array_sharding(jax.lax.psum(a, "dp"))
        return jax.lax.psum(a, "dp")

    f(X)
    f(X)  # drawn while tracing: once
    assert capsys.readouterr().out == textwrap.dedent("""\
        float32[2,4]{V:dp}: 4 distinct blocks over Mesh('dp': 4, 'tp': 2) (varies over dp, the same along tp)
        ┌────────────────┬────────────────┐
        │ CPU 0: block 0 │ CPU 1: block 0 │
        ├────────────────┼────────────────┤
        │ CPU 2: block 1 │ CPU 3: block 1 │
        ├────────────────┼────────────────┤
        │ CPU 4: block 2 │ CPU 5: block 2 │
        ├────────────────┼────────────────┤
        │ CPU 6: block 3 │ CPU 7: block 3 │
        └────────────────┴────────────────┘
        float32[2,4]: 1 distinct block over Mesh('dp': 4, 'tp': 2) (the same on every device)
        ┌────────────────┬────────────────┐
        │ CPU 0: block 0 │ CPU 1: block 0 │
        ├────────────────┼────────────────┤
        │ CPU 2: block 0 │ CPU 3: block 0 │
        ├────────────────┼────────────────┤
        │ CPU 4: block 0 │ CPU 5: block 0 │
        ├────────────────┼────────────────┤
        │ CPU 6: block 0 │ CPU 7: block 0 │
        └────────────────┴────────────────┘
        """)


# --- work invariant over an axis is done once ---------------------------------------------

def test_invariant_work_is_shared_along_the_axes(mesh):
    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=(P("dp"), P(None, "tp")), out_specs=(P("dp", "tp"),) * 3)
    def f(x, b):
        a = jnp.sin(x) * 2          # invariant over tp: computed on one device per dp row
        g = jax.lax.all_gather(a, "dp", tiled=True)  # still invariant over tp
        return a, g[:2] + 1, a + b  # the last varies over tp: device (i, 1) needs `a` too

    b = np.arange(8, dtype=np.float32).reshape(1, 8)
    a, g, ab = f(X, b)
    expected = np.sin(X) * 2
    np.testing.assert_allclose(np.asarray(a), np.tile(expected, (1, 2)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g), np.tile(np.tile(expected[:2], (4, 1)) + 1, (1, 2)),
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ab), np.concatenate(
        [expected + b[:, :4], expected + b[:, 4:]], axis=1), rtol=1e-6)
    # The tp pair of each dp row holds one computed block, not two equal ones.
    assert a.distinct_buffers() == 4
    assert g.distinct_buffers() == 4
    assert ab.distinct_buffers() == 8


def test_sharing_follows_buffers_when_types_do_not_say(mesh):
    # check_vma=False: nothing in the types; blocks equal along tp are one buffer.
    f = jax.shard_map(lambda x: (x * 3, x * jax.lax.axis_index("tp")), mesh=mesh,
                      in_specs=P("dp"), out_specs=(P("dp", "tp"), P("dp", "tp")), check_vma=False)
    same, differ = f(X)
    np.testing.assert_array_equal(np.asarray(same), np.tile(X * 3, (1, 2)))
    np.testing.assert_array_equal(np.asarray(differ),
                                  np.concatenate([X * 0, X * 1], axis=1))
    assert same.distinct_buffers() == 4
    assert differ.distinct_buffers() == 8


def test_work_on_ragged_all_to_all_results_is_not_shared_wrongly():
    # JAX types the result as its output buffer (here an invariant zeros) and checks
    # nothing; its values differ by device, so work on it must run on every device.
    mesh = jax.make_mesh((2, 2), ("i", "j"))

    def body(x):
        me = jax.lax.axis_index("i")
        sizes = jnp.ones(2, jnp.int32)
        out = jax.lax.ragged_all_to_all(x, jnp.zeros(2, x.dtype), jnp.arange(2, dtype=jnp.int32),
                                        sizes, jnp.full(2, me, jnp.int32), sizes, axis_name="i")
        return (out * 10)[None]  # receiver r: out[s] = sender s's row r

    blocks = np.arange(8, dtype=np.float32).reshape(2, 2, 2)  # [i, j, row]
    want = blocks.transpose(2, 1, 0) * 10                      # [r, j, s]
    for check_vma in (True, False):
        f = jax.shard_map(body, mesh=mesh, in_specs=P(("i", "j")), out_specs=P(("i", "j")),
                          check_vma=check_vma)
        got = np.asarray(f(blocks.reshape(8)))
        np.testing.assert_array_equal(got.reshape(2, 2, 2), want)


def test_results_on_an_auto_mesh_are_laid_out_as_out_specs(real_jax):
    # Auto axes are not in types: the result is typed unsharded but its blocks stay where the
    # out_specs put them (no gather to a replicated layout), as in JAX.
    def run(j):
        m = j.sharding.Mesh(np.array(j.devices()).reshape(2, 4), ("dp", "tp"))
        f = j.shard_map(lambda a: a * 2, mesh=m, in_specs=j.P("dp", "tp"), out_specs=j.P("dp", "tp"))
        g = j.shard_map(lambda a: a, mesh=m, in_specs=j.P("dp", "tp"), out_specs=j.P(None, "tp"),
                        check_vma=False)
        return [(str(j.typeof(out)), str(out.sharding.spec)) for out in (f(X), j.jit(f)(X), g(X))]
    assert run(jax) == run(real_jax)

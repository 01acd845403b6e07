"""jit's staging API (trace / lower / compile) and abstract compilation:
memory_analysis against JAX's own on CPU (arguments and outputs exact, temp
within 25%), cost_analysis, shardings, calling a Compiled, and per-device
sizes and collectives of sharded programs on meshes of thousands of devices."""
import numpy as np
import pytest

import meshsim
import meshsim as jax
import meshsim.numpy as jnp
from meshsim import lax
from meshsim.sharding import NamedSharding, PartitionSpec as P


def _mlp(x, w1, w2):
    h = jax.nn.relu(x @ w1)
    return jnp.mean((h @ w2) ** 2)


def _deep(x, w):
    for _ in range(3):
        x = jnp.tanh(x @ w)
    return x


def _scan_layers(x, ws):
    # (sin, not tanh: JAX's tanh rule saves 1 - tanh(x) beside tanh(x), one more
    # residual per iteration than meshsim's, a difference of rules, not of liveness.)
    def body(c, w):
        return jnp.sin(c @ w), None
    return lax.scan(body, x, ws)[0].sum()


def _attention(q, k, v):
    s = jnp.einsum("bqd,bkd->bqk", q, k) / 8.0
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bqk,bkd->bqd", p, v)


def _derived_weight_scan(w, xs):
    # The weight's transform depends on the constant alone: computed once, kept
    # for the backward pass once (not per iteration). (float32: XLA:CPU runs a
    # bfloat16 matmul in float32, converting what the backward loop reads.)
    def body(c, x):
        return c + jnp.sin(x @ jnp.exp(-w * w)).sum(), None
    return lax.scan(body, 0.0, xs)[0]


def _train_step(params, x, y):
    def loss(p):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        return jnp.mean((h @ p["w2"] - y) ** 2)
    value, grads = jax.value_and_grad(loss)(params)
    return value, jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


def _remat_scan(ws, x):
    f = jax.checkpoint(lambda c, w: jnp.tanh(jnp.tanh(c @ w) @ w))
    return lax.scan(lambda c, w: (f(c, w), None), x, ws)[0].sum()


def _adam_over_layers(params, m, v, x):
    grads = jax.grad(lambda p: _scan_layers(x, p))(params)
    m = 0.9 * m + 0.1 * grads
    v = 0.99 * v + 0.01 * grads * grads
    return params - 1e-3 * m / (jnp.sqrt(v) + 1e-8), m, v


def _programs(lib):
    """(name, function, argument shapes, donate_argnums) for lib = meshsim or jax."""
    rng = np.random.default_rng(0)
    b, d, h = (int(v) for v in rng.choice([64, 128, 256], 3))
    return [
        ("two outputs", lambda x, w: (lib.numpy.sum(lib.numpy.tanh(x @ w) * 2.0),
                                      lib.numpy.tanh(x @ w)), [(b, d), (d, h)], ()),
        ("deep", _deep, [(512, 512), (512, 512)], ()),
        ("deep donated", _deep, [(512, 512), (512, 512)], (0,)),
        ("mlp grad", lib.grad(_mlp, argnums=(1, 2)), [(b, d), (d, h), (h, d)], ()),
        ("scan grad", lib.grad(_scan_layers, argnums=1), [(128, 256), (4, 256, 256)], ()),
        ("attention", _attention, [(4, 256, 64)] * 3, ()),
        ("scan grad, derived constant", lib.grad(_derived_weight_scan, argnums=(0, 1)),
         [(512, 512), (16, 128, 512)], ()),
        ("train step donated", _train_step,
         [{"w1": (256, 1024), "b1": (1024,), "w2": (1024, 256)}, (128, 256), (128, 256)], (0,)),
        ("remat scan grad", lib.grad(_remat_scan), [(8, 512, 512), (256, 512)], ()),
        ("adam over scanned layers donated", _adam_over_layers, [(6, 256, 256)] * 3 + [(512, 256)],
         (0, 1, 2)),
    ]


def _globals_for(lib):
    # The programs call jnp/lax/nn through module globals: rebind them to `lib`.
    g = globals()
    g["jnp"], g["lax"] = lib.numpy, lib.lax
    g["jax"] = lib


@pytest.mark.parametrize("index", range(10))
def test_memory_analysis_matches_jax_on_cpu(real_jax, index):
    ours, theirs = {}, {}
    for lib, out in ((jax, ours), (real_jax, theirs)):
        _globals_for(lib)
        try:
            name, fn, shapes, donate = _programs(lib)[index]
            args = [lib.tree.map(lambda s: lib.ShapeDtypeStruct(s, np.float32), s,
                                 is_leaf=lambda s: isinstance(s, tuple)) for s in shapes]
            out["stats"] = lib.jit(fn, donate_argnums=donate).lower(*args).compile() \
                .memory_analysis()
        finally:
            _globals_for(meshsim)
    a, b = ours["stats"], theirs["stats"]
    assert a.argument_size_in_bytes == b.argument_size_in_bytes, name
    assert a.output_size_in_bytes == b.output_size_in_bytes, name
    assert a.alias_size_in_bytes == b.alias_size_in_bytes, name
    # Temporaries: within 25% of XLA's buffer assignment (or both tiny).
    assert abs(a.temp_size_in_bytes - b.temp_size_in_bytes) <= \
        max(0.25 * b.temp_size_in_bytes, 64 * 1024), (name, a, b)


def test_staging_api_surface(real_jax):
    def f(x, y):
        return {"s": jnp.sin(x) @ y}, x.sum()

    x = jnp.arange(12.0).reshape(3, 4)
    y = jnp.ones((4, 2))
    traced = jax.jit(f).trace(x, y)
    assert isinstance(traced, jax.stages.Traced)
    assert str(traced.jaxpr) == str(jax.make_jaxpr(f)(x, y))
    lowered = traced.lower()
    assert isinstance(lowered, jax.stages.Lowered)
    assert "dot_general" in lowered.as_text() and "sin" in lowered.as_text()
    compiled = lowered.compile()
    assert isinstance(compiled, jax.stages.Compiled)
    out = compiled(x, y)
    ref = f(x, y)
    np.testing.assert_allclose(out[0]["s"], ref[0]["s"], rtol=1e-6)
    np.testing.assert_allclose(out[1], ref[1])
    assert [i.shape for i in jax.tree_util.tree_leaves(compiled.args_info)] == [(3, 4), (4, 2)]
    info = compiled.out_info
    assert info[0]["s"].shape == (3, 2) and info[1].shape == ()
    in_sh, out_sh = compiled.input_shardings, compiled.output_shardings
    jx = real_jax.jit(lambda x, y: ({"s": real_jax.numpy.sin(x) @ y}, x.sum()))
    jc = jx.lower(np.ones((3, 4), np.float32), np.ones((4, 2), np.float32)).compile()
    assert real_jax.tree_util.tree_structure(jc.input_shardings).num_leaves == \
        jax.tree_util.tree_structure(in_sh).num_leaves == 2
    assert len(jax.tree_util.tree_leaves(out_sh)) == 2
    with pytest.raises(TypeError, match="Argument types differ"):
        compiled(jnp.ones((3, 5)), y)


def test_cost_analysis_flops_match_jax(real_jax):
    shapes = [(64, 128), (128, 256), (256, 32)]
    ours = jax.jit(lambda x, a, b: (x @ a) @ b).lower(
        *[jax.ShapeDtypeStruct(s, np.float32) for s in shapes]).compile().cost_analysis()
    theirs = real_jax.jit(lambda x, a, b: (x @ a) @ b).lower(
        *[real_jax.ShapeDtypeStruct(s, np.float32) for s in shapes]).compile().cost_analysis()
    assert ours["flops"] == theirs["flops"] == 2 * 64 * 128 * 256 + 2 * 64 * 256 * 32
    assert ours["bytes accessed"] == pytest.approx(theirs["bytes accessed"], rel=0.25)


def test_sharded_program_is_per_device_and_counts_collectives():
    # 4,096 devices of a v5p slice: a shard_map FSDP x TP matmul with its collectives.
    from meshsim.experimental import topologies
    topo = topologies.get_topology_desc("v5p:16x16x16")
    mesh = jax.make_mesh((256, 16), ("fsdp", "tp"), devices=topo.devices)
    d, f, b = 8192, 16384, 4096

    def layer(x, w):
        w = lax.all_gather(w, "fsdp", axis=0, tiled=True)  # (d, f/tp)
        y = x @ w
        return lax.psum(y.sum(axis=1), "tp")

    step = jax.jit(jax.shard_map(layer, mesh=mesh, in_specs=(P("fsdp"), P("fsdp", "tp")),
                                 out_specs=P("fsdp")))
    x = jax.ShapeDtypeStruct((b, d), np.float32, sharding=NamedSharding(mesh, P("fsdp")))
    w = jax.ShapeDtypeStruct((d, f), np.float32, sharding=NamedSharding(mesh, P("fsdp", "tp")))
    compiled = step.lower(x, w).compile()
    stats = compiled.memory_analysis()
    assert stats.argument_size_in_bytes == (b // 256) * d * 4 + (d // 256) * (f // 16) * 4
    assert stats.output_size_in_bytes == (b // 256) * 4
    assert stats.hbm_capacity_in_bytes == 95 * 2 ** 30 and stats.fits
    cost = compiled.cost_analysis()
    assert cost["flops"] >= 2 * (b // 256) * d * (f // 16)
    gathered = d * (f // 16) * 4
    assert cost["collective bytes (fsdp)"] == gathered // 256 * 255
    assert cost["collective bytes (tp)"] == 2 * (b // 256) * 4 * 15 // 16
    groups = [c for c in compiled.analysis.collectives if c.axes == ("fsdp",)][0].replica_groups()
    assert groups.shape == (16, 256)
    np.testing.assert_array_equal(groups[1], np.arange(256) * 16 + 1)


def test_out_of_memory_is_stated_plainly():
    from meshsim.experimental import topologies
    topo = topologies.get_topology_desc("v5e:2x2")
    mesh = jax.make_mesh((4,), ("dp",), devices=topo.devices)
    big = jax.ShapeDtypeStruct((4 * 2 ** 30,), np.float32, sharding=NamedSharding(mesh, P()))
    with pytest.warns(ResourceWarning, match="does NOT fit"):
        compiled = jax.jit(lambda x: x * 2).lower(big).compile()
    stats = compiled.memory_analysis()
    assert not stats.fits
    assert "does NOT fit: a TPU v5 lite has 16 GiB of HBM" in stats.summary()
    with pytest.raises(ValueError, match="cannot run programs"):
        compiled(jnp.ones(3))


def test_remat_lowers_temporaries():
    def loss(ws, x, remat):
        def body(c, w):
            f = (lambda c, w: jnp.tanh(jnp.tanh(c @ w) @ w))
            return (jax.checkpoint(f) if remat else f)(c, w), None
        return lax.scan(body, x, ws)[0].sum()

    args = [jax.ShapeDtypeStruct((16, 512, 512), np.float32),
            jax.ShapeDtypeStruct((256, 512), np.float32)]
    plain = jax.jit(jax.grad(lambda w, x: loss(w, x, False))).lower(*args).compile()
    remat = jax.jit(jax.grad(lambda w, x: loss(w, x, True))).lower(*args).compile()
    assert remat.memory_analysis().temp_size_in_bytes < plain.memory_analysis().temp_size_in_bytes
    assert remat.cost_analysis()["flops"] > plain.cost_analysis()["flops"]


def test_explicit_sharding_is_per_device_with_implied_collectives():
    from meshsim.experimental import topologies
    topo = topologies.get_topology_desc("h100:8x4")
    mesh = jax.make_mesh((4, 8), ("dp", "tp"), devices=topo.devices)

    def f(x, w1, w2):
        h = jnp.tanh(x @ w1)  # [b@dp, f@tp]
        return jnp.sum(jnp.matmul(h, w2, out_sharding=P("dp")))  # sums over tp, then dp

    def sds(shape, spec):
        return jax.ShapeDtypeStruct(shape, np.float32, sharding=NamedSharding(mesh, spec))
    with jax.set_mesh(mesh):
        compiled = jax.jit(f).lower(sds((1024, 512), P("dp")), sds((512, 2048), P(None, "tp")),
                                    sds((2048, 512), P("tp"))).compile()
    cost = compiled.cost_analysis()
    b, d, h = 1024 // 4, 512, 2048 // 8
    assert cost["flops"] == 2 * (2 * b * d * h) + b * h + b * d  # two matmuls, tanh, the sum
    assert cost["collective bytes (tp)"] == 2 * b * d * 4 * 7 // 8  # all-reduce of [b, d]
    assert cost["collective bytes (dp)"] == 2 * 4 * 3 // 4  # all-reduce of the scalar
    stats = compiled.memory_analysis()
    assert stats.argument_size_in_bytes == 4 * (b * d + d * h + h * d)
    assert stats.output_size_in_bytes == 4


def test_dead_code_costs_nothing_as_in_jax(real_jax):
    # Results nobody reads are not computed (JAX's and XLA's dead-code
    # elimination): a dead matmul, a dead chain of matmuls and a reduction; a
    # callback, whose effect is the point, stays.
    def programs(lib):
        jnp = lib.numpy

        def dead_matmul(x):
            unused = jnp.sin(x) @ x  # noqa: F841
            return x * 2

        def dead_chain(x, w):
            h = jnp.tanh(x @ w)
            _ = (h @ w.T).sum()
            return x * 2.0, w + 1.0
        return [(dead_matmul, [(256, 256)]), (dead_chain, [(128, 256), (256, 256)])]
    for (ours_fn, shapes), (theirs_fn, _) in zip(programs(jax), programs(real_jax)):
        ours = jax.jit(ours_fn).lower(*[jax.ShapeDtypeStruct(s, np.float32) for s in shapes]).compile()
        theirs = real_jax.jit(theirs_fn).lower(
            *[real_jax.ShapeDtypeStruct(s, np.float32) for s in shapes]).compile()
        cost = theirs.cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        assert ours.cost_analysis()["flops"] == cost["flops"]
        assert ours.memory_analysis().temp_size_in_bytes <= theirs.memory_analysis().temp_size_in_bytes
    printed = []
    f = jax.jit(lambda x: (jax.debug.callback(lambda v: printed.append(1), x), x * 2)[1])
    ops = [o.name for o in f.lower(jax.ShapeDtypeStruct((4,), np.float32)).compile().analysis.ops]
    assert ops.count("mul") == 1 and any("callback" in n for n in ops)


def _compiled_call_cases(j):
    jnp = j.numpy

    def f(x, y):
        return 2 * x + y

    def tree_fn(p, *, scale):
        return p["a"] * scale + sum(p["b"])

    i32 = j.ShapeDtypeStruct((), jnp.dtype("int32"))
    pair = j.jit(f).trace(i32, i32).lower().compile()
    tree = j.jit(tree_fn, static_argnames="scale").trace(
        {"a": 1.0, "b": [1.0] * 6}, scale=2).lower().compile()
    static_first = j.jit(f, static_argnums=0).trace(3, 4.0).lower().compile()
    square = j.jit(lambda m: m @ jnp.ones(2)).trace(jnp.ones((3, 2))).lower().compile()
    return {
        "both shapes": lambda: pair(jnp.arange(3), jnp.arange(3)),
        "both dtypes": lambda: pair(jnp.float32(1), jnp.float32(2)),
        "second only": lambda: pair(1, jnp.ones(2, jnp.int32)),
        "tree, more than five": lambda: tree({"a": jnp.ones(2), "b": [jnp.ones(2)] * 6}),
        "tree, one leaf": lambda: tree({"a": 1.0, "b": [1.0] * 5 + [jnp.ones(3)]}),
        "static argument left out": lambda: static_first(jnp.ones(3)),
        "vmap": lambda: j.vmap(square)(jnp.ones((4, 3, 2))),
        "jit": lambda: j.jit(square)(jnp.ones((3, 2))),
        "grad": lambda: j.grad(lambda m: square(m).sum())(jnp.ones((3, 2))),
    }


@pytest.mark.parametrize("case", list(_compiled_call_cases(jax)))
def test_compiled_call_errors_match_jax(real_jax, case):
    """A Compiled called with other types lists each mismatching argument by name, as JAX's
    does; under a transformation it raises JAX's TypeError (whose text names the tracer's
    class: meshsim's differs)."""
    def run(j):
        try:
            return "ok", np.asarray(_compiled_call_cases(j)[case]()).tolist()
        except TypeError as e:
            return "TypeError", str(e).split(" Detected argument of Tracer type")[0]

    ours, theirs = run(jax), run(real_jax)
    assert ours[0] == "TypeError"
    assert ours == theirs

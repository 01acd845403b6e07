"""JAX 0.10.2's config options as `jax.<name>` context managers (values, defaults, checks and
the behaviour of those the simulator honours), and jax.smap, jax.fwd_and_bwd, jax.ds,
jax.empty_ref, jax.memory, jax.core.eval_jaxpr, jax.sharding.make_single_device_sharding,
ad_checkpoint's saved residuals and policy answers, custom_vjp with symbolic zeros;
each against real JAX."""
import json
import logging
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import meshsim


@pytest.fixture(autouse=True)
def _jax_submodules(real_jax):
    import jax.ad_checkpoint  # noqa: F401  (real JAX loads it on import only)

FLAGS = ["allow_f16_reductions", "array_garbage_collection_guard", "auto_pcast", "check_tracer_leaks",
         "debug_infs", "debug_key_reuse", "debug_nans", "default_device", "default_matmul_precision",
         "default_prng_impl", "enable_custom_prng", "enable_x64", "explain_cache_misses",
         "legacy_prng_key", "log_compiles", "no_execution", "no_tracing", "numpy_dtype_promotion",
         "numpy_rank_promotion", "remove_size_one_mesh_axis_from_type", "softmax_custom_jvp",
         "thread_guard", "threefry_partitionable", "transfer_guard_device_to_device",
         "transfer_guard_device_to_host", "transfer_guard_host_to_device"]


def _plain(v):
    return getattr(v, "value", v)  # JAX's enum members carry their string


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 - the type and text are what is compared
        return (type(e).__name__, str(e))


@pytest.mark.parametrize("name", FLAGS)
def test_flag_defaults_names_and_context(real_jax, name):
    ours, theirs = getattr(meshsim, name), getattr(real_jax, name)
    assert _plain(ours.value) == _plain(theirs.value)
    assert ours.__name__ == theirs.__name__
    assert getattr(meshsim.config, "jax_" + name) == _plain(getattr(real_jax.config, "jax_" + name))
    # Called without a value: booleans switch on for the block, the others raise the same TypeError.
    def enter_and_read(flag):
        with flag():
            return flag.value
    o, t = _outcome(lambda: enter_and_read(ours)), _outcome(lambda: enter_and_read(theirs))
    assert o[0] == t[0] and o[1] == t[1]
    assert _plain(ours.value) == _plain(theirs.value)  # restored
    if name in ("default_device", "legacy_prng_key", "numpy_dtype_promotion") or \
            isinstance(ours.value, bool):
        return  # JAX parses these differently (bools accept any value)
    bad = _outcome(lambda: ours("no-such-level"))
    assert bad == _outcome(lambda: theirs("no-such-level"))


def test_flag_block_restores_and_decorates(real_jax):
    for jax in (meshsim, real_jax):
        with jax.numpy_rank_promotion("warn"):
            assert jax.config.jax_numpy_rank_promotion == "warn"
        assert jax.config.jax_numpy_rank_promotion == "allow"

        @jax.debug_nans(True)
        def inside():
            return jax.config.jax_debug_nans
        assert inside() is True and jax.debug_nans.value is False


def _nan_report(jax, capsys, fn):
    jax.config.update("jax_debug_nans", True)
    try:
        outcome = _outcome(fn)
    finally:
        jax.config.update("jax_debug_nans", False)
    return outcome, capsys.readouterr().out


_NAN_CASES = {
    "jit_log": "jax.jit(lambda x: jnp.log(x) * 2)(jnp.float32(-1))",
    "eager_log": "jnp.log(jnp.float32(-1))",
    "clean": "float(jax.jit(lambda x: jnp.log(x))(jnp.float32(2)))",
}


def _nan_report_in_fresh_jax(case):
    """Real JAX's report from a process of its own: what JAX says when its re-run without jit
    finds no NaN depends on which executables earlier tests left in its caches."""
    program = f"""
import json, jax, jax.numpy as jnp
jax.config.update("jax_debug_nans", True)
try:
    outcome = ["ok", {_NAN_CASES[case]}]
except Exception as e:
    outcome = [type(e).__name__, str(e)]
print(json.dumps(outcome))
"""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env,
                          timeout=300, check=True)
    *printed, outcome = done.stdout.splitlines()
    return tuple(json.loads(outcome)), printed


@pytest.mark.parametrize("case", sorted(_NAN_CASES))
def test_debug_nans_names_the_operation(real_jax, capsys, case):
    jnp = meshsim.numpy
    (o_kind, o_val), o_out = _nan_report(
        meshsim, capsys, lambda: eval(_NAN_CASES[case], {"jax": meshsim, "jnp": jnp}))
    (t_kind, t_val), t_out = _nan_report_in_fresh_jax(case)
    assert o_kind == t_kind
    if o_kind == "ok":
        assert o_val == pytest.approx(t_val)
    else:
        assert o_val == t_val == "invalid value (nan) encountered in log"
    assert o_out.splitlines()[-1:] == t_out[-1:]


def test_debug_infs(real_jax):
    def divide(jax):
        jax.config.update("jax_debug_infs", True)
        try:
            return _outcome(lambda: jax.numpy.float32(1) / jax.numpy.float32(0))
        finally:
            jax.config.update("jax_debug_infs", False)
    # Real JAX's check runs in a process of its own: an executable of the division that earlier
    # tests compiled without the check is reused in this one.
    program = """
import jax
jax.config.update("jax_debug_infs", True)
try:
    jax.numpy.float32(1) / jax.numpy.float32(0)
    print("ok")
except FloatingPointError as e:
    print(type(e).__name__, str(e).splitlines()[0])
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, JAX_PLATFORMS="cpu"), check=True)
    kind, text = divide(meshsim)
    assert kind == "FloatingPointError" and text == "invalid value (inf) encountered in div"
    assert done.stdout.splitlines()[-1] == f"{kind} {text}"


@pytest.mark.parametrize("shapes", [((3,), (2, 3)), ((4, 1), (2, 1, 4)), ((), (2, 3)), ((2, 3), (2, 3))])
@pytest.mark.parametrize("mode", ["raise", "warn"])
def test_numpy_rank_promotion(real_jax, shapes, mode):
    results = []
    for jax in (meshsim, real_jax):
        a, b = (jax.numpy.ones(s) for s in shapes)
        with jax.numpy_rank_promotion(mode), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outcome = _outcome(lambda: (a * b).shape)
        results.append((outcome[0], len(caught) > 0))
    assert results[0] == results[1]


def test_no_tracing(real_jax):
    def f(x):
        return x + 1
    outcomes = []
    for jax in (meshsim, real_jax):
        with jax.no_tracing(True):
            outcomes.append(_outcome(lambda: jax.jit(f)(1.0)))
    o, t = outcomes
    assert o[0] == t[0] == "RuntimeError"
    assert o[1].split(" at ")[0] == t[1].split(" at ")[0] == "re-tracing function f"
    assert o[1].endswith("for `jit`, but 'no_tracing' is set")


def test_log_compiles_and_cache_misses(caplog):
    with caplog.at_level(logging.WARNING, logger="meshsim"):
        with meshsim.log_compiles(), meshsim.explain_cache_misses():
            g = meshsim.jit(lambda x: x * 3)
            g(1.0)
            g(1.0)
            g(meshsim.numpy.ones(2))
    text = caplog.text
    assert text.count("Compiling <lambda> with global shapes and types") == 2
    assert "float32[2]" in text and text.count("TRACING CACHE MISS") == 2


def test_make_user_context_retraces(real_jax):
    counts = []
    for jax in (meshsim, real_jax):
        traced = []
        ctx = jax.make_user_context(default_value=None)
        f = jax.jit(lambda x: traced.append(1) or x * 2)
        with ctx(1):
            f(1.0)
            f(1.0)
        with ctx(2):
            f(1.0)
        f(1.0)
        counts.append(len(traced))
    assert counts[0] == counts[1] == 3


def test_transfer_guard_sets_every_kind(real_jax):
    for jax in (meshsim, real_jax):
        with jax.transfer_guard("log"):
            assert [getattr(jax.config, f"jax_transfer_guard_{k}") for k in
                    ("host_to_device", "device_to_device", "device_to_host")] == ["log"] * 3
        assert jax.transfer_guard_host_to_device.value is None


@pytest.mark.parametrize("in_axes,out_axes", [(0, 0), ((1, None), 1), (None, None)])
def test_smap(real_jax, in_axes, out_axes):
    def run(jax):
        jnp = jax.numpy
        mesh = jax.make_mesh((4, 2), ("x", "y"))
        a = jnp.arange(32.0).reshape(4, 8)
        b = jnp.float32(3)

        def body(u, v):
            return u * v + jax.lax.axis_index("x") if in_axes is not None else u * v
        with jax.set_mesh(mesh):
            args = (a, b) if isinstance(in_axes, tuple) else (a, a)
            f = jax.smap(body, in_axes=in_axes, out_axes=out_axes, axis_name="x")
            out = jax.jit(f)(*args)
            return np.asarray(out), out.shape
    (o, os_), (t, ts) = run(meshsim), run(real_jax)
    assert os_ == ts
    np.testing.assert_array_equal(o, t)


def test_smap_errors(real_jax):
    for bad in [dict(in_axes=0, out_axes=0, axis_name=("x",)), dict(in_axes=[0], out_axes=0, axis_name="x"),
                dict(in_axes=0, out_axes="a", axis_name="x")]:
        o = _outcome(lambda: meshsim.smap(lambda a: a, **bad))
        t = _outcome(lambda: real_jax.smap(lambda a: a, **bad))
        assert o == t


@pytest.mark.parametrize("has_aux", [False, True])
def test_fwd_and_bwd(real_jax, has_aux):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 4), np.float32), rng.standard_normal((4, 2), np.float32)
    ct = rng.standard_normal((3, 2), np.float32)
    results = []
    for jax in (meshsim, real_jax):
        def f(x, w):
            y = jax.numpy.tanh(x @ w)
            return (y, {"norm": jax.numpy.sum(y)}) if has_aux else y
        fwd, bwd = jax.fwd_and_bwd(f, argnums=(0, 1), has_aux=has_aux)
        out = fwd(x, w)
        results.append((out[0], out[2]["norm"] if has_aux else 0.0, *bwd(out[1], ct)))
        fwd1, bwd1 = jax.fwd_and_bwd(f, argnums=1, has_aux=has_aux, jitted=False)
        results[-1] += (bwd1(fwd1(x, w)[1], ct),)
    for a, b in zip(*results):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_ds_and_empty_ref(real_jax):
    outs = []
    for jax in (meshsim, real_jax):
        jnp = jax.numpy
        r = jax.new_ref(jnp.arange(8.0))

        @jax.jit
        def step(r, i):
            r[jax.ds(i, 2)] = jnp.zeros(2)
            return r[jax.ds(i + 3, 3)]

        read = step(r, 2)

        @jax.jit
        def scratch(x):
            s = jax.empty_ref(jax.typeof(x))
            s[...] = x * 2
            return s[...] + 1
        eager = _outcome(lambda: jax.empty_ref(jax.typeof(jnp.ones(3))))
        outs.append((np.asarray(read), np.asarray(r[...]), np.asarray(r[jax.ds(1, 3)]),
                     np.asarray(scratch(jnp.ones(3))), eager, repr(jax.ds(1, 2, 2)),
                     jax.ds(None), repr(jax.memory.Space.Host)))
    o, t = outs
    for a, b in zip(o[:4], t[:4]):
        np.testing.assert_array_equal(a, b)
    assert o[4:] == t[4:]


def test_eval_jaxpr_and_single_device_sharding(real_jax):
    for jax in (meshsim, real_jax):
        closed = jax.make_jaxpr(lambda x, y: (jax.numpy.sin(x) * y, x + 1))(1.0, 2.0)
        outs = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, 0.5, 3.0)
        np.testing.assert_allclose([float(v) for v in outs], [np.sin(0.5) * 3, 1.5], rtol=1e-6)
        s = jax.sharding.make_single_device_sharding(jax.devices()[3])
        assert s.device_set == {jax.devices()[3]}
        assert jax.device_put(np.ones(2), s).devices() == {jax.devices()[3]}
    assert meshsim.core.ParamDict == real_jax.core.ParamDict


def _layers(jax, wrap):
    """sum(sin(W3 @ sin(W2 @ sin(W1 @ x)))) with each layer wrapped by `wrap(layer, i)`."""
    def layer(w, x):
        return jax.numpy.sin(w @ x)

    def f(w1, w2, w3, x):
        for i, w in enumerate((w1, w2, w3)):
            x = wrap(layer, i)(w, x)
        return jax.numpy.sum(x)
    return f


def _layer_args():
    rng = np.random.default_rng(7)
    return tuple(rng.normal(size=s).astype(np.float32) for s in [(5, 4), (6, 5), (7, 6), (4,)])


CHECKPOINTED = {
    "nothing_saveable": lambda jax: (jax.checkpoint(
        lambda x, y: jax.numpy.sum(jax.numpy.sin(x) * y), policy=jax.checkpoint_policies.nothing_saveable),
        (np.ones(3, np.float32), np.ones(3, np.float32))),
    "names": lambda jax: (jax.checkpoint(
        lambda p: jax.numpy.sum(jax.ad_checkpoint.checkpoint_name(jax.numpy.sin(p["w"]), "a") * p["w"]),
        policy=jax.checkpoint_policies.save_only_these_names("a")), ({"w": np.ones(4, np.float32)},)),
    # Several residuals of one kind: listed in program order, as JAX lists them.
    "checkpointed layers": lambda jax: (_layers(jax, lambda layer, i: jax.checkpoint(layer)),
                                        _layer_args()),
    "named layers": lambda jax: (jax.checkpoint(
        _layers(jax, lambda layer, i: lambda w, x: jax.ad_checkpoint.checkpoint_name(layer(w, x), f"h{i}")),
        policy=jax.checkpoint_policies.save_any_names_but_these("h2")), _layer_args()),
    # Without checkpointing: what each rule reads is computed forward and saved (cos x for sin,
    # 1 - tanh x for tanh, 2 x for a square), as JAX's linearization saves it.
    "plain layers": lambda jax: (_layers(jax, lambda layer, i: layer), _layer_args()),
    "rules' residuals": lambda jax: (
        lambda x, w: jax.numpy.sum(jax.numpy.tanh(jax.lax.erf(x @ w) / jax.numpy.cos(w[0])) ** 2),
        (np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))),
    "dots": lambda jax: (jax.checkpoint(
        lambda x, w: jax.numpy.sum(jax.numpy.tanh(x @ w)), policy=jax.checkpoint_policies.dots_saveable),
        (np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))),
}


@pytest.mark.parametrize("case", sorted(CHECKPOINTED))
def test_print_saved_residuals(real_jax, capsys, case):
    printed = []
    for jax in (meshsim, real_jax):
        f, args = CHECKPOINTED[case](jax)
        jax.ad_checkpoint.print_saved_residuals(f, *args)
        # Values computed by operations name the user's line that traced them, as in JAX.
        printed.append(capsys.readouterr().out.splitlines())
    assert printed[0] == printed[1]


def test_policy_answers(real_jax):
    x = np.linspace(0.1, 1, 4).astype(np.float32)
    grads = []
    for jax in (meshsim, real_jax):
        ad = jax.ad_checkpoint

        def policy(prim, *_, **params):
            return ad.Saveable if str(prim) == "sin" else ad.Recompute
        f = jax.checkpoint(lambda x: jax.numpy.sum(jax.numpy.cos(jax.numpy.sin(x))), policy=policy)
        grads.append(np.asarray(jax.grad(f)(x)))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


def test_custom_vjp_symbolic_zeros(real_jax, capsys):
    results = []
    for jax in (meshsim, real_jax):
        cd = jax.custom_derivatives

        @jax.custom_vjp
        def f(x, y):
            return x * jax.numpy.sin(y)

        def fwd(x, y):
            print(type(x).__name__, x.perturbed)
            x, y = cd.custom_vjp_primal_tree_values((x, y))
            return f(x, y), (x, y)

        def bwd(res, g):
            x, y = res
            return g * jax.numpy.sin(y), cd.SymbolicZero.from_primal_value(y)
        f.defvjp(fwd, bwd, symbolic_zeros=True)
        gx, gy = jax.grad(f, argnums=(0, 1))(2.0, 3.0)
        zeros = cd.zero_from_primal({"a": jax.numpy.ones(3)}, symbolic_zeros=True)
        results.append((float(gx), float(gy), gy.dtype, jax.typeof(gy).weak_type,
                        repr(zeros["a"]), zeros["a"].shape, capsys.readouterr().out,
                        _outcome(lambda: cd.custom_vjp_primal_tree_values([1.0]))))
    assert results[0] == results[1]


def _with_breakpoint(jax, x):
    y = jax.numpy.sin(x)
    jax.debug.breakpoint()
    return y * 2


@pytest.mark.parametrize("jitted", [False, True])
def test_debug_breakpoint(real_jax, capsys, monkeypatch, jitted):
    import io
    printed = []
    for jax in (meshsim, real_jax):
        monkeypatch.setattr("sys.stdin", io.StringIO("p y\npp x\nl\nd\np {'k': y[1:]}\np nope\nc\n"))
        f = (lambda x: _with_breakpoint(jax, x))
        out = (jax.jit(f) if jitted else f)(jax.numpy.arange(3.0))
        jax.block_until_ready(out)
        if jax is real_jax:
            jax.effects_barrier()
        printed.append(capsys.readouterr().out)
        np.testing.assert_allclose(np.asarray(out), 2 * np.sin(np.arange(3.0)), rtol=1e-6)
    ours, theirs = (p.replace("jax.numpy", "").splitlines() for p in printed)
    assert ours == theirs


@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("commands", ["p y\n", "", "exit\n", "q\n", "bt\ncont\n"])
def test_debug_breakpoint_quits_at_the_end_of_its_input(real_jax, capsys, monkeypatch, jitted, commands):
    """`q`, `exit` and the end of the input quit the debugger: the SystemExit propagates,
    inside jit wrapped in JAX's JaxRuntimeError (a callback's error); `cont` runs on."""
    import io
    outcomes = []
    for jax in (meshsim, real_jax):
        monkeypatch.setattr("sys.stdin", io.StringIO(commands))
        f = (lambda x: _with_breakpoint(jax, x))
        try:
            out = (jax.jit(f) if jitted else f)(jax.numpy.arange(3.0))
            jax.block_until_ready(out)
            if jax is real_jax:
                jax.effects_barrier()
            outcomes.append(("ok", np.asarray(out).tolist()))
        except (Exception, SystemExit) as e:  # noqa: BLE001 - un-jitted, the SystemExit itself
            lines = str(e).splitlines() or [""]
            outcomes.append((type(e).__name__, lines[0], lines[-1]))
        capsys.readouterr()
    assert outcomes[0] == outcomes[1]

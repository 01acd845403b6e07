"""The primitive registry: every primitive declares its kind and the rules it
needs where it is registered (ir/primitive.h), the registry rejects
inconsistent definitions, and Python spells primitive names from the same
table as C++."""
import pathlib
import re

import numpy as np
import pytest

import meshsim
import meshsim.numpy
from meshsim import _core

NAMES = _core.primitive_names()
INFO = {name: _core.primitive_info(name) for name in NAMES}

# Rules a primitive may lack, each with the reason. A primitive missing a rule
# its kind needs and not listed here fails `test_every_primitive_has_its_rules`.
_NO_COTANGENT = "integer or boolean results only: no cotangent flows through it (JAX's zero rule)"
_NO_JAX_RULE = "JAX defines no differentiation rule for it either"
_PER_EXAMPLE = "vmap uses the per-example fallback (correct, one bind per example)"
_DATA_MOVEMENT = "data movement: the default cost (operands read, results written once, no flops)"
_COMPARISONS = "comparisons and moves only: the default memory cost (XLA counts no flops either)"
_NO_SHARDED_OPERANDS = "its operands are never sharded (created values, or inside shard_map only)"
_NO_RULE_YET = "no sharding rule yet: Explicit-sharded operands raise JAX's 'not implemented' text"
_NOT_IN_JAX = "JAX has no sharding rule for it either (its ShardingTypeError 'not implemented')"
# Factor maps (sharding propagation over Auto axes): without one, an equation
# computes on whole operands and its results start replicated.
_CREATED = "creates its result from shapes and params: no operand layout to propagate"
_NO_FACTORS_YET = ("no factor map yet: on Auto axes its operands are gathered whole and its results "
                   "start replicated (values right; XLA's layouts and collectives differ)")
# The free casts among manual types (pvary and the unreduced/reduced ones) and
# unreduced_psum exist inside shard_map bodies only.
_MANUAL_CASTS = ("pvary", "preduced", "vary_unreduced_cast_p", "reduced_vary_cast_p")

_GAPS = {
    "vjp": ({n: _NO_COTANGENT for n in (
        "and", "or", "xor", "not", "eq", "ne", "lt", "le", "gt", "ge", "is_finite", "argmax",
        "argmin", "clz", "population_count", "shift_left",
        "shift_right_arithmetic", "shift_right_logical", "reduce_and", "reduce_or", "reduce_xor",
        "searchsorted", "iota", "random_bits", "threefry2x32", "axis_index", "nextafter")}
            | {n: _NO_JAX_RULE for n in ("pmax", "pmin", "pbroadcast", "schur", "hessenberg",
                                         "householder_product", "zeta", "igamma_grad_a")}),
    "batch": {n: _PER_EXAMPLE for n in (
        "all_gather", "all_gather_invariant", "all_to_all", "axis_index", "ragged_all_to_all",
        "reduce_scatter", "unreduced_reduce_scatter", "iota",
        "ragged_dot_general", "random_bits", "debug_callback")},
    "cost": {n: _DATA_MOVEMENT for n in (
        "broadcast_in_dim", "concatenate", "gather", "iota",
        "pad", *_MANUAL_CASTS, "reshape", "rev", "scatter", "scatter_add", "scatter_max", "scatter_min",
        "scatter_mul", "scatter_sub", "slice", "squeeze", "stack", "transpose", "unstack", "random_bits")}
            | {n: _COMPARISONS for n in ("sort", "top_k", "searchsorted")}
            | {"ragged_dot_general": "no cost rule yet: counted as data movement (its flops are missing)"}
            | {"host_rule_collective": "never runs: vmap's batching replaces it with ops along the "
                                       "batch dimension, which have their costs"},
    "sharding_rule": ({n: _NO_SHARDED_OPERANDS for n in ("iota", *_MANUAL_CASTS)}
                      | {n: _NOT_IN_JAX for n in ("ragged_dot_general", "random_bits", "searchsorted")}
                      | {n: _NO_RULE_YET for n in ("cholesky", "lu", "qr", "eigh", "svd",
                                                    "triangular_solve", "eig", "schur", "hessenberg",
                                                    "householder_product")}),
    "factors": ({n: _CREATED for n in ("iota", "random_bits")}
                | {n: "used inside shard_map bodies only, where propagation over Auto axes never runs"
                   for n in _MANUAL_CASTS}
                | {"host_rule_collective": "never runs: vmap's batching replaces it with ops along "
                                           "the batch dimension, which have their factor maps"}
                | {n: _NO_FACTORS_YET for n in (
                    "searchsorted", "ragged_dot_general", "cholesky", "lu", "qr", "eigh", "svd",
                    "triangular_solve", "eig", "schur", "hessenberg", "householder_product")}),
}
EXEMPT: dict[str, dict[str, str]] = {}
for _rule, _names in _GAPS.items():
    for _name, _reason in _names.items():
        EXEMPT.setdefault(_name, {})[_rule] = _reason


def needed_rules(info: dict) -> set:
    """The rules a primitive of this kind must declare (see ir/primitive.h)."""
    kind = info["kind"]
    if kind == "collective":
        return {"comm", "vjp", "batch"}
    if kind == "local":
        # Elementwise primitives get JAX's broadcasting sharding rule, the
        # elementwise batching rule, one flop per element and the identity
        # factor map by default.
        return {"vjp"} if info["elementwise"] else {"sharding_rule", "vjp", "batch", "cost", "factors"}
    if kind in ("higher-order", "control flow"):
        return {"vjp", "batch", "factors"}
    return {"vjp"}  # global: shard_map, reshard, mesh_cast


def missing_rules(name: str, info: dict) -> set:
    return {r for r in needed_rules(info) if not info[r]} - set(EXEMPT.get(name, {}))


def test_every_primitive_has_its_rules():
    missing = {name: sorted(missing_rules(name, info)) for name, info in INFO.items()}
    assert {n: m for n, m in missing.items() if m} == {}


def test_exemptions_are_current_and_explained():
    for name, rules in EXEMPT.items():
        assert name in INFO, f"exempt primitive {name} is not registered"
        for rule, reason in rules.items():
            assert len(reason) > 10, (name, rule)
            assert rule in needed_rules(INFO[name]), f"{name} is exempt from a rule it does not need: {rule}"
            assert not INFO[name][rule], f"{name} now has {rule}: drop its exemption"


@pytest.mark.parametrize("name", sorted(NAMES))
def test_removing_a_rule_fails_the_check(name):
    info = INFO[name]
    present = {r for r in needed_rules(info) if info[r]}
    for rule in present:
        assert rule not in missing_rules(name, info)
        assert rule in missing_rules(name, {**info, rule: False})


def undeclared_operand_counts(infos: dict) -> list:
    """Primitives that do not say how many operands they take (ir/primitive.h, OperandCount)."""
    return sorted(name for name, info in infos.items() if info["operands"] is None)


def test_every_primitive_declares_its_operand_count():
    assert undeclared_operand_counts(INFO) == []
    for name, info in INFO.items():
        low, high = info["operands"]
        assert low >= 0 and (high is None or high >= low), name
        # Dropping a declaration fails the check.
        assert undeclared_operand_counts({**INFO, name: {**info, "operands": None}}) == [name]


_BIND_SWEEP = """
import os, signal, sys
import numpy as np
import meshsim
from meshsim import _core
x = meshsim.numpy.asarray(np.ones((2, 3), np.float32))
for name in sorted(_core.primitive_names()):
    low, high = _core.primitive_info(name)["operands"]
    for count in range(5):
        pid = os.fork()
        if pid == 0:
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            signal.alarm(60)
            wrong = count < low or (high is not None and count > high)
            try:
                _core.bind(name, [x] * count, {})
            except TypeError as e:
                os._exit(0 if not wrong or str(e).startswith(name + " takes ") else 3)
            except Exception:
                os._exit(3 if wrong else 0)
            os._exit(3 if wrong else 0)
        _, status = os.waitpid(pid, 0)
        if status:
            print(name, count, (low, high), status)
"""


def test_binding_any_operand_count_raises_or_runs():
    """Every registered primitive bound directly (no params) to 0-4 operands returns or raises;
    a count outside its declaration is a TypeError naming the primitive. Each bind runs in a
    forked child, so a crash shows as its wait status instead of ending the test run."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", _BIND_SWEEP], capture_output=True, text=True,
                          env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "", ("binds that crashed or did not refuse their count (name, operands, "
                               "declared, wait status):\n" + done.stdout)
    for name, count, text in [("add", 1, "add takes 2 operands, got 1"),
                              ("iota", 1, "iota takes 0 operands, got 1"),
                              ("psum", 0, "psum takes at least 1 operand, got 0"),
                              ("select_n", 1, "select_n takes at least 2 operands, got 1")]:
        with pytest.raises(TypeError, match=re.escape(text)):
            _core.bind(name, [meshsim.numpy.asarray(np.ones(3, np.float32))] * count, {})


def test_kinds_match_execution_hooks():
    for name, info in INFO.items():
        hooks = [h for h in ("kernel", "mesh_kernel", "array_kernel") if info[h]]
        if info["kind"] == "collective" and len(hooks) == 2:  # host callbacks also run outside shard_map
            hooks.remove("kernel")
        if info["passes_through"]:  # the executors hand the operands through
            assert info["kind"] == "local" and hooks == [], name
            continue
        assert len(hooks) == 1, name
        want = {"local": "kernel", "higher-order": "kernel", "control flow": "kernel",
                "collective": "mesh_kernel", "global": "array_kernel"}[info["kind"]]
        assert hooks == [want], name
        assert info["comm"] == info["comm_steps"] == (info["kind"] == "collective"), name
        assert info["mesh_call"] == (info["kind"] in ("higher-order", "control flow")), name


def test_collectives_and_kinds_are_declared():
    kinds = {name: info["kind"] for name, info in INFO.items()}
    for name in ("psum", "psum_invariant", "pmax", "pmin", "all_gather", "all_gather_invariant",
                 "reduce_scatter", "ppermute", "pbroadcast", "all_to_all", "ragged_all_to_all"):
        assert kinds[name] == "collective", name
    assert kinds["cond"] == kinds["while"] == kinds["scan"] == "control flow"
    assert kinds["remat2"] == kinds["custom_vjp_call"] == kinds["custom_jvp_call"] == "higher-order"
    assert kinds["shard_map"] == kinds["reshard"] == "global"
    assert INFO["add"]["elementwise"] and INFO["select_n"]["elementwise"]
    # Type-only primitives: their operands pass through at run time.
    assert INFO["pvary"]["passes_through"] and INFO["stop_gradient"]["passes_through"]
    assert not INFO["add"]["passes_through"] and not INFO["psum"]["passes_through"]
    assert not INFO["dot_general"]["elementwise"] and INFO["dot_general"]["uses_blas"]


@pytest.mark.parametrize("name, drop, message", [
    ("psum", ["comm"], "a collective needs a communication model"),
    ("ppermute", ["comm_steps"], "a collective needs a communication model"),
    ("pvary", ["passes_through"], "needs exactly one of kernel, mesh_kernel and array_kernel"),
    ("pvary", ["kernel=identity"], "passes its operands through: it has no kernel"),
    ("all_gather", ["mesh_kernel"], "needs exactly one of kernel, mesh_kernel and array_kernel"),
    ("add", ["kernel"], "needs exactly one of kernel, mesh_kernel and array_kernel"),
    ("scan", ["mesh_call"], "needs `mesh_call`"),
    ("ppermute", ["kind=local"], "runs by `kernel`"),
    ("reshape", ["abstract_eval"], "no abstract_eval"),
    # Declared traits that contradict the rest of the definition.
    ("reshape", ["factors"], "declares how dimensions propagate without a factor map"),
    ("cumsum", ["factors"], "declares how dimensions propagate without a factor map"),
    ("concatenate", ["unmapped_dims_keep_sharding"], "retiles a dimension whose sharding it does not keep"),
    ("shard_map", ["kind=local"], "only global primitives fix their results' layouts"),
    ("psum", ["xla_instruction"], "combines partial results but does not lower to an all-reduce"),
    ("logistic", ["elementwise"], "only elementwise primitives declare how bfloat16 is computed"),
    ("while", ["sub_program_links"], "needs `sub_program_links`"),
    ("exp", ["elementwise"], "only elementwise primitives of one or more operands have a float32 fusion loop"),
    ("eq", ["elementwise"], "only elementwise primitives contract into multiply-adds or commute"),
])
def test_validate_rejects_inconsistent_definitions(name, drop, message):
    _core.validate_primitive_without(name, [])  # the registered definition is valid
    with pytest.raises(RuntimeError, match=re.escape(f"primitive '{name}'") + ".*" + re.escape(message)):
        _core.validate_primitive_without(name, drop)


def test_python_binds_only_registered_names():
    """Python's bind calls name primitives of the C++ table."""
    src = pathlib.Path(__file__).parents[1] / "python" / "meshsim"
    bound = set()
    for path in src.rglob("*.py"):
        bound |= set(re.findall(r"bind1?\(\s*\"([a-z_0-9]+)\"", path.read_text()))
    assert bound, "no bind calls found"
    assert bound - set(NAMES) == set()


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_collective_steps_come_from_each_communication_model(n):
    """The step-time model's latency terms are the steps each collective's model declares:
    a ring all-reduce 2(n-1), ring gathers, scatters and all-to-all n-1, one exchange for
    permutations, broadcasts and ragged all-to-all; nothing over one device."""
    ring_all_reduce = {"psum", "psum_invariant", "pmax", "pmin"}
    one_exchange = {"ppermute", "pbroadcast", "ragged_all_to_all"}
    ring = {"all_gather", "all_gather_invariant", "reduce_scatter", "all_to_all"}
    for name in ring_all_reduce | one_exchange | ring:
        want = 2 * (n - 1) if name in ring_all_reduce else 1 if name in one_exchange else n - 1
        assert _core.collective_steps(name, n) == want, name
        assert _core.collective_steps(name, 1) == 0, name
    assert _core.collective_steps("axis_index", n) == 0  # each device reads its own coordinate
    with pytest.raises(ValueError, match="'add' is not a collective"):
        _core.collective_steps("add", n)


def test_recorded_steps_match_the_declared_steps():
    """What a run records (Primitive::comm) and what abstract compilation charges
    (Primitive::comm_steps) agree for every collective a program runs."""
    import numpy as np

    import meshsim as jax
    from meshsim.sharding import PartitionSpec as P

    mesh = jax.make_mesh((4, 2), ("x", "y"))

    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))
    def f(b):
        s = jax.lax.psum(b, ("x", "y"))
        g = jax.lax.all_gather(b, "x", tiled=True)[: b.shape[0]]
        r = jax.lax.ppermute(b, "x", [(i, (i + 1) % 4) for i in range(4)])
        t = jax.lax.all_to_all(b, "y", 1, 1, tiled=True)
        return s + g + r + t

    x = np.arange(64 * 8, dtype=np.float32).reshape(64, 8)
    with jax.debug.record_collectives() as log:
        f(x).block_until_ready()
    sizes = {"x": 4, "y": 2}
    seen = set()
    for r in log:
        n = int(np.prod([sizes[a] for a in r.axes]))
        assert r.steps == _core.collective_steps(r.name, n), r.name
        seen.add(r.name)
    assert {"psum", "all_gather", "ppermute", "all_to_all"} <= {s.replace("_invariant", "") for s in seen}


def test_pass_through_primitives_run_no_kernel(tmp_path):
    """pvary and stop_gradient hand their operand through: the profiler's device tracks
    show the kernels that ran (the add) and no span for them, and the values are right."""
    import glob
    import gzip
    import json

    import numpy as np

    import meshsim as jax
    from meshsim.sharding import PartitionSpec as P

    mesh = jax.make_mesh((4,), ("x",))

    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x"))
    def f(a, b):
        return a + jax.lax.stop_gradient(b)  # b is invariant: an implicit pvary makes it varying

    a = np.arange(16, dtype=np.float32)
    b = np.arange(4, dtype=np.float32) * 10
    assert "pvary" in str(jax.make_jaxpr(f)(a, b))
    jax.profiler.start_trace(log_dir=str(tmp_path))
    out = f(a, b).block_until_ready()
    jax.profiler.stop_trace()
    np.testing.assert_array_equal(np.asarray(out), a + np.tile(b, 4))
    (path,) = glob.glob(str(tmp_path / "plugins" / "profile" / "*" / "*.trace.json.gz"))
    with gzip.open(path, "rt") as fh:
        spans = [e["name"] for e in json.load(fh)["traceEvents"] if e["ph"] == "X"]
    assert "add" in spans
    assert "pvary" not in spans and "stop_gradient" not in spans


# XLA's collective instructions (HLO opcodes): what a collective may lower to.
_XLA_COLLECTIVES = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "ragged-all-to-all",
                    "collective-permute", "collective-broadcast"}


def test_collectives_declare_the_instruction_they_lower_to():
    """Each collective that moves data declares one of XLA's collective instructions where it
    is registered (compiled text and the step-time model read it); the others declare none."""
    for name, info in INFO.items():
        if info["kind"] != "collective":
            continue
        instruction = _core.collective_instruction(name)
        assert instruction is None or instruction in _XLA_COLLECTIVES, name
        assert (instruction is not None) == (_core.collective_steps(name, 2) > 0), name
    # Those the sharded executor and the step-time model pick by instruction.
    assert {_core.collective_instruction(n) for n in ("psum", "pmax", "pmin")} == {"all-reduce"}
    assert _core.collective_instruction("all_to_all") == "all-to-all"
    with pytest.raises(ValueError, match="'add' is not a collective"):
        _core.collective_instruction("add")



def test_partial_results_are_combined_by_the_declared_all_reduce():
    """A local plan's partial sums, maxes and mins are all-reduced by the collective that
    declares it combines them where it is registered (Primitive::partials_reduction),
    an all-reduce; the sharded executor runs and records that one and
    the all-reduce combiner merges its records, neither by a list of names."""
    import numpy as np

    import meshsim as jax
    from meshsim.sharding import NamedSharding, PartitionSpec as P

    declared = {r: _core.partials_all_reduce(r) for r in ("sum", "max", "min")}
    assert declared == {"sum": "psum", "max": "pmax", "min": "pmin"}
    assert {_core.collective_instruction(n) for n in declared.values()} == {"all-reduce"}
    with pytest.raises(ValueError, match="unknown reduction 'prod'"):
        _core.partials_all_reduce("prod")

    mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
    a = np.random.default_rng(7).standard_normal((8, 6)).astype(np.float32)
    with jax.set_mesh(mesh):
        x = jax.device_put(a, NamedSharding(mesh, P("x", "y")))
        for reduction, f, want in (("sum", lambda v: v.sum(0), a.sum(0)), ("max", lambda v: v.max(0), a.max(0)),
                                   ("min", lambda v: v.min(0), a.min(0))):
            with jax.debug.record_collectives() as log:
                got = f(x)
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
            assert [(r.name, r.axes) for r in log] == [(declared[reduction], ("x",))]


# What each primitive declares where it registers, instead of passes keeping
# lists of names (ir/primitive.h). A declaration removed, or one added without
# updating this table, fails `test_declared_traits`.
_DECLARED = {
    # Sharding propagation over Auto axes (sharding/propagation.cpp).
    "regroups_dims": {"reshape"},
    "unmapped_dims_keep_sharding": {"concatenate", "slice", "pad", "cumsum", "cumprod", "cummax", "cummin"},
    "retiles_through_other_dim": {"concatenate"},
    "fixed_result_specs": {"reshard", "sharding_constraint", "shard_map"},
    # XLA's buffer assignment (planning.py's memory model).
    "fused_into_readers": {"broadcast_in_dim", "iota", "transpose", "reshape", "squeeze", "pvary", "rev",
                           "slice", "pad", "unstack"},
    "fuses_operands": {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
                       "reduce_xor", "argmax", "argmin", "concatenate", "stack", "pad", "dynamic_slice", "cumsum",
                       "cumprod", "cummax", "cummin", "gather", "scatter", "scatter_add", "scatter_sub", "scatter_mul",
                       "scatter_min", "scatter_max"},
    "result_is_operand_view": {"reshape", "squeeze", "pvary", "stop_gradient", "sharding_constraint",
                               "mesh_cast", "name", "pbroadcast", "optimization_barrier"},
    "has_effects": {"debug_callback", "io_callback"},
    # Sharding propagation into sub-programs (sharding/propagation.cpp); validate() requires it.
    "sub_program_links": {"cond", "while", "scan"},
    # How XLA's CPU compiler changes the equation (runtime/xla_rewrites.cpp): its own
    # rewrite, and what FMA contraction and CSE read (products, sums, operands that
    # commute, moves computed inside the reader's loop).
    "xla_rewrite": {"convert_element_type", "div"},
    "fma_product": {"mul", "square", "integer_pow"},
    "commutative": {"add", "add_any", "mul", "max", "min", "and", "or", "xor", "eq", "ne"},
    "moves_elements": {"reshape", "transpose", "slice", "rev", "squeeze", "broadcast_in_dim"},
    # What jax.checkpoint_policies' dots policies save (transforms/vjp.cpp, _src/remat.py).
    "saved_as_dot": {"dot_general", "conv_general_dilated"},
    # Printed as a call of its sub-program, or as JAX's pp rule prints it (ir/printing.h).
    "prints_as_call": {"jit"},
    "print_rule": {"dot_general", "conv_general_dilated", "ragged_dot_general", "broadcast_in_dim", "reshape",
                   "iota", "convert_element_type", "reshard", "shard_map", "reduce_sum", "gather", "scatter",
                   "scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max",
                   "custom_jvp_call",
                   # Reductions batched by vmap print their shifted axes as np.int64, as JAX's do.
                   "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "reduce_xor",
                   "argmax", "argmin"},
    # Layout-dependent kernels: fused only on contiguous operands (runtime/fusion.cpp).
    "float_tile_dense_only": {"div"},
}
# Elementwise primitives XLA does not compute in bfloat16 as their float32
# function rounded once (runtime/xla_rewrites.cpp reads the others' results unrounded).
_NOT_WIDENED = {"integer_pow", "logistic", "nextafter", "reduce_precision", "bitcast_convert_type",
                "convert_element_type",
                "select_n", "clamp", "copy"}
_PARTIALS = {"psum": "sum", "pmax": "max", "pmin": "min", "reduce_sum": "sum", "reduce_max": "max",
             "reduce_min": "min", "reduce_prod": "prod", "reduce_and": "min", "reduce_or": "max",
             "argmax": "max", "argmin": "min"}
_SUB_PROGRAMS = {"scan": ("jaxpr",), "while": ("cond_jaxpr", "body_jaxpr"), "remat2": ("jaxpr",),
                 "custom_vjp_call": ("call_jaxpr",), "custom_jvp_call": ("call_jaxpr",), "linear_call": ("call_jaxpr",),
                 "shard_map": ("jaxpr",), "jit": ("jaxpr",)}


@pytest.mark.parametrize("trait", sorted(_DECLARED))
def test_declared_traits(trait):
    assert {name for name, info in INFO.items() if info[trait]} == _DECLARED[trait]


def test_declared_reductions_widening_and_sub_programs():
    assert {n: i["partials_reduction"] for n, i in INFO.items() if i["partials_reduction"]} == _PARTIALS
    assert {n for n, i in INFO.items() if i["elementwise"] and not i["bf16_widened_once"]} == _NOT_WIDENED
    assert all(i["bf16_widened_once"] for i in INFO.values() if not i["elementwise"])
    assert {n: i["sub_program_params"] for n, i in INFO.items() if i["sub_program_params"]} == _SUB_PROGRAMS
    # Layout-only primitives fix their results' layouts, except mesh_cast (laid out as its operand).
    assert {n for n, i in INFO.items() if i["layout_only"]} == {"reshard", "sharding_constraint", "mesh_cast"}
    assert {n: i["fma_sum"] for n, i in INFO.items() if i["fma_sum"]} == {"add": 1, "add_any": 1, "sub": -1}


# Results never inexact: whether JAX's rule for them is a zero JVP does not show.
_NEVER_INEXACT = {"and", "or", "xor", "not", "eq", "ne", "lt", "le", "gt", "ge", "is_finite", "argmax",
                  "argmin", "random_bits", "shift_left", "shift_right_arithmetic", "shift_right_logical"}


def test_zero_derivatives_are_jax_s(real_jax):
    """Primitives whose derivative is zero whatever the inputs (JAX's `defjvp_zero`) declare
    `zero_derivative`, which autodiff and the refused Ref writes (_src/ad_refs.py) read:
    their results are symbolic zeros, not differentiated values. stop_gradient is JAX's
    own case (no JVP rule; its tracer drops the tangent)."""
    import functools

    from jax._src.interpreters import ad
    zero = {p.name for p, rule in ad.primitive_jvps.items()
            if isinstance(rule, functools.partial) and getattr(rule.func, "__name__", "") == "zero_jvp"}
    declared = {n for n, i in INFO.items() if i["zero_derivative"]}
    assert declared == (zero & set(NAMES)) - _NEVER_INEXACT | {"stop_gradient"}
    assert all(INFO[n]["vjp"] for n in declared)


# The executors' fast paths are declared by each primitive (Primitive::float_tile for
# elementwise fusion, Primitive::int_scalar_op for runs of 0-d int32 equations). An
# elementwise primitive computing float32 (or int32) from one or two operands of its
# result's type that declares neither is listed here with the reason, so a
# primitive added or changed without its fast path fails `test_fast_paths_are_declared`.
_HAND_WRITTEN = "a kernel written outside the family helpers: no fusion loop declared yet (it runs unfused)"
_UNARY_INDEX = "unary: the index arithmetic scalar runs serve (JAX's normalisation) is binary ops and select_n"
_MOVES_ONLY = "moves its operand unchanged: nothing to compute"
_THREE_OPERANDS = "three operands: the scalar loops take one or two"
_NOT_FUSED = {
    "clamp": _HAND_WRITTEN, "abs": _HAND_WRITTEN, "pow": _HAND_WRITTEN,
    "nextafter": "works on its operands' bits: no fusion loop declared yet (it runs unfused)",
    "copy": _MOVES_ONLY, "name": _MOVES_ONLY, "stop_gradient": _MOVES_ONLY,
}
_NO_SCALAR_OP = {
    **{n: _UNARY_INDEX for n in ("abs", "clz", "neg", "not", "population_count", "sign", "square")},
    "copy": _MOVES_ONLY, "name": _MOVES_ONLY, "stop_gradient": _MOVES_ONLY, "clamp": _THREE_OPERANDS,
}


def _result_dtype(name: str, dtype: str):
    """The result dtype of the primitive on as many operands of `dtype` (shape (4,)) as it
    takes at least, or None when it refuses them."""
    count = INFO[name]["operands"][0]
    try:
        (out,) = _core.abstract_eval(name, [_core.ShapedArray((4,), np.dtype(dtype))] * count, {})
    except Exception:
        return None
    return np.dtype(out.dtype)


def test_fast_paths_are_declared():
    elementwise = sorted(n for n, i in INFO.items() if i["elementwise"])
    tiles = {n for n in elementwise if _result_dtype(n, "float32") == np.dtype("float32")}
    scalar = {n for n in elementwise if _result_dtype(n, "int32") in (np.dtype("int32"), np.dtype(bool))}
    assert {n for n in tiles if not INFO[n]["float_tile"]} == set(_NOT_FUSED)
    assert {n for n in scalar if not INFO[n]["int_scalar_op"]} == set(_NO_SCALAR_OP)
    # Only elementwise primitives fuse; scalar ops sit on local primitives.
    assert all(INFO[n]["elementwise"] for n, i in INFO.items() if i["float_tile"])
    assert all(i["kind"] == "local" for i in INFO.values() if i["int_scalar_op"])
    assert INFO["select_n"]["int_scalar_op"] and not INFO["clamp"]["int_scalar_op"]

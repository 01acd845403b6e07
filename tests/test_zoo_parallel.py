"""Context parallelism (ring attention, load-balanced layout, all-gather KV),
Megatron sequence parallelism and their products with DP/FSDP on the GPT
(examples/zoo_parallel.py, ex_zoo_context.py, ex_zoo_sequence.py): the loss
and every gradient equal the NumPy backprop's and real JAX's; the step's
program holds the collectives JAX's does and executes the ones the algorithm
implies; the balanced layout evens out the ring's work per device."""
import collections
import dataclasses
import os
import re
import sys

import numpy as np
import pytest

import meshsim

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))
import ex_zoo_context  # noqa: E402
import gpt  # noqa: E402
import zoo_parallel  # noqa: E402

ATOL = 2e-5
CASES = {
    "cp ring balanced": (((2, 4), ("dp", "cp")), dict(attention="ring")),
    "cp ring contiguous": (((2, 4), ("dp", "cp")), dict(attention="ring", balanced=False)),
    "cp all-gather": (((2, 4), ("dp", "cp")), dict(attention="allgather")),
    "sp": (((2, 4), ("dp", "tp")), {}),
    "dp cp tp": (((2, 2, 2), ("dp", "cp", "tp")), {}),
    "fsdp cp tp": (((2, 2, 2), ("fsdp", "cp", "tp")), {}),
    "dp fsdp cp": (((2, 2, 2), ("dp", "fsdp", "cp")), dict(attention="allgather")),
    "cp 8, odd shapes": (((8,), ("cp",)), dict(cfg=dataclasses.replace(
        gpt.CONFIG, vocab=19, seq=32, dim=24, heads=3, hidden=20, layers=2, batch=2))),
}


def assert_matches(got, ref, atol=ATOL):
    (loss, grads), (ref_loss, ref_grads) = got, ref
    np.testing.assert_allclose(np.asarray(loss), np.asarray(ref_loss), rtol=atol, atol=atol)
    assert [k for k, _ in gpt.flatten(grads)] == [k for k, _ in gpt.flatten(ref_grads)]
    for (k, g), (_, r) in zip(gpt.flatten(grads), gpt.flatten(ref_grads)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=atol, atol=atol, err_msg=k)


@pytest.fixture(scope="module", params=list(CASES))
def env(request):
    mesh, kwargs = CASES[request.param]
    e = zoo_parallel.build(meshsim, *mesh, **kwargs)
    e["case"] = request.param
    return e


def test_loss_and_every_gradient_match_numpy(env):
    assert_matches(env["step"](), zoo_parallel.numpy_reference(env))


def primitive_counts(jax, env):
    text = str(jax.make_jaxpr(env["loss_and_grads"])(*env["args"]))
    return collections.Counter(re.findall(r"\b(all_gather|reduce_scatter|ppermute|psum_invariant|"
                                          r"all_to_all)\[", text))


@pytest.mark.parametrize("case", ["cp ring balanced", "cp all-gather", "sp", "dp fsdp cp"])
def test_program_holds_the_collectives_jax_traces(case, real_jax):
    mesh, kwargs = CASES[case]
    ours = zoo_parallel.build(meshsim, *mesh, **kwargs)
    theirs = zoo_parallel.build(real_jax, *mesh, **kwargs)
    assert primitive_counts(meshsim, ours) == primitive_counts(real_jax, theirs)


@pytest.mark.parametrize("case", ["fsdp cp tp"])
def test_matches_real_jax(case, real_jax):
    mesh, kwargs = CASES[case]
    ours = zoo_parallel.build(meshsim, *mesh, **kwargs)
    theirs = zoo_parallel.build(real_jax, *mesh, **kwargs)
    np.testing.assert_array_equal(np.asarray(ours["tokens"]), np.asarray(theirs["tokens"]))
    assert_matches(ours["step"](), theirs["step"]())


def executed(env):
    with meshsim.debug.record_collectives() as records:
        env["step"]()
    return collections.Counter((r.name, r.axes) for r in records), records


def test_ring_passes_k_v_and_positions_cp_times_per_layer():
    env = zoo_parallel.build(meshsim, (2, 4), ("dp", "cp"))
    counts, records = executed(env)
    L, cp = env["cfg"].layers, 4
    # Forward: K and V each step; backward: K's and V's cotangents. The positions' ring does
    # not depend on the layer, so the gradient's partial evaluation moves it out of the
    # layers' scan and it runs once, as in JAX's program.
    assert counts[("ppermute", ("cp",))] == L * cp * (2 + 2) + cp
    cfg = env["cfg"]
    kv_bytes = 4 * (cfg.batch // 2) * (cfg.seq // cp) * cfg.dim
    assert {r.bytes for r in records if r.name == "ppermute"} == {kv_bytes, 4 * cfg.seq // cp}


def runs_per_collective(jaxpr, times=1, counts=None):
    """How many times each collective of a (JAX or meshsim) closed jaxpr runs: a scan's body
    runs `length` times; cond branches and nested jits count once."""
    counts = collections.Counter() if counts is None else counts
    for e in jaxpr.eqns:
        name = e.primitive.name
        if name in ("ppermute", "all_gather", "reduce_scatter", "all_to_all"):
            counts[name] += times
        inner = times * e.params["length"] if name == "scan" else times
        assert name != "while", "a while loop's trip count is not known here"
        for value in e.params.values():
            for sub in value if isinstance(value, (tuple, list)) else [value]:
                body = getattr(sub, "jaxpr", sub)
                if hasattr(body, "eqns"):
                    runs_per_collective(body, inner, counts)
    return counts


@pytest.mark.parametrize("case", ["cp ring balanced", "sp"])
def test_executed_collectives_are_those_jax_runs(case, real_jax):
    mesh, kwargs = CASES[case]
    ours = zoo_parallel.build(meshsim, *mesh, **kwargs)
    theirs = zoo_parallel.build(real_jax, *mesh, **kwargs)
    jax_runs = runs_per_collective(real_jax.make_jaxpr(theirs["loss_and_grads"])(*theirs["args"]).jaxpr)
    counts, _ = executed(ours)
    ran = collections.Counter()
    for (name, _), n in counts.items():
        ran[name] += n
    assert {k: v for k, v in ran.items() if k in jax_runs} == dict(jax_runs)


def test_sequence_parallel_gathers_before_and_scatters_after_each_block():
    env = zoo_parallel.build(meshsim, (2, 4), ("dp", "tp"))
    counts, records = executed(env)
    L = env["cfg"].layers
    # Attention and MLP: an all-gather in, a reduce-scatter out; the backward
    # swaps them. Plus one gather of the positions.
    assert counts[("all_gather", ("tp",))] == 4 * L + 1
    assert counts[("reduce_scatter", ("tp",))] == 4 * L


def test_all_gather_kv_reduce_scatters_their_gradients():
    env = zoo_parallel.build(meshsim, (2, 4), ("dp", "cp"), attention="allgather")
    counts, _ = executed(env)
    L = env["cfg"].layers
    # K and V per layer; the positions once (they do not depend on the layer,
    # so the scan's gradient computes their gather once, outside the loop).
    assert counts[("all_gather", ("cp",))] == 2 * L + 1
    assert counts[("reduce_scatter", ("cp",))] == 2 * L


@pytest.mark.parametrize("cp,seq", [(4, 16), (2, 8), (8, 64)])
def test_balanced_layout(cp, seq):
    order = zoo_parallel.balanced_order(seq, cp)
    assert sorted(order) == list(range(seq))
    folds = ex_zoo_context.folds_per_device(order, cp)
    assert len(set(folds)) == 1 and sum(folds) == cp * (2 * cp + 1)
    contiguous = ex_zoo_context.folds_per_device(np.arange(seq), cp)
    assert sum(contiguous) == sum(folds) and max(contiguous) == 4 * cp - 1


def attention_flops_per_device(env):
    import glob
    import gzip
    import json
    import tempfile
    with tempfile.TemporaryDirectory() as log_dir:
        with meshsim.profiler.trace(log_dir):
            meshsim.block_until_ready(env["loss_and_grads"](*env["args"]))
        path, = glob.glob(os.path.join(log_dir, "plugins/profile/*/*.trace.json.gz"))
        with gzip.open(path, "rt") as f:
            events = json.load(f)["traceEvents"]
    flops = collections.Counter()
    for e in events:
        if e.get("cat") == "op" and e["name"] == "dot_general" and e["pid"] > 0:
            flops[e["pid"] - 1] += e["args"]["flops"]
    return np.array([flops[d] for d in range(8)])


def test_the_balanced_layout_evens_out_the_timeline():
    """On a ("cp",) mesh, the contiguous layout leaves the first device with
    far fewer matmul flops than the last; the balanced one evens them."""
    cfg = dataclasses.replace(gpt.CONFIG, seq=64, layers=1)
    contiguous = attention_flops_per_device(zoo_parallel.build(meshsim, (8,), ("cp",), balanced=False,
                                                               cfg=cfg))
    balanced = attention_flops_per_device(zoo_parallel.build(meshsim, (8,), ("cp",), cfg=cfg))
    assert contiguous.sum() == balanced.sum()
    assert np.all(np.diff(contiguous) > 0)
    assert balanced.max() == balanced.min() < contiguous.max()

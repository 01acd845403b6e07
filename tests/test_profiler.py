"""meshsim.profiler: JAX's profiler API writing a per-device Chrome trace, the
bytes every collective moves per device, and the cost model's predictions
against hand-computed formulas."""
import glob
import gzip
import json
import os

import numpy as np
import pytest

import meshsim as jax
import meshsim.numpy as jnp
from meshsim import _core
from meshsim.profiler import HARDWARE, Hardware
from meshsim.sharding import AxisType, PartitionSpec as P

F32 = 4


def _load(log_dir, name="*.trace.json.gz"):
    """The trace-event JSON of the only trace under log_dir, laid out as JAX lays it out."""
    files = glob.glob(os.path.join(log_dir, "plugins", "profile", "*", name))
    assert len(files) == 1, files
    with gzip.open(files[0], "rt") as f:
        return json.load(f)


def _tracks(trace):
    """pid -> process name, and the complete events by process name."""
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    spans = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            spans.setdefault(names[e["pid"]], []).append(e)
    return names, spans


def _fsdp(mesh):
    @jax.jit
    @jax.shard_map(mesh=mesh, in_specs=(P("dp", None), P("dp", None)), out_specs=P("dp", None))
    def matmul_fsdp(x_block, w_block):
        w_full = jax.lax.all_gather(w_block, "dp", axis=0, tiled=True)
        return x_block @ w_full
    return matmul_fsdp


def test_notebook_cells_write_a_trace_with_a_track_per_device(tmp_path):
    """The seed notebook's cells: start_trace, run matmul_fsdp, stop_trace. Every device is a
    process; each of the mesh's 4 devices runs the all_gather of float32[4096,256] (4 MiB)
    receiving and sending 3/4 of it, then its dot_general."""
    mesh = jax.make_mesh((4,), ("dp",))
    x = jax.random.normal(jax.random.key(0), (64, 4096))
    w = jax.random.normal(jax.random.key(1), (4096, 256))
    matmul_fsdp = _fsdp(mesh)
    jax.profiler.start_trace(log_dir=str(tmp_path))
    _ = matmul_fsdp(x, w).block_until_ready()
    jax.profiler.stop_trace()
    assert not _core.timeline_active()
    trace = _load(tmp_path)
    assert trace["displayTimeUnit"] == "ns"
    names, spans = _tracks(trace)
    devices = [f"/device:CPU:{d.id}" for d in jax.devices()]
    assert sorted(names.values()) == sorted(["/host:CPU"] + devices)
    assert len(set(names)) == len(names)  # one pid per device
    assert "PjitFunction(matmul_fsdp)" in [e["name"] for e in spans["/host:CPU"]]
    for d in range(4):
        ops = spans[f"/device:CPU:{d}"]
        gathers = [e for e in ops if e["name"] == "all_gather"]
        assert len(gathers) == 1
        args = gathers[0]["args"]
        assert args["axes"] == ["dp"] and args["replica_group"] == [0, 1, 2, 3]
        assert args["bytes_received"] == args["bytes_sent"] == 3 * 4096 * 256 * F32 // 4
        dots = [e for e in ops if e["name"] == "dot_general"]
        assert len(dots) == 1
        assert dots[0]["args"]["flops"] == 2 * 16 * 4096 * 256
        assert dots[0]["ts"] >= gathers[0]["ts"] + gathers[0]["dur"] - 1e-3
        assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in ops)
    for d in range(4, len(devices)):  # not on the mesh: nothing ran there
        assert f"/device:CPU:{d}" not in spans


def test_errors_match_jax(tmp_path, real_jax):
    with pytest.raises(RuntimeError) as ours:
        jax.profiler.stop_trace()
    with pytest.raises(RuntimeError) as theirs:
        real_jax.profiler.stop_trace()
    assert str(ours.value) == str(theirs.value) == "No profile started"
    jax.profiler.start_trace(tmp_path / "a")
    try:
        with pytest.raises(RuntimeError) as ours:
            jax.profiler.start_trace(tmp_path / "b")
        with pytest.raises(RuntimeError) as ours_cm, jax.profiler.trace(tmp_path / "c"):
            pass
    finally:
        jax.profiler.stop_trace()
    assert str(ours.value) == str(ours_cm.value) == (
        "Profile has already been started. Only one profile may be run at a time.")
    assert not os.path.exists(tmp_path / "b")
    jax.profiler.start_trace(tmp_path / "d")  # a failed start leaves nothing behind
    jax.profiler.stop_trace()


def test_signatures_match_jax(real_jax):
    import inspect
    for name in ("start_trace", "trace", "annotate_function", "StepTraceAnnotation"):
        ours = inspect.signature(getattr(jax.profiler, name))
        theirs = inspect.signature(getattr(real_jax.profiler, name))
        assert list(ours.parameters) == list(theirs.parameters), name
        assert [p.default for p in ours.parameters.values()] == \
            [p.default for p in theirs.parameters.values()], name


def test_annotations_and_perfetto_file(tmp_path):
    @jax.profiler.annotate_function
    def step(x):
        return jnp.sin(x) * 2

    @jax.profiler.annotate_function
    def other(x):
        return x

    other = jax.profiler.annotate_function(other.__wrapped__, name="renamed")
    x = jnp.ones((8,))
    with jax.profiler.TraceAnnotation("outside"):  # no trace open: recorded nowhere
        step(x)
    with jax.profiler.trace(str(tmp_path), create_perfetto_trace=True):
        with jax.profiler.StepTraceAnnotation("train", step_num=3):
            with jax.profiler.TraceAnnotation("hello", a=1):
                step(x).block_until_ready()
                other(x)
    trace = _load(tmp_path)
    perfetto = _load(tmp_path, "perfetto_trace.json.gz")
    assert "metadata" in trace and "metadata" not in perfetto
    assert perfetto["traceEvents"] == trace["traceEvents"]
    _, spans = _tracks(trace)
    host = {e["name"]: e for e in spans["/host:CPU"]}
    assert host["train"]["args"] == {"step_num": "3"}  # JAX's args are strings
    assert host["hello"]["args"] == {"a": "1"}
    assert "outside" not in host and "renamed" in host
    assert "test_annotations_and_perfetto_file.<locals>.step" in host
    outer, inner = host["train"], host["hello"]
    assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    names = [e["name"] for e in spans["/device:CPU:0"]]
    assert "sin" in names and "mul" in names


def test_two_traces_in_one_second_are_both_kept(tmp_path):
    for _ in range(2):
        with jax.profiler.trace(tmp_path):
            jnp.ones(3) + 1
    assert len(glob.glob(str(tmp_path / "plugins" / "profile" / "*" / "*.trace.json.gz"))) == 2


# ---- bytes per collective and device -----------------------------------------------------

def _record(f, *args):
    with jax.debug.record_collectives() as log:
        jax.block_until_ready(f(*args))
    return [c for c in log if c.name != "pvary"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bytes_per_device_of_every_collective(seed):
    rng = np.random.default_rng(seed)
    mesh = jax.make_mesh((2, 4), ("dp", "tp"), axis_types=(AxisType.Auto,) * 2)
    rows, cols = 4 * int(rng.integers(1, 5)), 16 * int(rng.integers(1, 5))
    x = rng.standard_normal((2 * rows, cols)).astype(np.float32)
    block = rows * cols * F32 // 4  # one device's block of x over P("dp", "tp")
    everyone = set(range(8))

    def run(body, out_specs):
        f = jax.shard_map(body, mesh=mesh, in_specs=P("dp", "tp"), out_specs=out_specs)
        return _record(f, x)

    def check(log, name, axes, per_device):
        # (eager shard_map on a NumPy argument also records assembling its result)
        (c,) = [r for r in log if r.name == name and r.axes == axes]
        assert c.bytes == per_device
        assert c.bytes_sent == c.bytes_received == {d: per_device for d in everyone}

    check(run(lambda b: jax.lax.all_gather(b, "tp", axis=1, tiled=True), P("dp", "tp")),
          "all_gather", ("tp",), 3 * block)
    check(run(lambda b: jax.lax.psum(b, "dp"), P(None, "tp")), "psum_invariant", ("dp",),
          2 * block * 1 // 2)
    check(run(lambda b: jax.lax.psum(b, ("dp", "tp")), P()), "psum_invariant", ("dp", "tp"),
          2 * block * 7 // 8)
    check(run(lambda b: jax.lax.psum_scatter(b, "tp", scatter_dimension=1, tiled=True),
              P("dp", "tp")), "reduce_scatter", ("tp",), block // 4 * 3)
    check(run(lambda b: jax.lax.all_to_all(b, "tp", 1, 0, tiled=True), P("dp", "tp")),
          "all_to_all", ("tp",), block * 3 // 4)
    # A partial permutation: tp 0 -> 1 and 2 -> 3 (in each dp row); nobody else sends.
    log = run(lambda b: jax.lax.ppermute(b, "tp", [(0, 1), (2, 3)]), P("dp", "tp"))
    (c,) = [r for r in log if r.name == "ppermute"]
    devices = np.array(mesh.devices).reshape(2, 4)
    senders = {devices[r, t].id for r in range(2) for t in (0, 2)}
    receivers = {devices[r, t].id for r in range(2) for t in (1, 3)}
    assert c.bytes == block
    assert c.bytes_sent == {d: block if d in senders else 0 for d in everyone}
    assert c.bytes_received == {d: block if d in receivers else 0 for d in everyone}


def test_bytes_per_device_of_explicit_reshards():
    rng = np.random.default_rng(7)
    mesh = jax.make_mesh((2, 4), ("dp", "tp"), axis_types=(AxisType.Explicit,) * 2)
    rows, cols = 4 * int(rng.integers(1, 6)), 4 * int(rng.integers(1, 6))
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    total = a.nbytes
    with jax.set_mesh(mesh):
        x = jax.device_put(a, P("dp", "tp")).block_until_ready()
        jax.effects_barrier()  # nothing dispatched before (by earlier tests) is still running
        with jax.debug.record_collectives() as log:
            jax.reshard(x, P())                # all-gathers, minor dim first (XLA's): 7/8 in all
            jax.reshard(x, P("dp", None))      # all-gather over tp: lacks 3/4 of its dp half
            jax.reshard(x, P("tp", "dp"))      # all-to-all
            x.sum(0)                           # reduce a dp-sharded dim: psum over dp
    gather_all_tp, gather_all_dp, gather_tp, a2a, psum = log
    assert gather_all_tp.bytes_received == {d: total // 2 * 3 // 4 for d in range(8)}
    assert gather_all_dp.bytes_received == {d: total // 2 for d in range(8)}
    assert gather_tp.bytes_received == {d: total // 2 * 3 // 4 for d in range(8)}
    for c in log:  # every byte received was sent by someone
        assert sum(c.bytes_sent.values()) == sum(c.bytes_received.values())
        assert c.bytes == max(c.bytes_received.values())
    # The transpose of the 2x4 block grid: each device keeps the overlap of its old and new block.
    old = [(r * rows // 2, (r + 1) * rows // 2, t * cols // 4, (t + 1) * cols // 4)
           for r in range(2) for t in range(4)]
    new = [(t * rows // 4, (t + 1) * rows // 4, r * cols // 2, (r + 1) * cols // 2)
           for r in range(2) for t in range(4)]
    for d in range(8):
        (r0, r1, c0, c1), (s0, s1, d0, d1) = old[d], new[d]
        kept = max(0, min(r1, s1) - max(r0, s0)) * max(0, min(c1, d1) - max(c0, d0))
        assert a2a.bytes_received[d] == ((s1 - s0) * (d1 - d0) - kept) * F32
    assert psum.bytes_sent == {d: 2 * (cols // 4 * F32) // 2 for d in range(8)}


# ---- the cost model ----------------------------------------------------------------------

def test_dot_general_roofline_on_every_preset():
    rng = np.random.default_rng(3)
    m, k, n = (int(v) for v in rng.integers(8, 64, size=3))
    x, w = jnp.ones((m, k)), jnp.ones((k, n))
    f = jax.jit(lambda x, w: x @ w)
    for name, hw in HARDWARE.items():
        est = jax.profiler.estimate(f, x, w, hardware=name)
        (dot,) = [o for o in est.ops if o.name == "dot_general"]
        flops, moved = 2 * m * k * n, F32 * (m * k + k * n + m * n)
        assert dot.flops == flops and dot.bytes_accessed == moved
        expected = max(flops / hw.peak_flops, moved / hw.hbm_bandwidth)
        assert dot.time == pytest.approx(expected)
        assert dot.bound == ("compute" if flops / hw.peak_flops >= moved / hw.hbm_bandwidth
                             else "memory")
        assert est.communication_time == 0 and est.step_time == pytest.approx(expected)


def test_elementwise_and_reduction_costs():
    x = jnp.ones((16, 32))
    est = jax.profiler.estimate(jax.jit(lambda x: jnp.sin(x).sum(0)), x, hardware="tpu-v5p")
    sin, total = [o for o in est.ops if o.name in ("sin", "reduce_sum")]
    assert (sin.flops, sin.bytes_accessed) == (512, 2 * 512 * F32)
    assert (total.flops, total.bytes_accessed) == (512, (512 + 32) * F32)


def test_fsdp_all_gather_alpha_beta():
    """All-gather of float32[4096,256] over dp=4 on TPU v5e: 3 ring steps and 3 MiB over the
    bidirectional ICI ring; on H100 (all 4 in one node) over NVLink."""
    mesh = jax.make_mesh((4,), ("dp",))
    x = jnp.ones((16, 4096))
    w = jnp.ones((4096, 256))
    f = _fsdp(mesh)
    moved = 3 * 4096 * 256 * F32 // 4
    v5e = jax.profiler.estimate(f, x, w, hardware="tpu-v5e")
    (gather,) = [o for o in v5e.ops if o.kind == "communication"]
    assert (gather.name, gather.axes, gather.group_size) == ("all_gather", ("dp",), 4)
    assert gather.bytes_received == moved
    assert gather.time == pytest.approx(3 * 1e-6 + moved / (2 * 4.5e10))
    assert v5e.communication_time == pytest.approx(gather.time)
    (dot,) = [o for o in v5e.ops if o.name == "dot_general"]
    assert dot.flops == 2 * 4 * 4096 * 256
    assert v5e.step_time == pytest.approx(v5e.compute_time + v5e.communication_time)
    assert v5e.communication_by_axes() == {("dp",): moved}
    h100 = jax.profiler.estimate(f, x, w, hardware="gpu-h100")
    (gather,) = [o for o in h100.ops if o.kind == "communication"]
    assert gather.bound == "links"
    assert gather.time == pytest.approx(3 * 2e-6 + moved / 4.5e11)


def test_all_reduce_over_two_axes_and_across_nodes():
    mesh = jax.make_mesh((2, 4), ("dp", "tp"), axis_types=(AxisType.Auto,) * 2)
    f = jax.jit(jax.shard_map(lambda b: jax.lax.psum(b, ("dp", "tp")), mesh=mesh,
                              in_specs=P("dp", "tp"), out_specs=P()))
    x = jnp.ones((32, 64))
    block = 16 * 16 * F32
    moved = 2 * block * 7 // 8
    tpu = jax.profiler.estimate(f, x, hardware="tpu-v5e")
    (c,) = [o for o in tpu.ops if o.kind == "communication"]
    assert c.time == pytest.approx(2 * 7 * 1e-6 + moved / (2 * 2 * 4.5e10))  # both axes' links
    # Nodes of 2 devices: each group spans 4 nodes and goes over the network.
    small_nodes = Hardware("test", peak_flops=1e12, hbm_bandwidth=1e11, link_bandwidth=1e11,
                           link_latency=1e-6, devices_per_node=2, network_bandwidth=1e10,
                           network_latency=1e-5)
    est = jax.profiler.estimate(f, x, hardware=small_nodes)
    (c,) = [o for o in est.ops if o.kind == "communication"]
    assert c.bound == "network" and c.time == pytest.approx(2 * 7 * 1e-5 + moved / 1e10)
    with pytest.raises(ValueError, match="Unknown hardware 'tpu-v9'"):
        jax.profiler.estimate(f, x, hardware="tpu-v9")


def test_estimate_leaves_no_session_open():
    f = jax.jit(lambda x: x + 1)
    with pytest.raises(ZeroDivisionError):
        jax.profiler.estimate(lambda x: f(x) / 0 if False else 1 / 0, jnp.ones(2))
    assert not _core.timeline_active()

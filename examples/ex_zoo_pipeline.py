"""Pipeline parallelism of the GPT (examples/gpt.py) over a "pp" mesh axis:
GPipe, 1F1B and interleaved (virtual stages) schedules, written once against
a module `jax` (meshsim or JAX).

The layers are cut into `pp * virtual` chunks; device d holds chunks d,
d + pp, d + 2 pp, ... (one "virtual stage" each). A schedule is a static
table: at every tick each device runs one operation, the forward (F) or the
backward (B) of one chunk on one microbatch, or idles. The whole step is one
`jit(shard_map(...))` whose body is a `lax.scan` over the table's rows: each
device reads its own entry (indexed by `axis_index("pp")`) and `lax.switch`es
to it, then two `ppermute`s move the tick's results one device along the ring:
activations forward, cotangents backward. A chunk's backward recomputes its
forward from the stashed input (`jax.vjp`), so only chunk inputs are kept.
The first chunk also embeds, the last one also runs the tied head and the
loss; the embedding/head gradients are summed over "pp" at the end.

The schedules differ only in their tables (`schedule`):
- GPipe: every forward, then every backward. Bubble (p-1)/(m+p-1).
- 1F1B: a device runs a backward as soon as one is ready, and starts a new
  forward only while fewer than p - d microbatches are in flight on it: the
  same bubble as GPipe, but at most p stashed inputs instead of m.
- interleaved: v chunks per device (virtual stages) in GPipe's order; each
  operation is 1/v as long, and the bubble shrinks to (p-1)/(v m + p-1).
- interleaved_1f1b: virtual stages with 1F1B's policy, forwards ordered in
  groups of p microbatches per chunk (Megatron's interleaved schedule).

In this lockstep form every tick lasts as long as its slowest operation, and
a backward (which recomputes its forward) costs three forwards: ticks that
mix forwards and backwards, as 1F1B's steady state does, idle the
forward-running devices for two thirds of the tick. GPipe's ticks are
uniform and its measured bubble is the textbook one; 1F1B's gain here is
memory (at most p stashed inputs per device instead of m).

`bubble_from_timeline` measures the idle fraction from meshsim's per-device
profiler timeline: the ticks are delimited by the ppermutes every device
runs, and a device is busy in a tick for the flops it ran in it."""
from __future__ import annotations

import dataclasses
import gzip
import glob
import json
import math
import os
import tempfile
from functools import partial

import numpy as np

try:
    import gpt
    import zoo_parallel
except ImportError:  # imported as examples.ex_zoo_pipeline
    from examples import gpt, zoo_parallel

IDLE, F_FIRST, F, B_LAST, B, B_FIRST = range(6)
SCHEDULES = ("gpipe", "1f1b", "interleaved", "interleaved_1f1b")


@dataclasses.dataclass
class Schedule:
    """ops[t, d] = (op, virtual stage j, microbatch i, then the (j, i) slot the
    activation and the cotangent received at the end of tick t go to, -1: none)."""
    name: str
    stages: int
    virtual: int
    microbatches: int
    ops: np.ndarray  # (ticks, stages, 7) int32

    @property
    def ticks(self):
        return self.ops.shape[0]

    def peak_in_flight(self):
        """Most stashed chunk inputs any device holds at once (forward done,
        backward not yet)."""
        peak = 0
        for d in range(self.stages):
            live = 0
            for op in self.ops[:, d, 0]:
                live += op in (F_FIRST, F)
                peak = max(peak, live)
                live -= op in (B_LAST, B, B_FIRST)
        return peak

    def textbook_bubble(self):
        p, m, v = self.stages, self.microbatches, self.virtual
        return (p - 1) / (v * m + p - 1)


def schedule(name: str, stages: int, microbatches: int, virtual: int = 1) -> Schedule:
    """Simulates the schedule tick by tick: an operation is ready once its
    input arrived (sent in an earlier tick); each device runs one ready
    operation per tick by the schedule's priority."""
    p, m, v = stages, microbatches, virtual
    chunks = p * v
    done_f, done_b = {}, {}  # (chunk, mb) -> tick it ran
    rows = []
    t = 0
    while len(done_b) < chunks * m:
        row = []
        for d in range(p):
            mine = [j * p + d for j in range(v)]
            ready_f = [(c, i) for c in mine for i in range(m) if (c, i) not in done_f
                       and (c == 0 or done_f.get((c - 1, i), t) < t)]
            ready_b = [(c, i) for c in mine for i in range(m) if (c, i) not in done_b
                       and done_f.get((c, i), t) < t
                       and (c == chunks - 1 or done_b.get((c + 1, i), t) < t)]
            in_flight = sum((c, i) in done_f and (c, i) not in done_b for c in mine for i in range(m))
            if name in ("gpipe", "interleaved"):
                all_f = all((c, i) in done_f for c in mine for i in range(m))
                pick = ("F", min(ready_f, key=lambda ci: (ci[1], ci[0]))) if ready_f else \
                       ("B", min(ready_b, key=lambda ci: (ci[1], -ci[0]))) if ready_b and all_f else None
            else:
                limit = p - d if v == 1 else (v - 1) * p + 2 * (p - d) - 1
                f_key = lambda ci: (ci[1] // p, ci[0] // p, ci[1])  # groups of p microbatches
                b_key = lambda ci: (ci[1] // p, -(ci[0] // p), ci[1])
                pick = ("B", min(ready_b, key=b_key)) if ready_b else \
                       ("F", min(ready_f, key=f_key)) if ready_f and in_flight < limit else None
            row.append(pick)
        for d, pick in enumerate(row):
            if pick:
                (done_f if pick[0] == "F" else done_b)[pick[1]] = t
        rows.append(row)
        t += 1
        if t > 4 * chunks * m + 4 * p:
            raise RuntimeError(f"schedule {name} does not finish")
    ops = np.full((len(rows), p, 7), -1, np.int32)
    for t, row in enumerate(rows):
        for d, pick in enumerate(row):
            if pick is None:
                ops[t, d, :3] = (IDLE, 0, 0)
                continue
            kind, (c, i) = pick
            if kind == "F":
                ops[t, d, :3] = (F_FIRST if c == 0 else F, c // p, i)
                if c + 1 < chunks:  # the next chunk's device stores the activation
                    ops[t, (c + 1) % p, 3:5] = ((c + 1) // p, i)
            else:
                ops[t, d, :3] = (B_FIRST if c == 0 else B_LAST if c == chunks - 1 else B, c // p, i)
                if c > 0:
                    ops[t, (c - 1) % p, 5:7] = ((c - 1) // p, i)
    return Schedule(name, p, v, m, ops)


def to_stages(blocks, stages, virtual):
    """(L, ...) stacked layers -> (stages, virtual, L / (stages virtual), ...):
    chunk c = j * stages + d goes to [d, j]."""
    def one(w):
        w = np.asarray(w)
        w = w.reshape(virtual, stages, w.shape[0] // (stages * virtual), *w.shape[1:])
        return np.swapaxes(w, 0, 1)
    return {k: one(w) for k, w in blocks.items()}


def from_stages(blocks):
    def one(w):
        w = np.swapaxes(np.asarray(w), 0, 1)
        return w.reshape(-1, *w.shape[3:])
    return {k: one(w) for k, w in blocks.items()}


def build(jax, name="gpipe", stages=4, microbatches=4, virtual=None, cfg=None, mesh_axes=(),
          dtype=None):
    """One training step of schedule `name` on a mesh ("pp", *mesh_axes):
    `stages` devices along "pp" and, per stage, the roles of
    examples/zoo_parallel.py for the other axes (`mesh_axes`: (name, size)
    pairs among "dp", "fsdp", "cp", "tp"); parameters, activations and
    cotangents in `dtype` (float32 by default), the loss summed in float32.
    Returns step() -> (loss, grads in gpt's layout)."""
    jnp, lax = jax.numpy, jax.lax
    P = jax.sharding.PartitionSpec
    sizes = dict(mesh_axes)
    axes = ("pp", *sizes)
    virtual = virtual or (2 if name.startswith("interleaved") else 1)
    if cfg is None:
        cfg = zoo_parallel.default_config(sizes)
        n_batch = math.prod(sizes.get(a, 1) for a in zoo_parallel.batch_axes_of(sizes) or ())
        cfg = dataclasses.replace(cfg, layers=2 * stages * virtual,
                                  batch=max(gpt.CONFIG.batch, n_batch * microbatches))
    sched = schedule(name, stages, microbatches, virtual)
    pieces = zoo_parallel.parts(jax, sizes, cfg)
    model, layer_fwd = pieces["model"], pieces["layer_fwd"]
    params = gpt.init_params(jax, cfg, dtype=dtype)
    act_dtype = params["wte"].dtype
    tokens, targets = gpt.init_batch(jax, cfg)
    mesh = jax.make_mesh((stages, *sizes.values()), axes)
    m = microbatches
    order = zoo_parallel.balanced_order(cfg.seq, sizes.get("cp", 1))
    n_tokens = cfg.batch * cfg.seq

    shared_keys = ("wte", "wpe", "lnf_g", "lnf_b")
    block_specs = {k: P("pp", None, *spec) for k, spec in pieces["block_specs"].items()}
    shared_specs = {k: pieces["param_specs"][k] for k in shared_keys}

    def missing(spec, skip=()):
        """The mesh axes `spec` does not split: a value of that spec is the
        same on all their devices."""
        used = {a for part in spec if part for a in (part if isinstance(part, tuple) else (part,))}
        return tuple(a for a in axes if a not in used and a not in skip)

    def vary(x, spec=P()):
        todo = missing(spec)
        return lax.pcast(x, todo, to="varying") if todo else x

    @jax.jit
    @partial(jax.shard_map, mesh=mesh,
             in_specs=(block_specs, shared_specs, pieces["data_spec"], pieces["data_spec"],
                       pieces["seq_spec"], P()),
             out_specs=(P(), block_specs, shared_specs))
    def train_step(blocks, shared, tokens, targets, positions, ops):
        d = lax.axis_index("pp")
        pos = pieces["cp_positions"](positions)

        def chunk_fwd(chunk, x):
            return lax.scan(lambda x, layer: (layer_fwd(x, layer, pos), None), x, chunk)[0]

        def first_fwd(chunk, shared, x_unused, toks):
            return chunk_fwd(chunk, model["embed"](shared, toks, positions))

        def last_loss(chunk, shared, x, tgts):
            return model["head_loss_sum"](shared, chunk_fwd(chunk, x), tgts) / n_tokens

        # Varying copies of everything: gradients stay per-device (no psum
        # inside a branch only some devices take) until the psums after the loop.
        blocks = {k: vary(w[0], block_specs[k]) for k, w in blocks.items()}  # (virtual, L/chunk, ...)
        shared = {k: vary(w) for k, w in shared.items()}
        toks = tokens.reshape(m, tokens.shape[0] // m, *tokens.shape[1:])
        tgts = targets.reshape(m, targets.shape[0] // m, *targets.shape[1:])
        act_shape = toks.shape[1:] + (cfg.dim,)
        zeros_act = vary(jnp.zeros(act_shape, act_dtype))
        state = dict(
            acts=vary(jnp.zeros((virtual, m) + act_shape, act_dtype)),   # stashed chunk inputs
            cots=vary(jnp.zeros((virtual, m) + act_shape, act_dtype)),   # received output cotangents
            g_blocks=jax.tree.map(jnp.zeros_like, blocks),
            g_shared=jax.tree.map(jnp.zeros_like, shared),
            loss=vary(jnp.zeros(())))
        def tick(state, row):
            op, j, i, fj, fi, bj, bi = (row[d, k] for k in range(7))
            chunk = jax.tree.map(lambda w: w[j], blocks)
            x_in = state["acts"][j, i]

            def idle():
                return zeros_act, zeros_act, state["g_blocks"], state["g_shared"], state["loss"]

            def fwd_first():
                return first_fwd(chunk, shared, x_in, toks[i]), zeros_act, *idle()[2:]

            def fwd():
                return chunk_fwd(chunk, x_in), zeros_act, *idle()[2:]

            def add_chunk_grads(g_chunk):
                return jax.tree.map(lambda acc, g: acc.at[j].add(g), state["g_blocks"], g_chunk)

            def add_shared(g_shared):
                return jax.tree.map(jnp.add, state["g_shared"], g_shared)

            def bwd_last():
                loss, vjp = jax.vjp(last_loss, chunk, shared, x_in, tgts[i])
                g_chunk, g_shared, dx, _ = vjp(jnp.ones_like(loss))
                return (zeros_act, dx, add_chunk_grads(g_chunk), add_shared(g_shared),
                        state["loss"] + loss)

            def bwd():
                _, vjp = jax.vjp(chunk_fwd, chunk, x_in)
                g_chunk, dx = vjp(state["cots"][j, i])
                return zeros_act, dx, add_chunk_grads(g_chunk), state["g_shared"], state["loss"]

            def bwd_first():
                _, vjp = jax.vjp(first_fwd, chunk, shared, x_in, toks[i])
                g_chunk, g_shared, _, _ = vjp(state["cots"][j, i])
                return (zeros_act, zeros_act, add_chunk_grads(g_chunk), add_shared(g_shared),
                        state["loss"])

            send_f, send_b, g_blocks, g_shared, loss = lax.switch(
                op, (idle, fwd_first, fwd, bwd_last, bwd, bwd_first))
            ring = [(k, (k + 1) % stages) for k in range(stages)]
            recv_f = lax.ppermute(send_f, "pp", ring)
            recv_b = lax.ppermute(send_b, "pp", [(b, a) for a, b in ring])

            def store(buf, j, i, value):
                ok = j >= 0
                j, i = jnp.maximum(j, 0), jnp.maximum(i, 0)
                return buf.at[j, i].set(jnp.where(ok, value, buf[j, i]))

            return dict(acts=store(state["acts"], fj, fi, recv_f),
                        cots=store(state["cots"], bj, bi, recv_b),
                        g_blocks=g_blocks, g_shared=g_shared, loss=loss), None

        state, _ = lax.scan(tick, state, ops)
        g_shared = {k: lax.psum(g, axes) for k, g in state["g_shared"].items()}
        g_blocks = {}
        for k, g in state["g_blocks"].items():
            over = missing(block_specs[k], skip=("pp",))
            g_blocks[k] = (lax.psum(g, over) if over else g)[None]
        return lax.psum(state["loss"], axes), g_blocks, g_shared

    layout = zoo_parallel.to_layout(params, cfg)
    staged = zoo_parallel.place(jax, mesh, to_stages(layout["blocks"], stages, virtual), block_specs)
    shared = zoo_parallel.place(jax, mesh, {k: params[k] for k in shared_keys}, shared_specs)
    data = zoo_parallel.place_data(jax, mesh, pieces, tokens, targets, order)
    ops = jnp.asarray(sched.ops)

    def step():
        loss, g_blocks, g_shared = train_step(staged, shared, *data, ops)
        grads = {k: np.asarray(g) for k, g in g_shared.items()}
        grads["blocks"] = from_stages(g_blocks)
        grads = zoo_parallel.from_layout(grads, cfg)
        return loss, grads

    return dict(jax=jax, mesh=mesh, schedule=sched, params=params, tokens=tokens,
                targets=targets, cfg=cfg, step=step, train_step=train_step,
                args=(staged, shared, *data, ops))


def bubble_from_timeline(env):
    """Runs one step under meshsim.profiler.trace and returns the idle
    fraction of the pipeline loop: ticks are cut at each device's ppermute
    pairs, a tick lasts as long as its busiest device's flops, and every other
    device idles for the difference."""
    jax = env["jax"]
    with tempfile.TemporaryDirectory() as log_dir:
        with jax.profiler.trace(log_dir):
            jax.block_until_ready(env["train_step"](*env["args"]))
        path, = glob.glob(os.path.join(log_dir, "plugins/profile/*/*.trace.json.gz"))
        with gzip.open(path, "rt") as f:
            events = json.load(f)["traceEvents"]
    return bubble_of_events(events, env["schedule"])


def tick_flops(events, stages):
    """flops[tick, device] of the scan's ticks, from the timeline's events."""
    per_device = {}
    for e in sorted((e for e in events if e.get("ph") == "X" and e["pid"] > 0),
                    key=lambda e: e["ts"]):
        per_device.setdefault(e["pid"] - 1, []).append(e)
    flops = []
    for d in range(stages):
        ticks, current, seen = [], 0.0, 0
        for e in per_device.get(d, []):
            if e["cat"] == "collective" and e["name"] == "ppermute":
                seen += 1
                if seen % 2 == 0:  # two ppermutes end a tick
                    ticks.append(current)
                    current = 0.0
            elif e["cat"] == "op" and seen % 2 == 0:
                current += e["args"]["flops"]
        flops.append(ticks)
    return np.array(flops).T


def bubble_of_events(events, sched):
    flops = tick_flops(events, sched.stages)
    assert flops.shape[0] == sched.ticks, (flops.shape, sched.ticks)
    tick_len = flops.max(axis=1)
    return 1 - flops.sum() / (sched.stages * tick_len.sum())


def run():
    import meshsim

    checks = []
    for name in SCHEDULES:
        env = build(meshsim, name)
        loss, grads = env["step"]()
        ref_loss, ref_grads = gpt.numpy_loss_and_grads(env["params"], env["tokens"], env["targets"],
                                                       env["cfg"])
        checks.append((f"pipeline {name} loss", np.asarray(loss), ref_loss))
        for (k, g), (_, r) in zip(gpt.flatten(grads), gpt.flatten(ref_grads)):
            checks.append((f"pipeline {name} d{k}", np.asarray(g), r))
    return checks


if __name__ == "__main__":
    import meshsim
    for name in SCHEDULES:
        env = build(meshsim, name, stages=4, microbatches=8)
        s = env["schedule"]
        print(f"{name:12s} ticks={s.ticks} peak stashed inputs={s.peak_in_flight()} "
              f"bubble measured={bubble_from_timeline(env):.3f} textbook={s.textbook_bubble():.3f}")

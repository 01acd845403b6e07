"""Many Python threads issuing mixed calls at once: eager ops, jitted calls,
shard_map programs with collectives, donation, reads of pending results, on
one shared mesh and on disjoint meshes. Each thread checks every result
against NumPy. Run as a script (the test suite runs it in a subprocess under
a watchdog; benchmarks/stress_concurrency.py runs a bigger version):

    python tests/stress/concurrent_calls.py THREADS CALLS_PER_THREAD SEED

Prints "ok <calls>" and exits 0, or prints what differed and exits 1. A hang
is caught by faulthandler, which dumps every thread's stack and exits 2."""
import faulthandler
import sys
import threading

import numpy as np

import meshsim as jax
import meshsim.numpy as jnp
from meshsim import lax
from meshsim.sharding import Mesh, NamedSharding, PartitionSpec as P


def build():
    devices = np.array(jax.devices())
    full = Mesh(devices, ("x",))
    grid = Mesh(devices.reshape(4, 2), ("x", "y"))
    halves = [Mesh(devices[:4], ("x",)), Mesh(devices[4:], ("x",))]

    def reduce_on(mesh):
        return jax.jit(jax.shard_map(lambda a: lax.psum(a, "x"), mesh=mesh, in_specs=P("x"),
                                     out_specs=P()))

    progs = {
        "psum_full": reduce_on(full),
        "psum_half0": reduce_on(halves[0]),
        "psum_half1": reduce_on(halves[1]),
        "grid": jax.jit(jax.shard_map(lambda a: lax.psum(a * 2.0, "y"), mesh=grid,
                                      in_specs=P("x", "y"), out_specs=P("x"))),
        "step": jax.jit(lambda w, x: w - 0.01 * jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w) ** 2))(w)),
        "donate": jax.jit(lambda a: a * 2.0 + 1.0, donate_argnums=0),
        "chain": jax.jit(lambda a: jnp.sin(a) + a),
    }
    return full, grid, halves, progs


def worker(tid, calls, seed, progs, full, grid, halves, errors):
    rng = np.random.default_rng(seed * 1000 + tid)
    pending = []  # (future, expected, what)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    w_dev = jnp.asarray(w)
    x8 = rng.standard_normal((16, 8)).astype(np.float32)

    def check(value, expected, what):
        got = np.asarray(value)
        if not np.allclose(got, expected, rtol=1e-3, atol=1e-3):
            errors.append(f"thread {tid}: {what} differs: max err "
                          f"{np.max(np.abs(got - expected)) if got.shape == np.shape(expected) else got.shape}")

    for i in range(calls):
        kind = rng.integers(0, 9)
        if kind == 0:  # eager op
            a = rng.standard_normal((4, 4)).astype(np.float32)
            check(jnp.tanh(jnp.asarray(a)) * 2, np.tanh(a) * 2, "eager")
        elif kind == 1:  # shard_map psum on the shared mesh, read later
            a = rng.standard_normal(8).astype(np.float32)
            pending.append((progs["psum_full"](jnp.asarray(a)), a.reshape(8, 1).sum(0), "psum_full"))
        elif kind == 2:  # disjoint meshes
            j = int(rng.integers(0, 2))
            a = rng.standard_normal(4).astype(np.float32)
            arr = jax.device_put(a, NamedSharding(halves[j], P("x")))
            pending.append((progs[f"psum_half{j}"](arr), a.reshape(4, 1).sum(0), f"psum_half{j}"))
        elif kind == 3:  # 2-axis mesh
            a = rng.standard_normal((4, 2)).astype(np.float32)
            expected = (a * 2).sum(1, keepdims=True)
            pending.append((progs["grid"](jnp.asarray(a)), expected, "grid"))
        elif kind == 4:  # chained training steps on a pending weight
            for _ in range(3):
                w_dev = progs["step"](w_dev, jnp.asarray(x8))
                t = np.tanh(x8 @ w)
                w = w - 0.01 * (x8.T @ (2 * t * (1 - t * t)))
            if rng.integers(0, 4) == 0:
                check(w_dev, w, "step")
        elif kind == 5:  # donation of a pending value
            a = rng.standard_normal(16).astype(np.float32)
            b = progs["chain"](jnp.asarray(a))
            c = progs["donate"](b)
            pending.append((c, (np.sin(a) + a) * 2 + 1, "donate"))
        elif kind == 6:  # read a pending result now
            if pending:
                v, e, what = pending.pop(int(rng.integers(0, len(pending))))
                check(v, e, what)
        elif kind == 7:  # eager op on a pending result
            a = rng.standard_normal(16).astype(np.float32)
            b = progs["chain"](jnp.asarray(a))
            check(jnp.sum(b), np.sum(np.sin(a) + a), "eager-on-pending")
        else:  # device_put onto the shared mesh of a pending value
            a = rng.standard_normal(8).astype(np.float32)
            b = jax.device_put(progs["chain"](jnp.asarray(a)), NamedSharding(full, P("x")))
            pending.append((b, np.sin(a) + a, "device_put"))
    for v, e, what in pending:
        check(v, e, what)
    check(w_dev, w, "final step")


def main(threads, calls, seed, watchdog=300):
    faulthandler.dump_traceback_later(watchdog, exit=True)
    full, grid, halves, progs = build()
    errors = []

    def run(tid):
        try:
            worker(tid, calls, seed, progs, full, grid, halves, errors)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {tid}: {type(e).__name__}: {e}")

    ts = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    jax.effects_barrier() if hasattr(jax, "effects_barrier") else None
    faulthandler.cancel_dump_traceback_later()
    if errors:
        print("\n".join(errors[:20]))
        return 1
    print(f"ok {threads * calls}")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                  int(sys.argv[4]) if len(sys.argv) > 4 else 300))

"""Calls from many Python threads at once: never a deadlock, every result
right. Each scenario runs in a subprocess whose faulthandler watchdog dumps
the stacks and exits if it hangs (a hang is a failure, not a wait)."""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import meshsim

# The subprocesses import the meshsim this test imported (a sanitizer build's, say).
ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(meshsim.__file__)))
WATCHDOG = 240  # seconds: far above the few seconds these take, to tell a hang from load


def _run(args, code=None):
    cmd = [sys.executable] + (["-c", textwrap.dedent(code)] if code else []) + list(map(str, args))
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=WATCHDOG + 60)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
    return p.stdout


# Two threads each dispatching thousands of shard_map calls without reading,
# then reading: programs queued behind the program they wait for hung here.
TWO_THREADS = """
import faulthandler, sys, threading
import numpy as np
import meshsim as jax, meshsim.numpy as jnp
from meshsim import lax
from meshsim.sharding import Mesh, PartitionSpec as P
faulthandler.dump_traceback_later(int(sys.argv[2]), exit=True)
mesh = Mesh(jax.devices(), ('x',))
f = jax.jit(jax.shard_map(lambda a: lax.psum(a, 'x'), mesh=mesh, in_specs=P('x'), out_specs=P()))
n = int(sys.argv[1])
def work(k, out):
    x = jnp.arange(8.0) + k
    results = [f(x) for _ in range(n)]
    out[k] = [float(r[0]) for r in results]
out = {}
threads = [threading.Thread(target=work, args=(k, out)) for k in range(2)]
for t in threads: t.start()
for t in threads: t.join()
for k in range(2):
    assert out[k] == [28.0 + 8 * k] * n, (k, set(out[k]))
print("ok")
"""


@pytest.mark.parametrize("run", range(3))
def test_two_threads_dispatching_thousands_of_shard_map_calls_then_reading(run):
    assert _run([2000, WATCHDOG], TWO_THREADS).strip() == "ok"


@pytest.mark.parametrize("seed", [0, 1])
def test_eight_threads_mixed_calls_on_shared_and_disjoint_meshes(seed):
    out = _run([os.path.join(ROOT, "tests", "stress", "concurrent_calls.py"), 8, 250, seed, WATCHDOG])
    assert out.strip() == "ok 2000"


def test_streams_of_device_sets_no_longer_used_are_retired():
    # Every non-empty subset of 8 devices would otherwise keep a thread each.
    import itertools

    import numpy as np

    import meshsim as jax
    import meshsim.numpy as jnp
    from meshsim import _core, lax
    from meshsim.sharding import Mesh, PartitionSpec as P

    def threads():
        return len(os.listdir("/proc/self/task"))

    devices = np.array(jax.devices())
    before = threads()
    subsets = [c for k in (2, 3, 4, 5) for c in itertools.combinations(range(8), k)][:150]
    for ids in subsets:
        mesh = Mesh(devices[list(ids)], ("x",))
        f = jax.jit(jax.shard_map(lambda a: lax.psum(a, "x"), mesh=mesh, in_specs=P("x"),
                                  out_specs=P()))
        out = f(jnp.arange(float(len(ids))))
        assert float(out[0]) == sum(range(len(ids)))
        assert _core.num_dispatch_streams() <= 17
    assert threads() - before <= 20


# Threads donating and reading the same arrays at once: of the calls donating
# an array exactly one runs, and the others raise JAX's deleted-buffer errors;
# a call donating two arrays donates both or neither; a read gets the value or
# JAX's deleted-array error. Never a crash, a hang or a wrong value.
DONATION_RACE = """
import faulthandler, sys, threading
import numpy as np
import meshsim as jax, meshsim.numpy as jnp
faulthandler.dump_traceback_later(int(sys.argv[2]), exit=True)
both = jax.jit(lambda a, b: (a + 1, b * 2), donate_argnums=(0, 1))
one = jax.jit(lambda b: b - 1, donate_argnums=0)
DELETED = ("Array has been deleted with shape=float32[64]",
           "Invalid buffer passed to Execute() as argument",
           "called on deleted or donated buffer")
rounds, nthreads = int(sys.argv[1]), 6
for r in range(rounds):
    x = jnp.full((64,), float(r))
    y = jnp.full((64,), float(-r))
    barrier = threading.Barrier(nthreads)
    outcomes = [None] * nthreads
    def work(k):
        barrier.wait()
        try:
            if k == 0:
                a, b = both(x, y)
                outcomes[k] = ("both", float(a[0]), float(b[0]))
            elif k == 1:
                outcomes[k] = ("one", float(one(y)[0]))
            elif k == 2:
                x.block_until_ready()
                outcomes[k] = ("read", float(np.asarray(x)[-1]), float(np.asarray(y)[-1]))
            else:
                outcomes[k] = ("add", float((x + y)[3]))
        except (RuntimeError, ValueError) as e:
            assert any(t in str(e) for t in DELETED), repr(e)
            outcomes[k] = ("error",)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(nthreads)]
    for t in threads: t.start()
    for t in threads: t.join()
    ran_both, ran_one = outcomes[0][0] == "both", outcomes[1][0] == "one"
    assert ran_both + ran_one == 1, (r, outcomes)  # y is donated by exactly one of them
    assert x.is_deleted() == ran_both and y.is_deleted(), (r, outcomes)
    if ran_both:
        assert outcomes[0][1:] == (r + 1.0, -2.0 * r), outcomes
    else:
        assert outcomes[1][1:] == (-r - 1.0,), outcomes
        assert float(x[5]) == r  # a failed call donates nothing
    if outcomes[2][0] == "read":
        assert outcomes[2][1:] == (float(r), float(-r)), outcomes
    for o in outcomes[3:]:
        assert o in (("add", 0.0), ("error",)), outcomes
print("ok")
"""


def test_threads_donating_and_reading_the_same_arrays():
    assert _run([150, WATCHDOG], DONATION_RACE).strip() == "ok"

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

"""Ctrl-C while a long jitted or shard_map program (or an eager shard_map, or
eager products each a single huge BLAS call) runs: the read waiting for
its result raises KeyboardInterrupt long before the program would end, the
devices stop at their next equation, the interrupted results raise when read,
and the mesh runs the next program correctly. Runs in a subprocess that
sends itself SIGINT (the test process keeps its own handler)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
import meshsim

# The subprocesses import the meshsim this test imported (a sanitizer build's, say).
ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(meshsim.__file__)))

SCRIPT = os.path.join(ROOT, "tests", "stress", "interrupted_program.py")


@pytest.mark.parametrize("kind", ["jit", "loop_in_cond", "shard_map", "eager_shard_map", "blas"])
def test_ctrl_c_interrupts_a_long_program_and_the_mesh_stays_usable(kind):
    p = subprocess.run([sys.executable, SCRIPT, kind], capture_output=True,
                       text=True, env=ENV, timeout=260)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-5000:]
    status, latency, unwound = p.stdout.split()
    assert status == "ok"
    # The program would run for minutes; the interrupt arrives at the next
    # signal poll (20 ms) plus the devices' unwinding. Bounded loosely here
    # (the machine may be loaded); benchmarks/bench_interrupt.py measures it.
    assert float(latency) < 30 and float(unwound) < 30

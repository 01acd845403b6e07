"""Ctrl-C while a long program runs, in this process: starts the program,
sends itself SIGINT 0.5 s later, checks that the read waiting for the result
raises KeyboardInterrupt, that the result raises CANCELLED, that the mesh runs
the next program correctly, and prints "ok <interrupt latency s> <unwound s>"
(unwound: until nothing dispatched is still running).

    python interrupted_program.py jit|loop_in_cond|shard_map|eager_shard_map|blas

Used by tests/test_interrupts.py and benchmarks/bench_interrupt.py."""
import faulthandler, os, signal, sys, threading, time
import numpy as np
import meshsim as jax, meshsim.numpy as jnp
from meshsim import _core, lax
from meshsim.sharding import Mesh, PartitionSpec as P
faulthandler.dump_traceback_later(200, exit=True)
# Python leaves SIGINT ignored when it starts ignored (under a background job's shell, say):
# the Ctrl-C this program sends itself must raise KeyboardInterrupt all the same.
signal.signal(signal.SIGINT, signal.default_int_handler)
kind = sys.argv[1]
mesh = Mesh(jax.devices(), ('x',))

def body(a, steps):
    return lax.fori_loop(0, steps, lambda i, x: jnp.tanh(x @ x.T @ x * 1e-3) + 1e-3, a)

if kind == 'shard_map':
    f = jax.jit(jax.shard_map(lambda a, s: lax.psum(body(a, s), 'x'), mesh=mesh,
                              in_specs=(P('x'), P()), out_specs=P()), static_argnums=1)
    x = jnp.ones((64, 16))
elif kind == 'eager_shard_map':  # not jitted: the call traces the body and dispatches it
    def f(a, steps):
        return jax.shard_map(lambda a: lax.psum(body(a, steps), 'x'), mesh=mesh,
                             in_specs=P('x'), out_specs=P())(a)
    x = jnp.ones((64, 16))
elif kind == 'blas':  # eager products, each a single BLAS call of seconds when long
    def f(a, steps):
        if steps > 3:
            a = jnp.broadcast_to(a[:1, :1], (4096, 4096))
            for _ in range(4):
                a = a @ a
            return a
        for _ in range(steps):
            a = jnp.tanh(a @ a.T @ a * 1e-3) + 1e-3
        return a
    x = jnp.ones((16, 16))
elif kind == 'loop_in_cond':  # small values on one device, the loop inside a branch
    f = jax.jit(lambda a, steps: lax.cond(a[0, 0] > 0, lambda a: body(a, steps), lambda a: a, a),
                static_argnums=1)
    x = jnp.ones((16, 16))
else:
    f = jax.jit(body, static_argnums=1)
    x = jnp.ones((16, 16))

# The long run: about 10**7 small matmul steps (minutes), interrupted after 0.5 s.
# A jitted call returns at once and the read waits; an eager shard_map waits at
# the call itself (device errors raise there, as in JAX), so the interrupt is
# armed before the call.
sent = []
def interrupt():
    time.sleep(0.5)
    sent.append(time.monotonic())
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=interrupt).start()
long = None
try:
    long = f(x, 10**7)
    np.asarray(long)
    print("not interrupted")
    sys.exit(1)
except KeyboardInterrupt:
    latency = time.monotonic() - sent[0]
# Every device unwinds: nothing dispatched is left running.
_core.wait_all_dispatched()
unwound = time.monotonic() - sent[0]
if long is not None:
    try:
        np.asarray(long)
        print("interrupted result readable")
        sys.exit(1)
    except RuntimeError as e:
        assert "CANCELLED" in str(e), e
# The mesh still works: a short run gives the right answer.
short = np.asarray(f(x, 3))
expected = np.ones(x.shape if 'shard_map' not in kind else (8, 16), np.float32)
for _ in range(3):
    expected = np.tanh(expected @ expected.T @ expected * 1e-3) + 1e-3
if 'shard_map' in kind:
    expected = expected * 8
np.testing.assert_allclose(short, expected, rtol=1e-5)
print(f"ok {latency:.3f} {unwound:.3f}")

"""A training script's imports and bookkeeping: orbax and flax's checkpoint modules load,
jax.monitoring passes recorded events to listeners, colocated_python runs host code,
jnp.zeros(4, 4) raises JAX's hint and an orbax checkpoint of sharded arrays saves and
restores. Prints the same under JAX and `python -m meshsim`."""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402,F401
from flax.training import checkpoints, train_state  # noqa: E402,F401
from jax.experimental import colocated_python  # noqa: E402

events = []
jax.monitoring.register_event_listener(lambda name, **kw: events.append((name, sorted(kw.items()))))
jax.monitoring.register_event_duration_secs_listener(lambda name, secs, **kw: events.append((name, secs)))
jax.monitoring.register_scalar_listener(lambda name, value, **kw: events.append((name, value, kw)))
jax.monitoring.record_event("/train/start", step=0)
jax.monitoring.record_event_duration_secs("/train/step_time", 0.25)
jax.monitoring.record_scalar("/train/loss", 1.5, unit="nats")
print([e for e in events if e[0].startswith("/train/")])

devices = jax.devices()[:4]
print(list(colocated_python.colocated_cpu_devices(devices)) == devices)
mesh = jax.make_mesh((2, 4), ("x", "y"))
print(colocated_python.colocated_cpu_devices(mesh).shape)
double = colocated_python.colocated_python(lambda x: x * 2)
print(double(jnp.arange(4.0)))

for shape, dtype in [(4, 4), (3, True), ((2,), 3), (4, 2.0)]:
    for make in (jnp.zeros, jnp.ones, jnp.empty):
        try:
            make(shape, dtype)
        except TypeError as e:
            print(make.__name__, repr(str(e)))

# An orbax checkpoint of a small model's state, sharded and replicated arrays and rng keys,
# saved and restored onto an abstract target (orbax asks the device for its client and
# memories and device_puts each array with a Format).
import tempfile  # noqa: E402

import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

sharded = jax.device_put(jnp.arange(32.0).reshape(8, 4), NamedSharding(mesh, P("x", "y")))
state = {"w": sharded, "b": jnp.linspace(-1.0, 1.0, 5), "step": jnp.int32(7),
         "key": jax.random.key_data(jax.random.key(3))}
print(jax.devices()[2].default_memory().kind, jax.devices()[0].client.platform)
with tempfile.TemporaryDirectory() as tmp:
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(f"{tmp}/state", state)
    checkpointer.wait_until_finished()
    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), state)
    restored = checkpointer.restore(f"{tmp}/state", target)
for name in sorted(state):
    a, r = state[name], restored[name]
    print(name, r.dtype, r.shape, r.sharding == a.sharding, bool(np.array_equal(np.asarray(a), np.asarray(r))))

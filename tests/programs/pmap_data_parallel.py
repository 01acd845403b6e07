"""An older data-parallel training script: pmap with axis names, flax's replicate/unreplicate
and common_utils.shard, optax, pmean'd gradients, donation, static broadcast arguments,
collectives over the mapped axis, pmap'd random keys, and the errors of a misfit batch and
an unbound axis name. Prints the same under JAX and `python -m meshsim`."""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
import functools  # noqa: E402
import numpy as np
import jax, jax.numpy as jnp
from jax import lax
import optax
from flax import jax_utils
from flax.training import common_utils, train_state
import flax.linen as nn

print(jax.device_count(), jax.local_device_count(), len(jax.local_devices()), jax.process_index(), jax.process_count())
n = jax.local_device_count()

@functools.partial(jax.pmap, axis_name='i')
def normalize(x):
    return x / lax.psum(x, 'i')
y = normalize(jnp.arange(float(n)))
print(y, y.shape)
print(y.sharding)
print(jax.typeof(y))
print([s.device.id for s in y.addressable_shards], y.addressable_shards[0].data.shape)

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(16)(x))
        return nn.Dense(2)(x)

model = MLP()
params = model.init(jax.random.PRNGKey(0), jnp.ones((1, 4)))['params']
tx = optax.sgd(0.1, momentum=0.9)
state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)
state = jax_utils.replicate(state)
print(jax.tree_util.tree_map(lambda x: (x.shape, x.dtype), state.params))
print(state.step, getattr(state.step, 'sharding', None))

@functools.partial(jax.pmap, axis_name='batch', donate_argnums=(0,))
def train_step(state, batch):
    def loss_fn(p):
        logits = state.apply_fn({'params': p}, batch['x'])
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch['y']).mean()
    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    grads = lax.pmean(grads, 'batch')
    loss = lax.pmean(loss, 'batch')
    return state.apply_gradients(grads=grads), loss

rng = np.random.RandomState(0)
for step in range(3):
    batch = {'x': rng.randn(32, 4).astype(np.float32), 'y': rng.randint(0, 2, 32)}
    batch = common_utils.shard(batch)
    state, loss = train_step(state, batch)
    print(step, batch['x'].shape, loss.shape, f"{float(loss[0]):.5f}", bool(jnp.all(loss == loss[0])))
final = jax_utils.unreplicate(state)
print(final.step, jax.tree_util.tree_map(lambda x: x.shape, final.params))
print(jax.tree_util.tree_map(lambda x: f"{float(jnp.sum(jnp.abs(x))):.4f}", final.params))

keys = common_utils.shard_prng_key(jax.random.PRNGKey(1))
print(keys.shape, keys.dtype)
@jax.pmap
def draw(k):
    return jax.random.normal(k, (3,))
print(draw(keys).round(4))

@functools.partial(jax.pmap, static_broadcasted_argnums=(1,), in_axes=(0, None, None))
def scaled(x, k, c):
    return x * k + c
print(scaled(jnp.arange(n * 2.).reshape(n, 2), 3, 1.5))

@functools.partial(jax.pmap, axis_name='d')
def collectives(x):
    idx = lax.axis_index('d')
    g = lax.all_gather(x, 'd')
    p = lax.ppermute(x, 'd', [(j, (j + 1) % n) for j in range(n)])
    return idx, g.sum(), p, lax.pmax(x, 'd'), lax.pmin(x, 'd'), lax.psum(1, 'd')
print(collectives(jnp.arange(float(n))))
try:
    jax.device_put_replicated
except AttributeError as e:
    print(e)
r = jnp.ones((n, 3))
print(r.shape)
s = jnp.stack([jnp.full((2,), i) for i in range(n)])
print(s.shape, s)
print(jax.pmap(lambda a, b: a + b)(r, s[:, :1]))
out = jax.pmap(lambda x: x * 2, out_axes=0)(jnp.arange(n))
print(out, out.dtype)
try:
    jax.pmap(lambda x: x)(jnp.ones((n + 1, 2)))
except Exception as e:
    print(type(e).__name__, str(e).splitlines()[0])
try:
    jax.pmap(lambda x: lax.psum(x, 'nope'))(jnp.ones((n, 2)))
except Exception as e:
    print(type(e).__name__, str(e).splitlines()[0])
g = jax.grad(lambda x: jax.pmap(lambda y: jnp.sin(y) * 2)(x).sum())(jnp.arange(float(n)))
print(g)
print(jax.jit(lambda x: jax.pmap(lambda y: y + 1)(x))(jnp.arange(float(n))))

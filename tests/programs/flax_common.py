"""What the flax programs share: recording results as JSON-ready values, and the training
step they all use (nnx.jit over nnx.value_and_grad of a mean squared error, then the
optimizer's update)."""
import jax.numpy as jnp
import numpy as np
from flax import nnx


def recorder(results: dict):
    """`record(name, value)`: text, flags, ints and dicts as they are; arrays as lists."""
    def record(name, value):
        results[name] = value if isinstance(value, (str, int, bool, list, dict)) or value is None \
            else np.asarray(value, dtype=np.float64).tolist()
    return record


def mse(model, x, y):
    return jnp.mean((model(x) - y) ** 2)


@nnx.jit
def train_step(model, opt, x, y):
    loss, grads = nnx.value_and_grad(mse)(model, x, y)
    opt.update(model, grads)
    return loss

"""flax.nnx as its users write it: modules built from nnx.Rngs, split/merge/state, a
training loop with nnx.jit, nnx.value_and_grad and nnx.Optimizer (optax), nnx.grad, and
Dropout/BatchNorm/LayerNorm in training and evaluation modes. Prints one JSON object of
results (values as nested lists, types and structures as text); run under real JAX and
under `python -m meshsim`, the two must agree (values to a close tolerance)."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from flax_common import mse, recorder, train_step

results = {}
record = recorder(results)


class TwoLayer(nnx.Module):
    def __init__(self, d_in, d_hidden, d_out, *, rngs):
        self.hidden = nnx.Linear(d_in, d_hidden, rngs=rngs)
        self.norm = nnx.LayerNorm(d_hidden, rngs=rngs)
        self.out = nnx.Linear(d_hidden, d_out, rngs=rngs)

    def __call__(self, x):
        return self.out(nnx.gelu(self.norm(self.hidden(x))))


data_rng = np.random.default_rng(7)
x = jnp.asarray(data_rng.normal(size=(16, 5)).astype(np.float32))
y = jnp.asarray(data_rng.normal(size=(16, 3)).astype(np.float32))

# Creation: parameters drawn from the Rngs streams.
model = TwoLayer(5, 12, 3, rngs=nnx.Rngs(params=3))
record("init_hidden_kernel", model.hidden.kernel[...])
record("init_out_bias", model.out.bias[...])
record("init_norm_scale", model.norm.scale[...])
record("init_forward", model(x))

# split / state / merge.
graphdef, state = nnx.split(model)
params = nnx.state(model, nnx.Param)
record("param_paths", sorted("/".join(map(str, path)) for path, _ in nnx.to_flat_state(params)))
record("param_count", sum(int(np.prod(v.shape)) for v in jax.tree.leaves(params)))
record("param_shapes", str(jax.tree.map(lambda v: tuple(v.shape), params)))
rebuilt = nnx.merge(graphdef, state)
record("merged_forward_equal", bool(np.array_equal(np.asarray(rebuilt(x)), np.asarray(model(x)))))
doubled = jax.tree.map(lambda v: v * 2, params)
nnx.update(rebuilt, doubled)
record("updated_hidden_bias_is_doubled",
       bool(np.allclose(np.asarray(rebuilt.hidden.bias[...]), 2 * np.asarray(model.hidden.bias[...]))))


# Training: nnx.jit + nnx.value_and_grad + nnx.Optimizer (flax_common.train_step).
for name, tx in [("sgd", optax.sgd(0.05, momentum=0.9)), ("adamw", optax.adamw(3e-3))]:
    m = TwoLayer(5, 12, 3, rngs=nnx.Rngs(11))
    opt = nnx.Optimizer(m, tx, wrt=nnx.Param)
    losses = [train_step(m, opt, x, y) for _ in range(6)]
    record(f"{name}_losses", np.asarray(losses))
    record(f"{name}_final_out_kernel", m.out.kernel[...])
    record(f"{name}_opt_step", int(opt.step[...]))

# nnx.grad on its own: a State of gradients shaped like the parameters.
grads = nnx.grad(mse)(model, x, y)
record("grad_hidden_kernel", grads["hidden"]["kernel"][...])
record("grad_norm_bias", grads["norm"]["bias"][...])
record("grad_type", type(grads).__name__)


# Dropout, BatchNorm and LayerNorm, in training then evaluation mode.
class Block(nnx.Module):
    def __init__(self, *, rngs):
        self.lin = nnx.Linear(5, 8, rngs=rngs)
        self.bn = nnx.BatchNorm(8, momentum=0.8, rngs=rngs)
        self.drop = nnx.Dropout(0.25, rngs=rngs)
        self.ln = nnx.LayerNorm(8, rngs=rngs)

    def __call__(self, x):
        return self.ln(self.drop(nnx.relu(self.bn(self.lin(x)))))


block = Block(rngs=nnx.Rngs(params=1, dropout=2))
record("train_out", block(x))
record("train_out_again", block(x))  # a new dropout mask, and running stats updated twice
record("bn_running_mean", block.bn.mean[...])
record("bn_running_var", block.bn.var[...])
block.eval()
record("eval_out", block(x))
record("eval_deterministic", bool(block.drop.deterministic))
block.train()


@nnx.jit
def jitted_train_forward(b, x):
    return b(x)


record("jit_train_out", jitted_train_forward(block, x))
record("jit_bn_running_mean", block.bn.mean[...])


# Lifted transforms: a stack of layers made with nnx.vmap, run with nnx.scan, one of them
# through nnx.remat, and differentiated.
@nnx.vmap(in_axes=0, out_axes=0)
def make_stack(rngs):
    return nnx.Linear(5, 5, rngs=rngs)


stack = make_stack(nnx.Rngs(4).split(3))
record("stack_kernel_shape", str(stack.kernel[...].shape))


@nnx.scan(in_axes=(0, nnx.Carry), out_axes=nnx.Carry)
def run_stack(layer, h):
    return nnx.tanh(nnx.remat(lambda lyr, v: lyr(v))(layer, h))


record("scan_stack_out", run_stack(stack, x))
stack_grads = nnx.grad(lambda s: jnp.sum(run_stack(s, x) ** 2))(stack)
record("scan_stack_grad_bias", stack_grads["bias"][...])

# A Variable made outside a transform cannot be set from inside one (flax compares the trace
# it was made in with the current one).
outside = nnx.Param(jnp.ones(3))


@jax.jit
def set_from_inside(value):
    outside[...] = value
    return value


try:
    set_from_inside(jnp.zeros(3))
    record("mutation_across_traces", "allowed")
except Exception as e:  # noqa: BLE001 - the class is compared
    record("mutation_across_traces", type(e).__name__)


@nnx.jit
def set_through_nnx_jit(p, value):
    p[...] = value


set_through_nnx_jit(outside, jnp.full(3, 2.0))
record("mutation_through_nnx_jit", outside[...])

print(json.dumps(results, sort_keys=True))

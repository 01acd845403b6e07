"""Optimizers as jax.example_libraries.optimizers defines them.

An optimizer is an (init, update, get_params) triple. Each is written for one
array (its state a small pytree of arrays); the `optimizer` decorator lifts it
to pytrees of parameters, keeping the state as an `OptimizerState`: the flat
list of each leaf's flattened state, the parameters' treedef and each leaf's
state treedef. The update formulas keep JAX's order of operations, so a
training run gives the same bits."""
from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any, Callable, NamedTuple

from meshsim._src.numpy import namespace as jnp
from meshsim._src.tree_util import register_pytree_node, tree_flatten, tree_map, tree_unflatten

__all__ = [
    "OptimizerState", "Optimizer", "optimizer", "sgd", "momentum", "nesterov", "adagrad",
    "rmsprop", "rmsprop_momentum", "adam", "adamax", "sm3", "constant", "exponential_decay",
    "inverse_time_decay", "polynomial_decay", "piecewise_constant", "make_schedule", "l2_norm",
    "clip_grads", "JoinPoint", "unpack_optimizer_state", "pack_optimizer_state", "Array",
    "Params", "State", "Updates", "InitFn", "Step", "UpdateFn", "ParamsFn", "Schedule",
]

OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
register_pytree_node(
    OptimizerState,
    lambda state: ((state.packed_state,), (state.tree_def, state.subtree_defs)),
    lambda defs, children: OptimizerState(children[0], defs[0], defs[1]))

Array = Any
Params = Any
State = Any
Updates = Params
InitFn = Callable[[Params], OptimizerState]
Step = int
UpdateFn = Callable[[Step, Updates, OptimizerState], OptimizerState]
ParamsFn = Callable[[OptimizerState], Params]
Schedule = Callable[[Step], float]


class Optimizer(NamedTuple):
    init_fn: InitFn
    update_fn: UpdateFn
    params_fn: ParamsFn


def _flatten_each(trees) -> tuple[tuple, tuple]:
    """(leaves of each tree, treedef of each tree), as two tuples."""
    flat = [tree_flatten(tree) for tree in trees]
    return tuple(leaves for leaves, _ in flat), tuple(treedef for _, treedef in flat)


def _unflatten_each(treedefs, leaves_per_tree) -> list:
    treedefs, leaves_per_tree = list(treedefs), list(leaves_per_tree)
    assert len(treedefs) == len(leaves_per_tree), \
        f"length mismatch: {[len(treedefs), len(leaves_per_tree)]}"
    return [tree_unflatten(treedef, leaves) for treedef, leaves in zip(treedefs, leaves_per_tree)]


def optimizer(opt_maker: Callable[..., tuple[Callable, Callable, Callable]]) -> Callable[..., Optimizer]:
    """Lifts a maker of per-array (init, update, get_params) functions to one
    whose functions take pytrees of parameters and an `OptimizerState`."""

    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree):
            x0_flat, tree = tree_flatten(x0_tree)
            states_flat, subtrees = _flatten_each([init(x0) for x0 in x0_flat])
            return OptimizerState(states_flat, tree, subtrees)

        @functools.wraps(update)
        def tree_update(i, grad_tree, opt_state):
            states_flat, tree, subtrees = opt_state
            grad_flat, grad_tree_def = tree_flatten(grad_tree)
            if grad_tree_def != tree:
                raise TypeError(
                    "optimizer update function was passed a gradient tree that did not match "
                    "the parameter tree structure with which it was initialized: parameter "
                    f"tree {tree} and grad tree {grad_tree_def}.")
            states = _unflatten_each(subtrees, states_flat)
            assert len(grad_flat) == len(states), f"length mismatch: {[len(grad_flat), len(states)]}"
            new_states_flat, new_subtrees = _flatten_each(
                [update(i, g, state) for g, state in zip(grad_flat, states)])
            for subtree, new_subtree in zip(subtrees, new_subtrees):
                if new_subtree != subtree:
                    raise TypeError(
                        "optimizer update function produced an output structure that did not "
                        f"match its input structure: input {subtree} and output {new_subtree}.")
            return OptimizerState(new_states_flat, tree, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state):
            states_flat, tree, subtrees = opt_state
            return tree_unflatten(tree, [get_params(s) for s in _unflatten_each(subtrees, states_flat)])

        return Optimizer(tree_init, tree_update, tree_get_params)

    return tree_opt_maker


def _first(state):
    return state[0]


def _params_and_zeros(count: int):
    """An init giving the parameters followed by `count` zero arrays like them."""
    def init(x0):
        return (x0,) + tuple(jnp.zeros_like(x0) for _ in range(count))
    return init


@optimizer
def sgd(step_size):
    """Stochastic gradient descent; `step_size` a scalar or a schedule."""
    step_size = make_schedule(step_size)

    def init(x0):
        return x0

    def update(i, g, x):
        return x - step_size(i) * g

    def get_params(x):
        return x

    return Optimizer(init, update, get_params)


@optimizer
def momentum(step_size: Schedule, mass: float):
    """Gradient descent with momentum `mass`."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * velocity, velocity

    return _params_and_zeros(1), update, _first


@optimizer
def nesterov(step_size: Schedule, mass: float):
    """Gradient descent with Nesterov momentum `mass`."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g), velocity

    return _params_and_zeros(1), update, _first


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad (Duchi et al. 2011) with momentum."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        g_sq_inv_sqrt = jnp.where(g_sq > 0, 1. / jnp.sqrt(g_sq), 0.0)
        m = (1. - momentum) * (g * g_sq_inv_sqrt) + momentum * m
        return x - step_size(i) * m, g_sq, m

    return _params_and_zeros(2), update, _first


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """RMSProp with decay `gamma`."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg_sq_grad = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg_sq_grad + eps), avg_sq_grad

    return _params_and_zeros(1), update, _first


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp with momentum, which keeps a third array per parameter."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg_sq_grad, mom = state
        avg_sq_grad = avg_sq_grad * gamma + jnp.square(g) * (1. - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq_grad + eps)
        return x - mom, avg_sq_grad, mom

    return _params_and_zeros(2), update, _first


def _bias_correction(decay, moment, i):
    # The power is taken in the moment's dtype: a float32 run stays float32 under x64.
    return 1 - jnp.asarray(decay, moment.dtype) ** (i + 1)


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma and Ba 2015)."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        m_hat = m / _bias_correction(b1, m, i)
        v_hat = v / _bias_correction(b2, m, i)
        return x - step_size(i) * m_hat / (jnp.sqrt(v_hat) + eps), m, v

    return _params_and_zeros(2), update, _first


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """AdaMax, Adam's variant with an infinity-norm second moment."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        x = x - (step_size(i) / _bias_correction(b1, m, i)) * m / (u + eps)
        return x, m, u

    return _params_and_zeros(2), update, _first


def _axis_spread(ndim: int, v, axis: int):
    """The vector `v` indexed to broadcast along `axis` of an ndim array. A
    scalar's gradient (ndim 0) against its 1-d state keeps `v` as it is."""
    index = [None] * ndim
    index[axis:axis + 1] = [slice(None)]
    return v[tuple(index)]


@optimizer
def sm3(step_size, momentum=0.9):
    """SM3 (Anil et al. 2019): one accumulator vector per axis of each parameter."""
    step_size = make_schedule(step_size)

    def init(x0):
        shape = x0.shape
        x0 = jnp.atleast_1d(x0)
        accumulators = [jnp.zeros(size, dtype=x0.dtype) for size in x0.shape]
        return x0, jnp.zeros_like(x0), accumulators, shape

    def update(i, g, state):
        x, m, accumulators, shape = state
        spread = [_axis_spread(g.ndim, v, axis) for axis, v in enumerate(accumulators)]
        accum = functools.reduce(jnp.minimum, spread) + jnp.square(g)
        accum_inv_sqrt = jnp.where(accum > 0, 1. / jnp.sqrt(accum), 0)
        m = (1. - momentum) * (g * accum_inv_sqrt) + momentum * m
        x = x - step_size(i) * m
        others = lambda axis: tuple(a for a in range(x.ndim) if a != axis)  # noqa: E731
        accumulators = [accum.max(others(axis)) for axis in range(x.ndim)]
        return x, m, accumulators, shape

    def get_params(state):
        x, _, _, shape = state
        return x.reshape(shape)

    return init, update, get_params


def constant(step_size) -> Schedule:
    def schedule(i):
        return step_size
    return schedule


def exponential_decay(step_size, decay_steps, decay_rate):
    def schedule(i):
        return step_size * decay_rate ** (i / decay_steps)
    return schedule


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False):
    if staircase:
        def schedule(i):
            return step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    else:
        def schedule(i):
            return step_size / (1 + decay_rate * i / decay_steps)
    return schedule


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0):
    def schedule(step_num):
        step_num = jnp.minimum(step_num, decay_steps)
        step_mult = (1 - step_num / decay_steps) ** power
        return step_mult * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries: Any, values: Any):
    boundaries = jnp.array(boundaries)
    values = jnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("boundaries and values must be sequences")
    if not boundaries.shape[0] == values.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length")

    def schedule(i):
        return values[jnp.sum(i > boundaries)]
    return schedule


def make_schedule(scalar_or_schedule: float | Schedule) -> Schedule:
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(type(scalar_or_schedule))


def l2_norm(tree):
    """The l2 norm of all leaves of `tree` taken as one vector."""
    leaves, _ = tree_flatten(tree)
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree, max_norm):
    """Scales `grad_tree` down to l2 norm `max_norm` when its norm reaches it."""
    norm = l2_norm(grad_tree)
    return tree_map(lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree)


class JoinPoint:
    """A leaf of `unpack_optimizer_state`'s result holding one parameter's state."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __iter__(self):
        yield self.subtree


def unpack_optimizer_state(opt_state):
    """The parameters' pytree with a `JoinPoint` of each leaf's state at the
    leaf, for serializing an `OptimizerState`."""
    states_flat, tree_def, subtree_defs = opt_state
    subtrees = _unflatten_each(subtree_defs, states_flat)
    return tree_unflatten(tree_def, [JoinPoint(subtree) for subtree in subtrees])


def pack_optimizer_state(marked_pytree):
    """The `OptimizerState` that `unpack_optimizer_state` unpacked."""
    join_points, tree_def = tree_flatten(marked_pytree)
    assert all(isinstance(point, JoinPoint) for point in join_points)
    states_flat, subtree_defs = _flatten_each([point.subtree for point in join_points])
    return OptimizerState(states_flat, tree_def, subtree_defs)

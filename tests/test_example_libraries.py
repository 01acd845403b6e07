"""jax.example_libraries (stax and optimizers) against JAX 0.10.2: the same
parameters from the same keys, the same outputs and output shapes, the same
optimizer states after a few jitted steps on random pytrees, the same
schedules, and the same errors. Each case runs one program written against a
`jax`-like module twice, once with meshsim and once with JAX."""
import numpy as np
import pytest

import meshsim
from meshsim.example_libraries import optimizers as ms_optimizers
from meshsim.example_libraries import stax as ms_stax

jax = pytest.importorskip("jax")
from jax.example_libraries import optimizers as jax_optimizers  # noqa: E402
from jax.example_libraries import stax as jax_stax  # noqa: E402

SIDES = {"meshsim": (meshsim, ms_stax, ms_optimizers), "jax": (jax, jax_stax, jax_optimizers)}

OPTIMIZERS = {
    "sgd": lambda opt: opt.sgd(0.1),
    "momentum": lambda opt: opt.momentum(0.05, mass=0.9),
    "nesterov": lambda opt: opt.nesterov(opt.exponential_decay(0.05, 3, 0.5), 0.8),
    "adagrad": lambda opt: opt.adagrad(0.2),
    "rmsprop": lambda opt: opt.rmsprop(0.01, gamma=0.8),
    "rmsprop_momentum": lambda opt: opt.rmsprop_momentum(0.01),
    "adam": lambda opt: opt.adam(opt.inverse_time_decay(1e-2, 2, 0.5, staircase=True)),
    "adamax": lambda opt: opt.adamax(opt.polynomial_decay(0.02, 4, 0.001, power=2.0)),
    "sm3": lambda opt: opt.sm3(0.1, momentum=0.5),
}


def _leaves(jx, tree):
    return [np.asarray(x) for x in jx.tree.leaves(tree)]


def _assert_trees_equal(ours, theirs, rtol=0.0, atol=0.0):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _random_params(seed):
    """A dict/list/tuple pytree of float32 arrays of random shapes, a scalar among them."""
    rng = np.random.default_rng(seed)
    shape = lambda: tuple(rng.integers(1, 6, size=rng.integers(1, 4)))  # noqa: E731
    return {"w": rng.standard_normal(shape()).astype(np.float32),
            "layers": [rng.standard_normal(shape()).astype(np.float32),
                       (np.float32(rng.standard_normal()), rng.standard_normal(shape()).astype(np.float32))]}


def _run_optimizer(side, name, params, steps):
    jx, _, opt = SIDES[side]
    jnp = jx.numpy
    opt_init, opt_update, get_params = OPTIMIZERS[name](opt)

    def loss(p):
        return sum(jnp.sum(jnp.sin(x) * x + 0.5 * x ** 2) for x in jx.tree.leaves(p))

    def step(i, state):
        return opt_update(i, jx.grad(loss)(get_params(state)), state)

    # sm3's state holds each parameter's shape as ints, which jit would trace (in JAX too).
    step = step if name == "sm3" else jx.jit(step)

    state = opt_init(jx.tree.map(jnp.asarray, params))
    for i in range(steps):
        state = step(i, state)
    return state, get_params(state)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_steps_match_jax(name, seed):
    params = _random_params(seed)
    ours, our_params = _run_optimizer("meshsim", name, params, steps=4)
    theirs, their_params = _run_optimizer("jax", name, params, steps=4)
    _assert_trees_equal(_leaves(meshsim, our_params), _leaves(jax, their_params), rtol=2e-6, atol=1e-7)
    # The state is a pytree of the same leaves: the packed per-parameter states.
    assert type(ours).__name__ == "OptimizerState" and ours._fields == theirs._fields
    _assert_trees_equal(_leaves(meshsim, ours), _leaves(jax, theirs), rtol=2e-6, atol=1e-7)
    assert [len(s) for s in ours.packed_state] == [len(s) for s in theirs.packed_state]
    assert ours.subtree_defs[0].num_leaves == theirs.subtree_defs[0].num_leaves


def test_sm3_state_under_jit_fails_as_in_jax():
    for side in SIDES:
        jx, _, opt = SIDES[side]
        opt_init, opt_update, get_params = opt.sm3(0.1)
        state = opt_init({"a": jx.numpy.ones((2, 3))})
        with pytest.raises(TypeError, match="Shapes must be 1D sequences of concrete values"):
            jx.jit(lambda s: get_params(s))(state)


def test_optimizer_state_unpacks_packs_and_names_its_functions():
    params = _random_params(5)
    for side in SIDES:
        jx, _, opt = SIDES[side]
        opt_init, opt_update, get_params = opt.adam(0.1)
        state = opt_init(params)
        marked = opt.unpack_optimizer_state(state)
        assert isinstance(marked["w"], opt.JoinPoint) and len(list(marked["w"])) == 1
        repacked = opt.pack_optimizer_state(marked)
        assert repacked.tree_def == state.tree_def
        _assert_trees_equal(_leaves(jx, repacked), _leaves(jx, state))
        assert isinstance(opt_init(params), opt.OptimizerState)
        assert opt.adam.__name__ == "adam" and opt_update.__name__ == "update"
        assert isinstance(opt.sgd(0.1), opt.Optimizer)


def test_tree_mismatch_errors_match_jax():
    messages = []
    for side in SIDES:
        jx, _, opt = SIDES[side]
        opt_init, opt_update, _ = opt.momentum(0.1, 0.9)
        state = opt_init({"a": jx.numpy.ones(3)})
        with pytest.raises(TypeError) as err:
            opt_update(0, {"b": jx.numpy.ones(3)}, state)
        messages.append(str(err.value))
    assert messages[0].startswith("optimizer update function was passed a gradient tree that did not")
    assert messages[0] == messages[1]


@pytest.mark.parametrize("steps", [[0, 1, 5, 17], [3.0, 7.5]])
def test_schedules_match_jax(steps):
    makers = [lambda o: o.constant(0.3), lambda o: o.exponential_decay(0.5, 4, 0.3),
              lambda o: o.inverse_time_decay(0.5, 3, 2.0), lambda o: o.inverse_time_decay(0.5, 3, 2.0, True),
              lambda o: o.polynomial_decay(1.0, 6, 0.1), lambda o: o.polynomial_decay(1.0, 6, 0.1, power=0.5),
              lambda o: o.piecewise_constant([2, 6], [1.0, 0.5, 0.25]),
              lambda o: o.make_schedule(0.7), lambda o: o.make_schedule(lambda i: 2 * i)]
    for make in makers:
        ours = [np.asarray(make(ms_optimizers)(i)) for i in steps]
        theirs = [np.asarray(make(jax_optimizers)(i)) for i in steps]
        for a, b in zip(ours, theirs):
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("bad", [lambda o: o.piecewise_constant(1.0, [1.0]),
                                 lambda o: o.piecewise_constant([1, 2], [1.0, 2.0]),
                                 lambda o: o.make_schedule([0.1, 0.2]),
                                 lambda o: o.adam(np.ones(2))])
def test_schedule_errors_match_jax(bad):
    raised = []
    for opt in (ms_optimizers, jax_optimizers):
        with pytest.raises((ValueError, TypeError)) as err:
            bad(opt)
        raised.append((type(err.value), str(err.value)))
    assert raised[0] == raised[1]


@pytest.mark.parametrize("seed", [0, 1])
def test_clip_grads_and_l2_norm_match_jax(seed):
    grads = _random_params(seed)
    norm = float(jax_optimizers.l2_norm(grads))
    for max_norm in (norm / 3, norm * 2):
        ours = ms_optimizers.clip_grads(grads, max_norm)
        theirs = jax_optimizers.clip_grads(grads, max_norm)
        _assert_trees_equal(_leaves(meshsim, ours), _leaves(jax, theirs), rtol=1e-6)
    np.testing.assert_allclose(ms_optimizers.l2_norm(grads), norm, rtol=1e-6)


def _conv_net(stax, spec_pool):
    """A small conv net using every kind of stax layer."""
    branch = stax.serial(stax.Conv(3, (2, 2), padding="SAME"), stax.Relu)
    return stax.serial(
        stax.Conv(4, (3, 3), strides=(1, 1), padding="SAME"), stax.BatchNorm(),
        stax.Elu, stax.MaxPool((2, 2), strides=(2, 2)),
        stax.FanOut(2), stax.parallel(branch, stax.Identity), stax.FanInConcat(),
        stax.FanOut(2), stax.parallel(stax.Tanh, stax.Sigmoid), stax.FanInSum,
        stax.AvgPool((2, 2), padding="SAME", spec=spec_pool), stax.SumPool((1, 2)),
        stax.ConvTranspose(2, (2, 2), strides=(2, 1)), stax.Selu, stax.LeakyRelu, stax.Gelu,
        stax.BatchNorm(axis=(0, 1), center=False), stax.BatchNorm(scale=False),
        stax.Flatten, stax.Dense(7), stax.Softplus, stax.Dropout(0.75), stax.Dense(5),
        stax.Exp, stax.LogSoftmax)


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("spec_pool", [None, "NHWC"])
def test_stax_network_init_and_apply_match_jax(seed, spec_pool):
    x = np.random.default_rng(seed).standard_normal((16, 9, 8, 2)).astype(np.float32)
    results = []
    for side in SIDES:
        jx, stax, _ = SIDES[side]
        init_fun, apply_fun = _conv_net(stax, spec_pool)
        out_shape, params = init_fun(jx.random.key(seed), (-1,) + x.shape[1:])
        y = apply_fun(params, x, rng=jx.random.key(seed + 1))
        y_eval = jx.jit(apply_fun)(params, x, rng=jx.random.key(seed + 1))
        results.append((repr(tuple(out_shape)), _leaves(jx, params), np.asarray(y), np.asarray(y_eval), y.dtype))
    ours, theirs = results
    assert ours[0] == theirs[0]  # printed alike: NumPy integers where JAX's are
    _assert_trees_equal(ours[1], theirs[1])  # same keys give the same initial parameters
    np.testing.assert_allclose(ours[2], theirs[2], rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=2e-5, atol=2e-6)
    assert ours[4] == theirs[4]


def test_stax_layer_shapes_and_params_match_jax():
    layers = [lambda s: s.Conv1DTranspose(3, (4,), strides=(2,), padding="SAME"),
              lambda s: s.GeneralConv(("NCH", "OIH", "NCH"), 5, (3,), padding=((1, 2),)),
              lambda s: s.Dense(6, W_init=s.randn(0.3), b_init=s.zeros),
              lambda s: s.BatchNorm(axis=(0, 2)), lambda s: s.Softmax,
              lambda s: s.shape_dependent(lambda shape: s.Dense(shape[-1] * 2))]
    x = np.random.default_rng(7).standard_normal((2, 6, 5)).astype(np.float32)
    for make in layers:
        results = []
        for side in SIDES:
            jx, stax, _ = SIDES[side]
            init_fun, apply_fun = make(stax)
            shape, params = init_fun(jx.random.key(11), x.shape)
            results.append((repr(tuple(shape)), _leaves(jx, params), np.asarray(apply_fun(params, x))))
        assert results[0][0] == results[1][0]
        _assert_trees_equal(results[0][1], results[1][1])
        np.testing.assert_allclose(results[0][2], results[1][2], rtol=2e-5, atol=1e-6)


def test_parallel_init_returns_a_lazy_pair_and_dropout_needs_a_key():
    for side in SIDES:
        jx, stax, _ = SIDES[side]
        init_fun, _ = stax.parallel(stax.Dense(2), stax.Relu)
        shapes, params = init_fun(jx.random.key(0), [(3, 4), (3, 5)])
        assert shapes == ((3, 2), (3, 5)) and params[1] == ()
    messages = []
    for side in SIDES:
        jx, stax, _ = SIDES[side]
        _, apply_fun = stax.Dropout(0.5)
        with pytest.raises(ValueError) as err:
            apply_fun((), jx.numpy.ones(3))
        messages.append(str(err.value))
        _, apply_eval = stax.Dropout(0.5, mode="test")
        assert np.array_equal(apply_eval((), jx.numpy.ones(3), rng=jx.random.key(0)), np.ones(3))
    assert messages[0] == messages[1]


def test_stax_mlp_training_with_adam_matches_jax():
    rng = np.random.default_rng(4)
    inputs = rng.standard_normal((32, 12)).astype(np.float32)
    targets = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 32)]
    losses = []
    for side in SIDES:
        jx, stax, opt = SIDES[side]
        init_fun, predict = stax.serial(stax.Dense(16), stax.Relu, stax.Dense(3), stax.LogSoftmax)
        _, params = init_fun(jx.random.key(2), (-1, 12))
        opt_init, opt_update, get_params = opt.adam(1e-2)
        loss = lambda p: -jx.numpy.mean(jx.numpy.sum(predict(p, inputs) * targets, axis=1))  # noqa: E731
        step = jx.jit(lambda i, s: opt_update(i, jx.grad(loss)(get_params(s)), s))
        state, trace = opt_init(params), []
        for i in range(6):
            state = step(i, state)
            trace.append(float(loss(get_params(state))))
        losses.append(trace)
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)
    assert losses[0][-1] < losses[0][0]


@pytest.mark.parametrize("seed", range(4))
def test_conv_shape_tuples_print_as_jax_does(seed):
    """stax reports output shapes from these: the same values and integer types."""
    rng = np.random.default_rng(seed)
    lhs = (int(rng.integers(-1, 4)), int(rng.integers(5, 12)), int(rng.integers(5, 12)), 3)
    rhs = [int(rng.integers(1, 4)), int(rng.integers(1, 4)), 3, 6]
    strides = tuple(int(s) for s in rng.integers(1, 3, size=2))
    dnums = ("NHWC", "HWIO", "NHWC")
    for padding in ("SAME", "VALID", ((1, 0), (2, 1))):
        for name in ("conv_general_shape_tuple", "conv_transpose_shape_tuple"):
            ours = getattr(meshsim.lax, name)(lhs, rhs, strides, padding, dnums)
            theirs = getattr(jax.lax, name)(lhs, rhs, strides, padding, dnums)
            assert repr(ours) == repr(theirs)
    nchw = ((2,) + lhs[1:3] + (3,), (6, 3) + tuple(rhs[:2]))
    assert repr(meshsim.lax.conv_shape_tuple(*nchw, strides, "SAME")) == \
        repr(jax.lax.conv_shape_tuple(*nchw, strides, "SAME"))

"""Reverse-mode autodiff: every primitive's VJP rule checked by finite
differences in float64 and against the installed JAX in float32; linear rules
by the dot-product identity; the Python API (grad, value_and_grad, vjp, jvp,
linearize, custom_vjp, checkpoint and its policies, stop_gradient) over
pytrees, with jit in both orders; errors worded as JAX's; a small MLP against
an independent NumPy backprop."""
import dataclasses
import types

import numpy as np
import pytest

import meshsim
import meshsim.numpy as mnp
from meshsim import lax as mlax
from meshsim import nn as mnn

MS = types.SimpleNamespace(np=mnp, lax=mlax, nn=mnn)


@pytest.fixture(scope="module")
def jx(real_jax):
    import jax.numpy as jnp
    from jax import lax, nn
    return types.SimpleNamespace(np=jnp, lax=lax, nn=nn)


# --- argument specs ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class F:
    """A differentiable float argument drawn uniformly from [low, high)."""
    shape: tuple
    low: float = -2.0
    high: float = 2.0


@dataclasses.dataclass(frozen=True)
class I:
    """A fixed integer argument (indices), drawn from [low, high)."""
    shape: tuple
    low: int
    high: int


@dataclasses.dataclass(frozen=True)
class C:
    """A fixed constant argument."""
    value: object


def make_args(specs, dtype, seed=0):
    rng = np.random.default_rng(seed)
    args = []
    for s in specs:
        if isinstance(s, F):
            args.append(rng.uniform(s.low, s.high, s.shape).astype(dtype))
        elif isinstance(s, I):
            args.append(rng.integers(s.low, s.high, s.shape).astype(np.int32))
        else:
            args.append(np.asarray(s.value))
    return args


def pos(shape):
    return F(shape, 0.5, 3.0)


MASK = np.array([[1.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 1.0]])
DUP_IDX = np.array([0, 2, 0, 1], np.int32)

# id -> (function of (modules, *args), argument specs). Every differentiable
# primitive is reached by at least one case.
CASES = {
    # elementwise, unary
    "neg": (lambda m, x: m.lax.neg(x), [F((3, 4))]),
    "abs": (lambda m, x: m.lax.abs(x), [F((3, 4))]),
    "sign": (lambda m, x: m.lax.sign(x) * x, [F((3, 4))]),
    "square": (lambda m, x: m.lax.square(x), [F((3, 4))]),
    "floor_ceil_round": (lambda m, x: m.lax.floor(x) + m.lax.ceil(x) * x + m.lax.round(x), [F((5,))]),
    "exp": (lambda m, x: m.lax.exp(x), [F((3, 4))]),
    "exp2": (lambda m, x: m.lax.exp2(x), [F((3, 4))]),
    "log": (lambda m, x: m.lax.log(x), [pos((3, 4))]),
    "log1p": (lambda m, x: m.lax.log1p(x), [pos((3, 4))]),
    "expm1": (lambda m, x: m.lax.expm1(x), [F((3, 4))]),
    "sqrt": (lambda m, x: m.lax.sqrt(x), [pos((3, 4))]),
    "rsqrt": (lambda m, x: m.lax.rsqrt(x), [pos((3, 4))]),
    "cbrt": (lambda m, x: m.lax.cbrt(x), [pos((3, 4))]),
    "tanh": (lambda m, x: m.lax.tanh(x), [F((3, 4))]),
    "sin": (lambda m, x: m.lax.sin(x), [F((3, 4))]),
    "cos": (lambda m, x: m.lax.cos(x), [F((3, 4))]),
    "tan": (lambda m, x: m.lax.tan(x), [F((3, 4), -1.0, 1.0)]),
    "asin": (lambda m, x: m.lax.asin(x), [F((3, 4), -0.9, 0.9)]),
    "acos": (lambda m, x: m.lax.acos(x), [F((3, 4), -0.9, 0.9)]),
    "atan": (lambda m, x: m.lax.atan(x), [F((3, 4))]),
    "sinh": (lambda m, x: m.lax.sinh(x), [F((3, 4))]),
    "cosh": (lambda m, x: m.lax.cosh(x), [F((3, 4))]),
    "asinh": (lambda m, x: m.lax.asinh(x), [F((3, 4))]),
    "acosh": (lambda m, x: m.lax.acosh(x), [F((3, 4), 1.2, 3.0)]),
    "atanh": (lambda m, x: m.lax.atanh(x), [F((3, 4), -0.9, 0.9)]),
    "logistic": (lambda m, x: m.lax.logistic(x), [F((3, 4))]),
    "erf": (lambda m, x: m.lax.erf(x), [F((3, 4))]),
    "erfc": (lambda m, x: m.lax.erfc(x), [F((3, 4))]),
    "erf_inv": (lambda m, x: m.lax.erf_inv(x), [F((3, 4), -0.9, 0.9)]),
    "integer_pow_3": (lambda m, x: m.lax.integer_pow(x, 3), [F((3, 4))]),
    "integer_pow_neg2": (lambda m, x: m.lax.integer_pow(x, -2), [pos((3, 4))]),
    "integer_pow_0_1": (lambda m, x: m.lax.integer_pow(x, 0) + m.lax.integer_pow(x, 1), [F((3,))]),
    # elementwise, binary
    "add": (lambda m, x, y: m.lax.add(x, y), [F((3, 4)), F((3, 4))]),
    "sub": (lambda m, x, y: m.lax.sub(x, y), [F((3, 4)), F((3, 4))]),
    "mul": (lambda m, x, y: m.lax.mul(x, y), [F((3, 4)), F((3, 4))]),
    "mul_same": (lambda m, x: x * x, [F((3, 4))]),
    "div": (lambda m, x, y: m.lax.div(x, y), [F((3, 4)), pos((3, 4))]),
    "rem": (lambda m, x, y: m.lax.rem(x, y), [F((3, 4), 1.1, 4.0), F((3, 4), 0.7, 1.3)]),
    "max": (lambda m, x, y: m.lax.max(x, y), [F((3, 4)), F((3, 4))]),
    "min": (lambda m, x, y: m.lax.min(x, y), [F((3, 4)), F((3, 4))]),
    "atan2": (lambda m, x, y: m.lax.atan2(x, y), [F((3, 4)), F((3, 4))]),
    "pow": (lambda m, x, y: m.lax.pow(x, y), [pos((3, 4)), F((3, 4))]),
    "pow_int_exponent": (lambda m, x, n: m.lax.pow(x, n), [F((3, 4)), I((3, 4), 0, 4)]),
    "select": (lambda m, x, y: m.lax.select(x > y, x * 2.0, y * y), [F((3, 4)), F((3, 4))]),
    "select_n": (lambda m, x, y, z, w: m.lax.select_n(w, x, y, z), [F((6,)), F((6,)), F((6,)), I((6,), 0, 3)]),
    "clamp": (lambda m, lo, x, hi: m.lax.clamp(lo, x, hi), [F((3, 4), -1.5, 0.0), F((3, 4)), F((3, 4), 0.0, 1.5)]),
    "clamp_scalar_bounds": (lambda m, lo, x, hi: m.lax.clamp(lo, x, hi), [F((), -1.0, -0.5), F((3, 4)), F((), 0.5, 1.0)]),
    "where": (lambda m, x, y: m.np.where(x > 0, m.np.sin(x), y), [F((3, 4)), F((3, 4))]),
    "clip": (lambda m, x: m.np.clip(x, -0.5, 0.7), [F((3, 4))]),
    "astype_int": (lambda m, x: x.astype(np.int32).astype(x.dtype) * x, [F((3, 4))]),
    # reductions and scans
    "reduce_sum": (lambda m, x: m.np.sum(x, axis=(0, 2)), [F((2, 3, 4))]),
    "reduce_max": (lambda m, x: m.np.max(x, axis=1), [F((2, 3, 4))]),
    "reduce_min": (lambda m, x: m.np.min(x, axis=(0, 1)), [F((2, 3, 4))]),
    "reduce_prod": (lambda m, x: m.np.prod(x, axis=(0, 2)), [F((2, 3, 4))]),
    "reduce_prod_zeros": (lambda m, x: m.np.prod(x * MASK.astype(x.dtype), axis=1), [F((3, 4))]),
    "mean_var": (lambda m, x: m.np.mean(x, axis=0) + m.np.var(x, axis=0), [F((5, 3))]),
    "argmax_take": (lambda m, x: m.np.take_along_axis(x, m.np.argmax(x, axis=1, keepdims=True), axis=1),
                    [F((3, 4))]),
    "cumsum": (lambda m, x: m.lax.cumsum(x, axis=1), [F((3, 4))]),
    "cumsum_reverse": (lambda m, x: m.lax.cumsum(x, axis=0, reverse=True), [F((3, 4))]),
    "cumprod": (lambda m, x: m.lax.cumprod(x, axis=1), [F((3, 5))]),
    "cumprod_zeros_reverse": (lambda m, x: m.lax.cumprod(x * MASK.astype(x.dtype), axis=1, reverse=True),
                              [F((3, 4))]),
    "cummax": (lambda m, x: m.lax.cummax(x, axis=1), [F((3, 6))]),
    "cummin_reverse": (lambda m, x: m.lax.cummin(x, axis=0, reverse=True), [F((7, 2))]),
    # structural
    "broadcast_in_dim": (lambda m, x: m.lax.broadcast_in_dim(x, (2, 3, 4), (1, 2)), [F((3, 1))]),
    "broadcast_binary": (lambda m, x, y: x * y, [F((3, 1)), F((4,))]),
    "reshape": (lambda m, x: m.np.reshape(x, (4, 3)) * 1.0, [F((3, 4))]),
    "transpose": (lambda m, x: m.np.transpose(x, (2, 0, 1)), [F((2, 3, 4))]),
    "squeeze_expand": (lambda m, x: m.np.expand_dims(m.lax.squeeze(x, (1,)), 0), [F((3, 1, 4))]),
    "rev": (lambda m, x: m.lax.rev(x, (0, 1)), [F((3, 4))]),
    "slice": (lambda m, x: m.lax.slice(x, (1, 0), (5, 7), (2, 3)), [F((6, 7))]),
    "getitem_slices": (lambda m, x: x[1:, ::2] * 2.0, [F((4, 5))]),
    "concatenate": (lambda m, x, y: m.lax.concatenate([x, y, x], 1), [F((2, 3)), F((2, 2))]),
    "pad": (lambda m, x, v: m.lax.pad(x, v, [(1, -1, 1), (-1, 2, 0)]), [F((3, 4)), F(())]),
    "stack_split": (lambda m, x: m.np.stack(m.np.split(x, 2, axis=1))[::-1], [F((3, 4))]),
    # products
    "matmul": (lambda m, x, y: x @ y, [F((3, 4)), F((4, 5))]),
    "matvec": (lambda m, x, y: x @ y, [F((3, 4)), F((4,))]),
    "vecdot": (lambda m, x, y: m.np.dot(x, y), [F((4,)), F((4,))]),
    "dot_general_batch": (lambda m, x, y: m.lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,)))),
                          [F((2, 3, 4)), F((2, 4, 5))]),
    "dot_general_multi_contract": (lambda m, x, y: m.lax.dot_general(x, y, (((0, 2), (2, 0)), ((), ()))),
                                   [F((2, 3, 4)), F((4, 5, 2))]),
    "dot_general_batch_last": (lambda m, x, y: m.lax.dot_general(x, y, (((0,), (1,)), ((2,), (0,)))),
                               [F((3, 2, 4)), F((4, 3, 5))]),
    "einsum": (lambda m, x, y: m.np.einsum("bij,bjk->bik", x, y), [F((2, 3, 4)), F((2, 4, 2))]),
    # indexing
    "getitem_int_array": (lambda m, x, i: x[i], [F((5, 3)), I((4,), -5, 5)]),
    "take_clip": (lambda m, x, i: m.np.take(x, i, axis=1, mode="clip"), [F((3, 5)), I((2, 2), -7, 7)]),
    "take_fill": (lambda m, x, i: m.np.take(x, i, axis=1, mode="fill", fill_value=0), [F((3, 5)), I((2, 2), -7, 7)]),
    "take_wrap": (lambda m, x, i: m.np.take(x, i, axis=0, mode="wrap"), [F((3, 5)), I((4,), -7, 7)]),
    "take_along_axis": (lambda m, x, i: m.np.take_along_axis(x, i, axis=1), [F((3, 5)), I((3, 2), 0, 5)]),
    "at_add": (lambda m, x, y: x.at[DUP_IDX].add(y), [F((4, 3)), F((4, 3))]),
    "at_set_duplicates": (lambda m, x, y: x.at[DUP_IDX].set(y), [F((4, 3)), F((4, 3))]),
    "at_set_drop": (lambda m, x, y: x.at[np.array([0, 9, 2], np.int32)].set(y, mode="drop"), [F((4,)), F((3,))]),
    "at_multiply": (lambda m, x: x.at[DUP_IDX].multiply(2.5), [F((4, 3))]),
    "at_max": (lambda m, x, y: x.at[DUP_IDX].max(y), [F((4, 3)), F((4, 3))]),
    "at_min_drop": (lambda m, x, y: x.at[np.array([0, 9, 0], np.int32)].min(y, mode="drop"), [F((4,)), F((3,))]),
    "dynamic_slice": (lambda m, x: m.lax.dynamic_slice(x, (1, 2), (2, 2)), [F((4, 5))]),
    "dynamic_slice_clamped": (lambda m, x, i: m.lax.dynamic_slice(x, (i, 3), (2, 3)), [F((4, 5)), C(np.int32(3))]),
    "dynamic_update_slice": (lambda m, x, u: m.lax.dynamic_update_slice(x, u, (1, 2)), [F((4, 5)), F((2, 2))]),
    # sorting
    "sort": (lambda m, x: m.np.sort(x, axis=1), [F((3, 5))]),
    "sort_multi": (lambda m, x, y: m.lax.sort((x, y), dimension=0, num_keys=1), [F((5, 2)), F((5, 2))]),
    "top_k": (lambda m, x: m.lax.top_k(x, 3)[0], [F((2, 6))]),
    # nn
    "softmax": (lambda m, x: m.nn.softmax(x, axis=-1), [F((3, 4))]),
    "log_softmax": (lambda m, x: m.nn.log_softmax(x), [F((3, 4))]),
    "logsumexp": (lambda m, x: m.nn.logsumexp(x, axis=0), [F((3, 4))]),
    "gelu": (lambda m, x: m.nn.gelu(x), [F((3, 4))]),
    "relu_silu": (lambda m, x: m.nn.relu(x) + m.nn.silu(x), [F((3, 4))]),
    "stop_gradient": (lambda m, x, y: m.lax.stop_gradient(x) * y + x, [F((3,)), F((3,))]),
}


def float_positions(specs):
    return [i for i, s in enumerate(specs) if isinstance(s, F)]


def flat(tree):
    return meshsim.tree_util.tree_leaves(tree)


def vjp_of(fn, modules, args, specs, vjp, cts=None, seed=1):
    """The function's outputs and, for output cotangents `cts` (drawn if None), the
    cotangents of its float arguments."""
    pos_ = float_positions(specs)

    def f(*fargs):
        full = list(args)
        for i, a in zip(pos_, fargs):
            full[i] = a
        return fn(modules, *full)

    out, pullback = vjp(f, *[args[i] for i in pos_])
    if cts is None:
        rng = np.random.default_rng(seed)
        cts = [rng.standard_normal(np.shape(o)).astype(np.asarray(o).dtype) for o in flat(out)]
    ct_tree = meshsim.tree_util.tree_unflatten(meshsim.tree_util.tree_structure(out), cts)
    return out, cts, pullback(ct_tree)


@pytest.mark.parametrize("name", sorted(set(CASES) - {"stop_gradient"}))  # FD sees through it
def test_vjp_matches_finite_differences(name, x64):
    fn, specs = CASES[name]
    args = make_args(specs, np.float64)
    margs = [mnp.asarray(a) for a in args]
    out, cts, grads = vjp_of(fn, MS, margs, specs, meshsim.vjp)
    for g, i in zip(grads, float_positions(specs)):
        assert np.asarray(g).dtype == np.float64 and np.shape(g) == args[i].shape
    # The directional derivative along random t, projected on the cotangent.
    rng = np.random.default_rng(2)
    pos_ = float_positions(specs)
    ts = {i: rng.standard_normal(args[i].shape) for i in pos_}
    eps = 1e-6

    def at(sign):
        shifted = [mnp.asarray(a + sign * eps * ts[i]) if i in ts else mnp.asarray(a) for i, a in enumerate(args)]
        return [np.asarray(o, np.float64) for o in flat(fn(MS, *shifted))]

    plus, minus = at(1), at(-1)
    numeric = sum(np.vdot(c, (p - q) / (2 * eps)) for c, p, q in zip(cts, plus, minus)
                  if np.asarray(c).dtype.kind == "f")
    analytic = sum(np.vdot(np.asarray(g), ts[i]) for g, i in zip(grads, pos_))
    np.testing.assert_allclose(analytic, numeric, rtol=2e-6, atol=1e-7)


# JAX 0.10.2's own clamp VJP fails for scalar bounds (select of mismatched shapes).
@pytest.mark.parametrize("name", sorted(set(CASES) - {"clamp_scalar_bounds"}))
def test_vjp_matches_jax(name, real_jax, jx):
    fn, specs = CASES[name]
    args = make_args(specs, np.float32)
    out, cts, grads = vjp_of(fn, MS, [mnp.asarray(a) for a in args], specs, meshsim.vjp)
    ref_out, _, ref_grads = vjp_of(fn, jx, [real_jax.numpy.asarray(a) for a in args], specs, real_jax.vjp,
                                   cts=[real_jax.numpy.asarray(c) for c in cts])
    for o, r in zip(flat(out), flat(ref_out)):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-5, atol=1e-6)
    for g, r in zip(grads, ref_grads):
        assert np.asarray(g).dtype == np.asarray(r).dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=2e-5, atol=2e-6)


# Linear functions of their (float) arguments: <f(t), c> == <t, f^T(c)>.
LINEAR = ["neg", "add", "sub", "reduce_sum", "cumsum", "cumsum_reverse", "broadcast_in_dim", "reshape",
          "transpose", "squeeze_expand", "rev", "slice", "getitem_slices", "concatenate", "stack_split",
          "getitem_int_array", "take_clip", "take_fill", "take_wrap", "take_along_axis", "at_add",
          "dynamic_slice", "dynamic_slice_clamped", "dynamic_update_slice", "at_set_duplicates",
          "at_set_drop", "pad"]


@pytest.mark.parametrize("name", LINEAR)
def test_linear_rules_satisfy_the_dot_product_identity(name):
    fn, specs = CASES[name]
    args = make_args(specs, np.float32, seed=3)
    margs = [mnp.asarray(a) for a in args]
    _, cts, grads = vjp_of(fn, MS, margs, specs, meshsim.vjp)
    outs = [np.asarray(o, np.float64) for o in flat(fn(MS, *margs))]
    lhs = sum(np.vdot(np.asarray(c, np.float64), o) for c, o in zip(cts, outs))
    rhs = sum(np.vdot(np.asarray(g, np.float64), np.asarray(args[i], np.float64))
              for g, i in zip(grads, float_positions(specs)))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-4, atol=1e-4)


def test_linear_dot_general_dot_product_identity():
    rng = np.random.default_rng(0)
    x, y, c = rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal((3, 5))
    f = lambda a: mnp.asarray(a.astype(np.float32)) @ mnp.asarray(y.astype(np.float32))
    (gx,) = meshsim.vjp(f, x.astype(np.float32))[1](mnp.asarray(c.astype(np.float32)))
    np.testing.assert_allclose(np.vdot(c, np.asarray(f(x))), np.vdot(np.asarray(gx), x), rtol=1e-5)


# --- the API ------------------------------------------------------------------------

def f32(x):
    return mnp.asarray(np.asarray(x, np.float32))


def test_grad_value_and_grad_and_argnums():
    f = lambda x, y: mnp.sum(mnp.sin(x) * y)
    x, y = f32([0.5, 1.0, 2.0]), f32([1.0, -2.0, 3.0])
    np.testing.assert_allclose(meshsim.grad(f)(x, y), np.cos(np.asarray(x)) * np.asarray(y), rtol=1e-6)
    gx, gy = meshsim.grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gy, np.sin(np.asarray(x)), rtol=1e-6)
    (gy_only,) = meshsim.grad(f, argnums=(1,))(x, y)
    np.testing.assert_allclose(gy_only, gy)
    value, g = meshsim.value_and_grad(f, argnums=1)(x, y)
    np.testing.assert_allclose(value, np.sum(np.sin(np.asarray(x)) * np.asarray(y)), rtol=1e-6)
    np.testing.assert_allclose(g, gy)


def test_grad_has_aux():
    f = lambda x: (mnp.sum(x ** 2), {"mean": mnp.mean(x), "n": 3})
    x = f32([1.0, 2.0, 3.0])
    g, aux = meshsim.grad(f, has_aux=True)(x)
    np.testing.assert_allclose(g, [2, 4, 6])
    assert float(aux["mean"]) == 2.0 and int(aux["n"]) == 3
    (value, aux2), g2 = meshsim.value_and_grad(f, has_aux=True)(x)
    assert float(value) == 14.0 and float(aux2["mean"]) == 2.0
    np.testing.assert_allclose(g2, g)


@meshsim.tree_util.register_dataclass
@dataclasses.dataclass
class Layer:
    w: object
    b: object


def test_grad_over_pytrees_dict_list_dataclass():
    params = {"layers": [Layer(f32(np.ones((2, 3))), f32(np.zeros(3))), Layer(f32(np.eye(3)), f32(np.ones(3)))],
              "scale": f32(2.0)}

    def loss(p, x):
        for layer in p["layers"]:
            x = mnp.tanh(x @ layer.w + layer.b)
        return p["scale"] * mnp.sum(x ** 2)

    x = f32([[0.1, -0.2], [0.3, 0.4]])
    g = meshsim.grad(loss)(params, x)
    assert isinstance(g["layers"][0], Layer) and g["layers"][1].w.shape == (3, 3)

    def ref_loss(p, x):
        import jax.numpy as jnp
        for layer in p["layers"]:
            x = jnp.tanh(x @ layer.w + layer.b)
        return p["scale"] * jnp.sum(x ** 2)

    jax = pytest.importorskip("jax")
    jax.tree_util.register_dataclass(Layer, data_fields=["w", "b"], meta_fields=[])
    ref = jax.grad(ref_loss)(jax.tree_util.tree_map(np.asarray, params,
                                                     is_leaf=lambda v: isinstance(v, meshsim.Array)), np.asarray(x))
    for a, b in zip(meshsim.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_vjp_returns_a_tuple_and_handles_pytrees():
    f = lambda d: {"s": d["a"] * 2.0, "t": [d["b"] ** 2]}
    d = {"a": f32([1.0, 2.0]), "b": f32(3.0)}
    out, pullback = meshsim.vjp(f, d)
    (ct,) = pullback({"s": f32([1.0, 1.0]), "t": [f32(1.0)]})
    np.testing.assert_allclose(ct["a"], [2, 2])
    np.testing.assert_allclose(ct["b"], 6.0)
    with pytest.raises(ValueError, match="unexpected tree structure"):
        pullback({"s": f32([1.0, 1.0])})
    with pytest.raises(ValueError, match="expected float32\\[2\\]"):
        pullback({"s": f32([1.0, 1.0, 1.0]), "t": [f32(1.0)]})


def test_vjp_of_integer_inputs_gives_float0(real_jax):
    out, pullback = meshsim.vjp(lambda x, i: x * 2.0, f32(1.0), np.int32(2))
    gx, gi = pullback(f32(1.0))
    assert float(gx) == 2.0
    assert gi.dtype == real_jax.dtypes.float0 and gi.shape == ()
    gx, gi = meshsim.grad(lambda x, i: x * i, argnums=(0, 1), allow_int=True)(f32(1.0), np.int32(3))
    assert float(gx) == 3.0 and gi.dtype == real_jax.dtypes.float0


def test_a_pullback_is_a_pytree_of_its_residuals(real_jax):
    # As JAX's: its leaves are the residuals, so a pullback can be returned from
    # jit, stacked by a scan and applied later, in another trace.
    rng = np.random.default_rng(7)
    x, w, ct = (rng.standard_normal(shape).astype(np.float32) for shape in ((3, 2, 4), (3, 4, 5), (2, 5)))

    def run(jax):
        f = lambda x, w: jax.numpy.tanh(x @ w) * x.sum()  # noqa: E731
        results = []
        out, pullback = jax.vjp(f, x[0], w[0])
        leaves, tree = jax.tree.flatten(pullback)
        assert leaves and all(hasattr(a, "dtype") for a in leaves)
        results.append(jax.tree.unflatten(tree, leaves)(ct))
        results.append(jax.jit(lambda x, w: jax.vjp(f, x, w)[1])(x[1], w[1])(ct))
        _, stacked = jax.lax.scan(lambda c, xw: (c, jax.vjp(f, *xw)[1]), 0.0, (x, w))
        leaves, tree = jax.tree.flatten(stacked)
        _, later = jax.jit(lambda leaves: jax.lax.scan(
            lambda c, res: (c, jax.tree.unflatten(tree, res)(ct)), 0.0, leaves))(leaves)
        results.append(later)
        return [np.asarray(a) for a in jax.tree.leaves(results)]
    for ours, ref in zip(run(meshsim), run(real_jax), strict=True):
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)


def test_weak_types_follow_jax(real_jax):
    g = meshsim.grad(lambda x: x * 2.0)(3.0)
    ref = real_jax.grad(lambda x: x * 2.0)(3.0)
    assert g.dtype == ref.dtype and g.weak_type == ref.weak_type
    g = meshsim.grad(lambda x: x * 2.0)(np.float32(3.0))
    assert g.weak_type == real_jax.grad(lambda x: x * 2.0)(np.float32(3.0)).weak_type


def test_jit_composes_both_ways():
    f = lambda w, x: mnp.sum(mnp.tanh(x @ w) ** 2)
    w, x = f32(np.random.default_rng(0).standard_normal((4, 3))), f32(np.ones((2, 4)))
    expect = meshsim.grad(f)(w, x)
    np.testing.assert_allclose(meshsim.jit(meshsim.grad(f))(w, x), expect, rtol=1e-6)
    np.testing.assert_allclose(meshsim.grad(meshsim.jit(f))(w, x), expect, rtol=1e-6)
    jg = meshsim.jit(meshsim.grad(f))
    jg(w, x)
    jg(w, x)
    assert jg.trace_count() == 1
    # Closed-over tracers of the enclosing jit are constants of the inner grad.
    h = meshsim.jit(lambda w, x: meshsim.grad(lambda v: f(v, x))(w) * 2.0)
    np.testing.assert_allclose(h(w, x), 2 * np.asarray(expect), rtol=1e-6)


def test_higher_order_grad():
    f = lambda x: mnp.sin(x) * x ** 3
    x = 0.7
    d1 = lambda x: np.cos(x) * x ** 3 + 3 * np.sin(x) * x ** 2
    d2 = lambda x: -np.sin(x) * x ** 3 + 6 * np.cos(x) * x ** 2 + 6 * np.sin(x) * x
    np.testing.assert_allclose(meshsim.grad(f)(x), d1(x), rtol=1e-5)
    np.testing.assert_allclose(meshsim.grad(meshsim.grad(f))(x), d2(x), rtol=1e-5)
    np.testing.assert_allclose(meshsim.jit(meshsim.grad(meshsim.grad(f)))(x), d2(x), rtol=1e-5)
    # A closure over the outer variable is differentiated through.
    g = meshsim.grad(lambda x: meshsim.grad(lambda y: x * y * y)(2.0))(3.0)
    assert float(g) == 4.0


def test_jvp_and_linearize(real_jax):
    f = lambda x, y: (mnp.sin(x) * y, mnp.sum(x))
    x, y = f32([0.1, 0.2]), f32([3.0, 4.0])
    tx, ty = f32([1.0, 0.0]), f32([0.5, 0.5])
    out, t_out = meshsim.jvp(f, (x, y), (tx, ty))
    ref_out, ref_t = real_jax.jvp(lambda a, b: (real_jax.numpy.sin(a) * b, real_jax.numpy.sum(a)),
                                  (np.asarray(x), np.asarray(y)), (np.asarray(tx), np.asarray(ty)))
    for a, b in zip(flat((out, t_out)), flat((ref_out, ref_t))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    out2, f_jvp = meshsim.linearize(f, x, y)
    for a, b in zip(flat(f_jvp(tx, ty)), flat(ref_t)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    with pytest.raises(TypeError, match="must be tuples or lists; found float and float"):
        meshsim.jvp(mnp.sin, 1.0, 1.0)


def test_stop_gradient():
    f = lambda x: mnp.sum(mlax.stop_gradient(x ** 2) * x)
    x = f32([1.0, 2.0])
    np.testing.assert_allclose(meshsim.grad(f)(x), [1.0, 4.0])
    ints = mlax.stop_gradient({"i": np.int32(1), "x": x})
    assert ints["i"].dtype == np.int32
    assert "stop_gradient" in str(meshsim.make_jaxpr(mlax.stop_gradient)(x))


def test_make_jaxpr_of_grad_shows_the_backward_program():
    jaxpr = str(meshsim.make_jaxpr(meshsim.grad(lambda x: mnp.sin(x) * x))(3.0))
    assert "sin" in jaxpr and "cos" in jaxpr and "add_any" in jaxpr


# --- custom_vjp ------------------------------------------------------------------

def test_custom_vjp_uses_the_user_rule():
    @meshsim.custom_vjp
    def f(x, y):
        return mnp.sin(x) * y

    def f_fwd(x, y):
        return f(x, y), (mnp.cos(x), mnp.sin(x), y)

    def f_bwd(res, g):
        cos_x, sin_x, y = res
        return (cos_x * g * y * 10.0, sin_x * g)  # 10x: the user's rule is what runs

    f.defvjp(f_fwd, f_bwd)
    x, y = f32([0.3, 0.4]), f32([2.0, 3.0])
    np.testing.assert_allclose(f(x, y), np.sin(np.asarray(x)) * np.asarray(y), rtol=1e-6)
    gx, gy = meshsim.grad(lambda x, y: mnp.sum(f(x, y)), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, 10 * np.cos(np.asarray(x)) * np.asarray(y), rtol=1e-6)
    np.testing.assert_allclose(gy, np.sin(np.asarray(x)), rtol=1e-6)
    jitted = meshsim.jit(meshsim.grad(lambda x, y: mnp.sum(f(x, y))))(x, y)
    np.testing.assert_allclose(jitted, gx, rtol=1e-6)
    assert "custom_vjp_call" in str(meshsim.make_jaxpr(f)(x, y))


def test_custom_vjp_nondiff_argnums_and_none_cotangents():
    @meshsim.custom_vjp
    def clip_gradient(lo, hi, x):
        return x

    def fwd(lo, hi, x):
        return x, None

    def bwd(lo, hi, _, g):
        return (mnp.clip(g, lo, hi),)

    clip_gradient = meshsim.custom_vjp(clip_gradient.fun, nondiff_argnums=(0, 1))
    clip_gradient.defvjp(fwd, bwd)
    g = meshsim.grad(lambda x: mnp.sum(clip_gradient(-1.0, 1.0, x) * 5.0))(f32([1.0, 2.0]))
    np.testing.assert_allclose(g, [1.0, 1.0])

    @meshsim.custom_vjp
    def h(x, y):
        return x * y

    h.defvjp(lambda x, y: (x * y, x), lambda x, g: (None, x * g))
    gx, gy = meshsim.grad(lambda x, y: h(x, y), argnums=(0, 1))(f32(2.0), f32(3.0))
    assert float(gx) == 0.0 and float(gy) == 2.0


def test_custom_vjp_errors():
    f = meshsim.custom_vjp(lambda x: x)
    with pytest.raises(AttributeError, match="No VJP defined for custom_vjp function"):
        f(1.0)
    f.defvjp(lambda x: (x, None), lambda r, g: g)
    with pytest.raises(TypeError, match="must produce a tuple of length equal"):
        meshsim.grad(f)(1.0)


# --- checkpoint -------------------------------------------------------------------

def _mlp_block(ws, x):
    for w in ws:
        x = mnp.sin(x @ w)
    return x


def _grad_eqns(f, *args):
    """The primitives of make_jaxpr(grad(f)), in order."""
    return [e.primitive.name for e in meshsim.make_jaxpr(meshsim.grad(f))(*args).eqns]


# Three layers x = sin(x @ w), differentiated with respect to the ws. Without
# checkpointing the backward pass needs each dot's output (for cos) and each
# layer's input; a policy that does not save them makes the backward pass
# recompute them: 3 dots and the 2 sins whose outputs feed later layers.
@pytest.mark.parametrize("policy, extra_dots, extra_sins", [
    (None, 3, 2),
    (meshsim.checkpoint_policies.nothing_saveable, 3, 2),
    (meshsim.checkpoint_policies.dots_saveable, 0, 2),
    (meshsim.checkpoint_policies.checkpoint_dots, 0, 2),
    (meshsim.checkpoint_policies.dots_with_no_batch_dims_saveable, 0, 2),
    (meshsim.checkpoint_policies.everything_saveable, 0, 0),
    (lambda prim, *avals, **params: prim.name == "sin", 3, 0),  # a policy written in Python
])
def test_checkpoint_policies_choose_what_is_recomputed(policy, extra_dots, extra_sins):
    rng = np.random.default_rng(0)
    ws = [f32(rng.standard_normal((4, 4)) / 2) for _ in range(3)]
    x = f32(rng.standard_normal((2, 4)))
    plain = lambda ws: mnp.sum(_mlp_block(ws, x))
    remat = lambda ws: mnp.sum(meshsim.checkpoint(_mlp_block, policy=policy)(ws, x))
    plain_eqns, eqns = _grad_eqns(plain, ws), _grad_eqns(remat, ws)
    assert (plain_eqns.count("dot_general"), plain_eqns.count("sin")) == (8, 3)
    assert eqns.count("dot_general") == 8 + extra_dots
    assert eqns.count("sin") == 3 + extra_sins
    expect = meshsim.grad(plain)(ws)
    for run in (meshsim.grad(remat), meshsim.jit(meshsim.grad(remat))):
        for a, b in zip(run(ws), expect):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


@pytest.mark.parametrize("policy_name", ["dots_saveable", "dots_with_no_batch_dims_saveable", "nothing_saveable"])
@pytest.mark.parametrize("composed", [False, True])
def test_dots_policies_save_what_jax_saves(real_jax, policy_name, composed):
    """dots_saveable saves convolutions and batched products too, dots_with_no_batch_dims_saveable
    only unbatched dot_generals (as each product declares where it is registered,
    Primitive::saved_as_dot): the gradient's program recomputes as many of each as JAX's, with
    the built-in policy and with one composed in Python (asked per equation)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    k = (rng.standard_normal((4, 3, 3, 3)) / 4).astype(np.float32)
    w = (rng.standard_normal((2, 8, 8)) / 4).astype(np.float32)
    found = []
    for lib in (meshsim, real_jax):
        policy = getattr(lib.checkpoint_policies, policy_name)
        if composed:
            policy = lib.checkpoint_policies.save_from_both_policies(
                policy, lib.checkpoint_policies.save_only_these_names("unused"))

        def block(x, k, w, lib=lib):
            y = lib.numpy.sin(lib.lax.conv(x, k, (1, 1), "SAME"))
            z = lib.numpy.einsum("bij,bjk->bik", y[:, 0], w)  # a product with a batch dim
            return lib.numpy.sin(z @ w[0])  # one without

        def loss(x, k, w, lib=lib, policy=policy, block=block):
            return lib.numpy.sum(lib.checkpoint(block, policy=policy)(x, k, w))

        grad = lib.grad(loss, argnums=(0, 1, 2))
        text = str(lib.make_jaxpr(grad)(x, k, w))
        found.append(((text.count("conv_general_dilated"), text.count("dot_general")),
                      [np.asarray(g) for g in grad(x, k, w)]))
    assert found[0][0] == found[1][0]
    for ours, theirs in zip(found[0][1], found[1][1]):
        np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=1e-5)


def test_checkpoint_is_a_remat2_equation_and_runs_eagerly():
    f = meshsim.checkpoint(lambda x: mnp.sin(mnp.sin(x)), prevent_cse=False)
    jaxpr = str(meshsim.make_jaxpr(f)(1.0))
    assert "remat2" in jaxpr and "prevent_cse=False" in jaxpr
    np.testing.assert_allclose(f(1.0), np.sin(np.sin(1.0)), rtol=1e-6)
    np.testing.assert_allclose(meshsim.jit(f)(1.0), np.sin(np.sin(1.0)), rtol=1e-6)
    assert meshsim.remat is meshsim.checkpoint


def test_checkpoint_static_argnums_and_names():
    from meshsim.ad_checkpoint import checkpoint_name

    def f(x, n):
        for _ in range(n):
            x = checkpoint_name(mnp.sin(x), "s")
        return mnp.sum(x)

    policy = meshsim.checkpoint_policies.save_only_these_names("s")
    g = meshsim.grad(meshsim.checkpoint(f, static_argnums=(1,), policy=policy))(f32([0.1, 0.2]), 2)
    x = np.array([0.1, 0.2])
    np.testing.assert_allclose(g, np.cos(np.sin(x)) * np.cos(x), rtol=1e-6)
    eqns = _grad_eqns(lambda x: meshsim.checkpoint(f, static_argnums=(1,), policy=policy)(x, 2), f32([0.1, 0.2]))
    assert eqns.count("sin") == 2  # the named values are saved: no sin is recomputed


def _first_scan_output_shapes(closed):
    """The types of the first scan's results in a traced program: the forward scan of a
    gradient, whose results past the carries are the residuals it stacks."""
    for eqn in closed.jaxpr.eqns:
        if eqn.primitive.name == "scan":
            return sorted((tuple(v.aval.shape), str(v.aval.dtype)) for v in eqn.outvars)
    raise AssertionError("no scan")


# (With everything saveable JAX's residuals also hold values its JVP rules derive in
# the forward pass, such as tanh's 1 - y: a form of the same information.)
@pytest.mark.parametrize("policy_name", ["dots_saveable", "nothing_saveable",
                                         "dots_with_no_batch_dims_saveable"])
def test_checkpointed_scan_keeps_only_residuals_the_backward_pass_reads(real_jax, policy_name):
    # A layer x + tanh(x @ w1) @ w2 scanned over 5 layers: the backward pass reads
    # the layer's input and tanh's argument, not the output of the last matmul,
    # which a policy saving dots still marks saveable. JAX keeps only what is read.
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((5, 7, 11)) / 3).astype(np.float32)
    w2 = (rng.standard_normal((5, 11, 7)) / 3).astype(np.float32)
    x = rng.standard_normal((3, 7)).astype(np.float32)
    shapes = []
    for lib, numpy_mod in ((meshsim, mnp), (real_jax, real_jax.numpy)):
        policy = getattr(lib.checkpoint_policies, policy_name)

        def layer(x, w, lib=lib, numpy_mod=numpy_mod):
            return x + numpy_mod.tanh(x @ w[0]) @ w[1]

        def loss(ws, x, lib=lib, numpy_mod=numpy_mod, policy=policy):
            block = lib.checkpoint(layer, policy=policy)
            return numpy_mod.sum(lib.lax.scan(lambda x, w: (block(x, w), None), x, ws)[0])
        closed = lib.make_jaxpr(lib.grad(loss))((w1, w2), x)
        shapes.append(_first_scan_output_shapes(closed))
        grads = lib.grad(loss)((w1, w2), x)
        if lib is meshsim:
            ours = grads
        else:
            # Five layers of float32 matmuls summed in OpenBLAS's order (which depends on the
            # CPU's kernel) against XLA's: a gradient element of -3e-3 that cancels terms
            # of order 1 differs by 1.1e-6 on some CPUs, so the bound is absolute.
            for a, b in zip(ours, grads):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
    assert shapes[0] == shapes[1]


# --- errors ---------------------------------------------------------------------

def test_grad_errors_match_jax(real_jax):
    for fn, args in [(lambda x: x, (np.ones(3, np.float32),)), (lambda x: x * 1.0, (np.int32(1),)),
                     (lambda x: x, (1.0,))]:
        pass
    with pytest.raises(TypeError) as ours:
        meshsim.grad(lambda x: x)(f32([1.0, 2.0, 3.0]))
    assert str(ours.value) == "Gradient only defined for scalar-output functions. Output had shape: (3,)."
    with pytest.raises(TypeError) as ours:
        meshsim.grad(lambda x: x * 1.0)(np.int32(1))
    with pytest.raises(TypeError) as theirs:
        real_jax.grad(lambda x: x * 1.0)(np.int32(1))
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(TypeError) as ours:
        meshsim.grad(lambda x: x, argnums=2)(1.0)
    with pytest.raises(TypeError) as theirs:
        real_jax.grad(lambda x: x, argnums=2)(1.0)
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(TypeError, match="grad requires real-valued outputs"):
        meshsim.grad(lambda x: x.astype(np.int32))(1.0)
    with pytest.raises(TypeError, match="expected function with aux output to return a two-element tuple"):
        meshsim.grad(lambda x: x, has_aux=True)(1.0)


def test_missing_rule_error():
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'nextafter' not implemented"):
        meshsim.grad(lambda x: mnp.sum(mlax.nextafter(x, x + 1.0)))(f32([1.0, 2.0]))
    with pytest.raises(NotImplementedError, match="scatter_mul gradients are only implemented if"):
        meshsim.grad(lambda x, y: mnp.sum(x.at[DUP_IDX].multiply(y)), argnums=1)(f32(np.ones((4, 3))),
                                                                               f32(np.ones((4, 3))))


def test_every_primitive_has_a_rule_or_is_not_differentiable():
    """Primitives without a VJP rule only produce integers or booleans (or are collectives)."""
    from meshsim import _core
    no_rule = {n for n in _core.primitive_names() if not _core.has_vjp_rule(n)}
    integer_valued = {"and", "or", "xor", "not", "argmax", "argmin", "clz", "population_count", "eq", "ne", "lt",
                      "le", "gt", "ge", "is_finite", "iota", "random_bits", "threefry2x32", "reduce_and",
                      "reduce_or", "reduce_xor", "searchsorted", "shift_left", "shift_right_arithmetic",
                      "shift_right_logical", "axis_index"}
    not_differentiable_in_jax = {"nextafter", "schur", "hessenberg", "householder_product", "zeta", "igamma_grad_a"}
    collectives = {"all_gather", "all_gather_invariant", "all_to_all", "pbroadcast", "pmax", "pmin", "ppermute",
                   "psum", "psum_invariant", "pvary", "ragged_all_to_all", "reduce_scatter", "shard_map"}
    missing = no_rule - integer_valued - not_differentiable_in_jax - collectives
    assert not missing, (f"primitives without a VJP rule: {sorted(missing)}; give each a `vjp` next to its "
                         "registration (docs/architecture.md, Autodiff)")


@pytest.mark.parametrize("seed", range(4))
def test_bitcast_has_a_zero_derivative(seed, real_jax):
    """JAX differentiates through bitcast_convert_type as a zero (defjvp_zero)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(int(rng.integers(1, 9))).astype(np.float32)
    ulps = int(rng.integers(0, 3))

    def f(lib, x):
        bits = lib.lax.bitcast_convert_type(x, np.int32) + ulps
        return lib.numpy.sum(lib.lax.bitcast_convert_type(bits, np.float32) * x + x * x)
    np.testing.assert_allclose(meshsim.grad(lambda v: f(meshsim, v))(x),
                               real_jax.grad(lambda v: f(real_jax, v))(x), rtol=1e-6)


def test_integer_paths_need_no_rule():
    # argmax, comparisons, iota and integer arithmetic are not differentiated.
    f = lambda x: mnp.sum(x * (mnp.argmax(x) + mnp.arange(3)).astype(np.float32))
    np.testing.assert_allclose(meshsim.grad(f)(f32([1.0, 3.0, 2.0])), [1.0, 2.0, 3.0])


# --- an MLP against NumPy backprop and JAX -----------------------------------------

SIZES = [32, 128, 256, 128, 4]


def _mlp_params(rng):
    return [{"w": (rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32),
             "b": (rng.standard_normal(n) * 0.1).astype(np.float32)} for m, n in zip(SIZES[:-1], SIZES[1:])]


def _mlp_loss(np_, params, x, y):
    h = x
    for i, layer in enumerate(params):
        h = h @ layer["w"] + layer["b"]
        if i < len(params) - 1:
            h = np_.maximum(h, 0.0)
    return np_.mean((h - y) ** 2)


def _numpy_backprop(params, x, y):
    x, y = x.astype(np.float64), y.astype(np.float64)
    hs, pre = [x], []
    for i, layer in enumerate(params):
        z = hs[-1] @ layer["w"].astype(np.float64) + layer["b"].astype(np.float64)
        pre.append(z)
        hs.append(np.maximum(z, 0.0) if i < len(params) - 1 else z)
    loss = np.mean((hs[-1] - y) ** 2)
    d = 2 * (hs[-1] - y) / y.size
    grads = [None] * len(params)
    for i in reversed(range(len(params))):
        if i < len(params) - 1:
            d = d * (pre[i] > 0)
        grads[i] = {"w": hs[i].T @ d, "b": d.sum(0)}
        d = d @ params[i]["w"].astype(np.float64).T
    return loss, grads


def test_mlp_matches_numpy_backprop_and_jax(real_jax):
    rng = np.random.default_rng(0)
    params = _mlp_params(rng)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    y = rng.standard_normal((16, 4)).astype(np.float32)
    ref_loss, ref_grads = _numpy_backprop(params, x, y)
    mparams = meshsim.tree_util.tree_map(mnp.asarray, params)
    step = meshsim.jit(meshsim.value_and_grad(lambda p, x, y: _mlp_loss(mnp, p, x, y)))
    for run in (step, meshsim.value_and_grad(lambda p, x, y: _mlp_loss(mnp, p, x, y))):
        loss, grads = run(mparams, mnp.asarray(x), mnp.asarray(y))
        np.testing.assert_allclose(float(loss), ref_loss, rtol=1e-5)
        for g, r in zip(meshsim.tree_util.tree_leaves(grads), meshsim.tree_util.tree_leaves(ref_grads)):
            np.testing.assert_allclose(np.asarray(g), r, rtol=1e-5, atol=1e-5)
    jloss, jgrads = real_jax.value_and_grad(lambda p, x, y: _mlp_loss(real_jax.numpy, p, x, y))(params, x, y)
    np.testing.assert_allclose(float(loss), float(jloss), rtol=1e-5)
    for g, r in zip(meshsim.tree_util.tree_leaves(grads), real_jax.tree_util.tree_leaves(jgrads)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-5, atol=1e-5)


def test_optimization_barrier_keeps_a_recomputed_output(real_jax):
    # A backward pass that reruns a function and passes its cotangent through a
    # barrier with the rerun's output keeps that output computed (as XLA keeps
    # what goes into a barrier), where jax.vjp alone would leave it out.
    def program(jax):
        layer = lambda x, w: jax.numpy.tanh(x @ w) @ w

        @jax.custom_vjp
        def rerun(x, w):
            return layer(x, w)

        def backward(saved, ct):
            out, pullback = jax.vjp(layer, *saved)
            _, ct = jax.lax.optimization_barrier((out, ct))
            return pullback(ct)
        rerun.defvjp(lambda x, w: (layer(x, w), (x, w)), backward)
        return lambda x, w: rerun(x, w).sum()

    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((6, 6)).astype(np.float32)
    ours = meshsim.jit(meshsim.grad(program(meshsim), argnums=(0, 1)))
    theirs = real_jax.grad(program(real_jax), argnums=(0, 1))
    for a, b in zip(ours(x, w), theirs(x, w)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
    # The rerun's 2 matmuls (its output kept) and 4 transposed ones, plus a few
    # elementwise flops; the first forward pass computes only the loss, which grad
    # does not return: dead code, which XLA drops too (JAX counts fewer than 7).
    flops = ours.lower(x, w).compile().cost_analysis()["flops"]
    matmul = 2 * 4 * 6 * 6
    assert 6 * matmul <= flops < 7 * matmul
    assert real_jax.jit(theirs).lower(x, w).compile().cost_analysis()["flops"] < 7 * matmul
    jaxpr = meshsim.make_jaxpr(lambda a, b: mlax.optimization_barrier((a * 2, b)))(x, w)
    assert [e.primitive for e in jaxpr.eqns] == [mlax.mul_p, mlax.optimization_barrier_p]
    np.testing.assert_array_equal(mlax.optimization_barrier({"a": x})["a"], x)

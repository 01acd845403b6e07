"""Binary operations on operands of different shapes, as JAX 0.10.2 traces them: jnp
broadcasts each operand only up to the common rank (`broadcast_in_dim` keeping size-1
dims, `f32[1,8]`), and the lax op broadcasts size-1 dims itself (`add a c` with
`a:f32[8,8] c:f32[1,8]`). Printed jaxprs (also of grad, whose transposes sum over the
broadcast dims, and of vmap, whose unbatched operands get a size-1 batch dim), values
against NumPy, lax's errors, and Explicit-mode shardings are compared with real JAX."""
import numpy as np
import pytest

import meshsim
import meshsim.numpy as mnp

RNG = np.random.default_rng(0)

# jnp binary functions whose jaxprs are one lax op after the rank broadcast.
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "arctan2", "power",
          "less", "greater_equal", "equal", "not_equal", "nextafter"]
INTEGER = ["add", "multiply", "bitwise_and", "bitwise_or", "left_shift", "less"]


def _random_shapes(rng):
    """Two broadcast-compatible shapes: several ranks, size-1 dims, scalars."""
    rank = int(rng.integers(1, 4))
    full = [int(rng.choice([2, 3, 4])) for _ in range(rank)]
    shapes = []
    for _ in range(2):
        r = int(rng.integers(0, rank + 1))
        shapes.append(tuple(1 if rng.random() < 0.4 else d for d in full[rank - r:]))
    return shapes


SWEEP = []
for seed in range(40):
    rng = np.random.default_rng(seed)
    name = BINARY[seed % len(BINARY)]
    SWEEP.append((seed, name, *_random_shapes(rng)))


def _jaxpr_text(J, f, *args):
    return str(J.make_jaxpr(f)(*args))


def _operands(shapes, dtype=np.float32):
    return [(RNG.standard_normal(s) * 2 + 3).astype(dtype) for s in shapes]


@pytest.mark.parametrize("seed,name,xs,ys", SWEEP, ids=[f"{s}-{n}-{x}-{y}" for s, n, x, y in SWEEP])
def test_binary_jaxpr_and_values_match_jax(real_jax, seed, name, xs, ys):
    x, y = _operands([xs, ys])
    jf = getattr(real_jax.numpy, name)
    mf = getattr(mnp, name)
    assert _jaxpr_text(meshsim, mf, x, y) == _jaxpr_text(real_jax, jf, x, y)
    expected = getattr(np, name)(x, y)
    np.testing.assert_allclose(np.asarray(mf(x, y)), expected, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(meshsim.jit(mf)(x, y)), np.asarray(jf(x, y)), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", INTEGER)
def test_integer_and_bool_operands(real_jax, name):
    x = RNG.integers(0, 5, (3, 4)).astype(np.int32)
    y = RNG.integers(0, 5, (4,)).astype(np.int32)
    if name.startswith("bitwise"):
        x, y = x > 2, y > 2
    mf, jf = getattr(mnp, name), getattr(real_jax.numpy, name)
    assert _jaxpr_text(meshsim, mf, x, y) == _jaxpr_text(real_jax, jf, x, y)
    np.testing.assert_array_equal(np.asarray(mf(x, y)), getattr(np, name)(x, y))


def _programs(J):
    jnp = J.numpy
    return {
        "bias_add": (lambda a, b: a * 2 + b, [(8, 8), (8,)]),
        "column_and_row": (lambda a, b: a - b, [(4, 1), (1, 5)]),
        "three_ranks": (lambda a, b: a * b, [(3, 1, 4), (5, 1)]),
        "scalar_array": (lambda a, s: a / s, [(4, 3), ()]),
        "weak_literal": (lambda a, b: (a + 1.5) * b, [(2, 3), (3,)]),
        "comparison_where": (lambda a, b: jnp.where(a > b, a, b), [(4, 3), (3,)]),
        "where_row_condition": (lambda a, b: jnp.where(b > 0, a, 0.0), [(4, 3), (3,)]),
        "clip": (lambda a, b: jnp.clip(a, b, 2.0), [(4, 3), (3,)]),
        "softmax_like": (lambda a: jnp.exp(a - jnp.max(a, axis=-1, keepdims=True)), [(4, 6)]),
        "layer_norm_like": (lambda a, g: (a - a.mean(0)) / jnp.sqrt(a.var(0) + 1e-5) * g,
                            [(6, 4), (4,)]),
    }


CASES = ["bias_add", "column_and_row", "three_ranks", "scalar_array", "weak_literal", "comparison_where",
         "where_row_condition", "clip", "softmax_like", "layer_norm_like"]


def _case_args(real_jax, case):
    mf, shapes = _programs(meshsim)[case]
    jf, _ = _programs(real_jax)[case]
    return mf, jf, _operands(shapes), tuple(i for i, s in enumerate(shapes) if s)


def _grads(real_jax, mf, jf, argnums):
    def loss(J, f):
        return lambda *a: J.numpy.sum(f(*a))
    return meshsim.grad(loss(meshsim, mf), argnums=argnums), real_jax.grad(loss(real_jax, jf), argnums=argnums)


def _vmaps(real_jax, mf, jf, args):
    """vmap over the first operand's leading dim, the others unbatched."""
    in_axes = (0,) + (None,) * (len(args) - 1)
    return meshsim.vmap(mf, in_axes=in_axes), real_jax.vmap(jf, in_axes=in_axes)


@pytest.mark.parametrize("case", CASES)
def test_programs_print_as_jax_and_their_grads_and_vmaps_agree(real_jax, case):
    mf, jf, args, argnums = _case_args(real_jax, case)
    assert _jaxpr_text(meshsim, mf, *args) == _jaxpr_text(real_jax, jf, *args)
    np.testing.assert_allclose(np.asarray(mf(*args)), np.asarray(jf(*args)), rtol=1e-5, atol=1e-6)
    mg, jg = _grads(real_jax, mf, jf, argnums)
    for m, j in zip(mg(*args), jg(*args)):
        assert m.shape == j.shape
        np.testing.assert_allclose(np.asarray(m), np.asarray(j), rtol=1e-4, atol=1e-5)
    mv, jv = _vmaps(real_jax, mf, jf, args)
    np.testing.assert_allclose(np.asarray(mv(*args)), np.asarray(jv(*args)), rtol=1e-5, atol=1e-6)


# Programs whose grads print otherwise than JAX's for reasons that lie in other rules
# than the broadcast's.
GRAD_PRINTING_DIFFERS = {
    "where_row_condition": "partial evaluation of the `_where` jit: JAX's forward jit also returns "
                           "the broadcast predicate and a zeros residual for the backward one",
    "clip": "max/min JVP: JAX's selects each operand's share and divides by 2 where they tie, and "
            "linearizes inside the `clip` jit (its forward jit returns those shares)",
    "softmax_like": "reduce_max JVP: JAX's computes the location mask (eq, convert, reduce_sum) in "
                    "the forward pass, before the rest of the program",
    "layer_norm_like": "mean/var: JAX's grad of `var` keeps `mul 2.0 f` and the `_where` residuals "
                       "in the forward pass",
}
VMAP_PRINTING_DIFFERS = {
    "layer_norm_like": "batched reduce_sum prints its shifted axes as np.int64, batched mean keeps "
                       "`div` by the count, and select_n keeps an unbatched scalar predicate",
}


def _xfail_where(differs):
    return [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=differs[c])) if c in differs else c
            for c in CASES]


@pytest.mark.parametrize("case", _xfail_where(GRAD_PRINTING_DIFFERS))
def test_grads_print_as_jax(real_jax, case):
    mf, jf, args, argnums = _case_args(real_jax, case)
    mg, jg = _grads(real_jax, mf, jf, argnums)
    assert _jaxpr_text(meshsim, mg, *args) == _jaxpr_text(real_jax, jg, *args)


@pytest.mark.parametrize("case", _xfail_where(VMAP_PRINTING_DIFFERS))
def test_vmaps_print_as_jax(real_jax, case):
    mf, jf, args, _ = _case_args(real_jax, case)
    mv, jv = _vmaps(real_jax, mf, jf, args)
    assert _jaxpr_text(meshsim, mv, *args) == _jaxpr_text(real_jax, jv, *args)


@pytest.mark.parametrize("xs,ys", [((8, 8), (1, 8)), ((8, 1), (1, 8)), ((0, 1), (1, 8)), ((8, 8), (8,)),
                                   ((8, 8), (4, 8)), ((2, 3), ())])
def test_lax_add_broadcasts_size_one_dims_only(real_jax, xs, ys):
    x, y = _operands([xs, ys])

    def outcome(J):
        try:
            return _jaxpr_text(J, J.lax.add, x, y)
        except TypeError as e:
            return f"TypeError: {e}"
    assert outcome(meshsim) == outcome(real_jax)


def test_explicit_shardings_follow_jax(real_jax):
    def run(J):
        P = J.sharding.PartitionSpec
        mesh = J.make_mesh((4, 2), ("x", "y"), axis_types=(J.sharding.AxisType.Explicit,) * 2)
        out = []
        with J.set_mesh(mesh):
            a = J.device_put(np.arange(64, dtype=np.float32).reshape(8, 8), P("x", "y"))
            b = J.device_put(np.arange(8, dtype=np.float32), P("y"))
            c = J.device_put(np.arange(8, dtype=np.float32).reshape(8, 1), P("x", None))
            r = J.device_put(np.arange(8, dtype=np.float32).reshape(1, 8), P(None, "y"))
            for f, args in [(lambda a, b: a + b, (a, b)), (lambda a, c: a * c, (a, c)),
                            (lambda c, r: c - r, (c, r)), (lambda a, b: a * b, (a, b))]:
                out.append(_jaxpr_text(J, f, *args))
                value = J.jit(f)(*args)
                out.append((str(J.typeof(value)), np.asarray(value).tolist()))
                # Cotangents laid out as their operands: the transposes' reshapes and sums
                # print those shardings.
                grad = J.grad(lambda *a: J.numpy.sum(f(*a)), argnums=(0, 1))
                out.append(_jaxpr_text(J, grad, *args))
                out.extend((str(J.typeof(g)), np.asarray(g).tolist()) for g in J.jit(grad)(*args))
        return out
    assert run(meshsim) == run(real_jax)


def test_broadcast_in_dim_out_sharding_follows_jax(real_jax):
    """lax.broadcast_in_dim(out_sharding=) lays the result out itself (no reshard after), and
    its transpose sums into the operand's sharding."""
    def run(J):
        P = J.sharding.PartitionSpec
        mesh = J.make_mesh((4, 2), ("x", "y"), axis_types=(J.sharding.AxisType.Explicit,) * 2)
        out = []
        with J.set_mesh(mesh):
            b = J.device_put(np.arange(8, dtype=np.float32), P("y"))
            for dims, spec in [((1,), P("x", "y")), ((0,), P(None, "y")), ((0,), P("y", "x"))]:
                def f(b):
                    return J.lax.broadcast_in_dim(b, (8, 8), dims, out_sharding=spec)
                out.append(_jaxpr_text(J, f, b))
                value = J.jit(f)(b)
                out.append((str(J.typeof(value)), np.asarray(value).tolist()))
                grad = J.grad(lambda b: J.numpy.sum(f(b) * np.arange(8, dtype=np.float32)))
                out.append(_jaxpr_text(J, grad, b))
                out.append(np.asarray(J.jit(grad)(b)).tolist())
        return out
    assert run(meshsim) == run(real_jax)

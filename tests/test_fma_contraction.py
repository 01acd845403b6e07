"""Products contracted into fused multiply-adds under jit, as XLA's CPU code computes them
(runtime/xla_rewrites.h): a float32/float64 product read only by an add or sub of its shape is
rounded once with the sum, in jitted programs and not eagerly. Bit for bit with JAX over random
programs, shapes, dtypes and the sharing patterns that decide it."""
import ml_dtypes
import numpy as np
import pytest

import meshsim
import meshsim.numpy as jnp

RNG = np.random.default_rng(0)

SHAPES = [(), (1,), (7,), (13,), (3, 5), (2, 3, 4), (1000,), (37, 129)]


def bits(x):
    x = np.asarray(x)
    return x.view(f"u{x.dtype.itemsize}")


def assert_same_bits(ours, theirs):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    both_nan = np.isnan(ours.astype(np.float64)) & np.isnan(theirs.astype(np.float64))
    differ = (bits(ours) != bits(theirs)) & ~both_nan
    assert not differ.any(), f"{int(differ.sum())} of {differ.size} differ: {ours[differ][:4]} vs {theirs[differ][:4]}"


def differing(x, y):
    return int((bits(x) != bits(y)).sum())


# Random programs: each step applies an op to values made so far (a value read by several
# steps is a product with several uses), the program returns its last value. No constants and
# no negations: XLA's simplifier regroups those ((x*c)*(y*d) as (x*y)*(c*d), (x+c)+d as
# x+(c+d), x*(-y) as -(x*y)), and computes exp(a)*exp(b) as exp(a+b); none of that is
# modelled, so neither is exp here. The patterns below have constants.
UNARY = {"tanh": lambda m, x: m.tanh(x), "sin": lambda m, x: m.sin(x), "square": lambda m, x: x**2}
BINARY = {"mul": lambda m, x, y: x * y, "add": lambda m, x, y: x + y, "sub": lambda m, x, y: x - y,
          "max": lambda m, x, y: m.maximum(x, y)}
WEIGHTS = {"sin": 1, "tanh": 1, "square": 1, "mul": 5, "add": 4, "sub": 3, "max": 1}


def random_program(rng, num_inputs, length):
    names = list(WEIGHTS)
    p = np.array([WEIGHTS[n] for n in names], float)
    steps = []
    for _ in range(length):
        name = names[rng.choice(len(names), p=p / p.sum())]
        count = num_inputs + len(steps)
        # Recent values more often, so chains form; older ones give shared products.
        pick = lambda: int(count - 1 - min(rng.geometric(0.45) - 1, count - 1))  # noqa: E731
        steps.append((name, pick(), pick()))
    return steps


def evaluate(m, steps, inputs):
    values = list(inputs)
    for name, i, j in steps:
        values.append(UNARY[name](m, values[i]) if name in UNARY else BINARY[name](m, values[i], values[j]))
    return values[-1]


@pytest.mark.parametrize("case", range(40))
def test_random_programs_match_jax(case, real_jax):
    shape = SHAPES[case % len(SHAPES)]
    steps = random_program(RNG, 3, int(RNG.integers(2, 14)))
    inputs = [RNG.standard_normal(shape).astype(np.float32) for _ in range(3)]
    ours = meshsim.jit(lambda *xs: evaluate(jnp, steps, xs))(*inputs)
    theirs = real_jax.jit(lambda *xs: evaluate(real_jax.numpy, steps, xs))(*inputs)
    assert_same_bits(ours, theirs)


def test_random_programs_float64_match_jax(x64_with_jax, real_jax):
    for _ in range(12):
        shape = SHAPES[int(RNG.integers(len(SHAPES)))]
        steps = random_program(RNG, 3, int(RNG.integers(2, 12)))
        inputs = [RNG.standard_normal(shape) for _ in range(3)]
        ours = meshsim.jit(lambda *xs: evaluate(jnp, steps, xs))(*inputs)
        theirs = real_jax.jit(lambda *xs: evaluate(real_jax.numpy, steps, xs))(*inputs)
        assert_same_bits(ours, theirs)


# Each pattern with whether XLA contracts it: the rule's cases one by one.
PATTERNS = {
    "a*b+c": (lambda m, a, b, c, d: a * b + c, True),
    "c+a*b": (lambda m, a, b, c, d: c + a * b, True),
    "a*b-c": (lambda m, a, b, c, d: a * b - c, True),
    "c-a*b": (lambda m, a, b, c, d: c - a * b, True),
    "a*b+c*d": (lambda m, a, b, c, d: a * b + c * d, True),  # the first product
    "a*b-c*d": (lambda m, a, b, c, d: a * b - c * d, True),
    "a*1.5+c": (lambda m, a, b, c, d: a * 1.5 + c, True),
    "a*b+0.25": (lambda m, a, b, c, d: a * b + 0.25, True),
    "a*b*c+d": (lambda m, a, b, c, d: a * b * c + d, True),
    "(a*b+c)*d+a": (lambda m, a, b, c, d: (a * b + c) * d + a, True),
    "a**2+b": (lambda m, a, b, c, d: a**2 + b, True),
    "shared product": (lambda m, a, b, c, d: (lambda p: (p + c) * (p + d))(a * b), False),
    "CSE'd product": (lambda m, a, b, c, d: (a * b + c) * (b * a + d), False),
    "other product shared": (lambda m, a, b, c, d: (lambda p: (p + c * d) * p)(a * b), True),
    "product and sum returned": (lambda m, a, b, c, d: (lambda p: (p, p + c))(a * b), False),
    "dead reader": (lambda m, a, b, c, d: (lambda p: (p * c, p + d)[1])(a * b), True),
    "through a transpose": (lambda m, a, b, c, d: (a * b).T + c.T, True),
    "scalar product broadcast": (lambda m, a, b, c, d: c + a[0, 0] * b[0, 0], False),
}


@pytest.mark.parametrize("name", list(PATTERNS))
def test_patterns_match_jax(name, real_jax):
    f, contracts = PATTERNS[name]
    shape = [(64, 3), (5, 7), (300, 33)][int(RNG.integers(3))]
    a, b, c, d = (RNG.standard_normal(shape).astype(np.float32) for _ in range(4))
    ours = meshsim.tree.leaves(meshsim.jit(lambda *xs: f(jnp, *xs))(a, b, c, d))
    theirs = real_jax.tree.leaves(real_jax.jit(lambda *xs: f(real_jax.numpy, *xs))(a, b, c, d))
    for x, y in zip(ours, theirs):
        assert_same_bits(x, y)
    # The pattern decides: the eager result (nothing contracted) differs exactly when XLA contracts.
    eager = meshsim.tree.leaves(f(jnp, *(jnp.asarray(x) for x in (a, b, c, d))))
    assert any(differing(x, y) for x, y in zip(eager, ours)) == contracts


def test_eager_ops_are_not_contracted(real_jax):
    """Each eager op is a computation of its own, in JAX as here."""
    a, b, c = (RNG.standard_normal(5000).astype(np.float32) for _ in range(3))
    ours = jnp.asarray(a) * b + c
    assert_same_bits(ours, a * b + c)
    assert_same_bits(ours, real_jax.numpy.asarray(a) * b + c)


@pytest.mark.parametrize("dtypes", [("bfloat16", "float32", "float32"), ("bfloat16",) * 3, ("float16",) * 3,
                                    ("bfloat16", "bfloat16", "float32")])
def test_narrow_floats(dtypes, real_jax):
    """A bfloat16 operand promoted to float32 is contracted with it; a product of narrow
    floats is rounded to the format before the sum reads it, so it is not."""
    a, b, c = (RNG.standard_normal(20000).astype(getattr(ml_dtypes, t, None) or np.dtype(t)) for t in dtypes)
    f = lambda m, a, b, c: a * b + c  # noqa: E731
    ours = meshsim.jit(lambda *xs: f(jnp, *xs))(a, b, c)
    theirs = real_jax.jit(lambda *xs: f(real_jax.numpy, *xs))(a, b, c)
    assert_same_bits(ours, theirs)


def test_bfloat16_product_read_in_float32(real_jax):
    """(bf16 * bf16).astype(float32) + c: XLA reads the float32 product and contracts it."""
    a, b = (RNG.standard_normal(20000).astype(ml_dtypes.bfloat16) for _ in range(2))
    c = RNG.standard_normal(20000).astype(np.float32)
    f = lambda m, a, b, c: (m.exp(a) * b).astype(np.float32) + c  # noqa: E731
    ours = meshsim.jit(lambda *xs: f(jnp, *xs))(a, b, c)
    theirs = real_jax.jit(lambda *xs: f(real_jax.numpy, *xs))(a, b, c)
    assert_same_bits(ours, theirs)


def with_subnormals(rng, shape):
    """Normal values with about a third scaled to float32 subnormals and a third to values whose
    products are subnormal."""
    x = rng.standard_normal(shape).astype(np.float32)
    scale = rng.choice(np.array([1.0, 1e-39, 1e-20], np.float32), size=shape)
    return (x * scale).astype(np.float32)


@pytest.mark.parametrize("case", range(8))
def test_long_runs_with_subnormals_match_jax(case, real_jax):
    """Fused runs (multiply-adds among their steps) long enough to be computed by several
    threads: each thread flushes subnormal operands and results as the caller does and as XLA
    does. Some operands are transposed views, read tile by tile."""
    shape = [(70001,), (129, 300), (3, 9000), (20000,)][case % 4]
    steps = random_program(RNG, 3, int(RNG.integers(4, 14)))
    inputs = [with_subnormals(RNG, shape) for _ in range(3)]
    if case >= 4 and len(shape) == 2:
        inputs = [x.T.copy() for x in inputs]
        f = lambda m: lambda *xs: evaluate(m, steps, [x.T for x in xs])  # noqa: E731
    else:
        f = lambda m: lambda *xs: evaluate(m, steps, xs)  # noqa: E731
    ours = meshsim.jit(f(jnp))(*inputs)
    theirs = real_jax.jit(f(real_jax.numpy))(*inputs)
    assert_same_bits(ours, theirs)

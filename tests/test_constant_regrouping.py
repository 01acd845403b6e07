"""Products and sums with constants regrouped under jit as XLA's algebraic simplifier regroups
them (runtime/xla_rewrites.cpp, Regrouping): (x * c1) * c2 is computed as x * (c1 * c2),
(x * c) * s as x * (s * c) for a broadcast s, (x + c1) + c2 as x + (c1 + c2), a quotient by a
constant or a broadcast as a product by its reciprocal (which a sum reading it contracts).
Random programs of such steps in float16, bfloat16, float32 and float64, bit for bit with
JAX's jitted programs; eagerly (one op at a time, as XLA compiles them) nothing is regrouped.

Not modelled, so not drawn: a broadcast argument read by several steps (XLA then divides by
it, or regroups (x / s) / s as x / (s * s)), a constant divided by a value (c / y; XLA
computes c1 / (c2 / y) as (c1 * y) * (1 / c2)), and steps with a broadcast vector v, drawn by
the tests of their own below: XLA's code contracts a product by a broadcast vector into a sum
with a constant for some elements and not others."""
import ml_dtypes
import numpy as np
import pytest

import meshsim
import meshsim.numpy as jnp

# step name -> y's next value, given the numpy module, y, the program's input x, a scalar
# argument s, a vector argument v (y's last dimension), a constant c and a constant array k
STEPS = {
    "mul_c": lambda m, y, x, s, v, c, k: y * c,
    "c_mul": lambda m, y, x, s, v, c, k: c * y,
    "div_c": lambda m, y, x, s, v, c, k: y / c,
    "add_c": lambda m, y, x, s, v, c, k: y + c,
    "c_add": lambda m, y, x, s, v, c, k: c + y,
    "sub_c": lambda m, y, x, s, v, c, k: y - c,
    "c_sub": lambda m, y, x, s, v, c, k: c - y,
    "mul_k": lambda m, y, x, s, v, c, k: y * k,
    "add_k": lambda m, y, x, s, v, c, k: y + k,
    "mul_s": lambda m, y, x, s, v, c, k: y * s,
    "s_mul": lambda m, y, x, s, v, c, k: s * y,
    "div_s": lambda m, y, x, s, v, c, k: y / s,
    "add_s": lambda m, y, x, s, v, c, k: y + s,
    "mul_x": lambda m, y, x, s, v, c, k: y * x,
    "add_x": lambda m, y, x, s, v, c, k: y + x,
    "sin": lambda m, y, x, s, v, c, k: m.sin(y),
}
DTYPES = ["float16", "bfloat16", "float32", "float64"]


def random_program(rng, length):
    """Steps with their constants: a Python float (weak-typed, as samplers write them) or,
    for *_k steps, an array constant of y's shape drawn at trace time from the seed. The
    broadcast argument s is read by one step at most."""
    names, steps = list(STEPS), []
    for _ in range(length):
        name = names[rng.integers(len(names))]
        if "s" in name.split("_"):
            names = [n for n in names if "s" not in n.split("_")]
        steps.append((name, float(rng.uniform(0.2, 3.0) * rng.choice([-1, 1])), int(rng.integers(2 ** 31))))
    return steps


def evaluate(m, steps, x, s, v):
    y = x
    for name, c, seed in steps:
        k = np.random.default_rng(seed).uniform(0.5, 2.0, x.shape).astype(x.dtype)
        y = STEPS[name](m, y, x, s, v, c, k)
    return y


def bits(x):
    x = np.asarray(x)
    return x.view(f"u{x.dtype.itemsize}")


def assert_same_bits(ours, theirs, what):
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    both_nan = np.isnan(ours.astype(np.float64)) & np.isnan(theirs.astype(np.float64))
    differ = (bits(ours) != bits(theirs)) & ~both_nan
    assert not differ.any(), (f"{what}: {int(differ.sum())} of {differ.size} differ: "
                              f"{ours[differ][:4]} vs {theirs[differ][:4]}")


def run_case(real_jax, case, dtype, jitted):
    rng = np.random.default_rng(1000 * DTYPES.index(dtype) + case)
    shape = [(), (5,), (3, 4), (2, 3, 7)][case % 4]
    steps = random_program(rng, int(rng.integers(2, 9)))
    np_dtype = np.dtype(getattr(ml_dtypes, dtype, dtype))
    x = rng.uniform(0.5, 2.0, shape).astype(np_dtype)
    s = np.asarray(rng.uniform(0.5, 2.0), np_dtype)
    v = rng.uniform(0.5, 2.0, shape[-1:]).astype(np_dtype)

    def program(lib):
        fun = lambda x, s, v: evaluate(lib.numpy, steps, x, s, v)  # noqa: E731
        return lib.jit(fun) if jitted else fun

    assert_same_bits(program(meshsim)(x, s, v), program(real_jax)(x, s, v),
                     " ".join(name for name, _, _ in steps))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("case", range(24))
def test_jitted_programs_match_jax(real_jax, dtype, case):
    run_case(real_jax, case, dtype, jitted=True)


@pytest.mark.parametrize("case", range(24))
def test_jitted_float64_programs_match_jax(real_jax, x64_with_jax, case):
    run_case(real_jax, case, "float64", jitted=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eager_programs_are_not_regrouped(real_jax, x64_with_jax, dtype):
    for case in range(6):
        run_case(real_jax, case, dtype, jitted=False)


def test_constants_fold_into_one_product(real_jax, x64_with_jax):
    """(x * 1.1) * 0.7 differs from x * (1.1 * 0.7) in the last bit for some x: JAX's jitted
    result is the second, meshsim's too; eagerly both compute the first."""
    x = np.random.default_rng(7).uniform(0.5, 2.0, 4096)
    grouped = x * (1.1 * 0.7)
    assert (bits(grouped) != bits((x * 1.1) * 0.7)).any()
    for lib in (meshsim, real_jax):
        np.testing.assert_array_equal(bits(lib.jit(lambda x: (x * 1.1) * 0.7)(x)), bits(grouped))
        np.testing.assert_array_equal(bits((lib.numpy.asarray(x) * 1.1) * 0.7), bits((x * 1.1) * 0.7))


@pytest.mark.parametrize("dtype", DTYPES)
def test_product_by_broadcast_vector_takes_the_constant(real_jax, x64_with_jax, dtype):
    """(x * c) * broadcast(v) is x * broadcast(v * c), and x / broadcast(v) is
    x * broadcast(1 / v), in every dtype but bfloat16."""
    rng = np.random.default_rng(DTYPES.index(dtype))
    np_dtype = np.dtype(getattr(ml_dtypes, dtype, dtype))
    x = rng.uniform(0.5, 2.0, (64, 7)).astype(np_dtype)
    v = rng.uniform(0.5, 2.0, 7).astype(np_dtype)
    for fun in (lambda x, v: (x * 1.3) * v, lambda x, v: v * (0.7 * x), lambda x, v: (x / 1.7) / v,
                lambda x, v: (x * 2.9) / v):
        assert_same_bits(meshsim.jit(fun)(x, v), real_jax.jit(fun)(x, v), dtype)


def in_control_flow(lib, kind, fun):
    """`fun` run as the body of a loop or branch: its array constants are values it closes over."""
    if kind == "scan":
        return lambda x, s, v: lib.lax.scan(lambda c, _: (fun(c, s, v), None), x, None, length=1)[0]
    if kind == "fori_loop":
        return lambda x, s, v: lib.lax.fori_loop(0, 1, lambda i, c: fun(c, s, v), x)
    return lambda x, s, v: lib.lax.cond(True, lambda c: fun(c, s, v), lambda c: c, x)


@pytest.mark.parametrize("kind", ["scan", "fori_loop", "cond"])
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_arrays_closed_over_by_control_flow(real_jax, kind, jitted):
    """JAX passes the arrays a loop or branch closes over as its operands: called eagerly, XLA
    compiles the loop with them as parameters and regroups nothing with them; under jit they
    are the program's constants and XLA regroups with them as at top level. Scalars are
    literals either way."""
    for case in range(8):
        rng = np.random.default_rng(7000 + case)
        dtype = ["float32", "float16"][case % 2]
        shape = [(5,), (3, 4)][case // 2 % 2]
        steps = random_program(rng, int(rng.integers(2, 7)))
        x = rng.uniform(0.5, 2.0, shape).astype(dtype)
        s = np.asarray(rng.uniform(0.5, 2.0), dtype)
        v = rng.uniform(0.5, 2.0, shape[-1:]).astype(dtype)
        k = rng.uniform(0.5, 2.0, shape).astype(dtype)
        results = []
        for lib in (meshsim, real_jax):
            fun = in_control_flow(lib, kind, lambda y, s, v: evaluate(lib.numpy, steps, y / k, s, v))
            results.append((lib.jit(fun) if jitted else fun)(x, s, v))
        assert_same_bits(*results, f"{kind}: " + " ".join(name for name, _, _ in steps))

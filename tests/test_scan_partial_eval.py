"""Partial evaluation of loops, conds and calls whose operands are partly known, against JAX
0.10.2: a scan splits into its known part and the rest (a carry stays known while its initial
value is known and the body gives it back from known values alone), so `jax.interpreters.
partial_eval.trace_to_jaxpr_nounits` finds the same known results, with the same values, and
the staged program run on the residuals and the unknown inputs gives the rest of what the whole
function gives. Random scan bodies: mixes of known and unknown constants, carries and xs,
reverse, lengths, unroll, and a scan nested in the body; then nested jits and checkpointed
regions, while loops and conds (switches) with known and unknown indices."""
from importlib import import_module

import numpy as np
import pytest

import meshsim


def _spec(rng):
    """A random scan: which operands there are and are known, and what each result reads."""
    num_consts, num_carry, num_xs = (int(rng.integers(0, 3)), int(rng.integers(1, 4)),
                                     int(rng.integers(0, 3)))
    num_in = num_consts + num_carry + num_xs
    num_ys = int(rng.integers(0, 3))
    reads = [sorted(rng.choice(num_in, size=int(rng.integers(1, min(num_in, 3) + 1)), replace=False).tolist())
             for _ in range(num_carry + num_ys)]
    return dict(num_consts=num_consts, num_carry=num_carry, num_xs=num_xs, num_ys=num_ys, reads=reads,
                known=[bool(k) for k in rng.integers(0, 2, size=num_in)],
                coefs=rng.uniform(0.2, 0.9, size=(num_carry + num_ys, num_in)).astype(np.float32),
                width=int(rng.integers(1, 4)), length=int(rng.integers(1, 5)),
                reverse=bool(rng.integers(0, 2)), unroll=[1, 2, 3, True][int(rng.integers(0, 4))],
                nested=bool(rng.integers(0, 2)) and num_ys > 0)


def _function(lib, spec):
    jnp, lax = lib.numpy, lib.lax
    nc, ncar = spec["num_consts"], spec["num_carry"]

    def combine(values, j):
        return sum(spec["coefs"][j, i] * values[i] for i in spec["reads"][j])

    def body(consts, carry, x):
        values = [*consts, *carry, *(x or ())]
        new_carry = tuple(jnp.tanh(combine(values, j)) for j in range(ncar))
        ys = [jnp.sin(combine(values, ncar + k)) for k in range(spec["num_ys"])]
        if spec["nested"]:
            # The first y is a running sum of its reads over a loop of its own.
            def inner(total, step):
                return total * 0.5 + step, total
            total, _ = lax.scan(inner, jnp.zeros_like(ys[0]), jnp.stack([ys[0], ys[0] * 2.0]))
            ys[0] = total
        return new_carry, tuple(ys)

    def f(*args):
        consts, carry, xs = args[:nc], args[nc:nc + ncar], args[nc + ncar:]
        out_carry, ys = lax.scan(lambda c, x: body(consts, c, x), tuple(carry), tuple(xs) or None,
                                 length=spec["length"], reverse=spec["reverse"], unroll=spec["unroll"])
        return (*out_carry, *ys)

    return f


def _inputs(rng, spec):
    w, n = spec["width"], spec["length"]
    shapes = [(w,)] * (spec["num_consts"] + spec["num_carry"]) + [(n, w)] * spec["num_xs"]
    return [rng.uniform(-1, 1, size=s).astype(np.float32) for s in shapes]


def _partial_eval(lib, spec, args):
    return _partial_eval_of(lib, _function(lib, spec), spec["known"], args)


def _partial_eval_of(lib, f, known_in, args):
    """(known flags, known values, unknown results of the staged program, the whole's results)."""
    # Under meshsim these are what `python -m meshsim` gives `jax.interpreters.partial_eval`,
    # `jax.extend.linear_util` and `jax.api_util`.
    package = "meshsim._src.jax_internals_compat" if lib is meshsim else "jax"
    pe = import_module(package + ".interpreters.partial_eval")
    lu = import_module(package + ".extend.linear_util")
    api_util = import_module(package + ".api_util")
    wrapped = lu.wrap_init(f, debug_info=api_util.debug_info("f", f, tuple(args), {}))
    pvals = [pe.PartialVal.known(a) if k else
             pe.PartialVal.unknown(lib.core.ShapedArray(a.shape, a.dtype))
             for a, k in zip(args, known_in)]
    jaxpr, out_pvals, residuals = pe.trace_to_jaxpr_nounits(wrapped, pvals)
    known = [pv.is_known() for pv in out_pvals]
    values = [np.asarray(pv.get_known()) for pv in out_pvals if pv.is_known()]
    unknown_in = [a for a, k in zip(args, known_in) if not k]
    if lib is meshsim:  # meshsim's staged program takes the residuals as its leading inputs
        staged = meshsim._core.eval_program(jaxpr, [meshsim.numpy.asarray(a) for a in [*residuals, *unknown_in]])
    else:
        staged = lib.core.eval_jaxpr(jaxpr, residuals, *unknown_in)
    whole = lib.jit(f)(*args)
    return known, values, [np.asarray(s) for s in staged], [np.asarray(w) for w in whole]


@pytest.mark.parametrize("seed", range(40))
def test_scan_partial_eval_matches_jax(real_jax, seed):
    rng = np.random.default_rng(seed)
    spec = _spec(rng)
    args = _inputs(rng, spec)
    ours = _partial_eval(meshsim, spec, args)
    theirs = _partial_eval(real_jax, spec, args)
    assert ours[0] == theirs[0], spec
    for got, expected in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(got, expected, rtol=2e-6, atol=2e-6)
    known, staged, whole = ours[0], ours[2], ours[3]
    assert len(staged) == known.count(False)
    for got, expected in zip(staged, [w for w, k in zip(whole, known) if not k]):
        np.testing.assert_allclose(got, expected, rtol=2e-6, atol=2e-6)
    for got, expected in zip(ours[1], [w for w, k in zip(whole, known) if k]):
        np.testing.assert_allclose(got, expected, rtol=2e-6, atol=2e-6)


def test_known_carry_through_unknown_loop_is_known(real_jax):
    """The spec that flax's nn.scan meets: a loop whose carry is unknown yields, as ys, values
    made from known xs alone (the layers' parameters from the broadcast key); those are known."""
    for lib in (meshsim, real_jax):
        spec = dict(num_consts=1, num_carry=1, num_xs=1, num_ys=1, reads=[[0, 1, 2], [2]],
                    known=[True, False, True], coefs=np.full((2, 3), 0.5, np.float32), width=2,
                    length=3, reverse=False, unroll=1, nested=True)
        args = _inputs(np.random.default_rng(0), spec)
        known, values, _, whole = _partial_eval(lib, spec, args)
        assert known == [False, True]
        np.testing.assert_allclose(values[0], whole[1], rtol=1e-6)


@pytest.mark.parametrize("seed", range(8))
def test_call_partial_eval_matches_jax(real_jax, seed):
    """A nested jit or a checkpointed region with some inputs known splits too: its results made
    from known inputs alone are known, as JAX's jit and remat rules make them."""
    rng = np.random.default_rng(100 + seed)
    wrapper = ["jit", "checkpoint"][seed % 2]
    reads = [sorted(rng.choice(3, size=int(rng.integers(1, 3)), replace=False).tolist()) for _ in range(3)]
    known = [bool(k) for k in rng.permutation([True, False, bool(rng.integers(0, 2))])]
    width = int(rng.integers(1, 4))
    args = [rng.uniform(-1, 1, size=(width,)).astype(np.float32) for _ in range(3)]
    results = []
    for lib in (meshsim, real_jax):
        def inner(*xs):
            return tuple(lib.numpy.cos(sum(xs[i] * (j + 1.5) for i in reads[j])) for j in range(3))

        call = lib.jit(inner) if wrapper == "jit" else lib.checkpoint(inner)
        results.append(_partial_eval_of(lib, call, known, args))
    _assert_same_split(*results)


@pytest.mark.parametrize("seed", range(10))
def test_while_partial_eval_matches_jax(real_jax, seed):
    """A while loop's carries that stay known, when its predicate reads only known values, are
    known, as in JAX; an unknown value in the predicate leaves every carry unknown."""
    rng = np.random.default_rng(200 + seed)
    num_carry = int(rng.integers(1, 4))
    # Operand 0 is a constant of the body, 1 the counter, then the float carries.
    reads = [sorted(rng.choice(num_carry + 1, size=int(rng.integers(1, 3)), replace=False).tolist())
             for _ in range(num_carry)]
    known = [bool(k) for k in rng.integers(0, 2, size=num_carry + 2)]
    known[int(rng.integers(0, num_carry + 2))] = False
    steps = int(rng.integers(0, 4))
    width = int(rng.integers(1, 4))
    args = [rng.uniform(-1, 1, size=(width,)).astype(np.float32), np.int32(0),
            *[rng.uniform(-1, 1, size=(width,)).astype(np.float32) for _ in range(num_carry)]]
    results = []
    for lib in (meshsim, real_jax):
        def f(w, i, *carry):
            def body(state):
                i, *c = state
                values = [w, *c]
                return (i + 1, *[lib.numpy.tanh(sum(values[r] * (j + 0.5) for r in reads[j]))
                                 for j in range(num_carry)])
            return lib.lax.while_loop(lambda state: state[0] < steps, body, (i, *carry))

        results.append(_partial_eval_of(lib, f, known, args))
    _assert_same_split(*results)


@pytest.mark.parametrize("seed", range(10))
def test_cond_partial_eval_matches_jax(real_jax, seed):
    """A cond (or switch) with a known index: each output that every branch makes from known
    operands is known, as in JAX; an unknown index leaves every output unknown."""
    rng = np.random.default_rng(300 + seed)
    num_branches, num_ops, num_out = int(rng.integers(2, 4)), int(rng.integers(2, 4)), int(rng.integers(1, 4))
    ops_known = [bool(k) for k in rng.permutation([True, False, *rng.integers(0, 2, size=num_ops - 2)])]
    # Each output reads, in every branch, from the known operands or from any.
    pools = [[i for i in range(num_ops) if ops_known[i] or rng.integers(0, 2)] for _ in range(num_out)]
    reads = [[sorted(rng.choice(pool, size=int(rng.integers(1, min(len(pool), 2) + 1)), replace=False).tolist())
              for pool in pools] for _ in range(num_branches)]
    known = [seed % 5 != 4, *ops_known]
    width = int(rng.integers(1, 4))
    args = [np.int32(rng.integers(0, num_branches)),
            *[rng.uniform(-1, 1, size=(width,)).astype(np.float32) for _ in range(num_ops)]]
    results = []
    for lib in (meshsim, real_jax):
        def branch(b):
            return lambda *ops: tuple(lib.numpy.sin(sum(ops[r] * (b + j + 1.0) for r in reads[b][j]))
                                      for j in range(num_out))

        def f(index, *ops):
            return lib.lax.switch(index, [branch(b) for b in range(num_branches)], *ops)

        results.append(_partial_eval_of(lib, f, known, args))
    _assert_same_split(*results)


def _assert_same_split(ours, theirs):
    (ours_known, ours_values, staged, whole), (theirs_known, theirs_values, _, _) = ours, theirs
    assert ours_known == theirs_known
    for got, expected in zip(ours_values, theirs_values):
        np.testing.assert_allclose(got, expected, rtol=2e-6, atol=2e-6)
    for got, expected in zip(staged, [w for w, k in zip(whole, ours_known) if not k]):
        np.testing.assert_allclose(got, expected, rtol=2e-6, atol=2e-6)

"""Differential fuzzing: random shard_map programs (meshes of up to 3 axes,
input specs, chains of local ops and collectives over random axis subsets,
jitted or not, values or gradients; tests/fuzz/programs.py) run on real JAX
and on meshsim in subprocesses, with the same outcome expected: equal values
up to float32 rounding, or the same exception type. The seeded subset here is
fixed; tests/fuzz/differential.py --count 10000 runs the long job. Mismatches
it found are kept below as regression programs."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fuzz"))
import differential  # noqa: E402

# Found by the fuzzer: a psum or psum_scatter over axes some of which the
# operand varies over and some not (meshsim summed; JAX refuses it).
REGRESSIONS = [
    """mesh = Mesh(np.array(jax.devices()[:8]).reshape((2, 1, 4)), ('a', 'b', 'c'))
def body(v):
    v = jnp.tanh(v)
    v = lax.pmean(v, ('a', 'b'))
    return v
f = shard_map(body, mesh=mesh, in_specs=P(('b', 'c'), None), out_specs=P(('a', 'b', 'c')), check_vma=True)
x = jnp.asarray(np.random.default_rng(1).uniform(-1, 1, (16, 8)).astype(np.float32))
out = jax.jit(f)(x)
""",
    """mesh = Mesh(np.array(jax.devices()[:8]).reshape((4, 2)), ('a', 'b'))
def body(v):
    v = lax.psum_scatter(v, ('a', 'b'), scatter_dimension=0, tiled=True)
    return v
f = shard_map(body, mesh=mesh, in_specs=P('b', None), out_specs=P(('a', 'b')), check_vma=True)
x = jnp.asarray(np.random.default_rng(2).uniform(-1, 1, (16, 8)).astype(np.float32))
out = f(x)
""",
]


def _check(programs):
    jr, bad = differential.check(programs, timeout=1800)
    assert not bad, "\n".join(f"--- {d}\n{p}" for p, d in bad)
    return jr


def test_fuzzer_regressions():
    outcomes = _check(REGRESSIONS)
    assert all("error" in o for o in outcomes)  # JAX refuses them; so must meshsim


@pytest.mark.parametrize("seed", [0])
def test_random_shard_map_programs_match_jax(seed):
    outcomes = _check(differential.programs.programs(seed * 1_000_003, 200))
    assert sum("ok" in o for o in outcomes) >= 100  # most programs are valid ones

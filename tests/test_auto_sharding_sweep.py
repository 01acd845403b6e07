"""A sweep of jitted programs over meshes whose axes are all Auto: meshsim must choose the
result shardings XLA chooses and run the same multiset of collectives (kind, mesh axes,
bytes one device receives) as the program XLA compiles, read from its HLO text; values are
JAX's. The differences that remain are strict xfails, listed with their reasons in
docs/auto_sharding.md."""
import numpy as np
import pytest

import jax
import meshsim
from auto_oracle import Lib, assert_matches_xla, normalized, run_jax, run_meshsim

def _mlp_loss(m, w1, w2, x):
    h = m.jax.nn.relu(x @ w1)
    return m.jnp.mean((h @ w2) ** 2)


def _scan_cumsum(m, x):
    def body(c, row):
        c = c + row
        return c, c * 2
    return m.jax.lax.scan(body, m.jnp.zeros(x.shape[1:], x.dtype), x)


def _fori_decay(m, x):
    return m.jax.lax.fori_loop(0, 3, lambda i, c: m.jnp.sin(c) * 0.5 + c, x)


def _while_count(m, x):
    def body(carry):
        i, c = carry
        return i + 1, c * 1.5 - m.jnp.cos(c)
    return m.jax.lax.while_loop(lambda carry: carry[0] < 4, body, (0, x))[1]


def _cond(m, x, p):
    return m.jax.lax.cond(p > 0, lambda a: m.jnp.sin(a) * 2.0, lambda a: a - 1.0, x)


def _switch(m, x, w, p):
    i = (p > 0).astype(m.jnp.int32)
    return m.jax.lax.switch(i, [lambda a, b: a @ b, lambda a, b: (a * 2.0) @ b], x, w)


_ROWS = np.array([3, 1, 7, 0, 12, 5], np.int32)


# name -> (function of (lib, *arrays), argument shapes)
PROGRAMS = {
    "sin": (lambda m, x: m.jnp.sin(x), [(16, 8)]),
    "chain": (lambda m, x: m.jnp.exp(m.jnp.sin(x) * 2.0 + 1.0) - x, [(16, 8)]),
    "add": (lambda m, x, y: x + y, [(16, 8), (16, 8)]),
    "bias": (lambda m, x, b: x * 3.0 + b, [(16, 8), (8,)]),
    "matmul": (lambda m, x, w: x @ w, [(16, 8), (8, 32)]),
    "matmul_chain": (lambda m, x, w, v: m.jnp.tanh(x @ w) @ v, [(16, 8), (8, 32), (32, 8)]),
    "mlp_fwd": (lambda m, w1, w2, x: _mlp_loss(m, w1, w2, x), [(8, 32), (32, 8), (16, 8)]),
    "mlp_grad": (lambda m, w1, w2, x: m.jax.grad(lambda a, b: _mlp_loss(m, a, b, x), (0, 1))(w1, w2),
                 [(8, 32), (32, 8), (16, 8)]),
    "sum0": (lambda m, x: x.sum(0), [(16, 8)]),
    "sum1": (lambda m, x: x.sum(1), [(16, 8)]),
    "max1": (lambda m, x: x.max(1), [(16, 8)]),
    "reshape_merge": (lambda m, x: m.jnp.sin(x).reshape(128), [(16, 8)]),
    "reshape_split": (lambda m, x: m.jnp.sin(x).reshape(8, 2, 8), [(16, 8)]),
    "transpose": (lambda m, x: m.jnp.cos(x).T, [(16, 8)]),
    "softmax": (lambda m, x: m.jax.nn.softmax(x, -1), [(16, 8)]),
    "layernorm": (lambda m, x: (x - x.mean(-1, keepdims=True)) / m.jnp.sqrt(x.var(-1, keepdims=True) + 1e-5),
                  [(16, 8)]),
    "slice": (lambda m, x: x[:, 2:6] * 2.0, [(16, 8)]),
    "index_row": (lambda m, x: x[3] + 1.0, [(16, 8)]),
    "einsum_batch": (lambda m, a, b: m.jnp.einsum("bij,bjk->bik", a, b), [(8, 4, 8), (8, 8, 4)]),
    "constraint": (lambda m, x: m.jax.lax.with_sharding_constraint(
        m.jnp.sin(x), m.jax.sharding.PartitionSpec(None, m.mesh_axes[-1])) * 2.0, [(16, 8)]),
    "scan": (lambda m, x: _scan_cumsum(m, x), [(8, 16)]),
    "checkpoint": (lambda m, x, w: m.jax.checkpoint(lambda a, b: m.jnp.tanh(a @ b) * 2.0)(x, w),
                   [(16, 8), (8, 32)]),
    "checkpoint_grad": (lambda m, w1, w2, x: m.jax.grad(m.jax.checkpoint(lambda a, b: _mlp_loss(m, a, b, x)),
                                                          (0, 1))(w1, w2), [(8, 32), (32, 8), (16, 8)]),
    "fori_loop": (lambda m, x: _fori_decay(m, x), [(16, 8)]),
    "while_loop": (lambda m, x: _while_count(m, x), [(16, 8)]),
    "cond": (lambda m, x, p: _cond(m, x, p), [(16, 8), ()]),
    "switch_matmul": (lambda m, x, w, p: _switch(m, x, w, p), [(16, 8), (8, 32), ()]),
    "take_rows": (lambda m, x: m.jnp.take(x, m.jnp.asarray(_ROWS), axis=0) * 2.0, [(16, 8)]),
    "gather_cols": (lambda m, x: x[:, m.jnp.asarray(_ROWS[:4] % 8)] + 1.0, [(16, 8)]),
    "at_set": (lambda m, x: x.at[:, 2].set(0.0) * 2.0, [(16, 8)]),
    "at_add_rows": (lambda m, x: x.at[m.jnp.asarray(_ROWS)].add(1.0), [(16, 8)]),
}

# program -> the specs its arguments get, per mesh rank (entries name mesh axes by position)
SPECS = {
    "sin": [[(0,)], [(0, 1)], [((0, 1), 2)]],
    "chain": [[(None, 0)], [(1, 0)], [(0, (1, 2))]],
    "add": [[(0,), (None, 0)], [(0, 1), (0,)], [(0, 1), (2,)]],
    "bias": [[(0,), ()], [(0,), (1,)], [((0, 1),), (2,)]],
    "matmul": [[(0,), ()], [(0,), (None, 1)], [((0, 1),), (None, 2)]],
    "matmul_chain": [[(0,), (), ()], [(0,), (None, 1), (1,)], [(0,), (1, 2), (2,)]],
    "mlp_fwd": [[(), (), (0,)], [(None, 1), (1,), (0,)], [(None, 2), (2,), ((0, 1),)]],
    "mlp_grad": [[(), (), (0,)], [(None, 1), (1,), (0,)], [(None, 2), (2,), ((0, 1),)]],
    "sum0": [[(0,)], [(0, 1)], [(0, (1, 2))]],
    "sum1": [[(0,)], [(0, 1)], [((0, 1), 2)]],
    "max1": [[(None, 0)], [(1, 0)], [(0, 2)]],
    "reshape_merge": [[(0,)], [(0,)], [((0, 1),)]],
    "reshape_split": [[(0,)], [(0, 1)], [(0, 2)]],
    "transpose": [[(0,)], [(0, 1)], [(1, (0, 2))]],
    "softmax": [[(0,)], [(0, 1)], [((0, 1), 2)]],
    "layernorm": [[(0,)], [(0, 1)], [((0, 2),)]],
    "slice": [[(0,)], [(0, 1)], [(1, 0)]],
    "index_row": [[(None, 0)], [(None, 1)], [(None, (0, 1))]],
    "einsum_batch": [[(0,), (0,)], [(0, 1), (0,)], [(0, None, 1), (0, 1)]],
    "constraint": [[(0,)], [(0,)], [((0, 1),)]],
    "scan": [[(None, 0)], [(None, 1)], [(None, (1, 2))]],
    "checkpoint": [[(0,), ()], [(0,), (None, 1)], [((0, 1),), (None, 2)]],
    "checkpoint_grad": [[(), (), (0,)], [(None, 1), (1,), (0,)], [(None, 2), (2,), ((0, 1),)]],
    "fori_loop": [[(0,)], [(0, 1)], [((0, 1), 2)]],
    "while_loop": [[(None, 0)], [(1, 0)], [(0, (1, 2))]],
    "cond": [[(0,), ()], [(0, 1), ()], [((0, 1), 2), ()]],
    "switch_matmul": [[(0,), (), ()], [(0,), (None, 1), ()], [((0, 1),), (None, 2), ()]],
    "take_rows": [[(None, 0)], [(None, 1)], [(None, (1, 2))]],
    "gather_cols": [[(0,)], [(0,)], [((0, 1),)]],
    "at_set": [[(0,)], [(0, 1)], [((0, 1), 2)]],
    "at_add_rows": [[(None, 0)], [(None, 1)], [(None, (0, 2))]],
}

CASES = [(name, rank, i) for name in PROGRAMS for rank in (1, 2, 3)
         for i in range(len(SPECS[name][rank - 1]) and 1)]

# Differences from XLA that remain (docs/auto_sharding.md says why).
KNOWN: dict = {}


def _run(runner, mod, name, rank):
    lib = Lib(mod, rank)
    fun, shapes = PROGRAMS[name]
    args = lib.args(shapes, SPECS[name][rank - 1])
    with mod.set_mesh(lib.mesh):
        return runner(mod, lambda *a: fun(lib, *a), args)


@pytest.mark.parametrize("name,rank", [(n, r) for n, r, _ in CASES],
                         ids=[f"{n}-{r}axes" for n, r, _ in CASES])
def test_matches_xla(name, rank, request):
    if (name, rank) in KNOWN:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN[(name, rank)]))
    assert_matches_xla(_run(run_jax, jax, name, rank), _run(run_meshsim, meshsim, name, rank),
                       jax.tree.leaves, meshsim.tree.leaves)

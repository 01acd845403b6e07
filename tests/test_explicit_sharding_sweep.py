"""A sweep of jnp/lax op families over random shapes and specs on a (4, 2) Explicit mesh: each
result's type (`jax.typeof`) or error (class and text) must be JAX's, and each value NumPy's
(JAX's own result, computed on replicated copies)."""
import numpy as np
import pytest

import meshsim
from test_explicit_sharding import Lib, outcome

ENTRIES = [None, "dp", "tp", ("dp", "tp")]


def _idx(m):
    return m.jnp.array([1, 0])


# op(m, x): one op family applied to an array x of random shape and spec
OPS = {
    "neg": lambda m, x: -x,
    "exp": lambda m, x: m.jnp.exp(x),
    "add_self": lambda m, x: x + x,
    "add_row": lambda m, x: x + m.jnp.ones(x.shape[-1:]),
    "mul_scalar": lambda m, x: x * 2,
    "where_scalar": lambda m, x: m.jnp.where(x > 0, x, 0.0),
    "where_self": lambda m, x: m.jnp.where(x > 0, x, -x),
    "clip": lambda m, x: m.jnp.clip(x, -1, 1),
    "astype": lambda m, x: x.astype(m.jnp.int32),
    "sum": lambda m, x: x.sum(),
    "sum0": lambda m, x: x.sum(0),
    "sum_keepdims": lambda m, x: x.sum(-1, keepdims=True),
    "sum_where": lambda m, x: m.jnp.sum(x, axis=0, where=x > 0),
    "max_keepdims": lambda m, x: m.jnp.max(x, axis=0, keepdims=True),
    "mean_last": lambda m, x: m.jnp.mean(x, -1),
    "var0": lambda m, x: m.jnp.var(x, 0),
    "argmax0": lambda m, x: m.jnp.argmax(x, 0),
    "argmax_keepdims": lambda m, x: m.jnp.argmax(x, -1, keepdims=True),
    "argmin_flat": lambda m, x: m.jnp.argmin(x),
    "cumsum0": lambda m, x: m.jnp.cumsum(x, 0),
    "cumsum_last": lambda m, x: m.jnp.cumsum(x, -1),
    "cumprod0": lambda m, x: m.jnp.cumprod(x, 0),
    "sort_last": lambda m, x: m.jnp.sort(x),
    "argsort0": lambda m, x: m.jnp.argsort(x, axis=0),
    "top_k": lambda m, x: m.lax.top_k(x, 2)[0],
    "softmax": lambda m, x: m.jax.nn.softmax(x, -1),
    "logsumexp": lambda m, x: m.jax.nn.logsumexp(x, -1),
    "T": lambda m, x: x.T,
    "swapaxes": lambda m, x: m.jnp.swapaxes(x, 0, -1),
    "moveaxis": lambda m, x: m.jnp.moveaxis(x, 0, -1),
    "expand_dims": lambda m, x: m.jnp.expand_dims(x, 0),
    "newaxis_last": lambda m, x: x[..., None],
    "squeeze": lambda m, x: m.jnp.squeeze(x[None], 0),
    "reshape_flat": lambda m, x: x.reshape(-1),
    "concat0": lambda m, x: m.jnp.concatenate([x, x], 0),
    "concat_last": lambda m, x: m.jnp.concatenate([x, x], -1),
    "stack0": lambda m, x: m.jnp.stack([x, x]),
    "stack_last": lambda m, x: m.jnp.stack([x, x], -1),
    "slice_half": lambda m, x: x[: x.shape[0] // 2],
    "slice_last": lambda m, x: x[..., 1:],
    "slice_step": lambda m, x: x[::2],
    "int_index": lambda m, x: x[1],
    "flip": lambda m, x: m.jnp.flip(x, 0),
    "jit_slice_half": lambda m, x: m.jax.jit(lambda v: v[: v.shape[0] // 2])(x),
    "dynamic_slice": lambda m, x: m.lax.dynamic_slice_in_dim(x, 1, 1, 0),
    "dynamic_index": lambda m, x: m.lax.dynamic_index_in_dim(x, m.jnp.int32(1), 0, keepdims=False),
    "take0": lambda m, x: m.jnp.take(x, _idx(m), axis=0),
    "take_last": lambda m, x: m.jnp.take(x, _idx(m), axis=-1),
    "getitem_array": lambda m, x: x[_idx(m)],
    "getitem_last_array": lambda m, x: x[..., _idx(m)],
    "at_set_int": lambda m, x: x.at[0].set(1.0),
    "at_add_array": lambda m, x: x.at[_idx(m)].add(1.0),
    "at_mul_last": lambda m, x: x.at[..., _idx(m)].multiply(2.0),
    "lax_pad0": lambda m, x: m.lax.pad(x, 0.0, [(1, 1, 0)] + [(0, 0, 0)] * (x.ndim - 1)),
    "lax_pad_last": lambda m, x: m.lax.pad(x, 0.0, [(0, 0, 0)] * (x.ndim - 1) + [(0, 2, 0)]),
    "einsum_square": lambda m, x: m.jnp.einsum("...i,...i->...", x, x),
    "einsum_outer": lambda m, x: m.jnp.einsum("...i,...j->...ij", x, x),
    "matmul_gram": lambda m, x: x @ m.jnp.swapaxes(x, -1, -2) if x.ndim >= 2 else x @ x,
    "zeros_like": lambda m, x: m.jnp.zeros_like(x),
    "full_like": lambda m, x: m.jnp.full_like(x, 3.0),
    "tile": lambda m, x: m.jnp.tile(x, 2),
    "repeat0": lambda m, x: m.jnp.repeat(x, 2, axis=0),
    "roll0": lambda m, x: m.jnp.roll(x, 1, 0),
}

# make(m, shape, spec): creation ops and samplers with out_sharding=
MAKE = {
    "zeros": lambda m, shape, spec: m.jnp.zeros(shape, out_sharding=m.P(*spec)),
    "ones": lambda m, shape, spec: m.jnp.ones(shape, out_sharding=m.P(*spec)),
    "full": lambda m, shape, spec: m.jnp.full(shape, 2.0, out_sharding=m.P(*spec)),
    "arange": lambda m, shape, spec: m.jnp.arange(shape[0], out_sharding=m.P(spec[0])),
    "normal": lambda m, shape, spec: m.jax.random.normal(m.jax.random.key(1), shape, out_sharding=m.P(*spec)),
    "uniform": lambda m, shape, spec: m.jax.random.uniform(m.jax.random.key(1), shape, out_sharding=m.P(*spec)),
    "bits": lambda m, shape, spec: m.jax.random.bits(m.jax.random.key(1), shape, out_sharding=m.P(*spec)),
    "randint": lambda m, shape, spec: m.jax.random.randint(m.jax.random.key(1), shape, 0, 5,
                                                           out_sharding=m.P(*spec)),
    "bernoulli": lambda m, shape, spec: m.jax.random.bernoulli(m.jax.random.key(1), 0.5, shape,
                                                               out_sharding=m.P(*spec)),
    "gumbel": lambda m, shape, spec: m.jax.random.gumbel(m.jax.random.key(1), shape, out_sharding=m.P(*spec)),
}


def _random_type(rng):
    """A shape and a spec over the (4, 2) mesh that fits it."""
    sizes = {"dp": 4, "tp": 2}
    while True:
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(rng.choice([2, 4, 8])) for _ in range(ndim))
        spec = tuple(ENTRIES[i] for i in rng.choice(len(ENTRIES), ndim))
        axes = [a for e in spec if e for a in ((e,) if isinstance(e, str) else e)]
        if len(axes) == len(set(axes)) and all(
                n % np.prod([sizes[a] for a in ((e,) if isinstance(e, str) else e or ())]) == 0
                for n, e in zip(shape, spec)):
            return shape, spec


def _cases():
    rng = np.random.default_rng(2026)
    for name, op in OPS.items():
        for k in range(2):
            shape, spec = _random_type(rng)
            yield f"{name}-{k}", op, shape, spec
    for name, make in MAKE.items():
        shape, spec = _random_type(rng)
        yield f"{name}", (lambda make, shape, spec: lambda m, x: make(m, shape, spec))(make, shape, spec), \
            shape, spec


CASES = {name: (op, shape, spec) for name, op, shape, spec in _cases()}


@pytest.fixture(scope="module")
def libs(real_jax):
    return Lib(meshsim), Lib(real_jax)


@pytest.mark.parametrize("name", sorted(CASES))
def test_type_or_error_and_value_match_jax(libs, name):
    op, shape, spec = CASES[name]
    a = np.random.default_rng(len(name)).standard_normal(shape).astype(np.float32)
    results = []

    def case(m):
        y = op(m, m.put(a, *spec))
        results.append(y)
        return y

    ours, theirs = (outcome(lib, case) for lib in libs)
    assert ours == theirs, (shape, spec)
    if ours[0] == "ok":
        np.testing.assert_allclose(np.asarray(results[0]), np.asarray(results[1]), rtol=1e-5, atol=1e-5)

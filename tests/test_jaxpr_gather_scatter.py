"""Indexing jaxprs as JAX 0.10.2 prints them: x[idx], x.at[idx].set/add/mul/min/max, lax.gather and
lax.scatter with explicit dimension numbers and dynamic slices bind `gather`/`scatter*` with JAX's
parameters (GatherDimensionNumbers, slice_sizes, GatherScatterMode, fill_value, update_jaxpr, ...)
after JAX's index normalisation (lt, add, select_n, broadcast_in_dim, concatenate), and compute
what JAX computes: values, gradients and vmap, out-of-range indices included."""
import zlib

import numpy as np
import pytest

import meshsim
import meshsim.numpy as mnp

M = np.arange(12, dtype=np.float32).reshape(3, 4)
X3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
I = np.int32(1)
IDX = np.array([0, 2], np.int32)
IDX2 = np.array([[0, 1], [1, 0]], np.int32)
MASK = np.array([True, False, True])


def _text_cases(J, jnp):
    lax = J.lax
    GD, SD = lax.GatherDimensionNumbers, lax.ScatterDimensionNumbers
    row_gather = GD(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    row_scatter = SD(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    along = GD(offset_dims=(), collapsed_slice_dims=(1,), start_index_map=(1,), operand_batching_dims=(0,),
               start_indices_batching_dims=(0,))
    U = np.ones((2, 4), np.float32)
    return {
        "x[i]": (lambda x, i: x[i], (M, I)),
        "x[i,i]": (lambda x, i: x[i, i], (M, I)),
        "x[:,i]": (lambda x, i: x[:, i], (M, I)),
        "x[i,1:]": (lambda x, i: x[i, 1:], (M, I)),
        "x3[None,i,::-1]": (lambda x, i: x[None, i, ::-1], (X3, I)),
        "x[idx]": (lambda x, i: x[i], (M, IDX)),
        "x[:,idx]": (lambda x, i: x[:, i], (M, IDX)),
        "x3[:,idx]": (lambda x, i: x[:, i], (X3, IDX)),
        "x3[:,:,idx]": (lambda x, i: x[:, :, i], (X3, IDX)),
        "x3[...,idx]": (lambda x, i: x[..., i], (X3, IDX)),
        "x3[idx,:,idx]": (lambda x, i: x[i, :, i], (X3, IDX)),
        "x3[:,idx,idx]": (lambda x, i: x[:, i, i], (X3, IDX)),
        "x[idx,idx]": (lambda x, i: x[i, i], (M, IDX)),
        "x[idx2]": (lambda x, i: x[i], (M, IDX2)),
        "x[idx2,idx]": (lambda x, i, j: x[i, j], (M, IDX2, IDX)),
        "x[i,idx]": (lambda x, i, j: x[i, j], (M, I, IDX)),
        "x[idx,1]": (lambda x, i: x[i, 1], (M, IDX)),
        "x[idx,-1]": (lambda x, i: x[i, -1], (M, IDX)),
        "x[None,idx]": (lambda x, i: x[None, i], (M, IDX)),
        "x[idx,None]": (lambda x, i: x[i, None], (M, IDX)),
        "x[idx,::-1]": (lambda x, i: x[i, ::-1], (M, IDX)),
        "x[idx,::2]": (lambda x, i: x[i, ::2], (M, IDX)),
        "x[uint8]": (lambda x, i: x[i], (M, IDX.astype(np.uint8))),
        "x[int16]": (lambda x, i: x[i], (M, IDX.astype(np.int16))),
        "x[list]": (lambda x: x[:, [0, 2]], (M,)),
        "x[numpy]": (lambda x: x[np.array([0, -1])], (M,)),
        "x[mask]": (lambda x: x[MASK], (M,)),
        "get_fill": (lambda x, i: x.at[i].get(mode="fill", fill_value=-1.0), (M, IDX)),
        "get_fill_default": (lambda x, i: x.at[i].get(mode="fill"), (M, IDX)),
        "get_fill_int": (lambda x, i: x.at[i].get(mode="fill"), (M.astype(np.int32), IDX)),
        "get_clip": (lambda x, i: x.at[i].get(mode="clip"), (M, IDX)),
        "get_sorted": (lambda x, i: x.at[i].get(indices_are_sorted=True, unique_indices=True), (M, IDX)),
        "set": (lambda x, i: x.at[i].set(1.0), (M, IDX)),
        "set_values": (lambda x, i, v: x.at[:, i].set(v), (M, IDX, np.ones((3, 2), np.float32))),
        "set_numpy_values": (lambda x, i: x.at[i].set(U), (M, IDX)),
        "set_scalar_index": (lambda x, i: x.at[i].set(1.0), (M, I)),
        "set_clip": (lambda x, i: x.at[i].set(2.0, mode="clip"), (M, IDX)),
        "set_promise": (lambda x, i: x.at[i].set(2.0, mode="promise_in_bounds"), (M, IDX)),
        "add": (lambda x, i: x.at[i].add(1.0), (M, IDX)),
        "add_int": (lambda x, i: x.at[i].add(1), (M.astype(np.int32), IDX)),
        "add_pairs": (lambda x, i: x.at[i, i].add(1.0), (M, IDX)),
        "add_new_axis": (lambda x, i: x.at[None, i].add(1), (M, IDX)),
        "add_reversed": (lambda x, i, v: x.at[i, ::-1].add(v), (M, IDX, np.arange(4, dtype=np.float32))),
        "mul": (lambda x, i: x.at[i].multiply(2.0), (M, IDX)),
        "min": (lambda x, i: x.at[i].min(0.5), (M, IDX)),
        "max": (lambda x, i: x.at[i].max(0.5), (M, IDX)),
        "dynamic_slice": (lambda x, i: lax.dynamic_slice(x, (i, 0), (2, 2)), (M, I)),
        "dynamic_slice_negative": (lambda x, i: lax.dynamic_slice(x, (i, -1), (2, 1)), (M, I)),
        "dynamic_update_slice": (lambda x, i: lax.dynamic_update_slice(x, np.ones((2, 2), np.float32), (i, 0)),
                                 (M, I)),
        "lax_gather": (lambda x, i: lax.gather(x, i, row_gather, (1, 4)), (M, IDX[:, None])),
        "lax_gather_clip": (lambda x, i: lax.gather(x, i, row_gather, (1, 4), mode="clip"), (M, IDX[:, None])),
        "lax_gather_fill": (lambda x, i: lax.gather(x, i, row_gather, (1, 4), mode="fill", fill_value=0),
                            (M, IDX[:, None])),
        "lax_gather_batching": (lambda x, i: lax.gather(x, i, along, (1, 1)),
                                (M, np.array([[[1], [3]], [[0], [0]], [[2], [1]]], np.int32))),
        "lax_scatter": (lambda x, i, u: lax.scatter(x, i, u, row_scatter, mode="clip"), (M, IDX[:, None], U)),
        "lax_scatter_add": (lambda x, i, u: lax.scatter_add(x, i, u, row_scatter), (M, IDX[:, None], U)),
        "lax_scatter_mul": (lambda x, i, u: lax.scatter_mul(x, i, u, row_scatter), (M, IDX[:, None], U)),
        "lax_scatter_min": (lambda x, i, u: lax.scatter_min(x, i, u, row_scatter), (M, IDX[:, None], U)),
        "lax_scatter_max": (lambda x, i, u: lax.scatter_max(x, i, u, row_scatter, indices_are_sorted=True),
                            (M, IDX[:, None], U)),
        "subtract": (lambda x, i: x.at[i].subtract(1.0), (M, IDX)),
        "lax_scatter_sub": (lambda x, i, u: lax.scatter_sub(x, i, u, row_scatter), (M, IDX[:, None], U)),
        "x[:2]": (lambda x: x[:2], (M,)),
        # Transformed: JAX's gather/scatter batching rules (np.int64 dims) and transposes.
        "vmap_x[idx]": (lambda x, i: J.vmap(lambda a: a[i])(x), (M, IDX)),
        "vmap_x[:,idx]": (lambda x, i: J.vmap(lambda a: a[:, i], in_axes=1)(x), (X3, IDX)),
        "vmap_at_add_both": (lambda x, i: J.vmap(lambda a, b: a.at[b].add(1.0))(x, i), (M[:2], IDX)),
        "vmap_at_add_x": (lambda x, i: J.vmap(lambda a: a.at[i].add(a[0]))(x), (X3, IDX)),
        "grad_x[idx]": (lambda x, i: J.grad(lambda a: jnp.sum(a[i]))(x), (M, IDX)),
        "grad_x[:,idx]": (lambda x, i: J.grad(lambda a: jnp.sum(a[:, i]))(x), (M, IDX)),
        "grad_get_fill": (lambda x, i: J.grad(lambda a: jnp.sum(a.at[i].get(mode="fill", fill_value=0.0)))(x),
                          (M, IDX)),
        "grad_vmap_x[idx]": (lambda x, i: J.grad(lambda a: jnp.sum(J.vmap(lambda r: r[i])(a)))(x), (M, IDX)),
    }


TEXT_NAMES = list(_text_cases(meshsim, mnp))


@pytest.mark.parametrize("name", TEXT_NAMES)
def test_indexing_jaxpr_text_matches_jax(real_jax, name):
    f, args = _text_cases(real_jax, real_jax.numpy)[name]
    g, _ = _text_cases(meshsim, mnp)[name]
    assert str(meshsim.make_jaxpr(g)(*args)) == str(real_jax.make_jaxpr(f)(*args))


# ---------------------------------------------------------------- values, gradients, vmap

RNG = np.random.default_rng(zlib.crc32(b"test_jaxpr_gather_scatter"))


def _value_cases(J):
    jnp, lax = J.numpy, J.lax
    GD, SD = lax.GatherDimensionNumbers, lax.ScatterDimensionNumbers
    cols = GD(offset_dims=(0,), collapsed_slice_dims=(1,), start_index_map=(1,))
    cols_scatter = SD(update_window_dims=(0,), inserted_window_dims=(1,), scatter_dims_to_operand_dims=(1,))
    cases = {
        "getitem": lambda x, i: x[i],
        "getitem_cols": lambda x, i: x[:, i],
        "getitem_pairs": lambda x, i: x[i, i[::-1]],
        "getitem_scalar_mix": lambda x, i: x[i, 2],
        "getitem_reversed": lambda x, i: x[i, ::-1],
        "getitem_new_axis": lambda x, i: x[None, :, i],
        "get_fill": lambda x, i: x.at[i].get(mode="fill", fill_value=-3.0),
        "get_clip": lambda x, i: x.at[:, i].get(mode="clip"),
        "take_fill": lambda x, i: jnp.take(x, i, axis=1),
        "take_clip": lambda x, i: jnp.take(x, i, axis=0, mode="clip"),
        "set": lambda x, i: x.at[i].set(x[0] * 2),
        "add": lambda x, i: x.at[:, i].add(x[:, :1] * 3),
        "add_pairs": lambda x, i: x.at[i, i].add(1.5),
        "add_clip": lambda x, i: x.at[i].add(x[1], mode="clip"),
        "subtract": lambda x, i: x.at[:, i].subtract(x[:, :1] * 3),
        "lax_scatter_sub": lambda x, i: lax.scatter_sub(x, i[:, None], x[:, :i.shape[0]], cols_scatter),
        "mul": lambda x, i: x.at[i].multiply(x[1] + 2),
        "min": lambda x, i: x.at[i].min(x[2]),
        "max": lambda x, i: x.at[:, i].max(x[:, 1:2]),
        "lax_gather_fill": lambda x, i: lax.gather(x, i[:, None], cols, (x.shape[0], 1), mode="fill",
                                                   fill_value=7.0),
        "lax_gather_clip": lambda x, i: lax.gather(x, i[:, None], cols, (x.shape[0], 1), mode="clip"),
        "lax_gather_promise": lambda x, i: lax.gather(x, i[:, None], cols, (x.shape[0], 1)),
        "lax_scatter_add": lambda x, i: lax.scatter_add(x, i[:, None], x[:, :i.shape[0]], cols_scatter),
        "lax_scatter_clip": lambda x, i: lax.scatter(x, i[:, None], x[:, :i.shape[0]] + 1, cols_scatter,
                                                     mode="clip"),
    }
    return {name: (lambda h: lambda x, i: h(jnp.asarray(x), i))(h) for name, h in cases.items()}


VALUE_NAMES = list(_value_cases(meshsim))
# Forms whose duplicate or out-of-range indices make JAX's result depend on update order or on
# XLA's undefined out-of-bounds reads are checked with in-range, distinct indices.
_DISTINCT = {"set", "lax_scatter_clip", "lax_gather_promise", "getitem", "getitem_cols", "getitem_pairs",
             "getitem_scalar_mix", "getitem_reversed", "getitem_new_axis", "mul"}


def _indices(name, n, k, seed):
    rng = np.random.default_rng(seed)
    if name in _DISTINCT:
        return rng.permutation(n)[:k].astype(np.int32) - rng.integers(0, 2) * n  # negative half the time
    return rng.integers(-n - 2, n + 2, size=k).astype(np.int32)


@pytest.mark.parametrize("name", VALUE_NAMES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_indexing_values_gradients_and_vmap_match_jax(real_jax, name, seed):
    seed = zlib.crc32(f"{name}-{seed}".encode())
    rng = np.random.default_rng(seed)
    rows, cols = int(rng.integers(3, 6)), int(rng.integers(3, 6))
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    idx = _indices(name, min(rows, cols), min(rows, cols) - 1, seed)
    f, g = _value_cases(real_jax)[name], _value_cases(meshsim)[name]
    want = np.asarray(f(x, idx))
    np.testing.assert_allclose(np.asarray(g(x, idx)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(meshsim.jit(g)(x, idx)), want, rtol=1e-6)
    w = rng.standard_normal(want.shape).astype(np.float32)
    if name not in ("mul", "min", "max"):  # JAX differentiates these only with unique indices
        loss = lambda h, J: lambda x: J.numpy.sum(h(x, idx) * w)  # noqa: E731
        np.testing.assert_allclose(np.asarray(meshsim.grad(loss(g, meshsim))(x)),
                                   np.asarray(real_jax.grad(loss(f, real_jax))(x)), rtol=1e-5, atol=1e-6)
    xs = rng.standard_normal((2, rows, cols)).astype(np.float32)
    idxs = np.stack([idx, _indices(name, min(rows, cols), idx.shape[0], seed + 1)])
    for axes in [(0, 0), (0, None), (None, 0)]:
        a = xs if axes[0] == 0 else x
        b = idxs if axes[1] == 0 else idx
        np.testing.assert_allclose(np.asarray(meshsim.vmap(g, axes)(a, b)),
                                   np.asarray(real_jax.vmap(f, axes)(a, b)), rtol=1e-6)


@pytest.mark.parametrize("mode", ["clip", "fill", "promise_in_bounds"])
def test_lax_gather_with_batching_dims_matches_jax(real_jax, mode):
    rng = np.random.default_rng(zlib.crc32(mode.encode()))
    x = rng.standard_normal((3, 5, 2)).astype(np.float32)
    idx = rng.integers(-1, 5 if mode != "promise_in_bounds" else 5, size=(3, 4, 1)).astype(np.int32)
    if mode == "promise_in_bounds":
        idx = np.abs(idx) % 5
    dn = lambda J: J.lax.GatherDimensionNumbers(  # noqa: E731
        offset_dims=(2,), collapsed_slice_dims=(1,), start_index_map=(1,), operand_batching_dims=(0,),
        start_indices_batching_dims=(0,))
    f = lambda J: lambda x: J.lax.gather(x, idx, dn(J), (1, 1, 2), mode=mode)  # noqa: E731
    np.testing.assert_array_equal(np.asarray(f(meshsim)(x)), np.asarray(f(real_jax)(x)))
    w = rng.standard_normal((3, 4, 2)).astype(np.float32)
    loss = lambda J: lambda x: J.numpy.sum(f(J)(x) * w)  # noqa: E731
    np.testing.assert_allclose(np.asarray(meshsim.grad(loss(meshsim))(x)), np.asarray(real_jax.grad(loss(real_jax))(x)),
                               rtol=1e-6)
    assert str(meshsim.make_jaxpr(f(meshsim))(x)) == str(real_jax.make_jaxpr(f(real_jax))(x))


def test_dynamic_slice_starts_past_either_end_clamp_as_jax(real_jax):
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    for f in (lambda J: lambda x, i: J.lax.dynamic_slice(x, (i, i), (2, 3)),
              lambda J: lambda x, i: J.lax.dynamic_update_slice(x, np.ones((2, 3), np.float32), (i, i)),
              lambda J: lambda x, i: J.numpy.asarray(x)[i]):
        for i in range(-12, 12):
            np.testing.assert_array_equal(np.asarray(meshsim.jit(f(meshsim))(x, np.int32(i))),
                                          np.asarray(f(real_jax)(x, np.int32(i))))

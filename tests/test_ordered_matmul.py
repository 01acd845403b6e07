"""Matrix products whose elements do not depend on where they are computed:
each element of a float32/float64 (and narrow-float) product is one chain of
multiply-adds over the contracted dim in order, so any block of rows or
columns of a product, and so any device's shard of a sharded product, has
the bits of the same block of the whole product, as JAX's sharded programs
have. Checked over random shapes, layouts, block positions and meshes, with
NumPy (float64 products) as the reference for the values and real JAX for
the sign of zero sums."""
import zlib

import ml_dtypes
import numpy as np
import pytest

import meshsim as ms
import meshsim.numpy as mnp
from meshsim.sharding import PartitionSpec as P
from x64_mode import x64

DTYPES = ["float32", "float64", "bfloat16"]


def rng_for(*parts):
    return np.random.default_rng(zlib.crc32("/".join(map(str, parts)).encode()))


def as_dtype(name):
    return np.dtype(getattr(ml_dtypes, name, None) or name)


def operands(rng, name, m, k, n):
    a = rng.standard_normal((m, k)).astype(as_dtype(name))
    b = rng.standard_normal((k, n)).astype(as_dtype(name))
    return a, b


def bits(x):
    x = np.asarray(x)
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def x64_for(name, *also):
    return x64(ms, *also, enabled=name == "float64")


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("seed", range(6))
def test_blocks_of_rows_and_columns_have_the_whole_products_bits(name, seed):
    rng = rng_for("blocks", name, seed)
    # Shapes around the register tile (6 x 16 float32) and the depth block (256).
    m, k, n = (int(v) for v in rng.integers(1, [70, 600, 90]))
    with x64_for(name):
        a, b = operands(rng, name, m, k, n)
        whole = np.asarray(mnp.asarray(a) @ mnp.asarray(b))
        ref = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(whole.astype(np.float64), ref, rtol=0.02 if name == "bfloat16" else 1e-4,
                                   atol=(0.1 if name == "bfloat16" else 1e-3) * np.sqrt(k))
        for _ in range(4):
            i0, i1 = sorted(int(v) for v in rng.integers(0, m + 1, 2))
            j0, j1 = sorted(int(v) for v in rng.integers(0, n + 1, 2))
            if j1 - j0 == 1:  # a matrix times one column sums as XLA's matrix-vector product does
                j0, j1 = 0, n
            rows = np.asarray(mnp.asarray(a[i0:i1]) @ mnp.asarray(b))
            cols = np.asarray(mnp.asarray(a) @ mnp.asarray(b[:, j0:j1]))
            block = np.asarray(mnp.asarray(a[i0:i1]) @ mnp.asarray(b[:, j0:j1]))
            np.testing.assert_array_equal(bits(rows), bits(whole[i0:i1]), err_msg=f"rows {i0}:{i1}")
            np.testing.assert_array_equal(bits(cols), bits(whole[:, j0:j1]), err_msg=f"cols {j0}:{j1}")
            np.testing.assert_array_equal(bits(block), bits(whole[i0:i1, j0:j1]))


@pytest.mark.parametrize("seed", range(4))
def test_layouts_and_batches_give_the_same_bits(seed):
    """Transposed, strided and batched operands, and products large enough to
    be split among threads, give each element the bits of the plain product."""
    rng = rng_for("layouts", seed)
    batch = int(rng.integers(1, 5))
    m, k, n = (int(v) for v in rng.integers([1, 1, 1], [200, 700, 300]))
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((batch, k, n)).astype(np.float32)
    got = np.asarray(mnp.einsum("bmk,bkn->bmn", mnp.asarray(a), mnp.asarray(b)))
    for i in range(batch):
        one = np.asarray(mnp.asarray(a[i]) @ mnp.asarray(b[i]))
        np.testing.assert_array_equal(bits(got[i]), bits(one))
        at = np.asarray(mnp.asarray(np.ascontiguousarray(a[i].T)).T @ mnp.asarray(b[i]))
        np.testing.assert_array_equal(bits(at), bits(one))
        bt = np.asarray(mnp.asarray(a[i]) @ mnp.asarray(np.ascontiguousarray(b[i].T)).T)
        np.testing.assert_array_equal(bits(bt), bits(one))
        # The transposed product: each element the same chain, so the same bits.
        t = np.asarray(mnp.asarray(b[i].T) @ mnp.asarray(a[i].T))
        np.testing.assert_array_equal(bits(t.T), bits(one))
        jitted = np.asarray(ms.jit(lambda x, y: x @ y)(a[i], b[i]))
        np.testing.assert_array_equal(bits(jitted), bits(one))


@pytest.mark.parametrize("seed", range(4))
def test_sharded_products_equal_the_unsharded_one(seed):
    """Rows, columns or both sharded over a mesh (shard_map and sharded jit):
    every shard has the unsharded product's bits, as under JAX."""
    rng = rng_for("sharded", seed)
    mesh = ms.make_mesh((4, 2), ("x", "y"))
    m, n = 4 * int(rng.integers(1, 40)), 2 * int(rng.integers(1, 40))
    k = int(rng.integers(1, 600))
    a, b = operands(rng, "float32", m, k, n)
    whole = np.asarray(ms.jit(lambda x, y: x @ y)(a, b))

    @ms.jit
    @ms.shard_map(mesh=mesh, in_specs=(P("x", None), P(None, "y")), out_specs=P("x", "y"))
    def blocks(x, y):
        return x @ y

    @ms.jit
    @ms.shard_map(mesh=mesh, in_specs=(P(("x", "y"), None), P("x", None)), out_specs=P(("x", "y"), None))
    def gathered(x, y_rows):
        return x @ ms.lax.all_gather(y_rows, "x", axis=0, tiled=True)

    np.testing.assert_array_equal(bits(blocks(a, b)), bits(whole))
    if k % 4 == 0 and m % 8 == 0:
        np.testing.assert_array_equal(bits(gathered(a, b)), bits(whole))
    sharded_a = ms.device_put(a, ms.NamedSharding(mesh, P("x", None)))
    np.testing.assert_array_equal(bits(ms.jit(lambda x, y: x @ y)(sharded_a, b)), bits(whole))


@pytest.mark.parametrize("name", DTYPES)
def test_zero_sums_have_xlas_sign(real_jax, name):
    """Products of zeros, small integers and tiny numbers (whose square is
    below the format), over fewer k than one depth block, where XLA's dot sums
    in k's order with fused multiply-adds from +0 as meshsim does: the bits,
    the sign of every zero sum and every tiny residue among them, are JAX's."""
    jnp = real_jax.numpy
    rng = rng_for("zeros", name)
    tiny = 1e-200 if name == "float64" else 1e-30
    vals = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, tiny, -tiny])
    with x64_for(name, real_jax):
        for m, k, n in [(8, 16, 8), (16, 20, 16), (3, 3, 4), (32, 40, 24), (1, 12, 8), (4, 1, 4)]:
            a = rng.choice(vals, (m, k)).astype(as_dtype(name))
            b = rng.choice(vals, (k, n)).astype(as_dtype(name))
            got = np.asarray(mnp.asarray(a) @ mnp.asarray(b))
            want = np.asarray(real_jax.jit(jnp.matmul)(a, b))
            np.testing.assert_array_equal(bits(got), bits(want), err_msg=f"{name} {(m, k, n)}")


def test_empty_contraction_is_zero():
    got = np.asarray(mnp.zeros((3, 0), np.float32) @ mnp.zeros((0, 4), np.float32))
    np.testing.assert_array_equal(bits(got), bits(np.zeros((3, 4), np.float32)))


@pytest.mark.parametrize("seed", range(3))
def test_a_convolutions_examples_have_the_bits_the_whole_batch_gives_them(seed):
    """A convolution's products run in the same kernel: a device's examples of a
    batch-sharded convolution equal those examples of the unsharded one."""
    rng = rng_for("conv", seed)
    mesh = ms.make_mesh((8,), ("batch",))
    n, c, hw, o, win = 8 * int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(4, 12)), \
        int(rng.integers(1, 20)), int(rng.integers(1, 4))
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    w = rng.standard_normal((o, c, win, win)).astype(np.float32)

    def conv(x, w):
        return ms.lax.conv_general_dilated(x, w, (1, 1), "SAME")

    whole = np.asarray(ms.jit(conv)(x, w))
    sharded = ms.jit(ms.shard_map(conv, mesh=mesh, in_specs=(P("batch"), P()), out_specs=P("batch")))
    np.testing.assert_array_equal(bits(sharded(x, w)), bits(whole))
    np.testing.assert_array_equal(bits(conv(x[:1], w)), bits(whole[:1]))

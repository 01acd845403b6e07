"""Matrix products whose elements do not depend on where they are computed:
each element of a float32/float64 (and narrow-float) product is one chain of
multiply-adds per block of 256 terms over the contracted dim in order, so any
block of rows or columns of a product, and so any device's shard of a sharded
product, has the bits of the same block of the whole product. Checked over
random shapes, layouts, block positions and meshes, with NumPy (float64
products) as the reference for the values and real JAX for the sign of zero
sums. With the option meshsim_xla_dot_library_order, float32 products follow
XLA's dot library instead and are compared with real JAX bit for bit, device
by device in sharded programs."""
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


@pytest.fixture
def library_order():
    """float32 products summed in the order of XLA's dot library (an option, off by default)."""
    ms.config.update("meshsim_xla_dot_library_order", True)
    yield
    ms.config.update("meshsim_xla_dot_library_order", False)


# Products in the layouts XLA hands its dot library: a matrix times a matrix,
# times a transposed one, batched, and attention's scores.
LIBRARY_FORMS = {
    "x @ w": ("ij,jk->ik", lambda m, k, n: ((m, k), (k, n))),
    "x @ w.T": ("ij,kj->ik", lambda m, k, n: ((m, k), (n, k))),
    "batched": ("bij,bjk->bik", lambda m, k, n: ((3, m, k), (3, k, n))),
    "scores": ("bqhd,bkhd->bhqk", lambda m, k, n: ((2, m, 2, k), (2, n, 2, k))),
}


@pytest.mark.parametrize("form", sorted(LIBRARY_FORMS))
@pytest.mark.parametrize("seed", range(5))
def test_float32_products_have_xlas_bits(real_jax, library_order, form, seed):
    """Random shapes around the library's kernel, tile and depth-block sizes,
    including depths past its chunking threshold (8192) and column counts
    that are not multiples of its kernels' widths: every element's bits are
    JAX's, eager and under jit."""
    jnp = real_jax.numpy
    spec, shapes = LIBRARY_FORMS[form]
    rng = rng_for("library", form, seed)
    for _ in range(3):
        m, n = (int(v) for v in rng.integers(2, 260, 2))
        k = int(rng.choice([rng.integers(1, 1500), rng.integers(8000, 9000)], p=[0.85, 0.15]))
        if k > 8000:
            m, n = min(m, 40), min(n, 40)
        a_shape, b_shape = shapes(m, k, n)
        a = rng.standard_normal(a_shape).astype(np.float32)
        b = rng.standard_normal(b_shape).astype(np.float32)
        want = np.asarray(real_jax.jit(lambda x, y: jnp.einsum(spec, x, y))(a, b))
        got = np.asarray(ms.jit(lambda x, y: mnp.einsum(spec, x, y))(a, b))
        np.testing.assert_array_equal(bits(got), bits(want), err_msg=f"{form} {(m, k, n)}")
        eager = np.asarray(mnp.einsum(spec, mnp.asarray(a), mnp.asarray(b)))
        np.testing.assert_array_equal(bits(eager), bits(want), err_msg=f"eager {form} {(m, k, n)}")


@pytest.mark.parametrize("seed", range(4))
def test_sharded_products_have_xlas_per_device_bits(real_jax, library_order, seed):
    """Rows, columns or both sharded over a mesh (shard_map and sharded jit):
    every device's shard has the bits JAX gives it. XLA sums each device's
    product in the order its own shape calls for, so the shards need not
    have the unsharded product's bits."""
    rng = rng_for("sharded", seed)
    m, n = 4 * int(rng.integers(1, 40)), 2 * int(rng.integers(1, 40))
    k = int(rng.integers(1, 900))
    a, b = operands(rng, "float32", m, k, n)

    def programs(jax):
        P_ = jax.sharding.PartitionSpec
        mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)

        @jax.jit
        @jax.shard_map(mesh=mesh, in_specs=(P_("x", None), P_(None, "y")), out_specs=P_("x", "y"))
        def blocks(x, y):
            return x @ y

        @jax.jit
        @jax.shard_map(mesh=mesh, in_specs=(P_(("x", "y"), None), P_("x", None)), out_specs=P_(("x", "y"), None))
        def gathered(x, y_rows):
            return x @ jax.lax.all_gather(y_rows, "x", axis=0, tiled=True)

        sharded_a = jax.device_put(a, jax.NamedSharding(mesh, P_("x", None)))
        results = {"whole": jax.jit(lambda x, y: x @ y)(a, b), "blocks": blocks(a, b),
                   "sharded jit": jax.jit(lambda x, y: x @ y)(sharded_a, b)}
        if k % 4 == 0 and m % 8 == 0:
            results["gathered"] = gathered(a, b)
        return {name: np.asarray(v) for name, v in results.items()}

    want, got = programs(real_jax), programs(ms)
    for name in want:
        np.testing.assert_array_equal(bits(got[name]), bits(want[name]), err_msg=f"{name} {(m, k, n)}")


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

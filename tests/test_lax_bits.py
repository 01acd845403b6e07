"""lax.mulhi and lax.reduce_precision against real JAX, bit for bit: every integer width and
signedness with extreme values; random float32/float16/bfloat16 values (normals, subnormals,
overflow, ties, NaN payloads, signed zeros) over many target formats; gradients, jit; errors."""
import zlib

import numpy as np
import pytest

import meshsim
from meshsim import lax as mlax

jax = pytest.importorskip("jax")
jnp = jax.numpy
jlax = jax.lax


def seeded(name: str):
    return np.random.default_rng(zlib.crc32(name.encode()))


INT_TYPES = [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32]


@pytest.mark.parametrize("dtype", INT_TYPES)
def test_mulhi_every_width(dtype):
    info = np.iinfo(dtype)
    rng = seeded(f"mulhi-{np.dtype(dtype).name}")
    edges = np.array([info.min, info.max, 0, 1, info.max // 2, info.min // 2 if info.min else 2, 3], dtype)
    x = np.concatenate([rng.integers(info.min, info.max, size=200, endpoint=True).astype(dtype), edges,
                        np.repeat(edges, len(edges))])
    y = np.concatenate([rng.integers(info.min, info.max, size=200, endpoint=True).astype(dtype), edges[::-1],
                        np.tile(edges, len(edges))])
    got = np.asarray(mlax.mulhi(x, y))
    expected = np.asarray(jlax.mulhi(x, y))
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.asarray(meshsim.jit(mlax.mulhi)(x, y)), expected)


def test_mulhi_errors():
    with pytest.raises(TypeError) as expected:
        jlax.mulhi(np.ones(3, np.float32), np.ones(3, np.float32))
    with pytest.raises(TypeError) as got:
        mlax.mulhi(np.ones(3, np.float32), np.ones(3, np.float32))
    assert str(got.value) == str(expected.value)


FORMATS = [(8, 23), (8, 7), (5, 10), (5, 2), (4, 3), (2, 1), (11, 52), (8, 0), (1, 0), (3, 15), (6, 4)]


def float_values(rng, dtype):
    finfo = np.finfo(np.float32) if dtype == jnp.bfloat16 else np.finfo(dtype)
    width = np.dtype(dtype).itemsize * 8
    bits = rng.integers(0, 2 ** width, size=400, dtype=np.uint64).astype(f"uint{width}")
    x = bits.view(np.dtype(dtype))
    special = np.array([0.0, -0.0, 1.0, -1.5, 2.5, np.inf, -np.inf, np.nan, float(finfo.tiny),
                        float(finfo.max), 65504.0, 65520.0, 6.1e-5, 1e-6, 3.0e38], np.float64)
    with np.errstate(over="ignore"):
        special = special.astype(dtype)
    with np.errstate(over="ignore"):
        normal = (rng.standard_normal(200) * np.exp(rng.uniform(-20, 20, 200))).astype(dtype)
    return np.concatenate([x, special, normal])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, jnp.bfloat16])
@pytest.mark.parametrize("fmt", FORMATS, ids=[f"e{e}m{m}" for e, m in FORMATS])
def test_reduce_precision_bit_for_bit(dtype, fmt):
    rng = seeded(f"rp-{np.dtype(dtype).name}-{fmt}")
    x = float_values(rng, dtype)
    got = np.asarray(mlax.reduce_precision(x, *fmt))
    expected = np.asarray(jlax.reduce_precision(x, *fmt))
    assert got.dtype == expected.dtype
    width = np.dtype(dtype).itemsize * 8
    np.testing.assert_array_equal(got.view(f"uint{width}"), expected.view(f"uint{width}"))


def test_reduce_precision_gradient_and_jit():
    x = np.linspace(-3, 3, 11).astype(np.float32)

    def f(lax_mod, v):
        return (lax_mod.reduce_precision(v * v, 5, 2) * np.arange(11, dtype=np.float32)).sum()

    np.testing.assert_array_equal(np.asarray(meshsim.grad(lambda v: f(mlax, v))(x)),
                                  np.asarray(jax.grad(lambda v: f(jlax, v))(x)))
    np.testing.assert_array_equal(np.asarray(meshsim.jit(lambda v: f(mlax, v))(x)),
                                  np.asarray(jax.jit(lambda v: f(jlax, v))(x)))


@pytest.mark.parametrize("args", [(np.ones(3, np.int32), 5, 10), (np.ones(3, np.float32), 0, 10)])
def test_reduce_precision_errors(args):
    with pytest.raises(Exception) as expected:
        jlax.reduce_precision(*args)
    with pytest.raises(type(expected.value)) as got:
        mlax.reduce_precision(*args)
    assert str(got.value) == str(expected.value)

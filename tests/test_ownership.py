"""A meshsim array never aliases memory it does not own: NumPy inputs are
copied, as JAX copies them, so writing to the caller's memory afterwards
(through the array, a writeable base of a read-only view, a memmap, or while
a dispatched program is still running) changes nothing. Inputs of any
layout (strided, Fortran, big-endian, unaligned) arrive with their values."""
import numpy as np
import pytest

import meshsim as jax
import meshsim.numpy as jnp
from meshsim import lax
from meshsim.sharding import Mesh, NamedSharding, PartitionSpec as P

RNG = np.random.default_rng(13)


def _read_only_view():
    base = RNG.standard_normal(64).astype(np.float32)
    view = base[:]
    view.flags.writeable = False
    return base, view


CONVERSIONS = {
    "array": lambda v: jnp.array(v),
    "asarray": lambda v: jnp.asarray(v),
    "asarray_copy": lambda v: jnp.asarray(v, copy=True),
    "device_put": lambda v: jax.device_put(v),
    "device_put_sharded": lambda v: jax.device_put(
        v, NamedSharding(Mesh(jax.devices(), ("x",)), P("x"))),
}


@pytest.mark.parametrize("convert", sorted(CONVERSIONS))
def test_read_only_view_of_a_writeable_base_is_copied(convert):
    base, view = _read_only_view()
    expected = base.copy()
    a = CONVERSIONS[convert](view)
    base[:] = -5
    np.testing.assert_array_equal(np.asarray(a), expected)


@pytest.mark.parametrize("convert", sorted(CONVERSIONS))
def test_read_only_array_made_writeable_later_is_copied(convert):
    b = RNG.standard_normal(32).astype(np.float32)
    expected = b.copy()
    b.flags.writeable = False
    a = CONVERSIONS[convert](b)
    b.flags.writeable = True
    b[:] = -5
    np.testing.assert_array_equal(np.asarray(a), expected)


def test_writeable_input_is_copied():
    b = RNG.standard_normal((4, 8)).astype(np.float32)
    expected = b.copy()
    a = jnp.asarray(b)
    b[...] = 7
    np.testing.assert_array_equal(np.asarray(a), expected)


def test_broadcast_view_is_copied():
    base = RNG.standard_normal(8).astype(np.float32)
    expected = np.broadcast_to(base.copy(), (4, 8))
    a = jnp.asarray(np.broadcast_to(base, (4, 8)))
    base[:] = -5
    np.testing.assert_array_equal(np.asarray(a), expected)


def test_read_only_memmap_is_copied(tmp_path):
    path = tmp_path / "m.bin"
    data = RNG.standard_normal(16).astype(np.float32)
    data.tofile(path)
    ro = np.memmap(path, dtype=np.float32, mode="r", shape=(16,))
    a = jnp.asarray(ro)
    rw = np.memmap(path, dtype=np.float32, mode="r+", shape=(16,))
    rw[:] = -5
    rw.flush()
    np.testing.assert_array_equal(np.asarray(a), data)


def test_async_call_then_write_to_the_input_computes_on_the_old_values():
    # A program queued behind slow ones has not read its argument yet when the
    # caller writes to the NumPy array it came from.
    mesh = Mesh(jax.devices(), ("x",))
    slow = jax.jit(jax.shard_map(lambda a: jnp.tanh(a @ a.T @ a * 1e-3), mesh=mesh,
                                 in_specs=P("x"), out_specs=P("x")))
    f = jax.jit(jax.shard_map(lambda a: lax.psum(a, "x"), mesh=mesh, in_specs=P("x"),
                              out_specs=P()))
    big = jnp.asarray(RNG.standard_normal((512, 512)).astype(np.float32))
    backlog = [slow(big) for _ in range(4)]
    b = RNG.standard_normal(64).astype(np.float32)
    expected = b.reshape(8, 8).sum(0)
    view = b[:]
    view.flags.writeable = False
    r = f(view)
    b[:] = -5
    np.testing.assert_allclose(np.asarray(r), expected, rtol=1e-5)
    del backlog


@pytest.mark.parametrize("make", [
    lambda x: x[::2, ::3],
    lambda x: np.asfortranarray(x),
    lambda x: x.T,
    lambda x: x[::-1],
], ids=["strided", "fortran", "transposed", "reversed"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int16, np.float64])
def test_any_layout_arrives_with_its_values(make, dtype, real_jax):
    x = make((RNG.standard_normal((6, 9)) * 100).astype(dtype))
    got = np.asarray(jnp.asarray(x) + 0)
    want = np.asarray(real_jax.numpy.asarray(x) + 0)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("convert", [jnp.asarray, jnp.array, lambda v: jax.device_put(v),
                                     lambda v: jax.jit(lambda a: a + 1)(v)])
def test_big_endian_input_is_refused_as_jax_refuses_it(convert, real_jax):
    x = np.arange(4, dtype=">f4")
    with pytest.raises(TypeError) as want:
        real_jax.device_put(x)
    with pytest.raises(TypeError, match="Dtype >f4 is not a valid JAX array type") as got:
        convert(x)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64, np.int64])
def test_unaligned_buffer_arrives_with_its_values(dtype):
    values = (RNG.standard_normal(33) * 100).astype(dtype)
    raw = bytearray(values.nbytes + 1)
    x = np.frombuffer(raw, dtype=dtype, offset=1, count=33)
    x.flags.writeable and x.__setitem__(slice(None), values)
    assert not x.flags.aligned
    a = jnp.asarray(x)
    np.testing.assert_array_equal(np.asarray(a), values.astype(a.dtype))
    np.testing.assert_allclose(np.asarray(jnp.sum(a)), np.sum(values.astype(a.dtype)), rtol=1e-5)


def test_own_arrays_round_trip_through_numpy_without_a_copy_and_stay_immutable():
    a = jnp.arange(12.0).reshape(3, 4)
    v = np.asarray(a)
    with pytest.raises(ValueError):
        v.flags.writeable = True
    b = jnp.asarray(v[1:])
    np.testing.assert_array_equal(np.asarray(b), np.arange(4.0, 12.0).reshape(2, 4))

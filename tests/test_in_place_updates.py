"""Scatters and dynamic_update_slice write into their operand's buffer when the
program reads that operand for the last time and no other view shares it (as
XLA updates loop buffers in place). Every other value must stay as it was:
program inputs, values read again later, views sharing the buffer, values
several devices share, operands of a branch or a loop body still used after
it. Each case runs the same code under meshsim and real JAX and compares the
bits, and checks the inputs are unchanged."""
import numpy as np
import pytest

import meshsim

RNG = np.random.default_rng(0)
DTYPES = [np.float32, np.int32, np.float64]


def data(shape, dtype):
    return (RNG.standard_normal(shape) * 10).astype(dtype)


def both(real_jax, case, *args):
    """case(jax) -> function; its results under meshsim and JAX, inputs checked unchanged."""
    kept = [np.array(a, copy=True) for a in args]
    ours = case(meshsim)(*[meshsim.numpy.asarray(a) for a in args])
    theirs = case(real_jax)(*[real_jax.numpy.asarray(a) for a in args])
    ours, theirs = meshsim.tree.leaves(ours), real_jax.tree.leaves(theirs)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    for a, k in zip(args, kept):
        np.testing.assert_array_equal(np.asarray(a), k)
    return ours


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_input_and_a_value_read_later_are_not_overwritten(real_jax, dtype):
    shape = tuple(int(n) for n in RNG.integers(2, 6, size=3))
    x, u = data(shape, dtype), data(shape[1:], dtype)
    i = int(RNG.integers(shape[0]))

    def case(jax):
        def f(x, u):
            z = x * 2
            view = z.reshape(-1)  # shares z's buffer
            y = z.at[i].set(u)  # z is read again below: copied
            w = (x + 1).at[i].add(u)  # the sum is read only here: updated in place
            v = jax.lax.dynamic_update_slice(x, u[None], (i, 0, 0))  # an input: copied
            return y, z, view, w, v, x.at[i].multiply(u)
        return jax.jit(f)

    both(real_jax, case, x, u)


@pytest.mark.parametrize("dtype", DTYPES)
def test_loop_buffers_updated_in_place(real_jax, dtype):
    n, m = int(RNG.integers(3, 7)), int(RNG.integers(2, 5))
    xs, b0 = data((n, m), dtype), data((n, m), dtype)

    def case(jax):
        lax, jnp = jax.lax, jax.numpy

        def f(xs, b0):
            def body(carry, row):
                buf, acc, k = carry
                before = buf  # the carry as it came, returned as a y
                buf = buf.at[k % n].set(row * 3)
                acc = lax.dynamic_update_slice(acc, (row + acc[k % n])[None], (k % n, 0))
                return (buf, acc, k + 1), before.sum(axis=1)
            (buf, acc, _), ys = lax.scan(body, (b0 * 1, b0 + 0, jnp.int32(0)), xs)
            counts = lax.fori_loop(0, n, lambda j, c: c.at[j % m].add(xs[j].astype(c.dtype)),
                                   jnp.zeros((m, m), xs.dtype))
            return buf, acc, ys, counts, b0
        return jax.jit(f)

    both(real_jax, case, xs, b0)


def test_branch_operand_used_after_the_branch(real_jax):
    x, u = data((5, 3), np.float32), data((3,), np.float32)

    def case(jax):
        def f(x, u, k):
            z = x - 1
            y = jax.lax.switch(k, [lambda z: z.at[1].set(u), lambda z: z.at[2].add(u),
                                   lambda z: z * 1], z)
            return y, z  # z outlives the branch: the branch updates a copy
        return jax.jit(f)

    for k in range(3):
        both(real_jax, case, x, u, np.int32(k))


def test_devices_sharing_a_buffer_update_their_own_copies(real_jax):
    n = 8
    x = data((n, 4), np.float32)

    def case(jax):
        P = jax.sharding.PartitionSpec
        mesh = jax.make_mesh((4, 2), ("a", "b"))

        def body(x):  # x is replicated: every device may hold the same buffer
            d = jax.lax.axis_index("a") * 2 + jax.lax.axis_index("b")
            y = jax.lax.dynamic_update_slice(x, jax.numpy.full((1, 4), d, x.dtype), (d, 0))
            return y.at[d, 0].add(100.0)[None]

        return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P(), out_specs=P(("a", "b")),
                                     check_vma=False))

    both(real_jax, case, x)

"""Runs of consecutive 0-d int32/bool equations (index arithmetic: JAX's
`lt`/`add`/`select_n` normalisation of every dynamic index) are computed in
registers, those on literals once when the program is planned
(runtime/scalar_runs.h). These cases build such chains at random, on
arguments and on literals, in jit, in loops and per device inside shard_map,
and compare every result's bits, dtype and shape with real JAX."""
import zlib

import numpy as np
import pytest

import meshsim

INT_MAX = 2**31 - 1
BINARY = ["add", "sub", "mul", "max", "min", "and", "or", "xor"]
LAX_NAME = {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor"}
COMPARE = ["lt", "le", "gt", "ge", "eq", "ne"]


def rng(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def same(ours, theirs):
    ours, theirs = meshsim.tree.leaves(ours), meshsim.tree.leaves(theirs)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def chain(jax, plan, literals):
    """A function of int32 scalars running the random `plan` of 0-d ops; each
    step's operands are earlier values (arguments, literals or results)."""
    lax, jnp = jax.lax, jax.numpy

    def f(*args):
        ints = list(args) + [jnp.int32(v) for v in literals]
        bools = [ints[0] < ints[1]]
        for kind, name, i, j, k in plan:
            x, y = ints[i % len(ints)], ints[j % len(ints)]
            if kind == "binary":
                ints.append(getattr(lax, LAX_NAME.get(name, name))(x, y))
            elif kind == "compare":
                bools.append(getattr(lax, name)(x, y))
            elif kind == "select_bool":
                ints.append(lax.select_n(bools[k % len(bools)], x, y))
            elif kind == "select_int":  # an int32 `which`, possibly out of range
                ints.append(lax.select_n(ints[k % len(ints)], x, y, ints[(k + 1) % len(ints)]))
            else:  # a dynamic index in JAX's form (lt, add, select_n) on a literal
                ints.append(lax.dynamic_index_in_dim(jnp.arange(7, dtype=jnp.int32) * 3, k % 5 - 2,
                                                     keepdims=False) + x)
        return ints[len(args):], bools

    return f


def random_plan(r, steps):
    kinds = ["binary", "compare", "select_bool", "select_int", "index"]
    plan = []
    for _ in range(steps):
        kind = kinds[int(r.integers(len(kinds)))]
        name = str(r.choice(BINARY if kind == "binary" else COMPARE))
        plan.append((kind, name, *(int(v) for v in r.integers(0, 1000, size=3))))
    return plan


@pytest.mark.parametrize("case", range(6))
def test_random_chains_on_arguments_and_literals(real_jax, case):
    r = rng(f"chains{case}")
    plan = random_plan(r, int(r.integers(5, 40)))
    literals = [int(v) for v in r.choice([0, 1, -1, 2, -3, 7, INT_MAX, -INT_MAX - 1], size=3)]
    args = [int(v) for v in r.integers(-20, 20, size=2)]
    if case % 2:  # wrap-around at the int32 limits
        args[0] = INT_MAX - int(r.integers(0, 3))
    ours = meshsim.jit(chain(meshsim, plan, literals))(*[meshsim.numpy.int32(a) for a in args])
    theirs = real_jax.jit(chain(real_jax, plan, literals))(*[real_jax.numpy.int32(a) for a in args])
    same(ours, theirs)


def test_chains_of_literals_only(real_jax):
    # Every operand is a literal: the whole chain is computed when planned.
    def case(jax):
        def f(x):
            lax, jnp = jax.lax, jax.numpy
            a = lax.select(jnp.int32(-2) < 0, jnp.int32(-2) + 5, jnp.int32(-2))
            b = lax.select_n(jnp.int32(9), jnp.int32(4), jnp.int32(6))  # clamped to the last case
            c = lax.select_n(jnp.int32(-4), jnp.int32(4), jnp.int32(6))  # clamped to the first
            d = jnp.int32(INT_MAX) + jnp.int32(1)
            return a, b, c, d, a < b, lax.dynamic_slice(x, (a - 4,), (2,))
        return jax.jit(f)

    x = np.arange(6, dtype=np.float32)
    same(case(meshsim)(meshsim.numpy.asarray(x)), case(real_jax)(real_jax.numpy.asarray(x)))


@pytest.mark.parametrize("negative", [False, True])
def test_dynamic_indices_in_loops(real_jax, negative):
    r = rng(f"loops{negative}")
    xs = r.standard_normal((6, 5, 4)).astype(np.float32)

    def case(jax):
        lax = jax.lax

        def body(i, acc):
            j = (i - 6) if negative else i  # a negative index normalised by JAX's equations
            row = lax.dynamic_index_in_dim(xs_, j, keepdims=False)
            col = lax.dynamic_slice_in_dim(row, (i * 3) % 4 - (4 if negative else 0), 1, axis=1)
            return lax.dynamic_update_index_in_dim(acc, acc[j] + col[:, 0], j, 0)

        def f(x):
            nonlocal xs_
            xs_ = x
            return lax.fori_loop(0, 6, body, jax.numpy.zeros((6, 5), jax.numpy.float32))

        xs_ = None
        return jax.jit(f)

    same(case(meshsim)(meshsim.numpy.asarray(xs)), case(real_jax)(real_jax.numpy.asarray(xs)))


@pytest.mark.parametrize("check_vma", [True, False])
def test_per_device_scalars_in_a_shard_map_loop(real_jax, check_vma):
    # Indices that differ per device (from axis_index) and ones equal on every
    # device, inside a loop that passes blocks around the ring.
    r = rng(f"shard_map{check_vma}")
    xs = r.standard_normal((8, 3, 4)).astype(np.float32)

    def case(jax):
        lax, P = jax.lax, jax.sharding.PartitionSpec
        mesh = jax.make_mesh((8,), ("pp",))
        perm = [(d, (d + 1) % 8) for d in range(8)]

        def body(x):
            me = lax.axis_index("pp")

            def step(t, carry):
                acc, block = carry
                k = lax.select(me + t < 8, me + t, me + t - 8)  # varies by device
                j = lax.select(t % 2 == 0, -1, 0)  # equal on every device
                row = lax.dynamic_index_in_dim(block[0], j, keepdims=False)
                acc = lax.dynamic_update_index_in_dim(acc, acc[k - 8] + row, k - 8, 0)
                return acc, lax.ppermute(block, "pp", perm)

            acc = jax.numpy.zeros((8, 4), jax.numpy.float32)
            if check_vma:
                acc = lax.pcast(acc, ("pp",), to="varying")
            return lax.fori_loop(0, 8, step, (acc, x))[0][None]

        f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("pp"), out_specs=P("pp"),
                                  check_vma=check_vma))
        return lambda x: f(jax.device_put(x, jax.sharding.NamedSharding(mesh, P("pp"))))

    same(case(meshsim)(meshsim.numpy.asarray(xs)), case(real_jax)(real_jax.numpy.asarray(xs)))


def test_scalar_results_are_returned_with_their_types(real_jax):
    # Results of a run leave it as tensors of their own dtype and weak type.
    def case(jax):
        def f(i, n):
            k = jax.lax.select(i < 0, i + n, i)
            return k, k < n, k * 2 + 1, jax.lax.convert_element_type(k, jax.numpy.float32)
        return jax.jit(f)

    for i in (-3, 0, 4):
        ours = case(meshsim)(meshsim.numpy.int32(i), 5)
        theirs = case(real_jax)(real_jax.numpy.int32(i), 5)
        same(ours, theirs)
        for a, b in zip(ours, theirs):
            assert getattr(a, "weak_type", None) == getattr(b, "weak_type", None)


@pytest.mark.parametrize("in_shard_map", [False, True])
def test_table_entries_and_converted_literals(real_jax, in_shard_map):
    # A schedule table read entry by entry (dynamic_slice to one element, then
    # squeeze or reshape to 0-d, int32 and bool), literal indices converted
    # (int32 -> int32, int32 <-> bool), and arithmetic on the entries: the
    # pipeline schedules' form. Per device inside shard_map, the row is the
    # device's own.
    r = rng(f"table{in_shard_map}")
    table = r.integers(-9, 9, size=(8, 7)).astype(np.int32)
    flags = r.random((8, 7)) < 0.5

    def case(jax):
        lax, jnp, P = jax.lax, jax.numpy, jax.sharding.PartitionSpec

        def read(t, fl, row):
            out = []
            for k in range(7):
                col = lax.convert_element_type(k, jnp.int32)  # weak int32 -> int32
                entry = lax.squeeze(lax.dynamic_slice(t, (row, col), (1, 1)), (0, 1))
                flag = jnp.reshape(lax.dynamic_slice(fl, (row, col), (1, 1)), ())
                lit = lax.convert_element_type(jnp.int32(k - 3), jnp.bool_)
                back = lax.convert_element_type(lit, jnp.int32)
                nonzero = lax.convert_element_type(entry, jnp.bool_)  # not a literal: its kernel
                pick = lax.select_n(flag & lit, entry * 2 - back, entry + col)
                out += [pick, lax.select(nonzero, back, -col), flag | lit]
            return out

        if not in_shard_map:
            f = jax.jit(lambda t, fl, i: read(t, fl, i))
            return lambda t, fl: [f(t, fl, jnp.int32(i)) for i in (0, 3, -1)]
        mesh = jax.make_mesh((8,), ("pp",))

        def body(t, fl):
            me = lax.axis_index("pp")
            return [v[None] for v in read(t, fl, me)]

        f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P(), P()), out_specs=P("pp")))
        return f

    same(case(meshsim)(meshsim.numpy.asarray(table), meshsim.numpy.asarray(flags)),
         case(real_jax)(real_jax.numpy.asarray(table), real_jax.numpy.asarray(flags)))

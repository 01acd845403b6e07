"""copy.copy, copy.deepcopy and pickle of arrays, as JAX 0.10.2 has them: a copy keeps the
value, dtype, weak type, sharding and commitment (programs deep-copy their sharded inputs
before timing or checkpointing them); an unpickled array is the value on the default device,
uncommitted, with its weak type; key arrays and pytrees of arrays copy and pickle too; under
jit a copy is a `copy_p` equation."""
import copy
import pickle

import numpy as np
import pytest

import meshsim

DTYPES = ["float32", "int32", "bfloat16", "bool", "complex64", "uint8", "float16"]


def _describe(x):
    return (type(x).__name__ if not hasattr(x, "sharding") else "array", x.shape, str(x.dtype),
            getattr(x, "weak_type", None), repr(x.sharding), x.committed)


def _cases(j, rng):
    """Arrays made as programs make them: fresh, committed to one device, sharded over a mesh,
    weakly typed, a key, in a pytree."""
    jnp = j.numpy
    dtype = DTYPES[int(rng.integers(len(DTYPES)))]
    shape = tuple(int(d) for d in rng.integers(1, 4, size=int(rng.integers(0, 3))))
    host = (rng.normal(size=shape) * 3).astype(np.float32)
    mesh = j.make_mesh((4, 2), ("a", "b"), axis_types=(j.sharding.AxisType.Explicit,) * 2)
    sharded = j.device_put(jnp.asarray(rng.normal(size=(8, 6)), jnp.float32),
                           j.sharding.NamedSharding(mesh, j.sharding.PartitionSpec("a", None)))
    return {
        "fresh": jnp.asarray(host, dtype=dtype),
        "committed": j.device_put(jnp.asarray(host, dtype=dtype), j.devices()[int(rng.integers(8))]),
        "sharded": sharded,
        "weak": jnp.broadcast_to(2.5, shape),
        "weak scalar": jnp.array(2.0) * 3,
        "key": j.random.key(int(rng.integers(100))),
    }


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_copies_keep_what_jax_keeps(real_jax, seed, how):
    do = {"copy": copy.copy, "deepcopy": copy.deepcopy,
          "pickle": lambda x: pickle.loads(pickle.dumps(x))}[how]
    ours = _cases(meshsim, np.random.default_rng(seed))
    theirs = _cases(real_jax, np.random.default_rng(seed))
    for name in ours:
        got, want = do(ours[name]), do(theirs[name])
        assert got is not ours[name]
        assert _describe(got) == _describe(want), name
        if name == "key":
            got, want = meshsim.random.key_data(got), real_jax.random.key_data(want)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_deepcopy_of_a_pytree_of_arrays(real_jax):
    def tree(j):
        jnp = j.numpy
        x = jnp.arange(6.0).reshape(2, 3)
        return {"params": [x, (x * 2, 3)], "step": jnp.int32(4)}

    got, want = copy.deepcopy(tree(meshsim)), copy.deepcopy(tree(real_jax))
    assert str(meshsim.tree.structure(got)) == str(real_jax.tree.structure(want))
    for a, b in zip(meshsim.tree.leaves(got), real_jax.tree.leaves(want)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_copy_under_jit_is_a_copy_equation(real_jax):
    def f(j):
        return str(j.make_jaxpr(lambda x: copy.deepcopy(x) + copy.copy(x))(j.numpy.ones(3)))

    assert f(meshsim) == f(real_jax)

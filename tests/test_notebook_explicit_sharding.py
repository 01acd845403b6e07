"""The seed notebook's "Explicit Sharding" section under `import meshsim as jax`,
with its printed output in today's notation (P(...), AbstractMesh with
platform=cpu) as JAX 0.10.2 prints it."""
import numpy as np

import meshsim as jax
import meshsim.numpy as jnp
from meshsim.sharding import (AxisType, NamedSharding, PartitionSpec as P, get_abstract_mesh,
                              reshard)

global_mesh = jax.make_mesh((4, 2), ("dp", "tp"),
                            axis_types=(AxisType.Explicit, AxisType.Explicit))
shard_dp = NamedSharding(global_mesh, P("dp", None))
shard_tp = NamedSharding(global_mesh, P(None, "tp"))

ABSTRACT = ("AbstractMesh('dp': 4, 'tp': 2, axis_types=(Explicit, Explicit), device_kind=cpu, "
            "num_cores=None, platform=cpu)")


def _inputs():
    x = jax.random.normal(jax.random.key(0), (1024, 4096))
    x = jax.device_put(x, shard_dp)
    w = jax.random.normal(jax.random.key(1), (4096, 256))
    w = jax.device_put(w, shard_tp)
    return x, w


def _f(x, w):
    jax.debug.inspect_array_sharding(x, callback=lambda x: print(f"\nShard of x: {x}"))
    jax.debug.inspect_array_sharding(w, callback=lambda w: print(f"Shard of w: {w}\n"))
    y = x @ w
    print(f"Current mesh is: {get_abstract_mesh()}")
    y = jax.lax.with_sharding_constraint(y, NamedSharding(global_mesh, P("dp", "tp")))
    y_resharded = reshard(y, P())
    y_resharded_2 = reshard(y, P("tp", "dp"))
    return y, y_resharded, y_resharded_2


def test_explicit_sharding_cells(capsys):
    with jax.set_mesh(global_mesh):
        x, w = _inputs()
        print(f"{jax.typeof(x)=}")
        print(f"{jax.typeof(w)=}")
        y, y_resharded, y_resharded_2 = jax.jit(_f)(x, w)
        print(f"{jax.typeof(y)=}")
        print(f"{jax.typeof(y_resharded)=}")
        print(f"{jax.typeof(y_resharded_2)=}")
        assert jnp.all(y == y_resharded)
        assert jnp.all(y_resharded == y_resharded_2)
    assert capsys.readouterr().out == (
        "jax.typeof(x)=ShapedArray(float32[1024@dp,4096])\n"
        "jax.typeof(w)=ShapedArray(float32[4096,256@tp])\n"
        f"Current mesh is: {ABSTRACT}\n"
        "\n"
        "Shard of x: NamedSharding(mesh=Mesh('dp': 4, 'tp': 2, axis_types=(Auto, Auto)), "
        "spec=P('dp',), memory_kind=device)\n"
        "Shard of w: NamedSharding(mesh=Mesh('dp': 4, 'tp': 2, axis_types=(Auto, Auto)), "
        "spec=P(None, 'tp'), memory_kind=device)\n"
        "\n"
        "jax.typeof(y)=ShapedArray(float32[1024@dp,256@tp])\n"
        "jax.typeof(y_resharded)=ShapedArray(float32[1024,256])\n"
        "jax.typeof(y_resharded_2)=ShapedArray(float32[1024@tp,256@dp])\n")
    np.testing.assert_allclose(np.asarray(y), np.asarray(x) @ np.asarray(w), rtol=1e-4, atol=1e-3)
    assert y.sharding == NamedSharding(global_mesh, P("dp", "tp"))
    assert y_resharded.sharding.spec == P(None, None)


def test_explicit_sharding_collectives():
    """The matmul moves no bytes; reshard to P() is an all-gather per dim, minor first, as XLA
    (over tp, then dp: 7 blocks in all), to P('tp', 'dp') one all-to-all over both axes."""
    with jax.set_mesh(global_mesh):
        x, w = _inputs()
        f = jax.jit(lambda x, w: (x @ w, reshard(x @ w, P()), reshard(x @ w, P("tp", "dp"))))
        f(x, w)  # traced once, outside the record
        with jax.debug.record_collectives() as log:
            y, y_all, y_a2a = f(x, w)
    block = 1024 * 256 * 4 // 8  # bytes of one device's block of y
    assert [(c.name, c.axes) for c in log] == [("all_gather", ("tp",)), ("all_gather", ("dp",)),
                                               ("all_to_all", ("dp", "tp"))]
    tp_size = global_mesh.shape["tp"]
    assert log[0].bytes == (tp_size - 1) * block and log[1].bytes == (8 - tp_size) * block
    assert 0 < log[2].bytes <= block
    np.testing.assert_array_equal(np.asarray(y_all), np.asarray(y))
    np.testing.assert_array_equal(np.asarray(y_a2a), np.asarray(y))
    assert y_a2a.sharding.spec == P("tp", "dp")
    # Each device holds only its block; the replicated result is stored once.
    assert y.distinct_buffers() == 8 and y_all.distinct_buffers() == 1

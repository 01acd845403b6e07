"""Small programs in the style of third-party JAX parallelism code, each run under meshsim and
JAX 0.10.2 (8 CPU devices) with the same source, comparing what they print and raise:
per-example clipped gradients with a vmap axis name, a sharded data loader built with
make_array_from_callback, a pjit-era program over a mesh_utils device mesh, and a transformer
block under jax.checkpoint policies."""
import contextlib
import io
import warnings
from functools import partial

import numpy as np
import pytest

import meshsim


@pytest.fixture(scope="module")
def libs(real_jax):
    return meshsim, real_jax


def _run(program, jax):
    """What `program(jax)` prints, then the class and first line of what it raises, if anything."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            program(jax)
        except Exception as e:  # noqa: BLE001 - the class name and text are compared
            print(type(e).__name__, str(e).splitlines()[0])
    return out.getvalue()


def per_example_clipping(jax):
    jnp = jax.numpy

    def init(key, sizes):
        params = []
        for k, (a, b) in zip(jax.random.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:])):
            params.append((jax.random.normal(k, (a, b)) / jnp.sqrt(a), jnp.zeros(b)))
        return params

    def predict(params, x):
        for w, b in params[:-1]:
            x = jax.nn.relu(x @ w + b)
        w, b = params[-1]
        return x @ w + b

    def loss(params, x, y):
        return jnp.mean((predict(params, x[None]) - y[None]) ** 2)

    @partial(jax.vmap, in_axes=(None, 0, 0), axis_name="batch")
    def clipped_grad(params, x, y):
        g = jax.grad(loss)(params, x, y)
        norm = jnp.sqrt(sum(jnp.sum(t ** 2) for t in jax.tree.leaves(g)))
        g = jax.tree.map(lambda t: t / jnp.maximum(1.0, norm / 0.5), g)
        return jax.lax.pmean(g, "batch"), jax.lax.psum(norm > 0.5, "batch")

    params = init(jax.random.key(0), [6, 16, 3])
    x = jax.random.normal(jax.random.key(1), (8, 6))
    y = jax.random.normal(jax.random.key(2), (8, 3))
    g, clipped = jax.jit(clipped_grad)(params, x, y)
    print("clipped examples:", clipped[0], clipped.dtype)
    print("grad shapes:", jax.tree.map(jnp.shape, g))
    print("w0 row sum: %.4f" % float(jnp.sum(g[0][0][0])))
    step = jax.jit(lambda p, x, y: jax.tree.map(lambda a, b: a - 0.1 * b[0], p, clipped_grad(p, x, y)[0]))
    for i in range(3):
        params = step(params, x, y)
        print(i, "loss %.4f" % float(jnp.mean(jax.vmap(loss, (None, 0, 0))(params, x, y))))


def sharded_loader(jax):
    jnp = jax.numpy
    NamedSharding, P = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
    dataset = np.arange(64 * 5, dtype=np.float32).reshape(64, 5)
    sharding = NamedSharding(mesh, P("data"))
    w = jax.device_put(jnp.ones((5, 4)), NamedSharding(mesh, P(None, "model")))

    @jax.jit
    def step(w, batch):
        h = batch @ w
        grad = jnp.einsum("bi,bj->ij", batch, h, out_sharding=NamedSharding(mesh, P(None, "model"))) / batch.shape[0]
        return w - 1e-3 * grad, jnp.sum(h)

    for start in range(0, 32, 16):
        seen = []

        def read(index, start=start):
            seen.append(index)
            return dataset[start:start + 16][index]

        batch = jax.make_array_from_callback((16, 5), sharding, read)
        print(batch.shape, batch.sharding.spec, jax.typeof(batch), "reads:", len(seen))
        print([(s.index, s.device.id) for s in batch.addressable_shards][:3])
        w, total = step(w, batch)
        print("total %.6g" % float(total), jax.typeof(w), w.sharding.spec)
    blocks = [(np.asarray(s.data), s.device) for s in batch.addressable_shards]
    rebuilt = jax.make_array_from_single_device_arrays(
        (16, 5), sharding, [jax.device_put(b, d) for b, d in blocks])
    print(bool(jnp.array_equal(rebuilt, batch)), rebuilt.sharding.spec)
    with jax.set_mesh(mesh):
        jnp.einsum("bi,bj->ij", batch, batch)  # contracting a sharded batch: JAX's error


def pjit_program(jax):
    # `from jax.experimental import mesh_utils, multihost_utils`, for either library
    mesh_utils = __import__(f"{jax.__name__}.experimental.mesh_utils").experimental.mesh_utils
    multihost_utils = __import__(f"{jax.__name__}.experimental.multihost_utils").experimental.multihost_utils
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pjit = __import__(f"{jax.__name__}.experimental.pjit").experimental.pjit.pjit
    print([(w.category.__name__, str(w.message)) for w in caught])
    jnp = jax.numpy
    Mesh, NamedSharding, P = jax.sharding.Mesh, jax.sharding.NamedSharding, jax.sharding.PartitionSpec
    devices = mesh_utils.create_device_mesh((4, 2))
    print(devices.shape, [d.id for d in devices.flat])
    mesh = Mesh(devices, axis_names=("x", "y"))
    print(mesh)

    def layer(w, x):
        return jnp.tanh(x @ w)

    f = pjit(layer, in_shardings=(NamedSharding(mesh, P(None, "y")), NamedSharding(mesh, P("x", None))),
             out_shardings=NamedSharding(mesh, P("x", "y")))
    w = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    x = np.random.default_rng(1).normal(size=(8, 6)).astype(np.float32)
    with mesh:
        out = f(w, x)
    print(out.shape, out.sharding.spec, round(float(out.sum()), 4))
    print(np.allclose(out, np.tanh(x @ w), atol=1e-5))
    print(pjit(lambda a: a * 2)(x).sharding)
    print(jax.jit(layer, in_shardings=(None, NamedSharding(mesh, P("x"))))(w, x).sharding)
    print(multihost_utils.process_allgather(out).shape)
    print(mesh_utils.create_device_mesh((2, 2, 2)).shape)
    mesh_utils.create_device_mesh((3, 3))


def checkpointed_block(jax):
    jnp = jax.numpy
    ad_checkpoint = __import__(f"{jax.__name__}.ad_checkpoint").ad_checkpoint

    def attention(q, k, v):
        s = jnp.einsum("td,sd->ts", q, k) / jnp.sqrt(q.shape[-1])
        return jax.nn.softmax(s, axis=-1) @ v

    def block(params, x):
        h = jax.nn.standardize(x, axis=-1)
        q, k, v = (h @ params[n] for n in ("wq", "wk", "wv"))
        x = x + ad_checkpoint.checkpoint_name(attention(q, k, v) @ params["wo"], "attn_out")
        h = jax.nn.standardize(x, axis=-1)
        return x + jax.nn.gelu(h @ params["w1"]) @ params["w2"]

    d = 8
    keys = jax.random.split(jax.random.key(0), 6)
    params = {n: jax.random.normal(k, s) * 0.1 for n, k, s in zip(
        ("wq", "wk", "wv", "wo", "w1", "w2"), keys, [(d, d)] * 4 + [(d, 4 * d), (4 * d, d)])}
    x = jax.random.normal(jax.random.key(7), (5, d))

    def loss(block_fn, params, x):
        return jnp.sum(jnp.tanh(block_fn(params, x)) * x)

    cp = jax.checkpoint_policies
    policies = {"none": None, "dots": cp.dots_saveable, "nothing": cp.nothing_saveable,
                "dots_no_batch": cp.dots_with_no_batch_dims_saveable,
                "names": cp.save_only_these_names("attn_out"), "everything": cp.everything_saveable,
                "offload": cp.save_and_offload_only_these_names(
                    names_which_can_be_saved=["attn_out"], names_which_can_be_offloaded=[],
                    offload_src="device", offload_dst="pinned_host")}
    reference = jax.grad(partial(loss, block))(params, x)
    for name, policy in policies.items():
        fn = block if policy is None else jax.checkpoint(block, policy=policy)
        g = jax.jit(jax.grad(partial(loss, fn)))(params, x)
        same = all(np.allclose(a, b, atol=1e-5) for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(reference)))
        print(name, same, "%.4f" % float(jnp.sum(jnp.abs(g["wq"]))))
    step = jax.checkpoint(lambda c, _: (block(params, c), None), prevent_cse=False)
    out, _ = jax.lax.scan(step, x, None, length=3)
    print("scan %.4f" % float(jnp.sum(jnp.abs(out))))


def collective_matmul(jax):
    # The legacy import path and signature: `from jax.experimental.shard_map import shard_map`
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shmap = __import__(f"{jax.__name__}.experimental.shard_map").experimental.shard_map.shard_map
    print([(w.category.__name__, str(w.message)) for w in caught])
    jnp, lax = jax.numpy, jax.lax
    P = jax.sharding.PartitionSpec
    mesh = jax.make_mesh((2, 4), ("X", "Y"))
    A = jax.device_put(jnp.arange(16 * 32).reshape(16, 32), jax.NamedSharding(mesh, P("X", "Y")))
    W = jax.device_put(jnp.arange(32 * 24).reshape(32, 24) % 7, jax.NamedSharding(mesh, P(None, "Y")))

    def collective(lhs, rhs, varying_accumulator=True):
        axis_size = lax.psum(1, axis_name="Y")  # a Python int, usable in range()
        constants = (lax.psum(2.5, ("X", "Y")), lax.psum(np.float32(2), "Y"), lax.psum(np.ones(2, np.int32), "X"))
        print("axis_size", type(axis_size).__name__, axis_size, [(type(c).__name__, c.dtype.name if
                                                                   hasattr(c, "dtype") else c) for c in constants])
        chunk = lhs.shape[1]

        def step(i, carry):
            accum, lhs = carry
            accum = accum + lhs @ lax.dynamic_slice_in_dim(rhs, i * chunk, chunk)
            return accum, lax.ppermute(lhs, "Y", perm=[(j, (j - 1) % axis_size) for j in range(axis_size)])

        accum = jnp.zeros((lhs.shape[0], rhs.shape[1]), lhs.dtype)
        if varying_accumulator:
            accum = lax.pcast(accum, ("X", "Y"), to="varying")
        accum, lhs = lax.fori_loop(0, axis_size - 1, step, (accum, lhs), unroll=True)
        return accum + lhs @ lax.dynamic_slice_in_dim(rhs, (axis_size - 1) * chunk, chunk)

    f = jax.jit(shmap(collective, mesh, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y")))
    out = f(A, W)
    print(out.dtype, out.sharding.spec, int(out.sum()), int(out[3, 5]))
    shmap(partial(collective, varying_accumulator=False), mesh, in_specs=(P("X", "Y"), P(None, "Y")),
          out_specs=P("X", "Y"))(A, W)


def compiled_out_shardings(jax):
    jnp = jax.numpy
    NamedSharding, P = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
    mesh = jax.make_mesh((2, 2), ("X", "Y"), devices=jax.devices()[:4],
                         axis_types=(jax.sharding.AxisType.Auto,) * 2)
    a = jnp.ones((8, 16), dtype=jnp.bfloat16, device=NamedSharding(mesh, P("X", "Y")))
    b = jnp.ones((16, 12), dtype=jnp.bfloat16, device=NamedSharding(mesh, P("Y", None)))

    def matmul_square(a, b):
        return jnp.einsum("bd,df->bf", jnp.square(a), b)

    for spec in (P("X", None), P("X"), P(None, "Y"), P(), None):
        jitted = jax.jit(matmul_square, out_shardings=None if spec is None else NamedSharding(mesh, spec))
        compiled = jitted.lower(a, b).compile()
        out = compiled(a, b)
        print(spec, out.sharding.spec, compiled.output_shardings.spec, jitted(a, b).sharding.spec,
              [s.spec for s in compiled.input_shardings[0]], float(out[0, 0]))
    pinned = jax.jit(lambda x: x * 2, in_shardings=NamedSharding(mesh, P("X")))
    compiled = pinned.lower(jax.ShapeDtypeStruct((8, 4), jnp.float32)).compile()
    print(compiled.input_shardings[0][0].spec, compiled(np.ones((8, 4), np.float32)).sharding.spec)


def tied_embedding_grads(jax):
    # An embedding looked up by token (a gather) and used elsewhere whole: its gradient
    # scatter-adds into rows split over a mesh axis (the broadcast zeros it starts from are
    # one buffer on every device).
    jnp = jax.numpy
    NamedSharding, P = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
    mesh = jax.make_mesh((2, 2, 2), ("data", "fsdp", "tensor"), axis_types=(jax.sharding.AxisType.Auto,) * 3)
    table = np.random.default_rng(1).normal(size=(64, 16)).astype(np.float32)
    tokens = np.random.default_rng(0).integers(0, 64, size=(8, 4)).astype(np.int32)

    def loss(e, t):
        x = jnp.take(e, t, axis=0)
        return jnp.sum(jnp.sin(x)) + jnp.sum(jnp.cos(e))

    def scatter_into_zeros(z, t, u):
        return jnp.zeros(z.shape).at[t].add(u) * z

    updates = np.random.default_rng(2).normal(size=(10, 16)).astype(np.float32)
    for spec in (P(), P("tensor"), P(None, "fsdp"), P("tensor", "fsdp"), P(("data", "fsdp"))):
        e = jax.device_put(table, NamedSharding(mesh, spec))
        eager, jitted = jax.grad(loss)(e, tokens), jax.jit(jax.grad(loss))(e, tokens)
        scattered = jax.jit(scatter_into_zeros)(e, tokens[:, 0].repeat(2)[:10], updates)
        print(spec, "%.3f %.3f" % (float(jnp.abs(eager).sum()), float(jnp.abs(jitted).sum())),
              bool(np.allclose(eager, jitted, atol=1e-5)), jitted.sharding.spec,
              "%.3f" % float(jnp.abs(scattered).sum()))


def pjit_context_meshes(jax):
    # jit takes the mesh jax.set_mesh sets, the deprecated pjit the one `with mesh:` enters
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pjit = __import__(f"{jax.__name__}.experimental.pjit").experimental.pjit.pjit
    Mesh, P = jax.sharding.Mesh, jax.sharding.PartitionSpec
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("dp", "mp"))
    x = np.arange(32, dtype=np.float32).reshape(8, 4)

    def constrained(a):
        return jax.lax.with_sharding_constraint(a * 2, P("dp"))

    for name, api in (("jit", jax.jit), ("pjit", pjit)):
        for context in ("set_mesh", "with mesh", "none"):
            for fn in (api(lambda a: a * 2, in_shardings=P("dp"), out_shardings=P(None, "mp")), api(constrained)):
                scope = {"with mesh": lambda: mesh, "set_mesh": lambda: jax.set_mesh(mesh),
                         "none": contextlib.nullcontext}[context]
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", DeprecationWarning)
                        with scope():
                            out = fn(x)
                    print(name, context, out.sharding.spec, float(out.sum()))
                except Exception as e:  # noqa: BLE001 - the class name and text are compared
                    print(name, context, type(e).__name__, str(e))
    scaled = jax.jit(lambda a, n, b: a * n + b, static_argnums=1,
                     in_shardings=(jax.NamedSharding(mesh, P("dp")), jax.NamedSharding(mesh, P(None, "mp"))))
    out = scaled(x, 3, x)
    print(out.sharding.spec, float(out.sum()))
    compiled = scaled.lower(x, 3, x).compile()
    print([s.spec for s in compiled.input_shardings[0]], compiled(x, x).sharding.spec)
    for bad in ("in_axis_resources", "out_axis_resources"):
        for api in (jax.jit, pjit):
            try:
                api(lambda a: a, **{bad: P("dp")})
            except TypeError as e:
                print(type(e).__name__, e)


def ring_attention(jax):
    jnp, lax = jax.numpy, jax.lax
    P = jax.sharding.PartitionSpec
    mesh = jax.make_mesh((4, 2), ("sp", "dp"))
    B, T, H, D = 2, 16, 2, 4

    def reference(q, k, v):
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(D)
        s = jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, -jnp.inf)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v)

    def ring(q, k, v):
        n, me, tq = lax.axis_size("sp"), lax.axis_index("sp"), q.shape[1]
        carry = (jnp.zeros(q.shape), jnp.full((q.shape[0], H, tq), -jnp.inf), jnp.zeros((q.shape[0], H, tq)))
        carry = tuple(lax.pcast(a, ("sp", "dp"), to="varying") for a in carry)

        def body(i, c):
            o, m, l, k, v = c
            s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(D)
            visible = (me * tq + jnp.arange(tq))[:, None] >= (((me - i) % n) * tq + jnp.arange(tq))[None, :]
            s = jnp.where(visible, s, -jnp.inf)
            m_new = jnp.maximum(m, s.max(-1))
            safe = jnp.where(jnp.isfinite(m_new), m_new, 0.0)
            p = jnp.exp(s - safe[..., None])
            scale = jnp.exp(jnp.where(jnp.isfinite(m), m - safe, -jnp.inf))
            o = o * scale.transpose(0, 2, 1)[..., None] + jnp.einsum("bhqk,bkhd->bqhd", p, v)
            k, v = lax.ppermute((k, v), "sp", [(j, (j + 1) % n) for j in range(n)])
            return o, m_new, l * scale + p.sum(-1), k, v

        o, _, l, _, _ = lax.fori_loop(0, n, body, (*carry, k, v))
        return o / l.transpose(0, 2, 1)[..., None]

    rng = np.random.default_rng(0)
    qkv = [rng.normal(size=(B, T, H, D)).astype(np.float32) for _ in range(3)]
    sharded = [jax.device_put(a, jax.NamedSharding(mesh, P("dp", "sp"))) for a in qkv]
    attn = jax.jit(jax.shard_map(ring, mesh=mesh, in_specs=P("dp", "sp"), out_specs=P("dp", "sp")))
    out = attn(*sharded)
    print(jax.typeof(out), np.allclose(out, reference(*qkv), atol=1e-5))
    grads = jax.jit(jax.grad(lambda *a: jnp.sum(attn(*a) ** 2), argnums=(0, 1, 2)))(*sharded)
    expected = jax.grad(lambda *a: jnp.sum(reference(*a) ** 2), argnums=(0, 1, 2))(*qkv)
    print([str(jax.typeof(g)) for g in grads], [bool(np.allclose(g, e, atol=1e-4)) for g, e in zip(grads, expected)])


def eager_constraints(jax):
    # eqx.filter_shard-style code: with_sharding_constraint on concrete arrays, outside jit
    jnp = jax.numpy
    NamedSharding, P, AxisType = jax.sharding.NamedSharding, jax.sharding.PartitionSpec, jax.sharding.AxisType
    for axis_type in (AxisType.Auto, AxisType.Explicit):
        mesh = jax.make_mesh((8,), ("batch",), axis_types=(axis_type,))
        for value in (jnp.ones((16, 3)), jnp.zeros(()), np.ones((8, 2), np.float32)):
            for spec in (P(), P("batch")):
                try:
                    out = jax.lax.with_sharding_constraint(value, NamedSharding(mesh, spec))
                    print(axis_type, spec, out.sharding.spec, jax.typeof(out), float(out.sum()))
                except Exception as e:  # noqa: BLE001 - the class name and text are compared
                    print(axis_type, spec, type(e).__name__, e)

    @jax.jit
    def shape_of_closure(x):
        struct = jax.eval_shape(lambda: x * 2)  # closes over the tracer x
        return jnp.zeros(struct.shape, struct.dtype) + x

    print(shape_of_closure(jnp.arange(3.0)))


def uneven_parameter_constraints(jax):
    # FSDP-style initialisation inside jit: each parameter constrained by logical rules that do not
    # divide every dimension (a [32,1] head over a 4-way 'model' axis), then drawn
    jnp, P = jax.numpy, jax.sharding.PartitionSpec
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    shapes = {"w_in": (1, 32), "head": (32, 1), "odd": (6, 32), "tiny": (3, 8), "wide": (8, 64)}
    specs = [P("data", "model"), P("model", "data"), P(("data", "model")), P(None, "model")]

    def init(key):
        keys = jax.random.split(key, len(shapes) * len(specs))
        out, i = {}, 0
        for name, shape in shapes.items():
            for spec in specs:
                w = jax.random.normal(keys[i], shape) * 0.1
                w = jax.lax.with_sharding_constraint(w, jax.NamedSharding(mesh, spec))
                out[f"{name} {spec}"] = (w, jnp.tanh(w).sum(1))
                i += 1
        return out

    for name, (w, s) in jax.jit(init)(jax.random.key(0)).items():
        print(name, w.sharding.spec, s.sharding.spec, f"{float(jnp.abs(w).sum()):.4f}")
    with jax.set_mesh(mesh):
        w = jax.jit(lambda: jax.lax.with_sharding_constraint(jnp.ones((32, 1)), P(None, "model")))()
        print(w.sharding.spec, jax.typeof(w))
    for shape, spec in [((1, 32), P(None, "model")), ((8, 64), P("data", "model")),
                        ((2, 8), P("model", "data")), ((4, 128), P(None, "data")), ((64, 8), P("model"))]:
        jax.debug.visualize_array_sharding(jax.device_put(jnp.ones(shape), jax.NamedSharding(mesh, spec)))
    try:
        jax.lax.with_sharding_constraint(jnp.ones((32, 1)), jax.NamedSharding(mesh, P(None, "model")))
    except Exception as e:  # noqa: BLE001 - the class name and text are compared
        print(type(e).__name__, e)


def non_array_arguments(jax):
    # the mistakes of a first jitted method: an object, a string or a config passed where
    # arrays go, to jit, make_jaxpr, eval_shape, grad, jvp and vmap
    jnp = jax.numpy

    class Config:
        def __repr__(self):
            return "Config()"

    class Model:
        def __init__(self):
            self.w = jnp.ones(3)

        @partial(jax.jit, static_argnums=0)
        def ok(self, x):
            return self.w * x

        @jax.jit
        def forward(self, x):
            return self.w * x

    def f(x, y):
        return x

    calls = [lambda: Model().ok(2.0), lambda: Model().forward(2.0),
             lambda: jax.jit(f)(1.0, {"a": [Config()]}), lambda: jax.jit(f)(1.0, y="s"),
             lambda: jax.jit(lambda *a: a[0])(1.0, "x"), lambda: jax.jit(f)(1.0, (2, None)),
             lambda: jax.jit(f, static_argnums=0)(Config(), [1, object()]),
             lambda: jax.make_jaxpr(f)(1.0, Config()), lambda: jax.eval_shape(f, 1.0, Config()),
             lambda: jax.grad(f, argnums=1)(1.0, Config()), lambda: jax.grad(f)("a", 1.0),
             lambda: jax.vmap(f)(jnp.ones(2), Config()), lambda: jax.jvp(f, (1.0, Config()), (1.0, 1.0)),
             lambda: jnp.zeros(4, 4)]
    for call in calls:
        try:
            print(call())
        except TypeError as e:
            print(str(e).split(" at 0x")[0], "|", str(e).split("as an abstract array.")[-1])


def host_callbacks(jax):
    # a host-side metric and logging: scalar results of pure_callback (np scalars as the
    # result type), an io_callback with no result inside jit and under grad, and
    # ShapeDtypeStruct.like of host, committed, uncommitted and traced values
    jnp, np_ = jax.numpy, np
    mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Explicit,))
    x = jax.device_put(jnp.arange(8.0), jax.NamedSharding(mesh, jax.P("x")))

    def host_norm(v):
        return np_.float32(np_.linalg.norm(v))

    @jax.jit
    def step(v):
        norm = jax.pure_callback(host_norm, jax.ShapeDtypeStruct((), jnp.float32), v)
        count = jax.pure_callback(lambda: np_.int32(3), np_.int32(0))
        jax.experimental.io_callback(lambda: print("logged"), None)
        print(jax.ShapeDtypeStruct.like(v))
        try:
            v.sharding
        except AttributeError as e:
            print(e)
        return v * norm + count

    print(step(x))
    print(step(jnp.ones(3)))
    try:
        jax.grad(lambda v: jax.pure_callback(host_norm, jax.ShapeDtypeStruct((), jnp.float32), v))(x)
    except ValueError as e:
        print(e)
    for v in (jnp.arange(3.0), np_.ones((2, 3), np_.int32), 3.0, x, jax.device_put(jnp.ones(2), jax.devices()[2])):
        like = jax.ShapeDtypeStruct.like(v)
        print(like.shape, like.dtype, like.sharding, like.weak_type)


PROGRAMS = [per_example_clipping, sharded_loader, pjit_program, checkpointed_block, collective_matmul,
            compiled_out_shardings, tied_embedding_grads, pjit_context_meshes, ring_attention,
            eager_constraints, uneven_parameter_constraints, non_array_arguments, host_callbacks]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_program_prints_what_jax_prints(libs, program):
    ours, theirs = (_run(program, lib) for lib in libs)
    assert "Error" not in theirs.splitlines()[0]  # the program itself runs under JAX
    assert ours == theirs

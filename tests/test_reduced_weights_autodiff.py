"""Gradients that come out unreduced, against the installed JAX: weights typed reduced
inside shard_map bodies and scans over layers, shard_map outputs declared unreduced, a
gradient accumulator carried unreduced through a scan over microbatches, and the
printed forms of those shard_maps. Shapes are drawn at random per seed; values are
compared once the pending sums are performed, and each device's own term where JAX's
layout fixes it."""
import re

import numpy as np
import pytest

import meshsim

SEEDS = [0, 1, 2]


class Lib:
    """One library (meshsim or JAX) on a 2x4 mesh of Explicit axes X, Y."""

    def __init__(self, jax):
        self.jax, self.jnp, self.lax = jax, jax.numpy, jax.lax
        self.P = jax.sharding.PartitionSpec
        self.mesh = jax.make_mesh((2, 4), ("X", "Y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)

    def put(self, value, *spec, **pending):
        return self.jax.device_put(np.asarray(value, np.float32), self.P(*spec, **pending))

    def whole(self, x):
        """The value with its pending sums performed."""
        return np.asarray(self.jax.reshard(x, self.P(*(None,) * x.ndim)))


@pytest.fixture(scope="module")
def libs(real_jax):
    return Lib(meshsim), Lib(real_jax)


def _data(seed, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) / 2 for s in shapes]


def _sets_sorted(text: str) -> str:
    """Sets of axis names in printed text with their members sorted (Python prints a set in
    hash order)."""
    return re.sub(r"\{('[^{}]*')\}", lambda m: "{" + ", ".join(sorted(m.group(1).split(", "))) + "}", text)


def _both(libs, run):
    """`run(lib)` under each library's mesh, as (meshsim's, JAX's)."""
    out = []
    for lib in libs:
        with lib.jax.set_mesh(lib.mesh):
            out.append(run(lib))
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_shard_map_out_spec_unreduced_grads(libs, seed):
    """A per-device matmul declared unreduced: the backward shard_map receives the cotangent
    reduced, and the operands' gradients are JAX's in value and type."""
    rng = np.random.default_rng(seed)
    m, k, n = (int(v) for v in rng.integers(1, 4, 3) * (1, 2, 1))
    a0, b0 = _data(seed, (m, k), (k, n))

    def run(lib):
        @lib.jax.shard_map(in_specs=(lib.P(None, "X"), lib.P("X", None)),
                           out_specs=lib.P(None, None, unreduced={"X"}))
        def partial(a, b):
            return lib.lax.pcast(a @ b, "X", to="unreduced")

        def loss(a, b):
            return lib.jnp.sum(lib.jax.reshard(partial(a, b), lib.P(None, None)) ** 2)

        a, b = lib.put(a0, None, "X"), lib.put(b0, "X", None)
        ga, gb = lib.jax.jit(lib.jax.grad(loss, argnums=(0, 1)))(a, b)
        return (str(lib.jax.typeof(partial(a, b))), str(lib.jax.typeof(ga)), str(lib.jax.typeof(gb)),
                np.asarray(ga), np.asarray(gb))

    ours, theirs = _both(libs, run)
    assert ours[:3] == theirs[:3]
    for x, y in zip(ours[3:], theirs[3:]):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_reduced_weight_into_shard_map_grad_is_unreduced(libs, seed, jit):
    """A weight typed reduced over X entering a shard_map meets a varying operand through
    the free reduced->varying cast; its gradient comes out unreduced over X."""
    rng = np.random.default_rng(seed)
    b, d, h = 2 * int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(1, 5))
    x0, w0 = _data(seed, (b, d), (d, h))

    def run(lib):
        @lib.jax.shard_map(in_specs=(lib.P("X", None), lib.P(None, None, reduced={"X"})),
                           out_specs=lib.P("X", None))
        def layer(x, w):
            return lib.jnp.tanh(x @ w)

        grad = lib.jax.grad(lambda w, x: lib.jnp.sum(layer(x, w) ** 2))
        grad = lib.jax.jit(grad) if jit else grad
        w = lib.jax.reshard(lib.put(w0), lib.P(None, None, reduced={"X"}))
        dw = grad(w, lib.put(x0, "X", None))
        return str(lib.jax.typeof(dw)), lib.whole(dw), str(lib.jax.make_jaxpr(layer)(lib.put(x0, "X", None), w))

    ours, theirs = _both(libs, run)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-4, atol=1e-5)
    assert ours[2] == theirs[2]


@pytest.mark.parametrize("seed", SEEDS)
def test_grad_through_layer_scan_keeps_each_devices_term(libs, seed):
    """Reduced stacked weights applied by a scan over layers: the gradient is unreduced, and
    the terms the devices along X hold add up to it once (each device keeps a term, not the
    whole sum, which the reshard would count once per device)."""
    rng = np.random.default_rng(seed)
    layers, f, b = int(rng.integers(1, 4)), int(rng.integers(2, 5)), 2 * int(rng.integers(1, 3))
    ws0, x0 = _data(seed, (layers, f, f), (b, f))

    def run(lib):
        def loss(ws, x):
            h, _ = lib.lax.scan(lambda h, w: (lib.jnp.tanh(h @ w), None), x, ws)
            return lib.jnp.sum(h ** 2)

        ws = lib.put(ws0, reduced={"X"})
        g = lib.jax.jit(lib.jax.grad(loss))(ws, lib.put(x0, "X", None))
        blocks = {s.device.id: np.asarray(s.data) for s in g.addressable_shards}
        along_x = [blocks[y] + blocks[4 + y] for y in range(4)]  # devices (0, y) and (1, y)
        return str(lib.jax.typeof(g)), lib.whole(g), along_x

    ours, theirs = _both(libs, run)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-4, atol=1e-5)
    for total in ours[2]:
        np.testing.assert_allclose(total, theirs[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("seed", SEEDS)
def test_unreduced_gradient_accumulator_across_microbatches(libs, seed):
    """Gradient accumulation with one reduction per step: the scan over microbatches carries
    the unreduced gradients; the step's result and its type are JAX's."""
    rng = np.random.default_rng(seed)
    micro, layers, f = int(rng.integers(1, 4)), int(rng.integers(1, 3)), int(rng.integers(2, 5))
    ws0, xs0 = _data(seed, (layers, f, f), (micro, 2, f))

    def run(lib):
        def loss(ws, x):
            h, _ = lib.lax.scan(lambda h, w: (lib.jnp.tanh(h @ w), None), x, ws)
            return lib.jnp.sum(h ** 2)

        @lib.jax.jit
        def step(ws, xs):
            def micro_step(acc, x):
                g = lib.jax.grad(loss)(ws, x)
                assert lib.jax.typeof(g).sharding.spec.unreduced == {"X"}
                return acc + g, None

            acc = lib.jax.reshard(lib.jnp.zeros_like(ws), lib.P(unreduced={"X"}))
            acc, _ = lib.lax.scan(micro_step, acc, xs)
            return lib.jax.reshard(ws, lib.P()) - 0.1 * lib.jax.reshard(acc, lib.P())

        ws, xs = lib.put(ws0, reduced={"X"}), lib.put(xs0, None, "X", None)
        new = step(ws, xs)
        compiled = step.lower(ws, xs).compile()  # arguments with pending sums lower too
        return str(lib.jax.typeof(new)), np.asarray(new), np.asarray(compiled(ws, xs))

    ours, theirs = _both(libs, run)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours[2], theirs[1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("spec", [dict(unreduced={"X"}), dict(reduced={"X"}), dict(unreduced={"X", "Y"})],
                         ids=["unreduced", "reduced", "unreduced_XY"])
def test_shard_map_specs_print_pending_sums(libs, spec):
    """A shard_map equation's in_specs/out_specs name the pending sums of the values they
    describe, as JAX prints them (and no separate parameters for them)."""
    axes = tuple(sorted(next(iter(spec.values()))))

    def run(lib):
        kind = next(iter(spec))
        x = lib.jax.reshard(lib.put(np.ones((4, 4))), lib.P(None, None, **spec))
        body = (lambda v: v) if kind == "unreduced" else (lambda v: lib.lax.pcast(v, axes, to="varying"))
        out = lib.P(None, None, **spec) if kind == "unreduced" else lib.P(axes)
        f = lib.jax.shard_map(body, in_specs=lib.P(None, None, **spec), out_specs=out)
        return _sets_sorted(str(lib.jax.make_jaxpr(f)(x)))

    ours, theirs = _both(libs, run)
    assert ours == theirs

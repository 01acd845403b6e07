"""The mesh executor's two ways of running a stretch of local equations
between collectives — the devices one after the other on the calling thread
when the stretch is light, on the worker threads when it is heavy (a loop or
branch, or large blocks) — and operands lent to kernels rather than copied
(the same variable twice in one equation, read again later, or a result of
the program). Results against NumPy and real JAX; an error raised on one
device unwinds every device and leaves the mesh usable on both paths."""
import zlib

import numpy as np
import pytest

import meshsim as jax


def _data(name, *shape):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return rng.standard_normal(shape).astype(np.float32)


def _mesh(j, devices):
    """A 1-D mesh "d" of the first `devices` devices under meshsim or JAX (`j`),
    Auto so that both take NumPy inputs."""
    return j.make_mesh((devices,), ("d",), devices=j.devices()[:devices],
                       axis_types=(j.sharding.AxisType.Auto,))


# Each body is written against `j` (meshsim or real JAX), or NumPy when `j` is None.

def light(j, x, w, device=None):
    # A few small equations: the same operand twice (x * x), values read again later.
    xp = np if j is None else j.numpy
    y = xp.tanh(x * x + x)
    return xp.tanh(y @ w) + y.mean(-1, keepdims=True) - 0.5 * x


def heavy(j, x, w, device=None):
    # A loop inside the stretch: the devices run on the worker threads.
    def step(c, _):
        return light(j, c, w), (c * c).sum()
    if j is None:
        ys = []
        for _ in range(6):
            x, y = step(x, None)
            ys.append(y)
        return x + sum(ys)
    c, ys = j.lax.scan(step, x, None, length=6)
    return c + ys.sum()


def large(j, x, w, device=None):
    # Blocks big enough that a few plain equations make a heavy stretch.
    xp = np if j is None else j.numpy
    y = xp.tile(x, (1, 1024))
    return (y * y).reshape(x.shape[0], 1024, -1).mean(1) @ w


def branchy(j, x, w, device=None):
    # The branch taken differs by device: each runs its own on the worker threads.
    branches = (lambda a: a * a, lambda a: light(j, a, w), lambda a: heavy(j, a, w))
    if j is None:
        return branches[device % 3](x)
    return j.lax.switch(j.lax.axis_index("d") % 3, branches, x)


@pytest.mark.parametrize("body", [light, heavy, large, branchy], ids=lambda f: f.__name__)
@pytest.mark.parametrize("devices", [1, 4, 8])
def test_bodies_match_jax_and_numpy(real_jax, body, devices):
    x, w = _data(f"x{devices}", devices * 4, 8), _data("w", 8, 8) / 3
    results = []
    for j in (jax, real_jax):
        mesh = _mesh(j, devices)
        f = j.jit(j.shard_map(lambda a, b, j=j: body(j, a, b) - j.lax.psum(a, "d") / devices,
                              mesh=mesh, in_specs=(j.P("d"), j.P()), out_specs=j.P("d")))
        results.append(np.asarray(f(x, w)))
    np.testing.assert_allclose(results[0], results[1], rtol=2e-5, atol=2e-5)
    blocks = np.split(x.astype(np.float64), devices)
    ref = [body(None, b, w, device=d) - sum(blocks) / devices for d, b in enumerate(blocks)]
    np.testing.assert_allclose(results[0], np.concatenate(ref), rtol=1e-4, atol=1e-4)


def test_results_of_the_program_that_are_inputs_or_repeated(real_jax):
    """A program's outputs listing one variable twice, or an input, are given
    back intact (the last read of a variable takes it, earlier ones copy)."""
    x = _data("repeat", 8, 4)
    outs = []
    for j in (jax, real_jax):
        mesh = _mesh(j, 4)

        def body(a):
            def step(c, _):
                y = c * 2
                return y, (y, y, c)
            return j.lax.scan(step, a, None, length=3)

        f = j.jit(j.shard_map(body, mesh=mesh, in_specs=j.P("d"), out_specs=j.P("d")))
        outs.append([np.asarray(v) for v in j.tree.leaves(f(x))])
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


def _failing_on_device(j, devices, bad, body):
    """shard_map of `body` whose block on device `bad` makes a host callback raise."""
    mesh = _mesh(j, devices)

    def check(v):
        if v.ravel()[0] < 0:
            raise ValueError("negative block")
        return v

    def f(a, w):
        a = j.pure_callback(check, j.ShapeDtypeStruct(a.shape, a.dtype), a)
        return body(j, a, w)
    return j.jit(j.shard_map(f, mesh=mesh, in_specs=(j.P("d"), j.P()), out_specs=j.P("d")))


@pytest.mark.parametrize("body", [light, heavy], ids=lambda f: f.__name__)
def test_an_error_on_one_device_is_raised_once_and_the_mesh_stays_usable(body):
    devices, bad = 8, 5
    x, w = np.abs(_data("err", devices * 2, 8)) + 1, _data("w", 8, 8) / 3
    x_bad = x.copy()
    x_bad[bad * 2] = -1
    f = _failing_on_device(jax, devices, bad, body)
    with pytest.raises(jax.errors.JaxRuntimeError,
                       match=r"^INTERNAL: CpuCallback error calling callback on cpu:5 at mesh coordinates "
                             r"\(5,\): Traceback (?s:.*)ValueError: negative block$"):
        np.asarray(f(x_bad, w))
    blocks = np.split(x.astype(np.float64), devices)
    np.testing.assert_allclose(np.asarray(f(x, w)), np.concatenate([body(None, b, w) for b in blocks]),
                               rtol=1e-4, atol=1e-4)

"""vmap of lax.scan is one scan over batched values, as JAX batches it, not a
scan per example: values and gradients against JAX over which of the
constants, carries and xs are batched, at which axis, and scan's direction."""
import itertools
import zlib

import numpy as np
import pytest

import meshsim


def _step(jnp):
    def body(consts, carry, x):
        w, b = consts
        h, count = carry
        h = jnp.tanh(h @ w + x * b)
        return (h, count + 1), h.sum(-1)
    return body


def _scan_fn(jax, reverse):
    jnp = jax.numpy

    def f(w, b, h0, xs):
        body = _step(jnp)
        (h, n), ys = jax.lax.scan(lambda c, x: body((w, b), c, x), (h0, jnp.int32(0)), xs,
                                  reverse=reverse)
        return h, n, ys
    return f


CASES = [axes for axes in itertools.product((None, 0), (None, 0), (None, 0), (None, 0, 1))
         if any(a is not None for a in axes)]


def _args(seed, axes, batch=3, length=5, d=4):
    rng = np.random.default_rng(seed)
    shapes = [(d, d), (d,), (d,), (length, d)]
    args = []
    for shape, axis in zip(shapes, axes):
        if axis is not None:
            shape = shape[:axis] + (batch,) + shape[axis:]
        args.append((rng.standard_normal(shape) * 0.5).astype(np.float32))
    return args


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axes", CASES, ids=str)
def test_vmapped_scan_matches_jax(real_jax, axes, reverse):
    args = _args(zlib.crc32(repr((axes, reverse)).encode()), axes)
    ours = meshsim.vmap(_scan_fn(meshsim, reverse), in_axes=axes)(*args)
    theirs = real_jax.vmap(_scan_fn(real_jax, reverse), in_axes=axes)(*args)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-6, atol=2e-6)


def test_vmapped_scan_is_one_scan_over_the_batch(real_jax):
    args = _args(7, (None, None, None, 0))
    f = meshsim.vmap(_scan_fn(meshsim, False), in_axes=(None, None, None, 0))
    scans = [e for e in meshsim.make_jaxpr(f)(*args).eqns if e.primitive is meshsim.lax.scan_p]
    jax_eqns = real_jax.make_jaxpr(real_jax.vmap(_scan_fn(real_jax, False), in_axes=(None, None, None, 0)))(
        *args).jaxpr.eqns
    jax_scans = [e for e in jax_eqns if e.primitive.name == "scan"]
    assert len(scans) == 1 == len(jax_scans)
    # xs enter batched at dimension 1 (JAX moves the batch off the scanned dimension).
    assert tuple(scans[0].invars[-1].aval.shape) == (5, 3, 4) == tuple(jax_scans[0].invars[-1].aval.shape)


def test_gradient_of_vmapped_scan_matches_jax(real_jax):
    args = _args(11, (None, None, 0, 0))

    def loss(jax):
        f = jax.vmap(_scan_fn(jax, False), in_axes=(None, None, 0, 0))
        return lambda w, b, h0, xs: (f(w, b, h0, xs)[2] ** 2).sum()

    ours = meshsim.grad(loss(meshsim), argnums=(0, 1))(*args)
    theirs = real_jax.grad(loss(real_jax), argnums=(0, 1))(*args)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def test_per_example_gradients_through_a_scan_match_jax(real_jax):
    args = _args(13, (None, None, 0, 0))

    def per_example(jax):
        def loss(w, b, h0, xs):
            return (_scan_fn(jax, False)(w, b, h0, xs)[0] ** 2).sum()
        return jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, None, 0, 0)))

    ours = per_example(meshsim)(*args)
    theirs = per_example(real_jax)(*args)
    assert ours.shape == theirs.shape == (3, 4, 4)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)


def test_vmapped_scan_with_unbatched_xs_and_empty_length(real_jax):
    for length in (0, 1):
        args = _args(17 + length, (0, None, None, None), length=length)
        ours = meshsim.vmap(_scan_fn(meshsim, False), in_axes=(0, None, None, None))(*args)
        theirs = real_jax.vmap(_scan_fn(real_jax, False), in_axes=(0, None, None, None))(*args)
        for a, b in zip(ours, theirs):
            assert a.shape == b.shape
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-6, atol=2e-6)


def _independent_carries(jax, reverse):
    """A scan whose carries and ys each stay batched or unbatched on their own: `a` is batched
    only if its initial value is, the counter never, `acc` once xs are, and `jnp.cos(w)` (a
    ys of constants only) only if `w` is."""
    jnp = jax.numpy

    def f(w, a0, acc0, xs):
        def body(carry, x):
            a, n, acc = carry
            return (a * 2.0, n + 1, acc + x), (jnp.sin(a), x * 3.0, jnp.cos(w))
        return jax.lax.scan(body, (a0, jnp.int32(0), acc0), xs, reverse=reverse)
    return f


INDEPENDENT_CASES = [axes for axes in itertools.product((None, 0), (None, 0), (None, 0), (None, 0, 1))
                     if any(a is not None for a in axes)]


def _independent_args(seed, axes, batch=3, length=4, d=2):
    rng = np.random.default_rng(seed)
    args = []
    for shape, axis in zip([(d,), (d,), (d,), (length, d)], axes):
        if axis is not None:
            shape = shape[:axis] + (batch,) + shape[axis:]
        args.append(rng.standard_normal(shape).astype(np.float32))
    return args


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axes", INDEPENDENT_CASES, ids=str)
def test_unbatched_carries_stay_unbatched(real_jax, axes, reverse):
    """Values (eager and jitted) and, where JAX's elementwise batching does not give an
    unbatched operand a size-1 batch dimension (test_vmap_control_flow.py says why we do not),
    the printed jaxpr: the carries the body keeps unbatched stay so inside the scan, and an
    unbatched result becomes one broadcast_in_dim after it."""
    from test_vmap_control_flow import _plain
    args = _independent_args(zlib.crc32(repr((axes, reverse)).encode()), axes)
    ours_fn = meshsim.vmap(_independent_carries(meshsim, reverse), in_axes=axes)
    theirs_fn = real_jax.vmap(_independent_carries(real_jax, reverse), in_axes=axes)
    theirs = real_jax.tree.leaves(theirs_fn(*args))
    for ours in (ours_fn(*args), meshsim.jit(ours_fn)(*args)):
        for a, b in zip(meshsim.tree.leaves(ours), theirs, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-6, atol=2e-6)
    acc_batched, xs_batched = axes[2] is not None, axes[3] is not None
    if acc_batched and not xs_batched:  # acc + x adds a batched and an unbatched array
        return
    assert _plain(str(meshsim.make_jaxpr(ours_fn)(*args))) == \
        _plain(str(real_jax.make_jaxpr(theirs_fn)(*args)))

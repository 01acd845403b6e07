"""lax.cond / switch / while_loop / fori_loop / scan / map: values against
NumPy loops and real JAX (eager, under jit, inside shard_map with collectives
in the body), jaxprs as JAX prints them, reverse-mode grads against JAX, and
JAX's errors for bad input."""
import numpy as np
import pytest

import meshsim
import meshsim.numpy as mnp
from meshsim import lax

RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(a, b, tol=1e-5):
    for x, y in zip(meshsim.tree.leaves(a), meshsim.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


@pytest.fixture(scope="module")
def jax(real_jax):
    return real_jax


def both(fn, *args, jax):
    """fn written against a module (meshsim or jax), applied to NumPy args."""
    return fn(meshsim, *args), fn(jax, *args)


# --- values ---------------------------------------------------------------------

@pytest.mark.parametrize("pred", [True, False, 0, 3, 0.0, -2.5, np.bool_(True), np.int32(0)])
def test_cond_values(pred, jax):
    x = rand(3, 4)

    def f(m, x):
        return m.lax.cond(pred, lambda a: m.numpy.sin(a) * 2.0, lambda a: a - 1.0, x)

    ours, theirs = both(f, x, jax=jax)
    close(ours, theirs)
    close(ours, np.sin(x) * 2.0 if pred else x - 1.0)
    assert ours.dtype == theirs.dtype


def test_cond_jit_traced_predicate_pytrees_and_operandless(jax):
    x, y = rand(5), rand(5)

    def f(m, x, y):
        @m.jit
        def g(x, y):
            out = m.lax.cond(m.numpy.sum(x) > 0,
                             lambda t: {"a": t[0] + t[1], "b": (t[0] * 2.0,)},
                             lambda t: {"a": t[0] - t[1], "b": (t[1],)}, (x, y))
            k = m.lax.cond(x[0] > 0, lambda: 1.0, lambda: 2.0)  # no operands
            return out, k
        return g(x, y), g(-x, y)

    ours, theirs = both(f, x, y, jax=jax)
    close(ours, theirs)
    assert meshsim.tree.structure(ours) == meshsim.tree.structure(
        meshsim.tree.map(lambda v: 0, meshsim.tree.map(np.asarray, theirs)))


@pytest.mark.parametrize("index", [-3, 0, 1, 2, 7])
def test_switch_clamps_like_jax(index, jax):
    x = rand(4)

    def f(m, x):
        branches = [lambda a: a + 1.0, lambda a: a * 3.0, m.numpy.cos]
        return m.lax.switch(index, branches, x), m.jit(lambda i, a: m.lax.switch(i, branches, a))(index, x)

    ours, theirs = both(f, x, jax=jax)
    close(ours, theirs)
    i = min(max(index, 0), 2)
    close(ours[0], [x + 1.0, x * 3.0, np.cos(x)][i])


def test_while_loop_against_numpy(jax):
    x = rand(3)

    def f(m, x):
        body = lambda c: (c[0] + 1, c[1] * 1.5 + c[0])
        eager = m.lax.while_loop(lambda c: c[0] < 7, body, (0, x))
        jitted = m.jit(lambda n, x: m.lax.while_loop(lambda c: c[0] < n, body, (0, x)))(7, x)
        return eager, jitted

    ours, theirs = both(f, x, jax=jax)
    close(ours, theirs)
    i, v = 0, x.copy()
    while i < 7:
        i, v = i + 1, v * 1.5 + i
    close(ours[0], (i, v))
    assert int(ours[1][0]) == 7


@pytest.mark.parametrize("lower,upper", [(0, 5), (3, 9), (4, 2), (-2, 3)])
def test_fori_loop_static_is_a_scan_dynamic_a_while(lower, upper, jax):
    x = rand(2, 3)

    def f(m, x):
        body = lambda i, c: c * 0.5 + m.numpy.float32(i)
        static = m.jit(lambda x: m.lax.fori_loop(lower, upper, body, x))(x)
        dynamic = m.jit(lambda lo, hi, x: m.lax.fori_loop(lo, hi, body, x))(lower, upper, x)
        return static, dynamic

    ours, theirs = both(f, x, jax=jax)
    close(ours, theirs)
    v = x.copy()
    for i in range(lower, upper):
        v = v * 0.5 + i
    close(ours[0], v)
    names = lambda g, *a: [e.primitive.name for e in meshsim.make_jaxpr(g)(*a).eqns]
    assert "scan" in names(lambda x: lax.fori_loop(lower, upper, lambda i, c: c + 1.0, x), x)
    assert "while" in names(lambda n, x: lax.fori_loop(0, n, lambda i, c: c + 1.0, x), 3, x)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("length", [0, 1, 5])
def test_scan_against_numpy(reverse, length, jax):
    xs = {"a": rand(length, 3), "b": rand(length, 2, 2)}
    w = rand(3)

    def step(m):
        def body(carry, x):
            h, n = carry
            h = m.numpy.tanh(h * w + x["a"])
            return (h, n + 1), {"out": h.sum() + x["b"].sum(), "sq": x["b"] ** 2}
        return body

    def f(m, xs):
        init = (m.numpy.zeros(3), 0)
        return (m.lax.scan(step(m), init, xs, reverse=reverse, unroll=2),
                m.jit(lambda xs: m.lax.scan(step(m), init, xs, reverse=reverse))(xs))

    ours, theirs = both(f, xs, jax=jax)
    close(ours, theirs)
    h, n, outs = np.zeros(3, np.float32), 0, [None] * length
    for i in (reversed(range(length)) if reverse else range(length)):
        h = np.tanh(h * w + xs["a"][i])
        n += 1
        outs[i] = h.sum() + xs["b"][i].sum()
    close(ours[0][0], (h, n))
    if length:
        close(ours[0][1]["out"], np.array(outs))
    assert ours[0][1]["sq"].shape == (length, 2, 2)


def test_scan_without_xs_and_map(jax):
    def f(m):
        carry, ys = m.lax.scan(lambda c, _: (c * 2.0, c), 1.0, None, length=4)
        xs = m.numpy.arange(10.0).reshape(5, 2)
        mapped = [m.lax.map(lambda r: m.numpy.sin(r) + r.sum(), xs, batch_size=b) for b in (None, 1, 2, 5, 7)]
        return carry, ys, mapped

    ours, theirs = both(f, jax=jax)
    close(ours, theirs)
    close(ours[1], np.array([1.0, 2.0, 4.0, 8.0]))


# --- jaxprs ------------------------------------------------------------------------

# (Cases without constants: meshsim prints constants as constvars, JAX inlines literals.)
@pytest.mark.parametrize("case", ["cond", "while", "scan", "map"])
def test_jaxpr_printing_matches_jax(case, jax):
    def build(m):
        lx, jnp = m.lax, m.numpy
        return {
            "cond": (lambda p, x: lx.cond(p, jnp.sin, jnp.cos, x), (True, rand(3))),
            "while": (lambda n, x: lx.while_loop(lambda c: c[0] < n, lambda c: (c[0] + c[0], c[1] * c[1]),
                                                   (n, x)), (np.int32(3), rand(2))),
            "scan": (lambda c, xs: lx.scan(lambda c, a: (c * a, jnp.sin(c)), c, xs), (rand(2), rand(4, 2))),
            "map": (lambda xs: lx.map(jnp.sin, xs), (rand(3, 2),)),
        }[case]

    f, args = build(meshsim)
    g, _ = build(jax)
    assert str(meshsim.make_jaxpr(f)(*args)) == str(jax.make_jaxpr(g)(*args))


# --- autodiff ------------------------------------------------------------------------

def test_grads_of_cond_scan_and_fori_loop_match_jax(jax):
    w, xs, x = rand(3), rand(6, 3), rand(3)

    def losses(m):
        jnp = m.numpy

        def scan_loss(w, xs):
            def body(h, x):
                h = jnp.tanh(h * w + x)
                return h, jnp.sum(h * h)
            h, ys = m.lax.scan(body, jnp.zeros(3), xs)
            return jnp.sum(ys) + jnp.sum(h * w)

        def cond_loss(w, x):
            return jnp.sum(m.lax.cond(jnp.sum(x) > 0, lambda a, b: jnp.sin(a * b) * a,
                                      lambda a, b: a * a - b, w, x))

        def fori_loss(w, x):
            return jnp.sum(m.lax.fori_loop(0, 4, lambda i, c: jnp.cos(c) * w + c, x))

        def reverse_scan_loss(w, xs):
            c, _ = m.lax.scan(lambda c, x: (c * w + jnp.sin(x), None), w, xs, reverse=True)
            return jnp.sum(c)
        return [scan_loss, cond_loss, fori_loss, reverse_scan_loss]

    args = [(w, xs), (w, x), (w, -x), (w, x), (w, xs)]
    for ours, theirs, a in zip(losses(meshsim), losses(jax), args):
        close(meshsim.grad(ours, argnums=(0, 1))(*a), jax.grad(theirs, argnums=(0, 1))(*a), 1e-4)
        close(meshsim.jit(meshsim.grad(ours))(*a), jax.grad(theirs)(*a), 1e-4)


def test_grad_of_cond_takes_the_branch_chosen_in_the_forward_pass(jax):
    f = lambda m: (lambda x: m.lax.cond(x > 1.0, lambda v: v ** 3, lambda v: m.numpy.exp(v), x))
    for x in (0.3, 2.0):
        assert np.isclose(float(meshsim.grad(f(meshsim))(x)), float(jax.grad(f(jax))(x)), rtol=1e-5)


def test_while_loop_is_not_reverse_differentiable():
    f = lambda x: lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x)
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop"):
        meshsim.grad(f)(1.0)
    g = lambda x, n: lax.fori_loop(0, n, lambda i, c: c * 2.0, x)
    with pytest.raises(ValueError, match="fori_loop with dynamic start/stop values"):
        meshsim.jit(meshsim.grad(g))(1.0, 3)


# --- inside shard_map -------------------------------------------------------------

def auto_mesh(m, shape, names):
    return m.make_mesh(shape, names, axis_types=(m.sharding.AxisType.Auto,) * len(names))


@pytest.mark.parametrize("check_vma", [True, False])
def test_ring_ppermute_with_fori_loop_and_psum_in_scan(check_vma, jax):
    def f(m, x, xs):
        P, lx = m.sharding.PartitionSpec, m.lax
        mesh = auto_mesh(m, (8,), ("i",))
        perm = [(j, (j + 1) % 8) for j in range(8)]

        def ring(x):
            return lx.fori_loop(0, 3, lambda k, acc: lx.ppermute(acc, "i", perm) + x, x)

        def summed(xs):
            def body(c, a):
                s = lx.psum(a, "i")
                return c + s, s * 2.0
            return lx.scan(body, m.numpy.zeros(xs.shape[1:]), xs)

        r = m.jit(m.shard_map(ring, mesh=mesh, in_specs=P("i"), out_specs=P("i"), check_vma=check_vma))(x)
        s = m.jit(m.shard_map(summed, mesh=mesh, in_specs=P(None, "i"), out_specs=(P("i"), P(None, "i")),
                              check_vma=check_vma))(xs)
        return r, s

    x, xs = rand(16), rand(3, 16)
    ours, theirs = both(f, x, xs, jax=jax)
    close(ours, theirs)
    blocks = x.reshape(8, 2)
    acc = blocks.copy()
    for _ in range(3):
        acc = np.roll(acc, 1, axis=0) + blocks
    close(ours[0], acc.ravel())


def test_dynamic_while_and_cond_with_collectives_in_shard_map(jax):
    def f(m, x):
        P, lx, jnp = m.sharding.PartitionSpec, m.lax, m.numpy
        mesh = auto_mesh(m, (4,), ("i",))

        def body(x):
            # The trip count depends on a psum (the same on every device).
            n = lx.psum(jnp.sum(x > 0).astype(jnp.int32), "i")
            v = lx.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, lx.pmax(c[1], "i") * 0.5 + c[1]), (0, x))[1]
            return lx.cond(lx.psum(jnp.sum(v), "i") > 0, lambda a: lx.psum(a, "i"), lambda a: -a, v)
        return m.jit(m.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i"), check_vma=False))(x)

    x = rand(8)
    close(*both(f, x, jax=jax))


def test_grad_through_scan_with_psum_in_shard_map(jax):
    def f(m, w, xs):
        P, lx, jnp = m.sharding.PartitionSpec, m.lax, m.numpy
        mesh = auto_mesh(m, (2, 4), ("a", "b"))

        def body(w, xs):
            c0 = lx.psum(xs[0], "b") * 0.0  # varying over "a", as the carry becomes
            c, ys = lx.scan(lambda c, x: (jnp.tanh(c * w + lx.psum(x, "b")), lx.pmean(c, "b")), c0, xs)
            return lx.psum(jnp.sum(c * c) + jnp.sum(ys), "a")

        loss = m.shard_map(body, mesh=mesh, in_specs=(P(), P(None, ("a", "b"))), out_specs=P())
        return m.jit(m.value_and_grad(loss, argnums=(0, 1)))(w, xs)

    w, xs = rand(2), rand(5, 16)
    close(*both(f, w, xs, jax=jax), tol=1e-4)


def _scan_types(closed):
    """Per scan of a top-level jaxpr (meshsim's or JAX's): (its constants' types,
    its carry count, the distinct types of its results), types as sorted (shape,
    dtype) pairs. (How many activations a VJP rule saves may differ from JAX's.)"""
    def types(avals, distinct=False):
        t = [(tuple(a.shape), np.dtype(a.dtype).name) for a in avals]
        return sorted(set(t) if distinct else t)
    out = []
    for e in closed.jaxpr.eqns:
        if e.primitive.name == "scan":
            k = e.params["num_consts"]
            out.append((types(v.aval for v in e.invars[:k]), e.params["num_carry"],
                        types((v.aval for v in e.outvars), True)))
    return out


def _invariant_residual_losses(m):
    jnp, lax = m.numpy, m.lax

    def cast_weight(w, xs):  # a bfloat16 copy of the weight: computed from the constant alone
        def body(c, x):
            h = jnp.sin(x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16)).astype(jnp.float32)
            return c + h.sum(), h
        c, ys = lax.scan(body, 0.0, xs)
        return c + ys.sum()

    def weight_itself(w, xs):  # the constant is the residual
        return lax.scan(lambda c, x: (jnp.tanh(c @ w + x), None), xs[0], xs)[0].sum()

    def layers_as_xs(ws, x):  # each iteration's weight is a row of the xs
        return lax.scan(lambda c, w: (jnp.tanh(c @ w), None), x, ws)[0].sum()

    def chain_of_constants(w, xs):  # several steps on the constants only
        def body(c, x):
            v = jnp.exp(w.T * 0.5).astype(jnp.bfloat16)
            return c * jnp.cos(x @ v).astype(jnp.float32), None
        return lax.scan(body, xs[0], xs)[0].sum()

    def stages_over_steps(ws, xs):  # a pipeline: an outer scan over steps of an inner one over layers
        def step(c, x):
            h = lax.scan(lambda h, w: (jnp.tanh(h @ w), None), c + x, ws)[0]
            return h, h.sum()
        c, ys = lax.scan(step, xs[0], xs)
        return ys.sum() + c.sum()
    return [cast_weight, weight_itself, layers_as_xs, chain_of_constants, stages_over_steps]


_INVARIANT_ARGS = [((4, 4), (5, 3, 4)), ((4, 4), (6, 3, 4)), ((5, 4, 4), (3, 4)),
                   ((4, 4), (5, 3, 4)), ((3, 4, 4), (7, 2, 4))]


@pytest.mark.parametrize("case", range(5))
def test_scan_grad_keeps_loop_invariant_residuals_as_constants(case, jax):
    # JAX's scan partial evaluation computes what depends only on the constants
    # once, outside the loop: such residuals are constants of the backward scan,
    # and residuals that are rows of an xs are read from that xs; none is stacked
    # per iteration. The scans' types match JAX's, and so do the gradients.
    shapes = _INVARIANT_ARGS[case]
    args = [rand(*s) for s in shapes]
    ours, theirs = _invariant_residual_losses(meshsim)[case], _invariant_residual_losses(jax)[case]
    g_ours = meshsim.make_jaxpr(meshsim.grad(ours, argnums=(0, 1)))(*args)
    g_theirs = jax.make_jaxpr(jax.grad(theirs, argnums=(0, 1)))(*args)
    assert _scan_types(g_ours) == _scan_types(g_theirs)
    stacked_weight = (shapes[1][0],) + shapes[0]
    assert all(t[0] != stacked_weight for scan in _scan_types(g_ours) for t in scan[2])
    for f in (meshsim.grad(ours, argnums=(0, 1)), meshsim.jit(meshsim.grad(ours, argnums=(0, 1)))):
        close(f(*args), jax.grad(theirs, argnums=(0, 1))(*args), 2e-2 if case == 0 else 1e-4)


def test_record_collectives_sees_each_iteration():
    P = meshsim.sharding.PartitionSpec
    mesh = auto_mesh(meshsim, (4,), ("i",))
    f = meshsim.jit(meshsim.shard_map(
        lambda xs: lax.scan(lambda c, x: (c + lax.psum(x, "i"), None), mnp.zeros(2), xs)[0],
        mesh=mesh, in_specs=P(None, "i"), out_specs=P()))
    with meshsim.debug.record_collectives() as records:
        f(np.ones((3, 8), np.float32))
    assert len(records) == 3 and all(r.name.startswith("psum") and r.axes == ("i",) for r in records)


# --- errors ------------------------------------------------------------------------

def error_of(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)
    return None


def same_error(make, *args, jax):
    ours, theirs = error_of(make(meshsim), *args), error_of(make(jax), *args)
    assert ours is not None and theirs is not None, (ours, theirs)
    assert ours[0].__name__ == theirs[0].__name__ or issubclass(ours[0], theirs[0].__bases__), (ours, theirs)
    assert ours[1] == theirs[1]
    return ours


def test_structure_error_names_the_carry():
    with pytest.raises(TypeError, match="scan body function carry input and carry output must have the same "
                                        "pytree structure") as e:
        lax.scan(lambda carry, a: ((carry, carry), a), 0.0, np.ones(3, np.float32))
    assert "The input carry carry is a" in str(e.value) and "so their Python types differ" in str(e.value)


def test_errors_match_jax(jax):
    x = rand(3)
    true_fun, false_fun = (lambda a: a), (lambda a: a.astype(np.int32))
    cases = [
        lambda m: lambda: m.lax.cond(np.ones(2, bool), lambda a: a, lambda a: a, x),
        lambda m: lambda: m.lax.cond(None, lambda a: a, lambda a: a, x),
        lambda m: lambda: m.lax.cond(True, true_fun, false_fun, x),
        lambda m: lambda: m.lax.cond(True, lambda a: a, lambda a: a, x, operand=x),
        lambda m: lambda: m.lax.switch(1.5, [lambda a: a, lambda a: a], x),
        lambda m: lambda: m.lax.switch(np.zeros(2, np.int32), [lambda a: a], x),
        lambda m: lambda: m.lax.switch(0, [], x),
        lambda m: lambda: m.lax.scan(lambda c, a: (c.astype(np.int32), a), 0.0, x),
        lambda m: lambda: m.lax.scan(lambda c, a: (c, a), 0.0, [x, rand(4)]),
        lambda m: lambda: m.lax.scan(lambda c, a: (c, a), 0.0, x, length=5),
        lambda m: lambda: m.lax.scan(lambda c, a: (c, a), 0.0, None),
        lambda m: lambda: m.lax.scan(lambda carry, a: ((carry[0],), a), (0.0, 0.0), x),
        lambda m: lambda: m.lax.while_loop(lambda c: True, lambda c: [c[0], c[1], c[0]], [0.0, 1.0]),
        lambda m: lambda: m.lax.while_loop(lambda c: c, lambda c: c, x),
        lambda m: lambda: m.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1].astype(np.int32)),
                                           (0, x)),
        lambda m: lambda: m.lax.fori_loop(np.int32(0), np.int16(3), lambda i, c: c, x),
        lambda m: lambda: m.lax.fori_loop(0, 3, lambda i, c: c, x, unroll=2) if False else
        m.jit(lambda n: m.lax.fori_loop(0, n, lambda i, c: c, x, unroll=2))(3),
    ]
    for make in cases:
        same_error(make, jax=jax)


def test_carry_vma_mismatch_inside_shard_map_names_pcast(jax):
    def make(m):
        P, lx = m.sharding.PartitionSpec, m.lax
        mesh = auto_mesh(m, (4,), ("i",))

        def body(x):
            return lx.scan(lambda c, a: (c + a, None), m.numpy.zeros(()), x)[0]
        return lambda: m.jit(m.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i")))(rand(8))

    kind, text = same_error(make, jax=jax)
    assert "pcast(..., ('i',), to='varying')" in text and kind is TypeError


def test_nested_loops_closing_over_outer_values(jax):
    w, xs = rand(3), rand(4, 5, 3)
    table = rand(3)  # a concrete array the bodies close over

    def f(m, w, xs):
        jnp, lx = m.numpy, m.lax

        def outer(c, x):
            def inner(d, y):
                d = lx.cond(jnp.sum(y) > 0, lambda v: v * w + table, lambda v: v - w, d + y)
                return d, jnp.sum(d)
            d, ys = lx.scan(inner, c, x)
            return d * 0.5, lx.fori_loop(0, 2, lambda i, s: s + ys * w[0], ys)

        loss = lambda w, xs: jnp.sum(lx.scan(outer, jnp.zeros(3), xs)[1] ** 2)
        return m.jit(lambda w, xs: lx.scan(outer, jnp.zeros(3), xs))(w, xs), m.grad(loss)(w, xs)

    close(*both(f, w, xs, jax=jax), tol=1e-4)

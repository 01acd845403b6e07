"""vmap (the C++ batching transform and its rules) and jacfwd/jacrev/hessian:
every rule against the function applied per example (meshsim, eagerly) and
against real JAX, with random in_axes/out_axes; composition with jit, grad and
itself; JAX's error texts."""
import zlib

import numpy as np
import pytest

import meshsim as ms
import meshsim.numpy as mnp
from meshsim import lax as mlax

RNG = np.random.default_rng(0)


def _rand(shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return RNG.integers(-3, 4, shape).astype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) > 0.5
    return RNG.standard_normal(shape).astype(dtype)


def _per_example(f, args, in_axes, out_axis, size):
    """The reference: f applied to each example eagerly, stacked at out_axis."""
    outs = []
    for b in range(size):
        ex = [a if ax is None else np.take(a, b, axis=ax) for a, ax in zip(args, in_axes)]
        outs.append(np.asarray(f(*[mnp.asarray(e) for e in ex])))
    return np.stack(outs, axis=out_axis)


# (name, f(xp, lax, *args), per-example arg shapes and dtypes)
CASES = [
    ("sin_mul_add", lambda xp, lax, a, b: xp.sin(a) * b + 1.0, [((3, 4), np.float32), ((3, 4), np.float32)]),
    ("where_cmp", lambda xp, lax, a, b: xp.where(a > b, a, b * 2), [((5,), np.float32), ((5,), np.float32)]),
    ("clip_scalar", lambda xp, lax, a, lo: lax.clamp(lo, a, xp.float32(1.0)), [((4,), np.float32), ((), np.float32)]),
    ("integer_pow", lambda xp, lax, a: a ** 3 - xp.abs(a), [((2, 3), np.float32)]),
    ("convert", lambda xp, lax, a: (a * 3).astype(xp.int32) + 1, [((4,), np.float32)]),
    ("int_ops", lambda xp, lax, a, b: (a * b) // 2 + xp.maximum(a, b), [((4,), np.int32), ((4,), np.int32)]),
    ("outer", lambda xp, lax, a, b: a[:, None] * b[None, :], [((3,), np.float32), ((4,), np.float32)]),
    ("broadcast_to", lambda xp, lax, a: xp.broadcast_to(a, (2, 3, 4)) + 0, [((3, 1), np.float32)]),
    ("reshape", lambda xp, lax, a: a.reshape(6, 2) * 2, [((3, 4), np.float32)]),
    ("transpose", lambda xp, lax, a: xp.transpose(a, (2, 0, 1)), [((2, 3, 4), np.float32)]),
    ("squeeze_expand", lambda xp, lax, a: xp.expand_dims(xp.squeeze(a, 1), 0), [((3, 1, 2), np.float32)]),
    ("flip", lambda xp, lax, a: xp.flip(a, 1), [((3, 4), np.float32)]),
    ("slice", lambda xp, lax, a: a[1:3, ::2], [((4, 5), np.float32)]),
    ("concatenate", lambda xp, lax, a, b: xp.concatenate([a, b, a], axis=0), [((2, 3), np.float32), ((1, 3), np.float32)]),
    ("pad", lambda xp, lax, a: xp.pad(a, ((1, 2), (0, 1))), [((2, 3), np.float32)]),
    ("lax_pad_interior", lambda xp, lax, a: lax.pad(a, xp.float32(0), ((1, 0, 1),)), [((3,), np.float32)]),
    ("sum_max", lambda xp, lax, a: a.sum(0) + a.max(1).sum(), [((3, 4), np.float32)]),
    ("mean_prod", lambda xp, lax, a: a.mean(axis=-1) * xp.prod(a, axis=-1), [((2, 3), np.float32)]),
    ("argmax_argmin", lambda xp, lax, a: xp.argmax(a, axis=1) * 10 + xp.argmin(a, axis=0)[:1], [((3, 4), np.float32)]),
    ("cumsum_cumprod", lambda xp, lax, a: xp.cumsum(a, axis=1) + xp.cumprod(a, axis=0), [((3, 4), np.float32)]),
    ("cummax", lambda xp, lax, a: lax.cummax(a, axis=0), [((5,), np.float32)]),
    ("any_all", lambda xp, lax, a: xp.any(a > 0, axis=0) & xp.all(a < 2, axis=0), [((3, 4), np.float32)]),
    ("matmul_both", lambda xp, lax, a, b: a @ b, [((3, 4), np.float32), ((4, 2), np.float32)]),
    ("matvec", lambda xp, lax, a, b: a @ b, [((3, 4), np.float32), ((4,), np.float32)]),
    ("einsum_batch", lambda xp, lax, a, b: xp.einsum("bij,bjk->bik", a, b), [((2, 3, 4), np.float32), ((2, 4, 5), np.float32)]),
    ("dot_contract2", lambda xp, lax, a, b: xp.tensordot(a, b, axes=([0, 2], [1, 0])), [((2, 3, 4), np.float32), ((4, 2, 5), np.float32)]),
    ("gather", lambda xp, lax, a, i: a[i], [((5, 3), np.float32), ((4,), np.int32)]),
    ("gather_2d", lambda xp, lax, a, i, j: a[i, j] + a[:, j].sum(), [((5, 4), np.float32), ((3,), np.int32), ((3,), np.int32)]),
    ("take_along", lambda xp, lax, a, i: xp.take_along_axis(a, i, axis=1), [((3, 4), np.float32), ((3, 2), np.int32)]),
    ("scatter_set", lambda xp, lax, a, i, u: a.at[i].set(u), [((5, 2), np.float32), ((3,), np.int32), ((3, 2), np.float32)]),
    ("scatter_add", lambda xp, lax, a, i, u: a.at[i].add(u), [((5,), np.float32), ((4,), np.int32), ((4,), np.float32)]),
    ("scatter_max", lambda xp, lax, a, i, u: a.at[:, i].max(u), [((2, 5), np.float32), ((3,), np.int32), ((2, 3), np.float32)]),
    ("dynamic_slice", lambda xp, lax, a, i: lax.dynamic_slice(a, (i, xp.int32(1)), (2, 2)), [((5, 4), np.float32), ((), np.int32)]),
    ("dynamic_update_slice", lambda xp, lax, a, u, i: lax.dynamic_update_slice(a, u, (i,)), [((6,), np.float32), ((2,), np.float32), ((), np.int32)]),
    ("sort", lambda xp, lax, a: xp.sort(a, axis=0), [((4, 3), np.float32)]),
    ("argsort", lambda xp, lax, a: xp.argsort(a), [((5,), np.float32)]),
    ("top_k", lambda xp, lax, a: lax.top_k(a, 2)[0] + lax.top_k(a, 2)[1], [((2, 5), np.float32)]),
    ("iota_creation", lambda xp, lax, a: a + xp.arange(4, dtype=xp.float32) + xp.ones(4), [((4,), np.float32)]),
    ("searchsorted", lambda xp, lax, v: xp.searchsorted(xp.arange(5.0, dtype=xp.float32), v), [((3,), np.float32)]),
    ("softmax_mlp", lambda xp, lax, x, w: xp.exp(x @ w) / xp.exp(x @ w).sum(-1, keepdims=True), [((4,), np.float32), ((4, 3), np.float32)]),
]


def _random_axes(shapes, rng):
    """Random in_axes (some None, some negative), at least one mapped."""
    axes = []
    for shape, _ in shapes:
        r = len(shape) + 1
        a = int(rng.integers(0, r))
        if rng.random() < 0.3:
            a -= r
        axes.append(a)
    for i in range(len(axes)):
        if len(axes) > 1 and rng.random() < 0.25:
            axes[i] = None
    if all(a is None for a in axes):
        axes[0] = 0
    return axes


def _batched_arg(shape, dtype, ax, size):
    if ax is None:
        return _rand(shape, dtype)
    r = len(shape) + 1
    full = list(shape)
    full.insert(ax % r, size)
    return _rand(tuple(full), dtype)


def _index_safe(name, args, shapes):
    # Index arguments in range of the indexed dimension (clip mode would hide nothing, but
    # keep the reference meaningful).
    return args


@pytest.mark.parametrize("name,f,shapes", CASES, ids=[c[0] for c in CASES])
def test_rule_matches_per_example_and_jax(name, f, shapes, real_jax):
    jnp, jlax = real_jax.numpy, real_jax.lax
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    for trial in range(2):
        size = int(rng.integers(1, 4)) + trial
        in_axes = _random_axes(shapes, rng) if trial else [0] * len(shapes)
        args = [_batched_arg(s, d, ax, size) for (s, d), ax in zip(shapes, in_axes)]
        ms_f = lambda *a: f(mnp, mlax, *map(mnp.asarray, a))  # noqa: E731
        out_ndim = np.ndim(np.asarray(ms_f(*[mnp.asarray(a if ax is None else np.take(a, 0, axis=ax))
                                              for a, ax in zip(args, in_axes)])))
        out_axis = int(rng.integers(-(out_ndim + 1), out_ndim + 1)) if trial else 0
        got = ms.vmap(ms_f, in_axes=tuple(in_axes), out_axes=out_axis)(*args)
        want = _per_example(ms_f, args, in_axes, out_axis, size)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5, err_msg=f"{name} {in_axes}")
        ref = real_jax.vmap(lambda *a: f(jnp, jlax, *map(jnp.asarray, a)), in_axes=tuple(in_axes), out_axes=out_axis)(*args)
        assert np.asarray(got).dtype == np.asarray(ref).dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-4, atol=1e-4)


# Primitives with a rule batch in a fixed number of equations, whatever the batch size
# (the per-example fallback would bind once per example).
@pytest.mark.parametrize("name", ["sin_mul_add", "matmul_both", "gather_2d", "scatter_set", "dynamic_slice",
                                  "dynamic_update_slice", "sort", "top_k", "pad", "cumsum_cumprod", "clip_scalar",
                                  "einsum_batch", "take_along", "searchsorted"])
def test_rules_do_not_unroll(name):
    f, shapes = next((c[1], c[2]) for c in CASES if c[0] == name)

    def count(size):
        args = [_batched_arg(s, d, 0, size) for s, d in shapes]
        jaxpr = ms.make_jaxpr(ms.vmap(lambda *a: f(mnp, mlax, *a)))(*args)
        return len(jaxpr.eqns)

    assert count(2) == count(5)


def test_pytrees_prefix_axes_none_and_kwargs(real_jax):
    x, y = _rand((3, 4)), _rand((4, 3))
    tree = {"a": x, "b": (y, _rand((5,)))}

    def f(t, s, scale=1.0):
        return {"u": t["a"] * s, "v": t["b"][0].sum(0) * scale, "w": t["b"][1]}

    in_axes = ({"a": 0, "b": (1, None)}, None)
    out_axes = {"u": 1, "v": 0, "w": None}
    scale = _rand((3,))
    got = ms.vmap(f, in_axes=in_axes, out_axes=out_axes)(tree, np.float32(2.0), scale=scale)
    want = real_jax.vmap(f, in_axes=in_axes, out_axes=out_axes)(tree, np.float32(2.0), scale=scale)
    assert got["u"].shape == want["u"].shape == (4, 3)
    assert got["w"].shape == (5,)
    for k in ("u", "v", "w"):
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6)
    # An unmapped argument may be any Python value.
    assert ms.vmap(lambda a, s: a * len(s), in_axes=(0, None))(x, "abc").shape == (3, 4)


def test_unbatched_output_broadcasts_and_axis_size(real_jax):
    x = _rand((3, 2))
    got = ms.vmap(lambda a, c: (a, c), in_axes=(0, None), out_axes=(0, 1))(x, _rand((4,)))
    assert got[1].shape == (4, 3)
    got = ms.vmap(lambda c: c * 2, in_axes=None, axis_size=5)(x)
    want = real_jax.vmap(lambda c: c * 2, in_axes=None, axis_size=5)(x)
    assert got.shape == want.shape == (5, 3, 2)
    np.testing.assert_allclose(got, want)


def test_compose_with_jit_grad_and_nested():
    x, w = _rand((6, 4)), _rand((4, 3))
    f = lambda a, b: mnp.tanh(a @ b).sum()  # noqa: E731
    per_ex = ms.vmap(ms.grad(f, argnums=1), in_axes=(0, None))(x, w)
    assert per_ex.shape == (6, 4, 3)
    for b in range(6):
        np.testing.assert_allclose(per_ex[b], ms.grad(f, argnums=1)(x[b], w), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ms.jit(ms.vmap(ms.grad(f, argnums=1), in_axes=(0, None)))(x, w), per_ex,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ms.vmap(ms.jit(ms.grad(f, argnums=1)), in_axes=(0, None))(x, w), per_ex,
                               rtol=1e-5, atol=1e-6)
    # grad of vmap: the gradient of the summed per-example losses.
    g = ms.grad(lambda w_: ms.vmap(f, in_axes=(0, None))(x, w_).sum())(w)
    np.testing.assert_allclose(g, per_ex.sum(0), rtol=1e-4, atol=1e-5)
    # Nested: a pairwise table.
    pair = ms.vmap(ms.vmap(lambda a, b: mnp.dot(a, b), in_axes=(None, 0)), in_axes=(0, None))(x, x)
    np.testing.assert_allclose(pair, np.asarray(x) @ np.asarray(x).T, rtol=1e-5, atol=1e-5)
    # vmap of vmap of grad, batch dims on different axes.
    gg = ms.vmap(ms.vmap(ms.grad(lambda a: (a ** 3).sum()), in_axes=1, out_axes=1))(_rand((2, 3, 4)))
    assert gg.shape == (2, 3, 4)


def test_per_example_gradients_of_an_mlp(real_jax):
    params = {"w1": _rand((5, 8)) * 0.5, "b1": _rand((8,)), "w2": _rand((8, 2)) * 0.5}
    xs, ys = _rand((7, 5)), _rand((7, 2))

    def loss(p, x, y, np_):
        h = np_.tanh(x @ p["w1"] + p["b1"])
        return ((h @ p["w2"] - y) ** 2).mean()

    got = ms.jit(ms.vmap(ms.grad(lambda p, x, y: loss(p, x, y, mnp)), in_axes=(None, 0, 0)))(params, xs, ys)
    want = real_jax.vmap(real_jax.grad(lambda p, x, y: loss(p, x, y, real_jax.numpy)),
                         in_axes=(None, 0, 0))(params, xs, ys)
    for k in params:
        assert got[k].shape == (7, *params[k].shape)
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5)


def test_checkpoint_custom_vjp_and_random_under_vmap(real_jax):
    @ms.custom_vjp
    def clip_grad(x):
        return mnp.sin(x)

    clip_grad.defvjp(lambda x: (mnp.sin(x), mnp.cos(x)), lambda c, g: (mnp.clip(g * c, -0.1, 0.1),))
    x = _rand((4, 3))
    g = ms.vmap(ms.grad(lambda a: clip_grad(a).sum()))(x)
    np.testing.assert_allclose(g, np.clip(np.cos(x), -0.1, 0.1), rtol=1e-5)
    np.testing.assert_allclose(ms.vmap(clip_grad)(x), np.sin(x), rtol=1e-6)

    f = ms.checkpoint(lambda a: mnp.sin(mnp.sin(a)).sum())
    np.testing.assert_allclose(ms.vmap(ms.grad(f))(x), np.cos(np.sin(x)) * np.cos(x), rtol=1e-5)

    keys = ms.random.split(ms.random.key(0), 3)
    got = ms.vmap(lambda k: ms.random.normal(k, (2,)))(keys)
    for b in range(3):
        np.testing.assert_array_equal(got[b], ms.random.normal(keys[b], (2,)))
    raw = ms.random.split(ms.random.PRNGKey(1), 4)
    got = ms.vmap(lambda k: ms.random.uniform(k, (3,)))(raw)
    want = real_jax.vmap(lambda k: real_jax.random.uniform(k, (3,)))(np.asarray(raw))
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_empty_batch():
    out = ms.vmap(lambda a: mnp.sort(a) * 2)(np.zeros((0, 3), np.float32))
    assert out.shape == (0, 3)


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)
    return None, None


ERROR_CASES = [
    lambda v, np_: v(lambda a, b: a + b)(np_.ones((3, 4)), np_.ones((5, 4))),
    lambda v, np_: v(lambda a, b: a + b, in_axes=(0, 1))(np_.ones((3, 4)), np_.ones((5, 4))),
    lambda v, np_: v(lambda a, b, c: a + b + c)(np_.ones((3,)), np_.ones((3,)), np_.ones((2,))),
    lambda v, np_: v(lambda a: a)(np_.ones(())),
    lambda v, np_: v(lambda a: a, in_axes=-3)(np_.ones((3, 4))),
    lambda v, np_: v(lambda a: a, in_axes=2)(np_.ones((3, 4))),
    lambda v, np_: v(lambda a: a, out_axes=None)(np_.ones((3, 4))),
    lambda v, np_: v(lambda a: {"u": a}, out_axes={"u": None})(np_.ones((3, 4))),
    lambda v, np_: v(lambda a: a, out_axes=2)(np_.ones((3, 4))),
    lambda v, np_: v(lambda a: a, out_axes=-3)(np_.ones((3, 4))),
    lambda v, np_: v(lambda a: a, in_axes=1.0)(np_.ones((3, 4))),
    lambda v, np_: v(lambda a: a, in_axes=(1.0,))(np_.ones((3, 4))),
    lambda v, np_: v(lambda a: a, out_axes=(1.0,))(np_.ones((3, 4))),
    lambda v, np_: v(lambda a: a, in_axes=(0, 0))(np_.ones((3, 4))),
    lambda v, np_: v(lambda: 1.0)(),
    lambda v, np_: v(lambda a: a, in_axes=None)(np_.ones((3, 4))),
    lambda v, np_: v(lambda a: a, in_axes=({"a": 0},))({"b": np_.ones((3,))}),
    lambda v, np_: v(lambda a: a, in_axes=({"a": 0},))([np_.ones((3,))]),
    lambda v, np_: v(lambda a: (a, a), out_axes=(0, 0, 0))(np_.ones((3,))),
    lambda v, np_: v(lambda a, b: a)(np_.ones((3, 4)), b=np_.ones((4,))),
    lambda v, np_: v(lambda a: a, axis_size=4)(np_.ones((3, 4))),
    lambda v, np_: v(lambda a, b: a + b)(np_.ones((3, 4)), 1.0),
    lambda v, np_: v(5),
]


@pytest.mark.parametrize("case", range(len(ERROR_CASES)))
def test_errors_match_jax(case, real_jax):
    want = _err(lambda: ERROR_CASES[case](real_jax.vmap, real_jax.numpy))
    got = _err(lambda: ERROR_CASES[case](ms.vmap, mnp))
    assert want[0] is not None
    assert got == want


# --- jacfwd / jacrev / hessian ------------------------------------------------

def _jac_fns(np_):
    return [
        (lambda x: np_.sin(x) * x.sum(), [(4,)]),
        (lambda x, y: {"p": x @ y, "q": (x ** 2).sum()}, [(2, 3), (3,)]),
        (lambda t: np_.tanh(t["a"]) * t["b"][0], [{"a": (3,), "b": [(3,)]}]),
    ]


def _make_args(spec):
    if isinstance(spec, tuple):
        return _rand(spec, np.float32)
    if isinstance(spec, dict):
        return {k: _make_args(v) for k, v in spec.items()}
    return [_make_args(v) for v in spec]


@pytest.mark.parametrize("which", ["jacfwd", "jacrev", "hessian"])
@pytest.mark.parametrize("k", range(3))
def test_jacobians_match_jax(which, k, real_jax):
    f_ms, specs = _jac_fns(mnp)[k]
    f_jax, _ = _jac_fns(real_jax.numpy)[k]
    args = [_make_args(s) for s in specs]
    argnums = (0, 1) if len(args) == 2 else 0
    if which == "hessian":
        f_ms_s = lambda *a: real_sum(f_ms(*a), mnp)  # noqa: E731
        f_jax_s = lambda *a: real_sum(f_jax(*a), real_jax.numpy)  # noqa: E731
        got = ms.hessian(f_ms_s, argnums=argnums)(*args)
        want = real_jax.hessian(f_jax_s, argnums=argnums)(*args)
    else:
        got = getattr(ms, which)(f_ms, argnums=argnums)(*args)
        want = getattr(real_jax, which)(f_jax, argnums=argnums)(*args)
    assert ms.tree_util.tree_structure(got) == ms.tree_util.tree_structure(
        real_jax.tree_util.tree_map(np.asarray, want))
    for g, w in zip(ms.tree_util.tree_leaves(got), real_jax.tree_util.tree_leaves(want)):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def real_sum(tree, np_):
    leaves = [np_.sum(leaf) for leaf in (tree.values() if isinstance(tree, dict) else [tree])]
    return sum(leaves[1:], leaves[0])


def test_jacobian_has_aux_and_errors(real_jax):
    x = _rand((3,))
    f = lambda np_: lambda a: (np_.sin(a) * 2, {"n": a.sum()})  # noqa: E731
    for which in ("jacfwd", "jacrev"):
        jac, aux = getattr(ms, which)(f(mnp), has_aux=True)(x)
        wjac, waux = getattr(real_jax, which)(f(real_jax.numpy), has_aux=True)(x)
        np.testing.assert_allclose(jac, wjac, rtol=1e-5)
        np.testing.assert_allclose(aux["n"], waux["n"], rtol=1e-5)
    for which in ("jacfwd", "jacrev"):
        want = _err(lambda: getattr(real_jax, which)(lambda a: a)(np.arange(3)))
        got = _err(lambda: getattr(ms, which)(lambda a: a)(np.arange(3)))
        assert got == want
    want = _err(lambda: real_jax.jacrev(lambda a: (a > 0).astype(np.int32))(x))
    got = _err(lambda: ms.jacrev(lambda a: (a > 0).astype(np.int32))(x))
    assert got == want


VMAP_PRINTS = {
    "ints": lambda j, jnp: j.vmap(lambda x: print(repr(x), str(x)))(jnp.arange(3)),
    "rows": lambda j, jnp: j.vmap(lambda x: print(repr(x * 2)))(jnp.ones((3, 2))),
    "unmapped": lambda j, jnp: j.vmap(lambda x, y: print(repr(y)), in_axes=(0, None))(jnp.ones((3, 2)), 1.0),
    "under jit": lambda j, jnp: j.jit(j.vmap(lambda x: print(repr(x))))(jnp.ones((3, 2))),
    "nested": lambda j, jnp: j.vmap(j.vmap(lambda x: print(repr(x))))(jnp.ones((3, 2))),
    "in_axes=1": lambda j, jnp: j.vmap(lambda x: print(f"x = {x}"), in_axes=1)(jnp.ones((3, 2))),
}


@pytest.mark.parametrize("name", VMAP_PRINTS)
def test_printed_tracer_inside_vmap_matches_jax(real_jax, capsys, name):
    VMAP_PRINTS[name](real_jax, real_jax.numpy)
    theirs = capsys.readouterr().out
    VMAP_PRINTS[name](ms, mnp)
    assert capsys.readouterr().out == theirs

"""make_jaxpr's object model against JAX 0.10.2's: ClosedJaxpr.jaxpr is a Jaxpr whose equations
hold Primitive objects (the `jax.lax.*_p` handles), params, Vars and Literals with their avals,
and sub-programs in params as JAX holds them; eval_jaxpr and jaxpr_as_fun run them. Programs are
random: elementwise chains with literals, dot_general, reductions, control flow, nested jit,
shard_map with collectives and custom derivatives. Also the `*_p` handles' bind against JAX's."""
import numpy as np
import pytest

import importlib

import meshsim
import meshsim.numpy as mnp
from meshsim._src.jax_internals_compat.extend import core as MEXT  # jax.extend.core under meshsim

RNG = np.random.default_rng(17)

PLAIN_PARAM_PRIMITIVES = {
    "reduce_sum", "reduce_max", "reduce_min", "argmax", "argmin", "transpose", "reshape", "iota",
    "convert_element_type", "broadcast_in_dim", "dot_general", "integer_pow", "squeeze", "rev",
    "concatenate", "cumsum", "cummax", "sort", "slice", "sin", "exp", "tanh", "log", "sqrt",
    "dynamic_slice", "pad", "top_k", "select_n", "add", "mul", "sub", "max", "min", "psum",
    "all_gather", "ppermute", "scan", "while", "cond"}


def _ext(real_jax):
    return importlib.import_module(real_jax.__name__ + ".extend.core")


def _shape(ndim=None):
    ndim = RNG.integers(1, 4) if ndim is None else ndim
    return tuple(int(d) for d in RNG.integers(1, 5, size=ndim))


def _walk_counts(jaxpr, counts=None, *, jaxpr_types):
    """Counts primitives recursively through sub-jaxprs held in params, as third-party
    walkers do (a ClosedJaxpr's `.jaxpr`, a Jaxpr, or tuples of either)."""
    closed_t, open_t = jaxpr_types
    counts = {} if counts is None else counts
    for eqn in jaxpr.eqns:
        counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple) else (value,):
                if isinstance(sub, closed_t):
                    _walk_counts(sub.jaxpr, counts, jaxpr_types=jaxpr_types)
                elif isinstance(sub, open_t):
                    _walk_counts(sub, counts, jaxpr_types=jaxpr_types)
    return counts


def _aval_key(aval):
    return tuple(aval.shape), np.dtype(aval.dtype), bool(aval.weak_type)


def _atom_key(atom, literal_t):
    if isinstance(atom, literal_t):
        return ("literal", np.asarray(atom.val).item(), _aval_key(atom.aval))
    return ("var", _aval_key(atom.aval))


def _plain(value):
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, np.dtype) or value is None or isinstance(value, (bool, int, float, str)):
        return value
    return None  # a JAX-specific object: not compared


def _compare(real_jax, make_fun, args):
    """The two closed jaxprs of make_fun(J) agree in structure, avals, literals and plain params."""
    want = real_jax.make_jaxpr(make_fun(real_jax))(*args)
    got = meshsim.make_jaxpr(make_fun(meshsim))(*args)
    assert isinstance(got.jaxpr, meshsim.core.Jaxpr) and not isinstance(got.jaxpr, meshsim.core.ClosedJaxpr)
    _compare_jaxprs(real_jax, want.jaxpr, got.jaxpr)
    assert [_aval_key(a) for a in got.in_avals] == [_aval_key(a) for a in want.in_avals]
    assert [_aval_key(a) for a in got.out_avals] == [_aval_key(a) for a in want.out_avals]
    jtypes = (_ext(real_jax).ClosedJaxpr, _ext(real_jax).Jaxpr)
    mtypes = (MEXT.ClosedJaxpr, MEXT.Jaxpr)
    assert _walk_counts(got.jaxpr, jaxpr_types=mtypes) == _walk_counts(want.jaxpr, jaxpr_types=jtypes)
    return want, got


def _compare_jaxprs(real_jax, want, got):
    assert [e.primitive.name for e in got.eqns] == [e.primitive.name for e in want.eqns]
    assert [_aval_key(v.aval) for v in got.invars] == [_aval_key(v.aval) for v in want.invars]
    jlit, mlit = _ext(real_jax).Literal, MEXT.Literal
    assert [_atom_key(v, mlit) for v in got.outvars] == [_atom_key(v, jlit) for v in want.outvars]
    for we, ge in zip(want.eqns, got.eqns):
        assert ge.primitive is getattr(meshsim.lax, _handle_attr(ge.primitive.name), ge.primitive)
        assert [_atom_key(v, mlit) for v in ge.invars] == [_atom_key(v, jlit) for v in we.invars]
        assert [_aval_key(v.aval) for v in ge.outvars] == [_aval_key(v.aval) for v in we.outvars]
        if ge.primitive.name in PLAIN_PARAM_PRIMITIVES:
            for key, value in we.params.items():
                plain = _plain(value)
                if plain is not None and not isinstance(value, (_ext(real_jax).Jaxpr,)):
                    assert _plain(ge.params[key]) == plain, (ge.primitive.name, key)
        for key, value in we.params.items():
            for wsub, gsub in _sub_pairs(real_jax, value, ge.params.get(key)):
                _compare_jaxprs(real_jax, wsub, gsub)


def _sub_pairs(real_jax, want, got):
    jc, jo = _ext(real_jax).ClosedJaxpr, _ext(real_jax).Jaxpr
    mc, mo = MEXT.ClosedJaxpr, MEXT.Jaxpr
    if isinstance(want, tuple) and any(isinstance(w, (jc, jo)) for w in want):
        assert isinstance(got, tuple) and len(got) == len(want)
        return [p for w, g in zip(want, got) for p in _sub_pairs(real_jax, w, g)]
    if isinstance(want, jc):
        assert isinstance(got, mc)
        return [(want.jaxpr, got.jaxpr)]
    if isinstance(want, jo):
        assert isinstance(got, mo) and not isinstance(got, mc)
        return [(want, got)]
    return []


def _handle_attr(name):
    return {"custom_linear_solve": "linear_solve_p"}.get(name, name.replace("-", "_") + "_p")


FLOAT_UNARY = ["sin", "exp", "tanh", "neg", "abs", "log1p", "sqrt", "floor"]
INT_UNARY = ["neg", "abs", "sign"]


@pytest.mark.parametrize("seed", range(6))
def test_elementwise_chains_with_literals(real_jax, seed):
    dtype = [np.float32, np.int32, np.float16][seed % 3]
    shape = _shape()
    unary = INT_UNARY if dtype == np.int32 else FLOAT_UNARY
    steps = [(str(RNG.choice(unary)), str(RNG.choice(["mul", "add", "sub", "max"])),
              int(RNG.integers(-3, 4)) if dtype == np.int32 else float(RNG.integers(-8, 8)) / 4)
             for _ in range(int(RNG.integers(2, 6)))]

    def make(J):
        def f(x, y):
            for u, b, lit in steps:
                x = getattr(J.lax, u)(x)
                x = getattr(J.lax, b)(x, J.numpy.asarray(lit, dtype)) if b == "max" else \
                    {"mul": lambda a: a * lit, "add": lambda a: a + lit, "sub": lambda a: lit - a}[b](x)
                x = x + y
            return x, y * 2
        return f

    args = [RNG.integers(-5, 5, shape).astype(dtype) for _ in range(2)]
    want, got = _compare(real_jax, make, args)
    literals = [a for e in got.jaxpr.eqns for a in e.invars if isinstance(a, MEXT.Literal)]
    assert literals and all(lit.val.dtype == dtype and lit.aval.shape == () for lit in literals)
    np.testing.assert_array_equal(meshsim.core.eval_jaxpr(got.jaxpr, got.consts, *args)[0],
                                  real_jax.core.eval_jaxpr(want.jaxpr, want.consts, *args)[0])


@pytest.mark.parametrize("seed", range(4))
def test_dot_general_and_reductions(real_jax, seed):
    b, m, k, n = (int(d) for d in RNG.integers(1, 5, size=4))
    axis = int(RNG.integers(0, 2))
    batch = bool(seed % 2)

    def make(J):
        L = J.lax

        def f(x, y):
            dims = (((2,), (1,)), ((0,), (0,))) if batch else (((2,), (1,)), ((), ()))
            z = L.dot_general(x, y, dims, preferred_element_type=np.float32)
            return (L.reduce_sum(z, (axis,)), L.reduce_max(z, (axis + 1,)), L.argmax(z, axis, np.int32),
                    L.reduce_min(x, (0, 2)), L.cumsum(z, axis=axis, reverse=bool(seed & 2)))
        return f

    x = RNG.standard_normal((b, m, k)).astype(np.float32)
    y = RNG.standard_normal((b, k, n)).astype(np.float32)
    want, got = _compare(real_jax, make, (x, y))
    dot = next(e for e in got.jaxpr.eqns if e.primitive is meshsim.lax.dot_general_p)
    wdot = next(e for e in want.jaxpr.eqns if e.primitive is real_jax.lax.dot_general_p)
    assert dot.params["dimension_numbers"] == wdot.params["dimension_numbers"]
    for g, w in zip(MEXT.jaxpr_as_fun(got)(x, y), _ext(real_jax).jaxpr_as_fun(want)(x, y)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


def test_control_flow(real_jax):
    shape = _shape(2)

    def make(J):
        L = J.lax

        def f(x, i):
            c = L.cond(i > 1, lambda a: L.sin(a) * 2.0, lambda a: a - 1.0, x)
            s, ys = L.scan(lambda carry, row: (carry + row, carry * row), x[0], x)
            w = L.while_loop(lambda v: v[0] < 10, lambda v: (v[0] + 3, v[1] * 1.5), (i, x))
            fo = L.fori_loop(0, 3, lambda k, v: v * 2.0 + k, x)
            return c, s, ys, w, fo
        return f

    args = (RNG.standard_normal(shape).astype(np.float32), np.int32(RNG.integers(0, 4)))
    want, got = _compare(real_jax, make, args)
    cond = next(e for e in got.jaxpr.eqns if e.primitive is meshsim.lax.cond_p)
    assert isinstance(cond.params["branches"], tuple)
    assert all(isinstance(b, MEXT.ClosedJaxpr) for b in cond.params["branches"])
    loop = next(e for e in got.jaxpr.eqns if e.primitive is meshsim.lax.while_p)
    assert isinstance(loop.params["cond_jaxpr"], MEXT.ClosedJaxpr)
    assert isinstance(loop.params["body_jaxpr"], MEXT.ClosedJaxpr)
    for g, w in zip(meshsim.core.eval_jaxpr(got.jaxpr, got.consts, *args),
                    real_jax.core.eval_jaxpr(want.jaxpr, want.consts, *args)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5)


def test_nested_jit_and_shared_vars(real_jax):
    def make(J):
        inner = J.jit(lambda a, b: J.numpy.tanh(a) @ b + 1.0)

        def f(x, y):
            return J.jit(lambda a: inner(a, y) * 3.0)(x) - inner(x, y)
        return f

    x, y = (RNG.standard_normal((3, 3)).astype(np.float32) for _ in range(2))
    want, got = _compare(real_jax, make, (x, y))
    call = got.jaxpr.eqns[0]
    assert call.primitive.name == "jit" and isinstance(call.params["jaxpr"], MEXT.ClosedJaxpr)
    # A variable is one object wherever it occurs.
    produced = {id(v) for e in got.jaxpr.eqns for v in e.outvars}
    read = [v for e in got.jaxpr.eqns for v in e.invars if isinstance(v, MEXT.Var)]
    assert all(id(v) in produced or any(v is i for i in got.jaxpr.invars) for v in read)
    assert got.jaxpr.outvars[0] is got.jaxpr.eqns[-1].outvars[0]


def test_shard_map_collectives(real_jax):
    def make(J):
        P = J.sharding.PartitionSpec
        mesh = J.make_mesh((2, 4), ("dp", "tp"), axis_types=(J.sharding.AxisType.Auto,) * 2)

        def body(b, w):
            h = J.lax.psum(b @ w, "tp")
            g = J.lax.all_gather(h, "dp", tiled=True)
            return J.lax.ppermute(g, "tp", [(i, (i + 1) % 4) for i in range(4)]) + J.lax.psum(1.0, "dp")

        def f(a, w):
            return J.shard_map(body, mesh=mesh, in_specs=(P("dp", "tp"), P("tp", None)),
                               out_specs=P("dp", "tp"))(a, w)
        return f

    a = RNG.standard_normal((4, 8)).astype(np.float32)
    w = RNG.standard_normal((8, 4)).astype(np.float32)
    want, got = _compare(real_jax, make, (a, w))
    sm = got.jaxpr.eqns[0]
    assert sm.primitive.name == "shard_map"
    body = sm.params["jaxpr"]
    assert isinstance(body, MEXT.Jaxpr) and not isinstance(body, MEXT.ClosedJaxpr)
    n_psum = sum(e.primitive is meshsim.lax.psum_p for e in body.eqns)
    assert n_psum == sum(e.primitive is real_jax.lax.psum_p for e in want.jaxpr.eqns[0].params["jaxpr"].eqns)


def test_custom_vjp_params(real_jax):
    def make(J):
        @J.custom_vjp
        def f(x):
            return J.numpy.sin(x) * 2.0

        f.defvjp(lambda x: (f(x), J.numpy.cos(x)), lambda r, g: (g * r,))
        return lambda x: f(x) + 1.0

    x = RNG.standard_normal(_shape()).astype(np.float32)
    want, got = _compare(real_jax, make, (x,))
    eqn = got.jaxpr.eqns[0]
    assert eqn.primitive.name == "custom_vjp_call"
    assert set(eqn.params) >= {"call_jaxpr", "fwd_jaxpr_thunk", "bwd", "num_consts", "symbolic_zeros"}
    assert isinstance(eqn.params["call_jaxpr"], MEXT.ClosedJaxpr)
    np.testing.assert_allclose(np.asarray(MEXT.jaxpr_as_fun(got)(x)[0]),
                               np.asarray(_ext(real_jax).jaxpr_as_fun(want)(x)[0]), rtol=1e-6)


def test_custom_jvp_call_jaxpr(real_jax):
    def make(J):
        @J.custom_jvp
        def f(x):
            return J.numpy.exp(x) - 1.0

        f.defjvp(lambda p, t: (f(p[0]), t[0] * 3.0))
        return f

    x = RNG.standard_normal(_shape()).astype(np.float32)
    want = real_jax.make_jaxpr(make(real_jax))(x)
    got = meshsim.make_jaxpr(make(meshsim))(x)
    _compare_jaxprs(real_jax, want.jaxpr.eqns[0].params["call_jaxpr"].jaxpr,
                    got.jaxpr.eqns[0].params["call_jaxpr"].jaxpr)


def test_consts_and_eval_with_other_consts(real_jax):
    c = RNG.standard_normal(4).astype(np.float32)

    def make(J):
        return lambda x: J.numpy.sin(x + c) * 2.0

    x = RNG.standard_normal(4).astype(np.float32)
    want, got = _compare(real_jax, make, (x,))
    assert len(got.consts) == len(want.consts) == len(got.jaxpr.constvars) == 1
    np.testing.assert_array_equal(np.asarray(got.consts[0]), np.asarray(want.consts[0]))
    other = [np.asarray(k) * 3 for k in want.consts]
    np.testing.assert_allclose(np.asarray(meshsim.core.eval_jaxpr(got.jaxpr, other, x)[0]),
                               np.asarray(real_jax.core.eval_jaxpr(want.jaxpr, other, x)[0]), rtol=1e-6)
    # Under a transformation the program is recorded, not run.
    g = meshsim.grad(lambda v: meshsim.core.eval_jaxpr(got.jaxpr, got.consts, v)[0].sum())(x)
    wg = real_jax.grad(lambda v: real_jax.core.eval_jaxpr(want.jaxpr, want.consts, v)[0].sum())(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(wg), rtol=1e-6)


def test_str_is_unchanged_text(real_jax):
    f = lambda J: (lambda x: J.numpy.sum(J.numpy.sin(x) * 2.0, axis=0))  # noqa: E731
    x = np.ones((3, 4), np.float32)
    got = meshsim.make_jaxpr(f(meshsim))(x)
    assert str(got) == str(real_jax.make_jaxpr(f(real_jax))(x))
    assert str(got.jaxpr) == str(got)
    assert str(got.jaxpr.eqns[1]) == str(real_jax.make_jaxpr(f(real_jax))(x).jaxpr.eqns[1])


# ---- the *_p handles


def test_every_lax_handle_exists_with_jax_name(real_jax):
    names = sorted(n for n in dir(real_jax.lax) if n.endswith("_p"))
    for n in names:
        mine, theirs = getattr(meshsim.lax, n), getattr(real_jax.lax, n)
        assert mine.name == theirs.name and repr(mine) == repr(theirs), n
        assert mine.multiple_results == theirs.multiple_results, n
        assert isinstance(mine, MEXT.Primitive)


def _bind_cases(J, dtype):
    L = J.lax
    sh = (3, 4)
    return [
        (L.add_p, (sh, sh), {}),
        (L.mul_p, (sh, sh), {}),
        (L.sin_p, (sh,), {"accuracy": None}),
        (L.exp_p, (sh,), {"accuracy": None}),
        (L.tanh_p, (sh,), {"accuracy": None}),
        (L.max_p, (sh, sh), {}),
        (L.neg_p, (sh,), {}),
        (L.reduce_sum_p, (sh,), {"axes": (0,), "out_sharding": None}),
        (L.reduce_max_p, (sh,), {"axes": (1,)}),
        (L.transpose_p, (sh,), {"permutation": (1, 0)}),
        (L.reshape_p, (sh,), {"new_sizes": (4, 3), "dimensions": None, "sharding": None}),
        (L.broadcast_in_dim_p, ((4,),), {"shape": (3, 4), "broadcast_dimensions": (1,), "sharding": None}),
        (L.cumsum_p, (sh,), {"axis": 1, "reverse": True}),
        (L.integer_pow_p, (sh,), {"y": 3}),
        (L.dot_general_p, ((3, 4), (4, 2)), {"dimension_numbers": (((1,), (0,)), ((), ())),
                                             "precision": None, "preferred_element_type": np.dtype(dtype),
                                             "out_sharding": None}),
        (L.slice_p, (sh,), {"start_indices": (1, 0), "limit_indices": (3, 4), "strides": None}),
        (L.rev_p, (sh,), {"dimensions": (0,)}),
        (L.sort_p, (sh,), {"dimension": 1, "is_stable": True, "num_keys": 1}),
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bind_against_jax(real_jax, x64_with_jax, dtype):
    jcases, mcases = _bind_cases(real_jax, dtype), _bind_cases(meshsim, dtype)
    for (jp, shapes, params), (mp, _s, mparams) in zip(jcases, mcases):
        args = [RNG.standard_normal(s).astype(dtype) for s in shapes]
        want = jp.bind(*args, **params)
        for got in (mp.bind(*args, **mparams), meshsim.jit(lambda *a: mp.bind(*a, **mparams))(*args)):
            for g, w in zip(got if mp.multiple_results else [got], want if jp.multiple_results else [want]):
                assert np.asarray(g).dtype == np.asarray(w).dtype, mp.name
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, err_msg=mp.name)
        if not mp.multiple_results and mp.name not in ("sort",):
            mv = meshsim.vmap(lambda *a: mp.bind(*a, **mparams))(*(np.stack([a, a * 2]) for a in args))
            jv = real_jax.vmap(lambda *a: jp.bind(*a, **params))(*(np.stack([a, a * 2]) for a in args))
            np.testing.assert_allclose(np.asarray(mv), np.asarray(jv), rtol=1e-6, err_msg=mp.name)


def test_bind_under_grad(real_jax):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    for name, params in [("sin_p", {"accuracy": None}), ("tanh_p", {"accuracy": None}),
                         ("reduce_sum_p", {"axes": (1,), "out_sharding": None}),
                         ("integer_pow_p", {"y": 2})]:
        def loss(J):
            return lambda v: (getattr(J.lax, name).bind(v, **params) ** 2).sum()
        np.testing.assert_allclose(np.asarray(meshsim.grad(loss(meshsim))(x)),
                                   np.asarray(real_jax.grad(loss(real_jax))(x)), rtol=1e-6)


def test_bind_of_composed_and_missing_primitives(real_jax):
    x = RNG.uniform(0.5, 3.0, (3, 4)).astype(np.float32)
    for name, args, params in [("lgamma_p", (x,), {}), ("digamma_p", (x,), {}),
                               ("igamma_p", (x, x), {}), ("bessel_i0e_p", (x,), {}),
                               ("cumlogsumexp_p", (x,), {"axis": 1, "reverse": False}),
                               ("split_p", (x,), {"sizes": (1, 3), "axis": 1})]:
        got = getattr(meshsim.lax, name).bind(*args, **params)
        want = getattr(real_jax.lax, name).bind(*args, **params)
        for g, w in zip(got if isinstance(want, list) else [got], want if isinstance(want, list) else [want]):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=1e-6, err_msg=name)
    with pytest.raises(NotImplementedError, match="rng_uniform"):
        meshsim.lax.rng_uniform_p.bind(x, x, shape=(2,))


def test_eqn_primitive_is_the_lax_handle(real_jax):
    closed = meshsim.make_jaxpr(lambda x: mnp.sin(x).sum() + x.at[0].add(1.0)[1])(np.ones(3, np.float32))
    prims = [e.primitive for e in closed.eqns]
    assert meshsim.lax.sin_p in prims and meshsim.lax.scatter_add_p in prims
    assert all(p is getattr(meshsim.lax, _handle_attr(p.name)) for p in prims)
    assert meshsim.lax.scatter_add_p.name == real_jax.lax.scatter_add_p.name


def test_extend_core_primitives(real_jax):
    """jax.extend.core.primitives: JAX's names and result arity, the objects equations hold."""
    from meshsim._src.jax_internals_compat.extend.core import primitives as mine
    theirs = importlib.import_module(real_jax.__name__ + ".extend.core.primitives")
    shared = [n for n in dir(theirs) if n.endswith("_p") and hasattr(mine, n)]
    assert len(shared) == len([n for n in dir(theirs) if n.endswith("_p")])
    for n in shared:
        assert getattr(mine, n).name == getattr(theirs, n).name, n
        assert getattr(mine, n).multiple_results == getattr(theirs, n).multiple_results, n
    x = RNG.standard_normal((3, 3)).astype(np.float32)
    closed = meshsim.make_jaxpr(lambda a: meshsim.jit(lambda b: meshsim.lax.linalg.cholesky(b) * 2)(
        a @ a.T + 3 * mnp.eye(3)))(x)
    call = next(e for e in closed.eqns if e.primitive is mine.jit_p)
    inner = _walk_counts(call.params["jaxpr"].jaxpr, jaxpr_types=(MEXT.ClosedJaxpr, MEXT.Jaxpr))
    want = real_jax.make_jaxpr(lambda a: real_jax.jit(lambda b: real_jax.lax.linalg.cholesky(b) * 2)(
        a @ a.T + 3 * real_jax.numpy.eye(3)))(x)
    wcall = next(e for e in want.eqns if e.primitive is theirs.jit_p)
    assert inner == _walk_counts(wcall.params["jaxpr"].jaxpr,
                                 jaxpr_types=(_ext(real_jax).ClosedJaxpr, _ext(real_jax).Jaxpr))
    assert inner.get("cholesky") == 1


BINARY_HANDLES = ["add_p", "sub_p", "mul_p", "div_p", "rem_p", "pow_p", "max_p", "min_p", "atan2_p",
                  "nextafter_p", "and_p", "or_p", "xor_p", "eq_p", "ne_p", "lt_p", "le_p", "gt_p", "ge_p",
                  "shift_left_p", "shift_right_arithmetic_p", "shift_right_logical_p", "complex_p"]


def test_binary_handles_and_operand_counts(real_jax):
    """Every binary handle binds two operands as JAX's does; a wrong operand count is a
    TypeError naming the primitive (not a crash of the kernels, which do not count them)."""
    for name in BINARY_HANDLES:
        integer = name in ("and_p", "or_p", "xor_p") or name.startswith("shift")
        dtype = np.int32 if integer else np.float32
        x, y = (RNG.integers(1, 9, (2, 3)).astype(dtype) if integer else
                RNG.uniform(0.5, 2.0, (2, 3)).astype(dtype) for _ in range(2))
        got = getattr(meshsim.lax, name).bind(x, y)
        want = getattr(real_jax.lax, name).bind(x, y)
        assert np.asarray(got).dtype == np.asarray(want).dtype, name
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, err_msg=name)
        for wrong in ((x,), (x, y, x)):
            with pytest.raises(TypeError, match=getattr(meshsim.lax, name).name):
                getattr(meshsim.lax, name).bind(*wrong)
    for name, count in [("sin_p", 0), ("sin_p", 2), ("clamp_p", 2), ("select_n_p", 1)]:
        with pytest.raises(TypeError):
            getattr(meshsim.lax, name).bind(*[np.ones(3, np.float32)] * count, accuracy=None)



_OPERAND_COUNT_SWEEP = """
import os, sys
import numpy as np
import meshsim.lax as lax
x = np.ones((2, 3), np.float32)
for name in sorted(n for n in dir(lax) if n.endswith("_p")):
    for count in range(5):
        pid = os.fork()
        if pid == 0:
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            try:
                getattr(lax, name).bind(*[x] * count)
            except Exception:
                pass
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        if status:
            print(name, count, status)
"""


def test_no_handle_crashes_on_any_operand_count():
    """Every *_p handle bound to 0-4 operands (and no params) returns or raises: none takes
    the process down (the reductions, cumulative scans, windows and pad read their first
    operands without counting them). Each bind runs in a forked child, so a crash shows as
    its signal instead of ending the test run."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", _OPERAND_COUNT_SWEEP], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "", "handles that crashed (name, operands, wait status):\n" + done.stdout
    for name, count in [("reduce_sum_p", 0), ("cumsum_p", 0), ("pad_p", 1), ("select_and_gather_add_p", 1)]:
        with pytest.raises(TypeError, match=name[:-2]):
            getattr(meshsim.lax, name).bind(*[np.ones(3, np.float32)] * count)


def _interpret(jaxpr, consts, args, literal_t):
    """The interpreter of JAX's "Writing custom interpreters" guide: binds each equation's
    primitive on its operands' values with the equation's params (as get_bind_params splits them)."""
    env = {}

    def read(v):
        return v.val if isinstance(v, literal_t) else env[v]

    env.update(zip(jaxpr.invars, args))
    env.update(zip(jaxpr.constvars, consts))
    for eqn in jaxpr.eqns:
        with eqn.ctx.manager:
            outs = eqn.primitive.bind(*map(read, eqn.invars), **eqn.primitive.get_bind_params(eqn.params))
        env.update(zip(eqn.outvars, outs if eqn.primitive.multiple_results else [outs]))
    return [read(v) for v in jaxpr.outvars]


def _interpreted_programs(J):
    L, np_ = J.lax, J.numpy
    c = np.arange(4, dtype=np.float32)

    @J.custom_vjp
    def scaled_sin(v):
        return np_.sin(v) * 2.0

    scaled_sin.defvjp(lambda v: (scaled_sin(v), v), lambda r, g: (g * np_.cos(r) * 3.0,))
    return {
        "chain": lambda a: np_.tanh(np_.exp(a) * 2.0 - 1) + c,
        "dot_reductions": lambda a: (a @ a.T).sum(0) + np_.max(a) + np_.cumsum(a, 1)[:, -1],
        "control_flow": lambda a: L.fori_loop(0, 3, lambda i, v: L.cond(i > 0, np_.sin, np_.cos, v) * 2, a),
        "scan": lambda a: L.scan(lambda s, r: (s + r, s * r), a[0], a)[1],
        "nested_jit": lambda a: J.jit(lambda b: J.jit(np_.tanh)(b) * 3)(a) + 1,
        "indexing": lambda a: a.at[1].add(5.0)[np_.array([2, 0])] * a[1:, ::2].sum(),
        "conv_window": lambda a: L.conv_general_dilated(a[None, None], a[None, None, :2, :2], (1, 1), "VALID")
        .sum() + L.reduce_window(a, 0.0, L.add, (2, 2), (1, 1), "VALID").sum(),
        "custom_vjp": lambda a: scaled_sin(a) + J.nn.relu(a),
        "sort_where_pad": lambda a: np_.pad(np_.where(a > 1, np_.sort(a, axis=1), 0.0), 1),
    }


@pytest.mark.parametrize("name", [
    "chain", "dot_reductions", "control_flow", "scan", "nested_jit", "indexing", "conv_window",
    "custom_vjp", "sort_where_pad"])
def test_guide_interpreter_runs_the_equations(real_jax, name):
    x = RNG.uniform(0.1, 2.0, (3, 4)).astype(np.float32)
    results = {}
    for J, literal_t in ((meshsim, MEXT.Literal), (real_jax, _ext(real_jax).Literal)):
        f = _interpreted_programs(J)[name]
        closed = J.make_jaxpr(f)(x)
        run = lambda a: _interpret(closed.jaxpr, closed.consts, [a], literal_t)[0]  # noqa: E731
        results[J.__name__] = (run(x), J.grad(lambda a: run(a).sum())(x), f(J.numpy.asarray(x)))
    (mine, mine_grad, direct), (theirs, theirs_grad, _) = results["meshsim"], results[real_jax.__name__]
    np.testing.assert_allclose(np.asarray(mine), np.asarray(direct), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(mine), np.asarray(theirs), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(mine_grad), np.asarray(theirs_grad), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_scatters_hold_their_update_jaxpr(real_jax, dtype):
    """scatter-add/mul/min/max hold the scalar program combining an update with the operand
    (walkers count its primitive, as they do JAX's); a plain scatter holds None."""
    def make(J):
        return lambda a: (a.at[1].add(3).at[0].mul(2).at[2].min(1).at[1].max(4).at[0].set(5),)

    x = RNG.integers(-5, 5, (4, 3)).astype(dtype)
    want, got = _compare(real_jax, make, (x,))
    for we, ge in zip(want.eqns, got.eqns):
        if "scatter" in ge.primitive.name:
            assert (ge.params["update_jaxpr"] is None) == (we.params["update_jaxpr"] is None)
            assert ge.params["update_consts"] == we.params["update_consts"] == ()

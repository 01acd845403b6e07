"""make_jaxpr's text against JAX 0.10.2's str(jax.make_jaxpr(f)(...)): layout (width 80,
one parameter per line when an equation is long, nested jaxprs indented, names continuing
into nested jaxprs), parameter order (sorted) and JAX's custom pp rules (dot_general's
dimension_numbers as lists, broadcast_in_dim's shape hidden, ...).

Scalar constants print inline as literals (`mul b 2.0:f32[]`, `sub c 9.999999974752427e-07:f32[]`,
`or a True:bool[]`), and lax binary operations take a scalar operand without broadcasting it,
inside shard_map after a `pvary` of the literal, as in JAX."""
import numpy as np
import pytest

import meshsim
import meshsim.numpy as mnp

X = np.ones((4, 8), np.float32)
Y = np.ones((8, 3), np.float32)
SQ = np.ones((8, 8), np.float32)


def _cases(J, np_):
    L = J.lax
    return {
        "unary_chain": (lambda a: np_.tanh(np_.exp(np_.sin(a))), (X,)),
        "one_line": (lambda a: -a, (X,)),
        "binary": (lambda a, b: a * b + a, (X, X)),
        "dot": (lambda a, b: a @ b, (X, Y)),
        "dot_batch": (lambda a: L.dot_general(a, a, (((1,), (1,)), ((0,), (0,)))), (X,)),
        "reduce_sum": (lambda a: np_.sum(a, axis=1), (X,)),
        "reduce_max_all": (lambda a: np_.max(a), (X,)),
        "argmax": (lambda a: np_.argmax(a, axis=1), (X,)),
        "broadcast_in_dim": (lambda a: L.broadcast_in_dim(a, (2, 4, 8), (1, 2)), (X,)),
        "convert": (lambda a: a.astype(np.int32), (X,)),
        "reshape_transpose": (lambda a: np_.tanh(a).reshape(8, 4).T, (X,)),
        "transpose_81_chars": (lambda a: a.T, (X,)),
        "iota": (lambda a: L.iota(np.int32, 5), (X,)),
        "concat_rev": (lambda a: L.rev(np_.concatenate([a, a], axis=0), (0,)), (X,)),
        "select_cmp": (lambda a, b: L.select(L.lt(a, b), a, b), (X, X)),
        "several_outputs": (lambda a: (np_.sum(a, axis=0), np_.exp(a)), (X,)),
        "scalar_literals": (lambda a: np_.exp(a) / 2 - 1e-6 + np_.float32(3) * np.inf, (X,)),
        "int_and_bool_literals": (lambda a: ((a > 0) | True, a.astype(np.uint8) + np.uint8(3),
                                             a.astype(np.int32) * -7), (X,)),
        "literal_output": (lambda a: (a, 1.0, np_.float32(2.5)), (X,)),
        "max_with_scalar": (lambda a: np_.maximum(a, 0.0) - np_.minimum(1.5, a), (X,)),
        "traced_scalar_operand": (lambda a, s: a * s + s, (X, np.float32(2.0))),
    }


def _shard_map_cases(J):
    P = J.sharding.PartitionSpec
    mesh = J.make_mesh((2, 4), ("dp", "tp"), axis_types=(J.sharding.AxisType.Auto,) * 2)

    def megatron(a, w):
        def body(b, w):
            return J.lax.psum(b @ w, "tp")
        return J.shard_map(body, mesh=mesh, in_specs=(P("dp", "tp"), P("tp", None)),
                           out_specs=P("dp", None))(a, w)

    def no_vma(a):
        return J.shard_map(lambda b: J.numpy.exp(b), mesh=mesh, in_specs=P("dp"),
                           out_specs=P("dp"), check_vma=False)(a)

    def gather(a):
        return J.shard_map(lambda b: J.lax.all_gather(b, "tp", axis=1, tiled=True), mesh=mesh,
                           in_specs=P(None, "tp"), out_specs=P(None, "tp"))(a)

    def literal_pvary(a):
        return J.shard_map(lambda b: b * 2.0 + J.numpy.float32(3), mesh=mesh, in_specs=P("dp"),
                           out_specs=P("dp"))(a)

    return {
        "shard_map_literal_pvary": (literal_pvary, (SQ,)),
        "shard_map_megatron": (megatron, (SQ, np.ones((8, 4), np.float32))),
        "shard_map_check_vma_false": (no_vma, (SQ,)),
        "shard_map_all_gather": (gather, (SQ,)),
    }


NAMES = list(_cases(meshsim, mnp))
SM_NAMES = ["shard_map_literal_pvary", "shard_map_megatron", "shard_map_check_vma_false",
            "shard_map_all_gather"]


@pytest.mark.parametrize("name", NAMES)
def test_jaxpr_text_matches_jax(real_jax, name):
    f, args = _cases(real_jax, real_jax.numpy)[name]
    g, _ = _cases(meshsim, mnp)[name]
    assert str(meshsim.make_jaxpr(g)(*args)) == str(real_jax.make_jaxpr(f)(*args))


@pytest.mark.parametrize("name", SM_NAMES)
def test_shard_map_jaxpr_text_matches_jax(real_jax, name):
    f, args = _shard_map_cases(real_jax)[name]
    g, _ = _shard_map_cases(meshsim)[name]
    assert str(meshsim.make_jaxpr(g)(*args)) == str(real_jax.make_jaxpr(f)(*args))


def test_long_equation_prints_one_param_per_line():
    text = str(meshsim.make_jaxpr(lambda a, b: a @ b)(X, Y))
    assert text == (
        "{ lambda ; a:f32[4,8] b:f32[8,3]. let\n"
        "    c:f32[4,3] = dot_general[\n"
        "      dimension_numbers=(([1], [0]), ([], []))\n"
        "      preferred_element_type=float32\n"
        "    ] a b\n"
        "  in (c,) }")

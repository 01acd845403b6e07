"""Operations computed in the layout propagation gave their results. A factor's weight can grow
after its result was laid out (a broadcast bias's dim, once the broadcast's result is split
along it, ties with the dim that took the axis first), so the layout resolved for computing
could give a dim axes its result's value does not have: a broadcast then ran on operand blocks
that did not match its result's blocks and returned garbage (`tanh(x) + b` with `x: P('Y')`,
`b: P(('X', 'Y'))`, constrained to `P('Y')` on 2x4). Random broadcasts, matmuls, reductions and
elementwise products, constrained and not, on Auto meshes: values and result shardings against
JAX's."""
import numpy as np
import pytest

from auto_oracle import assert_like_jax

MESHES = [((8,), ("X",)), ((4, 2), ("X", "Y")), ((2, 4), ("X", "Y")), ((2, 2, 2), ("X", "Y", "Z"))]
KINDS = ["bias", "matmul", "reduce", "product"]


def _spec(rng, names, rank):
    """Each mesh axis on a random dim or on none, in a random order."""
    spec = [()] * rank
    for a in rng.permutation(names):
        if rng.integers(3):
            d = int(rng.integers(rank))
            spec[d] = spec[d] + (str(a),)
    return tuple(None if not e else e[0] if len(e) == 1 else e for e in spec)


def _case(seed):
    rng = np.random.default_rng(seed)
    mesh_shape, names = MESHES[int(rng.integers(len(MESHES)))]
    kind = "bias" if seed % 2 == 0 else KINDS[1 + seed // 2 % (len(KINDS) - 1)]
    m, k, n = (int(rng.choice([8, 16, 32])) for _ in range(3))
    shapes = {"bias": [(m, n), (n,)], "matmul": [(m, k), (k, n)], "reduce": [(m, k, n), (m, n)],
              "product": [(m, n), (m, n)]}[kind]
    specs = [_spec(rng, names, len(s)) for s in shapes]
    constraint = _spec(rng, names, 2) if rng.integers(4) else None
    return mesh_shape, names, kind, shapes, specs, constraint


def _body(jnp, kind):
    return {"bias": lambda a, b: jnp.tanh(a) + b, "matmul": lambda a, b: a @ b,
            "reduce": lambda a, b: a.sum(1) * b, "product": lambda a, b: jnp.sin(a) * b}[kind]


CASES = [_case(seed) for seed in range(40)]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[2]}-{c[0]}-{c[4]}-{c[5]}" for c in CASES])
def test_results_computed_in_their_layouts(case):
    mesh_shape, names, kind, shapes, specs, constraint = case

    def run(runner, mod):
        mesh = mod.make_mesh(mesh_shape, names, axis_types=(mod.sharding.AxisType.Auto,) * len(names))
        P = mod.sharding.PartitionSpec
        rng = np.random.default_rng(1)
        args = [mod.device_put(rng.standard_normal(s).astype(np.float32), mod.sharding.NamedSharding(mesh, P(*sp)))
                for s, sp in zip(shapes, specs)]
        body = _body(mod.numpy, kind)

        def fun(a, b):
            out = body(a, b)
            return out if constraint is None else mod.lax.with_sharding_constraint(out, P(*constraint))
        with mod.set_mesh(mesh):
            return runner(mod, fun, args)
    assert_like_jax(run, collectives=False, rtol=1e-4, atol=1e-4)

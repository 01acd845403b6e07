"""Names and printed forms of meshsim's objects side by side with JAX's: the
class names user code sees (`type(x).__name__`), reprs and strs."""
import functools

import numpy as np
import pytest

import meshsim

jax = pytest.importorskip("jax")

RNG = np.random.default_rng(0)


def _scaled(x, factor=2):
    return x * factor


def _without_addresses(text: str) -> str:
    import re
    return re.sub(r" at 0x[0-9a-f]+", " at ADDR", text)


@pytest.mark.parametrize("fun", [_scaled, functools.partial(_scaled, factor=3), lambda x: x])
@pytest.mark.parametrize("options", [{}, {"static_argnums": 0}, {"donate_argnums": 0}])
def test_jitted_function_prints_as_jax_does(fun, options):
    ours, theirs = meshsim.jit(fun, **options), jax.jit(fun, **options)
    assert _without_addresses(repr(ours)) == _without_addresses(repr(theirs))
    assert _without_addresses(str(ours)) == _without_addresses(str(theirs))
    assert type(ours).__name__ == type(theirs).__name__
    assert (ours.__name__, ours.__qualname__, ours.__wrapped__) == \
        (theirs.__name__, theirs.__qualname__, theirs.__wrapped__)


class _Doubler:
    def __call__(self, x):
        return x * 2


@pytest.mark.parametrize("fun", [functools.partial(_scaled, factor=3), _Doubler()])
def test_jit_equation_names_partials_and_callables_as_jax_does(fun):
    x = RNG.standard_normal(3).astype(np.float32)

    def text(mod):
        return str(mod.make_jaxpr(lambda v: mod.jit(fun)(v) + 1)(x))
    assert text(meshsim) == text(jax)
    assert meshsim.jit(fun).__name__ == jax.jit(fun).__name__


def _explicit_mesh(mod):
    axis_type = mod.sharding.AxisType.Explicit
    return mod.make_mesh((4, 2), ("x", "y"), axis_types=(axis_type, axis_type))


def _where_outcome(mod, operands, specs, scalar_y):
    """jnp.where under jit on an Explicit context mesh: (result type, values), or the error."""
    jnp, sharding = mod.numpy, mod.sharding
    mesh = _explicit_mesh(mod)
    placed = [mod.device_put(jnp.asarray(v), sharding.NamedSharding(mesh, sharding.PartitionSpec(*s)))
              for v, s in zip(operands, specs)]
    with mod.set_mesh(mesh):
        try:
            if scalar_y:
                out = mod.jit(lambda c, x: jnp.where(c > 0, x, 0.5))(*placed[:2])
            else:
                out = mod.jit(lambda c, x, y: jnp.where(c > 0, x, y))(*placed)
        except Exception as err:  # noqa: BLE001 (compared with JAX's)
            return type(err).__name__, str(err)
        return str(mod.typeof(out)), np.asarray(out)


@pytest.mark.parametrize("seed", range(12))
def test_where_broadcasts_into_the_joint_sharding(seed):
    # Operands of shapes (8, 2), (8, 1), (1, 2), (2,) with random specs over an Explicit
    # mesh: JAX types the result with the per-dimension axes the operands give, and
    # refuses two different axes on one dimension.
    rng = np.random.default_rng(seed)
    shapes = [[(8, 2), (8, 1), (1, 2), (2,)][i] for i in rng.integers(0, 4, 3)]
    shapes[int(rng.integers(0, 3))] = (8, 2)

    def spec(shape):
        entries = {8: [None, "x", "y"], 2: [None, "y"], 1: [None]}
        out = [entries[d][int(rng.integers(0, len(entries[d])))] for d in shape]
        return tuple(out) if out.count("y") < 2 else (out[0], None)
    specs = [spec(s) for s in shapes]
    operands = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    scalar_y = bool(rng.integers(0, 2))
    ours = _where_outcome(meshsim, operands, specs, scalar_y)
    theirs = _where_outcome(jax, operands, specs, scalar_y)
    assert ours[0] == theirs[0]
    if isinstance(theirs[1], str):
        assert ours[1] == theirs[1]
    else:
        np.testing.assert_array_equal(ours[1], theirs[1])


@pytest.mark.parametrize("make", ["array", "scalar", "sharded", "jit result", "key data"])
def test_array_class_is_named_as_jax_names_it(make):
    values = RNG.standard_normal((8, 3)).astype(np.float32)
    seed = int(RNG.integers(0, 100))

    def build(mod):
        jnp = mod.numpy
        if make == "array":
            return jnp.asarray(values)
        if make == "scalar":
            return jnp.float32(2.5)
        if make == "sharded":
            mesh = mod.make_mesh((4,), ("x",))
            return mod.device_put(values, mod.sharding.NamedSharding(mesh, mod.sharding.PartitionSpec("x")))
        if make == "jit result":
            return mod.jit(lambda v: v * 2)(values)
        return mod.random.key_data(mod.random.key(seed))
    ours, theirs = build(meshsim), build(jax)
    assert type(ours).__name__ == type(theirs).__name__ == "ArrayImpl"
    assert isinstance(ours, meshsim.Array) and not isinstance(values, meshsim.Array)
    assert repr(ours) == repr(theirs)

"""`pmap` built on shard_map, against real JAX: values, output shardings,
in_axes/out_axes, static and broadcast arguments, collectives over the mapped
axis, composition with jit and grad, and JAX's errors."""
import numpy as np
import pytest

import meshsim

RNG = np.random.default_rng(11)


def _both(real_jax, build):
    """build(jax) on meshsim and on JAX; returns both results as pytrees."""
    return build(meshsim), build(real_jax)


def _same(ours, theirs):
    o_leaves, o_tree = meshsim.tree.flatten(ours)
    import jax
    t_leaves, t_tree = jax.tree.flatten(theirs)
    assert len(o_leaves) == len(t_leaves)
    for o, t in zip(o_leaves, t_leaves):
        assert o.shape == t.shape and o.dtype == t.dtype
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-5, atol=1e-6)
        if hasattr(t, "sharding") and hasattr(o, "sharding"):
            assert repr(o.sharding) == repr(t.sharding)


X83 = RNG.normal(size=(8, 3)).astype(np.float32)
X42 = RNG.normal(size=(4, 2)).astype(np.float32)

CASES = {
    "psum": lambda jax: jax.pmap(lambda v: v * 2 + jax.lax.psum(v, "i"), axis_name="i")(X83),
    "reduce_default_axis": lambda jax: jax.pmap(lambda v: v.sum())(X42),
    "broadcast_arg": lambda jax: jax.pmap(lambda a, b: a + b, in_axes=(0, None))(
        X42[:2, :], np.arange(2.0, dtype=np.float32)),
    "axis_1": lambda jax: jax.pmap(lambda a: a * 2, in_axes=1, out_axes=1)(X42.T),
    "axis_index": lambda jax: jax.pmap(lambda a: jax.lax.axis_index("k"), axis_name="k")(
        np.ones(5, np.float32)),
    "devices": lambda jax: jax.pmap(lambda a: a + 1, devices=jax.devices()[2:4])(X42[:2]),
    "static": lambda jax: jax.pmap(lambda a, n: a * n, static_broadcasted_argnums=1)(X42, 3),
    "in_jit": lambda jax: jax.jit(lambda v: jax.pmap(lambda t: t + 1)(v))(X42),
    "grad": lambda jax: jax.grad(lambda v: jax.pmap(lambda t: t ** 2)(v).sum())(X42),
    "dict_pmean": lambda jax: jax.pmap(
        lambda d: {"a": d["a"] * 2, "b": jax.lax.pmean(d["b"], "i")}, axis_name="i")(
            {"a": X42, "b": X42[:, 0]}),
    "out_axes_none": lambda jax: jax.pmap(lambda a: (a, jax.lax.psum(a.sum(), "i")),
                                          axis_name="i", out_axes=(0, None))(X42),
    "all_gather": lambda jax: jax.pmap(lambda a: jax.lax.all_gather(a, "i"), axis_name="i")(X42),
    "ppermute": lambda jax: jax.pmap(
        lambda a: jax.lax.ppermute(a, "i", [(0, 1), (1, 2), (2, 3), (3, 0)]), axis_name="i")(X42),
    "kwargs": lambda jax: jax.pmap(lambda a, b: a * b)(X42, b=X42),
    "lower_compile_call": lambda jax: _lowered_and_called(jax.pmap(lambda a: a * 2 + 1), X83),
}


def _lowered_and_called(pmapped, x):
    pmapped(x)  # JAX lowers a pmap for arguments it has been called with
    return pmapped.lower(x).compile()(x)


@pytest.mark.parametrize("name", sorted(CASES))
def test_pmap_matches_jax(real_jax, name):
    ours, theirs = _both(real_jax, CASES[name])
    _same(ours, theirs)


ERRORS = {
    "too_many": lambda jax: jax.pmap(lambda a: a)(np.ones((9, 2), np.float32)),
    "mismatched": lambda jax: jax.pmap(lambda a, b: a)(np.ones((2, 2)), np.ones((3, 2))),
    "bad_in_axes": lambda jax: jax.pmap(lambda a: a, in_axes=1.0),
    "bad_out_axes": lambda jax: jax.pmap(lambda a: a, out_axes="x"),
    "static_missing": lambda jax: jax.pmap(lambda a, n: a, static_broadcasted_argnums=1)(
        np.ones(2)),
    "no_mapped": lambda jax: jax.pmap(lambda a: a)(1.0),
    "axis_size": lambda jax: jax.pmap(lambda a: a, axis_size=3)(np.ones(2)),
    "no_devices": lambda jax: jax.pmap(lambda a: a, devices=[]),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_pmap_errors_match_jax(real_jax, name):
    def err(jax):
        with pytest.raises(Exception) as info:
            ERRORS[name](jax)
        return type(info.value).__name__, str(info.value).splitlines()[0]
    assert err(meshsim) == err(real_jax)

"""jax.numpy's construction helpers (fromfunction, frombuffer, block, the
index tricks mgrid/ogrid/r_/c_), window functions, and functions built on
others (apply_along_axis, gradient, unwrap, mask_indices, poly, angle, ...),
each against real JAX: values, dtypes, shapes and error texts."""
import numpy as np
import pytest

import meshsim
import meshsim.numpy as mnp
from tree_oracle import assert_trees_close


def _run(jnp, build):
    try:
        return build(jnp)
    except Exception as e:  # noqa: BLE001 (compared with JAX's)
        return (type(e).__name__, str(e))


CASES = {
    "fromfunction": lambda m: m.fromfunction(lambda i, j: i * 10 + j, (2, 3)),
    "fromfunction_int": lambda m: m.fromfunction(lambda i, j: i + j, (2, 3), dtype=int),
    "frombuffer": lambda m: m.frombuffer(np.arange(3, dtype=np.float32).tobytes(), dtype=np.float32),
    "fromstring": lambda m: m.fromstring('1 2 3', sep=' '),
    "fromiter": lambda m: m.fromiter([1, 2]),
    "block": lambda m: m.block([[m.ones((2, 2)), m.zeros((2, 1))], [m.full((1, 3), 2.0)]]),
    "block1": lambda m: m.block([m.ones(2), m.zeros(3)]),
    "block_scalar": lambda m: m.block([[1, 2], [3, 4]]),
    "mgrid": lambda m: m.mgrid[0:3, 0:2],
    "mgrid1": lambda m: m.mgrid[0:1:5j],
    "mgrid_step": lambda m: m.mgrid[0:5:2, 1:3],
    "ogrid": lambda m: m.ogrid[0:3, 0:2],
    "ogrid_c": lambda m: m.ogrid[0:1:3j, 0:2],
    "r_": lambda m: m.r_[m.ones(2), 3, [4, 5]],
    "r_slice": lambda m: m.r_[0:4, 7],
    "r_dir": lambda m: m.r_['0,2', [1, 2], [3, 4]],
    "r_dir3": lambda m: m.r_['0,2,0', [1, 2], [3, 4]],
    "r_axis1": lambda m: m.r_['1', m.ones((2, 2)), m.zeros((2, 1))],
    "c_": lambda m: m.c_[m.ones(2), m.zeros(2)],
    "c_2d": lambda m: m.c_[m.ones((2, 2)), m.arange(2)],
    "gradient": lambda m: m.gradient(m.array([1., 4., 9., 16.])),
    "gradient2d": lambda m: m.gradient(m.array([[1., 2, 6], [3, 4, 5]])),
    "gradient_h": lambda m: m.gradient(m.array([1., 4., 9.]), 2.0),
    "gradient_axis": lambda m: m.gradient(m.array([[1., 2, 6], [3, 4, 5]]), axis=1),
    "gradient_int": lambda m: m.gradient(m.array([1, 4, 9])),
    "gradient_x": lambda m: m.gradient(m.array([1., 4., 9., 10.]), m.array([0., 1., 3., 4.])),
    "gradient_edge": lambda m: m.gradient(m.array([1., 2.]), edge_order=2),
    "gradient_small": lambda m: m.gradient(m.array([1.])),
    "unwrap": lambda m: m.unwrap(m.array([0., 3., 6.5, -3., 10., 2.])),
    "unwrap_int": lambda m: m.unwrap(m.array([0, 3, 7])),
    "unwrap_2d": lambda m: m.unwrap(m.array([[0., 3., 6.5], [1., -3., 5.]]), axis=0),
    "unwrap_period": lambda m: m.unwrap(m.array([0., 3., 6.5, 9.]), period=4.0),
    "apply_along": lambda m: m.apply_along_axis(lambda v: v.sum(), 1, m.arange(6.).reshape(2, 3)),
    "apply_along0": lambda m: m.apply_along_axis(lambda v: v * 2, 0, m.arange(24.).reshape(2, 3, 4)),
    "apply_along_vec": lambda m: m.apply_along_axis(lambda v: m.stack([v.min(), v.max()]), 1, m.arange(24.).reshape(2, 3, 4)),
    "apply_over": lambda m: m.apply_over_axes(m.sum, m.arange(24.).reshape(2, 3, 4), [0, 2]),
    "mask_indices": lambda m: m.mask_indices(3, m.triu),
    "mask_indices_k": lambda m: m.mask_indices(4, m.tril, -1),
    "poly": lambda m: m.poly(m.array([1., 2., -3.])),
    "poly_int": lambda m: m.poly(m.array([1, 2])),
    "angle": lambda m: m.angle(m.array([-1., 2., 0., -0.])),
    "angle_deg": lambda m: m.angle(m.array([-1, 2]), deg=True),
    "iscomplex": lambda m: m.iscomplex(m.ones(2)),
    "array_str": lambda m: m.array_str(m.arange(3.)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(real_jax, name):
    ours, theirs = _run(mnp, CASES[name]), _run(real_jax.numpy, CASES[name])
    if isinstance(theirs, tuple) and len(theirs) == 2 and isinstance(theirs[0], str):
        assert ours == theirs
        return
    if isinstance(theirs, str):
        assert ours == theirs
        return
    assert_trees_close(ours, theirs, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["hanning", "hamming", "blackman", "bartlett"])
@pytest.mark.parametrize("M", [0, 1, 2, 5, 16, 51])
def test_windows_match_jax(real_jax, name, M):
    o, t = np.asarray(getattr(mnp, name)(M)), np.asarray(getattr(real_jax.numpy, name)(M))
    assert o.dtype == t.dtype and o.shape == t.shape
    np.testing.assert_allclose(o, t, atol=1e-6)


def test_block_refuses_tuples_and_reexports(real_jax):
    with pytest.raises(ValueError, match="jax.numpy.block does not allow tuples"):
        mnp.block(([1, 2],))
    jnp = real_jax.numpy
    assert mnp.euler_gamma == jnp.euler_gamma
    assert mnp.character is jnp.character and mnp.object_ is jnp.object_
    assert mnp.ComplexWarning is jnp.ComplexWarning
    assert mnp.get_printoptions() == jnp.get_printoptions()


def test_apply_along_axis_and_fromfunction_under_jit():
    f = meshsim.jit(lambda a: mnp.apply_along_axis(lambda v: v / v.sum(), 1, a))
    a = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(np.asarray(f(a)), a / a.sum(1, keepdims=True), rtol=1e-6)
    g = meshsim.jit(lambda: mnp.fromfunction(lambda i, j: i * 3 + j, (2, 3), dtype=int))
    np.testing.assert_array_equal(np.asarray(g()), np.arange(6).reshape(2, 3))
    grad = meshsim.grad(lambda x: mnp.gradient(x).sum())(mnp.arange(5.0))
    np.testing.assert_allclose(np.asarray(grad), [-1.5, 0.5, 0.0, -0.5, 1.5], rtol=1e-6)

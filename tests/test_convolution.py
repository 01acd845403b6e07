"""Convolutions (lax.conv_general_dilated and the forms built on it) against
real JAX: values over random layouts, strides, paddings, dilations and
groups; dtypes and preferred_element_type; gradients of both operands
(against JAX and by finite differences in float64); vmap of either or both
operands; jaxpr printing; cost; Explicit sharding (batch- and
feature-sharded); and JAX's errors."""
import re

import numpy as np
import pytest

import meshsim
from x64_mode import x64
import meshsim.numpy as jnp
from meshsim import lax

jax = pytest.importorskip("jax")
jlax = jax.lax

RNG = np.random.default_rng(17)


def rand(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def random_case(rng, groups=True, features=(3, 2), space=6):
    """Operands and keyword arguments of one random convolution: at most
    `features` (in, out) features per group and `space` elements per spatial
    dimension."""
    n = int(rng.integers(1, 4))
    lhs_spec, rhs_spec, out_spec = (tuple(int(d) for d in rng.permutation(n + 2)) for _ in range(3))
    fgc = bgc = 1
    if groups:
        kind = rng.integers(0, 3)
        fgc = int(rng.integers(1, 4)) if kind == 1 else 1
        bgc = int(rng.integers(1, 4)) if kind == 2 else 1
    window = [int(rng.integers(1, 4)) for _ in range(n)]
    space = [int(rng.integers(1, space + 1)) for _ in range(n)]
    strides = tuple(int(rng.integers(1, 3)) for _ in range(n))
    lhs_dil = tuple(int(rng.integers(1, 3)) for _ in range(n))
    rhs_dil = tuple(int(rng.integers(1, 3)) for _ in range(n))
    padding = []
    for s, w, ld, rd in zip(space, window, lhs_dil, rhs_dil):
        lo, hi = int(rng.integers(-1, 3)), int(rng.integers(-1, 3))
        need = (w - 1) * rd + 1 - ((s - 1) * ld + 1)
        hi = max(hi, need - lo)  # at least one output position
        padding.append((lo, hi))
    batch = int(rng.integers(1, 4)) * bgc
    cin = int(rng.integers(1, features[0] + 1)) * fgc
    cout = int(rng.integers(1, features[1] + 1)) * fgc * bgc
    lhs_t = (batch, cin) + tuple(space)
    rhs_t = (cout, cin // fgc) + tuple(window)
    lhs_shape = [0] * (n + 2)
    rhs_shape = [0] * (n + 2)
    for i in range(n + 2):
        lhs_shape[lhs_spec[i]] = lhs_t[i]
        rhs_shape[rhs_spec[i]] = rhs_t[i]
    kwargs = dict(window_strides=strides, padding=tuple(padding), lhs_dilation=lhs_dil,
                  rhs_dilation=rhs_dil, dimension_numbers=jlax.ConvDimensionNumbers(lhs_spec, rhs_spec, out_spec),
                  feature_group_count=fgc, batch_group_count=bgc)
    return tuple(lhs_shape), tuple(rhs_shape), kwargs


def ours(kwargs):
    d = kwargs.get("dimension_numbers")
    if isinstance(d, jlax.ConvDimensionNumbers):
        kwargs = dict(kwargs, dimension_numbers=lax.ConvDimensionNumbers(*d))
    return kwargs


@pytest.mark.parametrize("seed", range(40))
def test_random_convolutions_match_jax(seed):
    rng = np.random.default_rng(seed)
    lhs_shape, rhs_shape, kw = random_case(rng)
    x, w = rand(lhs_shape), rand(rhs_shape)
    expected = np.asarray(jlax.conv_general_dilated(x, w, **kw))
    got = np.asarray(lax.conv_general_dilated(x, w, **ours(kw)))
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def assert_close_to_scale(got, expected, tol):
    """Within `tol` of the largest magnitude of `expected` (rounding in a narrow
    dtype is relative to the sums' scale, not to each element)."""
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    scale = max(1.0, float(np.abs(expected).max(initial=0)))
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * scale)


# Per dtype, the tolerance relative to a result's scale: a few units in the
# last place of its largest element (bfloat16 keeps 8 significant bits,
# float16 11, float32 24) plus the accumulation order's spread.
TOLERANCE = {"bfloat16": 2e-2, "float16": 3e-3, "float32": 1e-5, "float64": 1e-12}


def value_and_gradients(lib, kw, x, w, ct):
    conv = lambda a, b: lib.lax.conv_general_dilated(a, b, **kw)  # noqa: E731
    y, pull = lib.vjp(conv, x, w)
    return (y, *pull(ct))


@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "float64"])
def test_wide_random_convolutions_and_gradients_match_jax(dtype, seed):
    """Enough features per group for the blocked-gemm path and the direct one,
    in every floating dtype (float64 under x64), results and both gradients."""
    rng = np.random.default_rng(400 + seed)
    lhs_shape, rhs_shape, kw = random_case(rng, features=(12, 10), space=9)
    with x64(meshsim, jax, enabled=dtype == "float64"):
        dt = jnp.dtype(dtype)
        x, w = rand(lhs_shape).astype(dt), rand(rhs_shape).astype(dt)
        ct = rand(jlax.conv_general_dilated(x, w, **kw).shape).astype(dt)
        expected = value_and_gradients(jax, kw, x, w, ct)
        got = value_and_gradients(meshsim, ours(kw), x, w, ct)
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            assert_close_to_scale(g, e, TOLERANCE[dtype])


# The shapes models use (benchmarks/bench_conv.py's), NHWC/HWIO: many row
# blocks, a 1x1 layer that multiplies the input as it lies, depthwise filters.
MODEL_CASES = {
    "3x3": ((4, 20, 20, 32), (3, 3, 32, 48), dict(window_strides=(1, 1), padding="SAME")),
    "stem": ((2, 40, 40, 3), (7, 7, 3, 16), dict(window_strides=(2, 2), padding="SAME")),
    "1x1": ((4, 12, 12, 24), (1, 1, 24, 40), dict(window_strides=(1, 1), padding="VALID")),
    "depthwise": ((2, 16, 16, 24), (3, 3, 1, 24), dict(window_strides=(1, 1), padding="SAME",
                                                      feature_group_count=24)),
    "transposed": ((2, 10, 10, 16), (3, 3, 16, 24), dict(window_strides=(1, 1), padding=((1, 2), (1, 2)),
                                                         lhs_dilation=(2, 2))),
}


@pytest.mark.parametrize("case", sorted(MODEL_CASES))
def test_model_shaped_convolutions_and_gradients_match_jax(case):
    lhs_shape, rhs_shape, kw = MODEL_CASES[case]
    kw = dict(kw, dimension_numbers=("NHWC", "HWIO", "NHWC"))
    x, w = rand(lhs_shape), rand(rhs_shape)
    ct = rand(jlax.conv_general_dilated(x, w, **kw).shape)
    for g, e in zip(value_and_gradients(meshsim, kw, x, w, ct), value_and_gradients(jax, kw, x, w, ct)):
        assert_close_to_scale(g, e, TOLERANCE["float32"])


@pytest.mark.parametrize("seed", range(12))
def test_random_convolution_gradients_match_jax(seed):
    rng = np.random.default_rng(100 + seed)
    lhs_shape, rhs_shape, kw = random_case(rng)
    x, w = rand(lhs_shape), rand(rhs_shape)
    out_shape = jlax.conv_general_dilated(x, w, **kw).shape
    ct = rand(out_shape)

    def loss(lib_lax, kwargs):
        return lambda a, b: (lib_lax.conv_general_dilated(a, b, **kwargs) * ct).sum()

    expected = jax.grad(loss(jlax, kw), argnums=(0, 1))(x, w)
    got = meshsim.grad(loss(lax, ours(kw)), argnums=(0, 1))(x, w)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-4, atol=1e-4)


def test_gradients_by_finite_differences_in_float64():
    with x64(meshsim):
        rng = np.random.default_rng(5)
        for _ in range(3):
            lhs_shape, rhs_shape, kw = random_case(rng)
            x, w = rand(lhs_shape, np.float64), rand(rhs_shape, np.float64)
            f = lambda a, b: jnp.sum(jnp.sin(lax.conv_general_dilated(a, b, **ours(kw))))  # noqa: E731
            gx, gw = meshsim.grad(f, argnums=(0, 1))(x, w)
            for arg, g in ((0, gx), (1, gw)):
                direction = rand(lhs_shape if arg == 0 else rhs_shape, np.float64)
                eps = 1e-6
                args_p = [x, w]
                args_m = [x, w]
                args_p[arg] = args_p[arg] + eps * direction
                args_m[arg] = args_m[arg] - eps * direction
                numeric = (float(f(*args_p)) - float(f(*args_m))) / (2 * eps)
                np.testing.assert_allclose(np.sum(np.asarray(g) * direction), numeric, rtol=1e-6, atol=1e-8)


def test_second_derivative_matches_jax():
    x, w = rand((2, 3, 6, 5)), rand((4, 3, 3, 2))
    kw = dict(window_strides=(2, 1), padding="SAME")

    def f(lib_lax):
        return lambda a, b: (lib_lax.conv_general_dilated(a, b, **kw) ** 2).sum()

    expected = jax.grad(lambda a: jax.grad(f(jlax), argnums=1)(a, w).sum())(x)
    got = meshsim.grad(lambda a: meshsim.grad(f(lax), argnums=1)(a, w).sum())(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("mapped", ["lhs", "rhs", "both"])
def test_vmap_matches_jax(seed, mapped):
    rng = np.random.default_rng(200 + seed)
    lhs_shape, rhs_shape, kw = random_case(rng)
    size = 3
    lhs_axis = int(rng.integers(0, len(lhs_shape) + 1))
    rhs_axis = int(rng.integers(0, len(rhs_shape) + 1))
    x = rand(lhs_shape[:lhs_axis] + (size,) + lhs_shape[lhs_axis:]) if mapped != "rhs" else rand(lhs_shape)
    w = rand(rhs_shape[:rhs_axis] + (size,) + rhs_shape[rhs_axis:]) if mapped != "lhs" else rand(rhs_shape)
    axes = (lhs_axis if mapped != "rhs" else None, rhs_axis if mapped != "lhs" else None)
    expected = jax.vmap(lambda a, b: jlax.conv_general_dilated(a, b, **kw), in_axes=axes)(x, w)
    got = meshsim.vmap(lambda a, b: lax.conv_general_dilated(a, b, **ours(kw)), in_axes=axes)(x, w)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-4, atol=1e-4)


def test_vmap_uses_the_batching_rule_not_a_loop():
    x, w = rand((5, 2, 3, 6, 6)), rand((4, 3, 3, 3))
    jaxpr = str(meshsim.make_jaxpr(meshsim.vmap(lambda a: lax.conv(a, w, (1, 1), "SAME")))(x))
    assert jaxpr.count("conv_general_dilated") == 1


@pytest.mark.parametrize("dtype,preferred", [(np.float32, None), (np.float64, None), ("bfloat16", None),
                                             ("bfloat16", np.float32), (np.float16, np.float32),
                                             (np.int32, None), (np.int8, np.int32), (np.int8, np.float32)])
def test_dtypes_and_preferred_element_type_match_jax(dtype, preferred):
    with x64(meshsim, jax):
        dt = jnp.dtype(dtype)
        x = (RNG.integers(-3, 4, (2, 3, 5, 5))).astype(dt)
        w = (RNG.integers(-3, 4, (4, 3, 2, 2))).astype(dt)
        kw = dict(window_strides=(1, 1), padding="SAME", preferred_element_type=preferred)
        expected = jlax.conv_general_dilated(x, w, **kw)
        got = lax.conv_general_dilated(x, w, **kw)
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(expected, np.float64), rtol=1e-2)


def crand(shape, dtype=np.complex64):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_convolutions_and_gradients_match_jax(dtype, seed):
    """Complex operands (scipy.signal's convolutions of complex input): values and the
    VJP of both operands for a complex cotangent, over layouts, groups and the three
    kernel paths (features=(12, 10) reaches the gemms)."""
    rng = np.random.default_rng(600 + seed)
    lhs_shape, rhs_shape, kw = random_case(rng, features=(12, 10) if seed % 2 else (3, 2))
    with x64(meshsim, jax, enabled=dtype == "complex128"):
        x, w = crand(lhs_shape, dtype), crand(rhs_shape, dtype)
        ct = crand(jlax.conv_general_dilated(x, w, **kw).shape, dtype)
        expected = value_and_gradients(jax, kw, x, w, ct)
        got = value_and_gradients(meshsim, ours(kw), x, w, ct)
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape
            assert_close_to_scale(g.real, e.real, 1e-5 if dtype == "complex64" else 1e-12)
            assert_close_to_scale(g.imag, e.imag, 1e-5 if dtype == "complex64" else 1e-12)


def test_complex_convolution_grad_of_a_real_loss_and_vmap_match_jax():
    x, w = crand((3, 2, 2, 7)), crand((4, 2, 3))
    kw = dict(window_strides=(2,), padding="SAME", rhs_dilation=(2,))

    def loss(lib):
        return lambda a, b: (lib.numpy.abs(lib.lax.conv_general_dilated(a, b, **kw)) ** 2).sum()

    for g, e in zip(meshsim.grad(loss(meshsim), argnums=(0, 1))(x[0], w),
                    jax.grad(loss(jax), argnums=(0, 1))(x[0], w)):
        assert g.dtype == e.dtype
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-4, atol=1e-4)
    got = meshsim.vmap(lambda a: lax.conv_general_dilated(a, w, **kw))(x)
    expected = jax.vmap(lambda a: jlax.conv_general_dilated(a, w, **kw))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype,preferred", [(np.complex64, np.complex128), (np.complex64, np.float32),
                                             (np.complex128, np.complex64), (np.float32, np.complex64),
                                             (np.int32, np.complex64)])
def test_complex_preferred_element_type_matches_jax(dtype, preferred):
    with x64(meshsim, jax):
        x = (RNG.integers(-3, 4, (2, 3, 5)) * (1 + 1j)).astype(dtype) if np.issubdtype(dtype, np.complexfloating) \
            else RNG.integers(-3, 4, (2, 3, 5)).astype(dtype)
        w = x[:2, :, :2]
        outcomes = []
        for lib in (lax, jlax):
            try:
                y = lib.conv_general_dilated(x, w, (1,), "VALID", preferred_element_type=preferred)
                outcomes.append((y.dtype, np.asarray(y).tolist()))
            except TypeError as e:
                outcomes.append(str(e))
        assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("layout", [("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC"), ("NWHC", "WHIO", "CNHW")])
@pytest.mark.parametrize("padding", ["SAME", "VALID", "SAME_LOWER", ((2, 0), (1, -1))])
def test_string_dimension_numbers_and_paddings(layout, padding):
    lhs_shape = {"NCHW": (2, 3, 7, 6), "NHWC": (2, 7, 6, 3), "NWHC": (2, 6, 7, 3)}[layout[0]]
    rhs_shape = {"OIHW": (4, 3, 3, 2), "HWIO": (3, 2, 3, 4), "WHIO": (2, 3, 3, 4)}[layout[1]]
    x, w = rand(lhs_shape), rand(rhs_shape)
    kw = dict(window_strides=(2, 1), padding=padding, dimension_numbers=layout, rhs_dilation=(1, 2))
    np.testing.assert_allclose(np.asarray(lax.conv_general_dilated(x, w, **kw)),
                               np.asarray(jlax.conv_general_dilated(x, w, **kw)), rtol=1e-4, atol=1e-4)


def test_conv_forms_match_jax():
    x, w = rand((2, 3, 8, 7)), rand((4, 3, 3, 2))
    for ours_, theirs in [
        (lax.conv(x, w, (1, 2), "SAME"), jlax.conv(x, w, (1, 2), "SAME")),
        (lax.conv_with_general_padding(x, w, (2, 1), ((1, 2), (0, 1)), (2, 1), (1, 2)),
         jlax.conv_with_general_padding(x, w, (2, 1), ((1, 2), (0, 1)), (2, 1), (1, 2))),
        (lax.conv_general_dilated_patches(x, (3, 2), (1, 1), "SAME"),
         jlax.conv_general_dilated_patches(x, (3, 2), (1, 1), "SAME")),
    ]:
        np.testing.assert_allclose(np.asarray(ours_), np.asarray(theirs), rtol=1e-4, atol=1e-4)
    xn = rand((2, 5, 6, 3))
    for strides, padding, tk in [((2, 2), "SAME", False), ((2, 1), "VALID", True), ((1, 3), ((1, 2), (0, 1)), False)]:
        wn = rand((3, 2, 3, 4)) if not tk else rand((3, 2, 4, 3))
        np.testing.assert_allclose(
            np.asarray(lax.conv_transpose(xn, wn, strides, padding, transpose_kernel=tk)),
            np.asarray(jlax.conv_transpose(xn, wn, strides, padding, transpose_kernel=tk)), rtol=1e-4, atol=1e-4)
    wl = rand((4, 3 * 3 * 2, 3, 3))
    np.testing.assert_allclose(
        np.asarray(lax.conv_general_dilated_local(x, wl, (2, 2), "VALID", (3, 2), dimension_numbers=("NCHW", "OIHW", "NCHW"))),
        np.asarray(jlax.conv_general_dilated_local(x, wl, (2, 2), "VALID", (3, 2), dimension_numbers=("NCHW", "OIHW", "NCHW"))),
        rtol=1e-4, atol=1e-4)


def test_shape_helpers_match_jax():
    dn = ("NHWC", "HWIO", "NHWC")
    assert lax.conv_general_permutations(dn) == jlax.conv_general_permutations(dn)
    assert tuple(lax.conv_dimension_numbers((1, 2, 3, 4), (1, 2, 3, 4), dn)) == \
        tuple(jlax.conv_dimension_numbers((1, 2, 3, 4), (1, 2, 3, 4), dn))
    assert lax.conv_general_shape_tuple((2, 9, 8, 3), (3, 2, 3, 5), (2, 1), "SAME", dn) == \
        tuple(jlax.conv_general_shape_tuple((2, 9, 8, 3), (3, 2, 3, 5), (2, 1), "SAME", dn))
    assert lax.conv_shape_tuple((2, 3, 9, 8), (4, 3, 3, 2), (2, 1), ((1, 1), (0, 2))) == \
        tuple(jlax.conv_shape_tuple((2, 3, 9, 8), (4, 3, 3, 2), (2, 1), ((1, 1), (0, 2))))
    assert lax.conv_transpose_shape_tuple((2, 5, 6, 3), (3, 2, 3, 4), (2, 2), "SAME", dn) == \
        tuple(jlax.conv_transpose_shape_tuple((2, 5, 6, 3), (3, 2, 3, 4), (2, 2), "SAME", dn))


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("n,m", [(7, 3), (3, 7), (5, 5), (1, 4)])
def test_numpy_convolve_and_correlate(mode, n, m):
    a, v = rand((n,)), rand((m,))
    for name in ("convolve", "correlate"):
        np.testing.assert_allclose(np.asarray(getattr(jnp, name)(a, v, mode=mode)),
                                   np.asarray(getattr(jax.numpy, name)(a, v, mode=mode)), rtol=1e-5, atol=1e-5)


def test_jaxpr_prints_as_jax():
    x, w = rand((2, 9, 8, 3)), rand((3, 2, 3, 5))
    kw = dict(window_strides=(1, 2), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    assert str(meshsim.make_jaxpr(lambda a, b: lax.conv_general_dilated(a, b, **kw))(x, w)) == \
        str(jax.make_jaxpr(lambda a, b: jlax.conv_general_dilated(a, b, **kw))(x, w))


def test_cost_counts_two_flops_per_window_element():
    x, w = rand((2, 3, 8, 8)), rand((4, 3, 3, 3))
    f = lambda a, b: lax.conv(a, b, (1, 1), "VALID")  # noqa: E731
    cost = meshsim.jit(f).lower(x, w).compile().cost_analysis()
    assert cost["flops"] == 2 * (2 * 4 * 6 * 6) * (3 * 3 * 3)
    jcost = jax.jit(lambda a, b: jlax.conv(a, b, (1, 1), "VALID")).lower(x, w).compile().cost_analysis()
    assert cost["flops"] == pytest.approx(jcost["flops"], rel=0.05)


ERROR_CASES = {
    "dtypes": lambda l, x, w: l.conv_general_dilated(x, w.astype(np.float16), (1, 1), "SAME"),
    "preferred_int": lambda l, x, w: l.conv_general_dilated(x, w, (1, 1), "SAME", preferred_element_type=np.int32),
    "preferred_narrow": lambda l, x, w: l.conv_general_dilated(x, w, (1, 1), "SAME",
                                                               preferred_element_type=np.float16),
    "strides_rank": lambda l, x, w: l.conv_general_dilated(x, w, (1,), "SAME"),
    "pads_count": lambda l, x, w: l.conv_general_dilated(x, w, (1, 1), [(1, 1)]),
    "pads_negative": lambda l, x, w: l.conv_general_dilated(x, w, (1, 1), [(-9, 0), (0, 0)]),
    "dilation": lambda l, x, w: l.conv_general_dilated(x, w, (1, 1), "VALID", rhs_dilation=(0, 1)),
    "features": lambda l, x, w: l.conv_general_dilated(x, w[:, :2], (1, 1), "VALID"),
    "feature_groups": lambda l, x, w: l.conv_general_dilated(x, w, (1, 1), "VALID", feature_group_count=2),
    "batch_groups": lambda l, x, w: l.conv_general_dilated(x, w, (1, 1), "VALID", batch_group_count=3),
    "both_groups": lambda l, x, w: l.conv_general_dilated(x[:, :2].repeat(2, 1), w[:, :1], (1, 1), "VALID",
                                                          feature_group_count=4, batch_group_count=2),
    "ranks": lambda l, x, w: l.conv_general_dilated(x, w[0], (1, 1), "VALID"),
    "dn_len": lambda l, x, w: l.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NCH", "OIH", "NCH")),
    "dn_chars": lambda l, x, w: l.conv_general_dilated(x, w, (1, 1), "VALID",
                                                       dimension_numbers=("NCHW", "OIHW", "NCHX")),
    "string_padding_lhs_dilation": lambda l, x, w: l.conv_general_dilated(x, w, (1, 1), "SAME", lhs_dilation=(2, 1)),
    "bad_padding": lambda l, x, w: l.conv_general_dilated(x, w, (1, 1), "FULL"),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_errors_match_jax(case):
    x, w = rand((4, 3, 8, 8)), rand((4, 3, 3, 3))

    def outcome(lib):
        try:
            lib.conv_general_dilated  # noqa: B018
            ERROR_CASES[case](lib, x, w)
            return None
        except Exception as e:  # noqa: BLE001 - compared below
            return type(e).__name__, re.sub(r"np\.int64\((-?\d+)\)", r"\1", str(e))

    expected = outcome(jlax)
    assert expected is not None
    assert outcome(lax) == expected


class TestExplicitSharding:
    """Batch-sharded (data parallel) and feature-sharded convolutions under an
    Explicit mesh: result types and errors as JAX's, values as unsharded."""

    def libs(self):
        return [(lib, lib.make_mesh((4, 2), ("dp", "tp"))) for lib in (meshsim, jax)]

    def run(self, case):
        outs = []
        for lib, mesh in self.libs():
            with lib.set_mesh(mesh):
                try:
                    out = case(lib, mesh)
                    outs.append(("ok", str(lib.typeof(out)), np.asarray(out)))
                except Exception as e:  # noqa: BLE001 - compared below
                    outs.append((type(e).__name__, str(e), None))
        (k1, t1, v1), (k2, t2, v2) = outs
        assert (k1, t1) == (k2, t2)
        if v1 is not None:
            np.testing.assert_allclose(v1, v2, rtol=1e-4, atol=1e-4)
        return outs[0]

    @staticmethod
    def put(lib, mesh, value, *spec):
        return lib.device_put(value, lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec(*spec)))

    X = rand((8, 3, 6, 6))
    W = rand((4, 3, 3, 3))

    def test_batch_sharded(self):
        kind, typ, _ = self.run(lambda lib, m: lib.lax.conv(self.put(lib, m, self.X, "dp"), self.W, (1, 1), "SAME"))
        assert kind == "ok" and "8@dp" in typ

    def test_batch_sharded_nhwc(self):
        x = np.transpose(self.X, (0, 2, 3, 1)).copy()
        w = np.transpose(self.W, (2, 3, 1, 0)).copy()
        self.run(lambda lib, m: lib.lax.conv_general_dilated(
            self.put(lib, m, x, "dp"), w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))

    def test_feature_sharded_needs_out_sharding(self):
        kind, _, _ = self.run(lambda lib, m: lib.lax.conv(self.X, self.put(lib, m, self.W, "tp"), (1, 1), "SAME"))
        assert kind == "ShardingTypeError"

    def test_feature_sharded_with_out_sharding(self):
        P = lambda lib: lib.sharding.PartitionSpec  # noqa: E731
        kind, typ, _ = self.run(lambda lib, m: lib.lax.conv_general_dilated(
            self.put(lib, m, self.X, "dp"), self.put(lib, m, self.W, "tp"), (1, 1), "SAME",
            out_sharding=P(lib)("dp", "tp")))
        assert kind == "ok" and "4@tp" in typ

    def test_channel_sharded_lhs_needs_out_sharding(self):
        kind, _, _ = self.run(lambda lib, m: lib.lax.conv(self.put(lib, m, rand((8, 4, 6, 6)), None, "tp"),
                                                          rand((4, 4, 3, 3)), (1, 1), "SAME"))
        assert kind == "ShardingTypeError"

    def test_gradient_of_a_batch_sharded_convolution(self):
        outs = []
        for lib, mesh in self.libs():
            with lib.set_mesh(mesh):
                x = self.put(lib, mesh, self.X, "dp")
                w = self.put(lib, mesh, self.W)
                g = lib.jit(lib.grad(lambda a, b: (lib.lax.conv(a, b, (1, 1), "SAME") ** 2).sum(),
                                     argnums=(0, 1)))(x, w)
                outs.append([(str(lib.typeof(v)), np.asarray(v)) for v in g])
        for (t1, v1), (t2, v2) in zip(*outs):
            assert t1 == t2
            np.testing.assert_allclose(v1, v2, rtol=1e-4, atol=1e-3)

"""jnp.fft, lax.fft and jax.scipy.fft against real JAX: every transform over
random shapes, axes, lengths (cropped and zero-padded), dtypes and norm modes;
more than three axes; the frequency helpers and shifts; gradients of every
FFT type; vmap; jit; jaxpr printing; XLA's cost; Explicit sharding and
shard_map; and JAX's errors."""
import numpy as np
import pytest

import meshsim
import meshsim.numpy as mnp
from outcomes import outcome

jax = pytest.importorskip("jax")
jnp = jax.numpy


def close(got, expected, rtol=2e-5):
    """Values within rtol of the result's largest magnitude (an FFT's error
    scales with the whole transform, not with each bin)."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got.shape, got.dtype, expected.dtype)
    scale = max(1.0, float(np.max(np.abs(expected)))) if expected.size else 1.0
    np.testing.assert_allclose(got, expected, rtol=0, atol=rtol * scale)


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    if np.dtype(dtype).kind in "iu":
        x = x * 5
    return x.astype(dtype)


ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
N_D = ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"]
NORMS = [None, "backward", "ortho", "forward"]


def input_dtype(name, rng):
    real_only = name in ("rfft", "ihfft", "rfft2", "rfftn")
    choices = [np.float32, np.int32] if real_only else [np.float32, np.complex64, np.int32]
    return choices[int(rng.integers(len(choices)))]


@pytest.mark.parametrize("name", ONE_D)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("seed", range(4))
def test_one_dimensional_transforms_match_jax(name, norm, seed):
    rng = np.random.default_rng(seed)
    ndim = int(rng.integers(1, 4))
    shape = tuple(int(rng.integers(1, 10)) for _ in range(ndim))
    if name in ("irfft", "hfft"):
        shape = shape[:-1] + (max(shape[-1], 2),)
    axis = int(rng.integers(-ndim, ndim))
    n = [None, int(rng.integers(1, 13))][seed % 2]
    x = rand(rng, shape, input_dtype(name, rng))
    expected = getattr(jnp.fft, name)(x, n=n, axis=axis, norm=norm)
    got = getattr(mnp.fft, name)(x, n=n, axis=axis, norm=norm)
    close(got, expected)


@pytest.mark.parametrize("name", N_D)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("seed", range(3))
def test_multi_dimensional_transforms_match_jax(name, norm, seed):
    rng = np.random.default_rng(100 + seed)
    ndim = int(rng.integers(2, 5))
    shape = tuple(int(rng.integers(2, 8)) for _ in range(ndim))
    x = rand(rng, shape, input_dtype(name, rng))
    axes = tuple(int(a) for a in rng.permutation(ndim)[:2]) if seed else (-2, -1)
    s = None if seed == 1 else tuple(int(rng.integers(1, 9)) for _ in axes)
    if name.endswith("n") and seed == 2:
        axes, s = None, None  # every axis
    expected = getattr(jnp.fft, name)(x, s=s, axes=axes, norm=norm)
    got = getattr(mnp.fft, name)(x, s=s, axes=axes, norm=norm)
    close(got, expected)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
@pytest.mark.parametrize("k", [4, 5])
def test_more_than_three_axes_match_jax(name, k):
    rng = np.random.default_rng(k)
    shape = (2,) + tuple(int(rng.integers(2, 5)) for _ in range(k))
    x = rand(rng, shape, np.complex64 if name in ("ifftn", "irfftn") else np.float32)
    axes = tuple(range(1, k + 1))
    close(getattr(mnp.fft, name)(x, axes=axes), getattr(jnp.fft, name)(x, axes=axes))


@pytest.mark.parametrize("n", [1, 2, 7, 8])
def test_frequencies_and_shifts_match_jax(n):
    for d in (1.0, 0.25):
        close(mnp.fft.fftfreq(n, d), jnp.fft.fftfreq(n, d))
        close(mnp.fft.rfftfreq(n, d), jnp.fft.rfftfreq(n, d))
    x = np.arange(n * 6).reshape(n, 6)
    for axes in (None, 0, 1, (0, 1), (1,)):
        np.testing.assert_array_equal(mnp.fft.fftshift(x, axes), jnp.fft.fftshift(x, axes))
        np.testing.assert_array_equal(mnp.fft.ifftshift(x, axes), jnp.fft.ifftshift(x, axes))


def test_prime_and_power_of_two_lengths_within_ulps_of_jax():
    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 16, 97, 128, 1000, 1024):
        x = rand(rng, (3, n), np.complex64)
        close(mnp.fft.fft(x), jnp.fft.fft(x), rtol=2e-6)
        close(mnp.fft.ifft(x), jnp.fft.ifft(x), rtol=2e-6)
        r = rand(rng, (3, n), np.float32)
        close(mnp.fft.rfft(r), jnp.fft.rfft(r), rtol=2e-6)


def test_empty_inputs_match_jax():
    for f, x in [("fft", np.ones(0)), ("irfft", np.ones(1)), ("fft", np.ones((2, 0, 3)))]:
        close(getattr(mnp.fft, f)(x, axis=0), getattr(jnp.fft, f)(x, axis=0))


@pytest.mark.parametrize("typ", ["FFT", "IFFT", "RFFT", "IRFFT"])
def test_lax_fft_with_fft_type_matches_jax(typ):
    rng = np.random.default_rng(3)
    lengths = (4, 6)
    shape = (3, 4, 4) if typ == "IRFFT" else (3, 4, 6)
    x = rand(rng, shape, np.float32 if typ == "RFFT" else np.complex64)
    expected = jax.lax.fft(x, getattr(jax.lax.FftType, typ), lengths)
    close(meshsim.lax.fft(x, getattr(meshsim.lax.FftType, typ), lengths), expected)
    close(meshsim.lax.fft(x, typ.lower(), lengths), expected)
    assert int(meshsim.lax.FftType[typ]) == int(jax.lax.FftType[typ])


def loss(lib, name, **kw):
    f = getattr(lib.numpy.fft, name)

    def scalar(x):
        y = f(x, **kw)
        if y.dtype.kind == "c":
            return (lib.numpy.real(y) ** 2 + 2 * lib.numpy.imag(y)).sum()
        return (y * lib.numpy.arange(y.shape[-1])).sum()
    return scalar


@pytest.mark.parametrize("name,kw", [("fft", {}), ("ifft", {"norm": "ortho"}), ("rfft", {}), ("rfft", {"n": 7}),
                                     ("irfft", {}), ("irfft", {"n": 7}), ("hfft", {}), ("ihfft", {}),
                                     ("rfft2", {}), ("irfftn", {"norm": "forward"}), ("fftn", {"axes": (0, 2)})])
def test_gradients_match_jax(name, kw):
    rng = np.random.default_rng(11)
    real_in = name in ("rfft", "ihfft", "rfft2")
    x = rand(rng, (3, 4, 6), np.float32 if real_in else np.complex64)
    expected = jax.grad(loss(jax, name, **kw))(x)
    got = meshsim.grad(loss(meshsim, name, **kw))(x)
    close(got, expected, rtol=1e-5)
    got_jit = meshsim.jit(meshsim.grad(loss(meshsim, name, **kw)))(x)
    close(got_jit, expected, rtol=1e-5)


def test_real_input_gradient_matches_finite_differences():
    rng = np.random.default_rng(12)
    x = rand(rng, (8,), np.float64).astype(np.float32)
    f = lambda a: (mnp.abs(mnp.fft.rfft(a)) ** 2 * mnp.arange(5)).sum()  # noqa: E731
    g = np.asarray(meshsim.grad(f)(x))
    eps = 1e-2
    for i in range(8):
        e = np.zeros(8, np.float32)
        e[i] = eps
        fd = (float(f(x + e)) - float(f(x - e))) / (2 * eps)
        assert abs(fd - g[i]) < 2e-2 * max(1.0, abs(fd))


def test_second_derivative_matches_jax():
    x = rand(np.random.default_rng(13), (6,), np.float32)

    def f(lib):
        return lambda a: (lib.numpy.abs(lib.numpy.fft.rfft(a * a)) ** 2).sum()

    def g(lib):
        return lambda a: lib.grad(f(lib))(a).sum()

    close(meshsim.grad(g(meshsim))(x), jax.grad(g(jax))(x), rtol=1e-4)


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "fft2"])
@pytest.mark.parametrize("in_axes", [0, 1, 2])
def test_vmap_matches_jax(name, in_axes):
    rng = np.random.default_rng(14)
    x = rand(rng, (3, 4, 5), np.float32 if name == "rfft" else np.complex64)
    expected = jax.vmap(getattr(jnp.fft, name), in_axes=in_axes)(x)
    close(meshsim.vmap(getattr(mnp.fft, name), in_axes=in_axes)(x), expected)


def test_jaxpr_equation_prints_as_jax():
    x = np.ones((4, 6), np.float32)
    jaxpr = str(meshsim.make_jaxpr(lambda a: meshsim.lax.fft(a, "rfft", (4, 6)))(x))
    assert "c:c64[4,4] = fft[fft_lengths=(4, 6) fft_type=2] b" in jaxpr or \
        "fft[fft_lengths=(4, 6) fft_type=2]" in jaxpr
    eqn = [line.strip() for line in jaxpr.splitlines() if "fft[" in line][0]
    assert eqn.split(" = ")[1].startswith("fft[fft_lengths=(4, 6) fft_type=2] ")
    assert eqn.split(" = ")[0].endswith("c64[4,4]")


@pytest.mark.parametrize("typ,shape,lengths", [("fft", (4, 64), (64,)), ("rfft", (4, 64), (64,)),
                                               ("irfft", (4, 33), (64,)), ("fft", (4, 8, 8), (8, 8)),
                                               ("irfft", (4, 6, 7), (6, 12))])
def test_cost_is_xlas(typ, shape, lengths):
    x = np.ones(shape, np.float32 if typ == "rfft" else np.complex64)
    cost = meshsim.jit(lambda a: meshsim.lax.fft(a, typ, lengths)).lower(x).compile().cost_analysis()
    jcost = jax.jit(lambda a: jax.lax.fft(a, typ, lengths)).lower(x).compile().cost_analysis()
    assert cost["flops"] == jcost["flops"]
    assert cost["bytes accessed"] == jcost["bytes accessed"]


ERRORS = {
    "irfft_last_dim": lambda lib: lib.lax.fft(np.ones(5, np.complex64), "irfft", (12,)),
    "rfft_float16": lambda lib: lib.lax.fft(np.ones(5, np.float16), "rfft", (5,)),
    "jnp_rfft_float16": lambda lib: lib.numpy.fft.rfft(np.ones(5, np.float16)),
    "minor_dims": lambda lib: lib.lax.fft(np.ones(5), "fft", (4,)),
    "unknown_type": lambda lib: lib.lax.fft(np.ones(5), "bad", (5,)),
    "type_value": lambda lib: lib.lax.fft(np.ones(5), 7, (5,)),
    "too_many_lengths": lambda lib: lib.lax.fft(np.ones(5), "fft", (5, 5)),
    "complex_rfft": lambda lib: lib.lax.fft(np.ones(5, np.complex64), "rfft", (5,)),
    "irfft_minor": lambda lib: lib.lax.fft(np.ones((3, 5), np.complex64), "irfft", (4, 8)),
    "nonpositive_n": lambda lib: lib.numpy.fft.fft(np.ones(3), n=0),
    "repeated_axes": lambda lib: lib.numpy.fft.fftn(np.ones((3, 3)), axes=(0, 0)),
    "multiple_axes": lambda lib: lib.numpy.fft.fft(np.ones(3), axis=(0,)),
    "fft2_axes": lambda lib: lib.numpy.fft.fft2(np.ones((3, 3, 3)), axes=(0,)),
    "norm": lambda lib: lib.numpy.fft.fft(np.ones(3), norm="bad"),
    "s_axes": lambda lib: lib.numpy.fft.fftn(np.ones((3, 3)), s=(2,), axes=(0, 1)),
    "list_input": lambda lib: lib.numpy.fft.fft([1.0, 2.0]),
    "fftfreq_n": lambda lib: lib.numpy.fft.fftfreq([3]),
    "rfftfreq_d": lambda lib: lib.numpy.fft.rfftfreq(3, d=[1.0]),
    "dct_type": lambda lib: lib.scipy.fft.dct(np.ones(3), type=3),
    "dct_norm": lambda lib: lib.scipy.fft.dct(np.ones(3), norm="forward"),
    "dctn_s": lambda lib: lib.scipy.fft.dctn(np.ones(3), s=(2, 2)),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_match_jax(case):
    import jax.scipy.fft  # noqa: F401
    import meshsim.scipy.fft  # noqa: F401

    expected = outcome(ERRORS[case], jax)
    if expected[0] == "MLIRError":  # raised by XLA's shape check at lowering
        expected = ("ValueError", expected[1].split('("fft"): ')[1].split("\n")[0])
    assert expected[0] != "ok"
    assert outcome(ERRORS[case], meshsim) == expected


class TestSharding:
    """FFT results keep their operand's sharding dimension by position, as
    JAX's; values as unsharded."""

    def run(self, case):
        outs = []
        for lib in (meshsim, jax):
            mesh = lib.make_mesh((4, 2), ("x", "y"))
            with lib.set_mesh(mesh):
                try:
                    out = case(lib, mesh)
                    outs.append(("ok", str(lib.typeof(out)), np.asarray(out)))
                except Exception as e:  # noqa: BLE001 - compared below
                    outs.append((type(e).__name__, str(e), None))
        (k1, t1, v1), (k2, t2, v2) = outs
        assert (k1, t1) == (k2, t2)
        if v1 is not None:
            close(v1, v2, rtol=1e-5)
        return outs[0]

    @staticmethod
    def put(lib, mesh, value, *spec):
        return lib.device_put(value, lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec(*spec)))

    X = rand(np.random.default_rng(20), (8, 4, 6), np.complex64)
    R = rand(np.random.default_rng(21), (8, 8), np.float32)

    def test_batch_sharded_fft(self):
        kind, typ, _ = self.run(lambda lib, m: lib.numpy.fft.fft(self.put(lib, m, self.X, "x", "y")))
        assert kind == "ok" and "8@x,4@y" in typ

    def test_transformed_dims_sharded(self):
        kind, _, _ = self.run(lambda lib, m: lib.numpy.fft.fft2(self.put(lib, m, self.X, "x", "y")))
        assert kind == "ok"

    def test_rfft_sharded_last_dim(self):
        self.run(lambda lib, m: lib.numpy.fft.rfft(self.put(lib, m, self.X.real.copy(), "x", None, "y")))

    def test_uneven_rfft_result_is_an_error(self):
        kind, _, _ = self.run(lambda lib, m: lib.numpy.fft.rfft(self.put(lib, m, self.R, "x", "y")))
        assert kind == "ValueError"

    def test_irfft_sharded(self):
        self.run(lambda lib, m: lib.numpy.fft.irfft(self.put(lib, m, self.R.astype(np.complex64), "x", "y")))

    def test_gradient_of_a_sharded_fft(self):
        outs = []
        for lib in (meshsim, jax):
            mesh = lib.make_mesh((4, 2), ("x", "y"))
            with lib.set_mesh(mesh):
                x = self.put(lib, mesh, self.X.real.copy(), "x", "y")
                g = lib.jit(lib.grad(lambda a: (lib.numpy.abs(lib.numpy.fft.rfft2(a)) ** 2).sum()))(x)
                outs.append((str(lib.typeof(g)), np.asarray(g)))
        assert outs[0][0] == outs[1][0]
        close(outs[0][1], outs[1][1], rtol=1e-5)


def test_inside_shard_map_matches_jax():
    x = rand(np.random.default_rng(22), (8, 16), np.float32)
    outs = []
    for lib in (meshsim, jax):
        mesh = lib.make_mesh((8,), ("d",), axis_types=(lib.sharding.AxisType.Auto,))
        P = lib.sharding.PartitionSpec
        f = lib.shard_map(lambda a: lib.numpy.fft.irfft(lib.numpy.fft.rfft(a) * 2), mesh=mesh,
                          in_specs=P("d"), out_specs=P("d"))
        outs.append(np.asarray(lib.jit(f)(x)))
    close(outs[0], outs[1])


@pytest.mark.parametrize("name", ["dct", "idct"])
@pytest.mark.parametrize("norm", [None, "backward", "ortho"])
@pytest.mark.parametrize("seed", range(3))
def test_dct_matches_jax(name, norm, seed):
    import jax.scipy.fft as jfft
    import meshsim.scipy.fft as mfft
    rng = np.random.default_rng(30 + seed)
    shape = tuple(int(rng.integers(1, 9)) for _ in range(int(rng.integers(1, 4))))
    dtype = [np.float32, np.complex64, np.int32][seed]
    x = rand(rng, shape, dtype)
    n = [None, int(rng.integers(1, 10))][seed % 2]
    axis = int(rng.integers(-len(shape), len(shape)))
    close(getattr(mfft, name)(x, n=n, axis=axis, norm=norm), getattr(jfft, name)(x, n=n, axis=axis, norm=norm))


@pytest.mark.parametrize("name", ["dctn", "idctn"])
@pytest.mark.parametrize("norm", [None, "ortho"])
@pytest.mark.parametrize("axes,s", [(None, None), ((0, 2), None), ((1,), (7,)), (None, (3, 5, 2)),
                                    ((2, 0, 1), (4, 4, 4))])
def test_dctn_matches_jax(name, norm, axes, s):
    import jax.scipy.fft as jfft
    import meshsim.scipy.fft as mfft
    x = rand(np.random.default_rng(40), (4, 5, 6), np.float32)
    close(getattr(mfft, name)(x, s=s, axes=axes, norm=norm), getattr(jfft, name)(x, s=s, axes=axes, norm=norm))


def test_complex_arange_matches_jax():
    np.testing.assert_array_equal(mnp.arange(5, dtype=mnp.complex64), jnp.arange(5, dtype=jnp.complex64))


def test_dct_gradient_matches_jax():
    import jax.scipy.fft as jfft
    import meshsim.scipy.fft as mfft
    x = rand(np.random.default_rng(41), (5, 6), np.float32)
    w = rand(np.random.default_rng(42), (5, 6), np.float32)
    close(meshsim.grad(lambda a: (mfft.dctn(a, norm="ortho") * w).sum())(x),
          jax.grad(lambda a: (jfft.dctn(a, norm="ortho") * w).sum())(x), rtol=1e-5)
    close(meshsim.grad(lambda a: (mfft.idct(a) * w).sum())(x),
          jax.grad(lambda a: (jfft.idct(a) * w).sum())(x), rtol=1e-5)


def test_complex_dctn_transforms_by_parts_as_jax():
    import jax.scipy.fft as jfft
    import meshsim.scipy.fft as mfft
    x = rand(np.random.default_rng(43), (3, 4, 5), np.complex64)
    for name in ("dctn", "idctn"):
        close(getattr(mfft, name)(x, axes=(0, 2)), getattr(jfft, name)(x, axes=(0, 2)))

"""lax.conv_general_dilated over the shapes models use: a 3x3 NHWC layer, a strided stem, a dilated
layer, a depthwise (feature-grouped) layer, a 1-D sequence convolution and a transposed
convolution; and the pooling beside them, lax.reduce_window max (2x2, 3x3 stride 2) and sum (2x2)
over NHWC activations (their VJPs: select_and_scatter_add, a padded reduce_window_sum). Each
forward and forward+backward (VJP), meshsim jit vs JAX jit on CPU with 8 host
devices (single-device arrays: the convolution itself) and NumPy (im2col and one tensordot, the
forward of the plain layers) side by side, interleaved. Prints per case the median wall and CPU
milliseconds and the CPU-time ratios to JAX and NumPy (on a loaded machine the CPU time is the
work; the wall time also counts the waits for a core).

    python benchmarks/bench_conv.py [--repeats 7] [--cases 3x3,stem,...,max2,max3s2,sum2]
"""
from __future__ import annotations

import argparse
import os

from _timing import configure_jax_cpu, interleaved_wall_and_cpu, load_average, median

configure_jax_cpu()
# OpenBLAS's idle threads (NumPy's and meshsim's) spin for a while after a product; the time
# they spin would be charged to whichever contender runs next.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

# name: (lhs NHWC/NWC shape, rhs HWIO/WIO shape, window strides, padding, lhs dilation,
#        rhs dilation, feature groups)
CASES = {
    "3x3": ((8, 32, 32, 32), (3, 3, 32, 64), (1, 1), "SAME", (1, 1), (1, 1), 1),
    "stem": ((8, 64, 64, 3), (7, 7, 3, 32), (2, 2), "SAME", (1, 1), (1, 1), 1),
    "dilated": ((8, 32, 32, 32), (3, 3, 32, 32), (1, 1), "SAME", (1, 1), (2, 2), 1),
    "depthwise": ((8, 32, 32, 64), (3, 3, 1, 64), (1, 1), "SAME", (1, 1), (1, 1), 64),
    "1d": ((16, 256, 64), (5, 64, 64), (1,), "SAME", (1,), (1,), 1),
    "transposed": ((8, 16, 16, 32), (3, 3, 32, 32), (1, 1), ((1, 2), (1, 2)), (2, 2), (1, 1), 1),
}


# name: (reduction, window, strides, padding) over float32[16, 64, 64, 32]
POOLING = {
    "max2": ("max", (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
    "max3s2": ("max", (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
    "sum2": ("sum", (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
}
POOLED_SHAPE = (16, 64, 64, 32)


def dimension_numbers(ndim):
    return ("NWC", "WIO", "NWC") if ndim == 3 else ("NHWC", "HWIO", "NHWC")


def numpy_conv(x, w, strides, padding):
    """Forward of an undilated, ungrouped convolution by im2col: the windows as a view, one
    tensordot over (window, input features)."""
    spatial = x.ndim - 2
    if padding == "SAME":
        pads = []
        for d in range(spatial):
            n, k, s = x.shape[1 + d], w.shape[d], strides[d]
            total = max((-(-n // s) - 1) * s + k - n, 0)
            pads.append((total // 2, total - total // 2))
        x = np.pad(x, [(0, 0), *pads, (0, 0)])
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[:spatial], axis=tuple(range(1, 1 + spatial)))
    windows = windows[(slice(None),) + tuple(slice(None, None, s) for s in strides)]
    # windows: N, *out, C, *window -> contract C and window with w's *window, C
    axes_x = [windows.ndim - spatial - 1] + list(range(windows.ndim - spatial, windows.ndim))
    axes_w = [spatial] + list(range(spatial))
    return np.tensordot(windows, w, axes=(axes_x, axes_w))


def forward_and_backward(lib, fn, *args):
    """Jitted thunks of `fn(*args)` and of its VJP applied to its own result."""
    def fwd_bwd(*a):
        y, pull = lib.vjp(fn, *a)
        return pull(y)
    fwd, both = lib.jit(fn), lib.jit(fwd_bwd)
    return lambda: fwd(*args), lambda: both(*args)


def pooling_thunks(name, lib_names):
    kind, window, strides, padding = POOLING[name]
    x = np.random.default_rng(0).standard_normal(POOLED_SHAPE, dtype=np.float32)
    out = {}
    for label, lib in lib_names:
        init, op = (-np.inf, lib.lax.max) if kind == "max" else (0.0, lib.lax.add)

        def pool(a, lib=lib, init=init, op=op):
            return lib.lax.reduce_window(a, init, op, window, strides, padding)
        out[f"{label} fwd"], out[f"{label} fwd+bwd"] = forward_and_backward(lib, pool, lib.numpy.asarray(x))
    return out


def thunks(name, lib_names):
    if name in POOLING:
        return pooling_thunks(name, lib_names)
    shape_x, shape_w, strides, padding, lhs_dil, rhs_dil, groups = CASES[name]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape_x, dtype=np.float32)
    w = rng.standard_normal(shape_w, dtype=np.float32)
    dn = dimension_numbers(len(shape_x))
    out = {}
    for label, lib in lib_names:
        def conv(a, b, lib=lib):
            return lib.lax.conv_general_dilated(a, b, strides, padding, lhs_dilation=lhs_dil, rhs_dilation=rhs_dil,
                                                dimension_numbers=dn, feature_group_count=groups)
        out[f"{label} fwd"], out[f"{label} fwd+bwd"] = forward_and_backward(
            lib, conv, lib.numpy.asarray(x), lib.numpy.asarray(w))
    plain = lhs_dil == (1,) * len(strides) and rhs_dil == (1,) * len(strides) and groups == 1
    if plain:
        out["numpy fwd"] = lambda: numpy_conv(x, w, strides, padding)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cases", default=",".join([*CASES, *POOLING]))
    args = parser.parse_args()
    import jax
    import meshsim
    libs = [("meshsim", meshsim), ("jax", jax)]
    print(f"conv_general_dilated and reduce_window, float32, median of {args.repeats} interleaved ({load_average()})")
    print(f"{'case':12s}{'contender':18s}{'wall ms':>10s}{'CPU ms':>10s}{'CPU / jax':>11s}{'CPU / numpy':>13s}")
    for name in args.cases.split(","):
        contenders = thunks(name, libs)
        got = np.asarray(contenders["meshsim fwd"]())
        np.testing.assert_allclose(got, np.asarray(contenders["jax fwd"]()), rtol=2e-3, atol=2e-3, err_msg=name)
        if "numpy fwd" in contenders:
            np.testing.assert_allclose(got, contenders["numpy fwd"](), rtol=2e-3, atol=2e-3, err_msg=name)
        samples = interleaved_wall_and_cpu(contenders, args.repeats)
        wall = {k: median([s[0] for s in v]) for k, v in samples.items()}
        cpu = {k: median([s[1] for s in v]) for k, v in samples.items()}
        for k in contenders:
            kind = k.split(" ", 1)[1]
            vs_jax = cpu[k] / cpu[f"jax {kind}"]
            vs_np = f"{cpu[k] / cpu['numpy fwd']:.2f}x" if kind == "fwd" and "numpy fwd" in cpu else ""
            print(f"{name:12s}{k:18s}{wall[k] * 1e3:10.2f}{cpu[k] * 1e3:10.2f}{vs_jax:10.2f}x{vs_np:>13s}")


if __name__ == "__main__":
    main()

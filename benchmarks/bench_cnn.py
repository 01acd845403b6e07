"""The small CNN of examples/ex_cnn.py: one data-parallel SGD step (8 devices,
batch 32 of 16x16x3 images) in its shard_map and Explicit-sharding forms,
meshsim vs JAX on CPU with 8 host devices; and one 3x3 convolution (NHWC,
batch 32, 16x16, 16 -> 32 channels) with its two gradients, meshsim vs JAX vs
NumPy (im2col by sliding_window_view + tensordot). Interleaved samples, the
same inputs for everyone; results are checked against each other first.

Run: PYTHONPATH=python python3 benchmarks/bench_cnn.py [--repeats N]"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

from _timing import configure_jax_cpu, interleaved, median, print_table  # noqa: E402

configure_jax_cpu(8)
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

import ex_cnn  # noqa: E402


def step_thunk(jax, form):
    mesh = jax.make_mesh((8,), ("dp",))
    env = ex_cnn.build(jax)
    images, labels = ex_cnn.make_batch()
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("dp"))
    with jax.set_mesh(mesh):
        params = ex_cnn.init_params(jax, jax.random.key(0))
        images, labels = jax.device_put(images, sharding), jax.device_put(labels, sharding)
    step = env["shard_map_step"](mesh) if form == "shard_map" else env["explicit_step"]

    def call():
        with jax.set_mesh(mesh):
            return step(params, images, labels)
    return call


def numpy_conv(x, w):
    """SAME 3x3 NHWC/HWIO convolution by im2col: windows as a view, one tensordot."""
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))  # N,H,W,C,3,3
    return np.tensordot(windows, w, axes=((4, 5, 3), (0, 1, 2)))


def conv_thunks():
    import jax as real_jax
    import meshsim
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 16, 16, 16)).astype(np.float32)
    w = rng.standard_normal((3, 3, 16, 32)).astype(np.float32)
    ct = rng.standard_normal((32, 16, 16, 32)).astype(np.float32)
    out = {}
    for name, lib in (("meshsim", meshsim), ("jax", real_jax)):
        def fwd_bwd(a, b, lib=lib):
            y, pull = lib.vjp(lambda a, b: lib.lax.conv_general_dilated(
                a, b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")), a, b)
            return (y,) + pull(ct)
        f = lib.jit(fwd_bwd)
        xa, wa = lib.device_put(x), lib.device_put(w)
        out[name] = lambda f=f, xa=xa, wa=wa: f(xa, wa)
    out["numpy (forward only)"] = lambda: numpy_conv(x, w)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--number", type=int, default=5, help="calls per sample")
    args = parser.parse_args()
    import jax as real_jax
    import meshsim

    steps = {f"{who} {form}": step_thunk(lib, form) for form in ("shard_map", "explicit")
             for who, lib in (("meshsim", meshsim), ("jax", real_jax))}
    for form in ("shard_map", "explicit"):
        a, b = steps[f"meshsim {form}"](), steps[f"jax {form}"]()
        np.testing.assert_allclose(float(a[0]), float(b[0]), rtol=1e-5, err_msg=form)
    convs = conv_thunks()
    ref = convs["numpy (forward only)"]()
    for name in ("meshsim", "jax"):
        np.testing.assert_allclose(np.asarray(convs[name]()[0]), ref, rtol=1e-3, atol=1e-3, err_msg=name)

    step_med = {k: median(v) for k, v in interleaved(steps, args.repeats, args.number).items()}
    conv_med = {k: median(v) for k, v in interleaved(convs, args.repeats, args.number).items()}
    print(f"median of {args.repeats} interleaved samples of {args.number} calls; {os.cpu_count()} cores\n")
    print_table("CNN SGD step, batch 32 of 16x16x3 over 8 devices", step_med, unit="ms", scale=1e3,
                baselines=("jax shard_map", "jax explicit"))
    print()
    print_table("3x3 conv NHWC 32x16x16x16 -> 32: forward + both gradients (NumPy: forward only)", conv_med,
                unit="ms", scale=1e3, baselines=("jax", "numpy (forward only)"))


if __name__ == "__main__":
    main()

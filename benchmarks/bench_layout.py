"""Layout kernels, meshsim vs NumPy: transposes, broadcasts, strided and reversed
slices, pad and concatenate on arrays of 4-64 MiB. Each meshsim case is one jitted
program ending in `lax.copy`, so the strided copy that lays the result out runs
inside the timed call (a transpose or a slice alone is a view); NumPy's case is
the same layout written with `np.ascontiguousarray`, `np.pad`, `np.concatenate`.
meshsim dispatches synchronously here, so a call is its kernel on the calling
thread. Prints the medians of wall and CPU milliseconds per call (CPU time is the
steadier figure on a loaded machine) and the ratios meshsim / NumPy, interleaved
so that machine noise hits both alike."""
from __future__ import annotations

import argparse

from _timing import configure_jax_cpu, interleaved_wall_and_cpu, load_average, median

configure_jax_cpu()

import numpy as np  # noqa: E402  (after the environment it reads)


def cases(np_rng):
    """name -> (operands, meshsim function of them, NumPy function of them)."""
    from meshsim import lax
    f32 = lambda *shape: np_rng.standard_normal(shape, dtype=np.float32)
    square = f32(2048, 2048)
    cube = f32(64, 256, 256)
    slab = f32(256, 64, 256)
    big = f32(4096, 4096)
    column = f32(2048, 1)
    row = f32(2048)
    half = f32(2048, 1024)
    bytes_ = np_rng.integers(0, 255, (4096, 4096), dtype=np.uint8)
    c = np.ascontiguousarray
    return {
        "transpose f32[2048,2048]": ((square,), lambda x: x.T, lambda x: c(x.T)),
        "transpose (0,2,1) f32[64,256,256]": (
            (cube,), lambda x: lax.transpose(x, (0, 2, 1)), lambda x: c(x.transpose(0, 2, 1))),
        "transpose (1,0,2) f32[256,64,256]": (
            (slab,), lambda x: lax.transpose(x, (1, 0, 2)), lambda x: c(x.transpose(1, 0, 2))),
        "transpose u8[4096,4096]": ((bytes_,), lambda x: x.T, lambda x: c(x.T)),
        "broadcast f32[2048,1] -> [2048,2048]": (
            (column,), lambda x: lax.broadcast_in_dim(x, (2048, 2048), (0, 1)),
            lambda x: c(np.broadcast_to(x, (2048, 2048)))),
        "broadcast f32[2048] -> [2048,2048]": (
            (row,), lambda x: lax.broadcast_in_dim(x, (2048, 2048), (1,)),
            lambda x: c(np.broadcast_to(x, (2048, 2048)))),
        "slice [::2, ::2] f32[4096,4096]": (
            (big,), lambda x: lax.slice(x, (0, 0), x.shape, (2, 2)), lambda x: c(x[::2, ::2])),
        "rev axis 1 f32[2048,2048]": ((square,), lambda x: lax.rev(x, (1,)), lambda x: c(x[:, ::-1])),
        "pad 1 each side f32[2048,2048]": (
            (square,), lambda x: lax.pad(x, np.float32(0), ((1, 1, 0), (1, 1, 0))),
            lambda x: np.pad(x, 1)),
        "pad interior 1 f32[2048,1024]": (
            (half,), lambda x: lax.pad(x, np.float32(0), ((0, 0, 0), (0, 0, 1))),
            lambda x: _interior(x)),
        "concatenate axis 1 2 x f32[2048,1024]": (
            (half, half[::-1].copy()), lambda a, b: lax.concatenate((a, b), 1),
            lambda a, b: np.concatenate((a, b), 1)),
    }


def _interior(x):
    out = np.zeros((x.shape[0], 2 * x.shape[1] - 1), x.dtype)
    out[:, ::2] = x
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()

    import meshsim
    import meshsim.numpy as mnp
    from meshsim import lax
    meshsim.config.update("jax_cpu_enable_async_dispatch", False)

    rng = np.random.default_rng(0)
    rows = []
    for name, (operands, ms_fn, np_fn) in cases(rng).items():
        program = meshsim.jit(lambda *xs, fn=ms_fn: lax.copy(fn(*xs)))
        ms_operands = [mnp.asarray(x) for x in operands]
        np.testing.assert_array_equal(np.asarray(program(*ms_operands)), np_fn(*operands))
        samples = interleaved_wall_and_cpu({
            "numpy": lambda: np_fn(*operands),
            "meshsim": lambda: program(*ms_operands).block_until_ready(),
        }, repeats=args.repeats)
        rows.append((name, *(median([s[k] for s in samples[who]])
                             for k in (0, 1) for who in ("numpy", "meshsim"))))

    print(f"Layout kernels: median ms per call of {args.repeats} interleaved repeats ({load_average()})")
    width = max(len(r[0]) for r in rows) + 2
    heads = ("numpy wall", "meshsim wall", "/ numpy", "numpy cpu", "meshsim cpu", "/ numpy")
    print(" " * width + "".join(f"{h:>13s}" for h in heads))
    for name, w_np, w_ms, c_np, c_ms in rows:
        cells = (f"{w_np * 1e3:.2f}", f"{w_ms * 1e3:.2f}", f"{w_ms / w_np:.2f}x",
                 f"{c_np * 1e3:.2f}", f"{c_ms * 1e3:.2f}", f"{c_ms / c_np:.2f}x")
        print(f"{name:{width}s}" + "".join(f"{c:>13s}" for c in cells))


if __name__ == "__main__":
    main()

"""The seed notebook's matmul variants (float32 1024x4096 @ 4096x256 on a 4x2
('dp', 'tp') mesh of 8 devices), meshsim vs JAX on CPU with 8 host devices,
the same code under `import meshsim as jax` and `import jax`, side by side in
one run and interleaved so machine noise hits both alike.

Inputs are placed once, as each variant's in_specs lay them out (JAX's
Explicit-mesh shard_map requires that), so a call measures the program only.
Also: the plain shard_map matmul vs one NumPy matmul of the whole problem, and
the per-call cost of a tiny jitted shard_map (psum of 8 numbers).

Run: PYTHONPATH=python python3 benchmarks/bench_shard_map.py [--repeats N]"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
# Two OpenBLAS pools live in this process (NumPy's bundled one and the system
# one meshsim links); a short idle spin keeps either from stealing the cores
# of the next contender (see bench_matmul.py).
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

M, K, N = 1024, 4096, 256


def variants(jax, jnp):
    """The notebook's matmul variants written against module `jax`:
    name -> (body or None for plain jit, in_specs, out_specs)."""
    P = jax.sharding.PartitionSpec
    get_abstract_mesh = jax.sharding.get_abstract_mesh

    def ring_shift(block, axis_name, offset=1):
        # The notebook's generalized ring shift: logical order -> mesh order.
        axis_name = (axis_name,) if isinstance(axis_name, str) else axis_name
        logical = {a: jax.lax.axis_size(a) for a in axis_name}
        in_mesh = {a: logical[a] for a in get_abstract_mesh().axis_names if a in logical}
        n = jax.lax.axis_size(axis_name)

        def to_coords(i, axes):
            coords = {}
            for a, size in reversed(axes.items()):
                i, coords[a] = divmod(i, size)
            return coords

        def to_index(coords, axes):
            i = 0
            for a, size in axes.items():
                i = i * size + coords[a]
            return i

        mesh_index = [to_index(to_coords(i, logical), in_mesh) for i in range(n)]
        perm = [(mesh_index[i], mesh_index[(i + offset) % n]) for i in range(n)]
        return jax.lax.ppermute(block, axis_name, perm=perm)

    def shard_map_4x2(x, w):
        return x @ w

    def fsdp_all_gather(x, w):
        return x @ jax.lax.all_gather(w, "dp", axis=0, tiled=True)

    def ppermute_loop(x, w):
        n, idx = jax.lax.axis_size("dp"), jax.lax.axis_index("dp")
        size = x.shape[1] // n
        cols = lambda i: jax.lax.dynamic_slice_in_dim(x, i * size, size, axis=1)  # noqa: E731
        out = cols(idx) @ w
        for i in range(1, n):
            w = ring_shift(w, "dp", 1)
            out += cols((idx - i) % n) @ w
        return out

    def ppermute_loop_two_directions(x, w):
        n, idx = jax.lax.axis_size("dp"), jax.lax.axis_index("dp")
        size = x.shape[1] // (2 * n)
        cols = lambda i, right: jax.lax.dynamic_slice_in_dim(  # noqa: E731
            x, (2 * i + right) * size, size, axis=1)
        up, bottom = jnp.split(w, 2, axis=0)
        out = cols(idx, 0) @ up + cols(idx, 1) @ bottom
        for i in range(1, n):
            up, bottom = ring_shift(up, "dp", 1), ring_shift(bottom, "dp", -1)
            out += cols((idx - i) % n, 0) @ up
            out += cols((idx + i) % n, 1) @ bottom
        return out

    def psum_scatter(x, w):
        return jax.lax.psum_scatter(x @ w, ("dp", "tp"), scatter_dimension=0, tiled=True)

    def psum_scatter_overlapped(x, w):
        axes = ("dp", "tp")
        n, idx = jax.lax.axis_size(axes), jax.lax.axis_index(axes)
        size = x.shape[0] // n
        rows = lambda i: jax.lax.dynamic_slice_in_dim(x, i * size, size, axis=0)  # noqa: E731
        acc = rows((idx - (n - 1)) % n) @ w
        for i in range(n - 2, -1, -1):
            acc = ring_shift(acc, axes, -1) + rows((idx - i) % n) @ w
        return acc

    def psum_scatter_overlapped_two_directions(x, w):
        axes = ("dp", "tp")
        n, idx = jax.lax.axis_size(axes), jax.lax.axis_index(axes)
        size = x.shape[0] // (2 * n)
        rows = lambda i, bottom: jax.lax.dynamic_slice_in_dim(  # noqa: E731
            x, (2 * i + bottom) * size, size, axis=0)
        top = rows((idx - (n - 1)) % n, 0) @ w
        bot = rows((idx - 1) % n, 1) @ w
        for i, j in zip(range(n - 2, -1, -1), range(2, n + 1)):
            top = ring_shift(top, axes, -1) + rows((idx - i) % n, 0) @ w
            bot = ring_shift(bot, axes, 1) + rows((idx - j) % n, 1) @ w
        return jnp.concat((top, bot), axis=0)

    fsdp = (P("dp", None), P("dp", None)), P("dp", None)
    scatter = (P(None, ("dp", "tp")), P(("dp", "tp"), None)), P(("dp", "tp"), None)
    return {
        "naive jit": (None, (P(), P()), P()),
        "shard_map 4x2": (shard_map_4x2, (P("dp", None), P(None, "tp")), P("dp", "tp")),
        "FSDP all_gather": (fsdp_all_gather, *fsdp),
        "ppermute loop 1-dir": (ppermute_loop, *fsdp),
        "ppermute loop 2-dir": (ppermute_loop_two_directions, *fsdp),
        "psum_scatter": (psum_scatter, *scatter),
        "psum_scatter overlap 1-dir": (psum_scatter_overlapped, *scatter),
        "psum_scatter overlap 2-dir": (psum_scatter_overlapped_two_directions, *scatter),
    }


def build(jax, x, w):
    """Jitted callables with their inputs placed: name -> thunk."""
    jnp = jax.numpy
    mesh = jax.make_mesh((4, 2), ("dp", "tp"))
    NS = jax.sharding.NamedSharding
    calls = {}
    for name, (body, in_specs, out_specs) in variants(jax, jnp).items():
        if body is None:
            f = jax.jit(lambda a, b: a @ b)
            args = (jnp.asarray(x), jnp.asarray(w))
        else:
            f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs))
            args = tuple(jax.device_put(v, NS(mesh, s)) for v, s in zip((x, w), in_specs))
        calls[name] = (lambda f=f, args=args: f(*args))
    P = jax.sharding.PartitionSpec
    tiny = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, ("dp", "tp")), mesh=mesh,
                                 in_specs=P(("dp", "tp")), out_specs=P()))
    small = jax.device_put(np.arange(8, dtype=np.float32), NS(mesh, P(("dp", "tp"))))
    calls["tiny psum (8 floats)"] = lambda: tiny(small)
    return calls


def interleaved(contenders: dict, repeats: int, number: dict) -> dict[str, list[float]]:
    """Seconds per call, `repeats` samples each, the contenders taking turns."""
    for fn in contenders.values():
        fn().block_until_ready()
    samples = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            k = number.get(name, 1)
            t0 = time.perf_counter()
            for _ in range(k):
                fn().block_until_ready()
            samples[name].append((time.perf_counter() - t0) / k)
    return samples


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    import jax as real_jax
    import meshsim

    rng = np.random.default_rng(0)
    x = rng.standard_normal((M, K), dtype=np.float32)
    w = rng.standard_normal((K, N), dtype=np.float32)
    expected = x.astype(np.float64) @ w.astype(np.float64)

    ours = build(meshsim, x, w)
    theirs = build(real_jax, x, w)
    for name in ours:  # same numbers from both, close to x @ w
        if name.startswith("tiny"):
            continue
        a, b = np.asarray(ours[name]()), np.asarray(theirs[name]())
        np.testing.assert_allclose(a, expected, atol=1e-3, rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(a, b, atol=1e-3, rtol=1e-5, err_msg=name)

    class _NumPy:
        def __init__(self, v):
            self.v = v

        def block_until_ready(self):
            return self.v

    contenders = {}
    for name in ours:
        contenders[("meshsim", name)] = ours[name]
        contenders[("jax", name)] = theirs[name]
    contenders[("numpy", "x @ w")] = lambda: _NumPy(x @ w)
    tiny_calls = {("meshsim", "tiny psum (8 floats)"): 200, ("jax", "tiny psum (8 floats)"): 200}
    samples = interleaved(contenders, args.repeats, tiny_calls)
    med = {k: statistics.median(v) for k, v in samples.items()}

    print(f"float32 [{M},{K}] @ [{K},{N}] on a ('dp': 4, 'tp': 2) mesh, 8 devices; "
          f"median of {args.repeats} interleaved samples; {os.cpu_count()} cores")
    print(f"{'variant':30s}{'meshsim ms':>12s}{'JAX ms':>10s}{'meshsim/JAX':>13s}")
    for name in ours:
        m, j = med[("meshsim", name)], med[("jax", name)]
        scale, unit = (1e6, "us") if name.startswith("tiny") else (1e3, "")
        print(f"{name + (' [us]' if unit else ''):30s}{m * scale:12.2f}{j * scale:10.2f}{m / j:12.2f}x")
    npt = med[("numpy", "x @ w")]
    sm = med[("meshsim", "shard_map 4x2")]
    print(f"\nNumPy x @ w (whole problem, one BLAS call): {npt * 1e3:.2f} ms; "
          f"meshsim shard_map 4x2 / NumPy = {sm / npt:.2f}x; "
          f"meshsim naive jit / NumPy = {med[('meshsim', 'naive jit')] / npt:.2f}x")


if __name__ == "__main__":
    main()

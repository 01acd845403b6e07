"""Random shard_map programs for differential testing against JAX: a mesh of
up to 3 axes over up to 8 devices, an input spec, a chain of local ops and
collectives over random axis subsets, sometimes under jit, sometimes a
gradient. Each program is code setting `out` for tests/hostile/runner.py.

    python tests/fuzz/programs.py SEED COUNT   # prints the programs as JSON
"""
import itertools
import json
import math
import sys

import numpy as np

MESHES = [(8,), (4,), (2,), (4, 2), (2, 4), (2, 2), (2, 2, 2), (1, 8), (8, 1), (2, 1, 4)]
NAMES = ("a", "b", "c")
LOCAL_OPS = ["v = jnp.sin(v)", "v = v * 1.5 + 0.25", "v = jnp.tanh(v)", "v = v * v",
             "v = jnp.maximum(v, 0.1)", "v = jnp.cumsum(v, axis=0)",
             "v = v - jnp.mean(v, axis=1, keepdims=True)"]


def _subsets(axes):
    return [s for k in range(1, len(axes) + 1) for s in itertools.combinations(axes, k)]


def program(rng: np.random.Generator) -> str:
    shape = MESHES[rng.integers(len(MESHES))]
    names = NAMES[:len(shape)]
    size = dict(zip(names, shape))
    n = math.prod(shape)
    # A global [rows, cols] input and a spec sharding each dim over some unused axes.
    free = list(names)
    spec, local = [], []
    for dim, extent in enumerate((16, 8)):
        axes = []
        for a in list(free):
            if rng.random() < 0.45 and extent % (math.prod(size[x] for x in axes) * size[a]) == 0:
                axes.append(a)
                free.remove(a)
        spec.append(tuple(axes))
        local.append(extent // math.prod(size[x] for x in axes))
    lines = []
    for _ in range(int(rng.integers(1, 6))):
        kind = rng.integers(0, 7)
        ax = _subsets(names)[rng.integers(len(_subsets(names)))]
        k = math.prod(size[a] for a in ax)
        axs = repr(ax if len(ax) > 1 else ax[0])
        d = int(rng.integers(0, 2))
        if kind <= 1:
            lines.append(LOCAL_OPS[rng.integers(len(LOCAL_OPS))])
        elif kind == 2:
            op = ["psum", "pmax", "pmin", "pmean"][rng.integers(4)]
            lines.append(f"v = lax.{op}(v, {axs})")
        elif kind == 3 and local[d] * k <= 64:
            lines.append(f"v = lax.all_gather(v, {axs}, axis={d}, tiled=True)")
            local[d] *= k
        elif kind == 4 and local[d] % k == 0:
            lines.append(f"v = lax.psum_scatter(v, {axs}, scatter_dimension={d}, tiled=True)")
            local[d] //= k
        elif kind == 5 and len(ax) == 1:
            shift = int(rng.integers(1, max(2, k)))
            perm = [(i, (i + shift) % k) for i in range(k)]
            lines.append(f"v = lax.ppermute(v, {axs}, {perm})")
        elif kind == 6 and local[d] % k == 0:
            lines.append(f"v = lax.all_to_all(v, {axs}, {d}, {1 - d}, tiled=True)")
            local[d] //= k
            local[1 - d] *= k
        else:
            lines.append(LOCAL_OPS[rng.integers(len(LOCAL_OPS))])
    body = "\n".join("    " + line for line in lines)
    in_spec = "P(" + ", ".join(repr(s if len(s) > 1 else s[0]) if s else "None" for s in spec) + ")"
    out_spec = f"P({tuple(names)!r})"  # every axis on dim 0: the output is fully determined
    check_vma = bool(rng.random() < 0.7)
    seed = int(rng.integers(0, 2**31))
    use_jit = bool(rng.random() < 0.7)
    grad = bool(rng.random() < 0.3)
    call = "g(x)" if not grad else "jax.grad(lambda x: jnp.sum(g(x) ** 2))(x)"
    return (f"mesh = Mesh(np.array(jax.devices()[:{n}]).reshape({shape}), {names!r})\n"
            f"def body(v):\n{body}\n    return v\n"
            f"f = shard_map(body, mesh=mesh, in_specs={in_spec}, out_specs={out_spec}, "
            f"check_vma={check_vma})\n"
            f"g = {'jax.jit(f)' if use_jit else 'f'}\n"
            f"x = jnp.asarray(np.random.default_rng({seed}).uniform(-1, 1, (16, 8)).astype(np.float32))\n"
            f"out = {call}\n")


def programs(seed: int, count: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [program(rng) for _ in range(count)]


if __name__ == "__main__":
    print(json.dumps(programs(int(sys.argv[1]), int(sys.argv[2]))))

"""Random jitted programs over all-Auto meshes, for comparing meshsim's sharding
propagation and partitioning with XLA's: each program is a short chain of
operations (elementwise, broadcasting, dot_general with batch dims, reshapes
merging and splitting dims, transposes, reductions, gathers, scatters,
concatenate, pad, cumsum, convolution) on an array and the further arguments
some operations take, every argument laid out by a random spec over a random
mesh of 8 devices. Programs are drawn from a seeded generator, so a case is
the same on every run."""
import numpy as np

MESHES = [((8,), ("X",)), ((4, 2), ("X", "Y")), ((2, 4), ("X", "Y")), ((2, 2, 2), ("X", "Y", "Z"))]
SIZES = (2, 4, 8, 16)


def random_spec(rng, shape, mesh_shape, names):
    """A spec laying each mesh axis on a dim it divides, or on none."""
    entries = [[] for _ in shape]
    block = list(shape)
    for k in rng.permutation(len(names)):
        dims = [d for d in range(len(shape)) if block[d] % (mesh_shape[k] * 1) == 0]
        if not dims or rng.random() < 0.3:
            continue
        d = int(rng.choice(dims))
        entries[d].append(names[k])
        block[d] //= mesh_shape[k]
    spec = [None if not e else e[0] if len(e) == 1 else tuple(e) for e in entries]
    while spec and spec[-1] is None:
        spec.pop()
    return tuple(spec)


# Each operation: (name, how often, builder). A builder gets the generator and
# the current shape and returns (apply(m, x, *extras), [extra shapes]) or None
# when the operation does not fit the shape.

def _unary(rng, shape):
    name = rng.choice(["sin", "tanh", "exp"])
    return (lambda m, x: getattr(m.jnp, name)(x) * 0.5), []


def _binary(rng, shape):
    op = rng.choice(["add", "mul", "sub"])
    f = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b}[op]
    return (lambda m, x, y: f(x, y)), [tuple(shape)]


def _bias(rng, shape):
    if not shape:
        return None
    return (lambda m, x, b: x + b), [(shape[-1],)]


def _transpose(rng, shape):
    if len(shape) < 2:
        return None
    perm = tuple(int(p) for p in rng.permutation(len(shape)))
    return (lambda m, x: m.jnp.transpose(x, perm)), []


def _reduce(rng, shape):
    if not shape:
        return None
    axis = int(rng.integers(len(shape)))
    keep = bool(rng.random() < 0.3)
    kind = rng.choice(["sum", "max", "mean"])
    return (lambda m, x: getattr(m.jnp, kind)(x, axis=axis, keepdims=keep)), []


def _merge(rng, shape):
    if len(shape) < 2:
        return None
    d = int(rng.integers(len(shape) - 1))
    new = tuple(shape[:d]) + (shape[d] * shape[d + 1],) + tuple(shape[d + 2:])
    return (lambda m, x: m.jnp.reshape(x, new)), []


def _split(rng, shape):
    dims = [d for d in range(len(shape)) if shape[d] >= 4]
    if not dims or len(shape) > 3:
        return None
    d = int(rng.choice(dims))
    a = int(rng.choice([f for f in (2, 4) if shape[d] % f == 0 and shape[d] > f]))
    new = tuple(shape[:d]) + (a, shape[d] // a) + tuple(shape[d + 1:])
    return (lambda m, x: m.jnp.reshape(x, new)), []


def _matmul(rng, shape):
    if len(shape) < 1:
        return None
    n = int(rng.choice(SIZES))
    if len(shape) == 1:
        return (lambda m, x, w: x @ w), [(shape[0], n)]
    return (lambda m, x, w: x @ w), [(shape[-1], n)]


def _batch_dot(rng, shape):
    if len(shape) != 3:
        return None
    n = int(rng.choice(SIZES))
    return (lambda m, x, w: m.jnp.einsum("bij,bjk->bik", x, w)), [(shape[0], shape[2], n)]


def _take(rng, shape):
    if not shape:
        return None
    axis = int(rng.integers(len(shape)))
    idx = rng.integers(0, shape[axis], size=int(rng.choice([2, 4]))).astype(np.int32)
    return (lambda m, x: m.jnp.take(x, m.jnp.asarray(idx), axis=axis)), []


def _scatter_add(rng, shape):
    if not shape:
        return None
    idx = rng.integers(0, shape[0], size=3).astype(np.int32)
    return (lambda m, x: x.at[m.jnp.asarray(idx)].add(1.0)), []


def _concat(rng, shape):
    if not shape:
        return None
    axis = int(rng.integers(len(shape)))
    return (lambda m, x: m.jnp.concatenate([x, x * 2.0], axis=axis)), []


def _pad(rng, shape):
    if not shape:
        return None
    axis = int(rng.integers(len(shape)))
    widths = [(0, 0)] * len(shape)
    widths[axis] = (1, 1) if rng.random() < 0.5 else (0, 2)
    return (lambda m, x: m.jnp.pad(x, widths)), []


def _cumsum(rng, shape):
    if not shape:
        return None
    axis = int(rng.integers(len(shape)))
    return (lambda m, x: m.jnp.cumsum(x, axis=axis)), []


def _conv(rng, shape):
    # (batch, channels, width) with a (features, channels, 3) kernel
    if len(shape) != 3 or shape[2] < 4:
        return None
    feats = int(rng.choice([2, 4, 8]))
    return (lambda m, x, k: m.jax.lax.conv_general_dilated(x, k, (1,), "SAME")), [(feats, shape[1], 3)]


OPS = [("unary", 3, _unary), ("binary", 2, _binary), ("bias", 1, _bias), ("transpose", 2, _transpose),
       ("reduce", 2, _reduce), ("merge", 2, _merge), ("split", 2, _split), ("matmul", 3, _matmul),
       ("batch_dot", 2, _batch_dot), ("take", 1, _take), ("scatter_add", 1, _scatter_add),
       ("concat", 1, _concat), ("pad", 1, _pad), ("cumsum", 1, _cumsum), ("conv", 2, _conv)]


class RandomProgram:
    """A chain of operations on argument 0; the further arguments are taken in order."""

    def __init__(self, seed: int, shape_of):
        rng = np.random.default_rng(seed)
        self.mesh_shape, self.axis_names = MESHES[int(rng.integers(len(MESHES)))]
        rank = int(rng.integers(1, 4))
        shape = tuple(int(rng.choice(SIZES)) for _ in range(rank))
        self.shapes = [shape]
        self.steps = []  # (name, apply, number of extra arguments)
        weights = np.array([w for _, w, _ in OPS], float)
        for _ in range(int(rng.integers(2, 5))):
            for _attempt in range(20):
                name, _, build = OPS[int(rng.choice(len(OPS), p=weights / weights.sum()))]
                built = build(rng, shape)
                if built is None:
                    continue
                apply, extra = built
                new_shape = shape_of(apply, shape, extra)
                if new_shape is None or int(np.prod(new_shape, dtype=np.int64)) > 4096 or len(new_shape) > 4:
                    continue
                self.steps.append((name, apply, len(extra)))
                self.shapes += extra
                shape = new_shape
                break
        self.specs = [random_spec(rng, s, self.mesh_shape, self.axis_names) for s in self.shapes]
        self.name = f"{seed}:" + "-".join(n for n, _, _ in self.steps)

    def __call__(self, lib, *args):
        x, rest = args[0], list(args[1:])
        for _, apply, n in self.steps:
            extra, rest = rest[:n], rest[n:]
            x = apply(lib, x, *extra)
        return x

"""`.at[idx].get(out_sharding=)` against JAX on Explicit meshes. JAX indexes a concrete array
held by several devices with a gather laid out as asked whenever the index has an integer or a
partial slice; a traced array (under jit) or a whole-slice index is sliced, which ignores
`out_sharding` and refuses integer indices of sharded dims. Over random meshes, operand specs,
index kinds and requested specs, eager and jitted, the result's type and values (or the error
raised) must be JAX's."""
import numpy as np
import pytest

import meshsim

jax = pytest.importorskip("jax")

# The meshes and spec entries of the scatter sweep: .at[].get takes the same out_sharding forms.
from test_scatter_out_sharding import MESHES, _entries  # noqa: E402


def _random_item(rng, n):
    """One index item for a dim of size n."""
    kind = rng.integers(0, 6)
    if kind == 0:
        return int(rng.integers(-n, n))
    if kind == 1:
        return slice(None)
    if kind == 2:
        return slice(int(rng.integers(0, n)), n)
    if kind == 3:  # strided or reversed (JAX fails internally on empty sharded results)
        return slice(int(rng.integers(0, 2)), n, 2) if rng.integers(0, 2) else slice(None, None, -1)
    if kind == 4:
        return np.asarray(rng.integers(-n, n, int(rng.choice([1, 2, 4, 8]))), np.int32)
    return None


def _random_index(rng, shape):
    """Items for the leading dims, or an Ellipsis standing for a run of dims."""
    items = [_random_item(rng, n) for n in shape]
    if rng.integers(0, 4) == 0:
        start = int(rng.integers(0, len(shape) + 1))
        items[start:start + int(rng.integers(0, len(shape) - start + 1))] = [Ellipsis]
    else:
        items = items[:int(rng.integers(1, len(shape) + 1))]
    return items[0] if len(items) == 1 and rng.integers(0, 2) else tuple(items)


def _run(lib, mesh_shape, names, x, x_spec, index, out_spec, named, jit):
    P, NS = lib.sharding.PartitionSpec, lib.sharding.NamedSharding
    mesh = lib.make_mesh(mesh_shape, names, axis_types=(lib.sharding.AxisType.Explicit,) * len(names))
    with lib.set_mesh(mesh):
        try:
            xs = lib.device_put(x, NS(mesh, P(*x_spec)))
            out_sharding = NS(mesh, P(*out_spec)) if named else P(*out_spec)

            def get(a):
                return a.at[index].get(out_sharding=out_sharding)

            y = (lib.jit(get) if jit else get)(xs)
            return "ok", str(lib.typeof(y)), np.asarray(y)
        except Exception as e:  # noqa: BLE001 - the class and message are compared
            return type(e).__name__, str(e), None


@pytest.mark.parametrize("seed", range(60))
def test_random_gets_with_out_sharding_match_jax(seed):
    rng = np.random.default_rng(seed)
    mesh_shape, names = MESHES[seed % len(MESHES)]
    ndim = int(rng.integers(1, 4))
    shape = tuple(int(rng.choice([2, 4, 8, 16])) for _ in range(ndim))
    entries = _entries(names)
    x_spec = [entries[int(rng.integers(0, len(entries)))] for _ in range(ndim)]
    if seed % 5 == 0:
        x_spec = [None] * ndim  # replicated over all devices: still gathered when eager
    x = rng.standard_normal(shape).astype(np.float32)
    index = _random_index(rng, shape)
    out_ndim = np.zeros(shape)[index].ndim
    out_spec = [entries[int(rng.integers(0, len(entries)))] for _ in range(out_ndim)]
    args = (mesh_shape, names, x, x_spec, index, out_spec, bool(seed % 2))
    for jit in (False, True):
        got = _run(meshsim, *args, jit)
        want = _run(jax, *args, jit)
        assert got[:2] == want[:2], (jit, index, got[:2], want[:2])
        if want[2] is not None:
            np.testing.assert_array_equal(got[2], want[2])


@pytest.mark.parametrize("index", [1, -1, (1, 2), slice(0, 4), (slice(None), 1), (slice(None, None, -1), 0)])
def test_integer_and_partial_indices_of_a_sharded_dim(index):
    """f32[8@dp,6]: eager, the index is gathered and laid out as asked; under jit JAX slices."""
    args = (((4, 2), ("dp", "tp")), np.arange(48, dtype=np.float32).reshape(8, 6), ["dp", None], index)
    out_spec = ["tp"] if np.zeros((8, 6))[index].ndim == 1 else [None, "tp"][:np.zeros((8, 6))[index].ndim]
    for jit in (False, True):
        got = _run(meshsim, *args[0], *args[1:], out_spec, False, jit)
        want = _run(jax, *args[0], *args[1:], out_spec, False, jit)
        assert got[:2] == want[:2], (jit, got[:2], want[:2])
        if want[2] is not None:
            np.testing.assert_array_equal(got[2], want[2])

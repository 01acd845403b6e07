"""Typed PRNG keys and the threefry2x32 key operations (JAX's partitionable mode).

A typed key array of shape S is a `PRNGKeyArray` over a uint32 array of shape
S + (2,) (its key data). It is a pytree leaf to users, as in JAX, and a node whose one
child is that data to the transforms, which trace the data (see tree_public.py).
"""
from __future__ import annotations

import math

import numpy as np

from meshsim._src.basearray import Array
from meshsim._src import core, tree_public
from meshsim._src.lax import elementwise as lax
from meshsim._src.lax import structural as lax_shape
from meshsim._src import dtype_kinds

KEY_SHAPE = (2,)
_UINT32 = np.dtype(np.uint32)


class KeyTy:
    """The dtype of threefry2x32 key arrays; prints as JAX's `key<fry>`."""

    name = "key<fry>"
    impl_name = "threefry2x32"
    itemsize = 8  # two uint32 words per key

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, KeyTy)

    def __hash__(self):
        return hash(KeyTy)


KEY_DTYPE = KeyTy()


class KeyShapedArray:
    """The abstract type of a key array: `key<fry>[3]`, as `jax.typeof` prints it, with the
    key data's sharding on the key dimensions (`key<fry>[8@x]`)."""

    def __init__(self, data_aval):
        self._elements = data_aval.without_dim(data_aval.ndim - 1)  # uint32 over the key shape
        self.shape = tuple(self._elements.shape)
        self.dtype = KEY_DTYPE
        self.ndim = len(self.shape)
        self.size = math.prod(self.shape)
        self.weak_type = False

    @property
    def sharding(self):
        return self._elements.sharding

    def str_short(self, short_dtypes: bool = False) -> str:
        text = self._elements.str_short()
        return f"{KEY_DTYPE}{text[text.index('['):]}"

    __str__ = str_short

    def __repr__(self):
        return f"ShapedArray({self.str_short()})"

    def __eq__(self, other):
        return isinstance(other, KeyShapedArray) and other.str_short() == self.str_short()

    def __hash__(self):
        return hash((KeyShapedArray, self.str_short()))


class PRNGKeyArray:
    """An array of threefry2x32 keys backed by uint32 key data."""

    __array_priority__ = 100

    def __init__(self, key_data):
        self._base = key_data

    @property
    def aval(self) -> KeyShapedArray:
        return KeyShapedArray(self._base.aval)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._base.shape[:-1])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype(self) -> KeyTy:
        return KEY_DTYPE

    @property
    def itemsize(self) -> int:
        return KEY_DTYPE.itemsize

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (PRNGKeyArray(lax_shape.index_in_dim(self._base, i, keepdims=False))
                for i in range(self.shape[0]))

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        # An Ellipsis must not swallow the key-data dimension.
        if any(i is Ellipsis for i in idx):
            idx = idx + (slice(None),)
        return PRNGKeyArray(self._base[idx])

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return PRNGKeyArray(self._base.reshape(tuple(shape) + KEY_SHAPE))

    def ravel(self):
        return self.reshape(self.size)

    def __eq__(self, other):
        return _key_eq(self, other)

    def __ne__(self, other):
        return ~_key_eq(self, other)

    __hash__ = None

    def __bool__(self):
        raise TypeError("key array cannot be converted to boolean.")

    def __array__(self, dtype=None, copy=None):
        raise TypeError("JAX array with PRNGKey dtype cannot be converted to a NumPy array. "
                        "Use jax.random.key_data(arr) if you wish to extract the underlying "
                        "integer array.")

    @property
    def sharding(self):
        """The key data's sharding without its trailing key dimension, named by the keys'
        type (`P(None,)` for two keys replicated over a mesh, as JAX names it)."""
        from meshsim._src.sharding.named_sharding import NamedSharding, sharding_from_core
        data = sharding_from_core(self._base.sharding_core)
        if not isinstance(data, NamedSharding):
            return data
        spec = data.spec.update(partitions=data.spec.partitions[:self.ndim])
        return data.update(spec=spec.padded(self.ndim))

    @property
    def committed(self) -> bool:
        return self._base.committed

    def block_until_ready(self):
        self._base.block_until_ready()
        return self

    def __repr__(self):
        if isinstance(self._base, core.Tracer):
            return f"JitTracer({self.aval.str_short()})"
        return f"Array({self.shape}, dtype={KEY_DTYPE}) overlaying:\n{self._base}"


def _key_eq(a, b):
    if not (isinstance(a, PRNGKeyArray) and isinstance(b, PRNGKeyArray)):
        raise TypeError(f"eq does not accept dtypes {_dtype_of(a)}, {_dtype_of(b)}.")
    last = a._base.ndim - 1
    w0, w1 = (lax.eq(lax_shape.index_in_dim(a._base, i, last, False),
                     lax_shape.index_in_dim(b._base, i, last, False)) for i in range(2))
    return lax.bitwise_and(w0, w1)


def _dtype_of(x):
    return x.dtype if hasattr(x, "dtype") else core.python_scalar_dtype(x)


# A leaf to users (jax.tree_util), a node over its key data to the transforms.
tree_public.register_traced_leaf(PRNGKeyArray, lambda k: ((k._base,), None),
                                 lambda _, children: PRNGKeyArray(*children))


# -- wrapping, unwrapping and seeding


def _invalid(msg: str):
    raise TypeError(f"JAX encountered invalid PRNG key data: {msg}")


def random_wrap(key_data) -> PRNGKeyArray:
    """Checks raw key data (uint32[..., 2]) and views it as typed keys."""
    if not all(hasattr(key_data, a) for a in ("ndim", "shape", "dtype")):
        _invalid(f"expected key_data to have ndim, shape, and dtype attributes. Got {key_data}")
    if key_data.ndim < 1:
        _invalid(f"expected key_data.ndim >= 1; got ndim={key_data.ndim}")
    if tuple(key_data.shape[-1:]) != KEY_SHAPE:
        _invalid(f"expected key_data.shape to end with {KEY_SHAPE}; got shape={tuple(key_data.shape)} "
                 f"for impl={KEY_DTYPE.impl_name}")
    if key_data.dtype != _UINT32:
        _invalid(f"expected key_data.dtype = uint32; got dtype={key_data.dtype}")
    return PRNGKeyArray(core.asarray_value(key_data))


def random_seed(seed) -> PRNGKeyArray:
    """A scalar key from an integer seed: [seed >> 32, seed & 0xFFFFFFFF] as uint32.

    Python ints first become int64 and then the default integer type, as in
    JAX: with x64 off a seed keeps only its low 32 bits."""
    seed = core.asarray_value(np.int64(seed) if isinstance(seed, int) else seed)
    if not (dtype_kinds.issubdtype(seed.dtype, np.integer) or seed.dtype == np.bool_):
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}.")
    hi = lax.shift_right_logical(seed, np.array(32, seed.dtype)) if seed.dtype.itemsize == 8 else 0
    words = [lax.convert_element_type(w, _UINT32) for w in (hi, seed)]
    return PRNGKeyArray(_stack_last(*words))


# -- threefry2x32 key operations (a single key: data of shape (2,))


def threefry2x32(k0, k1, x0, x1):
    """The Threefry-2x32 hash of counters (x0, x1) under key words (k0, k1) (all uint32)."""
    return core.bind("threefry2x32", *(core.asarray_value(v) for v in (k0, k1, x0, x1)))


def _stack_last(a, b):
    """[a, b] along a new trailing axis: (y0, y1) words -> key data."""
    return lax_shape.concatenate([lax_shape.expand_dims(v, (v.ndim,)) for v in (a, b)], a.ndim)


def _hash_counters(key: PRNGKeyArray, hi, lo) -> PRNGKeyArray:
    k0, k1 = (lax_shape.index_in_dim(key._base, i, keepdims=False) for i in range(2))
    return PRNGKeyArray(_stack_last(*threefry2x32(k0, k1, hi, lo)))


def random_split(key: PRNGKeyArray, shape: tuple[int, ...]) -> PRNGKeyArray:
    """Keys of `shape`: key i hashes the counter (hi(i), lo(i)) of its flat index."""
    n = math.prod(shape)
    if n >= 2 ** 32:
        raise NotImplementedError(f"split into {n} >= 2**32 keys")
    lo = lax_shape.reshape(lax_shape.iota(_UINT32, n), shape)
    hi = lax_shape.full(shape, 0, _UINT32)
    return _hash_counters(key, hi, lo)


def random_fold_in(key: PRNGKeyArray, data) -> PRNGKeyArray:
    """The key for counter (0, data): equal to split(key, n)[data]."""
    return _hash_counters(key, np.uint32(0), data)


def random_bits(key: PRNGKeyArray, bit_width: int, shape: tuple[int, ...]):
    """uint{bit_width}[shape] bits, element i from the hash of its flat index i."""
    if math.prod(shape) > 2 ** 64:
        raise NotImplementedError("random bits array of size exceeding 2 ** 64")
    return core.bind1("random_bits", key._base, shape=shape, bit_width=bit_width)


Array.register(PRNGKeyArray)  # typed key arrays are jax.Array instances, as in JAX

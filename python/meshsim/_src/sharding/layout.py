"""The memory layout of an array's shards (`jax.experimental.layout`). meshsim keeps every
shard row-major; `Layout` and `Format` are the values JAX programs and libraries (flax's
sharding helpers, orbax's restore) build and inspect, and `device_put` takes a `Format`'s
sharding."""
from __future__ import annotations

from meshsim._src.sharding.named_sharding import NamedSharding, SingleDeviceSharding


class Layout:
    """An order of dimensions from major to minor, with optional tiling."""

    def __init__(self, major_to_minor: tuple[int, ...],
                 tiling: tuple[tuple[int, ...], ...] | None = None,
                 sub_byte_element_size_in_bits: int = 0):
        self.major_to_minor = tuple(major_to_minor)
        self.tiling = None if tiling is None else tuple(tuple(t) for t in tiling)
        self.sub_byte_element_size_in_bits = sub_byte_element_size_in_bits

    def _key(self):
        return (self.major_to_minor, self.tiling, self.sub_byte_element_size_in_bits)

    def __eq__(self, other):
        return isinstance(other, Layout) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return (f"Layout(major_to_minor={self.major_to_minor}, tiling={self.tiling}, "
                f"sub_byte_element_size_in_bits={self.sub_byte_element_size_in_bits})")


class Format:
    """A layout together with a sharding."""

    def __init__(self, layout=None, sharding=None):
        if isinstance(layout, Layout) and not isinstance(sharding, (NamedSharding,
                                                                    SingleDeviceSharding)):
            raise ValueError(
                f"Sharding has to be concrete when layout is of type {type(layout)}. Please pass a "
                "`jax.sharding.NamedSharding` or `jax.sharding.SingleDeviceSharding` to the "
                f"sharding argument. Got sharding {sharding}")
        self.layout = layout
        self.sharding = sharding

    def __eq__(self, other):
        return (isinstance(other, Format) and self.layout == other.layout
                and self.sharding == other.sharding)

    def __hash__(self):
        return hash((self.layout, self.sharding))

    def __repr__(self):
        return f"Format(layout={self.layout}, sharding={self.sharding})"

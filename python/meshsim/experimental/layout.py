"""`jax.experimental.layout`: the memory layout of an array's shards (_src/sharding/layout.py)."""
from meshsim._src.sharding.layout import Format, Layout  # noqa: F401

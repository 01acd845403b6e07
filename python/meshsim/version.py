"""`jax.version`: `__version__` is meshsim's own version; `__version_info__` is the version
of JAX whose API and semantics meshsim implements. Libraries choose code paths by comparing
`jax.__version_info__` (flax: trace state, scan), so under the `jax` alias they take the
paths written for that JAX."""
__version__ = "0.1.0"
__version_info__ = (0, 10, 2)

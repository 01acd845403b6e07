"""JAX's error classes (`jax.errors`)."""
from meshsim._src.errors import (  # noqa: F401
    ConcretizationTypeError, InconclusiveDimensionOperation, JAXIndexError, JaxprTypeError, JAXTypeError, JaxRuntimeError, KeyReuseError,
    NonConcreteBooleanIndexError, TracerArrayConversionError, TracerBoolConversionError,
    TracerIntegerConversionError, UnexpectedTracerError,
)

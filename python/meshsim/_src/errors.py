"""JAX's error classes (`jax.errors`), with the same hierarchy, so that code
catching `jax.errors.ConcretizationTypeError` (or plain TypeError) behaves the
same under meshsim."""
from __future__ import annotations


class _JAXErrorMixin:
    """Appends a pointer to JAX's error reference, as JAX's messages do."""
    _error_page = "https://docs.jax.dev/en/latest/errors.html"

    def __init__(self, message: str):
        name = type(self).__name__
        super().__init__(f"{message}\nSee {self._error_page}#jax.errors.{name}")


class JAXTypeError(_JAXErrorMixin, TypeError):
    pass


class JAXIndexError(_JAXErrorMixin, IndexError):
    pass


class ConcretizationTypeError(JAXTypeError):
    """A traced value was used where Python needs a concrete one. `origin`: where the value
    came from (tracing.origin_message), "" when unknown."""

    def __init__(self, tracer, context: str = "", origin: str = ""):
        message = ("Abstract tracer value encountered where concrete value is expected: "
                   f"traced array with shape {tracer.aval.str_short()}\n{context}")
        super().__init__(f"{message}{origin}\n" if origin else message.rstrip("\n"))


class TracerBoolConversionError(ConcretizationTypeError):
    def __init__(self, tracer, origin: str = ""):
        JAXTypeError.__init__(
            self, f"Attempted boolean conversion of traced array with shape {tracer.aval.str_short()}.{origin}")


class TracerIntegerConversionError(JAXTypeError):
    def __init__(self, tracer, origin: str = ""):
        super().__init__(
            f"The __index__() method was called on traced array with shape {tracer.aval.str_short()}{origin}")


class TracerArrayConversionError(JAXTypeError):
    def __init__(self, tracer, origin: str = ""):
        super().__init__("The numpy.ndarray conversion method __array__() was called on traced array "
                         f"with shape {tracer.aval.str_short()}{origin}")


class UnexpectedTracerError(JAXTypeError):
    def __init__(self, message: str):
        super().__init__(message)


class KeyReuseError(JAXTypeError):
    def __init__(self, message: str):
        super().__init__(message)


class NonConcreteBooleanIndexError(JAXIndexError):
    def __init__(self, tracer):
        super().__init__(f"Array boolean indices must be concrete; got {tracer.aval.str_short()}\n")


class JaxRuntimeError(RuntimeError):
    """An error raised while a program runs (after tracing accepted it)."""


class InconclusiveDimensionOperation(Exception):
    """A comparison of symbolic dimensions whose answer depends on their values."""


class JaxprTypeError(TypeError):
    """A program that does not type-check."""

"""`lax.Precision` and `lax.DotAlgorithmPreset`: how a dot product's inputs
are rounded and accumulated. On CPU, JAX computes float32 dots in full float32
whatever the precision, so the accepted values change nothing here; the
presets JAX's CPU backend rejects are rejected with its message, and those it
computes in another type (F16_F16_F16, F64_F64_F64) are not supported yet."""
from __future__ import annotations

import enum

import numpy as np


class Precision(enum.Enum):
    """The precision of a dot product's inputs on accelerators."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        aliases = {"default": cls.DEFAULT, "fastest": cls.DEFAULT, "bfloat16": cls.DEFAULT,
                   "high": cls.HIGH, "bfloat16_3x": cls.HIGH, "tensorfloat32": cls.HIGH,
                   "highest": cls.HIGHEST, "float32": cls.HIGHEST}
        return aliases.get(value) if isinstance(value, str) else None

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}.{self.name}"

    def __str__(self) -> str:
        return self.name


class DotAlgorithmPreset(enum.Enum):
    """Named algorithms for a dot product: input types, accumulation, passes."""
    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}.{self.name}"

    def __str__(self) -> str:
        return self.name

    @property
    def accumulation_type(self):
        if self is DotAlgorithmPreset.DEFAULT:
            return None
        return {"F16": np.float16, "F32": np.float32, "F64": np.float64}.get(
            self.name.split("_")[2], np.float32)


# What JAX's CPU backend computes for float32 inputs exactly as float32.
_CPU_FLOAT32_PRESETS = {DotAlgorithmPreset.DEFAULT, DotAlgorithmPreset.F32_F32_F32,
                        DotAlgorithmPreset.BF16_BF16_F32, DotAlgorithmPreset.BF16_BF16_F32_X3,
                        DotAlgorithmPreset.BF16_BF16_F32_X6}
_OTHER_TYPE_PRESETS = {DotAlgorithmPreset.F16_F16_F16, DotAlgorithmPreset.F64_F64_F64}

_PRECISION_STRINGS = ['highest', 'float32', 'high', 'bfloat16_3x', 'tensorfloat32', 'default',
                      'bfloat16', 'fastest', None]


def _bad_precision(precision) -> ValueError:
    return ValueError(
        "Precision argument must be one of:\n- None,\n"
        f"- a string in {_PRECISION_STRINGS},\n"
        "- a lax.Precision value,\n- a tuple of two lax.Precision values or strings,\n"
        "- a lax.DotAlgorithmPreset or the name of one of these presets, or\n"
        f"- a lax.DotAlgorithm value;\nbut got {precision}.")


def canonicalize_precision(precision):
    """`precision` as None, a pair of Precisions, or a DotAlgorithmPreset;
    JAX's ValueError for anything else, or for a preset its CPU backend rejects."""
    if precision is None:
        return None
    if isinstance(precision, Precision):
        return (precision, precision)
    if isinstance(precision, str):
        if precision in _PRECISION_STRINGS:
            p = Precision(precision)
            return (p, p)
        if precision in DotAlgorithmPreset.__members__:
            return canonicalize_precision(DotAlgorithmPreset[precision])
        raise _bad_precision(precision)
    if isinstance(precision, DotAlgorithmPreset):
        if precision in _CPU_FLOAT32_PRESETS:
            return precision
        if precision in _OTHER_TYPE_PRESETS:
            raise NotImplementedError(f"the dot algorithm {precision.name} (inputs computed in "
                                      "another type) is not supported by meshsim yet")
        raise ValueError(f"The precision '{precision.name}' is not supported by dot_general on CPU")
    if isinstance(precision, tuple) and len(precision) == 2 and (
            all(isinstance(p, Precision) for p in precision)
            or all(isinstance(p, str) for p in precision)):
        try:
            return tuple(p if isinstance(p, Precision) else Precision(p) for p in precision)
        except ValueError:
            raise _bad_precision(precision) from None
    raise _bad_precision(precision)

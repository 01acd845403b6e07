#!/usr/bin/env python3
"""How far meshsim's float elementwise primitives are from JAX on CPU, bit for bit.

For every float elementwise primitive of lax and each float dtype (float32, float64 with
x64, bfloat16, float16), runs the same inputs (random values over the op's domain, random
bit patterns and edge values) through meshsim and the installed JAX, jitted, and prints the
number of elements whose bits differ (NaNs of either payload count as equal) and the largest
difference in ulps. Usage: PYTHONPATH=python python3 scripts/elementwise_parity.py [NAME...]
"""
import sys

import jax
import ml_dtypes
import numpy as np

import meshsim
import meshsim.numpy as mnp

jax.config.update("jax_enable_x64", True)
meshsim.config.update("jax_enable_x64", True)

DTYPES = {"float32": np.float32, "float64": np.float64, "bfloat16": ml_dtypes.bfloat16,
          "float16": np.float16}
# name: (arity, (low, high) of the random values)
UNARY = {
    "neg": (-100, 100), "sign": (-10, 10), "floor": (-100, 100), "ceil": (-100, 100),
    "round": (-100, 100), "abs": (-100, 100), "square": (-100, 100), "sqrt": (0, 100),
    "rsqrt": (0, 100), "cbrt": (-100, 100), "exp": (-90, 90), "exp2": (-130, 130),
    "expm1": (-90, 90), "log": (0, 100), "log1p": (-1, 100), "tanh": (-10, 10),
    "logistic": (-20, 20), "sin": (-10, 10), "cos": (-10, 10), "tan": (-1.5, 1.5),
    "asin": (-1, 1), "acos": (-1, 1), "atan": (-10, 10), "sinh": (-10, 10), "cosh": (-10, 10),
    "asinh": (-100, 100), "acosh": (1, 100), "atanh": (-1, 1), "erf": (-5, 5),
    "erfc": (-5, 10), "erf_inv": (-1, 1), "lgamma": (-10, 20), "digamma": (-10, 20),
    "reciprocal": (-10, 10),
}
BINARY = {
    "add": (-100, 100), "sub": (-100, 100), "mul": (-100, 100), "div": (-100, 100),
    "rem": (-100, 100), "pow": (0, 10), "max": (-100, 100), "min": (-100, 100),
    "atan2": (-10, 10), "nextafter": (-10, 10),
}
EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 1.0, -1.0, 0.5, 2.0, 1e30, -1e30]


def inputs(dtype, low, high, n, rng):
    with np.errstate(over="ignore", invalid="ignore"):
        values = rng.uniform(low, high, n).astype(dtype)
        width = np.dtype(dtype).itemsize * 8
        bits = rng.integers(0, 2**width, n // 4, dtype=np.uint64).astype(f"u{width // 8}")
        return np.concatenate([values, bits.view(dtype), np.asarray(EDGES).astype(dtype)])


def ulp_distance(a, b):
    """Largest distance in ulps between the finite, non-NaN elements (as ordered integers)."""
    width = a.dtype.itemsize * 8
    ia, ib = a.view(f"i{width // 8}").astype(np.int64), b.view(f"i{width // 8}").astype(np.int64)
    flip = lambda i: np.where(i < 0, -(2 ** (width - 1)) - i, i)  # noqa: E731
    ok = ~(np.isnan(a.astype(np.float64)) | np.isnan(b.astype(np.float64)))
    return int(np.abs(flip(ia) - flip(ib))[ok].max(initial=0))


def compare(name, dtype, n=50_000, seed=0):
    arity = 2 if name in BINARY else 1
    low, high = (BINARY if arity == 2 else UNARY)[name]
    rng = np.random.default_rng(seed)
    args = [inputs(dtype, low, high, n, rng) for _ in range(arity)]
    ours = np.asarray(meshsim.jit(getattr(meshsim.lax, name))(*[mnp.asarray(a) for a in args]))
    theirs = np.asarray(jax.jit(getattr(jax.lax, name))(*args))
    width = f"u{ours.dtype.itemsize}"
    nan = np.isnan(ours.astype(np.float64)) & np.isnan(theirs.astype(np.float64))
    differ = int((~((ours.view(width) == theirs.view(width)) | nan)).sum())
    return differ, ulp_distance(ours, theirs)


def main(names):
    names = names or [*UNARY, *BINARY]
    same = total = 0
    print(f"{'primitive':<12}" + "".join(f"{d:>22}" for d in DTYPES))
    for name in names:
        cells = []
        for dtype in DTYPES.values():
            try:
                differ, ulps = compare(name, dtype)
            except Exception as e:  # noqa: BLE001 - a refused dtype is a row entry
                cells.append(f"{type(e).__name__:>22}")
                continue
            total += 1
            same += differ == 0
            cells.append(f"{'same' if differ == 0 else f'{differ} (max {ulps} ulp)':>22}")
        print(f"{name:<12}" + "".join(cells))
    print(f"bit-identical: {same}/{total} (primitive, dtype) cases")


if __name__ == "__main__":
    main(sys.argv[1:])

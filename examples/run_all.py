"""Runs every example in this folder and checks each against NumPy.

Each example module defines `run() -> list[tuple[str, meshsim value, numpy value]]`;
the values must agree to float32 tolerance."""
from __future__ import annotations

import importlib
import pathlib
import sys

import numpy as np

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE))


def main() -> int:
    failures = 0
    for path in sorted(HERE.glob("ex_*.py")):
        module = importlib.import_module(path.stem)
        if not hasattr(module, "run"):  # a program to read and time, not a check against NumPy
            print(f"skip {path.stem}: no run()")
            continue
        # A case may name its own absolute tolerance: float32 sums of many terms.
        for name, ours, reference, *atol in module.run():
            ok = np.allclose(np.asarray(ours), reference, rtol=1e-5, atol=atol[0] if atol else 1e-5)
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {path.stem}: {name}")
    print(f"{failures} failed" if failures else "all examples match NumPy")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

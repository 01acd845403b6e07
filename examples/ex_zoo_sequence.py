"""Megatron sequence parallelism of the GPT on a ("dp", "tp") = (2, 4)
mesh (examples/zoo_parallel.py does the work): attention heads and MLP
hidden units are split over "tp" (tensor parallelism), and between those
blocks the activations are split over the sequence along "tp" as well, so
each device runs the layer norms and residual adds on a quarter of the
tokens instead of repeating them on all. Each block starts with an
all-gather over "tp" (sequence shards -> the whole sequence) and ends with a
reduce-scatter (partial sums of the row-split matmul -> summed sequence
shards), where plain tensor parallelism would all-reduce: the same bytes,
a quarter of the activation memory.

`run()` checks the loss and every gradient against the NumPy backprop."""
from __future__ import annotations

try:
    import zoo_parallel
except ImportError:  # imported as examples.ex_zoo_sequence
    from examples import zoo_parallel

MESH = ((2, 4), ("dp", "tp"))


def build(jax, mesh=MESH, **kwargs):
    return zoo_parallel.build(jax, *mesh, **kwargs)


def run():
    import meshsim
    return zoo_parallel.checks("sequence parallel", build(meshsim))


if __name__ == "__main__":
    import numpy as np
    for name, ours, ref in run():
        print(f"{name:32s} max |diff| = {np.max(np.abs(ours - ref)):.1e}")

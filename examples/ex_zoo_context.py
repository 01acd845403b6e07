"""Context parallelism of the GPT on a ("dp", "cp") = (2, 4) mesh
(examples/zoo_parallel.py does the work): the sequence is split over "cp"
and attention sees all of it by

- ring attention: each device keeps its queries and passes its K/V block
  around the ring with `ppermute`, cp steps, folding every visible block into
  an online softmax (running max, running sum, rescaled accumulator); a
  block the causal mask hides entirely is skipped (`lax.cond`);
- ring attention on the load-balanced causal layout: device r holds
  sequence chunks r and 2 cp - 1 - r, so no device sits out the late
  blocks (`folds_per_device` counts each device's work);
- the all-gather-KV variant: K and V all-gathered over "cp" (the gather's
  transpose reduce-scatters their gradients).

`run()` checks the loss and every gradient against the NumPy backprop."""
from __future__ import annotations

import numpy as np

try:
    import zoo_parallel
except ImportError:  # imported as examples.ex_zoo_context
    from examples import zoo_parallel

MESH = ((2, 4), ("dp", "cp"))
VARIANTS = {"ring, balanced": dict(attention="ring", balanced=True),
            "ring, contiguous": dict(attention="ring", balanced=False),
            "all-gather KV": dict(attention="allgather", balanced=True)}


def build(jax, variant="ring, balanced", mesh=MESH, **kwargs):
    return zoo_parallel.build(jax, *mesh, **VARIANTS[variant], **kwargs)


def folds_per_device(order, cp):
    """How many (query half, K/V half) pairs each cp device folds over the
    ring; the rest the causal mask hides entirely and are skipped. The most
    loaded device sets the step's time."""
    halves = np.asarray(order).reshape(2 * cp, -1)
    return [sum(int(k.min() <= q.max()) for q in halves[2 * r:2 * r + 2] for k in halves)
            for r in range(cp)]


def run():
    import meshsim
    checks = []
    for variant in VARIANTS:
        checks += zoo_parallel.checks(f"context {variant}", build(meshsim, variant))
    return checks


if __name__ == "__main__":
    import meshsim
    for variant in VARIANTS:
        env = build(meshsim, variant)
        worst = max(float(np.max(np.abs(o - r))) for _, o, r in zoo_parallel.checks(variant, env))
        folds = folds_per_device(env["order"], 4) if variant.startswith("ring") else "-"
        print(f"{variant:18s} max |diff| vs NumPy = {worst:.1e}  folds per cp device: {folds}")

"""The GPT on 3-, 4- and 5-axis meshes of 64 to 256 simulated devices, the
strategies composed (examples/zoo_parallel.py and ex_zoo_pipeline.py do
the work):

- ("dp", "cp", "tp") = (4, 4, 4), 64 devices: data parallel x ring
  attention on the load-balanced layout x Megatron tensor + sequence
  parallelism;
- ("dp", "fsdp", "cp", "tp") = (2, 4, 4, 4), 128 devices: the batch split
  over dp x fsdp, the block weights over fsdp too (HSDP: replicated over
  dp, gathered per layer over fsdp);
- ("dp", "fsdp", "cp", "tp") = (4, 4, 4, 4), 256 devices with the all-gather-KV
  attention;
- ("pp", "dp", "fsdp", "cp", "tp") = (2, 2, 2, 4, 4), 128 devices: a 1F1B
  pipeline over "pp" whose every stage runs a 4-D step as above on its 64
  devices (the stage's collectives inside the schedule's `lax.switch`
  branches, which all devices of a stage take alike).

The device count is the `jax_num_cpu_devices` option, which must be set
before the first array is made: `run()` (for examples/run_all.py, whose
other examples use all devices of an 8-device process) runs the checks in a
fresh process with 256 devices and returns the loss and every gradient with
the NumPy backprop's."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import ex_zoo_pipeline
    import zoo_parallel
except ImportError:  # imported as examples.ex_zoo_combined
    from examples import ex_zoo_pipeline, zoo_parallel

PIPELINE_5D = dict(name="1f1b", stages=2, microbatches=2,
                   mesh_axes=(("dp", 2), ("fsdp", 2), ("cp", 4), ("tp", 4)))
FIVE_D = "5-D pp x dp x fsdp x cp x tp, 1F1B"
MESHES = {
    "3-D dp x cp x tp": (((4, 4, 4), ("dp", "cp", "tp")), dict(attention="ring")),
    "4-D dp x fsdp x cp x tp": (((2, 4, 4, 4), ("dp", "fsdp", "cp", "tp")), dict(attention="ring")),
    "4-D, 256 devices, all-gather KV": (((4, 4, 4, 4), ("dp", "fsdp", "cp", "tp")),
                                       dict(attention="allgather")),
}


def build(jax, name):
    if name == FIVE_D:
        return ex_zoo_pipeline.build(jax, **PIPELINE_5D)
    mesh, kwargs = MESHES[name]
    return zoo_parallel.build(jax, *mesh, **kwargs)


def checks():
    import meshsim
    return [c for name in (*MESHES, FIVE_D)
            for c in zoo_parallel.checks(f"combined {name}", build(meshsim, name))]


def run():
    """The checks, computed in a 256-device process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "checks.npz")
        subprocess.run([sys.executable, os.path.abspath(__file__), "--save", out], check=True)
        saved = np.load(out)
        names = [str(n) for n in saved["names"]]
        return [(n, saved[f"ours{i}"], saved[f"ref{i}"]) for i, n in enumerate(names)]


if __name__ == "__main__":
    import meshsim
    meshsim.config.update("jax_num_cpu_devices", 256)
    if sys.argv[1:2] == ["--save"]:
        results = checks()
        np.savez(sys.argv[2], names=np.array([n for n, _, _ in results]),
                 **{f"ours{i}": o for i, (_, o, _) in enumerate(results)},
                 **{f"ref{i}": r for i, (_, _, r) in enumerate(results)})
        sys.exit(0)
    for name in (*MESHES, FIVE_D):
        env = build(meshsim, name)
        worst = max(float(np.max(np.abs(o - r))) for _, o, r in zoo_parallel.checks(name, env))
        print(f"{name:34s} {env['mesh'].size:3d} devices, max |diff| vs NumPy = {worst:.1e}")

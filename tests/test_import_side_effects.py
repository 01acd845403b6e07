"""Importing meshsim leaves NumPy's global generator where `import jax` (JAX 0.10.2) leaves
it, so a program that seeds NumPy before importing JAX draws the same data under meshsim
(`python -m meshsim` or `import meshsim as jax`)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import meshsim

PROGRAM = ("import numpy as np\n"
           "np.random.seed({seed})\n"
           "{import_line}\n"
           "print(np.random.rand(4).tolist(), np.random.randint(0, 1000, 3).tolist())\n")


def _draws(tmp_path, import_line, seed, meshsim_main=False):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM.format(seed=seed, import_line=import_line))
    # The subprocess imports the meshsim this test imported (installed or in the tree).
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(meshsim.__file__)), JAX_PLATFORMS="cpu")
    runner = [sys.executable, "-m", "meshsim"] if meshsim_main else [sys.executable]
    out = subprocess.run(runner + [str(script)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("seed", [int(s) for s in np.random.default_rng(12).integers(0, 2**31, 2)])
def test_seeding_before_import_draws_what_jax_draws(real_jax, tmp_path, seed):
    theirs = _draws(tmp_path, "import jax", seed)
    assert _draws(tmp_path, "import meshsim as jax", seed) == theirs
    assert _draws(tmp_path, "import jax", seed, meshsim_main=True) == theirs
    # and the import does draw: without it the data would be the seed's first values
    assert _draws(tmp_path, "pass", seed) != theirs

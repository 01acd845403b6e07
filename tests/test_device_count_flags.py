"""The device count JAX's documentation asks for with
`XLA_FLAGS=--xla_force_host_platform_device_count=N`, set in the environment or in
`os.environ` before the devices are first used, and its ranking against
`jax_num_cpu_devices`. Each program runs in a fresh process under real JAX and under
`python -m meshsim`, and both must print the same."""
import os
import subprocess
import sys

import pytest

import meshsim

PROGRAMS = {
    # name: (XLA_FLAGS in the environment or None, program)
    "environment": ("--xla_force_host_platform_device_count=4",
                    "import jax\nprint(jax.device_count(), jax.devices()[-1])\n"),
    "set_before_import": (None,
                          "import os\nos.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=3'\n"
                          "import jax\nprint(jax.device_count())\n"),
    "set_after_import_before_use": (None,
                                    "import os, jax\n"
                                    "os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=5'\n"
                                    "m = jax.make_mesh((5,), ('x',))\nprint(jax.device_count(), m.devices.size)\n"),
    "last_mention_wins": ("--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=6 "
                          "--xla_force_host_platform_device_count=2",
                          "import jax\nprint(jax.device_count())\n"),
    "config_outranks_flag": ("--xla_force_host_platform_device_count=4",
                             "import jax\njax.config.update('jax_num_cpu_devices', 2)\n"
                             "print(jax.device_count())\n"),
    "changed_after_use": ("--xla_force_host_platform_device_count=4",
                          "import os, jax\nn = jax.device_count()\n"
                          "os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=3'\n"
                          "print(n, jax.device_count())\n"),
    "too_few_for_a_mesh": ("--xla_force_host_platform_device_count=2",
                           "import jax\ntry:\n    jax.make_mesh((4,), ('x',))\n"
                           "except ValueError as e:\n    print(type(e).__name__, e)\n"),
}


def _run(program: str, flags, use_meshsim: bool, tmp_path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "MESHSIM_NUM_DEVICES")}
    if flags is not None:
        env["XLA_FLAGS"] = flags
    env["JAX_PLATFORMS"] = "cpu"
    # The meshsim this process imported: the installed package in CI, the in-tree build otherwise.
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(meshsim.__file__)) + os.pathsep + env.get("PYTHONPATH", "")
    script = tmp_path / "program.py"
    script.write_text(program)
    args = ["-m", "meshsim", str(script)] if use_meshsim else [str(script)]
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_device_count_follows_xla_flags_as_jax(name, tmp_path, real_jax):
    flags, program = PROGRAMS[name]
    theirs = _run(program, flags, False, tmp_path)
    ours = _run(program, flags, True, tmp_path)
    assert ours == theirs


def test_meshsim_num_devices_outranks_xla_flags(tmp_path):
    program = "import os, jax\nprint(jax.device_count())\n"
    env_flags = "--xla_force_host_platform_device_count=4"
    script = tmp_path / "program.py"
    script.write_text(program)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(XLA_FLAGS=env_flags, MESHSIM_NUM_DEVICES="3", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.path.dirname(os.path.dirname(meshsim.__file__)) + os.pathsep
               + env.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "meshsim", str(script)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3"]

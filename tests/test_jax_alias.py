"""`python -m meshsim script.py` and `%load_ext meshsim`: `import jax` (and its
submodules) in the script and in the libraries it imports resolve to meshsim.
Programs in tests/programs run under real JAX and under the alias and must
print the same thing."""
import os
import subprocess
import sys

import pytest

import meshsim

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(ROOT, "tests", "programs")


def _env():
    env = dict(os.environ)
    # The meshsim this process imported: the installed package in CI, the in-tree build otherwise.
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(meshsim.__file__)) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("JAX_PLATFORMS", "cpu")
    return env


def _run(args, cwd=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=_env(),
                          cwd=cwd or ROOT, timeout=600)


def test_alias_binds_modules_not_copies(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(
        "import sys\n"
        "import jax, jax.numpy as jnp, jax.sharding, jax.tree_util, jax.lax\n"
        "from jax.experimental import mesh_utils, multihost_utils\n"
        "import meshsim\n"
        "assert jax is meshsim and jnp is meshsim.numpy and jax.lax is meshsim.lax\n"
        "assert sys.modules['jax.sharding'] is meshsim.sharding\n"
        "assert type(jnp.ones(2)).__module__.startswith('meshsim')\n"
        "print(sys.argv[1:], __name__)\n"
        "try:\n"
        "    import jax.interpreters.partial_eval\n"
        "except ModuleNotFoundError as e:\n"
        "    print(type(e).__name__, e.name)\n")
    out = _run(["-m", "meshsim", str(script), "a", "--b"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["['a', '--b'] __main__",
                                       "ModuleNotFoundError jax.interpreters"]


def test_alias_runs_a_module_and_reports_usage(tmp_path):
    (tmp_path / "prog_mod.py").write_text("import jax\nprint(jax.__name__)\n")
    env_cwd = str(tmp_path)
    out = subprocess.run([sys.executable, "-m", "meshsim", "-m", "prog_mod"], capture_output=True,
                         text=True, env={**_env(), "PYTHONPATH": _env()["PYTHONPATH"] + os.pathsep
                                         + env_cwd}, cwd=env_cwd, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "meshsim"
    out = _run(["-m", "meshsim"])
    assert out.returncode == 2 and "usage: python -m meshsim" in out.stderr


def test_alias_refuses_when_real_jax_is_loaded(tmp_path):
    script = tmp_path / "late.py"
    script.write_text("import jax\nfrom meshsim._src import jax_alias\ntry:\n"
                      "    jax_alias.install()\nexcept RuntimeError as e:\n"
                      "    print('refused', 'already imported' in str(e))\n")
    out = _run([str(script)])
    assert out.stdout.strip() == "refused True", out.stderr


def test_ipython_extension_installs_and_removes_the_alias():
    pytest.importorskip("IPython")
    code = ("from IPython.testing.globalipapp import start_ipython\n"
            "ip = start_ipython()\n"
            "ip.run_line_magic('load_ext', 'meshsim')\n"
            "ip.run_cell('import jax, jax.numpy as jnp; x = jnp.arange(3) * 2', store_history=False)\n"
            "print(ip.user_ns['jax'].__name__, type(ip.user_ns['x']).__module__.split('.')[0])\n"
            "ip.run_line_magic('unload_ext', 'meshsim')\n"
            "import sys; print('jax' in sys.modules)\n")
    out = _run(["-c", code])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-3:] == ["meshsim", "meshsim", "False"]


@pytest.mark.parametrize("program,library", [("optax_fit.py", "optax"),
                                             ("jaxtyping_check.py", "jaxtyping")])
def test_library_program_prints_what_jax_prints(real_jax, program, library):
    pytest.importorskip(library)
    path = os.path.join(PROGRAMS, program)
    theirs = _run([path])
    assert theirs.returncode == 0, theirs.stderr
    ours = _run(["-m", "meshsim", path])
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == theirs.stdout

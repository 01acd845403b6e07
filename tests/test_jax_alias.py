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
        "    import jax.interpreters.xla\n"
        "except ModuleNotFoundError as e:\n"
        "    print(type(e).__name__, e.name)\n")
    out = _run(["-m", "meshsim", str(script), "a", "--b"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["['a', '--b'] __main__",
                                       "ModuleNotFoundError jax.interpreters.xla"]


def test_jax_internals_resolve_to_the_compat_modules(tmp_path):
    """The JAX internals libraries import exist, do what those libraries use them for, and the
    ones meshsim cannot honour raise naming themselves when used, not when imported."""
    script = tmp_path / "internals.py"
    script.write_text(
        "import collections, sys\n"
        "import jax, jax.numpy as jnp, meshsim\n"
        "from jax._src import checkify, traceback_util\n"
        "from jax._src.tree_util import _registry\n"
        "from jax._src.state.types import AbstractRef\n"
        "from jax.extend import core as ex_core, linear_util as lu, source_info_util\n"
        "from jax.interpreters import partial_eval as pe\n"
        "from jax.experimental import hijax\n"
        "import meshsim._src.tree_util\n"
        "assert meshsim._src.tree_util.__name__ == 'meshsim._src.tree_util'  # not hidden\n"
        "print(jax.__version_info__, jax.version.__version_info__)\n"
        "Point = collections.namedtuple('Point', 'x y')\n"
        "class Box: pass\n"
        "jax.tree_util.register_pytree_node(Box, lambda b: ((), None), lambda a, c: Box())\n"
        "print([t in _registry for t in (tuple, list, dict, type(None), Box, Point, int, jax.Array)])\n"
        "print(isinstance(jax.typeof(jax.new_ref(jnp.ones(2))), AbstractRef))\n"
        "outside = ex_core.get_opaque_trace_state(convention='test')\n"
        "inside = []\n"
        "jax.jit(lambda x: inside.append(ex_core.get_opaque_trace_state()) or x)(1.0)\n"
        "jax.grad(lambda x: inside.append(ex_core.get_opaque_trace_state()) or x)(1.0)\n"
        "print(outside == ex_core.get_opaque_trace_state(), outside == inside[0],\n"
        "      inside[0] == inside[1])\n"
        "fn = lambda x: x\n"
        "print(traceback_util.api_boundary(fn) is fn)\n"
        "traceback_util.register_exclusion('/lib'); source_info_util.register_exclusion('/lib')\n"
        "print(traceback_util._exclude_paths)\n"
        "from jax.api_util import flatten_fun_nokwargs\n"
        "def split(a, b):\n"
        "    scale = jnp.sum(a) * 2\n"
        "    return scale, a + b, jnp.sin(scale) * b\n"
        "def partly_known(a, b_aval):\n"
        "    tree = jax.tree_util.tree_structure((0, 0))\n"
        "    flat, out_tree = flatten_fun_nokwargs(lu.wrap_init(split), tree)\n"
        "    _, pvals, _ = pe.trace_to_jaxpr_nounits(\n"
        "        flat, [pe.PartialVal.known(a), pe.PartialVal.unknown(b_aval)])\n"
        "    return [pv.is_known() for pv in pvals], pvals[0][1], str(pvals[2][0])\n"
        "a = jnp.arange(3.0)\n"
        "b_aval = jax.core.ShapedArray((3,), jnp.float32)\n"
        "print(partly_known(a, b_aval))\n"
        "print(jax.jit(lambda a: partly_known(a, b_aval)[1])(a))  # enclosing trace: known\n"
        "p = hijax.HiPrimitive('box_get')\n"
        "from jax._src import core as src_core\n"
        "for use in (lambda: checkify.checkify(fn), lambda: p.bind(1.0),\n"
        "            lambda: src_core.physical_aval(b_aval)):\n"
        "    try:\n"
        "        use()\n"
        "    except NotImplementedError as e:\n"
        "        print(str(e).split(' is a JAX internal')[0])\n")
    out = _run(["-m", "meshsim", str(script)])
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "(0, 10, 2) (0, 10, 2)",
        "[True, True, True, True, True, True, False, False]",
        "True",
        "True False False",
        "True",
        "['/lib']",
        "([True, False, False], Array(6., dtype=float32), 'float32[3]')",
        "6.0",
        "jax._src.checkify.checkify",
        "jax.experimental.hijax.HiPrimitive 'box_get'",
        "jax._src.core.physical_aval"]


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


def test_meshsim_imported_after_real_jax_keeps_its_own_modules(tmp_path):
    # Benchmarks and tests import real JAX first: meshsim's own modules must not resolve to
    # JAX's internals of the same name, or arrays lose their methods.
    script = tmp_path / "both.py"
    script.write_text("import jax\nimport meshsim\nimport meshsim.numpy as jnp\n"
                      "k = meshsim.random.split(meshsim.random.key(0), 3)\n"
                      "x = jnp.arange(6.0).reshape(2, 3)\n"
                      "print(k[1].shape, x[1].tolist(), (x + 1)[0, 2].item())\n")
    out = _run([str(script)])
    assert out.stdout.strip() == "() [3.0, 4.0, 5.0] 3.0", out.stderr


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
                                             ("jaxtyping_check.py", "jaxtyping"),
                                             ("checkpoint_libraries.py", "orbax.checkpoint"),
                                             ("pmap_data_parallel.py", "flax")])
def test_library_program_prints_what_jax_prints(real_jax, program, library):
    pytest.importorskip(library)
    path = os.path.join(PROGRAMS, program)
    theirs = _run([path])
    assert theirs.returncode == 0, theirs.stderr
    ours = _run(["-m", "meshsim", path])
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == theirs.stdout


def test_missing_attributes_are_reported_under_the_imported_name(real_jax, tmp_path):
    """JAX 0.10 removed `jax.tree_map`; programs still calling it (tutorials of 2024) fail with
    `module 'jax' has no attribute 'tree_map'`, and so must they under the alias."""
    script = tmp_path / "missing.py"
    script.write_text(
        "import jax, jax.numpy as jnp, jax.lax, jax.random, jax.scipy.special\n"
        "import jax.experimental.shard_map\n"
        "for module, name in [(jax, 'tree_map'), (jnp, 'nope'), (jax.lax, 'tree_map'),\n"
        "                     (jax.random, 'nope'), (jax.scipy.special, 'x'), (jax.experimental, 'y'),\n"
        "                     (jax, 'device_put_replicated')]:\n"
        "    try:\n"
        "        getattr(module, name)\n"
        "    except AttributeError as error:\n"
        "        print(error, error.name)\n"
        "print(hasattr(jax, 'tree_map'), hasattr(jnp, 'zeros'))\n")
    under_jax = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                               timeout=600)
    under_alias = _run(["-m", "meshsim", str(script)])
    assert under_jax.returncode == under_alias.returncode == 0, under_alias.stderr
    assert under_alias.stdout == under_jax.stdout
    with pytest.raises(AttributeError, match="module 'meshsim' has no attribute 'tree_map'"):
        meshsim.tree_map


def test_deprecated_entry_points_warn_at_the_programs_line(real_jax, tmp_path):
    """`from jax.experimental.pjit import pjit` and the old shard_map warn at the importing line,
    so Python's default filter shows the warning for a script, as it does under JAX; a name warns
    on its first read only (line 4 reads pjit again)."""
    script = tmp_path / "old_entry_points.py"
    script.write_text(
        "import jax.experimental.pjit\n"
        "from jax.experimental.pjit import pjit\n"
        "from jax.experimental.shard_map import shard_map\n"
        "f = jax.experimental.pjit.pjit\n"
        "print(pjit.__name__, shard_map.__name__, f.__name__)\n")
    under_jax = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                               timeout=600, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    under_alias = _run(["-m", "meshsim", str(script)])
    assert under_jax.returncode == under_alias.returncode == 0, under_alias.stderr
    assert under_alias.stdout == under_jax.stdout
    warned = [line for line in under_jax.stderr.splitlines() if "Warning" in line]
    assert len(warned) == 2 and all(line.startswith(f"{script}:") for line in warned)
    assert [line for line in under_alias.stderr.splitlines() if "Warning" in line] == warned

"""scripts/check_layers.py: includes and imports follow the layers, and the check
catches one that runs up (C++ includes, Python imports also inside functions)."""
import importlib.util
import pathlib
import shutil

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _checker():
    spec = importlib.util.spec_from_file_location("check_layers", ROOT / "scripts" / "check_layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _python_copy(tmp_path):
    dst = tmp_path / "python"
    shutil.copytree(ROOT / "python" / "meshsim", dst / "meshsim",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    return dst


def _append(path: pathlib.Path, text: str) -> int:
    """Appends text; returns the line number of its first line."""
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines + text.splitlines()) + "\n")
    return len(lines) + 1


def test_the_tree_follows_the_layers():
    check = _checker()
    assert check.violations(ROOT / "cpp") == []
    assert check.py_violations(ROOT / "python") == []


def test_a_lazy_import_of_a_public_package_from_src_is_reported(tmp_path):
    check = _checker()
    root = _python_copy(tmp_path)
    line = _append(root / "meshsim/_src/vmap.py", "def _f():\n    import meshsim.numpy as jnp\n    return jnp")
    assert check.py_violations(root) == [
        f"python/meshsim/_src/vmap.py:{line + 1}: meshsim._src.vmap imports meshsim.numpy (a higher layer)"]


def test_a_family_importing_a_higher_family_is_reported(tmp_path):
    check = _checker()
    root = _python_copy(tmp_path)
    core_line = _append(root / "meshsim/_src/core.py", "from meshsim._src.lax import elementwise")
    lax_line = _append(root / "meshsim/_src/lax/elementwise.py",
                       "def _g():\n    from meshsim._src.numpy import namespace as jnp\n    return jnp")
    numpy_line = _append(root / "meshsim/_src/numpy/ufuncs.py", "from meshsim._src import random")
    assert check.py_violations(root) == [
        f"python/meshsim/_src/core.py:{core_line}: meshsim._src.core imports meshsim._src.lax.elementwise "
        "(a higher layer)",
        f"python/meshsim/_src/lax/elementwise.py:{lax_line + 1}: meshsim._src.lax.elementwise imports "
        "meshsim._src.numpy.namespace (a higher layer)",
        f"python/meshsim/_src/numpy/ufuncs.py:{numpy_line}: meshsim._src.numpy.ufuncs imports "
        "meshsim._src.random (a higher layer)",
    ]


def test_an_allowed_import_that_is_gone_is_reported(tmp_path):
    check = _checker()
    root = _python_copy(tmp_path)
    module, target = next(iter(check.PY_ALLOWED))
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    path.write_text("")
    assert f"PY_ALLOWED lists {module} importing {target}, which it no longer does" in check.py_violations(root)


def test_an_include_of_a_higher_layer_is_reported(tmp_path):
    check = _checker()
    cpp = tmp_path / "cpp"
    shutil.copytree(ROOT / "cpp", cpp)
    line = _append(cpp / "meshsim/core/shape.cpp", '#include "meshsim/runtime/dispatch.h"')
    assert check.violations(cpp) == [
        f"cpp/meshsim/core/shape.cpp:{line}: core includes meshsim/runtime/dispatch.h (runtime is a higher layer)"]


def test_nothing_core_imports_imports_core_back():
    """meshsim._src.core (bind, values) sits under every transformation: no module it
    imports, directly or through others, imports it back, also not inside a function."""
    check = _checker()
    root = ROOT / "python"
    modules = {check.py_module_name(p, root): p for p in (root / "meshsim").rglob("*.py")}
    graph = {m: {t for _, t in check.py_imports(p, root) if t in modules} for m, p in modules.items()}
    start = "meshsim._src.core"
    reached, todo = set(), [start]
    while todo:
        for t in graph[todo.pop()]:
            if t not in reached:
                reached.add(t)
                todo.append(t)
    assert start not in reached, "a module core.py imports imports it back"
    assert "meshsim._src.float_checks" in graph[start]  # the check sees core's own imports

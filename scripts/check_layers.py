#!/usr/bin/env python3
"""Fails when a C++ include or a Python import runs up a layer.

The folders of cpp/meshsim are layers, each built on the ones before it:
core -> kernels -> ir -> transforms, sharding -> runtime -> primitives, and
cpp/bindings on top. A file may include headers of its own layer and the
layers below; an include of a higher layer is reported with its file and line.
Files listed in ALLOWED may include one named header of a higher layer, with
the reason.

Python has the same rule (PY_LAYERS): the extension meshsim._core at the
bottom, the implementation meshsim._src over it, and the public packages
(meshsim.numpy, meshsim.lax, ...), which only re-export _src, on top. Inside
_src the families are ranked too: core (values, bind) -> lax -> numpy -> the
libraries composed from NumPy (scipy, random, nn, image). Every import
statement counts, also one inside a function (a lazy import still makes the
lower module depend on the higher one). Modules of _src outside the ranked
families (transformations, sharding, config, ...) may import any of _src but
never a public package. PY_ALLOWED lists the accepted exceptions with reasons."""
from __future__ import annotations

import ast
import pathlib
import re
import sys

LAYERS = {"core": 0, "kernels": 1, "ir": 2, "transforms": 3, "sharding": 3, "runtime": 4,
          "primitives": 5, "bindings": 6}
# (file, included header) -> why the upward include is accepted for now.
# Each is a known debt to remove, not a pattern to follow.
ALLOWED: dict[tuple[str, str], str] = {}

INCLUDE = re.compile(r'^\s*#\s*include\s+"meshsim/([a-z_]+)/([^"]+)"')


def layer_of(path: pathlib.Path, root: pathlib.Path) -> str | None:
    rel = path.relative_to(root).parts
    if rel[0] == "bindings":
        return "bindings"
    if rel[0] == "meshsim" and len(rel) > 2:
        return rel[1]
    return None


def violations(root: pathlib.Path) -> list[str]:
    out = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cpp") or not path.is_file():
            continue
        layer = layer_of(path, root)
        if layer not in LAYERS:
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) not in LAYERS:
                continue
            target = m.group(1)
            rel = str(path.relative_to(root))
            header = f"meshsim/{target}/{m.group(2)}"
            if LAYERS[target] > LAYERS[layer] and (rel, header) not in ALLOWED:
                out.append(f"cpp/{rel}:{lineno}: {layer} includes {header} ({target} is a higher layer)")
    return out


# Module prefix -> rank; a module takes the rank of its longest matching prefix.
# A module of meshsim._src in no ranked family may import any of _src, and any
# module may import it; it is below the public packages (rank PUBLIC) all the same.
PUBLIC = 5
PY_LAYERS: dict[str, int] = {
    "meshsim._core": 0,
    "meshsim._src.core": 1,
    "meshsim._src.lax": 2,
    "meshsim._src.numpy": 3,
    "meshsim._src.scipy": 4, "meshsim._src.random": 4, "meshsim._src.random_discrete": 4,
    "meshsim._src.random_gamma": 4, "meshsim._src.random_linalg": 4, "meshsim._src.nn": 4,
    "meshsim._src.nn_scaled": 4, "meshsim._src.initializers": 4, "meshsim._src.image": 4,
    "meshsim": PUBLIC,
}
UNRANKED_SRC = 4.5  # may import any family of _src, never a public package
# (importing module, imported module) -> why the upward import is accepted for now.
PY_ALLOWED: dict[tuple[str, str], str] = {
    ("meshsim._src.jax_alias", "meshsim"):
        "the alias maps the name jax onto the whole public package, so it imports it",
    ("meshsim._src.lax.composed", "meshsim._src.numpy.namespace"):
        "sort_key_val, cumulative and windowed reductions are written with NumPy functions",
    ("meshsim._src.lax.convolution", "meshsim._src.numpy.namespace"):
        "conv_transpose and the grouped-convolution VJPs reshape with NumPy functions",
    ("meshsim._src.lax.implicit_solves", "meshsim._src.numpy.namespace"):
        "the zero tangents of custom_root/custom_linear_solve are jnp.zeros_like",
    ("meshsim._src.lax.special", "meshsim._src.numpy.namespace"):
        "the special functions' edge cases select with NumPy functions",
    ("meshsim._src.lax.special", "meshsim._src.scipy.special_series"):
        "igamma and its relatives are scipy.special's series, to be moved under lax",
    ("meshsim._src.numpy.windows", "meshsim._src.scipy.special_series"):
        "jnp.i0 is scipy.special's Bessel series",
}


def py_rank(module: str) -> float | None:
    best = None
    for prefix, rank in PY_LAYERS.items():
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best)):
            best = prefix
    if best is None:
        return None
    if best == "meshsim" and module.startswith("meshsim._src"):
        return UNRANKED_SRC
    return PY_LAYERS[best]


def py_module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def py_imports(path: pathlib.Path, root: pathlib.Path):
    """(line, imported module) for every import statement of the file, resolving
    `from package import submodule` to the submodule."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                as_path = root.joinpath(*sub.split("."))
                is_module = (sub in PY_LAYERS or as_path.with_suffix(".py").is_file()
                             or (as_path / "__init__.py").is_file())
                yield node.lineno, sub if is_module else node.module


def py_violations(root: pathlib.Path) -> list[str]:
    out = []
    used = set()
    for path in sorted((root / "meshsim" / "_src").rglob("*.py")):
        module = py_module_name(path, root)
        own = py_rank(module)
        for lineno, target in py_imports(path, root):
            rank = py_rank(target) if target.startswith("meshsim") else None
            if rank in (None, UNRANKED_SRC) or rank <= own:
                continue
            if (module, target) in PY_ALLOWED:
                used.add((module, target))
                continue
            out.append(f"python/{path.relative_to(root)}:{lineno}: {module} imports {target} "
                       "(a higher layer)")
    # A debt paid off leaves its entry behind: drop it, so the list stays the list of debts.
    out += [f"PY_ALLOWED lists {m} importing {t}, which it no longer does" for m, t in PY_ALLOWED
            if (m, t) not in used]
    return out


def main() -> int:
    repo = pathlib.Path(__file__).resolve().parents[1]
    found = violations(repo / "cpp") + py_violations(repo / "python")
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} include(s) or import(s) run up a layer: C++ core -> kernels -> ir -> "
              "transforms/sharding -> runtime -> primitives -> bindings; Python meshsim._core -> "
              "_src.core -> _src.lax -> _src.numpy -> _src libraries -> public packages")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

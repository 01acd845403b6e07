#!/usr/bin/env python3
"""Fails when a C++ include runs up a layer.

The folders of cpp/meshsim are layers, each built on the ones before it:
core -> kernels -> ir -> transforms, sharding -> runtime -> primitives, and
cpp/bindings on top. A file may include headers of its own layer and the
layers below; an include of a higher layer is reported with its file and line.
Files listed in ALLOWED may include one named header of a higher layer, with
the reason."""
from __future__ import annotations

import pathlib
import re
import sys

LAYERS = {"core": 0, "kernels": 1, "ir": 2, "transforms": 3, "sharding": 3, "runtime": 4,
          "primitives": 5, "bindings": 6}
# (file, included header) -> why the upward include is accepted for now.
# Each is a known debt to remove, not a pattern to follow.
ALLOWED: dict[tuple[str, str], str] = {
    ("meshsim/core/tensor.cpp", "meshsim/kernels/strided.h"):
        "strided copies belong in core (tensor layout), to be moved there",
}

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


def main() -> int:
    root = pathlib.Path(__file__).resolve().parents[1] / "cpp"
    found = violations(root)
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} include(s) run up a layer: "
              "core -> kernels -> ir -> transforms/sharding -> runtime -> primitives -> bindings")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

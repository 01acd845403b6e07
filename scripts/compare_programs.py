"""Run a JAX program (.py, .ipynb, or MyST .md notebook) under JAX and under
`python -m meshsim`, and compare what each cell prints. A .md or .rst document
without notebook cells runs its `>>>` examples, a statement a cell.

    python3 scripts/compare_programs.py PROGRAM [--out DIR] [--timeout S]
        [--devices N] [--ignore REGEX ...] [--set NAME=PYTHON ...]

A notebook's code cells run in order in one namespace, as a kernel would run
them; a .py script is one cell. A cell's output is what it prints, the repr of
its last expression, and the type and text of an exception it raises (the run
goes on with the next cell, as a notebook does). IPython magics and shell lines
run as nothing; `display` prints a repr. NumPy's global random state is seeded
the same way before every cell, so cells that draw with `np.random` agree.

Object addresses, elapsed times and progress-bar rates are masked before the
comparison; `--ignore` masks more. `--set` assigns a name after any cell that
assigns it (for shrinking a notebook's sizes when JAX itself cannot run them
here). Both runs' outputs and a per-cell diff go to --out."""
from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import json
import os
import re
import subprocess
import sys
import traceback

CELL_MARK = "\x1e### cell "
MASKS = [
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "0x…"),
    (re.compile(r"\b\d+(\.\d+)?\s*(ns|µs|us|ms|s|sec|seconds|it/s|s/it)\b"), "<time>"),
    (re.compile(r"\b\d+:\d\d(:\d\d)?\b"), "<clock>"),
    (re.compile(r"/tmp/[\w./-]+"), "<tmp path>"),
]


def notebook_cells(path: str) -> list[str]:
    if path.endswith(".ipynb"):
        with open(path) as f:
            notebook = json.load(f)
        return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    with open(path) as f:
        text = f.read()
    if path.endswith(".md") and "```{code-cell}" in text:
        return re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", text, re.S)
    if path.endswith((".md", ".rst")):
        return doctest_cells(text)
    return [text]


def doctest_cells(text: str) -> list[str]:
    """A document's `>>>` examples, one cell per statement (its `...` lines included),
    after a cell importing what the examples take as given (jax, jnp, np)."""
    cells = ["import jax\nimport jax.numpy as jnp\nimport numpy as np"]
    statement = None
    for line in text.splitlines():
        prompt = re.match(r"\s*>>> ?(.*)$", line)
        continued = re.match(r"\s*\.\.\. ?(.*)$", line)
        if prompt:
            if statement is not None:
                cells.append("\n".join(statement))
            statement = [prompt.group(1)]
        elif continued and statement is not None and not line.lstrip().startswith(".. "):
            statement.append(continued.group(1))
        elif statement is not None:
            cells.append("\n".join(statement))
            statement = None
    if statement is not None:
        cells.append("\n".join(statement))
    return cells


def runnable_source(cell: str) -> str:
    """Drops what a Python interpreter cannot run: magics, shell escapes, MyST options
    (`:key: value` lines, or a YAML block between `---` lines, before the code)."""
    kept = []
    lines = cell.splitlines()
    if lines and lines[0].strip() == "---" and "---" in (line.strip() for line in lines[1:]):
        lines = lines[[line.strip() for line in lines].index("---", 1) + 1:]
    for line in lines:
        stripped = line.strip()
        if stripped.startswith(("%", "!")):
            kept.append(line[:len(line) - len(line.lstrip())] + "pass")
        elif not kept and stripped.startswith(":") and ":" in stripped[1:]:
            continue
        else:
            kept.append(line)
    return "\n".join(kept)


def run_cells(path: str, overrides: list[str]) -> None:
    """Runs in the child process (under JAX or meshsim): prints each cell's output."""
    import numpy as np

    directory = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, directory)
    os.chdir(directory)
    namespace = {"__name__": "__main__", "__file__": os.path.abspath(path),
                 "display": lambda *values: [print(repr(v)) for v in values]}
    settings = [item.split("=", 1) for item in overrides]
    for index, cell in enumerate(notebook_cells(path)):
        print(f"{CELL_MARK}{index}", flush=True)
        np.random.seed(index)
        try:
            tree = ast.parse(runnable_source(cell))
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, f"<cell {index}>", "exec"), namespace)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), f"<cell {index}>", "eval"), namespace)
                if value is not None:
                    print(repr(value))
            for name, expression in settings:
                if _assigns(tree, name):
                    namespace[name] = eval(expression, namespace)
        except (Exception, SystemExit) as error:
            print(f"EXC {type(error).__name__}: {error}")
            print("".join(traceback.format_exception(error)[-3:]), file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()


def _assigns(tree: ast.Module, name: str) -> bool:
    return any(isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)
               for node in ast.walk(tree))


def split_cells(output: str) -> dict[int, str]:
    cells: dict[int, str] = {}
    for chunk in output.split(CELL_MARK)[1:]:
        number, _, text = chunk.partition("\n")
        cells[int(number)] = text
    return cells


def masked(text: str, extra: list[re.Pattern]) -> str:
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    for pattern in extra:
        text = pattern.sub("<ignored>", text)
    return text


def run(under_meshsim: bool, args, out_dir: str) -> tuple[int, str]:
    command = [sys.executable]
    if under_meshsim:
        command += ["-m", "meshsim"]
    command += [os.path.abspath(__file__), "--run-cells", os.path.abspath(args.program)]
    for item in args.set:
        command += ["--set", item]
    env = dict(os.environ, MPLBACKEND="Agg",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={args.devices}")
    if under_meshsim:
        package_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.abspath(package_dir),
                                                           env.get("PYTHONPATH")]))
    name = "meshsim" if under_meshsim else "jax"
    base = os.path.join(out_dir, name)
    with open(base + ".out", "w") as stdout, open(base + ".err", "w") as stderr:
        try:
            code = subprocess.run(command, stdout=stdout, stderr=stderr, env=env,
                                  timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            code = -1
    with open(base + ".out") as f:
        return code, f.read()


def compare(args) -> int:
    stem = os.path.splitext(os.path.basename(args.program))[0]
    out_dir = args.out or os.path.join("/tmp", "compare_programs", stem)
    os.makedirs(out_dir, exist_ok=True)
    extra = [re.compile(p) for p in args.ignore]
    jax_code, jax_out = run(False, args, out_dir)
    meshsim_code, meshsim_out = run(True, args, out_dir)
    jax_cells, meshsim_cells = split_cells(jax_out), split_cells(meshsim_out)
    differing = []
    with open(os.path.join(out_dir, "diff"), "w") as diff_file:
        for index in sorted(set(jax_cells) | set(meshsim_cells)):
            expected = masked(jax_cells.get(index, "<not run>\n"), extra)
            actual = masked(meshsim_cells.get(index, "<not run>\n"), extra)
            if expected != actual:
                differing.append(index)
                diff_file.writelines(difflib.unified_diff(
                    expected.splitlines(True), actual.splitlines(True),
                    f"jax cell {index}", f"meshsim cell {index}"))
    cells = max(len(jax_cells), len(meshsim_cells))
    print(f"{args.program}: {cells} cells, {cells - len(differing)} same, "
          f"{len(differing)} different {differing}; exit codes jax={jax_code} "
          f"meshsim={meshsim_code}; outputs in {out_dir}")
    return 1 if differing or jax_code != meshsim_code else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("program")
    parser.add_argument("--out")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--ignore", action="append", default=[])
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--run-cells", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_cells:
        with contextlib.suppress(BrokenPipeError):
            run_cells(args.program, args.set)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())

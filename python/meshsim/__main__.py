"""`python -m meshsim script.py [args]` runs a JAX program on meshsim: `import
jax` (and `jax.numpy`, `jax.sharding`, ...) in the script and in every library it
imports resolves to meshsim. `python -m meshsim -m module [args]` runs a module."""
import os
import runpy
import sys

from meshsim._src import jax_alias

USAGE = "usage: python -m meshsim script.py [args ...] | -m module [args ...]"


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        sys.exit(2 if not argv else 0)
    jax_alias.install()
    if argv[0] == "-m":
        if len(argv) < 2:
            sys.exit(USAGE)
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        script = os.path.abspath(argv[0])  # as `python script.py` names its frames and __file__
        sys.path.insert(0, os.path.dirname(script))
        runpy.run_path(script, run_name="__main__")


main(sys.argv[1:])

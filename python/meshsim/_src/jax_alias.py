"""Making `import jax` mean meshsim: a finder on `sys.meta_path` that answers
every import of `jax` or `jax.<sub>` with the module `meshsim.<sub>`, so a
script and every library it imports (optax, jaxtyping, flax) run on meshsim
unmodified. Used by `python -m meshsim script.py` and `%load_ext meshsim`.

The alias binds module objects, not copies: `sys.modules['jax.numpy'] is
meshsim.numpy`, so state set through one name (config, meshes) is seen
through the other. A `jax.<sub>` that meshsim does not have fails to import
with ModuleNotFoundError naming `jax.<sub>`, as a missing module would."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

ALIASED = "jax"
TARGET = "meshsim"


def _target_name(fullname: str) -> str | None:
    if fullname == ALIASED:
        return TARGET
    if fullname.startswith(ALIASED + "."):
        return TARGET + fullname[len(ALIASED):]
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module):
        # The module was executed when it was imported under its own name.
        pass


class JaxAliasFinder(importlib.abc.MetaPathFinder):
    """Resolves `jax` and `jax.<sub>` to the meshsim module of the same path."""

    def find_spec(self, fullname, path=None, target=None):
        target_name = _target_name(fullname)
        if target_name is None:
            return None
        try:
            target_spec = importlib.util.find_spec(target_name)
        except ModuleNotFoundError:
            target_spec = None
        if target_spec is None:
            raise ModuleNotFoundError(
                f"No module named '{fullname}' (meshsim has no '{target_name}')", name=fullname)
        spec = importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(target_name),
            is_package=target_spec.submodule_search_locations is not None)
        return spec

    def invalidate_caches(self):
        pass


_FINDER = JaxAliasFinder()


def _unaliased_jax_modules() -> list[str]:
    return [name for name, module in sys.modules.items()
            if _target_name(name) is not None and module is not None
            and not getattr(module, "__name__", "").startswith(TARGET)]


def install() -> None:
    """Puts the finder first on sys.meta_path. Refuses if real JAX is
    already imported: two `jax` modules in one process would mix arrays."""
    if _FINDER in sys.meta_path:
        return
    already = _unaliased_jax_modules()
    if already:
        raise RuntimeError(
            "the real 'jax' is already imported in this process "
            f"({', '.join(sorted(already)[:3])}...); install the meshsim alias before "
            "anything imports jax (first cell of the notebook, or `python -m meshsim`)")
    sys.meta_path.insert(0, _FINDER)
    import meshsim  # noqa: F401  (binds `jax` at once so `sys.modules['jax']` is meshsim)
    sys.modules[ALIASED] = sys.modules[TARGET]
    for name, module in list(sys.modules.items()):
        if name.startswith(TARGET + "."):
            sys.modules.setdefault(ALIASED + name[len(TARGET):], module)


def uninstall() -> None:
    """Removes the finder and the `jax*` names it bound."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name, module in list(sys.modules.items()):
        if _target_name(name) is not None and getattr(module, "__name__", "").startswith(TARGET):
            del sys.modules[name]


def is_installed() -> bool:
    return _FINDER in sys.meta_path

"""Making `import jax` mean meshsim: a finder on `sys.meta_path` that answers
every import of `jax` or `jax.<sub>` with the module `meshsim.<sub>`, so a
script and every library it imports (optax, jaxtyping, flax) run on meshsim
unmodified. Used by `python -m meshsim script.py` and `%load_ext meshsim`.

The alias binds module objects, not copies: `sys.modules['jax.numpy'] is
meshsim.numpy`, so state set through one name (config, meshes) is seen
through the other. A `jax.<sub>` that meshsim does not have fails to import
with ModuleNotFoundError naming `jax.<sub>`, as a missing module would.

JAX internals that libraries import (`jax._src.*`, `jax.extend.*`,
`jax.interpreters.*`, `jax.api_util`, `jax.experimental.hijax`) resolve to
`meshsim._src.jax_internals_compat`, which mirrors their paths; meshsim's own
`meshsim._src` is never seen as `jax._src`."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys

from meshsim._src import distributed, jax_internals_compat

ALIASED = "jax"
TARGET = "meshsim"


def _target_name(fullname: str) -> str | None:
    if jax_internals_compat.is_internal(fullname):
        return jax_internals_compat.compat_name(fullname)
    if fullname == ALIASED:
        return TARGET
    if fullname.startswith(ALIASED + "."):
        return TARGET + fullname[len(ALIASED):]
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self.own_spec = module.__spec__
        return module

    def exec_module(self, module):
        # The module was executed when it was imported under its own name; importing it as
        # `jax` keeps its own spec and has the side effect `import jax` has.
        if self.target == TARGET:
            module.__spec__ = self.own_spec
            distributed.draw_as_jax_import_does()
        if not self.target.startswith(TARGET + "._src"):  # JAX internals keep their messages
            _name_missing_attributes_as(module, ALIASED + self.target[len(TARGET):])


def _name_missing_attributes_as(module, alias: str) -> None:
    """A missing attribute of an aliased module is reported under the name the program imported
    (`module 'jax' has no attribute 'tree_map'`, as JAX says of the names it removed)."""
    if getattr(module, "_missing_attributes_named_as", None) is not None:
        module._missing_attributes_named_as = alias
        return
    own_getattr = module.__dict__.get("__getattr__")

    def __getattr__(name):
        try:
            if own_getattr is None:
                raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
            return own_getattr(name)
        except AttributeError as error:
            if str(error) != f"module {module.__name__!r} has no attribute {name!r}":
                raise
            raise AttributeError(f"module {module._missing_attributes_named_as!r} has no attribute "
                                 f"{name!r}", name=name, obj=module) from None

    module._missing_attributes_named_as = alias
    module.__getattr__ = __getattr__


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
    import meshsim  # noqa: F401
    # `jax` itself is bound when the program first imports it (through the finder), so that
    # import has the side effect `import jax` has; its submodules are bound at once.
    for name, module in list(sys.modules.items()):
        if name.startswith(TARGET + "."):
            alias = ALIASED + name[len(TARGET):]
            if not jax_internals_compat.is_internal(alias) and \
                    sys.modules.setdefault(alias, module) is module:
                _name_missing_attributes_as(module, alias)
    _bind_internal_roots()


def _bind_internal_roots() -> None:
    """Binds each root of JAX internals (`jax.extend`, ...) to its compat module in sys.modules
    and as an attribute of its parent, so `import jax; jax.api_util.f` and `from
    jax.experimental import hijax` (which imports `meshsim.experimental.hijax` by the parent's
    own name) find it. `jax._src` is bound in sys.modules only: as an attribute of `jax`, which
    is meshsim, it would hide meshsim's own internals."""
    for root in jax_internals_compat.INTERNAL_ROOTS:
        module = importlib.import_module(jax_internals_compat.compat_name(root))
        sys.modules[root] = module
        parent, _, child = root.rpartition(".")
        if root != ALIASED + "._src":
            setattr(importlib.import_module(_target_name(parent)), child, module)


def _unbind_internal_roots() -> None:
    for root in jax_internals_compat.INTERNAL_ROOTS:
        parent, _, child = root.rpartition(".")
        parent_module = sys.modules.get(parent)
        compat = sys.modules.get(jax_internals_compat.compat_name(root))
        if parent_module is not None and compat is not None \
                and getattr(parent_module, child, None) is compat:
            delattr(parent_module, child)


def uninstall() -> None:
    """Removes the finder and the `jax*` names it bound."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
        _unbind_internal_roots()
    for name, module in list(sys.modules.items()):
        if _target_name(name) is not None and getattr(module, "__name__", "").startswith(TARGET):
            del sys.modules[name]
            if getattr(module, "_missing_attributes_named_as", None) is not None:
                module._missing_attributes_named_as = module.__name__


def is_installed() -> bool:
    return _FINDER in sys.meta_path

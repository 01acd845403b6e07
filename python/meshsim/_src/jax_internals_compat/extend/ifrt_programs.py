"""`jax.extend.ifrt_programs`: programs for an IFRT proxy client (Pathways). orbax imports
the module; meshsim has no IFRT client, so building a program raises."""
import types

from meshsim._src.jax_internals_compat import unsupported


def _make(what: str):
    def make(*args, **kwargs):
        raise unsupported(f"jax.extend.ifrt_programs.{what}", "meshsim has no IFRT client")
    return make


ifrt_programs = types.SimpleNamespace(
    make_plugin_program=_make("make_plugin_program"),
    make_plugin_compile_options=_make("make_plugin_compile_options"))

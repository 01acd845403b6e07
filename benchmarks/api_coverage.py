"""How much of JAX 0.10.2's public API meshsim has: for each public module of
JAX listed in MODULES, the names `dir()` shows that do not start with `_`,
compared with `dir()` of the meshsim module of the same path.

    PYTHONPATH=python python3 benchmarks/api_coverage.py [--missing]

Left out of the count, with the reason, are the modules in EXCLUDED_MODULES
and the names in EXCLUDED_NAMES: XLA/compiler plumbing, TPU/GPU-only kernels,
deprecated aliases JAX itself keeps only to warn, and submodules (a submodule
counts as its own module, not as a name of its parent). The `*_p` primitive objects
count: programs that read jaxprs compare equations' primitives with them."""
from __future__ import annotations

import argparse
import importlib
import types

# The modules a JAX user's program reaches by name.
MODULES = [
    "jax", "jax.numpy", "jax.numpy.linalg", "jax.numpy.fft", "jax.lax", "jax.random", "jax.nn",
    "jax.nn.initializers", "jax.sharding", "jax.debug", "jax.tree", "jax.tree_util", "jax.dtypes",
    "jax.errors", "jax.typing", "jax.flatten_util", "jax.custom_derivatives", "jax.ad_checkpoint",
    "jax.ops", "jax.profiler", "jax.core", "jax.stages", "jax.distributed", "jax.scipy",
    "jax.scipy.special", "jax.scipy.stats", "jax.scipy.stats.norm", "jax.scipy.stats.multivariate_normal",
    "jax.scipy.stats.bernoulli", "jax.scipy.stats.beta", "jax.scipy.stats.cauchy",
    "jax.scipy.stats.expon", "jax.scipy.stats.gamma", "jax.scipy.stats.laplace",
    "jax.scipy.stats.logistic", "jax.scipy.stats.poisson", "jax.scipy.stats.t",
    "jax.scipy.stats.uniform", "jax.scipy.linalg", "jax.scipy.signal", "jax.scipy.integrate",
    "jax.scipy.optimize", "jax.scipy.interpolate", "jax.scipy.ndimage", "jax.scipy.fft",
    "jax.scipy.cluster", "jax.scipy.cluster.vq", "jax.scipy.spatial", "jax.scipy.spatial.transform",
    "jax.scipy.sparse", "jax.scipy.sparse.linalg", "jax.image",
    "jax.experimental", "jax.experimental.pjit", "jax.experimental.mesh_utils",
    "jax.experimental.multihost_utils", "jax.experimental.shard_map",
]

EXCLUDED_MODULES = {
    "jax.extend": "the API for building JAX itself (primitives, lowering, backends)",
    "jax.interpreters": "JAX's interpreter internals (MLIR lowering, partial evaluation)",
    "jax.ffi": "calls into XLA custom-call C++ handlers",
    "jax.export": "serialised StableHLO",
    "jax.dlpack": "zero-copy exchange with other frameworks' device buffers",
    "jax.lib": "jaxlib's XLA client",
    "jax.experimental.pallas": "TPU/GPU kernel language",
    "jax.experimental.mosaic": "TPU kernel compiler",
    "jax.experimental.jax2tf": "TensorFlow interop",
    "jax.experimental.compilation_cache": "XLA's persistent compilation cache",
    "jax.experimental.serialize_executable": "XLA executables",
    "jax.experimental.colocated_python": "multi-host Python on TPU hosts",
    "jax.experimental.topologies": "TPU topology descriptions",
    "jax.example_libraries": "deprecated example code (stax, optimizers)",
    "jax.test_util": "JAX's own test harness",
    "jax.monitoring": "process-wide event listeners of JAX's compiler",
}

FOREIGN_MODULES = {"typing", "functools", "contextlib", "__future__", "zlib", "collections"}

# Names of counted modules that are XLA/backend plumbing or deprecated.
EXCLUDED_NAMES = {
    "jax": {
        "config": None, "lib": "jaxlib", "extend": "module excluded", "interpreters": "module excluded",
        "ffi": "module excluded", "export": "module excluded", "dlpack": "module excluded",
        "print_environment_info": "prints jaxlib/XLA build facts", "version": "module",
        "copy_to_host_async": "host/device transfer on accelerators", "jax": None,
        "pure_callback": None,
        "jax2tf_associative_scan_reductions": "flag of the excluded jax2tf",
        "enable_checks": "JAX's checks of its own internal invariants",
    },
    "jax.debug": {"DebugEffect": "effect type of JAX's tracing internals",
                  "OrderedDebugEffect": "effect type of JAX's tracing internals"},
    "jax.tree_util": {"default_registry": "jaxlib's C++ registry object"},
    "jax.experimental": {"EArray": "extended-dtype arrays, internal to JAX's key/float0 types",
                         "cur_qdd": "a tracer's quasi-dynamic data, internal to state discharge",
                         "primal_tangent_dtype": "builds extended dtypes (jax.extend)"},
    "jax.experimental.mesh_utils": {"device_kind_handler_dict": "TPU device-kind table"},
    "jax.lax": {
        "infeed": "TPU infeed", "outfeed": "TPU outfeed", "create_token": "XLA token for infeed",
        "after_all": "XLA token", "rng_bit_generator": "XLA's RNG op (backend-defined bits)",
        "rng_uniform": "XLA's RNG op (backend-defined bits)", "optimization_barrier": None,
        "cumlogsumexp": None, "platform_dependent": "lowers per backend",
    },
    "jax.sharding": {"SingleDeviceSharding": None, "PmapSharding": "deprecated with pmap's old layout",
                     "GSPMDSharding": "XLA's internal sharding", "PositionalSharding": "removed in 0.10"},
    "jax.experimental.multihost_utils": {
        name: "the module's own implementation names" for name in (
            "global_array_to_host_local_array_impl", "gtl_abstract_eval", "ltg_abstract_eval",
            "ltg_batcher", "host_local_array_to_global_array_impl", "safe_zip", "tree_flatten",
            "tree_unflatten", "P")},
    "jax.profiler": {"start_server": "serves XLA's profiler over gRPC",
                     "stop_server": "serves XLA's profiler over gRPC",
                     "register_subprocess": "XLA's profiler server across processes",
                     "ProfileData": "reader of XLA's profile protobufs",
                     "ProfileEvent": "reader of XLA's profile protobufs",
                     "ProfilePlane": "reader of XLA's profile protobufs",
                     "ProfileOptions": "options of XLA's profiler backend",
                     "device_memory_profile": "accelerator memory pprof",
                     "save_device_memory_profile": "accelerator memory pprof"},
}
for _v in EXCLUDED_NAMES.values():
    for _k in [k for k, why in _v.items() if why is None]:
        del _v[_k]


def public_names(module: types.ModuleType, module_name: str) -> set[str]:
    names = set()
    for name in dir(module):
        if name.startswith("_"):
            continue
        value = getattr(module, name, None)
        if isinstance(value, types.ModuleType):
            continue  # a submodule counts as its own module; another is an import (np, zlib)
        if name in EXCLUDED_NAMES.get(module_name, {}):
            continue
        if getattr(value, "__module__", "jax").split(".")[0] in FOREIGN_MODULES:
            continue  # an import the module made for itself (typing.Any, functools.partial)
        names.add(name)
    return names


def measure() -> list[tuple[str, set[str], set[str]]]:
    """For each module: (name, JAX's public names, those meshsim lacks)."""
    rows = []
    for name in MODULES:
        theirs = importlib.import_module(name)
        expected = public_names(theirs, name)
        ours_name = "meshsim" + name[len("jax"):]
        try:
            ours = importlib.import_module(ours_name)
            have = set(dir(ours))
        except ImportError:
            have = set()
        rows.append((name, expected, expected - have))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--missing", action="store_true", help="list each module's missing names")
    args = parser.parse_args()
    rows = measure()
    total = sum(len(e) for _, e, _ in rows)
    missing = sum(len(m) for _, _, m in rows)
    print(f"{'module':38s} {'JAX':>5s} {'meshsim':>8s} {'coverage':>9s}")
    for name, expected, lacking in rows:
        have = len(expected) - len(lacking)
        pct = 100.0 * have / len(expected) if expected else 100.0
        print(f"{name:38s} {len(expected):5d} {have:8d} {pct:8.1f}%")
        if args.missing and lacking:
            print("    missing: " + ", ".join(sorted(lacking)))
    print(f"{'total':38s} {total:5d} {total - missing:8d} {100.0 * (total - missing) / total:8.1f}%")
    print("excluded modules: " + "; ".join(f"{m} ({why})" for m, why in EXCLUDED_MODULES.items()))


if __name__ == "__main__":
    main()

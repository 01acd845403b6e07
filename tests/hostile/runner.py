"""Runs bad-input cases against one library and prints one JSON line per case.

    python runner.py jax|meshsim < batches

Each stdin line is a batch: a JSON list of cases. Each case is Python code
that sets `out` (or raises). The library is bound to the same names either
way (jax, jnp, lax, np, Mesh, P, NamedSharding, shard_map, mesh8, mesh42).
After a batch's outcomes comes {"end": N}; the process then waits for the next
batch, so one interpreter (its imports, meshes and device threads) serves a
whole run (sweep.Worker). A crash is seen by the caller as the outcomes
stopping before the batch's end."""
import gc
import json
import os
import sys
import warnings

import numpy as np

lib = sys.argv[1]
if lib == "jax":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
else:
    import meshsim as jax
    import meshsim.numpy as jnp
    from meshsim import lax
    from meshsim.sharding import Mesh, NamedSharding, PartitionSpec as P

warnings.simplefilter("ignore")
mesh8 = Mesh(np.array(jax.devices()), ("x",))
mesh42 = Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))


def builtin_base(exc_type) -> str:
    import builtins
    for t in exc_type.__mro__:
        if getattr(builtins, t.__name__, None) is t:
            return t.__name__
    return exc_type.__name__


def summary(value):
    leaves = jax.tree.leaves(value) if not isinstance(value, (int, float, bool, str)) else [value]
    out = []
    for leaf in leaves:
        a = np.asarray(leaf)
        if a.dtype == object:
            out.append(["object", repr(leaf)[:200]])
            continue
        vals = a.astype(np.float64).ravel()[:64] if a.dtype.kind in "biuf" else a.ravel()[:64]
        out.append([str(a.dtype), list(a.shape),
                    [None if v != v else float(v) for v in vals] if a.dtype.kind in "biuf" else
                    [str(v) for v in vals]])
    return out


def run_batch(cases: list[str], env: dict):
    for code in cases:
        ns = dict(env)
        try:
            exec(code, ns)
            res = {"ok": summary(ns.get("out"))}
        except BaseException as e:  # noqa: BLE001 - the outcome is what we record
            if isinstance(e, KeyboardInterrupt):
                raise
            msg = str(e).strip().splitlines()
            res = {"error": builtin_base(type(e)), "type": type(e).__name__,
                   "bases": [t.__name__ for t in type(e).__mro__],
                   "message": msg[0][:300] if msg else ""}
        print(json.dumps(res), flush=True)
    # Compiled programs of finished cases are not reused: a long run keeps memory flat.
    jax.clear_caches()
    gc.collect()
    print(json.dumps({"end": len(cases)}), flush=True)


def main():
    env = dict(jax=jax, jnp=jnp, lax=lax, np=np, Mesh=Mesh, P=P, NamedSharding=NamedSharding,
               shard_map=jax.shard_map, mesh8=mesh8, mesh42=mesh42)
    for line in sys.stdin:
        if line.strip():
            run_batch(json.loads(line), env)


main()

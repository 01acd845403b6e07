"""Side by side, for the random Auto-mesh programs of tests/test_auto_sharding_random.py:
meshsim's and XLA's result shardings and collectives, for every program where they differ
(or for the seeds given). The differences can then be grouped by what XLA does otherwise.

    PYTHONPATH=python:tests python3 scripts/auto_sweep_diff.py            # every differing seed
    PYTHONPATH=python:tests python3 scripts/auto_sweep_diff.py 1001 1069  # these seeds
    PYTHONPATH=python:tests python3 scripts/auto_sweep_diff.py --summary  # counts only
"""
import argparse
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
# JAX sees 8 CPU devices, as under pytest (tests/conftest.py); set before it starts its backend.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import meshsim  # noqa: E402
from auto_oracle import normalized, run_jax, run_meshsim  # noqa: E402
from test_auto_sharding_random import KNOWN, NUM_PROGRAMS, PROGRAMS, _run  # noqa: E402


def _collective_lines(coll: Counter) -> list:
    return [f"{n}x {kind} {'.'.join(axes) or '-'} {nbytes}B"
            for (kind, axes, nbytes), n in sorted(coll.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2]))]


def compare(prog):
    j_specs, j_coll, _ = _run(run_jax, jax, prog)
    try:
        m_specs, m_coll, _ = _run(run_meshsim, meshsim, prog)
    except Exception as err:  # a failing program is shown, not fatal to the listing
        return [normalized(s) for s in j_specs], None, j_coll, Counter(), f"{type(err).__name__}: {err}"
    return [normalized(s) for s in j_specs], [normalized(s) for s in m_specs], j_coll, m_coll, None


def show(prog, j_specs, m_specs, j_coll, m_coll, error):
    seed = int(prog.name.split(":")[0])
    print(f"== {prog.name}  [{KNOWN.get(seed, 'agrees in the test')}]")
    print(f"   mesh {dict(zip(prog.axis_names, prog.mesh_shape))}  shapes {prog.shapes}  specs {prog.specs}")
    if error:
        print(f"   meshsim raised {error}")
    print(f"   result specs  xla {j_specs}  meshsim {m_specs}{'' if j_specs == m_specs else '   <-- differ'}")
    only_x, only_m = j_coll - m_coll, m_coll - j_coll
    both = j_coll & m_coll
    width = max([len(s) for s in _collective_lines(only_x)] + [24])
    left, right = _collective_lines(only_x), _collective_lines(only_m)
    print(f"   {'xla only':<{width}}  | meshsim only")
    for k in range(max(len(left), len(right))):
        a = left[k] if k < len(left) else ""
        b = right[k] if k < len(right) else ""
        print(f"   {a:<{width}}  | {b}")
    if both:
        print(f"   in both: {', '.join(_collective_lines(both))}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("seeds", nargs="*", type=int)
    parser.add_argument("--summary", action="store_true", help="print only the agreeing count")
    args = parser.parse_args()
    chosen = [p for p in PROGRAMS if not args.seeds or int(p.name.split(":")[0]) in args.seeds]
    agreeing, differing = 0, []
    for prog in chosen:
        j_specs, m_specs, j_coll, m_coll, error = compare(prog)
        same = error is None and j_specs == m_specs and j_coll == m_coll
        agreeing += same
        seed = int(prog.name.split(":")[0])
        if not same:
            differing.append(seed)
        if (args.seeds or not same) and not args.summary:
            show(prog, j_specs, m_specs, j_coll, m_coll, error)
    print(f"{agreeing}/{len(chosen)} agree (of {NUM_PROGRAMS} programs)")
    newly_agreeing = sorted(s for s in KNOWN if s not in differing and any(
        int(p.name.split(':')[0]) == s for p in chosen))
    newly_differing = sorted(s for s in differing if s not in KNOWN)
    print(f"differing: {differing}")
    if newly_agreeing:
        print(f"marked as differing but agree: {newly_agreeing}")
    if newly_differing:
        print(f"not marked but differ: {newly_differing}")


if __name__ == "__main__":
    main()

"""Runs the generated bad-input cases (cases.py) against JAX and meshsim in
subprocesses (a crash is recorded for the case that caused it and the run
resumes after it) and compares the outcomes."""
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


class Worker:
    """A long-lived runner.py process for one library, fed batches of cases.
    A case that crashes the process or runs past `timeout` seconds is recorded
    as {"crash": ...} and a fresh process takes the rest of the batch."""

    def __init__(self, lib: str, timeout: float = 600):
        import meshsim  # the worker imports the meshsim this process imports
        self.lib, self.timeout = lib, timeout
        self.env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(meshsim.__file__)))
        if lib == "jax":  # the oracle runs without a sanitizer runtime (scripts/sanitizer-build)
            self.env.pop("LD_PRELOAD", None)
        self.proc = None
        self.restarts = -1

    def _start(self):
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "runner.py"), self.lib],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, env=self.env)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True).start()
        self.restarts += 1

    @staticmethod
    def _read(stream, lines):
        for line in stream:
            lines.put(line)
        lines.put(None)  # the process ended

    def _fail(self, why: str) -> dict:
        self.proc.kill()
        self.proc.wait()
        self.stderr.seek(0)
        tail = self.stderr.read().strip().splitlines()
        self.proc = None
        return {"crash": why, "detail": " | ".join(tail[-3:])[:300]}

    def run(self, cases: list[str]) -> list[dict]:
        results: list[dict] = []
        while len(results) < len(cases):
            if self.proc is None:
                self._start()
            try:
                self.proc.stdin.write(json.dumps(cases[len(results):]) + "\n")
                self.proc.stdin.flush()
            except BrokenPipeError:  # it died starting; its end is read below
                pass
            while True:
                try:
                    line = self.lines.get(timeout=self.timeout)
                except queue.Empty:
                    results.append(self._fail(f"no outcome within {self.timeout} s"))
                    break
                if line is None:
                    results.append(self._fail(f"exit status {self.proc.wait()}"))
                    break
                if line.startswith("{"):
                    res = json.loads(line)
                    if "end" in res:
                        break
                    results.append(res)
        return results

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait()
            self.proc = None


def run_cases(lib: str, cases: list[str], timeout: float = 600) -> list[dict]:
    worker = Worker(lib, timeout)
    try:
        return worker.run(cases)
    finally:
        worker.close()


def _same_values(a, b) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x[0] != y[0] or x[1] != y[1]:
            return False
        if x[0] == "object" or not isinstance(x[2], list):
            continue
        if any(isinstance(v, str) for v in x[2] + y[2]):  # strings, e.g. a mesh's axis names
            if x[2] != y[2]:
                return False
            continue
        vx = np.array([np.nan if v is None else v for v in x[2]], dtype=float)
        vy = np.array([np.nan if v is None else v for v in y[2]], dtype=float)
        if vx.shape != vy.shape or not np.allclose(vx, vy, rtol=1e-5, atol=1e-6, equal_nan=True):
            return False
    return True


# JAX failing inside itself rather than checking the input: an assertion, a
# lowering or MLIR error, an internal lookup. meshsim may raise any clearer error.
_JAX_INTERNAL_TYPES = {"AssertionError", "ZeroDivisionError", "KeyError", "MLIRError"}
_JAX_INTERNAL_TEXT = ("list index out of range", "tuple index out of range", "Cannot lower jaxpr",
                      "incompatible function arguments", "not all arguments converted",
                      "list indices must be integers")


def jax_failed_inside(res: dict) -> bool:
    return "crash" in res or ("error" in res and (
        res["type"] in _JAX_INTERNAL_TYPES or any(t in res["message"] for t in _JAX_INTERNAL_TEXT)))


def compare(jax_res: dict, ms_res: dict) -> str | None:
    """None when meshsim behaves as JAX does, else what differs."""
    if "crash" in ms_res:
        return f"meshsim crashed: {ms_res['detail']}"
    if jax_failed_inside(jax_res):  # any clean exception is better
        return None if "error" in ms_res else "JAX fails inside, meshsim accepts"
    if "ok" in jax_res and "ok" in ms_res:
        return None if _same_values(jax_res["ok"], ms_res["ok"]) else \
            f"values differ: jax {str(jax_res['ok'])[:150]} meshsim {str(ms_res['ok'])[:150]}"
    if "error" in jax_res and "error" in ms_res:
        if jax_res["type"] == ms_res["type"] or jax_res["error"] in ms_res["bases"]:
            return None
        return (f"jax raises {jax_res['type']}({jax_res['message'][:120]!r}), meshsim raises "
                f"{ms_res['type']}({ms_res['message'][:120]!r})")
    if "error" in jax_res:
        return f"meshsim accepts; jax raises {jax_res['type']}({jax_res['message'][:120]!r})"
    return f"meshsim raises {ms_res['type']}({ms_res['message'][:120]!r}); jax accepts"


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    import cases as case_module
    cases = case_module.all_cases()
    jr, mr = run_cases("jax", cases), run_cases("meshsim", cases)
    bad = [(c, compare(j, m)) for c, j, m in zip(cases, jr, mr)]
    bad = [(c, d) for c, d in bad if d]
    for c, d in bad:
        print(f"{c}\n    {d}")
    print(f"{len(cases)} cases, {len(bad)} mismatches")

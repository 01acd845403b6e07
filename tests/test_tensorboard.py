"""Profiles where JAX users look: a trace written by meshsim.profiler is
served by TensorBoard's profile plugin (PyPI tensorboard and
tensorboard-plugin-profile, in the test extras), which lists the run and
shows every simulated device in its trace viewer."""
import gzip
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

import meshsim as jax
import meshsim.numpy as jnp
from meshsim.sharding import PartitionSpec as P

pytest.importorskip("tensorboard")
pytest.importorskip("xprof", reason="tensorboard-plugin-profile is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port, route, **query):
    url = f"http://127.0.0.1:{port}/data/plugin/profile/{route}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    with urllib.request.urlopen(url, timeout=60) as r:
        body = r.read()
        if r.headers.get("Content-Encoding") == "gzip" or body[:2] == b"\x1f\x8b":
            body = gzip.decompress(body)
    return json.loads(body)


@pytest.fixture
def profile_dir(tmp_path):
    mesh = jax.make_mesh((8,), ("x",))
    step = jax.jit(jax.shard_map(lambda a: jax.lax.psum(jnp.sin(a) @ a.T, "x"), mesh=mesh,
                                 in_specs=P("x"), out_specs=P()))
    x = jnp.ones((64, 32))
    step(x).block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        step(x).block_until_ready()
    return tmp_path


def test_tensorboard_lists_the_run_and_every_device(profile_dir):
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(profile_dir), "--port",
         str(port), "--host", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        runs = None
        for _ in range(240):  # TensorBoard takes a few seconds to start under load
            try:
                runs = _get(port, "runs")
                if runs:
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            if server.poll() is not None:
                pytest.fail(f"TensorBoard exited: {server.stderr.read().decode()[-2000:]}")
            time.sleep(0.5)
        folder = next((profile_dir / "plugins" / "profile").iterdir()).name
        assert runs and any(folder in r for r in runs), runs
        run = next(r for r in runs if folder in r)
        tools = _get(port, "run_tools", run=run)
        assert any(t.startswith("trace_viewer") for t in tools), tools
        hosts = _get(port, "hosts", run=run, tag="trace_viewer")
        host = hosts[0]["hostname"] if isinstance(hosts[0], dict) else hosts[0]
        trace = _get(port, "data", run=run, tag="trace_viewer", host=host)
        events = trace["traceEvents"]
        processes = {e["args"]["name"] for e in events
                     if e.get("ph") == "M" and e.get("name") == "process_name"}
        assert {f"/device:CUSTOM:{i}" for i in range(8)} <= processes, processes
        spans = [e for e in events if e.get("ph") == "X"]
        assert {"sin", "dot_general", "psum_invariant"} <= {e["name"] for e in spans}
    finally:
        server.terminate()
        server.wait(timeout=30)

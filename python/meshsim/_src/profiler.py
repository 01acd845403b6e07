"""`meshsim.profiler`: a per-device timeline of what the simulated mesh ran.

JAX's API: `start_trace`/`stop_trace`, the `trace` context manager,
`TraceAnnotation`, `StepTraceAnnotation` and `annotate_function`. While a
trace is open the runtime records (runtime/timeline.h) every primitive each
simulated device ran (with its flops and bytes accessed), every collective on
every device of its mesh (axes, replica group, bytes sent and received), and
host spans: jitted program runs (`PjitFunction(f)`) and annotations.
`stop_trace` writes them as a Chrome trace-event JSON (Perfetto and
chrome://tracing open it), gzipped, where TensorBoard's profile plugin looks:
`log_dir/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.trace.json.gz`, the same
timeline as an XSpace protobuf `<host>.xplane.pb` (what TensorBoard's profile
plugin reads; `_src/xplane.py`), plus
`perfetto_trace.json.gz` with `create_perfetto_trace`. The host is process
`/host:CPU`; each device is a process `/device:CPU:<id>` with one thread
(`XLA Ops`) holding its ops and collectives. Times are wall-clock times of the
simulation on this machine, not predictions (see `estimate` for those).
Devices holding equal values compute once in the simulator (DESIGN.md,
principle 5), so only the device that computed an op shows its span."""
from __future__ import annotations

import datetime
import functools
import gzip
import json
import os
import pathlib
import socket
import threading
from typing import Callable

from meshsim import _core
from meshsim._src import devices as devices_lib, xplane


class _ProfileState:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.log_dir: str | None = None
        self.create_perfetto_trace = False
        self.create_perfetto_link = False
        self.start_ns = 0


_state = _ProfileState()


def start_trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False,
                create_perfetto_trace: bool = False, profiler_options=None) -> None:
    """Starts recording the timeline; `stop_trace` writes it under `log_dir`.
    `create_perfetto_link` writes the Perfetto file and prints where it is
    (nothing is served); `profiler_options` is accepted and ignored."""
    with _state.lock:
        if _state.log_dir is not None:
            raise RuntimeError("Profile has already been started. "
                               "Only one profile may be run at a time.")
        _state.log_dir = str(log_dir)
        _state.create_perfetto_trace = create_perfetto_trace or create_perfetto_link
        _state.create_perfetto_link = create_perfetto_link
        _core.wait_all_dispatched()  # programs dispatched before belong to no trace
        _state.start_ns = _core.timeline_now_ns()
        _core.push_timeline()


def stop_trace() -> None:
    """Stops the trace and writes it to the `log_dir` given to `start_trace`."""
    with _state.lock:
        if _state.log_dir is None:
            raise RuntimeError("No profile started")
        _core.wait_all_dispatched()  # what was dispatched inside the trace runs into it
        events = _core.pop_timeline()
        try:
            folder = _new_trace_folder(_state.log_dir)
            trace = trace_events(events, _state.start_ns)
            with gzip.open(folder / f"{socket.gethostname()}.trace.json.gz", "wt") as f:
                json.dump(trace, f)
            # TensorBoard's profile plugin (xprof) reads XSpace protobufs.
            (folder / f"{socket.gethostname()}.xplane.pb").write_bytes(
                xplane.xspace(events, devices_lib.devices(), socket.gethostname(),
                              _state.start_ns))
            if _state.create_perfetto_trace:
                # Perfetto does not like the `metadata` field (as JAX writes it).
                perfetto = folder / "perfetto_trace.json.gz"
                with gzip.open(perfetto, "wt") as f:
                    json.dump({k: v for k, v in trace.items() if k != "metadata"}, f)
                if _state.create_perfetto_link:
                    print(f"Perfetto trace: {perfetto.absolute()} (open it at https://ui.perfetto.dev)")
        finally:
            _state.reset()


def _new_trace_folder(log_dir: str) -> pathlib.Path:
    root = pathlib.Path(log_dir) / "plugins" / "profile"
    stamp = datetime.datetime.now().strftime("%Y_%m_%d_%H_%M_%S")
    folder, k = root / stamp, 0
    while folder.exists():  # two traces within a second: keep both
        k += 1
        folder = root / f"{stamp}_{k}"
    folder.mkdir(parents=True)
    return folder


_HOST_PID = 0
_OPS_TID = 1


def trace_events(events: list, start_ns: int) -> dict:
    """The Chrome trace-event JSON object of timeline `events` (tuples from
    `_core.pop_timeline`), times in microseconds since `start_ns`."""
    out = [{"ph": "M", "pid": _HOST_PID, "name": "process_name", "args": {"name": "/host:CPU"}},
           {"ph": "M", "pid": _HOST_PID, "name": "process_sort_index", "args": {"sort_index": 0}},
           {"ph": "M", "pid": _HOST_PID, "tid": _OPS_TID, "name": "thread_name",
            "args": {"name": "python3"}}]
    for d in devices_lib.devices():
        pid = d.id + 1
        out += [{"ph": "M", "pid": pid, "name": "process_name",
                 "args": {"name": f"/device:{d.platform.upper()}:{d.id}"}},
                {"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}},
                {"ph": "M", "pid": pid, "tid": _OPS_TID, "name": "thread_name",
                 "args": {"name": "XLA Ops"}}]
    for (name, category, device, start, dur, flops, bytes_accessed, axes, group, sent, received,
         args) in events:
        e = {"ph": "X", "pid": _HOST_PID if device < 0 else device + 1, "tid": _OPS_TID,
             "ts": (start - start_ns) / 1e3, "dur": dur / 1e3, "name": name, "cat": category}
        if category == "op":
            e["args"] = {"flops": flops, "bytes_accessed": bytes_accessed}
        elif category == "collective":
            e["args"] = {"axes": list(axes), "replica_group": list(group), "bytes_sent": sent,
                         "bytes_received": received}
        elif args:
            e["args"] = dict(args)
        out.append(e)
    return {"displayTimeUnit": "ns", "metadata": {"highres-ticks": True}, "traceEvents": out}


class trace:
    """`with trace(log_dir):` traces the block (start_trace ... stop_trace).
    Also a decorator, as JAX's (a contextlib context manager) is."""

    def __init__(self, log_dir: os.PathLike | str, create_perfetto_link=False,
                 create_perfetto_trace=False, profiler_options=None):
        self._args = (log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)

    def __enter__(self):
        start_trace(*self._args)

    def __exit__(self, *exc):
        stop_trace()
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with trace(*self._args):
                return func(*args, **kwargs)
        return wrapper


class TraceAnnotation:
    """`with TraceAnnotation(name, **kwargs):` marks the block as a host span
    (its keyword arguments become the span's args, as strings)."""

    def __init__(self, name: str, **kwargs):
        self.name = name
        self.kwargs = kwargs
        self._start = None

    def __enter__(self):
        self._start = _core.timeline_now_ns() if _core.timeline_active() else None
        return self

    def __exit__(self, *exc):
        if self._start is not None and _core.timeline_active():
            _core.record_host_span(self.name, self._start, _core.timeline_now_ns() - self._start,
                                   [(str(k), str(v)) for k, v in self.kwargs.items()])
        return False


class StepTraceAnnotation(TraceAnnotation):
    """A TraceAnnotation marking a training step (`step_num=` as in JAX)."""

    def __init__(self, name: str, **kwargs):
        super().__init__(name, **kwargs)


def annotate_function(func: Callable, name: str | None = None, **decorator_kwargs):
    """Decorator: each call of `func` is a host span named `name` (default its
    qualified name)."""
    name = name or getattr(func, "__qualname__", None) or func.__name__

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with TraceAnnotation(name, **decorator_kwargs):
            return func(*args, **kwargs)
    return wrapper

"""meshsim.profiler: JAX's profiler API over the simulated mesh (a per-device
timeline as a Chrome/Perfetto trace) and a cost model predicting a program's
time on real hardware (`estimate`)."""
from meshsim._src.profiler import (  # noqa: F401
    StepTraceAnnotation, TraceAnnotation, annotate_function, start_trace, stop_trace, trace)
from meshsim._src.cost_model import (  # noqa: F401
    HARDWARE, CostEstimate, Hardware, OpEstimate, estimate)

"""PyTorch flight-recorder dumps: read safely (read.py), lined up across ranks (match.py).

    from slurmdoc.traces import read_traces, analyze
    verdict = analyze(read_traces("/scratch/job/nccl_trace_rank_"))
"""

from __future__ import annotations

from slurmdoc.traces.match import analyze
from slurmdoc.traces.model import TraceVerdict
from slurmdoc.traces.read import DEFAULT_LIMITS, TraceError, TraceLimits, TraceSet, read_traces

__all__ = ["DEFAULT_LIMITS", "TraceError", "TraceLimits", "TraceSet", "TraceVerdict", "analyze", "read_traces"]

"""Flight-recorder dumps shaped as torch writes them (pickle, format version 2.x), built by the
tests: a default group whose ranks issued all_reduce #1..#N each."""

from __future__ import annotations

import pickle
from pathlib import Path


def write_dumps(where: Path, n: int, last: dict[int, int], odd: dict[int, list] = {}, absent=(), prefix="nccl_trace_rank_") -> Path:
    """Per-rank pickle dumps of a default group of `n` ranks in which rank r issued all_reduce
    #1..#last[r] (every rank: #1..#max when not named); `odd`: rank -> the input sizes it used
    at its last collective. Returns the directory."""
    where.mkdir(parents=True, exist_ok=True)
    top = max(last.values(), default=3)
    for r in range(n):
        if r in absent:
            continue
        entries = []
        for seq in range(1, last.get(r, top) + 1):
            sizes = odd[r] if r in odd and seq == last.get(r, top) else [[1024]]
            entries.append({
                "frames": [{"name": "collective", "filename": "/job/train.py", "line": 62},
                           {"name": "train_step", "filename": "/job/train.py", "line": 77}],
                "record_id": seq - 1, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": seq,
                "p2p_seq_id": 0, "op_id": seq, "profiling_name": "gloo:all_reduce", "time_created_ns": 10**18 + seq,
                "input_sizes": sizes, "input_dtypes": ["Float"], "output_sizes": sizes, "output_dtypes": ["Float"],
                "state": "scheduled", "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
                "retired": False, "timeout_ms": 5000, "is_p2p": False,
            })
        dump = {"version": "2.10", "pg_config": {"": {"name": "", "desc": "", "ranks": str(list(range(n)))}},
                "comm_lib_version": "", "pg_status": {"0": {"last_enqueued_collective": len(entries), "last_started_collective": -1,
                                                             "last_completed_collective": len(entries)}},
                "entries": entries}
        (where / f"{prefix}{r}").write_bytes(pickle.dumps(dump))
    return where

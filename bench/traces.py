"""Benchmark: flight-recorder dumps of many ranks read and lined up (slurmdoc.traces).

    python bench/traces.py                      # 64 ranks x 2,000 entries, pickle
    python bench/traces.py --ranks 512 --json   # JSON dumps

Writes synthetic dumps shaped as torch writes them (one hung rank, a full ring on every
other) into a temporary directory, then times read_traces + analyze in a fresh process
(median of --repeat runs) and reports its peak RSS. Prints figures; exits 0 unless the
verdict is wrong. With --torch PYTHON (a python with torch installed), PyTorch's own analyzer
(`python -m torch.distributed.flight_recorder.fr_trace`) runs on the same dumps, side by side.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from slurmdoc.traces import analyze, read_traces
t1, c1 = time.perf_counter(), time.process_time()
v = analyze(read_traces(sys.argv[1]))
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"s": t2 - t1, "cpu": c2 - c1, "imports": t1 - t0, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "kind": v.kind, "culprits": v.culprits, "seq": v.seq}))
"""


def write(where: Path, ranks: int, entries: int, hung: int, as_json: bool) -> None:
    # seven frames per entry, as the real 2,000-entry dumps in fixtures/traces/ring_16 hold (two
    # of torch's, five of the job's); as there, each entry has its own list of the same seven
    # frame dicts (torch shares a frame between entries, not an entry's list)
    frames = [{"name": "all_reduce", "filename": "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", "line": 3245},
              {"name": "wrapper", "filename": "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", "line": 83},
              {"name": "collective", "filename": "/job/train.py", "line": 64}, {"name": "train_step", "filename": "/job/train.py", "line": 77},
              {"name": "run", "filename": "/job/train.py", "line": 138}, {"name": "main", "filename": "/job/train.py", "line": 120},
              {"name": "<module>", "filename": "/job/train.py", "line": 155}]
    top = 10_000
    for r in range(ranks):
        last = top - 1 if r == hung else top
        es = []
        for seq in range(last - entries + 1, last + 1):
            e = {"record_id": seq, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": seq, "p2p_seq_id": 0,
                 "op_id": seq, "profiling_name": "gloo:all_reduce", "time_created_ns": 10**18 + seq * 1000 + r,
                 "input_sizes": [[1024]], "input_dtypes": ["Float"], "output_sizes": [[1024]], "output_dtypes": ["Float"],
                 "state": "scheduled", "retired": True, "timeout_ms": 600000, "is_p2p": False}
            if not as_json:
                e["frames"] = list(frames)
            es.append(e)
        body = {"version": "2.10", "pg_config": {"": {"name": "", "desc": "", "ranks": str(list(range(ranks)))}}, "pg_status": {}, "entries": es}
        data = json.dumps(body).encode() if as_json else pickle.dumps(body, protocol=2)  # what torch writes (no frames)
        (where / f"nccl_trace_rank_{r}").write_bytes(data)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="JSON dumps instead of pickle")
    ap.add_argument("--torch", metavar="PYTHON", help="also run PyTorch's analyzer with this python")
    args = ap.parse_args()
    hung = args.ranks // 3
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        write(d, args.ranks, args.entries, hung, args.json)
        size = sum(p.stat().st_size for p in d.iterdir())
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run([sys.executable, "-c", CHILD, str(d)], capture_output=True, text=True, check=True)
            runs.append(json.loads(out.stdout))
        got = runs[0]
        ok = got["kind"] == "missing" and got["culprits"] == [hung] and got["seq"] == 10_000
        print(f"flight-recorder dumps: {args.ranks} ranks x {args.entries} entries ({'JSON' if args.json else 'pickle'}), {size / 2**20:.1f} MiB")
        med = lambda k: statistics.median(r[k] for r in runs)  # noqa: E731
        print(f"  slurmdoc   read + analyze {med('s'):.3f} s wall, {med('cpu'):.3f} s CPU (median of {args.repeat}; imports {med('imports'):.3f} s more), "
              f"peak RSS {max(r['rss_kib'] for r in runs) / 1024:.0f} MiB; names rank {got['culprits']} at #{got['seq']} ({'right' if ok else 'WRONG'}: rank {hung} at #10000)")
        if args.torch:
            t0 = time.perf_counter()
            p = subprocess.run([args.torch, "-m", "torch.distributed.flight_recorder.fr_trace", "--prefix", "nccl_trace_rank_", str(d)],
                               capture_output=True, text=True)
            dt = time.perf_counter() - t0
            lines = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
            print(f"  PyTorch fr_trace {dt:.3f} s (one run, exit {p.returncode}); its last words: {lines[-1][:200] if lines else '(nothing)'}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

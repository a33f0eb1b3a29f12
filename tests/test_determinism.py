"""The same input gives byte-identical JSON, whatever the order files were written in, the
order a directory lists them in, their modification times, or the process's hash seed."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime

from slurmdoc.api import diagnose
from slurmdoc.report.json_format import render

# two nodes' files; glog lines carry no year (it comes from the newest input's mtime: the
# latest year that does not put them after it), the
# crash on node 1 is a second after node 0's last progress line
FILES = {
    "node0.log": "".join(
        [
            "[rank0]:I1231 23:59:50.000000 11 train.py:10] iteration 99\n",
            "[rank1]:I1231 23:59:51.000000 12 train.py:10] iteration 99\n",
            "[rank1]:[E1231 23:59:59.000000 12 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600001 milliseconds before timing out.\n",
        ]
    ),
    "node1.log": "".join(
        [
            "[rank2]:I1231 23:59:50.500000 21 train.py:10] iteration 99\n",
            "[rank3]:E1231 23:59:52.000000 22 train.py:40] step failed\n",
            "[rank3]: Traceback (most recent call last):\n",
            '[rank3]:   File "train.py", line 40, in <module>\n',
            "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.\n",
        ]
    ),
    "notes.txt": "job 42 on n1,n2\n",
}
MTIMES = [datetime(2024, 6, 1).timestamp(), datetime(2025, 6, 1).timestamp(), datetime(2025, 1, 2).timestamp()]


def make(d, order, mtimes):
    d.mkdir()
    for name in order:
        (d / name).write_text(FILES[name])
    for name, t in zip(order, mtimes):
        os.utime(d / name, (t, t))
    return d


def json_of(d) -> str:
    return render(diagnose([str(d)])).replace(str(d), "DIR")


def test_write_order_listing_order_and_mtimes_do_not_matter(tmp_path):
    names = sorted(FILES)
    a = make(tmp_path / "a", names, MTIMES)
    b = make(tmp_path / "b", names[::-1], MTIMES)  # other creation order, other file newest
    c = make(tmp_path / "c", [names[1], names[2], names[0]], MTIMES[::-1])
    got = {json_of(d) for d in (a, b, c)}
    assert len(got) == 1
    doc = got.pop()
    # the newest input is from June 2025: its 31 December lines were written in 2024,
    # whichever file that is
    assert '"timestamp": "2024-12-31T23:59:52"' in doc and '"category": "cuda_oom"' in doc


def test_glog_year_is_the_newest_inputs(tmp_path):
    names = sorted(FILES)
    old = make(tmp_path / "old", names, [datetime(2023, 5, 1).timestamp()] * 3)
    mixed = make(tmp_path / "mixed", names, [datetime(2023, 5, 1).timestamp(), datetime(2023, 5, 1).timestamp(), datetime(2026, 2, 1).timestamp()])
    assert '"timestamp": "2022-12-31T23:59:52"' in json_of(old)
    assert '"timestamp": "2025-12-31T23:59:52"' in json_of(mixed)


def test_byte_identical_across_processes_and_hash_seeds(tmp_path):
    d = make(tmp_path / "job", sorted(FILES), MTIMES)
    outs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-m", "slurmdoc", "diagnose", "-f", "json", str(d)], capture_output=True, env=env, timeout=120)
        assert r.returncode == 1, r.stderr
        outs.add(r.stdout)
    assert len(outs) == 1

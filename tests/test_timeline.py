"""The per-rank timeline the pictures are drawn from: first failure evidence, last progress,
last output, and the first time of each symptom."""

from __future__ import annotations

import json
import re

from slurmdoc.api import diagnose
from slurmdoc.report.json_format import render

LOG = """\
[2026-11-21 10:00:00,000] [rank0]: iteration 1
[2026-11-21 10:00:00,000] [rank1]: iteration 1
[2026-11-21 10:00:01,000] [rank0]: iteration 2
[2026-11-21 10:00:05,000] [rank1]: Traceback (most recent call last):
[2026-11-21 10:00:05,000] [rank1]:   File "train.py", line 7, in <module>
[2026-11-21 10:00:05,000] [rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
[2026-11-21 10:10:06,000] [rank2]: [E1121 10:10:06.1 1 ProcessGroupNCCL.cpp:629] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.
[2026-11-21 10:10:05,000] [rank0]: [E1121 10:10:05.1 1 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.
[2026-11-21 10:10:09,000] [rank2]: bye
"""


def test_each_rank_has_its_first_failure_progress_and_last_output(write):
    d = diagnose([write("job.log", LOG)])
    by = {t.rank: t for t in d.timeline}
    assert set(by) == {0, 1, 2}
    assert (by[1].role, by[1].category, by[1].failed_at) == ("root", "cuda_oom", "2026-11-21T10:00:05")
    assert (by[0].role, by[0].failed_at, by[0].step, by[0].progress_at) == ("symptom", "2026-11-21T10:10:05", 2, "2026-11-21T10:00:01")
    assert by[2].failed_at == "2026-11-21T10:10:06" and by[2].last_output == "2026-11-21T10:10:09"
    assert by[2].step is None
    # the symptom's first occurrence is the earliest by time, not the first printed
    (s,) = d.symptoms
    assert s.first_time == "2026-11-21T10:10:05" and s.first_source.endswith(":8")


def test_no_times_no_timeline_and_it_stays_out_of_the_json(write):
    untimed = re.sub(r"\[E1121 [^]]*\] ", "", "\n".join(line.split(" ", 2)[2] for line in LOG.splitlines()))
    assert diagnose([write("u.log", untimed)]).timeline == ()
    d = diagnose([write("job.log", LOG)])
    assert d.timeline and "timeline" not in json.loads(render(d))

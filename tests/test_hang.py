"""Naming the rank that stopped first (diagnosis.hang), alone and through diagnose()."""

from __future__ import annotations

from datetime import datetime, timedelta

from slurmdoc.api import diagnose
from slurmdoc.diagnosis.hang import by_progress, by_sequence, by_silence, laggards
from slurmdoc.models import ProgressMark, RankActivity, RankRef

T0 = datetime(2025, 3, 1, 12, 0, 0)


def where(src: int, lineno: int) -> str:
    return f"job.log:{lineno}"


def act(rank: int, step: int | None, minutes: float, marker: str = "iteration") -> RankActivity:
    ts = T0 + timedelta(minutes=minutes)
    a = RankActivity(RankRef(0, rank=rank), 0, 100 + rank, f"line of rank {rank}", ts, ts, lines=10)
    if step is not None:
        a.progress[marker] = ProgressMark(marker, "iteration", step, None, 1000, 0, 50 + rank, ts, f"iteration {step}")
    return a


def test_laggards_splits_off_the_few_ranks_clearly_behind():
    assert laggards({0: 57, 1: 57, 2: 41, 3: 56}, 1) == ([2], [0, 1, 3])
    assert laggards({0: 57, 1: 57, 2: 57}, 1) is None  # nobody behind
    assert laggards({0: 10, 1: 20, 2: 30, 3: 40}, 1) is None  # spread out: nobody clearly behind
    assert laggards({0: 10, 1: 10, 2: 50, 3: 50}, 1) is None  # half the job is not "a few"
    assert laggards({0: 100, 1: 40}, 1) == ([1], [0])  # two ranks: the one behind
    assert laggards({0: 100, 1: 99}, 5) is None  # below the minimum gap


def test_progress_names_the_rank_behind_every_other():
    acts = {r: act(r, 57 if r != 6 else 41, 30 if r != 6 else 10) for r in range(8)}
    st = by_progress(acts, where)
    assert st is not None and st.ranks == [6] and st.others == [0, 1, 2, 3, 4, 5, 7]
    assert "rank 6 stopped at iteration 41" in st.evidence[0] and "ranks 0-5, 7 reached iteration 57" in st.evidence[0]


def test_progress_compares_only_ranks_on_the_same_marker():
    # rank 3 prints `step` lines, the others `iteration` lines: nothing to compare it with
    acts = {r: act(r, 57, 30) for r in range(3)}
    acts[3] = act(3, 2, 30, marker="step")
    assert by_progress(acts, where) is None


def test_silence_names_the_rank_whose_last_line_is_much_older():
    acts = {r: act(r, None, 60 + r * 0.1) for r in range(8)}
    acts[2] = act(2, None, 5)
    st = by_silence(acts)
    assert st is not None and st.ranks == [2]
    acts[2] = act(2, None, 59)  # a minute: within normal logging jitter
    assert by_silence(acts) is None


def test_sequence_numbers_name_the_rank_at_an_earlier_collective():
    st = by_sequence({0: 57, 1: 57, 2: 57, 3: 41}, {})
    assert st is not None and st.ranks == [3] and "#41" in st.evidence[0] and "#57" in st.evidence[0]


def watchdog(rank: int, seq: int) -> str:
    return (
        f"[rank{rank}]:[E301 12:10:00.000000000 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out."
    )


def test_every_rank_timing_out_but_one_at_an_earlier_collective(write):
    text = "\n".join(watchdog(r, 57 if r != 6 else 41) for r in range(8))
    rc = diagnose([write("job.log", text)]).root_cause
    assert rc.category == "nccl_timeout" and rc.rank == 6 and rc.stragglers == (6,), rc
    assert any("#41" in e for e in rc.evidence_lines)


def test_collective_timeout_without_a_straggler_names_nobody(write):
    text = "\n".join(watchdog(r, 57) for r in range(8))
    rc = diagnose([write("job.log", text)]).root_cause
    assert rc.category == "nccl_timeout" and rc.rank is None and not rc.stragglers


def test_cancelled_job_with_one_silent_rank(write):
    lines = []
    for minute in range(0, 50, 5):
        for r in range(4):
            if r == 1 and minute > 10:
                continue
            lines.append(f"[rank{r}]:[2025-03-01 10:{minute:02d}:00] loss 2.{minute} tokens/s 4100")
    lines.append("slurmstepd: error: *** JOB 77 ON n1 CANCELLED AT 2025-03-01T11:00:00 ***")
    d = diagnose([write("job.log", "\n".join(lines))])
    rc = d.root_cause
    assert rc.category == "cancelled" and rc.rank == 1 and rc.stragglers == (1,), rc
    assert "printed nothing after 2025-03-01 10:10:00" in rc.evidence_lines[0]
    assert {p.rank for p in d.progress} == {0, 1, 2, 3}


def test_time_limit_with_a_collective_timeout_names_the_rank_that_never_reported_it(write):
    lines = [f"[rank{r}]:[2025-03-01 12:00:00] model built" for r in range(8)]
    lines += [watchdog(r, 57) for r in range(8) if r != 5]
    lines.append("slurmstepd: error: *** JOB 77 ON n1 CANCELLED AT 2025-03-01T14:00:00 DUE TO TIME LIMIT ***")
    rc = diagnose([write("job.log", "\n".join(lines))]).root_cause
    assert rc.category == "time_limit" and rc.rank == 5 and rc.stragglers == (5,), rc
    assert "never did" in rc.evidence_lines[0]


def test_time_limit_with_even_progress_names_nobody_and_reports_progress(write):
    lines = [f"[rank{r}]:[2025-03-01 10:0{i}:00] iteration {i * 10} | lm loss 2.0" for i in range(5) for r in range(4)]
    lines.append("slurmstepd: error: *** JOB 77 ON n1 CANCELLED AT 2025-03-01T11:00:00 DUE TO TIME LIMIT ***")
    d = diagnose([write("job.log", "\n".join(lines))])
    assert d.root_cause.category == "time_limit" and d.root_cause.rank is None and not d.root_cause.stragglers
    assert [p.step for p in d.progress] == [40, 40, 40, 40] and d.progress[0].unit == "iteration"

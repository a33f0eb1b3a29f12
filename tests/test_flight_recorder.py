"""The flight-recorder stage (diagnosis.recorder): the dumps' verdict fused with the log's, and
`--traces` on the command line. The verdicts here are built as slurmdoc.traces' analyzer
returns them; the real dumps of fixtures/traces/ run end to end at the bottom."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from slurmdoc.api import diagnose
from slurmdoc.diagnosis.recorder import fuse_recorder, sentence
from slurmdoc.report.html import render as render_html
from slurmdoc.report.markdown import render as render_markdown
from slurmdoc.traces import TraceVerdict
from fr_dumps import write_dumps

SCHEMA = json.loads((Path(__file__).parent / "contract_schema.json").read_text())
SLURMDOC = [sys.executable, "-m", "slurmdoc"]
TIMEOUT = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 5000ms for recv operation to complete"


def verdict(kind="missing", culprits=(5,), n=8, seq=7, op="all_reduce", **kw) -> TraceVerdict:
    members = list(range(n))
    fields = dict(
        kind=kind, culprits=list(culprits), evidence="dump", pg="0", pg_desc="default_pg", members=members, seq=seq,
        p2p=False, op=op, sizes=[[4]], missing_ranks=list(culprits) if kind == "missing" else [], mismatch=None,
        waiting_ranks=[r for r in members if r not in culprits],
        culprit_last={"rank": culprits[0], "seq": seq - 1, "op": op, "frames": ["train.py:96 in step", "train.py:120 in main"]} if culprits else None,
        ranks_dumped=members, absent_dumps=[], files=n, warnings=[],
    )
    fields.update(kw)
    return TraceVerdict(**fields)


def log(tmp_path: Path, lines: list[str], name="job.log") -> str:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def hang_log(tmp_path: Path, culprit=5, n=8, prefix=True) -> str:
    lines = [f"[rank{r}]:step 10 loss 0.5" if prefix else "step 10 loss 0.5" for r in range(n)]
    lines += [f"[rank{r}]:{TIMEOUT}" if prefix else TIMEOUT for r in range(n) if r != culprit]
    return log(tmp_path, lines)


def crash_log(tmp_path: Path, rank=2, n=4) -> str:
    lines = [f"[rank{rank}]:Traceback (most recent call last):", f'[rank{rank}]:  File "train.py", line 40, in <module>',
             f"[rank{rank}]:ValueError: bad batch"]
    lines += [f"[rank{r}]:{TIMEOUT}" for r in range(n) if r != rank]
    return log(tmp_path, lines)


# ---- a hang: the dumps name the root rank


def test_timeout_hang_takes_the_rank_the_dumps_name(tmp_path):
    d = fuse_recorder(diagnose([hang_log(tmp_path)]), verdict())
    rc = d.root_cause
    assert d.status == "failed" and rc.category == "nccl_timeout"
    assert (rc.rank, rc.evidence, rc.rank_source) == (5, "flight_recorder", "flight_recorder")
    assert d.flight_recorder.role == "root"
    coll = rc.model_dump(mode="json")["collective"]
    assert {"pg", "seq", "op", "sizes", "missing_ranks", "mismatch"} <= set(coll)
    assert (coll["pg"], coll["seq"], coll["op"], coll["missing_ranks"]) == ("0", 7, "all_reduce", [5])
    said = rc.evidence_lines[0]
    assert "rank 5 never entered all_reduce #7 of the default group (ranks 0-7)" in said.lower()
    assert "last issued #6 at train.py:96" in said and "the other 7 ranks waited there and timed out" in said
    assert "rank 5" in d.verdict and "flight recorder" in d.verdict
    assert any("train.py:120" in e for e in rc.evidence_lines)  # the culprit's last frames
    assert not any(e.endswith("is not named in the log") for e in rc.evidence_lines)


@pytest.mark.parametrize("culprit", [0, 3, 7])
def test_the_culprit_is_whichever_rank_the_dumps_name(tmp_path, culprit):
    d = fuse_recorder(diagnose([hang_log(tmp_path, culprit)]), verdict(culprits=(culprit,)))
    assert d.root_cause.rank == culprit and d.root_cause.ranks == (culprit,)


def test_log_without_rank_prefixes_takes_the_rank_from_the_dumps(tmp_path):
    before = diagnose([hang_log(tmp_path, prefix=False)])
    assert before.root_cause is not None and before.root_cause.rank is None
    d = fuse_recorder(before, verdict(culprits=(6,)))
    assert d.root_cause.rank == 6 and d.root_cause.rank_source == "flight_recorder"


def test_time_limit_hang_names_the_rank_and_says_how_it_ended(tmp_path):
    lines = [f"[rank{r}]:step 10 loss 0.5" for r in range(4)]
    lines.append("slurmstepd: error: *** JOB 42 ON n1 CANCELLED AT 2026-11-26T10:00:00 DUE TO TIME LIMIT ***")
    before = diagnose([log(tmp_path, lines)])
    assert before.root_cause.category == "time_limit"
    d = fuse_recorder(before, verdict(culprits=(1,), n=4))
    assert d.root_cause.category == "time_limit" and d.root_cause.rank == 1
    assert "until the job hit its time limit" in d.root_cause.evidence_lines[0]


def test_absent_dump_is_stated_as_weaker_evidence(tmp_path):
    v = verdict(culprits=(5,), evidence="absent_dump", ranks_dumped=[0, 1, 2, 3, 4, 6, 7], absent_dumps=[5], culprit_last=None)
    d = fuse_recorder(diagnose([hang_log(tmp_path)]), v)
    rc = d.root_cause
    assert rc.rank == 5 and rc.collective.dump_evidence == "absent_dump"
    assert "weaker evidence" in rc.evidence_lines[0] and "left no dump" in rc.evidence_lines[0]
    assert "its dump missing" in d.verdict
    text = render_markdown(d)
    assert "weaker evidence" in text and "no dump from rank 5" in text


# ---- a mismatch: the odd rank out, even when the launcher names its neighbour


def test_mismatch_names_the_odd_rank_not_the_receiving_neighbour(tmp_path):
    lines = ["[rank1]:Traceback (most recent call last):", '[rank1]:  File "train.py", line 50, in <module>',
             "[rank1]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Received data size doesn't match expected size"]
    before = diagnose([log(tmp_path, lines)])
    assert before.root_cause.rank == 1
    v = verdict(kind="mismatch", culprits=(2,), n=4, missing_ranks=[],
                mismatch={"rank": 2, "field": "input_sizes", "expected": [[4]], "got": [[5]]})
    d = fuse_recorder(before, v)
    rc = d.root_cause
    assert rc.rank == 2 and rc.evidence == "flight_recorder" and rc.category == "nccl_error"
    assert rc.collective.mismatch["rank"] == 2
    assert "rank 2 entered all_reduce #7" in rc.evidence_lines[0].lower() and "[[5]]" in rc.evidence_lines[0]
    assert any("rank 1" in e for e in rc.evidence_lines)  # the log's own pick, kept as evidence


# ---- a crash the log shows stays the root cause


def test_earlier_crash_stays_the_root_and_the_dumps_confirm_it(tmp_path):
    before = diagnose([crash_log(tmp_path)])
    d = fuse_recorder(before, verdict(culprits=(2,), n=4))
    assert d.root_cause.category == before.root_cause.category == "python_exception"
    assert d.root_cause.rank == 2 and d.root_cause.evidence == before.root_cause.evidence
    assert d.flight_recorder.role == "confirms" and d.verdict == before.verdict
    assert d.root_cause.evidence_lines[0].startswith("The flight-recorder dumps confirm it")


def test_earlier_crash_on_another_rank_stays_the_root_and_the_dumps_add_context(tmp_path):
    before = diagnose([crash_log(tmp_path)])
    d = fuse_recorder(before, verdict(culprits=(3,), n=4))
    assert d.root_cause.rank == 2 and d.root_cause.rank_source != "flight_recorder"
    assert d.flight_recorder.role == "context"
    assert "stays the root cause" in d.root_cause.evidence_lines[0]


# ---- no failure, no culprit


def test_healthy_run_with_dumps_stays_no_failure(tmp_path):
    ok = log(tmp_path, [f"[rank{r}]:step 10 loss 0.5" for r in range(4)])
    for v in (verdict(kind="consistent", culprits=(), n=4, missing_ranks=[]), verdict(culprits=(1,), n=4)):
        d = fuse_recorder(diagnose([ok]), v)
        assert d.status == "no_failure" and d.root_cause is None
        assert d.flight_recorder.role in ("consistent", "ignored")


def test_consistent_dumps_leave_a_hang_as_the_log_says(tmp_path):
    before = diagnose([hang_log(tmp_path)])
    d = fuse_recorder(before, verdict(kind="consistent", culprits=(), missing_ranks=[]))
    assert d.root_cause.rank == before.root_cause.rank and d.root_cause.evidence == before.root_cause.evidence
    assert d.flight_recorder.role == "consistent" and "agree" in d.flight_recorder.summary


def test_subgroup_words_name_the_group(tmp_path):
    v = verdict(pg="1", pg_desc="tp", members=[4, 5], waiting_ranks=[4], culprits=(5,))
    assert sentence(v, "nccl_timeout").startswith("rank 5 never entered all_reduce #7 of group 1 \"tp\" (ranks 4-5)")
    assert "; rank 4 waited there and timed out" in sentence(v, "nccl_timeout")
    elsewhere = v.model_copy(update={"culprit_last": {"rank": 5, "pg": "0", "seq": 9, "op": "all_reduce", "frames": []}})
    assert "it last issued all_reduce #9 of the default group;" in sentence(elsewhere, "nccl_timeout")


def test_a_different_collective_is_said_as_such():
    v = verdict(kind="mismatch", culprits=(1,), n=4, missing_ranks=[], mismatch={"rank": 1, "field": "op", "expected": "all_reduce", "got": "broadcast"})
    assert sentence(v).startswith("rank 1 called broadcast as collective #7 of the default group (ranks 0-3), where the other 3 ranks called all_reduce")


# ---- the reports and the JSON


def test_every_format_says_it(tmp_path):
    d = fuse_recorder(diagnose([hang_log(tmp_path)]), verdict(), "/tmp/dumps/")
    words = "never entered all_reduce #7"
    assert words in render_markdown(d) and words in render_html(d)
    doc = json.loads(d.model_dump_json())
    jsonschema.validate(doc, SCHEMA)
    assert doc["root_cause"]["evidence"] == "flight_recorder" and doc["flight_recorder"]["path"] == "/tmp/dumps/"
    assert "8 dump files from /tmp/dumps/" in render_markdown(d)


def test_cli_bad_traces_is_one_line_and_exit_2(tmp_path):
    p = subprocess.run([*SLURMDOC, "diagnose", hang_log(tmp_path), "--traces", str(tmp_path / "nothing-here")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr and "--traces" in p.stderr


def test_waiting_ranks_errors_with_no_cause_yield_to_the_dumps(tmp_path):
    lines = [f"[rank{r}]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.1]:1234"
             for r in (0, 1, 3)]
    before = diagnose([log(tmp_path, lines)])
    if not (before.root_cause is not None and before.root_cause.promoted):
        pytest.skip("the rule pack reads no closed connection as a promoted symptom")
    d = fuse_recorder(before, verdict(culprits=(2,), n=4))
    assert d.root_cause.rank == 2 and d.flight_recorder.role == "root"


# ---- end to end: dumps shaped as torch writes them (pickle, version 2.x), read by slurmdoc.traces


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*SLURMDOC, *args], capture_output=True, text=True, timeout=120)


def test_cli_names_the_rank_that_never_entered(tmp_path):
    dumps = write_dumps(tmp_path / "fr", 8, {5: 6, **{r: 7 for r in range(8) if r != 5}})
    p = run_cli("diagnose", hang_log(tmp_path), "--traces", str(dumps), "--format", "json")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    jsonschema.validate(doc, SCHEMA)
    rc = doc["root_cause"]
    assert (rc["rank"], rc["evidence"], rc["rank_source"]) == (5, "flight_recorder", "flight_recorder")
    assert rc["collective"]["seq"] == 7 and rc["collective"]["op"] == "all_reduce" and rc["collective"]["missing_ranks"] == [5]
    text = run_cli("diagnose", hang_log(tmp_path), "--traces", str(dumps), "--no-picture").stdout
    assert "rank 5 never entered all_reduce #7 of the default group (ranks 0-7)" in text.lower()
    assert "/job/train.py:62" in text


def test_cli_takes_a_prefix_too(tmp_path):
    write_dumps(tmp_path / "fr", 4, {2: 3, 0: 4, 1: 4, 3: 4})
    p = run_cli("diagnose", hang_log(tmp_path, culprit=2, n=4), "--traces", str(tmp_path / "fr" / "nccl_trace_rank_"), "--format", "json")
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["root_cause"]["rank"] == 2


def test_cli_refuses_a_pickle_that_would_run_code_in_one_line(tmp_path):
    import pickle

    class Boom:
        def __reduce__(self):
            return (Path.touch, (tmp_path / "ran",))

    d = tmp_path / "fr"
    d.mkdir()
    (d / "nccl_trace_rank_0").write_bytes(pickle.dumps({"version": "2.10", "entries": [Boom()]}))
    p = run_cli("diagnose", hang_log(tmp_path, n=2, culprit=1), "--traces", str(d))
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert not (tmp_path / "ran").exists()


def test_cli_job_carries_the_culprit_into_the_joined_verdict(tmp_path):
    dumps = write_dumps(tmp_path / "fr", 4, {1: 2, 0: 3, 2: 3, 3: 3})
    p = run_cli("diagnose", "--job", "42", "--log", hang_log(tmp_path, culprit=1, n=4), "--sacct-file", str(tmp_path / "none"),
                "--traces", str(dumps), "--format", "json")
    doc = json.loads(p.stdout)
    assert doc["root_cause"]["rank"] == 1 and doc["job"]["rank"] == 1


def test_cli_bad_traces_with_job_is_exit_2(tmp_path):
    p = run_cli("diagnose", "--job", "42", "--log", hang_log(tmp_path), "--traces", str(tmp_path / "nothing"))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


# ---- the real fixtures: torchrun + gloo runs with their dumps (fixtures/traces/<case>/)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "traces"
CASES = sorted(p.parent.name for p in FIXTURES.glob("*/truth.yaml"))


NO_CASES = [pytest.param("-", marks=pytest.mark.skip(reason="no fixtures/traces yet"))]


def _truth_and_diagnosis(case: str):
    import yaml

    d = FIXTURES / case
    truth = yaml.safe_load((d / "truth.yaml").read_text())
    return truth, diagnose([str(d / "job.log")], traces=str(d / truth.get("traces", "traces")))


@pytest.mark.parametrize("case", CASES or NO_CASES)
def test_fused_verdict_on_the_real_fixtures(case):
    truth, diag = _truth_and_diagnosis(case)
    assert diag.status == truth["expect_status"]
    rc = diag.root_cause
    if truth["expect_status"] == "no_failure":
        assert rc is None
        return
    assert rc.category == truth["category"]
    culprits = truth.get("culprits") or []
    assert rc.rank in culprits and set(rc.ranks) <= set(culprits)
    if truth.get("evidence"):
        assert rc.evidence == truth["evidence"]
    if truth.get("rank_source"):
        assert rc.rank_source == truth["rank_source"]
    if truth.get("trace_evidence"):
        assert rc.collective.dump_evidence == truth["trace_evidence"]
        if truth["trace_evidence"] == "absent_dump":
            assert "weaker evidence" in rc.evidence_lines[0]


@pytest.mark.parametrize("case", CASES or NO_CASES)
def test_fused_collective_on_the_real_fixtures(case):
    truth, diag = _truth_and_diagnosis(case)
    rc = diag.root_cause
    if truth.get("seq") is None:
        assert rc is None or rc.collective is None
        return
    c = rc.collective
    assert c is not None and (c.pg, c.seq, c.op) == (str(truth["pg"]), truth["seq"], truth["op"])
    if truth.get("kind") == "mismatch":
        assert c.mismatch is not None and c.mismatch["rank"] == rc.rank

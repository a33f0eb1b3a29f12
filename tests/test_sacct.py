"""sacct parsing, on outputs saved from a real Slurm 22.05 (tests/data/sacct/, see PROVENANCE
there and scripts/make-sacct-fixtures), plus the edge cases of the parsable format."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from slurmdoc.errors import InputError
from slurmdoc.slurm.exitcodes import ExitCode
from slurmdoc.slurm.sacct import (
    FIELDS,
    parse_cpu_time,
    parse_duration,
    parse_psv,
    parse_req_mem,
    parse_size,
    read_sacct_file,
    select,
    split_job_id,
)

DATA = Path(__file__).parent / "data" / "sacct"
JOBS = dict(line.split("=") for line in (DATA / "jobs.txt").read_text().split())


def rows_by_id(name: str, ext: str):
    return {r.job_id: r for r in read_sacct_file(str(DATA / f"{name}.{ext}"))}


def test_saved_output_has_the_fields_slurmdoc_asks_for():
    """The capture is real (a Slurm 22.05 cluster), so it cannot be edited to follow FIELDS:
    fields added after it (TotalCPU) come in when scripts/make-sacct-fixtures next runs."""
    header = (DATA / "all.psv").read_text().splitlines()[0].split("|")
    added_since = ("TotalCPU",)
    assert tuple(header) == tuple(f for f in FIELDS if f not in added_since or f in header)


@pytest.mark.parametrize("ext", ["psv", "json"])
def test_exit1_rows(ext):
    j = JOBS["exit1"]
    rows = rows_by_id("exit1", ext)
    assert set(rows) == {j, f"{j}.batch", f"{j}.0"}
    step = rows[f"{j}.0"]
    assert step.state == "FAILED" and step.numbered and step.job == j
    assert step.nodelist == "n[1-2]"
    if ext == "psv":  # 22.05's JSON drops non-zero exit statuses (see sacct._json_exit)
        assert step.exit_code == ExitCode(1, 0)
        assert rows[j].derived == ExitCode(1, 0)
    else:
        assert step.exit_code is None


@pytest.mark.parametrize("ext", ["psv", "json"])
def test_signals_survive_both_formats(ext):
    j = JOBS["sigkill"]
    rows = rows_by_id("sigkill", ext)
    assert rows[f"{j}.0"].state == "CANCELLED"
    assert rows[f"{j}.0"].exit_code == ExitCode(0, 9)
    j = JOBS["segfault"]
    assert rows_by_id("segfault", ext)[f"{j}.0"].exit_code == ExitCode(0, 11)


def test_cancelled_by_uid_and_timeout_limits():
    j = JOBS["cancel"]
    rows = rows_by_id("cancel", "psv")
    assert rows[j].state == "CANCELLED" and rows[j].state_by == "0"
    assert rows_by_id("cancel", "json")[j].state_by == "root"  # JSON names the user
    t = JOBS["timeout"]
    for ext in ("psv", "json"):
        job = rows_by_id("timeout", ext)[t]
        assert job.state == "TIMEOUT"
        assert job.timelimit_s == 60
        assert job.elapsed_s is not None and job.elapsed_s >= 60


def test_array_tasks_are_separate_jobs_with_raw_ids():
    a = JOBS["array"]
    for ext in ("psv", "json"):
        rows = read_sacct_file(str(DATA / f"array.{ext}"))
        jobs = sorted(r.job for r in rows if r.is_job)
        assert jobs == [f"{a}_1", f"{a}_2", f"{a}_3"]
        failing = [r for r in rows if r.job == f"{a}_2" and r.is_job][0]
        assert failing.state == "FAILED"
        # an array task has its own raw job id; asking for it selects that task only
        kept = select(rows, [failing.raw_id])
        assert {r.job for r in kept} == {f"{a}_2"}
        assert {r.job for r in select(rows, [a])} == set(jobs)


def test_het_job_components_group_under_the_leader():
    h = JOBS["hetjob"]
    for ext in ("psv", "json"):
        rows = read_sacct_file(str(DATA / f"hetjob.{ext}"))
        assert {r.job for r in rows} == {f"{h}+0", f"{h}+1"}
        assert {r.group for r in rows} == {h}
        assert f"{h}+1.1" in {r.job_id for r in rows}


def test_memory_fields():
    o = JOBS["ok"]
    rows = rows_by_id("ok", "psv")
    assert rows[o].req_mem_bytes == 400 << 20 and rows[o].req_mem_per == "job"  # 200M x 2 nodes
    assert rows[f"{o}.0"].max_rss_bytes == 320708 << 10
    assert rows[f"{o}.0"].max_rss_node == "n1"
    jrows = rows_by_id("ok", "json")
    assert jrows[f"{o}.0"].max_rss_bytes is not None and jrows[f"{o}.0"].max_rss_bytes > 300 << 20


def test_all_jobs_in_one_file_both_formats_agree_on_states():
    p = {r.job_id: r.state for r in read_sacct_file(str(DATA / "all.psv"))}
    j = {r.job_id: r.state for r in read_sacct_file(str(DATA / "all.json"))}
    assert p == j
    assert len(p) == 41


def test_stdin_and_format_detection():
    text = (DATA / "exit1.json").read_text()
    rows = read_sacct_file("-", io.StringIO(text))
    assert rows[0].job == JOBS["exit1"]
    rows = read_sacct_file("-", io.StringIO((DATA / "exit1.psv").read_text()))
    assert rows[0].exit_code == ExitCode(1, 0)


# ---- the parsable format's edge cases (hand-written lines, shaped like the saved ones)


def test_trailing_delimiter_of_dash_p_and_pipe_in_last_field():
    out = parse_psv([
        "JobID|State|ExitCode|SubmitLine|",
        "5|FAILED|2:0|srun bash -c 'a | b'|",
    ])
    assert out[0].exit_code == ExitCode(2, 0)
    assert out[0].submit_line == "srun bash -c 'a | b'"
    out = parse_psv(["JobID|State|SubmitLine", "5|FAILED|x | y | z"])
    assert out[0].submit_line == "x | y | z"


def test_a_value_holding_many_newlines_is_joined_in_time_linear_in_its_length():
    # a submit line (the user's free text, up to the kernel's argument limit) holding a
    # newline every other character: the record is joined once, not recounted at each line
    from time import process_time

    from slurmdoc.slurm.sacct import parse_own_psv

    d = "|0f1e2d3c4b5a6978|"
    submit = "sbatch " + "a\n" * 200_000 + "run.sh"
    out = d.join(["JobID", "State", "ExitCode", "SubmitLine"]) + "\n" + d.join(["5", "FAILED", "2:0", submit]) + "\n"
    t0 = process_time()
    (row,) = parse_own_psv(out, d)
    assert process_time() - t0 < 1.0
    assert row.job_id == "5" and row.exit_code == ExitCode(2, 0) and row.submit_line.startswith("sbatch a")


def test_no_header_is_a_clear_error(tmp_path):
    p = tmp_path / "noheader.txt"
    p.write_text("2|sd-exit1|FAILED|1:0\n")
    with pytest.raises(InputError, match="header"):
        read_sacct_file(str(p))


@pytest.mark.parametrize("content,match", [
    (b"", "empty"),
    (b"\x00\x01\x02binary", "binary"),
    (b'{"jobs": 3}', "jobs"),
    (b"{not json", "not valid JSON"),
    (b"JobID   JobName  State\n------ ------ -----\n2 x FAILED\n", "header"),
])
def test_bad_files(tmp_path, content, match):
    p = tmp_path / "f"
    p.write_bytes(content)
    with pytest.raises(InputError, match=match):
        read_sacct_file(str(p))


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_sacct_file(str(tmp_path / "nope"))
    with pytest.raises(InputError, match="directory"):
        read_sacct_file(str(tmp_path))


@pytest.mark.parametrize("text,secs", [
    ("00:01:05", 65), ("1-02:00:00", 93600), ("05:30", 330), ("00:00:00", 0), ("UNLIMITED", None),
    ("Partition_Limit", None), ("", None), ("365-00:00:00", 365 * 86400), ("01:02.500", 62),
])
def test_durations(text, secs):
    assert parse_duration(text) == secs


@pytest.mark.parametrize("text,secs", [
    # the three forms sacct prints TotalCPU in: MM:SS.mmm, HH:MM:SS, D-HH:MM:SS
    ("00:00.027", 0.027), ("12:34.567", 754.567), ("01:02:03", 3723), ("2-03:04:05", 2 * 86400 + 11045),
    ("00:00:00", 0), (" 05:00.5 ", 300.5), ("1-00:00:00.250", 86400.25), ("999999-23:59:59", 999999 * 86400 + 86399),
    # hostile or odd: unknown, never a guess, never an exception
    ("", None), (None, None), ("INVALID", None), ("Unknown", None), ("-00:01.000", None), ("00:-1", None),
    ("00:75.000", None), ("01:60:00", None), ("1-24:00:00", None), ("1-05:00", None), ("12", None), ("1.5", None),
    ("nan", None), ("00:00:00:00", None), ("1--02:00:00", None), ("00:01.", None), ("00:01.1234567", None),
    ("１２:００.０", None), ("00:01.000\x00", None), ("0x1f:00", None), ("1e3:00", None), ("9" * 400, None),
])
def test_cpu_times(text, secs):
    got = parse_cpu_time(text)
    assert got == (pytest.approx(secs) if secs is not None else None)


def test_total_cpu_from_both_formats():
    """-P: the TotalCPU column; --json: time.total {seconds, microseconds} (real 22.05 output)."""
    (row,) = parse_psv(["JobID|Elapsed|AllocCPUS|TotalCPU", "7|00:10:00|4|20:00.500"])
    assert (row.total_cpu_s, row.alloc_cpus, row.elapsed_s) == (1200.5, 4, 600)
    rows = rows_by_id("timeout", "json")
    job = JOBS["timeout"]
    assert rows[job].total_cpu_s == 0 and rows[job].alloc_cpus == 2  # 22.05 leaves the job's own at 0
    assert rows[f"{job}.batch"].total_cpu_s == pytest.approx(0.001922)


@pytest.mark.parametrize("total", [{"seconds": -5, "microseconds": 0}, {"seconds": 1, "microseconds": 10**7},
                                   {"seconds": "x"}, "00:01", None, {"seconds": True}])
def test_odd_json_cpu_times_are_unknown(total):
    import json

    doc = {"jobs": [{"job_id": 1, "state": {"current": "FAILED"}, "time": {"elapsed": 10, "total": total}}]}
    (row,) = read_sacct_file("-", io.StringIO(json.dumps(doc)))
    assert row.total_cpu_s is None


@pytest.mark.parametrize("text,expect", [
    ("8000M", (8000 << 20, "job")), ("4000Mn", (4000 << 20, "node")), ("1000Mc", (1000 << 20, "cpu")),
    ("2G", (2 << 30, "job")), ("", (None, "job")), ("0", (None, "job")),
])
def test_req_mem(text, expect):
    assert parse_req_mem(text) == expect


def test_sizes():
    assert parse_size("320708K") == 320708 << 10
    assert parse_size("1.5G") == int(1.5 * (1 << 30))
    assert parse_size("12", "K") == 12 << 10
    assert parse_size("") is None and parse_size("n/a") is None


@pytest.mark.parametrize("jid,expect", [
    ("12", ("12", None)), ("12.batch", ("12", "batch")), ("12_3.0", ("12_3", "0")),
    ("12+1.0", ("12+1", "0")), ("12_[1-3]", ("12_[1-3]", None)), ("12_[1-3%2]", ("12_[1-3%2]", None)),
])
def test_split_job_id(jid, expect):
    assert split_job_id(jid) == expect


def test_newer_json_shapes_hand_written():
    """Slurm 23.x/24.x number and state shapes (a hand-written file: see its _comment)."""
    rows = {r.job_id: r for r in read_sacct_file(str(DATA / "handwritten-v0.0.40-shape.json"))}
    assert rows["3"].state == "FAILED" and rows["3"].exit_code == ExitCode(9, 0)
    assert rows["3"].derived == ExitCode(0, 9) and rows["3"].timelimit_s == 3600
    assert rows["3"].stdout == "/tmp/sd-fixtures-pVrm/slurm-%j.out"
    assert rows["3"].req_mem_bytes == 400 << 20
    step = rows["3.0"]  # "3.0" spelled whole in the step id
    assert (step.step, step.state, step.exit_code) == ("0", "CANCELLED", ExitCode(0, 9))
    assert step.max_rss_bytes == 397000000 and step.max_rss_node == "n2" and step.max_rss_task == 1
    assert rows["3.batch"].start is not None
    task = rows["10_2"]
    assert task.raw_id == "15" and task.timelimit_s is None and task.exit_code == ExitCode(3, 0)
    assert rows["10_2.0"].exit_code == ExitCode(3, 0)

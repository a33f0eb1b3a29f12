"""Triage verdicts, from sacct output saved from a real Slurm (tests/data/sacct/), and the
`slurmdoc triage` command. What each job did is in tests/slurm_jobs/<name>.sbatch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slurmdoc.api import triage
from slurmdoc.cli import app
from slurmdoc.slurm.exitcodes import ExitCode
from slurmdoc.slurm.sacct import SacctRow
from slurmdoc.slurm.triage import triage_job

DATA = Path(__file__).parent / "data" / "sacct"
JOBS = dict(line.split("=") for line in (DATA / "jobs.txt").read_text().split())
SCHEMA = json.loads((Path(__file__).parent / "contract_schema.json").read_text())

# name -> (status, category, first failing step suffix) as planted by the job scripts
TRUTH = {
    "exit1": ("failed", "unknown", ".0"),
    "sigkill": ("failed", "killed", ".0"),
    "segfault": ("failed", "segfault", ".0"),
    "timeout": ("failed", "time_limit", ".0"),
    "cancel": ("failed", "cancelled", ".0"),
    "pyranks": ("failed", "unknown", ".batch"),  # sacct records the srun step COMPLETED (sic)
    "killonbad": ("failed", "sigterm_cascade", ".0"),
    "swallowed": ("ok", None, None),  # the script ignored srun's status: sacct cannot tell
    "ok": ("ok", None, None),
}


@pytest.mark.parametrize("ext", ["psv", "json"])
@pytest.mark.parametrize("name", sorted(TRUTH))
def test_saved_jobs(name, ext):
    status, category, step = TRUTH[name]
    rep = triage([JOBS[name]], sacct_file=str(DATA / f"{name}.{ext}"))
    assert len(rep.jobs) == 1
    j = rep.jobs[0]
    assert (j.status, j.category) == (status, category)
    if step is None:
        assert j.first_failed_step is None
    else:
        assert j.first_failed_step is not None and j.first_failed_step.id == JOBS[name] + step


def test_words_for_the_planted_failures():
    j = triage([JOBS["exit1"]], sacct_file=str(DATA / "exit1.psv")).jobs[0]
    assert j.summary == f"step {JOBS['exit1']}.0: exited 1"
    j = triage([JOBS["sigkill"]], sacct_file=str(DATA / "sigkill.psv")).jobs[0]
    assert "SIGKILL" in j.exit_meaning and "job row" in j.exit_meaning  # the job row's 9:0
    assert "SIGKILL" in j.first_failed_step.meaning  # the step's 0:9
    assert any("dmesg" in n for n in j.notes)
    j = triage([JOBS["timeout"]], sacct_file=str(DATA / "timeout.psv")).jobs[0]
    assert "time limit" in j.first_failed_step.meaning
    assert j.time_note.startswith("ran 00:01:") and "00:01:00 limit" in j.time_note
    j = triage([JOBS["cancel"]], sacct_file=str(DATA / "cancel.psv")).jobs[0]
    assert j.summary == "cancelled by root"
    assert "cancellation" in j.first_failed_step.meaning
    j = triage([JOBS["killonbad"]], sacct_file=str(DATA / "killonbad.psv")).jobs[0]
    assert "kill-on-bad-exit" in j.first_failed_step.meaning
    j = triage([JOBS["pyranks"]], sacct_file=str(DATA / "pyranks.psv")).jobs[0]
    assert any("every srun step is recorded COMPLETED" in n for n in j.notes)


def test_memory_over_the_request():
    j = triage([JOBS["ok"]], sacct_file=str(DATA / "ok.psv")).jobs[0]
    assert j.req_mem_per_node_bytes == 200 << 20
    assert j.max_rss_bytes == 320708 << 10
    assert "157%" in j.memory_note and "over the request" in j.memory_note


def test_array_tasks_each_get_a_verdict():
    a = JOBS["array"]
    for ext in ("psv", "json"):
        rep = triage([a], sacct_file=str(DATA / f"array.{ext}"))
        got = {j.job_id: (j.status, j.array_task_id) for j in rep.jobs}
        assert got == {f"{a}_1": ("ok", "1"), f"{a}_2": ("failed", "2"), f"{a}_3": ("ok", "3")}
        assert rep.status == "failed"
    one = triage([f"{a}_2"], sacct_file=str(DATA / "array.psv"))
    assert [j.job_id for j in one.jobs] == [f"{a}_2"]
    assert one.jobs[0].summary == f"step {a}_2.0: exited 3"


def test_het_job_is_one_verdict_naming_the_failing_component():
    h = JOBS["hetjob"]
    rep = triage([h], sacct_file=str(DATA / "hetjob.psv"))
    assert len(rep.jobs) == 1
    j = rep.jobs[0]
    assert j.job_id == h and j.components == (f"{h}+0", f"{h}+1")
    assert j.first_failed_step.id == f"{h}+1.1" and j.category == "unknown"
    assert j.summary == f"step {h}+1.1: exited 4"


def test_many_jobs_and_unknown_ids():
    ids = list(JOBS.values()) + ["999999"]
    rep = triage(ids, sacct_file=str(DATA / "all.psv"))
    assert rep.not_found == ("999999",)
    assert len(rep.jobs) == 13  # 11 jobs, the array counted as its 3 tasks
    assert rep.status == "failed"


# ---- states no local job produced: rows built by hand, with the shapes sacct gives them


def _rows(job_state: str, step_state: str, step_ec: str, job_ec: str = "0:0", by=None, rss=None, mem=None):
    return [
        SacctRow(job_id="7", job="7", step=None, state=job_state, state_by=by, exit_code=ExitCode.parse(job_ec),
                 derived=ExitCode.parse(step_ec), req_mem_bytes=mem, nnodes=1, elapsed_s=100, timelimit_s=6000),
        SacctRow(job_id="7.batch", job="7", step="batch", state=step_state, exit_code=ExitCode.parse(job_ec), end="2"),
        SacctRow(job_id="7.0", job="7", step="0", state=step_state, exit_code=ExitCode.parse(step_ec),
                 max_rss_bytes=rss, end="1"),
    ]


@pytest.mark.parametrize("job_state,step_state,step_ec,category", [
    ("OUT_OF_MEMORY", "OUT_OF_MEMORY", "0:125", "host_oom"),
    ("FAILED", "OUT_OF_MEMORY", "0:125", "host_oom"),  # the job says FAILED, a step OUT_OF_MEMORY
    ("NODE_FAIL", "CANCELLED", "0:15", "node_failure"),
    ("PREEMPTED", "CANCELLED", "0:15", "preemption"),
    ("BOOT_FAIL", "CANCELLED", "0:0", "node_failure"),
    ("DEADLINE", "CANCELLED", "0:15", "time_limit"),
])
def test_scheduler_states(job_state, step_state, step_ec, category):
    j = triage_job(_rows(job_state, step_state, step_ec))
    assert j.status == "failed" and j.category == category


def test_sigkill_at_the_memory_request_is_host_oom():
    j = triage_job(_rows("FAILED", "CANCELLED", "0:9", job_ec="9:0", rss=990 << 20, mem=1000 << 20))
    assert j.category == "host_oom"
    j = triage_job(_rows("FAILED", "CANCELLED", "0:9", job_ec="9:0", rss=100 << 20, mem=1000 << 20))
    assert j.category == "killed"


def _cpu_rows(job_cpu, step_cpus, elapsed=600, alloc=4, job="7"):
    rows = [SacctRow(job_id=job, job=job, step=None, state="FAILED", exit_code=ExitCode(1, 0), elapsed_s=elapsed,
                     alloc_cpus=alloc, total_cpu_s=job_cpu)]
    return rows + [SacctRow(job_id=f"{job}.{i}", job=job, step=str(i), state="FAILED", exit_code=ExitCode(1, 0),
                            total_cpu_s=c, end=str(i)) for i, c in enumerate(step_cpus)]


def test_cpu_efficiency_is_totalcpu_over_elapsed_times_allocated_cpus():
    j = triage_job(_cpu_rows(None, [1200.0, 300.0]))  # steps: 25 min of CPU in 4 CPUs x 10 min
    assert (j.total_cpu_s, j.alloc_cpus, j.cpu_efficiency) == (1500.0, 4, 0.625)
    assert j.cpu_note.startswith("CPU efficiency 62%: 00:25:00 of CPU time in 00:40:00 of core-walltime (4 CPUs)")
    j = triage_job(_cpu_rows(1500.0, [1200.0, 300.0]))  # -P: the job row repeats the steps' sum
    assert j.cpu_efficiency == 0.625
    j = triage_job(_cpu_rows(0.0, [1200.0, None]))  # --json leaves the job's own at 0: the steps count
    assert j.cpu_efficiency == 0.5
    j = triage_job(_cpu_rows(600.0, [None]))  # no step has it: the job row's
    assert j.cpu_efficiency == 0.25


@pytest.mark.parametrize("job_cpu, steps, elapsed, alloc", [
    (None, [None], 600, 4),  # no TotalCPU anywhere (an older capture)
    (None, [60.0], 0, 4),  # ended at once: no core-walltime to divide by
    (None, [60.0], None, 4),
    (None, [60.0], 600, None),
    (None, [60.0], 600, 0),
])
def test_cpu_efficiency_missing_parts_are_unknown(job_cpu, steps, elapsed, alloc):
    j = triage_job(_cpu_rows(job_cpu, steps, elapsed, alloc))
    assert j.cpu_efficiency is None
    assert (j.cpu_note is None) == (j.total_cpu_s is None)


def test_cpu_efficiency_over_the_allocation_is_flagged():
    j = triage_job(_cpu_rows(None, [9000.0]))
    assert j.cpu_efficiency == 3.75 and "inconsistent" in j.cpu_note


def test_het_job_cpu_efficiency_adds_its_components():
    rows = [SacctRow(job_id="12+0", job="12+0", step=None, state="FAILED", exit_code=ExitCode(1, 0), elapsed_s=100,
                     alloc_cpus=2),
            SacctRow(job_id="12+1", job="12+1", step=None, state="COMPLETED", exit_code=ExitCode(0, 0), elapsed_s=100,
                     alloc_cpus=6),
            SacctRow(job_id="12+0.0", job="12+0", step="0", state="FAILED", exit_code=ExitCode(1, 0), total_cpu_s=200.0),
            SacctRow(job_id="12+1.0", job="12+1", step="0", state="COMPLETED", exit_code=ExitCode(0, 0), total_cpu_s=200.0)]
    j = triage_job(rows)
    assert (j.job_id, j.alloc_cpus, j.cpu_efficiency) == ("12", 8, 0.5)


def test_cpu_efficiency_from_real_json():
    """Slurm 22.05's --json: the job's time.total is 0, its steps' hold the CPU time."""
    j = triage([JOBS["timeout"]], sacct_file=str(DATA / "timeout.json")).jobs[0]
    assert j.alloc_cpus == 2 and j.total_cpu_s == pytest.approx(0.029, abs=1e-3)
    assert j.cpu_efficiency == pytest.approx(j.total_cpu_s / (j.elapsed_s * 2), abs=1e-4) and j.cpu_note


def test_running_and_pending():
    j = triage_job([SacctRow(job_id="8", job="8", step=None, state="RUNNING", exit_code=ExitCode(0, 0))])
    assert j.status == "running" and j.category is None
    j = triage_job([SacctRow(job_id="9_[1-4]", job="9_[1-4]", step=None, state="PENDING")])
    assert j.status == "pending"


# ---- the command


runner = CliRunner()


def test_cli_exit_codes_and_formats():
    r = runner.invoke(app, ["triage", "--sacct-file", str(DATA / "all.psv")])
    assert r.exit_code == 1
    assert "sd-sigkill" in r.stdout and "time_limit" in r.stdout
    r = runner.invoke(app, ["triage", JOBS["ok"], "--sacct-file", str(DATA / "all.psv")])
    assert r.exit_code == 0 and "completed" in r.stdout
    r = runner.invoke(app, ["triage", "--sacct-file", str(DATA / "all.json"), "-f", "json"])
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == 1 and doc["kind"] == "triage"
    cats = {j["job_id"]: j["category"] for j in doc["jobs"]}
    assert cats[JOBS["segfault"]] == "segfault"
    assert all(c is None or c in SCHEMA["$defs"]["category"]["enum"] for c in cats.values())
    r = runner.invoke(app, ["triage", "--sacct-file", str(DATA / "all.psv"), "-f", "markdown"])
    assert r.exit_code == 1 and r.stdout.startswith("# slurmdoc triage") and "| job |" in r.stdout


def test_cli_filters_like_reportseff(tmp_path):
    """--user/--partition/--state/--since/--until choose the jobs instead of JOBIDs; on saved
    output they are applied to it, live they go to sacct -D (here: not on PATH)."""
    all_psv = str(DATA / "all.psv")
    r = runner.invoke(app, ["triage", "--sacct-file", all_psv, "--state", "TIMEOUT", "-f", "json"])
    assert r.exit_code == 1 and [j["job_id"] for j in json.loads(r.stdout)["jobs"]] == [JOBS["timeout"]]
    r = runner.invoke(app, ["triage", "--sacct-file", all_psv, "--state", "completed", "-f", "json"])
    ids = [j["job_id"] for j in json.loads(r.stdout)["jobs"]]
    assert r.exit_code == 0 and JOBS["ok"] in ids and JOBS["timeout"] not in ids
    r = runner.invoke(app, ["triage", "--sacct-file", all_psv, "--user", "nobody-here"])
    assert r.exit_code == 2 and "no job found" in r.stderr
    r = runner.invoke(app, ["triage", "--sacct-file", all_psv, "--partition", "debug", "-f", "json"])
    whole = runner.invoke(app, ["triage", "--sacct-file", all_psv, "-f", "json"])
    finished = [j["job_id"] for j in json.loads(whole.stdout)["jobs"] if j["status"] not in ("running", "pending")]
    assert sorted(j["job_id"] for j in json.loads(r.stdout)["jobs"]) == sorted(finished)
    r = runner.invoke(app, ["triage", JOBS["ok"], "--sacct-file", all_psv, "--state", "FAILED"])
    assert r.exit_code == 2 and "not both" in r.stderr
    r = runner.invoke(app, ["triage", "--user", "alice"])
    assert r.exit_code == 2 and "--since" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = runner.invoke(app, ["triage", "--since", "yesterday-ish"])
    assert r.exit_code == 2 and "not a time sacct understands" in r.stderr


def test_cli_errors_are_one_line(tmp_path):
    r = runner.invoke(app, ["triage", "--sacct-file", str(tmp_path / "missing")])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "no such file" in r.stderr
    r = runner.invoke(app, ["triage", "not-a-job", "--sacct-file", str(DATA / "all.psv")])
    assert r.exit_code == 2 and "not a Slurm job id" in r.stderr
    r = runner.invoke(app, ["triage", "424242", "--sacct-file", str(DATA / "all.psv")])
    assert r.exit_code == 2 and "424242" in r.stderr


def test_cli_without_sacct_on_path(tmp_path):
    # a machine without Slurm: one line, exit 2, no traceback
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    p = subprocess.run([sys.executable, "-m", "slurmdoc", "triage", "12"], capture_output=True, text=True, env=env)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "sacct not found" in p.stderr and "Traceback" not in p.stderr


def test_cli_sacct_failing(tmp_path):
    fake = tmp_path / "sacct"
    fake.write_text("#!/bin/sh\necho 'sacct: error: Problem talking to the database: Connection refused' >&2\nexit 1\n")
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "HOME": str(tmp_path)}
    p = subprocess.run([sys.executable, "-m", "slurmdoc", "triage", "12"], capture_output=True, text=True, env=env)
    assert p.returncode == 2
    assert "Connection refused" in p.stderr and p.stderr.count("\n") == 1


def test_triage_with_logs(tmp_path, monkeypatch):
    """--logs: each job's log found in its work dir (slurm-%j.out), diagnosed and joined."""
    monkeypatch.setattr("slurmdoc.slurm.locate.scontrol_show_job", lambda *a, **k: [])
    text = (DATA / "all.psv").read_text()
    old_dir = next(line.split("|")[-2] for line in text.splitlines()[1:] if line.split("|")[-2])
    (tmp_path / "all.psv").write_text(text.replace(old_dir, str(tmp_path)))
    for f in DATA.glob("*.out"):
        name = "slurm-" + f.name.split(".", 1)[1]  # exit1.2.out -> slurm-2.out
        (tmp_path / name).write_bytes(f.read_bytes())
    ids = [JOBS[n] for n in ("swallowed", "killonbad", "ok", "segfault")]
    r = runner.invoke(app, ["triage", *ids, "--logs", "--sacct-file", str(tmp_path / "all.psv"), "-f", "json"])
    assert r.exit_code == 1, r.stderr
    doc = json.loads(r.stdout)
    v = {x["job_id"]: x for x in doc["verdicts"]}
    assert v[JOBS["swallowed"]]["category"] == "import_error" and v[JOBS["swallowed"]]["contradictions"]
    assert v[JOBS["killonbad"]]["rank"] == 2
    assert v[JOBS["ok"]]["status"] == "no_failure"
    assert v[JOBS["segfault"]]["category"] == "segfault" and v[JOBS["segfault"]]["log_found_by"] == "default"
    r = runner.invoke(app, ["triage", *ids, "--logs", "--sacct-file", str(tmp_path / "all.psv")])
    assert "the log says" in r.stdout and "CONTRADICTION" in r.stdout
    # a COMPLETED job whose log shows a failure makes the run fail too
    r = runner.invoke(app, ["triage", JOBS["swallowed"], "--sacct-file", str(tmp_path / "all.psv")])
    assert r.exit_code == 0
    r = runner.invoke(app, ["triage", JOBS["swallowed"], "--logs", "--sacct-file", str(tmp_path / "all.psv")])
    assert r.exit_code == 1 and "JOB VERDICT" in r.stdout


def test_readme_example_is_what_triage_prints():
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    cmd = "$ slurmdoc triage --sacct-file tests/data/sacct/all.psv 3 4 5 6 8\n"
    shown = readme.split(cmd, 1)[1].split("```", 1)[0]
    r = runner.invoke(app, ["triage", "--sacct-file", str(DATA / "all.psv"), "3", "4", "5", "6", "8"])
    assert [x.rstrip() for x in r.stdout.splitlines()] == shown.splitlines()


def test_the_table_off_a_terminal_is_one_line_per_job_and_plain_rows_when_it_would_not_fit():
    doc = json.loads(runner.invoke(app, ["triage", "--sacct-file", str(DATA / "all.psv"), "-f", "json"]).stdout)
    jobs = doc["jobs"]
    # off a terminal: no wrapping at any width, so each job is one line holding its whole summary
    out = runner.invoke(app, ["triage", "--sacct-file", str(DATA / "all.psv")]).stdout.splitlines()
    body = [ln for ln in out[1: 1 + len(jobs)]]
    assert out[0].split()[:3] == ["job", "name", "state"] and len(body) == len(jobs)
    for j, ln in zip(jobs, body):
        assert ln.startswith(j["job_id"] + " ") and ln.endswith(j["summary"]) and ln == ln.rstrip()
    wide = max(len(ln) for ln in body)
    # a width the table does not fit: one plain row per job, wrapped at spaces, nothing cut
    for width in (80, 60):
        assert wide > width
        out = runner.invoke(app, ["triage", "--sacct-file", str(DATA / "all.psv"), "--width", str(width)]).stdout
        lines = out.splitlines()
        assert all(len(ln) <= width for ln in lines), [ln for ln in lines if len(ln) > width]
        starts = [ln for ln in lines if ln and not ln.startswith(" ")]
        for j in jobs:
            row = next(i for i, ln in enumerate(lines) if ln.startswith(f"{j['job_id']} ("))
            text = " ".join(x.strip() for x in lines[row: row + 4] if x)
            assert j["summary"] in text and (j["category"] or "") in text
        assert not any(ln.startswith("job ") for ln in starts)  # no header without a table
    # a width it fits: the table
    out = runner.invoke(app, ["triage", "--sacct-file", str(DATA / "all.psv"), "--width", str(wide)]).stdout
    assert out.splitlines()[1: 1 + len(jobs)] == body


def test_cpu_efficiency_is_in_the_text_and_markdown_details():
    from slurmdoc.report.triage import detail_lines

    j = triage_job(_cpu_rows(None, [1200.0, 300.0]))
    assert ("cpu", j.cpu_note) in detail_lines(j)
    assert not any(k == "cpu" for k, _ in detail_lines(triage_job(_cpu_rows(None, [None]))))


def test_triage_with_logs_and_traces_names_the_hung_rank(tmp_path, monkeypatch):
    """--traces with --logs and one job: the time-limit job's log fused with its ranks' dumps."""
    from fr_dumps import write_dumps

    monkeypatch.setattr("slurmdoc.slurm.locate.scontrol_show_job", lambda *a, **k: [])
    text = (DATA / "all.psv").read_text()
    old_dir = next(line.split("|")[-2] for line in text.splitlines()[1:] if line.split("|")[-2])
    (tmp_path / "all.psv").write_text(text.replace(old_dir, str(tmp_path)))
    (tmp_path / f"slurm-{JOBS['timeout']}.out").write_bytes((DATA / f"timeout.{JOBS['timeout']}.out").read_bytes())
    dumps = write_dumps(tmp_path / "fr", 2, {0: 7, 1: 6})
    r = runner.invoke(app, ["triage", JOBS["timeout"], "--logs", "--sacct-file", str(tmp_path / "all.psv"), "-f", "json",
                            "--traces", str(dumps)])
    assert r.exit_code == 1, r.stderr
    v = json.loads(r.stdout)["verdicts"][0]
    assert v["category"] == "time_limit" and v["rank"] == 1
    both = runner.invoke(app, ["triage", JOBS["timeout"], JOBS["ok"], "--logs", "--sacct-file", str(tmp_path / "all.psv"),
                               "--traces", str(dumps)])
    assert both.exit_code == 2 and "one job" in both.stderr
    alone = runner.invoke(app, ["triage", JOBS["timeout"], "--sacct-file", str(tmp_path / "all.psv"), "--traces", str(dumps)])
    assert alone.exit_code == 2 and "--logs" in alone.stderr

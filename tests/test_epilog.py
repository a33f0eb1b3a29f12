"""`slurmdoc epilog` never fails the job's epilog: it exits 0, stays within its budget, writes
only where it is told, and says what went wrong in one stderr line. Run as a real process
(the command ends with os._exit). The logs are real job logs saved from a local Slurm
(tests/data/sacct/); job ids are ones no cluster here knows, and --no-sacct keeps sacct out."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
import pytest

from slurmdoc.slurm import epilog as ep

DATA = Path(__file__).parent / "data" / "sacct"
SCHEMA = json.loads((Path(__file__).parent / "contract_schema.json").read_text())
JOB = "987001"
OWNER = {"SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid())}  # as slurmd sets them


def run(args, env_extra=None, timeout=60):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env.update(env_extra or {})
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "slurmdoc", "epilog", *args], capture_output=True, text=True,
                       env=env, timeout=timeout)
    return p, time.monotonic() - t0


def one_line(stderr: str) -> bool:
    return stderr.count("\n") <= 1 and "Traceback" not in stderr


@pytest.fixture
def job_dir(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    shutil.copy(DATA / "killonbad.8.out", d / f"slurm-{JOB}.out")
    return d


def test_sbatch_line_form(job_dir):
    ledger = job_dir / "ledger.jsonl"
    p, _ = run(["--job-id", JOB, "--exit-code", "15", "--log", str(job_dir / "slurm-%j.out"),
                "--ledger", str(ledger), "--no-sacct"])
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    rep = json.loads((job_dir / f"slurm-{JOB}.slurmdoc.json").read_text())
    jsonschema.validate(rep, SCHEMA)
    assert rep["job"]["category"] == "import_error" and rep["job"]["rank"] == 2
    assert rep["job"]["accounting"]["exit_code"] == "15:0"
    assert any("kill-on-bad-exit" in c for c in rep["job"]["contradictions"])
    txt = (job_dir / f"slurm-{JOB}.slurmdoc.txt").read_text()
    assert txt.startswith("JOB VERDICT") and "ModuleNotFoundError" in txt
    line = json.loads(ledger.read_text())
    assert line["kind"] == "epilog" and line["category"] == "import_error" and line["job_id"] == JOB
    assert p.stdout.startswith(f"slurmdoc: job {JOB}:") and "report:" in p.stdout


def test_html_report_is_written_next_to_the_text_report(job_dir):
    ledger = job_dir / "ledger.jsonl"
    p, _ = run(["--job-id", JOB, "--exit-code", "15", "--log", str(job_dir / "slurm-%j.out"), "--html",
                "--ledger", str(ledger), "--no-sacct"])
    assert p.returncode == 0 and p.stderr == "", p.stderr
    page = (job_dir / f"slurm-{JOB}.slurmdoc.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # the joined verdict and the log's root cause, and nothing fetched from the network
    assert 'id="job"' in page and "import_error" in page and "ModuleNotFoundError" in page
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page
    # the text report is still the one the ledger and the summary line name
    line = json.loads(ledger.read_text())
    assert line["report"].endswith(".slurmdoc.txt") and p.stdout.rstrip().endswith(".slurmdoc.txt)")
    # without --html, no page
    os.unlink(job_dir / f"slurm-{JOB}.slurmdoc.html")
    p, _ = run(["--job-id", JOB, "--exit-code", "15", "--log", str(job_dir / "slurm-%j.out"), "--no-sacct"])
    assert p.returncode == 0 and not (job_dir / f"slurm-{JOB}.slurmdoc.html").exists()


def test_slurm_epilog_environment(job_dir):
    env = {"SLURM_JOB_ID": JOB, "SLURM_JOB_EXIT_CODE2": "15:0", "SLURM_JOB_EXIT_CODE": "3840",
           "SLURM_JOB_STDOUT": str(job_dir / "slurm-%j.out"), "SLURM_JOB_WORK_DIR": str(job_dir),
           "SLURM_SCRIPT_CONTEXT": "epilog_slurmctld", **OWNER}
    p, _ = run(["--no-sacct"], env)
    assert p.returncode == 0 and p.stderr == ""
    rep = json.loads((job_dir / f"slurm-{JOB}.slurmdoc.json").read_text())
    assert rep["job"]["log_found_by"] == "environment" and rep["job"]["category"] == "import_error"


def test_missing_log_still_reports(tmp_path):
    p, _ = run(["--job-id", JOB, "--exit-code", "1", "--log", str(tmp_path / "slurm-%j.out"), "--no-sacct"])
    assert p.returncode == 0 and one_line(p.stderr)
    assert "does not exist" in p.stderr
    rep = json.loads((tmp_path / f"slurm-{JOB}.slurmdoc.json").read_text())
    assert rep["job"]["status"] == "failed" and rep["job"]["log_note"]


def test_binary_log(tmp_path):
    (tmp_path / f"slurm-{JOB}.out").write_bytes(bytes(range(256)) * 64)
    p, _ = run(["--job-id", JOB, "--exit-code", "0:9", "--log", str(tmp_path / f"slurm-{JOB}.out"), "--no-sacct"])
    assert p.returncode == 0 and one_line(p.stderr) and "binary" in p.stderr
    rep = json.loads((tmp_path / f"slurm-{JOB}.slurmdoc.json").read_text())
    assert rep["job"]["category"] == "killed"


@pytest.mark.parametrize("bad", ["missing-dir", "a-file"])
def test_unwritable_out_dir(job_dir, tmp_path, bad):
    target = tmp_path / bad
    if bad == "a-file":
        target.write_text("x")
    before = sorted(os.listdir(job_dir))
    p, _ = run(["--job-id", JOB, "--exit-code", "1", "--log", str(job_dir / f"slurm-{JOB}.out"),
                "--out-dir", str(target), "--no-sacct"])
    assert p.returncode == 0 and one_line(p.stderr) and "cannot write the report" in p.stderr
    assert sorted(os.listdir(job_dir)) == before  # nothing written next to the log instead


def test_budget_cuts_a_huge_log_short(tmp_path):
    # 30 MB of tracebacks on every rank (slow to diagnose in full: every line is a candidate),
    # then quiet progress lines and the planted failure in the last MiB
    log = tmp_path / f"slurm-{JOB}.out"
    with open(log, "w") as fh:
        for i in range(200_000):
            r = i % 64
            fh.write(f"{r}: [rank{r}]: Traceback (most recent call last):\n"
                     f"{r}: [rank{r}]:   File \"t.py\", line {i}, in <module>\n{r}: [rank{r}]: ValueError: noise {i}\n")
        fh.write("0: step 1 loss 2.345 lr 1e-4 tokens/s 12345\n" * 40_000)
        fh.write("1: Traceback (most recent call last):\n1:   File \"t.py\", line 3, in <module>\n"
                 "1: RuntimeError: planted at the end\n")
    # the budget is the hook's whole life, its interpreters' start-up included (its worker's too)
    p, took = run(["--job-id", JOB, "--exit-code", "1", "--log", str(log), "--no-sacct", "--budget", "10"])
    assert p.returncode == 0 and one_line(p.stderr)
    assert took < 11  # (exit and a busy machine: 1 s)
    assert "did not fit" in p.stderr
    rep = json.loads((tmp_path / f"slurm-{JOB}.slurmdoc.json").read_text())
    assert rep["job"]["partial"] is True
    assert rep["root_cause"]["message"] == "RuntimeError: planted at the end"  # found in the tail
    # named where it is in the log, not as a line of an anonymous <stdin>
    assert rep["root_cause"]["source"] == f"{log}:{200_000 * 3 + 40_000 + 3}"


def test_healthy_job_writes_nothing_unless_asked(tmp_path):
    log = tmp_path / f"slurm-{JOB}.out"
    shutil.copy(DATA / "ok.13.out", log)
    p, _ = run(["--job-id", JOB, "--exit-code", "0", "--log", str(log), "--no-sacct"])
    assert p.returncode == 0 and p.stderr == ""
    assert sorted(os.listdir(tmp_path)) == [log.name]
    p, _ = run(["--job-id", JOB, "--exit-code", "0", "--log", str(log), "--no-sacct", "--always"])
    rep = json.loads((tmp_path / f"slurm-{JOB}.slurmdoc.json").read_text())
    assert rep["job"]["status"] == "no_failure"


def test_swallowed_failure_is_reported_for_exit_0(tmp_path):
    log = tmp_path / f"slurm-{JOB}.out"
    shutil.copy(DATA / "swallowed.9.out", log)
    p, _ = run(["--job-id", JOB, "--exit-code", "0", "--log", str(log), "--no-sacct"])
    rep = json.loads((tmp_path / f"slurm-{JOB}.slurmdoc.json").read_text())
    assert rep["job"]["category"] == "import_error" and rep["job"]["contradictions"]


def test_symlink_at_the_report_path_is_replaced_not_followed(job_dir, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    os.symlink(victim, job_dir / f"slurm-{JOB}.slurmdoc.txt")
    p, _ = run(["--job-id", JOB, "--exit-code", "1", "--log", str(job_dir / f"slurm-{JOB}.out"), "--no-sacct"])
    assert p.returncode == 0
    assert victim.read_text() == "keep me"
    assert not os.path.islink(job_dir / f"slurm-{JOB}.slurmdoc.txt")


def test_locked_ledger_does_not_hold_the_hook(job_dir):
    ledger = job_dir / "ledger.jsonl"
    fd = os.open(ledger, os.O_WRONLY | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        p, took = run(["--job-id", JOB, "--exit-code", "1", "--log", str(job_dir / f"slurm-{JOB}.out"),
                       "--no-sacct", "--ledger", str(ledger), "--budget", "8"])  # two interpreters start
    finally:
        os.close(fd)
    assert p.returncode == 0 and one_line(p.stderr) and "ledger" in p.stderr and took < 9  # (exit and a busy machine: 1 s)
    assert (job_dir / f"slurm-{JOB}.slurmdoc.txt").exists()


def test_concurrent_ledger_lines_stay_whole(job_dir):
    ledger = job_dir / "ledger.jsonl"
    args = ["--job-id", JOB, "--exit-code", "1", "--log", str(job_dir / f"slurm-{JOB}.out"), "--no-sacct",
            "--ledger", str(ledger)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    procs = [subprocess.Popen([sys.executable, "-m", "slurmdoc", "epilog", *args], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(4)]
    assert [p.wait(60) for p in procs] == [0] * 4
    lines = ledger.read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(x)["job_id"] == JOB for x in lines)


def test_silent_webhook_is_cut_off(job_dir):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    conns = []
    threading.Thread(target=lambda: conns.append(srv.accept()), daemon=True).start()  # accepts, never answers
    try:
        p, took = run(["--job-id", JOB, "--exit-code", "1", "--log", str(job_dir / f"slurm-{JOB}.out"),
                       "--no-sacct", "--webhook", f"http://127.0.0.1:{port}/hook", "--budget", "5"])
    finally:
        srv.close()
    assert p.returncode == 0 and one_line(p.stderr) and "webhook" in p.stderr and took < 6  # (exit and a busy machine: 1 s)


def test_webhook_receives_the_verdict(job_dir):
    from http.server import BaseHTTPRequestHandler, HTTPServer

    got = []

    class H(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.handle_request, daemon=True).start()
    try:
        p, _ = run(["--job-id", JOB, "--exit-code", "1", "--log", str(job_dir / f"slurm-{JOB}.out"),
                    "--no-sacct", "--webhook", f"http://127.0.0.1:{srv.server_port}/"])
    finally:
        srv.server_close()
    assert p.returncode == 0 and p.stderr == ""
    assert got and got[0]["category"] == "import_error" and got[0]["rank"] == 2


@pytest.mark.parametrize("args", [["--bogus"], ["--budget", "x"], ["--budget", "0"]])
def test_usage_errors_exit_0(args):
    p, _ = run(args + ["--no-sacct"])
    assert p.returncode == 0 and one_line(p.stderr) and p.stderr.startswith("slurmdoc: epilog:")


def test_no_job_id(tmp_path):
    p, _ = run(["--no-sacct"])
    assert p.returncode == 0 and one_line(p.stderr) and "no job id" in p.stderr


# ---- library level


def test_run_epilog_never_raises(monkeypatch, tmp_path):
    def boom(*a, **k):
        raise RuntimeError("scontrol exploded")

    monkeypatch.setattr("slurmdoc.slurm.locate.scontrol_show_job", boom)
    res = ep.run_epilog(ep.EpilogOptions(job_id=JOB, sacct=False), env={})
    assert any("scontrol exploded" in p for p in res.problems)


def test_node_epilog_acts_on_the_batch_host_only(monkeypatch, job_dir):
    monkeypatch.setattr("slurmdoc.slurm.locate.scontrol_show_job",
                        lambda *a, **k: [{"JobId": JOB, "BatchHost": "n1", "StdOut": str(job_dir / "slurm-%j.out")}])
    env = {"SLURM_JOB_ID": JOB, "SLURMD_NODENAME": "n2", "SLURM_SCRIPT_CONTEXT": "epilog_slurmd",
           "SLURM_JOB_EXIT_CODE2": "1:0", **OWNER}
    res = ep.run_epilog(ep.EpilogOptions(sacct=False), env=env)
    assert res.skipped and "batch host" in res.skipped and not res.wrote
    res = ep.run_epilog(ep.EpilogOptions(sacct=False), env=dict(env, SLURMD_NODENAME="n1"))
    assert res.wrote and not res.problems


def test_node_epilog_acts_on_one_node_when_the_record_names_no_batch_host(monkeypatch, job_dir):
    # scontrol's batch host left out (a job name holding `BatchHost=...` makes it ambiguous, or
    # the record has none): the allocation's first node reports, never every node of the job
    from slurmdoc.slurm.locate import parse_scontrol

    text = (f"JobId={JOB} JobName=x BatchHost=n3 UserId=u(1) GroupId=g(1) JobState=FAILED "
            f"NodeList=n[01-04,09] BatchHost=n01 StdOut={job_dir}/slurm-%j.out")
    for record in (text, text.replace(" BatchHost=n3", "").replace(" BatchHost=n01", "")):
        monkeypatch.setattr("slurmdoc.slurm.locate.scontrol_show_job", lambda *a, **k: parse_scontrol(record))
        env = {"SLURM_JOB_ID": JOB, "SLURM_SCRIPT_CONTEXT": "epilog_slurmd", "SLURM_JOB_EXIT_CODE2": "1:0", **OWNER}
        for node in ("n3", "n04", "n09"):
            res = ep.run_epilog(ep.EpilogOptions(sacct=False), env=dict(env, SLURMD_NODENAME=node))
            assert res.skipped and "batch host" in res.skipped and not res.wrote, (node, record)
        res = ep.run_epilog(ep.EpilogOptions(sacct=False), env=dict(env, SLURMD_NODENAME="n01"))
        assert res.wrote and not res.problems, record
        for p in job_dir.glob("*.slurmdoc.*"):
            p.unlink()
    # no batch host and no node list either (both made ambiguous): no node can tell it is the one
    monkeypatch.setattr("slurmdoc.slurm.locate.scontrol_show_job", lambda *a, **k: parse_scontrol(
        f"JobId={JOB} JobName=x BatchHost=n3 NodeList=n3 UserId=u(1) NodeList=n01 BatchHost=n01 StdOut={job_dir}/slurm-%j.out"))
    res = ep.run_epilog(ep.EpilogOptions(sacct=False), env=dict(env, SLURMD_NODENAME="n01"))
    assert res.skipped and "batch host" in res.skipped and not res.wrote


@pytest.mark.parametrize("text,expect", [("1", "1:0"), ("0:9", "0:9"), ("137", "137:0"), ("", None), ("x", None)])
def test_exit_code_argument(text, expect):
    ec = ep._exit_code(text)
    assert (str(ec) if ec else None) == expect


@pytest.mark.parametrize("raw,expect", [("768", "3:0"), ("9", "0:9"), ("0", "0:0"), (None, None)])
def test_raw_wait_status(raw, expect):
    ec = ep._raw_wait_status(raw)
    assert (str(ec) if ec else None) == expect


def test_healthy_job_without_a_log(tmp_path):
    p, _ = run(["--job-id", JOB, "--exit-code", "0", "--log", str(tmp_path / "gone-%j.out"), "--no-sacct",
                "--ledger", str(tmp_path / "ledger.jsonl")])
    assert p.returncode == 0 and one_line(p.stderr) and "does not exist" in p.stderr
    assert sorted(os.listdir(tmp_path)) == ["ledger.jsonl"]
    assert json.loads((tmp_path / "ledger.jsonl").read_text())["status"] == "no_failure"


def test_traces_in_the_job_dir_are_fused_into_the_report(tmp_path):
    """--traces 'fr-%j/' (relative: the job's work dir): the hung rank the dumps name is the
    report's root rank, and the ledger's."""
    from fr_dumps import write_dumps

    d = tmp_path / "job"
    d.mkdir()
    lines = [f"[rank{r}]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 5000ms "
             f"for recv operation to complete" for r in (0, 1, 3)]
    (d / f"slurm-{JOB}.out").write_text("\n".join(lines) + "\n")
    write_dumps(d / f"fr-{JOB}", 4, {2: 4, 0: 5, 1: 5, 3: 5})
    ledger = d / "ledger.jsonl"
    p, _ = run(["--job-id", JOB, "--exit-code", "1", "--log", str(d / "slurm-%j.out"), "--ledger", str(ledger), "--no-sacct",
                "--traces", "fr-%j/"], {**OWNER, "SLURM_JOB_WORK_DIR": str(d)})
    assert p.returncode == 0 and p.stderr == "", p.stderr
    rep = json.loads((d / f"slurm-{JOB}.slurmdoc.json").read_text())
    jsonschema.validate(rep, SCHEMA)
    assert rep["root_cause"]["rank"] == 2 and rep["root_cause"]["evidence"] == "flight_recorder"
    assert rep["job"]["rank"] == 2 and json.loads(ledger.read_text())["rank"] == 2
    assert "never entered all_reduce #5" in (d / f"slurm-{JOB}.slurmdoc.txt").read_text()


def test_missing_traces_cost_one_line_not_the_report(job_dir):
    p, _ = run(["--job-id", JOB, "--exit-code", "1", "--log", str(job_dir / "slurm-%j.out"), "--no-sacct",
                "--traces", str(job_dir / "no-such-dir")], OWNER)
    assert p.returncode == 0 and one_line(p.stderr) and "flight-recorder dumps were not read" in p.stderr
    rep = json.loads((job_dir / f"slurm-{JOB}.slurmdoc.json").read_text())
    assert rep["job"]["category"] == "import_error" and rep["job"]["rank"] == 2

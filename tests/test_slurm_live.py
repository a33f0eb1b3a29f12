"""End to end against a real Slurm (scripts/slurm-up): submit jobs that fail in known ways
(tests/slurm_jobs/), then check `slurmdoc triage`, `slurmdoc diagnose --job` and the epilog,
both as Slurm's node Epilog (installed by scripts/slurm-epilog; it acts only on jobs whose work
dir holds `.slurmdoc-epilog`) and as a line at the end of the sbatch script.

Skipped when no Slurm is reachable, unless SLURMDOC_REQUIRE_SLURM=1 (CI), which makes that a
failure. All jobs are submitted at once by one session fixture; the time-limit job sets the
pace (~70-90 s).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

JOBS_DIR = Path(__file__).parent / "slurm_jobs"
REQUIRE = os.environ.get("SLURMDOC_REQUIRE_SLURM") == "1"
WRAPPER = "/etc/slurm/slurmdoc-epilog.sh"
ACTIVE = {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "REQUEUED", "RESIZING"}
LINE = """
rc=$?
"$SLURMDOC_BIN" epilog --exit-code $rc --out-dir "$SD_LINE_DIR" --ledger "$SD_LINE_DIR/ledger.jsonl" --budget 20 --comment admin \\
  >"$SD_LINE_DIR/out-$SLURM_JOB_ID.txt" 2>"$SD_LINE_DIR/err-$SLURM_JOB_ID.txt"
echo "epilog line exit status $?" >"$SD_LINE_DIR/rc-$SLURM_JOB_ID.txt"
exit $rc
"""

# name -> (sbatch extra args, triage category, fused category, fused rank, contradiction, line runs)
CASES = {
    "exit1": ([], "unknown", "unknown", 1, False, True),
    "sigkill": ([], "killed", "killed", 1, False, True),
    "segfault": ([], "segfault", "segfault", 1, False, True),
    "timeout": ([], "time_limit", "time_limit", None, False, False),  # killed before the line
    "cancel": ([], "cancelled", "cancelled", None, False, False),
    "pyranks": ([], None, "import_error", 2, None, True),  # srun-native 4 ranks; sacct's step varies
    "killonbad": ([], "sigterm_cascade", "import_error", 2, True, True),
    "swallowed": ([], None, "import_error", 2, True, True),  # COMPLETED 0:0 in sacct
}


def _run(*cmd, timeout=30, **kw):
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, **kw)


def _unreachable() -> str | None:
    for tool in ("sbatch", "sinfo", "sacct", "scontrol"):
        if shutil.which(tool) is None:
            return f"no Slurm here: {tool} is not on PATH"
    try:
        p = _run("sinfo", "-h", "-o", "%a", timeout=15)
        if p.returncode != 0:
            return f"Slurm not reachable: sinfo: {p.stderr.strip()[:200]}"
        p = _run("sacct", "-n", "-X", "-j", "1", "-o", "JobID", timeout=15)
        if p.returncode != 0:
            return f"no accounting: sacct: {p.stderr.strip()[:200]}"
    except (OSError, subprocess.SubprocessError) as e:
        return f"Slurm not reachable: {e}"
    return None


def _slurmdoc_bin() -> str:
    exe = Path(sys.executable).parent / "slurmdoc"
    return str(exe) if exe.exists() else shutil.which("slurmdoc") or "slurmdoc"


def _state(job: str) -> list[str]:
    p = _run("scontrol", "show", "job", "-o", job)
    states = [w.split("=", 1)[1] for w in p.stdout.split() if w.startswith("JobState=")]
    if states:
        return states
    p = _run("sacct", "-n", "-X", "-P", "-j", job, "-o", "State")
    return [s.split()[0] for s in p.stdout.split("\n") if s.strip()]


@dataclass
class Live:
    work: Path
    ids: dict[str, str] = field(default_factory=dict)
    epilog_installed: bool = False
    epilog_lost: bool = False  # removed while the jobs ran: another run on this cluster
    waited_s: float = 0.0

    def sd(self, *args, timeout=120):
        return _run(_slurmdoc_bin(), *args, timeout=timeout, cwd=self.work)


@pytest.fixture(scope="session")
def live(tmp_path_factory):
    reason = _unreachable()
    if reason:
        if REQUIRE:
            pytest.fail(f"SLURMDOC_REQUIRE_SLURM=1 but {reason}")
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("slurm-live")
    (work / "line").mkdir()
    (work / ".slurmdoc-epilog").write_text("opt in to the slurmdoc test Epilog\n")
    for f in JOBS_DIR.iterdir():
        text = f.read_text()
        if f.suffix == ".sbatch" and f.stem != "cancel" and f.stem != "timeout":
            text += LINE
        (work / f.name).write_text(text)
    # a job whose --output directory does not exist (no log at all), and one that writes binary
    # (a tar stream on stdout, from the batch script itself so that no srun line comes first)
    (work / "nolog.sbatch").write_text((work / "exit1.sbatch").read_text().replace(
        "--output=slurm-%j.out", f"--output={work}/no-such-dir/slurm-%j.out").replace("sd-exit1", "sd-nolog"))
    (work / "binary.sbatch").write_text(
        "#!/bin/bash\n#SBATCH --job-name=sd-binary --ntasks=1 --output=slurm-%j.out\n"
        "tar c -C / etc/os-release etc/hostname | head -c 65536\nbash -c 'exit 3'\n" + LINE)
    cfg = _run("scontrol", "show", "config").stdout
    live = Live(work=work, epilog_installed=any(
        line.split("=", 1)[0].strip() == "Epilog" and WRAPPER in line for line in cfg.splitlines()))
    env = dict(os.environ, SD_JOBS=str(work), SLURMDOC_BIN=_slurmdoc_bin(), SD_LINE_DIR=str(work / "line"))
    try:
        yield _submit_and_wait(live, env)
    finally:  # an interrupted run leaves no job behind
        if live.ids:
            _run("scancel", *live.ids.values())


def _submit_and_wait(live: Live, env: dict) -> Live:
    work = live.work
    for name in list(CASES) + ["nolog", "binary", "array", "hetjob", "ok"]:
        p = _run("sbatch", "--parsable", f"{name}.sbatch", cwd=work, env=env)
        assert p.returncode == 0, f"sbatch {name}: {p.stderr}"
        live.ids[name] = p.stdout.strip().split(";")[0]
    t0 = time.monotonic()
    while _state(live.ids["cancel"])[:1] != ["RUNNING"]:
        assert time.monotonic() - t0 < 60, "the cancel job never started"
        time.sleep(0.3)
    time.sleep(1.5)
    _run("scancel", live.ids["cancel"])
    pending = dict(live.ids)
    while pending:
        for name, job in list(pending.items()):
            states = _state(job)
            if states and not (set(states) & ACTIVE):
                del pending[name]
        assert time.monotonic() - t0 < 240, f"jobs still running after 240 s: {pending}"
        time.sleep(1)
    live.waited_s = time.monotonic() - t0
    if live.epilog_installed and WRAPPER not in _run("scontrol", "show", "config").stdout:
        live.epilog_lost = True
    # the Epilog runs after the job leaves RUNNING; give it time to write
    if live.epilog_installed:
        want = [live.work / f"slurm-{live.ids[n]}.slurmdoc.json" for n in CASES]
        t1 = time.monotonic()
        while not all(w.exists() for w in want) and time.monotonic() - t1 < 45:
            time.sleep(0.5)
    time.sleep(1)  # accounting rows settle
    return live


def _jobs(live: Live, name: str, *args) -> dict:
    p = live.sd("triage", live.ids[name], "-f", "json", *args)
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("name", sorted(CASES))
def test_triage(live, name):
    _, cat, *_ = CASES[name]
    doc = _jobs(live, name)
    (job,) = doc["jobs"]
    if name == "swallowed":
        assert job["status"] == "ok"  # sacct cannot see it: see test_diagnose_job
    else:
        assert job["status"] == "failed"
        if cat is not None:
            assert job["category"] == cat, job["summary"]


def test_triage_table_of_everything(live):
    ids = [live.ids[n] for n in CASES]
    p = live.sd("triage", *ids)
    assert p.returncode == 1
    for n in CASES:
        assert live.ids[n] in p.stdout
    assert "time_limit" in p.stdout and "cancelled by root" in p.stdout


def test_triage_with_logs(live):
    ids = [live.ids[n] for n in CASES]
    p = live.sd("triage", "--logs", "-f", "json", *ids)
    assert p.returncode == 1, p.stderr
    got = {v["job_id"]: v for v in json.loads(p.stdout)["verdicts"]}
    for n, (_, _, cat, rank, *_rest) in CASES.items():
        assert (got[live.ids[n]]["category"], got[live.ids[n]]["rank"]) == (cat, rank), n


def test_triage_array_and_het(live):
    a = live.ids["array"]
    doc = _jobs(live, "array")
    assert {j["job_id"]: j["status"] for j in doc["jobs"]} == {f"{a}_1": "ok", f"{a}_2": "failed", f"{a}_3": "ok"}
    h = live.ids["hetjob"]
    (het,) = _jobs(live, "hetjob")["jobs"]
    assert het["components"] == [f"{h}+0", f"{h}+1"] and het["first_failed_step"]["id"] == f"{h}+1.1"


def test_triage_nolog_and_binary(live):
    (j,) = _jobs(live, "nolog")["jobs"]
    assert j["status"] == "failed" and j["category"] == "io_error"  # 0:53, the output file could not be opened
    (j,) = _jobs(live, "binary")["jobs"]
    assert j["status"] == "failed" and "exited 3" in j["summary"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_diagnose_job(live, name):
    _, _, cat, rank, contra, _ = CASES[name]
    p = live.sd("diagnose", "--job", live.ids[name], "-f", "json")
    assert p.returncode == 1, p.stderr
    job = json.loads(p.stdout)["job"]
    assert (job["category"], job["rank"]) == (cat, rank), job["verdict"]
    assert job["log_found_by"] == "scontrol"
    if contra is not None:
        assert bool(job["contradictions"]) == contra, job


def test_diagnose_job_without_a_log(live):
    p = live.sd("diagnose", "--job", live.ids["nolog"])
    assert p.returncode == 1 and "accounting only" in p.stdout and "does not exist" in p.stdout


def _need_epilog(live: Live) -> None:
    if live.epilog_lost:
        pytest.fail("the slurmdoc Epilog was removed while the jobs ran (another test run on this cluster?)")
    if not live.epilog_installed:
        msg = f"Slurm's Epilog is not {WRAPPER} (install it with scripts/slurm-epilog install BIN)"
        if REQUIRE:
            pytest.fail(msg)
        pytest.skip(msg)


def _report(path: Path) -> dict:
    assert path.exists(), f"no report {path}"
    return json.loads(path.read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_epilog_report(live, name):
    _need_epilog(live)
    _, _, cat, rank, contra, _ = CASES[name]
    job = _report(live.work / f"slurm-{live.ids[name]}.slurmdoc.json")["job"]
    assert (job["category"], job["rank"]) == (cat, rank), job["verdict"]
    assert (live.work / f"slurm-{live.ids[name]}.slurmdoc.txt").read_text().startswith("JOB VERDICT")
    ledger = [json.loads(x) for x in (live.work / "epilog-ledger.jsonl").read_text().splitlines()]
    assert [x["category"] for x in ledger if x["job_id"] == live.ids[name]] == [cat]  # once: batch host only


def test_node_epilog_missing_and_binary_log(live):
    _need_epilog(live)
    job = _report(live.work / f"slurm-{live.ids['nolog']}.slurmdoc.json")["job"]  # in the work dir
    assert job["status"] == "failed" and "does not exist" in job["log_note"]
    job = _report(live.work / f"slurm-{live.ids['binary']}.slurmdoc.json")["job"]
    assert job["status"] == "failed" and "binary" in job["log_note"]
    a = live.ids["array"]
    assert _report(live.work / f"slurm-{a}_2.slurmdoc.json")["job"]["accounting"]["job_id"] == f"{a}_2"
    # healthy tasks get no report; task 3 carries the array's own id, which sacct -j expands
    # to the whole array: its verdict must still be its own
    assert not (live.work / f"slurm-{a}_1.slurmdoc.json").exists()
    assert not (live.work / f"slurm-{a}_3.slurmdoc.json").exists()
    assert not (live.work / "line" / f"slurm-{a}_3.slurmdoc.json").exists()
    # a het job is reported once, by its leader's Epilog, next to the leader's log
    h = live.ids["hetjob"]
    assert _report(live.work / f"slurm-{h}.slurmdoc.json")["job"]["category"] == "unknown"
    assert [p.name for p in live.work.glob("*.slurmdoc.json") if p.name.startswith(f"slurm-{int(h) + 1}.")] == []
    assert not (live.work / f"slurm-{live.ids['ok']}.slurmdoc.json").exists()
    err = (live.work / "epilog.err").read_text()
    assert all(line.startswith("slurmdoc: epilog: job ") for line in err.splitlines()) and "Traceback" not in err
    # an Epilog that failed would have drained the node
    nodes = _run("sinfo", "-h", "-N", "-o", "%N %T").stdout
    assert "drain" not in nodes, nodes


@pytest.mark.parametrize("name", sorted(n for n in CASES if CASES[n][5]) + ["binary"])
def test_sbatch_line_epilog(live, name):
    job_id = live.ids[name]
    rc = (live.work / "line" / f"rc-{job_id}.txt").read_text().strip()
    assert rc == "epilog line exit status 0"
    rep = _report(live.work / "line" / f"slurm-{job_id}.slurmdoc.json")["job"]
    if name == "binary":
        assert rep["status"] == "failed" and "binary" in rep["log_note"]
        return
    _, _, cat, rank, contra, _ = CASES[name]
    assert (rep["category"], rep["rank"]) == (cat, rank), rep["verdict"]
    assert rep["log_found_by"] == "scontrol"
    # --comment admin: the verdict is in the job's accounting record
    p = _run("sacct", "-n", "-X", "-P", "-j", job_id, "-o", "AdminComment")
    assert p.stdout.startswith(f"slurmdoc: {cat}"), p.stdout

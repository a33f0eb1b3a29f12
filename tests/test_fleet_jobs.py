"""fleet/jobs.py: log files grouped by job, from Slurm's output names, the text, and directories."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmdoc.fleet.jobs import SeveralJobsError, group_files, group_paths, id_from_text, job_of, one_job

ROOT = Path(__file__).resolve().parent.parent
TB = "Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\nValueError: boom\n"


def keys(tmp_path, names, texts=None):
    texts = texts or {}
    paths = []
    for n in names:
        p = tmp_path / n
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(texts.get(n, "hello\n"))
        paths.append(str(p))
    return {g.key if g.job_id else "dir": sorted(Path(x).name for x in g.paths) for g in group_files(paths)}


@pytest.mark.parametrize("names, want", [
    # slurm-%j.out: one job per file
    (["slurm-101.out", "slurm-102.out"], {"101", "102"}),
    # %x-%j.out: the job name may hold letters and digits
    (["llama7b-2201.out", "llama7b-2202.out"], {"2201", "2202"}),
    # %A_%a: array tasks are separate jobs
    (["slurm-30_1.out", "slurm-30_2.out", "train-30_3.err"], {"30_1", "30_2", "30_3"}),
    # %j.%N.err: one file per node of one job
    (["4501.gpu-e04.err", "4501.gpu-e05.err", "4502.gpu-e04.err"], {"4501", "4502"}),
    # %x-%j-%t.out: one file per task of one job, and the job's own output
    (["run-77-0.out", "run-77-1.out", "run-77-2.out", "slurm-77.out"], {"77"}),
    # per-node and per-rank names with no job id are one job (their directory)
    (["node0.log", "node1.log", "rank-2.log"], {"dir"}),
])
def test_naming_patterns(tmp_path, names, want):
    assert set(keys(tmp_path, names)) == want


def test_files_of_one_job_stay_together(tmp_path):
    got = keys(tmp_path, ["4501.gpu-e04.err", "4501.gpu-e05.err", "run-77-0.out", "run-77-1.out", "slurm-77.out"])
    assert got == {"4501": ["4501.gpu-e04.err", "4501.gpu-e05.err"],
                   "77": ["run-77-0.out", "run-77-1.out", "slurm-77.out"]}


def test_job_id_from_text(tmp_path):
    texts = {
        "a.log": "SLURM_JOB_ID=9001\nstep 1\n",
        "b.log": "x\n" * 10 + "slurmstepd-n1: error: *** JOB 9002 ON n1 CANCELLED AT 2026-11-22T01:41:38 ***\n",
        "c.log": "0: slurmstepd-n2: error: *** STEP 9003.0 ON n2 CANCELLED AT 2026-11-22T01:41:38 ***\n",
        "d.log": "SLURM_ARRAY_JOB_ID=40\nSLURM_ARRAY_TASK_ID=2\nSLURM_JOB_ID=42\n",
        "e.log": "srun: job 9004 queued and waiting for resources\n",
        "f.log": "salloc: Granted job allocation 9005\n",
    }
    assert set(keys(tmp_path, list(texts), texts)) == {"9001", "9002", "9003", "40_2", "9004", "9005"}


def test_text_is_read_at_both_ends_only(tmp_path):
    from slurmdoc.fleet.jobs import SNIFF_BYTES

    p = tmp_path / "big.log"
    mid = "filler line\n" * (3 * SNIFF_BYTES // 12)
    p.write_text("start\n" + mid + "SLURM_JOB_ID=5\n" + mid + "end\n")
    assert job_of(str(p)) == (None, "directory")
    p.write_text("start\n" + mid + mid + "slurmstepd: error: *** JOB 6 ON n1 CANCELLED AT x ***\n")
    assert job_of(str(p)) == ("6", "text")


def test_gzip_text(tmp_path):
    p = tmp_path / "console.log.gz"
    p.write_bytes(gzip.compress(b"SLURM_JOB_ID=77\n"))
    assert job_of(str(p)) == ("77", "text")


def test_name_of_slurm_beats_text(tmp_path):
    # an array task's output names the array (A_a); its text names the task's own raw job id
    assert set(keys(tmp_path, ["slurm-10_1.out"], {"slurm-10_1.out": "SLURM_JOB_ID=11\n"})) == {"10_1"}


def test_job_directory_name(tmp_path):
    assert set(keys(tmp_path, ["1234/rank0.log", "1234/rank1.log", "job_1235/node0.log"])) == {"1234", "1235"}


def test_torchrun_log_dir_tree_is_one_job_with_its_console(tmp_path):
    names = [f"logs/run_x/attempt_{a}/{r}/stderr.log" for a in (0, 1) for r in (0, 1)] + ["console.log"]
    got = keys(tmp_path, names, {names[0]: "SLURM_JOB_ID=3\n"})
    assert list(got) == ["dir"] and len(got["dir"]) == 5


def test_idless_files_join_the_one_job_beside_them(tmp_path):
    assert set(keys(tmp_path, ["slurm-500.out", "gpu-e04-kern.log"])) == {"500"}
    # beside two jobs they cannot be given to either
    assert set(keys(tmp_path, ["slurm-500.out", "slurm-501.out", "kern.log"])) == {"500", "501", "dir"}


def test_directories_of_idless_logs_are_separate_jobs(tmp_path):
    keys(tmp_path, ["a/job.log", "b/job.log"])
    got = group_paths([str(tmp_path)])
    assert [Path(g.key[4:]).name for g in got] == ["a", "b"] and all(g.job_id is None for g in got)


def test_order_is_numeric_then_directories(tmp_path):
    keys(tmp_path, ["slurm-9.out", "slurm-10.out", "slurm-10_2.out", "x/job.log"])
    got = [g.key for g in group_paths([str(tmp_path)])]
    assert got[:3] == ["9", "10", "10_2"] and got[3].startswith("dir:")


def test_every_fixture_case_is_one_job():
    sys.path.insert(0, str(ROOT / "tests"))
    from corpus_cases import case_dirs, inputs, load_truth

    for case in case_dirs():
        truth = load_truth(case)
        groups = group_paths(inputs(case, truth))
        assert len(groups) == 1, (case.name, [g.key for g in groups])
        if truth.get("job_id") is not None:
            assert groups[0].job_id == str(truth["job_id"]), case.name


def test_one_job_raises_with_a_hint(tmp_path):
    keys(tmp_path, ["slurm-1.out", "slurm-2.out"])
    with pytest.raises(SeveralJobsError) as e:
        one_job([str(tmp_path)])
    assert "2 jobs" in e.value.message and "job 1, job 2" in e.value.message and "slurmdoc scan" in e.value.hint
    one_job([str(tmp_path / "slurm-1.out")])  # one job: nothing raised


def test_id_from_text_ignores_other_numbers():
    assert id_from_text(b"step 1234 loss 3.2\nrank 7\n") is None


def test_diagnose_cli_refuses_several_jobs(tmp_path):
    (tmp_path / "slurm-1.out").write_text(TB)
    (tmp_path / "slurm-2.out").write_text(TB)
    r = subprocess.run([sys.executable, "-m", "slurmdoc", "diagnose", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert "2 jobs" in r.stderr and "slurmdoc scan" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run([sys.executable, "-m", "slurmdoc", "diagnose", str(tmp_path / "slurm-1.out")], capture_output=True, text=True)
    assert r.returncode == 1


def test_a_fifo_is_never_opened_to_find_its_job(tmp_path):
    import os
    import threading

    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    got = []
    t = threading.Thread(target=lambda: got.append(job_of(str(fifo))), daemon=True)
    t.start()
    t.join(10)  # opening a FIFO without a writer would block here
    assert got == [(None, "directory")]


def test_the_epilogs_reports_and_ledger_beside_a_log_are_not_read_as_logs(tmp_path):
    """The real epilog writes <log stem>.slurmdoc.txt/.json and its ledger next to the log: a later
    `diagnose DIR` or `scan DIR` reads the log alone (the reports quote its error lines)."""
    import json
    import shutil

    log = tmp_path / "slurm-24.out"
    shutil.copy(ROOT / "fixtures" / "slurm" / "srun_import_first" / "slurm-24.out", log)
    alone = subprocess.run([sys.executable, "-m", "slurmdoc", "diagnose", "--format", "json", str(log)],
                           capture_output=True, text=True)
    p = subprocess.run([sys.executable, "-m", "slurmdoc", "epilog", "--job-id", "24", "--exit-code", "1", "--log", str(log),
                        "--no-sacct", "--ledger", str(tmp_path / "ledger.jsonl"), "--always"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert {"slurm-24.slurmdoc.txt", "slurm-24.slurmdoc.json", "ledger.jsonl"} <= {x.name for x in tmp_path.iterdir()}
    (tmp_path / "slurm-24.slurmdoc.html").write_text("<pre>ModuleNotFoundError: No module named 'x'</pre>\n")
    r = subprocess.run([sys.executable, "-m", "slurmdoc", "diagnose", "--format", "json", str(tmp_path)],
                       capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (alone.returncode, alone.stdout) and alone.returncode == 1
    s = subprocess.run([sys.executable, "-m", "slurmdoc", "scan", "--format", "json", str(tmp_path)], capture_output=True, text=True)
    (row,) = json.loads(s.stdout)["jobs"]
    assert (row["job_id"], row["files"], row["category"]) == ("24", 1, "import_error")


# Pieces of text a sniffed log may hold around a job id: each pattern's own start, near misses
# of it, and lines that match nothing, so that joined at random they hold matches anywhere.
_PIECES = [b"SLURM_JOB_ID=", b"SLURM_JOB_ID", b"SLURM_ARRAY_JOB_ID: ", b"SLURM_ARRAY_TASK_ID =", b"SLURM_",
           b"slurmstepd-n1: error: *** JOB ", b"slurmstepd: error: *** STEP ", b"slurmstepd", b" ON n1 ",
           b"srun: job ", b"salloc: Granted job allocation ", b"srun: ", b" queued", b" has been allocated",
           b"123", b"7", b".0", b"_4", b"\n", b" ", b"x", b"\xff", b"srun", b"salloc: job ", b"=", b": ", b"\t"]


def _texts():
    import slurmdoc.fleet.jobs as jobs

    return [jobs._TEXT_ARRAY, jobs._TEXT_TASK, jobs._TEXT_JOB, jobs._TEXT_STEPD, jobs._TEXT_ALLOC]


@settings(max_examples=300)
@given(st.data())
def test_a_pattern_is_searched_from_where_its_start_literals_allow(data):
    # searching from the first of the literals a pattern's matches start with (or not at all)
    # finds the same first match as searching the whole text; the texts hold matches of the
    # patterns themselves (so a literal list missing a way a match can start is caught) among
    # near misses
    import slurmdoc.fleet.jobs as jobs

    matches = st.one_of(*(st.from_regex(rx, fullmatch=True) for rx, _ in _texts()))
    text = b"".join(data.draw(st.lists(st.one_of(st.sampled_from(_PIECES), matches), max_size=12)))
    for pattern in _texts():
        whole = pattern[0].search(text)
        got = jobs._search(pattern, text)
        assert (got and (got.span(), got.groups())) == (whole and (whole.span(), whole.groups()))


def test_the_literal_search_without_simd_finds_the_same_job(tmp_path, monkeypatch):
    import slurmdoc.fleet.jobs as jobs

    data = b"noise\n" * 1000 + b"salloc: Granted job allocation 9005\n" + b"srun: job 9006 queued\n"
    assert id_from_text(data) == "9005"  # the first match of the pattern, from either literal
    monkeypatch.setattr(jobs, "_Str", None)
    assert id_from_text(data) == "9005"
    assert id_from_text(b"noise\n" * 1000) is None

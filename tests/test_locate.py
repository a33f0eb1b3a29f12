"""Finding a job's log: Slurm's filename patterns, scontrol records (saved from a real Slurm)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmdoc.slurm import locate as L
from slurmdoc.slurm.locate import JobContext, expand, parse_scontrol, resolve

DATA = Path(__file__).parent / "data" / "sacct"
CTX = JobContext(job_id="28", user="root", name="pat-test", node="vm", work_dir=None)


@pytest.mark.parametrize("pattern,expect,exact", [
    ("slurm-%j.out", "slurm-28.out", True),
    ("%x-%u-%j.log", "pat-test-root-28.log", True),
    ("o-%A-%a.out", "o-28-4294967294.out", True),  # not an array task: Slurm's NO_VAL for %a
    ("%5j-%%.out", "00028-%.out", True),
    ("%J.out", "28.batch.out", True),
    ("log-%t.out", "log-*.out", False),
    ("log-%N.out", "log-*.out", False),
])
def test_expand(pattern, expect, exact):
    g, ex = expand(pattern, CTX)
    assert (g.replace("[%]", "%"), ex) == (expect, exact)


def test_array_fields():
    ctx = JobContext(job_id="30", array_job_id="29", array_task_id="2")
    assert expand("a-%A_%a-%j.out", ctx)[0] == "a-29_2-30.out"
    assert L.default_pattern(ctx) == "slurm-%A_%a.out"


def test_resolve_what_slurm_really_wrote(tmp_path):
    # `sbatch --output='o-%A-%a-%j-%u-%x-%N-%n-%s-%t-%%-%5j.out'` on the local cluster wrote the
    # file below, while scontrol showed StdOut with %N %n %s %t %% %5j still unexpanded.
    real = tmp_path / "o-28-4294967294-28-root-pat-test-vm-0-batch-0-%-00028.out"
    real.write_text("hi\n")
    (tmp_path / "unrelated.out").write_text("x\n")
    shown = str(tmp_path / "o-28-4294967294-28-root-pat-test-%N-%n-%s-%t-%%-%5j.out")
    assert resolve(shown, CTX) == [str(real)]


def test_resolve_relative_to_work_dir_and_globs_are_literal(tmp_path):
    (tmp_path / "weird[1].out").write_text("x\n")
    ctx = JobContext(job_id="5", name="weird[1]", work_dir=str(tmp_path))
    assert resolve("%x.out", ctx) == [str(tmp_path / "weird[1].out")]


def test_parse_saved_scontrol_records():
    het = parse_scontrol((DATA / "hetjob.scontrol.txt").read_text())
    assert [r["HetJobOffset"] for r in het] == ["0", "1"]
    assert L.pick_record(het, "11")["StdOut"].endswith("slurm-11.out")
    arr = parse_scontrol((DATA / "array.scontrol.txt").read_text())
    assert L.pick_record(arr, "10_2")["StdOut"].endswith("slurm-10_2.out")
    one = parse_scontrol((DATA / "exit1.scontrol.txt").read_text())[0]
    assert one["JobState"] == "FAILED" and one["BatchHost"] == "n1" and one["ExitCode"] == "1:0"
    # the one-line form (-o) too
    flat = " ".join((DATA / "exit1.scontrol.txt").read_text().split())
    assert parse_scontrol(flat)[0]["StdOut"] == one["StdOut"]


def test_locate_falls_back_to_slurm_jobid_out(tmp_path, monkeypatch):
    monkeypatch.setattr(L, "scontrol_show_job", lambda *a, **k: [])
    (tmp_path / "slurm-77.out").write_text("x\n")
    loc = L.locate("77", work_dir=str(tmp_path))
    assert loc.paths == [str(tmp_path / "slurm-77.out")] and loc.how == "default"
    loc = L.locate("78", work_dir=str(tmp_path))
    assert loc.paths == [] and "does not exist" in loc.note
    loc = L.locate("79")
    assert loc.paths == [] and "--log" in loc.note


def test_scontrol_missing_is_empty(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert L.scontrol_show_job("1") == []


def test_the_job_of_slurms_default_output_names():
    from slurmdoc.slurm.locate import job_of_default_name

    assert job_of_default_name(["/x/slurm-65.out"]) == "65"
    assert job_of_default_name(["a/slurm-10_3.out", "b/slurm-10_3.out"]) == "10_3"
    assert job_of_default_name(["slurm-65.out", "slurm-66.out"]) is None  # two jobs
    assert job_of_default_name(["slurm-65.out", "job.log"]) is None
    assert job_of_default_name(["slurm-65.err", "slurm-x.out", "myslurm-65.out"]) is None

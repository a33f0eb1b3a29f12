"""What the Slurm side of slurmdoc hands out: per-job triage verdicts (JSON-serialisable)."""

# Annotations are objects, not text (no `from __future__ import annotations`): pydantic would
# otherwise compile and evaluate each field's annotation when it builds a model.

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict


class _Frozen(BaseModel):
    # built on first use (defer_build): `diagnose` without --job imports these (Diagnosis.job
    # names JobVerdict) and validates none of them; building each at import was start-up spent
    # for nothing. TriageReport names JobVerdict before it is defined: resolved then too.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class StepInfo(_Frozen):
    """One accounting row of a job (the job itself or a step), with its meaning in words."""

    id: str  # as sacct shows it: 12.0, 12.batch, 12_3.0, 12+1.0
    name: str
    state: str  # as sacct shows it: FAILED, CANCELLED by 0
    exit_code: Optional[str]  # status:signal
    meaning: str
    nodes: str = ""
    elapsed_s: Optional[int] = None
    max_rss_bytes: Optional[int] = None
    max_rss_node: Optional[str] = None
    max_rss_task: Optional[int] = None


class AttemptRecord(_Frozen):
    """One run of a requeued job (`sacct -D` lists each); the verdict is the last one's."""

    index: int  # 0 = the first run
    state: str  # the job row's State in that run: REQUEUED, PREEMPTED, FAILED ...
    exit_code: Optional[str]
    start: Optional[str] = None
    end: Optional[str] = None
    elapsed_s: Optional[int] = None
    nodes: str = ""
    category: Optional[str] = None  # that run's own triage category
    summary: str = ""  # that run's own triage, one line
    steps: tuple[str, ...] = ()  # "43.0 CANCELLED 0:15", ...


class JobTriage(_Frozen):
    """The accounting verdict on one job (an array task is a job; het components are joined)."""

    job_id: str  # 12, 12_3 (array task), 12 (het job: its components are in `components`)
    name: str
    status: Literal["failed", "ok", "running", "pending"]
    state: str  # the job row's State as sacct shows it
    state_meaning: str
    exit_code: Optional[str]
    exit_meaning: str
    derived_exit_code: Optional[str]
    derived_meaning: str
    category: Optional[str]  # contract category id; None when nothing failed
    summary: str  # one line
    first_failed_step: Optional[StepInfo] = None
    steps: tuple[StepInfo, ...] = ()
    notes: tuple[str, ...] = ()  # contradictions and other observations
    elapsed_s: Optional[int] = None
    timelimit_s: Optional[int] = None
    time_note: Optional[str] = None
    req_mem_per_node_bytes: Optional[int] = None
    max_rss_bytes: Optional[int] = None
    memory_note: Optional[str] = None
    total_cpu_s: Optional[float] = None  # TotalCPU: CPU time used by the job's steps
    alloc_cpus: Optional[int] = None
    cpu_efficiency: Optional[float] = None  # TotalCPU / (Elapsed x AllocCPUS), as seff computes it
    cpu_note: Optional[str] = None
    user: Optional[str] = None
    partition: Optional[str] = None
    nodes: str = ""
    work_dir: Optional[str] = None
    start: Optional[str] = None
    end: Optional[str] = None
    components: tuple[str, ...] = ()  # het job components (12+0, 12+1)
    array_job_id: Optional[str] = None
    array_task_id: Optional[str] = None
    raw_id: Optional[str] = None
    stdout: Optional[str] = None  # where sacct (>= 23.02) records the job's output
    attempts: tuple[AttemptRecord, ...] = ()  # a requeued job (sacct -D): every run, oldest first; the verdict is the last's


class TriageReport(_Frozen):
    """`slurmdoc triage --format json` (schema_version 1)."""

    schema_version: Literal[1] = 1
    kind: Literal["triage"] = "triage"
    status: Literal["failed", "ok"]  # failed when any job failed
    jobs: tuple[JobTriage, ...]
    not_found: tuple[str, ...] = ()  # requested ids sacct knows nothing about
    source: str = "sacct"  # sacct, or the --sacct-file path
    verdicts: tuple["JobVerdict", ...] = ()  # --logs: each finished job's log joined with its record


class JobVerdict(_Frozen):
    """One verdict from both halves: the log's diagnosis and the accounting record.

    Added to `diagnose --format json` as the optional `job` field (`diagnose --job`, epilog)."""

    job_id: str
    status: Literal["failed", "no_failure"]
    category: Optional[str]  # contract category of the fused verdict
    rank: Optional[int] = None  # from the log, when it names one
    verdict: str  # one line
    agrees: Optional[bool] = None  # None: only one half was available
    contradictions: tuple[str, ...] = ()  # where the log and the accounting disagree, in words
    notes: tuple[str, ...] = ()
    accounting: Optional[JobTriage] = None
    logs: tuple[str, ...] = ()
    log_found_by: Optional[str] = None  # scontrol, sacct, default (slurm-%j.out), given, environment
    log_note: Optional[str] = None  # why no log was diagnosed
    partial: bool = False  # the epilog's time budget cut the diagnosis short


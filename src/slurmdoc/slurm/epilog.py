"""The post-job hook: `slurmdoc epilog`, for an sbatch line after srun and for Slurm's
Epilog / EpilogSlurmctld.

Contract: it never raises and its command always exits 0 (a failing Epilog drains the node),
finishes within the time budget (the log's diagnosis runs in a child process that is killed at
its deadline; then the log's tail is diagnosed, and the report says "partial"), writes only
into the directory of the job's log (or --out-dir) and the --ledger file, and reports its own
problems on stderr in one line.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Mapping, Optional

TAIL_BYTES = 1 << 20  # what a partial diagnosis reads of a log that did not fit the budget
COMMENT_MAX = 250


@dataclass
class EpilogOptions:
    job_id: Optional[str] = None
    exit_code: Optional[str] = None  # "1" (srun's $?) or "1:0"
    logs: list[str] = field(default_factory=list)
    out_dir: Optional[str] = None
    ledger: Optional[str] = None
    webhook: Optional[str] = None
    comment: Optional[str] = None  # None, "comment" or "admin"
    budget: float = 30.0
    always: bool = False  # also write a report for a healthy job
    all_nodes: bool = False  # in a node Epilog, act on every node, not only the batch host
    rule_dirs: list[str] = field(default_factory=list)
    sacct: bool = True  # ask sacct for the accounting record


@dataclass
class EpilogResult:
    job_id: Optional[str] = None
    verdict: Optional[object] = None  # JobVerdict
    wrote: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    partial: bool = False
    skipped: Optional[str] = None  # why nothing was done (not the batch host, healthy job)
    summary: str = ""


class _Clock:
    def __init__(self, budget: float) -> None:
        self.t0 = time.monotonic()
        self.budget = max(1.0, budget)

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.t0)

    def slice(self, cap: float, share: float = 1.0, reserve: float = 0.0) -> float:
        return max(0.1, min(cap, (self.left() - reserve) * share))


def _exit_code(text: Optional[str]):
    from slurmdoc.slurm.exitcodes import ExitCode

    if text is None or str(text).strip() == "":
        return None
    t = str(text).strip()
    if ":" in t:
        return ExitCode.parse(t)
    try:
        return ExitCode(int(t), 0)
    except ValueError:
        return None


def _raw_wait_status(text: Optional[str]):
    """SLURM_JOB_EXIT_CODE is a wait status: 768 -> 3:0, 9 -> 0:9."""
    from slurmdoc.slurm.exitcodes import ExitCode

    try:
        n = int(str(text))
    except (TypeError, ValueError):
        return None
    return ExitCode((n >> 8) & 0xFF, n & 0x7F)


def _short_host() -> str:
    return socket.gethostname().split(".", 1)[0]


def _accounting(job_id: str, ec, rec: Mapping[str, str], clock: _Clock, opts: EpilogOptions, problems: list[str]):
    """The accounting half. In an epilog the job row may not be final yet (sacct can show a
    placeholder, scontrol COMPLETING): steps come from sacct, the job's own codes from the
    exit code the hook was given."""
    from slurmdoc.slurm.exitcodes import ACTIVE_STATES
    from slurmdoc.slurm.sacct import SacctRow, run_sacct, select, with_job_defaults
    from slurmdoc.slurm.triage import triage_job

    rows: list[SacctRow] = []
    if opts.sacct:
        try:
            got = run_sacct([job_id], timeout=clock.slice(5, 0.2))
            # SLURM_JOB_ID is the job's own id: an array task's raw id names that task only
            # (`sacct -j` on it returns the whole array when it is also the array's id)
            own = {r.job for r in got if (r.raw_id or "").split(".", 1)[0] == job_id}
            rows = with_job_defaults([r for r in got if r.job in own] if own else select(got, [job_id]))
        except Exception as e:  # noqa: BLE001 - the hook goes on without accounting
            msg = getattr(e, "one_line", lambda: str(e))()
            problems.append(f"no accounting record ({msg})")
    jobs = [r for r in rows if r.is_job]
    if jobs and all(r.state not in ACTIVE_STATES for r in jobs) and jobs[0].name != "allocation":
        return triage_job(rows)
    steps = [r for r in rows if not r.is_job and r.state not in ACTIVE_STATES]
    state = rec.get("JobState", "")
    if state in ACTIVE_STATES or not state:
        # scontrol says COMPLETING and sacct may not be final: what the exit code and the
        # finished steps say (a cancelled job's Epilog sees 0:0 and CANCELLED steps)
        bad_step = any(r.state != "COMPLETED" or (r.exit_code is not None and not r.exit_code.ok) for r in steps)
        if ec is not None and not ec.ok or bad_step:
            state = "FAILED"
        else:
            state = "COMPLETED" if ec is not None or steps else ""
    if not state:
        return triage_job(rows) if rows else None
    base = jobs[0] if jobs else None
    name = base.job if base else job_id
    if rec.get("ArrayTaskId", "").isdigit() and rec.get("ArrayJobId"):
        # an array task is 12_3, not its own id (sacct's row can still be a placeholder here)
        name = f"{rec['ArrayJobId']}_{rec['ArrayTaskId']}"
    job_row = SacctRow(
        job_id=name, job=name, step=None,
        raw_id=job_id, name=rec.get("JobName") or (base.name if base else ""), state=state, exit_code=ec,
        user=(rec.get("UserId", "").split("(")[0] or None) if rec else (base.user if base else None),
        work_dir=rec.get("WorkDir") or (base.work_dir if base else None), nodelist=rec.get("NodeList", ""),
        req_mem_bytes=base.req_mem_bytes if base else None, nnodes=base.nnodes if base else None,
        elapsed_s=base.elapsed_s if base else None, timelimit_s=base.timelimit_s if base else None,
    )
    return triage_job([job_row] + steps)


def _diagnose_subprocess(logs: list[str], clock: _Clock, reserve: float, opts: EpilogOptions, problems: list[str]):
    """(Diagnosis | None, partial, note). Whole logs first; past ~60% of the time left, the tail
    of the largest log instead."""
    from slurmdoc.models import Diagnosis

    base = [sys.executable, "-m", "slurmdoc", "diagnose", "--format", "json", "--no-progress"]
    for d in opts.rule_dirs:
        base += ["--rules", d]
    env = dict(os.environ, NO_COLOR="1")

    def run(args: list[str], timeout: float, stdin_bytes: Optional[bytes] = None):
        p = subprocess.Popen(args, stdin=subprocess.PIPE if stdin_bytes is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
        try:
            out, err = p.communicate(stdin_bytes, timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, 9)
            except OSError:
                p.kill()
            p.communicate()
            return None, None, True
        return p.returncode, (out, err), False

    rc, res, timed_out = run(base + ["--"] + logs, clock.slice(3600, 0.6, reserve))
    note = None
    if not timed_out and res is not None:
        out, err = res
        if rc in (0, 1):
            try:
                return Diagnosis.model_validate_json(out), False, None
            except Exception as e:  # noqa: BLE001
                return None, False, f"diagnosis output unreadable ({type(e).__name__})"
        msg = err.decode("utf-8", "replace").strip().splitlines()
        msg = [m for m in msg if m.startswith("slurmdoc: error")] or msg or [f"exit status {rc}"]
        return None, False, msg[-1].replace("slurmdoc: error: ", "")
    # partial: the tail of the largest log
    try:
        big = max(logs, key=lambda p: os.path.getsize(p) if os.path.isfile(p) else -1)
        with open(big, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - TAIL_BYTES))
            tail = fh.read(TAIL_BYTES)
            if size > TAIL_BYTES:
                nl = tail.find(b"\n")
                tail = tail[nl + 1:] if nl >= 0 else tail
    except OSError as e:
        return None, True, f"the diagnosis ran out of time and the log's tail could not be read ({e.strerror})"
    if clock.left() - reserve < 0.5:
        return None, True, "the diagnosis ran out of time"
    rc, res, timed_out = run(base + ["-"], clock.slice(3600, 1.0, reserve), tail)
    note = f"the whole log did not fit the {clock.budget:.0f} s budget: diagnosed its last {len(tail) >> 10} KiB ({big})"
    if timed_out or res is None or rc not in (0, 1):
        return None, True, "the diagnosis ran out of time"
    try:
        return Diagnosis.model_validate_json(res[0]), True, note
    except Exception:  # noqa: BLE001
        return None, True, "the diagnosis ran out of time"


def _atomic_write(directory: str, name: str, data: bytes, owner: Optional[tuple[int, int]]) -> str:
    """Write `name` in `directory` through a fresh temporary file and a rename: a symlink planted
    at the target is replaced, never followed."""
    final = os.path.join(directory, name)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if owner is not None and os.geteuid() == 0:
            try:
                os.chown(tmp, owner[0], owner[1])
            except OSError:
                pass
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return final


def _append_ledger(path: str, line: str, clock: _Clock) -> None:
    import fcntl

    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        deadline = time.monotonic() + clock.slice(5, 0.3)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                    raise TimeoutError("ledger is locked by another writer") from None
                time.sleep(0.05)
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def _post_webhook(url: str, payload: dict, timeout: float) -> Optional[str]:
    """POST the JSON; runs in a daemon thread so a slow DNS lookup cannot hold the hook."""
    import urllib.request

    box: dict = {}

    def work() -> None:
        try:
            req = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                         headers={"Content-Type": "application/json", "User-Agent": "slurmdoc-epilog"})
            with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - the admin's URL
                box["status"] = r.status
        except Exception as e:  # noqa: BLE001
            box["error"] = f"{type(e).__name__}: {e}"

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        return f"webhook did not answer within {timeout:.1f} s"
    if "error" in box:
        return f"webhook failed ({box['error']})"
    return None


def _set_comment(job_id: str, text: str, admin: bool, timeout: float) -> Optional[str]:
    key = "AdminComment" if admin else "Comment"
    try:
        p = subprocess.run(["scontrol", "update", f"JobId={job_id}", f"{key}={text[:COMMENT_MAX]}"],
                           capture_output=True, text=True, timeout=timeout, errors="replace")
    except (OSError, subprocess.SubprocessError) as e:
        return f"could not set {key} ({type(e).__name__})"
    if p.returncode != 0:
        return f"could not set {key} ({(p.stderr or p.stdout).strip().splitlines()[-1] if (p.stderr or p.stdout).strip() else p.returncode})"
    return None


def report_text(diag, verdict) -> str:
    """The text report: the joined verdict, then the log's diagnosis (no colour)."""
    import io

    from rich.console import Console

    from slurmdoc.report.job import render_text as render_job
    from slurmdoc.report.terminal import render as render_term

    buf = io.StringIO()
    con = Console(file=buf, no_color=True, width=120, highlight=False, soft_wrap=True, force_terminal=False)
    render_job(verdict, con)
    if diag is not None and diag.lines_read:
        con.print("")
        render_term(diag, con)
    return buf.getvalue()


def run_epilog(opts: EpilogOptions, env: Optional[Mapping[str, str]] = None) -> EpilogResult:
    """Never raises."""
    res = EpilogResult()
    try:
        _run(opts, os.environ if env is None else env, res)
    except BaseException as e:  # noqa: BLE001 - the hook must never fail the job's epilog
        if isinstance(e, KeyboardInterrupt):
            res.problems.append("interrupted")
        else:
            res.problems.append(f"internal error: {type(e).__name__}: {e}")
    return res


def _run(opts: EpilogOptions, env: Mapping[str, str], res: EpilogResult) -> None:
    from slurmdoc.models import Diagnosis
    from slurmdoc.slurm.fuse import fuse
    from slurmdoc.slurm.locate import (
        JobContext,
        default_pattern,
        expand,
        locate_from_patterns,
        pick_record,
        scontrol_show_job,
    )

    clock = _Clock(opts.budget)
    reserve = min(8.0, clock.budget * 0.25)  # kept for writing, ledger, webhook, comment
    problems = res.problems
    job_id = (opts.job_id or env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or "").strip()
    if not job_id:
        problems.append("no job id: pass --job-id or run where SLURM_JOB_ID is set")
        return
    res.job_id = job_id
    context = env.get("SLURM_SCRIPT_CONTEXT", "")
    ec = _exit_code(opts.exit_code)
    if ec is None:
        ec = _exit_code(env.get("SLURM_JOB_EXIT_CODE2")) or _raw_wait_status(env.get("SLURM_JOB_EXIT_CODE"))
    recs = scontrol_show_job(job_id, timeout=clock.slice(5, 0.15))
    rec = pick_record(recs, job_id) if recs else {}

    if rec.get("HetJobOffset") not in (None, "", "0"):
        res.skipped = f"component {rec['HetJobOffset']} of heterogeneous job {rec.get('HetJobId')}: its leader reports"
        return
    node = env.get("SLURMD_NODENAME")
    if context == "epilog_slurmd" and not opts.all_nodes and node and rec.get("BatchHost") and node != rec["BatchHost"]:
        res.skipped = f"not the batch host ({node} != {rec['BatchHost']})"
        return

    ctx = JobContext(
        job_id=job_id,
        array_job_id=env.get("SLURM_ARRAY_JOB_ID") or rec.get("ArrayJobId"),
        array_task_id=env.get("SLURM_ARRAY_TASK_ID") or rec.get("ArrayTaskId"),
        user=env.get("SLURM_JOB_USER") or (rec.get("UserId", "").split("(")[0] or None),
        name=env.get("SLURM_JOB_NAME") or rec.get("JobName"),
        node=_short_host() if context.startswith("epilog_slurmd") or not context else rec.get("BatchHost"),
        work_dir=env.get("SLURM_JOB_WORK_DIR") or rec.get("WorkDir") or env.get("SLURM_SUBMIT_DIR"),
    )
    if opts.logs:
        loc = locate_from_patterns(opts.logs, ctx, "given")
        if not loc.paths:
            loc.note = f"the log {opts.logs[0]} does not exist"
    elif env.get("SLURM_JOB_STDOUT"):
        loc = locate_from_patterns([env["SLURM_JOB_STDOUT"], env.get("SLURM_JOB_STDERR", "")], ctx, "environment")
    elif rec.get("StdOut"):
        loc = locate_from_patterns([rec.get("StdOut", ""), rec.get("StdErr", "")], ctx, "scontrol")
    elif ctx.work_dir:
        loc = locate_from_patterns([default_pattern(ctx)], ctx, "default")
    else:
        from slurmdoc.slurm.locate import Located

        loc = Located(note="no log path known (no SLURM_JOB_STDOUT, scontrol record or work dir)")

    acct = _accounting(job_id, ec, rec, clock, opts, problems)

    diag: Optional[Diagnosis] = None
    partial = False
    note = loc.note
    dnote = None
    logs = [p for p in loc.paths if os.path.isfile(p)]
    if logs:
        diag, partial, dnote = _diagnose_subprocess(logs, clock, reserve, opts, problems)
        if dnote:
            note = dnote if diag is None else note
            if diag is not None and partial:
                problems.append(dnote)
    res.partial = partial
    verdict = fuse(acct.job_id if acct is not None else job_id, diag, acct, logs=tuple(logs) if diag is not None else (),
                   log_found_by=loc.how if diag is not None else None,
                   log_note=None if diag is not None else (note or "no log found"), partial=partial,
                   extra_notes=(dnote,) if partial and diag is not None and dnote else ())
    res.verdict = verdict
    if diag is None:
        diag = Diagnosis(status="failed" if verdict.status == "failed" else "no_failure", root_cause=None,
                         symptoms=(), ranks_seen=0, verdict=verdict.verdict, job=verdict)
    else:
        status = "failed" if verdict.status == "failed" else diag.status
        diag = diag.model_copy(update={"job": verdict, "status": status})
    res.summary = verdict.verdict
    if diag is None or diag.job is None:  # pragma: no cover - set above
        return
    if note and diag.lines_read == 0 and (verdict.status == "failed" or loc.expected):
        problems.append(note)  # (a healthy job with --output=/dev/null is not a problem)

    # where to write: --out-dir, else the log's directory
    # a healthy job gets no report files, with or without a log (its ledger line still says so)
    healthy = verdict.status == "no_failure" and not verdict.contradictions and not partial
    out_dir = opts.out_dir
    if out_dir is None:
        if logs:
            out_dir = os.path.dirname(os.path.abspath(logs[0]))
        elif loc.expected and os.path.isdir(os.path.dirname(loc.expected)):
            out_dir = os.path.dirname(loc.expected)
        elif ctx.work_dir and os.path.isdir(ctx.work_dir):
            out_dir = ctx.work_dir
    if logs:
        stem = os.path.basename(logs[0])
        stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    else:
        stem = f"slurm-{job_id}"
    report_path = None
    if healthy and not opts.always:
        res.skipped = "no failure: no report written (--always writes one)"
    elif out_dir is None:
        problems.append("no directory to write the report in (give --out-dir)")
    else:
        owner = None
        if logs:
            try:
                st = os.stat(logs[0])
                owner = (st.st_uid, st.st_gid)
            except OSError:
                pass
        try:
            jtext = diag.model_dump_json(indent=2) + "\n"
            res.wrote.append(_atomic_write(out_dir, f"{stem}.slurmdoc.json", jtext.encode(), owner))
            res.wrote.append(_atomic_write(out_dir, f"{stem}.slurmdoc.txt", report_text(diag, verdict).encode(), owner))
            report_path = res.wrote[-1]
        except OSError as e:
            problems.append(f"cannot write the report in {out_dir} ({e.strerror or e})")

    acc = verdict.accounting
    record = {
        "schema_version": 1,
        "kind": "epilog",
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "job_id": verdict.job_id,  # 12_3 for an array task
        "slurm_job_id": job_id,  # its own id, as SLURM_JOB_ID gives it
        "name": ctx.name or (acc.name if acc else None),
        "user": ctx.user or (acc.user if acc else None),
        "status": verdict.status,
        "category": verdict.category,
        "rank": verdict.rank,
        "verdict": verdict.verdict,
        "exit_code": str(ec) if ec is not None else None,
        "state": acc.state if acc else None,
        "agrees": verdict.agrees,
        "contradictions": list(verdict.contradictions),
        "partial": partial,
        "report": report_path,
        "log": logs[0] if logs else None,
    }
    if opts.ledger:
        try:
            _append_ledger(opts.ledger, json.dumps(record, ensure_ascii=False) + "\n", clock)
        except (OSError, TimeoutError) as e:
            problems.append(f"cannot append to the ledger {opts.ledger} ({getattr(e, 'strerror', None) or e})")
    if opts.webhook and clock.left() > 0.5:
        err = _post_webhook(opts.webhook, record, clock.slice(5, 0.5))
        if err:
            problems.append(err)
    if opts.comment and verdict.status == "failed" and clock.left() > 0.5:
        who = f" rank {verdict.rank}" if verdict.rank is not None else ""
        err = _set_comment(job_id, f"slurmdoc: {verdict.category}{who}: {verdict.verdict}", opts.comment == "admin",
                           clock.slice(5, 0.5))
        if err:
            problems.append(err)

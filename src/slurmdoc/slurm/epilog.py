"""The post-job hook: `slurmdoc epilog`, for an sbatch line after srun and for Slurm's
Epilog / EpilogSlurmctld.

Contract: it never raises and its command always exits 0 (a failing Epilog drains the node),
finishes within the time budget (the log's diagnosis runs in a child process that is killed at
its deadline; then the log's tail is diagnosed, and the report says "partial"), writes only
into the directory of the job's log (or --out-dir) and the --ledger file, and reports its own
problems on stderr in one line.

Two halves (see privsep.py): the user side (`user_side`: find and read the log, diagnose it,
write the reports) runs in a worker that, when the epilogue is root, has become the job's user
first; the root side (`_run`: scontrol, sacct, ledger, webhook, comment) never opens a path in
the user's tree and takes the worker's answer as untrusted, capped JSON. Every field that
leaves the epilogue is capped (FIELD_MAX, PATH_MAX, VERDICT_MAX, COMMENT_MAX, REPORT_STR_MAX)
and made printable UTF-8 (bytes that are not UTF-8 become backslash escapes).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Mapping, Optional

TAIL_BYTES = 1 << 20  # what a partial diagnosis reads of a log that did not fit the budget
HTML_MAX = 8 << 20  # the largest HTML report the epilogue writes (it aggregates ranks, so a real one is far smaller)
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
    html: bool = False  # also write the HTML report (<log>.slurmdoc.html)
    all_nodes: bool = False  # in a node Epilog, act on every node, not only the batch host
    rule_dirs: list[str] = field(default_factory=list)
    sacct: bool = True  # ask sacct for the accounting record
    # the ranks' flight-recorder dumps: a directory or a `<prefix>` of `<prefix><rank>` files;
    # Slurm's filename patterns expanded, a relative path taken from the job's work dir; read by
    # the worker (as the job's user), never by the root side
    traces: Optional[str] = None


@dataclass
class EpilogResult:
    job_id: Optional[str] = None
    verdict: Optional[object] = None  # JobVerdict
    wrote: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    partial: bool = False
    skipped: Optional[str] = None  # why nothing was done (not the batch host, healthy job)
    summary: str = ""


def _startup_spent() -> float:
    """How long this process has lived, when that is the start-up of a fresh `slurmdoc epilog`
    (under 3 s): it counts against the budget, so the budget is the hook's whole wall-clock
    time. A long-lived process calling run_epilog gets the full budget from the call."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0
    return age if 0.0 < age < 3.0 else 0.0


class _Clock:
    def __init__(self, budget: float, spent: float = 0.0) -> None:
        self.t0 = time.monotonic() - spent
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


# ---- bounds: what leaves the epilogue (ledger, webhook, Comment, report) is capped and printable

FIELD_MAX = 256  # ids, job name, user, state, category, exit code
PATH_MAX = 1024  # a log's or report's path in the ledger and webhook
VERDICT_MAX = 1024  # the verdict line
CONTRADICTIONS_MAX = 8  # entries, each at most VERDICT_MAX // 2
REPORT_STR_MAX = 8192  # any one string in a written report
REPORT_SEQ_MAX = 2000  # any one list in a written report
RESULT_STR_MAX = 65536  # any one string the parent accepts from the worker


def display(text: str) -> str:
    """A str that encodes to UTF-8: bytes that were not UTF-8 in a path (held as surrogates)
    become backslash escapes, e.g. a Latin-1 `\\xe9`."""
    if not isinstance(text, str):
        text = str(text)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace") \
            if _only_escapes(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _only_escapes(text: str) -> bool:
    try:
        text.encode("utf-8", "surrogateescape")
        return True
    except UnicodeEncodeError:
        return False


def printable(text) -> str:
    """Text a terminal shows as it is: every character that is not printable (C0 and C1 controls
    such as ESC and CSI, DEL, line and paragraph separators, bidi overrides and other format
    characters) becomes a backslash escape (`\\x1b`, `\\u202e`), so a name or path the job's user
    chose can neither start a line nor send an escape sequence to the admin's terminal."""
    t = display(text)
    if t.isprintable():
        return t
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in t)


def json_line(obj) -> str:
    """One JSON line, UTF-8, whose every non-printable character is a \\u escape (json.dumps
    escapes only the C0 controls): the ledger stays one line to any reader and holds no escape
    sequence for a terminal that shows it."""
    text = json.dumps(obj, ensure_ascii=False)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else json.dumps(ch)[1:-1] for ch in text)


def cap(text, n: int) -> Optional[str]:
    """At most n characters, printable in UTF-8; a cut string ends with an ellipsis."""
    if text is None:
        return None
    t = display(text)
    return t if len(t) <= n else t[: n - 1] + "\u2026"


def _one_line(text: str, n: int) -> str:
    """For scontrol's Comment: no control characters, one line, n characters at most."""
    t = "".join(ch if ch.isprintable() else " " for ch in display(text))
    return cap(" ".join(t.split()), n) or ""


def _clean(obj, n: int = REPORT_STR_MAX, depth: int = 0):
    """Every string capped and printable, every list bounded, for a written report."""
    if depth > 40:
        return None
    if isinstance(obj, str):
        return cap(obj, n)
    if isinstance(obj, dict):
        return {cap(k, FIELD_MAX): _clean(v, n, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v, n, depth + 1) for v in list(obj)[:REPORT_SEQ_MAX]]
    return obj


# ---- the user-side half: runs in the worker, as the job's user when the epilogue is root

WRITE_RESERVE = 0.5  # seconds at least kept for rendering and writing the reports (5% of the time, up to 2 s)


def prepare_user_side(req: dict) -> dict:
    """Before the worker becomes the job's user: import what the user side needs and load the
    rules (admin-owned code and files only), so nothing later depends on reading the install."""
    from slurmdoc.api import diagnose  # noqa: F401
    from slurmdoc.engine.loader import load_rulebook
    from slurmdoc.errors import SlurmdocError
    from slurmdoc.models import Diagnosis
    from slurmdoc.slurm import fuse as _fuse  # noqa: F401
    from slurmdoc.slurm import locate as _locate  # noqa: F401
    from slurmdoc.slurm.models import JobVerdict

    if req.get("traces"):  # the dumps' reader and matcher, loaded before the change of user
        import slurmdoc.traces  # noqa: F401
        from slurmdoc.diagnosis import recorder as _recorder  # noqa: F401

    out: dict = {"book": None, "book_error": None}
    try:
        out["book"] = load_rulebook(list(req.get("rule_dirs") or []))
    except SlurmdocError as e:
        out["book_error"] = e.one_line()
    # what the text report pulls in when it renders
    import rich.console  # noqa: F401
    import rich.text  # noqa: F401

    from slurmdoc.report import html as _html  # noqa: F401
    from slurmdoc.report import job as _job  # noqa: F401
    from slurmdoc.report import terminal as _terminal  # noqa: F401

    out["warm"] = (Diagnosis, JobVerdict)
    return out


def _fork_answer(work) -> tuple[int, int]:
    """(pid, fd): a forked child runs `work()` (a JSON-ready value) and sends ("ok", value) or
    ("error", one line) on fd, to its own parent, the same user: nothing crosses a boundary.
    The child dies with its parent and never returns into the caller's code."""
    import pickle

    from slurmdoc.slurm.privsep import set_parent_death_signal

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(r)
            set_parent_death_signal()
            from slurmdoc.errors import SlurmdocError

            try:
                msg = ("ok", work())
            except SlurmdocError as e:
                msg = ("error", e.one_line())
            except (MemoryError, RecursionError):
                msg = ("error", "ran out of memory or nesting depth")
            except BaseException as e:  # noqa: BLE001
                msg = ("error", f"internal error: {type(e).__name__}: {e}")
            data = pickle.dumps(msg)
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
        finally:
            os._exit(0)
    os.close(w)
    return pid, r


def _fork_diagnosis(paths: list[str], book, tail_bytes: Optional[int] = None, facts: Optional[dict] = None) -> tuple[int, int]:
    """(pid, fd): a forked child (the loaded rules come along) diagnoses `paths` (only their last
    `tail_bytes`, when given) and sends its answer on fd."""

    def work():
        from slurmdoc.api import diagnose

        return diagnose(paths, rulebook=book, tail_bytes=tail_bytes, facts=facts).model_dump(mode="json")

    return _fork_answer(work)


def _collect(children: dict[str, tuple[int, int]], end: float, decisive: str, parse=None, what: str = "the diagnosis") -> dict[str, tuple]:
    """Read the children's answers until `decisive` has answered or the time is up; kill the
    rest. {name: ("ok", parse(value)) | ("error", text)} for those that answered; `parse`
    defaults to Diagnosis.model_validate."""
    import pickle
    import select
    import signal as _signal

    if parse is None:
        from slurmdoc.models import Diagnosis

        parse = Diagnosis.model_validate
    bufs: dict[str, list[bytes]] = {k: [] for k in children}
    open_fds = {fd: k for k, (_, fd) in children.items()}
    done: dict[str, tuple] = {}
    try:
        while open_fds and decisive not in done:
            left = end - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select(list(open_fds), [], [], min(left, 1.0))
            for fd in ready:
                k = open_fds[fd]
                b = os.read(fd, 1 << 20)
                if b:
                    bufs[k].append(b)
                    continue
                del open_fds[fd]
                os.close(fd)
                try:
                    kind, body = pickle.loads(b"".join(bufs[k]))
                    done[k] = ("ok", parse(body)) if kind == "ok" else ("error", str(body))
                except Exception:  # noqa: BLE001
                    done[k] = ("error", f"{what} stopped without an answer")
    finally:
        for fd in open_fds:
            os.close(fd)
        for k, (pid, _) in children.items():
            if k not in done:
                try:
                    os.kill(pid, _signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    return done


def _diagnose_logs(logs: list[str], book, left, tail_bytes: int, facts: Optional[dict] = None):
    """(Diagnosis | None, partial, note). The whole logs, and at the same time, when the largest
    log is larger than `tail_bytes`, its tail: the whole logs' answer if it comes in time, else
    the tail's (partial)."""
    best, big = -1, logs[0]
    for p in logs:
        try:
            size = os.stat(p).st_size
        except OSError:
            continue
        if size > best:
            best, big = size, p
    children = {"whole": _fork_diagnosis(logs, book, facts=facts)}
    if best > tail_bytes:  # the tail keeps the log's name and line numbers
        children["tail"] = _fork_diagnosis([big], book, tail_bytes, facts=facts)
    got = _collect(children, time.monotonic() + max(0.1, left()), "whole")
    if "whole" in got:
        kind, body = got["whole"]
        return (body, False, None) if kind == "ok" else (None, False, body)
    if "tail" in got and got["tail"][0] == "ok":
        return got["tail"][1], True, \
            f"the whole log did not fit the budget: diagnosed its last {tail_bytes >> 10} KiB ({display(big)})"
    if "tail" in got:
        return None, True, f"the diagnosis ran out of time, and its tail: {got['tail'][1]}"
    return None, True, "the diagnosis ran out of time"


TRACES_SHARE = 0.5  # of the time left, at most, for reading the flight-recorder dumps


def traces_path(pattern: str, ctx) -> tuple[Optional[str], Optional[str]]:
    """(path, problem): the epilogue's `--traces` pattern as one path (Slurm's filename patterns
    expanded, a relative path taken from the job's work dir); a pattern that names several paths
    (per-node or per-task fields) is a problem, not a guess."""
    import re as _re

    from slurmdoc.slurm.locate import expand

    if not pattern or "\x00" in pattern:
        return None, "--traces: an empty or invalid path"
    full = pattern if os.path.isabs(pattern) or not ctx.work_dir else os.path.join(ctx.work_dir, pattern)
    g, exact = expand(full, ctx)
    if not exact:
        return None, f"--traces {display(pattern)}: names more than one path (a per-node or per-task field): not read"
    return _re.sub(r"\[([*?\[])\]", r"\1", g), None


def _fork_traces(path: str) -> tuple[int, int]:
    """(pid, fd): a forked child reads the flight-recorder dumps at `path` and matches them
    across ranks (slurmdoc.traces), and sends ("ok", verdict) or ("error", text) on fd. Apart
    from the log's diagnosis, so that dumps that hang or blow up never cost it."""

    def work():
        from slurmdoc.diagnosis.recorder import read_verdict

        return read_verdict(path).model_dump(mode="json")

    return _fork_answer(work)


def _collect_traces(pid: int, fd: int, end: float):
    """(TraceVerdict | None, note): the dumps child's answer by `end`, else it is killed."""
    from slurmdoc.traces import TraceVerdict

    got = _collect({"traces": (pid, fd)}, end, "traces", TraceVerdict.model_validate, "the reader").get("traces")
    if got is None:
        return None, "the flight-recorder dumps were not read: out of time"
    kind, body = got
    if kind == "ok":
        return body, None
    return None, f"the flight-recorder dumps were not read: {body}"


def _log_mode(logs: list[str]) -> int:
    """The reports' mode: never more than the logs' (read/write bits they all share), 0600
    without a log."""
    import stat as _stat

    mode = 0o666
    seen = False
    for p in logs:
        try:
            st = os.stat(p)
        except OSError:
            continue
        seen = True
        mode &= _stat.S_IMODE(st.st_mode)
    return (mode & 0o666) if seen else 0o600


def _write_reports(out_dir: str, files: list[tuple[str, bytes]], mode: int) -> list[str]:
    """Each file through a fresh temporary file created in `out_dir` itself with
    O_CREAT|O_EXCL|O_NOFOLLOW under an unguessable name, then renamed over the final name: what
    is planted at the final name (symlink, hard link, FIFO) is replaced, never followed or opened.
    Paths are resolved with the caller's own rights (the job's user, for a root epilogue)."""
    import secrets

    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)
    dfd = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    wrote = []
    try:
        for name, data in files:
            for _ in range(8):
                tmp = f".{name}.{secrets.token_hex(8)}.tmp"
                try:
                    fd = os.open(tmp, flags, 0o600, dir_fd=dfd)
                    break
                except FileExistsError:
                    continue
            else:
                raise OSError(errno.EEXIST, "no free temporary name")
            try:
                try:
                    os.fchmod(fd, mode)
                    view = memoryview(data)
                    while view:
                        n = os.write(fd, view)
                        if n <= 0:
                            raise OSError(errno.ENOSPC, "short write")
                        view = view[n:]
                finally:
                    os.close(fd)
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=dfd)
                except OSError:
                    pass
                raise
            wrote.append(os.path.join(out_dir, name))
    finally:
        os.close(dfd)
    return wrote


SEARCH_SHARE = 0.25  # of the time left, at most, for finding the log's paths (a glob of a per-task pattern)
SEARCH_MAX = 5.0  # seconds of CPU time, at most, for the same


class _SearchCut(Exception):
    pass


def _within_cpu(seconds: float, work):
    """work() cut off after `seconds` of CPU time (ITIMER_PROF: not the worker's alarm, which
    keeps its deadline); raises _SearchCut then. A glob of a per-task pattern over a tree the
    user made (a directory of symlinks to itself) has no bound of its own."""
    import signal

    def cut(signum, frame):
        raise _SearchCut()

    old = signal.signal(signal.SIGPROF, cut)
    signal.setitimer(signal.ITIMER_PROF, max(0.05, seconds))
    try:
        return work()
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


def user_side(req: dict, prepared: dict) -> dict:
    """Locate and read the job's log, diagnose it, join it with the accounting verdict the
    parent sent, write the reports. Returns a JSON-able answer for the parent."""
    from slurmdoc.models import Diagnosis
    from slurmdoc.slurm.fuse import fuse
    from slurmdoc.slurm.locate import JobContext, Located, locate_from_patterns
    from slurmdoc.slurm.models import JobTriage

    deadline_at = float(req.get("deadline_at") or time.monotonic() + 10.0)
    reserve = min(2.0, max(WRITE_RESERVE, float(req.get("deadline") or 10.0) * 0.05))

    def left() -> float:
        return deadline_at - time.monotonic() - reserve

    problems: list[str] = []
    job_id = str(req["job_id"])
    ctx = JobContext(**req["ctx"])
    patterns = [str(p) for p in req.get("patterns") or []]
    how = str(req.get("how") or "")
    if patterns:
        try:
            loc = _within_cpu(min(SEARCH_MAX, max(0.1, left()) * SEARCH_SHARE),
                              lambda: locate_from_patterns(patterns, ctx, how))
            if how == "given" and not loc.paths:
                loc.note = f"the log {patterns[0]} does not exist"
        except _SearchCut:
            loc = Located(how=how, note=f"the log's pattern {display(patterns[0])} names too many paths to search: not read")
    else:
        loc = Located(note=req.get("no_log_note") or "no log path known")
    acct = JobTriage.model_validate(req["acct"]) if req.get("acct") else None

    diag: Optional[Diagnosis] = None
    partial = False
    note = loc.note
    dnote = None
    logs = [p for p in loc.paths if os.path.isfile(p)]
    if logs:
        if prepared.get("book") is None:
            dnote = prepared.get("book_error") or "the rules did not load"
        elif left() < 0.5:
            dnote = "the diagnosis ran out of time before it began (a busy machine?)"
        else:
            from slurmdoc.slurm.triage import job_facts

            facts = job_facts(acct.job_id if acct is not None else job_id, acct)
            reading = None  # the dumps, read beside the diagnosis in a child of their own
            if req.get("traces"):
                tpath, tnote = traces_path(str(req["traces"]), ctx)
                if tpath is not None:
                    reading = (_fork_traces(tpath), time.monotonic() + max(0.1, left() * TRACES_SHARE), tpath)
                else:
                    problems.append(tnote)
            diag, partial, dnote = _diagnose_logs(logs, prepared["book"], left, int(req.get("tail_bytes") or TAIL_BYTES), facts)
            if reading is not None:
                (tpid, tfd), tend, tpath = reading
                recorded, tnote = _collect_traces(tpid, tfd, min(tend, time.monotonic() + max(0.0, left())))
                if tnote:
                    problems.append(tnote)
                if diag is not None:
                    from slurmdoc.diagnosis.recorder import fuse_recorder

                    diag = fuse_recorder(diag, recorded, tpath) if recorded is not None else \
                        diag.model_copy(update={"warnings": diag.warnings + ((tnote,) if tnote else ())})
        if dnote:
            note = dnote if diag is None else note
            if diag is not None and partial:
                problems.append(dnote)
    verdict = fuse(acct.job_id if acct is not None else job_id, diag, acct, logs=tuple(logs) if diag is not None else (),
                   log_found_by=loc.how if diag is not None else None,
                   log_note=None if diag is not None else (note or "no log found"), partial=partial,
                   extra_notes=(dnote,) if partial and diag is not None and dnote else ())
    if diag is None:
        diag = Diagnosis(status="failed" if verdict.status == "failed" else "no_failure", root_cause=None,
                         symptoms=(), ranks_seen=0, verdict=verdict.verdict, job=verdict)
    else:
        status = "failed" if verdict.status == "failed" else diag.status
        diag = diag.model_copy(update={"job": verdict, "status": status})
    if note and diag.lines_read == 0 and (verdict.status == "failed" or loc.expected):
        problems.append(note)  # (a healthy job with --output=/dev/null is not a problem)

    # where to write: --out-dir, else the log's directory
    # a healthy job gets no report files, with or without a log (its ledger line still says so)
    healthy = verdict.status == "no_failure" and not verdict.contradictions and not partial
    out_dir = req.get("out_dir")
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
    wrote: list[str] = []
    skipped = None
    if healthy and not req.get("always"):
        skipped = "no failure: no report written (--always writes one)"
    elif out_dir is None:
        problems.append("no directory to write the report in (give --out-dir)")
    else:
        try:
            clean = Diagnosis.model_validate(_clean(diag.model_dump(mode="json")))
            jtext = clean.model_dump_json(indent=2) + "\n"
            ttext = report_text(clean, clean.job)
            files = [(f"{stem}.slurmdoc.json", jtext.encode("utf-8"))]
            if req.get("html"):
                hdata = report_html(clean).encode("utf-8", "backslashreplace")
                most = min(HTML_MAX, int(req.get("html_max") or HTML_MAX))
                if len(hdata) <= most:
                    files.append((f"{stem}.slurmdoc.html", hdata))
                else:
                    problems.append(f"the HTML report would be {len(hdata)} bytes, over the cap of {most}: not written")
            files.append((f"{stem}.slurmdoc.txt", ttext.encode("utf-8", "backslashreplace")))  # last: the ledger's `report`
            wrote = _write_reports(out_dir, files, _log_mode(logs))
        except OSError as e:
            problems.append(f"cannot write the report in {display(out_dir)} ({e.strerror or e})")
    return {
        "verdict": verdict.model_dump(mode="json"),
        "wrote": wrote,
        "problems": problems,
        "partial": partial,
        "skipped": skipped,
        "log": logs[0] if logs else None,
    }


# ---- the root side: accounting, the worker's answer, ledger, webhook, comment


def _append_ledger(path: str, line: bytes, clock: _Clock) -> None:
    """All or nothing: one write of the whole line under an exclusive lock; a short or failed
    write (a full disk, a file-size limit) is cut back to the size before, so the ledger is left
    as it was. A ledger whose last line was left unterminated gets a newline first. A symlink,
    FIFO or hard-linked file at its path is refused, and so is a file owned by another user than
    root or the caller."""
    import fcntl
    import stat as _stat

    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    try:
        st = os.fstat(fd)
        if not _stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if st.st_nlink != 1:  # a hard link to some other file
            raise OSError(errno.EMLINK, "it has other hard links")
        if st.st_uid not in (0, os.geteuid()):  # one a job's user made first, in a directory anyone may write
            raise OSError(errno.EPERM, f"it is owned by uid {st.st_uid}, not by root or the epilogue's user")
        deadline = time.monotonic() + clock.slice(5, 0.3)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                    raise TimeoutError("ledger is locked by another writer") from None
                time.sleep(0.05)
        size = os.fstat(fd).st_size
        data = line
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + line
        try:
            n = os.write(fd, data)
            if n != len(data):
                raise OSError(errno.ENOSPC, f"short write ({n} of {len(data)} bytes)")
        except OSError:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            raise
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
        return f"webhook failed ({cap(box['error'], FIELD_MAX)})"
    return None


def _set_comment(job_id: str, text: str, admin: bool, timeout: float) -> Optional[str]:
    key = "AdminComment" if admin else "Comment"
    try:
        p = subprocess.run(["scontrol", "update", f"JobId={job_id}", f"{key}={_one_line(text, COMMENT_MAX)}"],
                           capture_output=True, text=True, timeout=timeout, errors="replace")
    except (OSError, subprocess.SubprocessError) as e:
        return f"could not set {key} ({type(e).__name__})"
    if p.returncode != 0:
        return f"could not set {key} ({(p.stderr or p.stdout).strip().splitlines()[-1] if (p.stderr or p.stdout).strip() else p.returncode})"
    return None


def report_text(diag, verdict) -> str:
    """The text report: the joined verdict, then the log's diagnosis (no colour)."""
    import io

    from slurmdoc.report.job import render_text as render_job
    from slurmdoc.report.styled import PlainLines
    from slurmdoc.report.terminal import render as render_term

    buf = io.StringIO()

    def console():  # made only for a line rich must draw itself (report.styled.PlainLines)
        from rich.console import Console

        return Console(file=buf, no_color=True, width=120, highlight=False, soft_wrap=True, force_terminal=False)

    con = PlainLines(buf, console)
    render_job(verdict, con)
    if diag is not None and diag.lines_read:
        con.line("")
        render_term(diag, con)
    return buf.getvalue()


def report_html(diag) -> str:
    """The HTML report (one self-contained page: inline CSS and SVG, no scripts)."""
    from slurmdoc.report.html import render

    return render(diag)


def run_epilog(opts: EpilogOptions, env: Optional[Mapping[str, str]] = None) -> EpilogResult:
    """Never raises."""
    res = EpilogResult()
    try:
        _run(opts, os.environ if env is None else env, res)
    except BaseException as e:  # noqa: BLE001 - the hook must never fail the job's epilog
        if isinstance(e, KeyboardInterrupt):
            res.problems.append("interrupted")
        else:
            res.problems.append(f"internal error: {type(e).__name__}: {cap(str(e), FIELD_MAX)}")
    res.problems = [cap(printable(" ".join(p.split())), VERDICT_MAX) or "" for p in res.problems]
    res.summary = cap(printable(res.summary), VERDICT_MAX) or ""
    return res


def _worker_creds(env: Mapping[str, str], rec: Mapping[str, str], opts: EpilogOptions):
    """(creds or None, refusal). As root, the user side runs as the job's owner; when that is
    unknown inside Slurm (a job id from the environment), the user's files are not touched.
    Run by hand (--job-id, no Slurm context), it acts with the caller's rights, unless scontrol
    knows the job: then its paths are the user's, and an owner it cannot name (a field left out
    as ambiguous) is a refusal too."""
    from slurmdoc.slurm.privsep import job_creds

    if os.geteuid() != 0:
        return None, None
    creds = job_creds(env, rec)
    if creds is not None:
        return creds, None
    if opts.job_id and not env.get("SLURM_SCRIPT_CONTEXT") and not env.get("SLURM_JOB_ID") and not rec:
        return None, None
    return None, "the job's owner is unknown (no SLURM_JOB_UID, none in scontrol's record): its files are not read as root"


def _answer(doc: Optional[dict]):
    """The worker's answer, checked field by field: a JobVerdict, lists of capped strings."""
    from slurmdoc.slurm.models import JobVerdict

    if not doc:
        return None
    try:
        verdict = JobVerdict.model_validate(doc.get("verdict"))
    except Exception:  # noqa: BLE001
        return None

    def strs(v, n: int, most: int) -> list[str]:
        return [cap(x, n) or "" for x in (v if isinstance(v, list) else [])[:most] if isinstance(x, str)]

    log = doc.get("log")
    skipped = doc.get("skipped")
    return {
        "verdict": verdict,
        "wrote": strs(doc.get("wrote"), PATH_MAX, 4),
        "problems": strs(doc.get("problems"), VERDICT_MAX, 16),
        "partial": doc.get("partial") is True,
        "skipped": cap(skipped, FIELD_MAX) if isinstance(skipped, str) else None,
        "log": cap(log, PATH_MAX) if isinstance(log, str) else None,
    }


def _run(opts: EpilogOptions, env: Mapping[str, str], res: EpilogResult) -> None:
    from slurmdoc.slurm.fuse import fuse
    from slurmdoc.slurm.locate import JobContext, default_pattern, first_host, pick_record, scontrol_show_job
    from slurmdoc.slurm.privsep import run_worker

    clock = _Clock(opts.budget, _startup_spent())
    # kept for the ledger, the webhook and the comment
    reserve = 0.3 + sum(min(3.0, clock.budget * 0.1) for x in (opts.webhook, opts.comment) if x)
    problems = res.problems
    job_id = (opts.job_id or env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or "").strip()
    if not job_id:
        problems.append("no job id: pass --job-id or run where SLURM_JOB_ID is set")
        return
    if len(job_id) > 64 or not all(c.isalnum() or c in "_+." for c in job_id):
        problems.append(f"not a job id: {cap(job_id, 64)!r}")
        return
    res.job_id = job_id
    context = env.get("SLURM_SCRIPT_CONTEXT", "")
    ec = _exit_code(opts.exit_code)
    if ec is None:
        ec = _exit_code(env.get("SLURM_JOB_EXIT_CODE2")) or _raw_wait_status(env.get("SLURM_JOB_EXIT_CODE"))
    recs = scontrol_show_job(job_id, timeout=clock.slice(5, 0.15))
    rec = pick_record(recs, job_id) if recs else {}

    if rec.get("HetJobOffset") not in (None, "", "0"):
        res.skipped = f"component {cap(rec['HetJobOffset'], 16)} of heterogeneous job {cap(rec.get('HetJobId'), 32)}: its leader reports"
        return
    node = env.get("SLURMD_NODENAME")
    if context == "epilog_slurmd" and not opts.all_nodes and node and rec:
        # one node reports: the batch host, else (none in the record, or one the job's free
        # text made ambiguous) the allocation's first node, where Slurm starts the batch step
        host = rec.get("BatchHost") or first_host(rec.get("NodeList"))
        if not host:
            res.skipped = "no batch host or node list in scontrol's record: no node reports the job"
            return
        if node != host:
            res.skipped = f"not the batch host ({cap(node, FIELD_MAX)} != {cap(host, FIELD_MAX)})"
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
    # which patterns name the log: decided here from strings only; resolved by the worker
    no_log_note = None
    if opts.logs:
        patterns, how = list(opts.logs), "given"
    elif env.get("SLURM_JOB_STDOUT"):
        patterns, how = [env["SLURM_JOB_STDOUT"], env.get("SLURM_JOB_STDERR", "")], "environment"
    elif rec.get("StdOut"):
        patterns, how = [rec.get("StdOut", ""), rec.get("StdErr", "")], "scontrol"
    elif ctx.work_dir:
        patterns, how = [default_pattern(ctx)], "default"
    else:
        patterns, how = [], ""
        no_log_note = "no log path known (no SLURM_JOB_STDOUT, scontrol record or work dir)"

    acct = _accounting(job_id, ec, rec, clock, opts, problems)

    creds, refusal = _worker_creds(env, rec, opts)
    answer = None
    if refusal:
        problems.append(refusal)
    else:
        import dataclasses

        from slurmdoc.config import resolve_rule_dirs
        from slurmdoc.errors import SlurmdocError

        try:  # --rules, else $SLURMDOC_RULES, else the config file: as `diagnose` would
            rule_dirs = list(resolve_rule_dirs(opts.rule_dirs).dirs)
        except SlurmdocError as e:
            problems.append(e.one_line())
            rule_dirs = list(opts.rule_dirs)
        request = {
            "job_id": job_id, "ctx": dataclasses.asdict(ctx), "patterns": patterns,
            "how": how, "no_log_note": no_log_note, "acct": acct.model_dump(mode="json") if acct is not None else None,
            "out_dir": opts.out_dir, "always": opts.always, "rule_dirs": rule_dirs, "tail_bytes": TAIL_BYTES,
            "html": opts.html, "html_max": HTML_MAX, "traces": opts.traces,
        }
        doc, why = run_worker(request, creds, clock.left() - reserve)
        answer = _answer(doc)
        if answer is None:
            problems.append(f"the log was not diagnosed: {why or 'the worker answered nonsense'}")
    if answer is not None:
        verdict = answer["verdict"]
        problems.extend(answer["problems"])
        res.wrote = answer["wrote"]
        res.partial = answer["partial"]
        res.skipped = answer["skipped"]
        log = answer["log"]
    else:
        verdict = fuse(acct.job_id if acct is not None else job_id, None, acct,
                       log_note=refusal or "the log could not be diagnosed")
        log = None
    res.verdict = verdict
    res.summary = cap(verdict.verdict, VERDICT_MAX) or ""

    acc = verdict.accounting
    partial = res.partial
    record = {
        "schema_version": 1,
        "kind": "epilog",
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "job_id": cap(verdict.job_id, FIELD_MAX),  # 12_3 for an array task
        "slurm_job_id": cap(job_id, FIELD_MAX),  # its own id, as SLURM_JOB_ID gives it
        "name": cap(ctx.name or (acc.name if acc else None), FIELD_MAX),
        "user": cap(ctx.user or (acc.user if acc else None), FIELD_MAX),
        "status": verdict.status,
        "category": cap(verdict.category, FIELD_MAX),
        "rank": verdict.rank,
        "verdict": cap(verdict.verdict, VERDICT_MAX),
        "exit_code": cap(str(ec), FIELD_MAX) if ec is not None else None,
        "state": cap(acc.state, FIELD_MAX) if acc else None,
        "agrees": verdict.agrees,
        "contradictions": [cap(c, VERDICT_MAX // 2) for c in verdict.contradictions[:CONTRADICTIONS_MAX]],
        "partial": partial,
        "report": res.wrote[-1] if res.wrote else None,
        "log": log,
    }
    if opts.ledger:
        try:
            _append_ledger(opts.ledger, (json_line(record) + "\n").encode("utf-8"), clock)
        except (OSError, TimeoutError) as e:
            problems.append(f"cannot append to the ledger {cap(opts.ledger, PATH_MAX)} ({getattr(e, 'strerror', None) or e})")
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

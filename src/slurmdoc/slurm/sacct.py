"""Run `sacct`, or read its saved output (parsable `-P`/`-p` or `--json`), into typed rows.

One `SacctRow` per line of sacct: the job itself (`1234`, `1234_7` for an array task,
`1234+1` for a component of a heterogeneous job) or one of its steps (`1234.batch`,
`1234.extern`, `1234.0`, `1234_7.0`, `1234+1.0`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from typing import IO, Iterable, Optional

from slurmdoc.errors import InputError, SlurmdocError
from slurmdoc.slurm.exitcodes import ExitCode

# The fields slurmdoc asks sacct for (-P -o ...). Free text (SubmitLine) goes last, so a `|`
# inside it cannot shift the other columns.
FIELDS = (
    "JobID", "JobIDRaw", "JobName", "State", "ExitCode", "DerivedExitCode",
    "Elapsed", "ElapsedRaw", "Timelimit", "TimelimitRaw", "ReqMem", "ReqTRES", "MaxRSS",
    "MaxRSSNode", "MaxRSSTask", "NNodes", "NTasks", "AllocCPUS", "NodeList", "Submit",
    "Start", "End", "User", "UID", "Partition", "Reason", "WorkDir", "TotalCPU", "SubmitLine",
)
# Asked for when an older sacct rejects one of the above.
CORE_FIELDS = ("JobID", "JobIDRaw", "JobName", "State", "ExitCode", "DerivedExitCode", "Elapsed",
               "Timelimit", "ReqMem", "MaxRSS", "NNodes", "NodeList", "Start", "End", "User", "WorkDir",
               "AllocCPUS", "TotalCPU")

SACCT_TIMEOUT = 60.0
MAX_JSON_BYTES = 256 << 20


class SlurmError(SlurmdocError):
    """sacct/scontrol missing, failing, or its output unreadable."""

    exit_code = 2


@dataclass(frozen=True, slots=True)
class SacctRow:
    job_id: str  # as sacct shows it: 12, 12.batch, 12_3.0, 12+1.0
    job: str  # the job part: 12, 12_3, 12+1, 12_[4-9]
    step: Optional[str]  # None for the job row; batch, extern, interactive, 0, 1, ...
    raw_id: Optional[str] = None
    name: str = ""
    state: str = ""  # base state: CANCELLED
    state_by: Optional[str] = None  # the UID in "CANCELLED by 1000"
    exit_code: Optional[ExitCode] = None
    derived: Optional[ExitCode] = None
    elapsed_s: Optional[int] = None
    timelimit_s: Optional[int] = None  # None: unlimited or unknown
    req_mem_bytes: Optional[int] = None  # as requested: see req_mem_per
    req_mem_per: str = "job"  # job (Slurm >= 21.08: the whole job), node, cpu
    max_rss_bytes: Optional[int] = None
    max_rss_node: Optional[str] = None
    max_rss_task: Optional[int] = None
    nnodes: Optional[int] = None
    ntasks: Optional[int] = None
    alloc_cpus: Optional[int] = None
    total_cpu_s: Optional[float] = None  # TotalCPU: user + system CPU time of the row's processes
    nodelist: str = ""
    submit: Optional[str] = None
    start: Optional[str] = None
    end: Optional[str] = None
    user: Optional[str] = None
    uid: Optional[str] = None
    partition: Optional[str] = None
    reason: Optional[str] = None
    work_dir: Optional[str] = None
    submit_line: Optional[str] = None
    stdout: Optional[str] = None  # sacct >= 23.02 has StdOut/StdErr
    stderr: Optional[str] = None
    comment: Optional[str] = None

    @property
    def is_job(self) -> bool:
        return self.step is None

    @property
    def numbered(self) -> bool:
        """A step launched by srun (not batch/extern/interactive)."""
        return self.step is not None and self.step.isdigit()

    @property
    def group(self) -> str:
        """The job this row belongs to for a verdict: het components join their leader."""
        return self.job.split("+", 1)[0]

    @property
    def step_ref(self) -> str:
        return self.job_id


# ---------------------------------------------------------------------------------------
# small parsers

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


def parse_size(text: Optional[str], default_unit: str = "") -> Optional[int]:
    """'320708K' -> bytes; '' -> None. A bare number is in `default_unit`."""
    if not text:
        return None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGTP]?)[iB]*\s*", text, re.I)
    if not m:
        return None
    unit = (m.group(2) or default_unit).upper()
    return int(float(m.group(1)) * _UNITS[unit])


def parse_req_mem(text: Optional[str]) -> tuple[Optional[int], str]:
    """ReqMem: '8000M' (Slurm >= 21.08: the whole job), '4000Mn' per node, '1000Mc' per CPU."""
    if not text:
        return None, "job"
    per = "job"
    t = text.strip()
    if t and t[-1] in "nc":
        per = "node" if t[-1] == "n" else "cpu"
        t = t[:-1]
    size = parse_size(t, "M")
    return (size if size else None), per


def parse_duration(text: Optional[str]) -> Optional[int]:
    """'[D-]HH:MM:SS', 'MM:SS', 'MM:SS.mmm' -> seconds; UNLIMITED/Partition_Limit/'' -> None."""
    if not text:
        return None
    t = text.strip()
    days = 0
    if "-" in t:
        d, _, t = t.partition("-")
        if not d.isdigit():
            return None
        days = int(d)
    parts = t.split(":")
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        return None
    if len(nums) == 3:
        h, m, s = nums
    elif len(nums) == 2:
        h, (m, s) = 0, nums
    elif len(nums) == 1 and days:
        h, m, s = nums[0], 0, 0
    else:
        return None
    return int(days * 86400 + h * 3600 + m * 60 + s)


_CPU_TIME = re.compile(r"(?:(?:(?P<d>\d{1,6})-)?(?P<h>\d{1,2}):)?(?P<m>\d{1,2}):(?P<s>\d{1,2})(?:\.(?P<f>\d{1,6}))?", re.ASCII)


def parse_cpu_time(text: Optional[str]) -> Optional[float]:
    """TotalCPU (also UserCPU, SystemCPU) -> seconds. sacct prints `MM:SS.mmm` under an hour,
    `HH:MM:SS` under a day, `D-HH:MM:SS` beyond. Anything else (empty, `INVALID`, a sign, a
    field out of range such as `00:75`, days without hours) is None: unknown, never a guess."""
    if not text:
        return None
    m = _CPU_TIME.fullmatch(text.strip())
    if m is None:
        return None
    d, h = int(m.group("d") or 0), int(m.group("h") or 0)
    mins, secs = int(m.group("m")), int(m.group("s"))
    if secs > 59 or (m.group("h") is not None and mins > 59) or (m.group("d") is not None and h > 23):
        return None
    frac = int(m.group("f")) / 10 ** len(m.group("f")) if m.group("f") else 0.0
    return d * 86400 + h * 3600 + mins * 60 + secs + frac


def _int(text) -> Optional[int]:
    if text is None or text == "":
        return None
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def split_job_id(job_id: str) -> tuple[str, Optional[str]]:
    """'12_3.batch' -> ('12_3', 'batch'); '12+1.0' -> ('12+1', '0'); '12_[1-3]' -> ('12_[1-3]', None)."""
    if "[" in job_id:  # pending array ranges hold no step
        head, _, rest = job_id.partition("]")
        if rest.startswith("."):
            return head + "]", rest[1:]
        return job_id, None
    job, dot, step = job_id.partition(".")
    return job, (step if dot else None)


def _state(text: str) -> tuple[str, Optional[str]]:
    """'CANCELLED by 0' -> ('CANCELLED', '0'); 'FAILED' -> ('FAILED', None)."""
    t = text.strip()
    m = re.fullmatch(r"(\w+)\s+by\s+(\S+)", t)
    if m:
        return m.group(1).upper(), m.group(2)
    return (t.split()[0].upper() if t else ""), None


# ---------------------------------------------------------------------------------------
# parsable (-P / -p)


def fresh_delimiter() -> str:
    """A delimiter for one `sacct -P` run (`--delimiter`) that no job's name, work dir or
    submit line can hold, since it is drawn at random each time: a `|` or a newline inside such
    free text then neither shifts the columns nor starts a row (see parse_own_psv)."""
    import secrets

    return f"|{secrets.token_hex(8)}|"


def parse_own_psv(stdout: str, delimiter: str, where: str = "sacct") -> list[SacctRow]:
    """Rows of a `sacct -P --delimiter=<fresh_delimiter()>` run: records are split at newlines
    only, a line with fewer fields than the header goes on with the next one (a newline inside a
    value), and a record with more fields than the header is dropped."""
    lines = stdout.split("\n")
    if not lines or delimiter not in lines[0]:
        return parse_psv(lines, where, delimiter)
    width = lines[0].count(delimiter)
    out = [lines[0]]
    pending: list[str] = []  # the lines of a record not yet whole, and their delimiters
    n = 0
    for line in lines[1:]:
        pending.append(line)
        n += line.count(delimiter)  # (a delimiter cannot span a newline: it holds none)
        if n < width:
            continue
        if n == width:
            out.append("\n".join(pending))
        pending, n = [], 0
    return parse_psv(out, where, delimiter)


def parse_psv(lines: Iterable[str], where: str = "sacct output", delimiter: str = "|") -> list[SacctRow]:
    """Rows of `sacct -P` / `-p` output. The header line is required (field order varies)."""
    it = iter(lines)
    header: Optional[list[str]] = None
    trailing = False  # -p: every line ends with the delimiter
    rows: list[SacctRow] = []
    for lineno, line in enumerate(it, 1):
        line = line.rstrip("\r\n") if delimiter == "|" else line.rstrip("\r")
        if not line.strip():
            continue
        if header is None:
            cols = line.split(delimiter)
            if cols and cols[-1] == "":
                cols = cols[:-1]
                trailing = True
            if "JobID" not in cols:
                raise InputError(
                    f"{where}:{lineno}: not sacct parsable output with a header line",
                    "save it with `sacct -P -j JOBID -o ...` (no -n/--noheader), or with `sacct --json`",
                )
            header = cols
            continue
        if trailing and line.endswith(delimiter):
            line = line[: -len(delimiter)]
        vals = line.split(delimiter)
        if len(vals) > len(header):  # a `|` inside the last (free text) field
            vals = vals[: len(header) - 1] + [delimiter.join(vals[len(header) - 1:])]
        rec = dict(zip(header, vals))
        rows.append(_row_from_fields(rec))
    if header is None:
        raise InputError(f"{where}: empty sacct output")
    return rows


def _row_from_fields(f: dict[str, str]) -> SacctRow:
    job_id = f.get("JobID", "").strip()
    job, step = split_job_id(job_id)
    state, by = _state(f.get("State", ""))
    mem, per = parse_req_mem(f.get("ReqMem"))
    elapsed = _int(f.get("ElapsedRaw"))
    if elapsed is None:
        elapsed = parse_duration(f.get("Elapsed"))
    limit_raw = _int(f.get("TimelimitRaw"))
    limit = limit_raw * 60 if limit_raw is not None else parse_duration(f.get("Timelimit"))

    def opt(name: str) -> Optional[str]:
        v = f.get(name)
        return v if v not in (None, "", "Unknown", "None") else None

    return SacctRow(
        job_id=job_id,
        job=job,
        step=step,
        raw_id=opt("JobIDRaw"),
        name=f.get("JobName", ""),
        state=state,
        state_by=by,
        exit_code=ExitCode.parse(f.get("ExitCode")),
        derived=ExitCode.parse(f.get("DerivedExitCode")),
        elapsed_s=elapsed,
        timelimit_s=limit,
        req_mem_bytes=mem,
        req_mem_per=per,
        max_rss_bytes=parse_size(f.get("MaxRSS"), "K"),
        max_rss_node=opt("MaxRSSNode"),
        max_rss_task=_int(f.get("MaxRSSTask")),
        nnodes=_int(f.get("NNodes")),
        ntasks=_int(f.get("NTasks")),
        alloc_cpus=_int(f.get("AllocCPUS")),
        total_cpu_s=parse_cpu_time(f.get("TotalCPU")),
        nodelist=f.get("NodeList", "") if f.get("NodeList") != "None assigned" else "",
        submit=opt("Submit"),
        start=opt("Start"),
        end=opt("End"),
        user=opt("User"),
        uid=opt("UID"),
        partition=opt("Partition"),
        reason=opt("Reason"),
        work_dir=opt("WorkDir"),
        submit_line=opt("SubmitLine"),
        stdout=opt("StdOut"),
        stderr=opt("StdErr"),
        comment=opt("Comment"),
    )


# ---------------------------------------------------------------------------------------
# --json (openapi dbv0.0.38 of Slurm 22.05, and the {"set","number"} shapes of 23.x/24.x)


def _num(v) -> Optional[int]:
    """22.05: 5 / null; 23.02+: {"set": true, "infinite": false, "number": 5}."""
    if isinstance(v, dict):
        if v.get("infinite") or not v.get("set", True):
            return None
        v = v.get("number")
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return int(v)
    return _int(v)


def _json_exit(ec, state: str = "") -> Optional[ExitCode]:
    """None when unknown. Slurm 22.05's JSON gives FAILED rows {"status": "SUCCESS",
    "return_code": 0} whatever the real status was (its -P output has it right), so a FAILED
    row that claims 0:0 is taken as 'not recorded', never as success."""
    if not isinstance(ec, dict):
        return None
    sig = ec.get("signal")
    signo = 0
    if isinstance(sig, dict):
        signo = _num(sig.get("signal_id", sig.get("id"))) or 0
    status = _num(ec.get("return_code")) or 0
    if state == "FAILED" and status == 0 and signo == 0:
        return None
    return ExitCode(status, signo)


def _json_state(st) -> tuple[str, Optional[str]]:
    if isinstance(st, dict):
        cur = st.get("current")
    else:
        cur = st
    if isinstance(cur, list):
        cur = cur[0] if cur else ""
    return _state(str(cur or ""))


def _ts(v) -> Optional[str]:
    n = _num(v)
    if not n:
        return None
    from datetime import datetime

    return datetime.fromtimestamp(n).strftime("%Y-%m-%dT%H:%M:%S")


def _json_cpu(t) -> Optional[float]:
    """`time.total` of `sacct --json`: {"seconds": S, "microseconds": U}; None when absent."""
    tot = t.get("total") if isinstance(t, dict) else None
    if not isinstance(tot, dict):
        return None
    sec, usec = _num(tot.get("seconds")), _num(tot.get("microseconds"))
    if sec is None or sec < 0 or (usec is not None and not 0 <= usec < 1_000_000):
        return None
    return sec + (usec or 0) / 1e6


def _tres(entries, kind: str) -> Optional[dict]:
    if isinstance(entries, list):
        for e in entries:
            if isinstance(e, dict) and e.get("type") == kind:
                return e
    return None


def parse_json(text: str, where: str = "sacct --json output") -> list[SacctRow]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{where}: not valid JSON ({e.msg} at line {e.lineno})")
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise InputError(f"{where}: JSON without a 'jobs' list: not `sacct --json` output")
    rows: list[SacctRow] = []
    for j in doc["jobs"]:
        if isinstance(j, dict):
            rows.extend(_json_job(j))
    return rows


def _json_job(j: dict) -> list[SacctRow]:
    job_id = str(j.get("job_id", ""))
    raw = job_id
    arr = j.get("array") or {}
    het = j.get("het") or {}
    task = _num(arr.get("task_id"))
    het_off = _num(het.get("job_offset"))
    if task is not None and _num(arr.get("job_id")):
        job = f"{_num(arr.get('job_id'))}_{task}"
    elif het_off is not None and _num(het.get("job_id")):
        job = f"{_num(het.get('job_id'))}+{het_off}"
    else:
        job = job_id
    state, by = _json_state(j.get("state"))
    kill_uid = j.get("kill_request_user")
    if state == "CANCELLED" and by is None and kill_uid not in (None, ""):
        by = str(kill_uid)
    t = j.get("time") or {}
    limit_min = _num(t.get("limit"))
    tres = j.get("tres") or {}
    req_mem = _tres(tres.get("requested"), "mem")
    mem_bytes = (_num(req_mem.get("count")) or 0) << 20 if req_mem else None
    nodes = j.get("nodes") or ""
    assoc = j.get("association") or {}
    comment = j.get("comment") or {}
    alloc_cpu = _tres(tres.get("allocated"), "cpu")
    row = SacctRow(
        job_id=job,
        job=job,
        step=None,
        raw_id=raw,
        name=str(j.get("name", "")),
        state=state,
        state_by=by,
        exit_code=_json_exit(j.get("exit_code"), state),
        derived=_json_exit(j.get("derived_exit_code"), state),
        elapsed_s=_num(t.get("elapsed")),
        timelimit_s=limit_min * 60 if limit_min is not None else None,
        req_mem_bytes=mem_bytes or None,
        req_mem_per="job",
        nnodes=_num(j.get("allocation_nodes")),
        alloc_cpus=_num(alloc_cpu.get("count")) if alloc_cpu else None,
        total_cpu_s=_json_cpu(t),
        nodelist=str(nodes) if nodes != "None assigned" else "",
        submit=_ts(t.get("submission")),
        start=_ts(t.get("start")),
        end=_ts(t.get("end")),
        user=j.get("user") or assoc.get("user"),
        partition=j.get("partition"),
        reason=(j.get("state") or {}).get("reason") if isinstance(j.get("state"), dict) else None,
        work_dir=j.get("working_directory"),
        submit_line=j.get("submit_line") or None,
        stdout=j.get("stdout") or None,
        stderr=j.get("stderr") or None,
        comment=comment.get("job") if isinstance(comment, dict) else None,
    )
    out = [row]
    for s in j.get("steps") or []:
        if isinstance(s, dict):
            out.append(_json_step(s, job, raw))
    return out


def _json_step(s: dict, job: str, raw: str) -> SacctRow:
    info = s.get("step") or {}
    sid = info.get("id")
    if isinstance(sid, dict):  # 23.x: {"job_id":..,"step_id":..}
        sid = sid.get("step_id")
    sid = str(sid if sid is not None else "")
    sid = sid.rsplit(".", 1)[-1]  # 23.x spells "12.batch"
    state, by = _json_state(s.get("state"))
    t = s.get("time") or {}
    tres = s.get("tres") or {}
    req = tres.get("requested") or {}
    mx = _tres(req.get("max") if isinstance(req, dict) else None, "mem")
    nodes = s.get("nodes") or {}
    return SacctRow(
        job_id=f"{job}.{sid}",
        job=job,
        step=sid,
        raw_id=f"{raw}.{sid}",
        name=str(info.get("name", "")),
        state=state,
        state_by=by,
        exit_code=_json_exit(s.get("exit_code"), state),
        elapsed_s=_num(t.get("elapsed")),
        total_cpu_s=_json_cpu(t),
        max_rss_bytes=_num(mx.get("count")) if mx else None,
        max_rss_node=mx.get("node") if mx else None,
        max_rss_task=_num(mx.get("task")) if mx else None,
        nnodes=_num(nodes.get("count")),
        ntasks=_num((s.get("tasks") or {}).get("count")),
        nodelist=str(nodes.get("range", "")),
        start=_ts(t.get("start")),
        end=_ts(t.get("end")),
    )


# ---------------------------------------------------------------------------------------
# reading saved output, running sacct


def parse_text(text: str, where: str) -> list[SacctRow]:
    """Detect JSON vs parsable output."""
    head = text.lstrip()[:1]
    if head in ("{", "["):
        return parse_json(text, where)
    return parse_psv(text.splitlines(), where)


def read_sacct_file(path: str, stdin: Optional[IO[str]] = None) -> list[SacctRow]:
    """Saved `sacct -P` or `sacct --json` output; '-' reads stdin."""
    where = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            src = stdin if stdin is not None else sys.stdin
            text = src.read(MAX_JSON_BYTES + 1)
        else:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read(MAX_JSON_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{where}: no such file")
    except IsADirectoryError:
        raise InputError(f"{where}: is a directory, not saved sacct output")
    except OSError as e:
        raise InputError(f"{where}: cannot read ({e.strerror})")
    if len(text) > MAX_JSON_BYTES:
        raise InputError(f"{where}: over {MAX_JSON_BYTES >> 20} MiB: not sacct output for a few jobs")
    if "\x00" in text:
        raise InputError(f"{where}: binary data, not sacct output")
    return parse_text(text, where)


def run_sacct(job_ids: list[str], timeout: float = SACCT_TIMEOUT) -> list[SacctRow]:
    """`sacct -P -D` for these jobs (all their steps, every attempt). Raises SlurmError with sacct's own words."""
    ids = ",".join(job_ids)
    for fields in (FIELDS, CORE_FIELDS):
        delim = fresh_delimiter()
        cmd = ["sacct", "-P", f"--delimiter={delim}", "-D", "-j", ids, "-o", ",".join(fields)]  # -D: every attempt
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, errors="replace")
        except FileNotFoundError:
            raise SlurmError("sacct not found", "is this a Slurm login node? off-cluster, pass saved output with --sacct-file")
        except subprocess.TimeoutExpired:
            raise SlurmError(f"sacct did not answer within {timeout:.0f} s", "is slurmdbd up?")
        except OSError as e:
            raise SlurmError(f"cannot run sacct: {e.strerror}")
        if p.returncode == 0:
            return parse_own_psv(p.stdout, delim, "sacct")
        msg = (p.stderr.strip() or p.stdout.strip() or f"exit status {p.returncode}").splitlines()[0]
        if "invalid field" in msg.lower() and fields is FIELDS:
            continue  # an older sacct: ask for less
        raise SlurmError(f"sacct failed: {msg}")
    raise SlurmError("sacct rejected slurmdoc's field list")  # pragma: no cover


def matches(row: SacctRow, job_id: str) -> bool:
    """Does a row belong to what the user asked for? 10 -> 10, 10_3, 10+1; 10_3 -> 10_3;
    a raw id (an array task's own id) -> its task."""
    want = job_id.strip()
    if row.job == want or row.group == want:
        return True
    base = re.split(r"[_+]", row.job, maxsplit=1)[0]
    if base == want:
        return True
    raw_job = (row.raw_id or "").split(".", 1)[0]
    return raw_job == want and row.is_job or (row.raw_id or "").split(".", 1)[0] == want


def select(rows: list[SacctRow], job_ids: list[str]) -> list[SacctRow]:
    """Rows of the requested jobs (all rows when none is named). A step row is kept when its
    job row is."""
    if not job_ids:
        return rows
    keep_jobs = {r.job for r in rows if any(matches(r, j) for j in job_ids)}
    return [r for r in rows if r.job in keep_jobs]


def with_job_defaults(rows: list[SacctRow]) -> list[SacctRow]:
    """Steps inherit the job's user and work dir (sacct leaves them empty on step rows)."""
    jobs = {r.job: r for r in rows if r.is_job}
    out = []
    for r in rows:
        j = jobs.get(r.job)
        if j is not None and not r.is_job and (r.work_dir is None or r.user is None):
            r = replace(r, work_dir=r.work_dir or j.work_dir, user=r.user or j.user)
        out.append(r)
    return out

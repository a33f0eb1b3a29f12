"""Find a job's output files: `scontrol show job` (StdOut/StdErr while slurmctld knows the job),
sacct's StdOut where the Slurm version records it, or the default `slurm-%j.out` in the work dir.

Slurm's filename patterns are expanded as Slurm does (`%%`, `%A`, `%a`, `%j`, `%J`, `%N`, `%n`,
`%s`, `%t`, `%u`, `%x`, zero padding as in `%5j`). scontrol leaves some of them unexpanded
(`%N`, `%n`, `%s`, `%t`, padded fields), and a per-task pattern names several files, so what
cannot be known is globbed.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from dataclasses import dataclass, field
from typing import Optional

NO_ARRAY_TASK = "4294967294"  # what Slurm puts for %a in a job that is not an array task
PAD_MAX = 10  # Slurm pads %Nj to at most 10 digits, whatever N says
_PATTERN = re.compile(r"%(\d*)([%AabjJNnstux])")


@dataclass(frozen=True)
class JobContext:
    """What filename patterns can name."""

    job_id: str  # the job's own numeric id (an array task's raw id)
    array_job_id: Optional[str] = None
    array_task_id: Optional[str] = None
    user: Optional[str] = None
    name: Optional[str] = None
    node: Optional[str] = None  # the batch host's short name, if known
    work_dir: Optional[str] = None
    step: str = "batch"


def expand(pattern: str, ctx: JobContext) -> tuple[str, bool]:
    """(glob pattern, exact). Known fields are filled in and glob-escaped; unknown or per-task
    fields (%N when the node is unknown, %n, %t) become `*` and make the result inexact."""
    exact = True
    out: list[str] = []
    pos = 0

    def lit(s: str) -> str:
        return glob.escape(s)

    for m in _PATTERN.finditer(pattern):
        out.append(lit(pattern[pos:m.start()]))
        pos = m.end()
        width, key = m.group(1), m.group(2)
        val: Optional[str]
        if key == "%":
            val = "%"
        elif key == "j":
            val = ctx.job_id
        elif key == "J":
            val = f"{ctx.job_id}.{ctx.step}"
        elif key == "A":
            val = ctx.array_job_id or ctx.job_id
        elif key == "a":
            val = ctx.array_task_id if ctx.array_task_id is not None else NO_ARRAY_TASK
        elif key == "b":
            val = str(int(ctx.array_task_id) % 10) if (ctx.array_task_id or "").isdigit() else None
        elif key == "s":
            val = ctx.step
        elif key == "u":
            val = ctx.user
        elif key == "x":
            val = ctx.name
        elif key == "N":
            val = None  # the batch host's hostname: not always its NodeName
        else:  # n, t: per node / per task
            val = None
        if val is None:
            out.append("*")
            exact = False
        else:
            if width and val.isdigit():
                val = val.zfill(pad_width(width))
            out.append(lit(val))
    out.append(lit(pattern[pos:]))
    return "".join(out), exact


def pad_width(digits: str) -> int:
    """The zero padding `%<digits>j` asks for, capped at PAD_MAX as Slurm caps it (a width of a
    million digits is not parsed as a number at all)."""
    d = digits.lstrip("0")
    return PAD_MAX if len(d) > 2 else min(int(d or "0"), PAD_MAX)


def resolve(pattern: str, ctx: JobContext, limit: int = 64) -> list[str]:
    """Existing files a pattern names (relative patterns are relative to the work dir)."""
    if ctx.work_dir and not os.path.isabs(pattern):
        pattern = os.path.join(ctx.work_dir, pattern)
    g, exact = expand(pattern, ctx)
    if exact:
        path = glob.glob(g)  # unescape through glob itself
        return path[:1]
    # %N: try the batch host's name first
    if ctx.node and "%N" in pattern:
        named, _ = expand(pattern.replace("%N", ctx.node.replace("%", "%%")), ctx)
        hits = sorted(glob.glob(named))
        if hits:
            return hits[:limit]
    return sorted(glob.glob(g))[:limit]


# What scontrol prints before the job's name, and only there: the job's own ids
HEAD_KEYS = frozenset({"JobId", "ArrayJobId", "ArrayTaskId", "ArrayTaskThrottle", "HetJobId", "HetJobOffset"})


def parse_scontrol(text: str) -> list[dict[str, str]]:
    """`scontrol show job [-o] ID` -> one dict per job record (array tasks, het components).

    scontrol does not quote its values, and some are the user's free text (the job's name, its
    comment, its paths), so a name like `x UserId=root(0)` reads as fields of its own. Such text
    can add a field but never remove the one slurmctld prints: a field seen twice is ambiguous
    and left out, and the job's ids (HEAD_KEYS), which scontrol prints before JobName, are never
    taken from after it."""
    records: list[dict[str, str]] = []
    for chunk in re.split(r"(?m)^\s*(?=JobId=)", text):
        flat = " ".join(chunk.split())
        if not flat.startswith("JobId="):
            continue
        # keys are Word= at the start or after whitespace; a value runs to the next key
        pairs = []
        for part in re.split(r"\s+(?=[A-Za-z][A-Za-z0-9_:/]*=)", flat):
            k, eq, v = part.partition("=")
            if eq:
                pairs.append((k, v.strip()))
        named = next((i for i, (k, _) in enumerate(pairs) if k == "JobName"), len(pairs))
        rec: dict[str, str] = {}
        for k, v in pairs[:named]:
            rec.setdefault(k, v)
        seen: dict[str, int] = {}
        for k, _ in pairs[named:]:
            seen[k] = seen.get(k, 0) + 1
        for k, v in pairs[named:]:
            if seen[k] == 1 and k not in HEAD_KEYS:
                rec.setdefault(k, v)
        records.append(rec)
    return records


def first_host(nodelist: Optional[str]) -> Optional[str]:
    """The first host of a Slurm host list (`gpu-[007-010,12],cpu1` -> `gpu-007`,
    `r[1-2]-g[01-04]` -> `r1-g01`), or None when it names none (`(null)`)."""
    first = re.match(r"(?:[^,\[]|\[[^\]]*\])*", (nodelist or "")[:1024]).group(0)
    host = re.sub(r"\[(\d+)[^\]]*\]", r"\1", first)
    return host if re.fullmatch(r"[\w.\-]+", host) else None


def scontrol_show_job(job_id: str, timeout: float = 5.0) -> list[dict[str, str]]:
    """slurmctld's record of a job (kept MinJobAge seconds after it ends); [] when unknown."""
    try:
        p = subprocess.run(["scontrol", "show", "job", "-o", str(job_id)], capture_output=True,
                           text=True, timeout=timeout, errors="replace")
    except (OSError, subprocess.SubprocessError):
        return []
    if p.returncode != 0:
        return []
    return parse_scontrol(p.stdout)


def pick_record(recs: list[dict[str, str]], job_id: str) -> dict[str, str]:
    """The record the id names: an array task (12_3), else a het leader, else the first."""
    if "_" in job_id:
        task = job_id.split("_", 1)[1]
        for r in recs:
            if r.get("ArrayTaskId") == task:
                return r
    for r in recs:
        if r.get("JobId") == job_id:
            return r
    for r in recs:
        if r.get("HetJobOffset") in (None, "0"):
            return r
    return recs[0]


def _user(rec: dict[str, str]) -> Optional[str]:
    u = rec.get("UserId", "")
    return u.split("(", 1)[0] or None


@dataclass
class Located:
    paths: list[str] = field(default_factory=list)
    how: str = ""  # scontrol, sacct, default, given, environment
    expected: Optional[str] = None  # the path a pattern names, for a "missing" note
    note: Optional[str] = None


def context_from_scontrol(rec: dict[str, str]) -> JobContext:
    arr_job, arr_task = rec.get("ArrayJobId"), rec.get("ArrayTaskId")
    return JobContext(
        job_id=rec.get("JobId", ""),
        array_job_id=arr_job,
        array_task_id=arr_task,
        user=_user(rec),
        name=rec.get("JobName"),
        node=rec.get("BatchHost"),
        work_dir=rec.get("WorkDir"),
    )


def locate_from_patterns(patterns: list[str], ctx: JobContext, how: str) -> Located:
    found: list[str] = []
    expected = None
    for pat in patterns:
        if not pat or pat == "/dev/null":
            continue
        hits = resolve(pat, ctx)
        if expected is None:
            g, _ = expand(pat if os.path.isabs(pat) or not ctx.work_dir else os.path.join(ctx.work_dir, pat), ctx)
            expected = g
        for h in hits:
            if h not in found:
                found.append(h)
    loc = Located(paths=found, how=how, expected=expected)
    if not found and expected:
        loc.note = f"the job's log {expected} does not exist"
    return loc


def default_pattern(ctx: JobContext) -> str:
    return "slurm-%A_%a.out" if ctx.array_task_id is not None else "slurm-%j.out"


def locate(job_id: str, sacct_stdout: Optional[str] = None, sacct_stderr: Optional[str] = None,
           work_dir: Optional[str] = None, ctx: Optional[JobContext] = None) -> Located:
    """The job's log files: scontrol's StdOut/StdErr, then sacct's, then slurm-%j.out in the work dir."""
    recs = scontrol_show_job(job_id)
    if recs:
        rec = pick_record(recs, job_id)
        c = context_from_scontrol(rec)
        loc = locate_from_patterns([rec.get("StdOut", ""), rec.get("StdErr", "")], c, "scontrol")
        if loc.paths or rec.get("StdOut"):
            return loc
    c = ctx or JobContext(job_id=job_id.split("_")[0].split("+")[0], work_dir=work_dir)
    if sacct_stdout:
        loc = locate_from_patterns([sacct_stdout, sacct_stderr or ""], c, "sacct")
        if loc.paths:
            return loc
    if c.work_dir:
        return locate_from_patterns([default_pattern(c)], c, "default")
    return Located(note=f"job {job_id}: slurmctld no longer knows it and sacct records no work directory; pass --log")


_DEFAULT_NAME = __import__("re").compile(r"slurm-(\d{1,12}(?:_\d{1,9})?)\.out")


def job_of_default_name(paths) -> Optional[str]:
    """The job id Slurm's default output names give (`slurm-%j.out`, `slurm-%A_%a.out`), when
    every path has such a name and they name one job; else None."""
    ids = set()
    for p in paths:
        m = _DEFAULT_NAME.fullmatch(os.path.basename(p))
        if m is None:
            return None
        ids.add(m.group(1))
    return ids.pop() if len(ids) == 1 else None

"""Which job each log file belongs to, so that logs of different jobs are never diagnosed as one.

A file's job, in order of trust:
  1. Slurm's default output name: `slurm-%j.out`, or an array task `%A_%a` anywhere in the name
     (`slurm-10_3.out`, `train-10_3.err`): the name is Slurm's own.
  2. The text (first and last 64 KiB): `SLURM_JOB_ID=`, `SLURM_ARRAY_JOB_ID=` with
     `SLURM_ARRAY_TASK_ID=`, slurmstepd's `*** JOB 1234 ON n1 CANCELLED ...` / `*** STEP 1234.0 ...`,
     srun/salloc's `job 1234 queued` / `Granted job allocation 1234`.
  3. The longest run of digits standing alone in the name (`%x-%j.out`, `%j.%N.err`,
     `%x-%j-%t.out`), once rank/task/node numbers (`rank3`, `node-1`) are taken out.
  4. The parent directory named like a job (`1234/`, `job_1234/`).
  5. None: the file belongs with the other id-less files of its directory (a torchrun
     `--log-dir` tree counts as the directory that holds it). Such a directory group joins the
     one job whose files sit in that same directory, when there is exactly one.
"""

from __future__ import annotations

import gzip
import os
import re
import stat
import zlib
from dataclasses import dataclass
from typing import Optional

from slurmdoc.errors import InputError
from slurmdoc.ingest.sources import expand

try:  # SIMD substring search, where stringzilla has a wheel
    from stringzilla import Str as _Str
except Exception:  # pragma: no cover - depends on the platform
    _Str = None

SNIFF_BYTES = 64 << 10

_EXTS = re.compile(r"(?:\.(?:gz|out|err|log|txt|stdout|stderr|json))+$", re.I)
_SLURM_DEFAULT = re.compile(r"^slurm-(\d+)(?:_(\d+))?$")
_ARRAY = re.compile(r"(?<![A-Za-z0-9])(\d+)_(\d+)(?![A-Za-z0-9])")
_HINTS = re.compile(r"(?i)(?<![A-Za-z0-9_])(?:local[_-]?rank|rank|task|node|proc|process|worker|gpu|host|attempt)[_\-.]?\d+")
_DIGITS = re.compile(r"(?<![A-Za-z0-9])\d+(?![A-Za-z0-9])")
_JOB_DIR = re.compile(r"^(?:job[_\-.]?)?(\d+)(?:_(\d+))?$", re.I)
_TORCHRUN_TREE = re.compile(r"[/\\]attempt_\d+[/\\]\d+[/\\](?:stderr|stdout|error)\.(?:log|json)$")

# Each text pattern with the literals one of which every match of it starts with: a pattern is
# searched for only from the first of them on, and not at all in a text holding none. A directory
# of 512 per-rank files is 64 MiB of sniffed text; literal search (SIMD) skips it at memory speed
# where the five patterns alone took about 0.12 s.
_TEXT_ARRAY = (re.compile(rb"SLURM_ARRAY_JOB_ID\s*[=:]\s*(\d+)"), (b"SLURM_ARRAY_JOB_ID",))
_TEXT_TASK = (re.compile(rb"SLURM_ARRAY_TASK_ID\s*[=:]\s*(\d+)"), (b"SLURM_ARRAY_TASK_ID",))
_TEXT_JOB = (re.compile(rb"SLURM_JOB_ID\s*[=:]\s*(\d+)"), (b"SLURM_JOB_ID",))
_TEXT_STEPD = (re.compile(rb"slurmstepd(?:-[\w.\-]+)?: error: \*\*\* (?:JOB|STEP) (\d+)(?:[._][\w.\-]*)? ON "), (b"slurmstepd",))
_TEXT_ALLOC = (re.compile(rb"(?:srun|salloc): (?:job (\d+) (?:queued|has been allocated)|Granted job allocation (\d+))"), (b"srun: ", b"salloc: "))


@dataclass(frozen=True)
class JobFiles:
    """The files of one job. `job_id` is None for id-less logs grouped by directory."""

    key: str  # the job id, or "dir:<directory>"
    job_id: Optional[str]
    paths: tuple[str, ...]
    found_by: str  # name, text, digits, directory-name, directory

    @property
    def label(self) -> str:
        return f"job {self.job_id}" if self.job_id else f"{self.key[4:]}/ (no job id)"


def id_from_name(path: str) -> tuple[Optional[str], str]:
    """(job id, how) from a file's name, or (None, "")."""
    base = _EXTS.sub("", os.path.basename(path))
    m = _SLURM_DEFAULT.match(base)
    if m:
        return (f"{m.group(1)}_{m.group(2)}" if m.group(2) else m.group(1)), "name"
    m = _ARRAY.search(base)
    if m:
        return f"{m.group(1)}_{m.group(2)}", "name"
    return None, ""


def id_from_digits(path: str) -> Optional[str]:
    """The longest stand-alone number in the name once rank/task/node numbers are taken out."""
    base = _HINTS.sub("-", _EXTS.sub("", os.path.basename(path)))
    nums = _DIGITS.findall(base)
    if not nums:
        return None
    best = max(nums, key=len)  # max keeps the first of the longest
    return str(int(best))


def id_from_dir(path: str) -> Optional[str]:
    m = _JOB_DIR.match(os.path.basename(os.path.dirname(os.path.abspath(path))))
    if not m:
        return None
    return f"{m.group(1)}_{m.group(2)}" if m.group(2) else m.group(1)


def sniff(path: str) -> bytes:
    """The first and last SNIFF_BYTES of a file (of a gzip file: its first decompressed bytes).
    Nothing of a pipe or FIFO: reading it would block on one without a writer, and what it
    gave would be lost to the diagnosis. Read with positioned reads on a bare descriptor: a
    directory of hundreds of per-rank files is sniffed before every diagnosis of it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return b""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # checked on what was opened, not on the name
            return b""
        head = os.pread(fd, SNIFF_BYTES, 0)
        if head[:2] == b"\x1f\x8b":
            try:
                with os.fdopen(os.dup(fd), "rb") as f, gzip.GzipFile(fileobj=f) as gz:
                    return gz.read(4 * SNIFF_BYTES)
            except (OSError, EOFError, zlib.error):
                return b""
        if st.st_size <= 2 * SNIFF_BYTES:
            return head + os.pread(fd, SNIFF_BYTES, len(head))
        return head + b"\n" + os.pread(fd, SNIFF_BYTES, st.st_size - SNIFF_BYTES)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _find(data: bytes, lit: bytes) -> int:
    return _Str(data).find(lit) if _Str is not None else data.find(lit)


def _search(text: tuple[re.Pattern[bytes], tuple[bytes, ...]], data: bytes) -> Optional[re.Match[bytes]]:
    """The first match of a text pattern (its regex, the literals its matches start with)."""
    rx, starts = text
    at = [i for i in (_find(data, lit) for lit in starts) if i >= 0]
    return rx.search(data, min(at)) if at else None


def id_from_text(data: bytes) -> Optional[str]:
    a, t = _search(_TEXT_ARRAY, data), _search(_TEXT_TASK, data)
    if a and t:
        return f"{int(a.group(1))}_{int(t.group(1))}"
    for text in (_TEXT_JOB, _TEXT_STEPD, _TEXT_ALLOC):
        m = _search(text, data)
        if m:
            return str(int(m.group(m.lastindex or 1)))
    return None


def anchor_dir(path: str) -> str:
    """The directory an id-less file is grouped by: its own, or for a file of a torchrun
    `--log-dir` tree (LOGDIR/RUN_ID/attempt_K/LOCAL_RANK/stderr.log) the one holding LOGDIR."""
    p = os.path.abspath(path)
    d = os.path.dirname(p)
    if _TORCHRUN_TREE.search(p):
        for _ in range(4):
            d = os.path.dirname(d)
    return d


def job_of(path: str) -> tuple[Optional[str], str]:
    """(job id, how it was found) for one file; (None, "directory") when nothing names a job."""
    jid, how = id_from_name(path)
    if jid:
        return jid, how
    if _TORCHRUN_TREE.search(os.path.abspath(path)):
        return None, "directory"
    jid = id_from_text(sniff(path))
    if jid:
        return jid, "text"
    jid = id_from_digits(path)
    if jid:
        return jid, "digits"
    jid = id_from_dir(path)
    if jid:
        return jid, "directory-name"
    return None, "directory"


def job_order(key: str) -> tuple:
    """Job ids numerically (12 < 12_3 < 13; a het component 12+1 after 12), then anything else by name."""
    m = re.fullmatch(r"(\d+)(?:_(\d+))?(?:\+(\d+))?", key)
    if m is None:
        return (1, key, 0, 0, 0)
    return (0, "", int(m.group(1)), int(m.group(2)) if m.group(2) else -1, int(m.group(3)) if m.group(3) else -1)


def group_files(files: list[str]) -> list[JobFiles]:
    """Files (already expanded; '-' is skipped) grouped by job, in a deterministic order: job ids
    numerically, then id-less directories by path; each group's files in the given order."""
    by_key: dict[str, list[str]] = {}
    how: dict[str, str] = {}
    id_dirs: dict[str, set[str]] = {}  # directory -> job ids with a file there
    for p in files:
        if p == "-":
            continue
        jid, found = job_of(p)
        key = jid if jid is not None else "dir:" + anchor_dir(p)
        by_key.setdefault(key, []).append(p)
        how.setdefault(key, found)
        if jid is not None:
            id_dirs.setdefault(os.path.dirname(os.path.abspath(p)), set()).add(jid)
    for key in [k for k in by_key if k.startswith("dir:")]:
        owners = id_dirs.get(key[4:], set())
        if len(owners) == 1:
            (owner,) = owners
            by_key[owner].extend(by_key.pop(key))
    out = []
    for key in sorted(by_key, key=job_order):
        jid = None if key.startswith("dir:") else key
        out.append(JobFiles(key, jid, tuple(by_key[key]), how[key]))
    return out


def group_paths(paths: list[str], warnings: Optional[list[str]] = None) -> list[JobFiles]:
    """Paths, directories and globs (as `diagnose` takes them) grouped by job."""
    return group_files(expand(paths, warnings if warnings is not None else []))


class SeveralJobsError(InputError):
    """`diagnose` was given the logs of more than one job."""


def one_job(paths: list[str]) -> None:
    """Raise SeveralJobsError when `paths` hold the logs of more than one job."""
    try:
        groups = group_paths(paths)
    except InputError:
        return  # diagnose reports unreadable input itself
    if len(groups) < 2:
        return
    shown = ", ".join(g.label for g in groups[:5]) + (f" and {len(groups) - 5} more" if len(groups) > 5 else "")
    where = " ".join(paths) if len(paths) <= 3 else f"{' '.join(paths[:3])} ..."
    raise SeveralJobsError(
        f"the logs hold {len(groups)} jobs ({shown}); diagnose reads one job at a time",
        f"`slurmdoc scan {where}` gives one verdict per job; or name one job's files",
    )

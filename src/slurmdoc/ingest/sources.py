"""Turn the user's paths into readable sources, and read them line by line, streaming.

Files are read in binary with a bounded `readline`, so neither a huge file nor a single
huge line is ever held in memory whole. gzip is detected by its magic bytes, not its name.
"""

from __future__ import annotations

import glob
import gzip
import io
import os
import re
import stat
import sys
import time
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator, Optional

from slurmdoc.errors import InputError
from slurmdoc.models import SourceInfo

MAX_LINE = 1 << 20  # bytes kept of one line; the rest of an over-long line is skipped
SNIFF = 8192

# What a directory walk picks up: Slurm's slurm-%j.out, torchrun's --log-dir stderr.log,
# per-rank/per-node *.log, and any of them gzipped.
LOG_SUFFIXES = (".out", ".err", ".log", ".txt", ".stdout", ".stderr")
# ...but never slurmdoc's own outputs beside them: the epilog's reports (<log stem>.slurmdoc.txt,
# .json, .html, any other .slurmdoc.<ext>) and JSON-lines files (the epilog's ledger, scan parts).
# They quote the logs' error lines, so read as logs they would add a job's own failure twice.
OWN_OUTPUT = re.compile(r"\.slurmdoc\.[A-Za-z0-9]+(?:\.gz)?$|\.jsonl(?:\.gz)?$", re.I)

_RANK_IN_PATH = re.compile(r"(?:^|[^a-z0-9])rank[_\-.]?(\d{1,6})(?![0-9])", re.I)
_TASK_IN_PATH = re.compile(r"(?:^|[^a-z0-9])task[_\-.]?(\d{1,6})(?![0-9])", re.I)
_NODE_IN_PATH = re.compile(r"(?:^|[^a-z0-9])node[_\-.]?(?:rank[_\-.]?)?(\d{1,5})(?![0-9])", re.I)
_ATTEMPT_RANK = re.compile(r"attempt_(\d+)[/\\](\d+)[/\\](?:stderr|stdout|error)\.(?:log|json)$")


@dataclass
class Input:
    info: SourceInfo
    open: Callable[[], BinaryIO]
    size: Optional[int]


def _is_log_name(name: str) -> bool:
    if OWN_OUTPUT.search(name):
        return False
    low = name.lower()
    if low.endswith(".gz"):
        low = low[:-3]
    return low.endswith(LOG_SUFFIXES)


def path_hints(path: str) -> dict:
    """Rank / node / attempt facts that a per-rank or per-node file name states."""
    hints: dict = {}
    norm = path.replace("\\", "/")
    m = _ATTEMPT_RANK.search(norm)
    if m:
        hints["attempt"] = int(m.group(1))
        hints["rank_hint"] = int(m.group(2))
        hints["rank_hint_local"] = True  # torchrun --log-dir numbers local ranks
        return hints
    base = os.path.basename(norm)
    for rx in (_RANK_IN_PATH, _TASK_IN_PATH):
        m = rx.search(base)
        if m:
            hints["rank_hint"] = int(m.group(1))
            return hints
    m = _NODE_IN_PATH.search(base)
    if m:
        hints["node_index_hint"] = int(m.group(1))
    return hints


def _walk(directory: str, warnings: list[str]) -> list[str]:
    found: list[str] = []
    seen_dirs: set[tuple[int, int]] = set()
    for root, dirs, files in os.walk(directory, followlinks=True, onerror=lambda e: warnings.append(f"cannot list {e.filename}: {e.strerror}")):
        try:
            st = os.stat(root)
            key = (st.st_dev, st.st_ino)
        except OSError:
            continue
        if key in seen_dirs:  # symlink loop
            dirs[:] = []
            continue
        seen_dirs.add(key)
        dirs.sort()
        for name in sorted(files):
            if _is_log_name(name):
                path = os.path.join(root, name)
                try:
                    regular = stat.S_ISREG(os.stat(path).st_mode)
                except OSError as e:
                    warnings.append(f"{path}: skipped, {e.strerror}")
                    continue
                if regular:
                    found.append(path)
                else:
                    warnings.append(f"{path}: skipped, not a regular file")
    return found


def expand(paths: list[str], warnings: list[str]) -> list[str]:
    """Paths, directories and globs to a sorted, de-duplicated list of files ('-' kept)."""
    out: list[str] = []
    for p in paths:
        if p == "-":
            out.append("-")
            continue
        if os.path.isdir(p):
            files = _walk(p, warnings)
            if not files:
                raise InputError(f"{p}: directory holds no log files", f"looked for {', '.join('*' + s for s in LOG_SUFFIXES)} and .gz of them")
            out.extend(files)
        elif os.path.lexists(p):
            out.append(p)
        elif any(c in p for c in "*?["):
            matches = sorted(m for m in glob.glob(p, recursive=True) if os.path.isfile(m) or os.path.isdir(m))
            if not matches:
                raise InputError(f"{p}: no file matches this pattern")
            for m in matches:
                if os.path.isdir(m):
                    out.extend(_walk(m, warnings))
                elif not OWN_OUTPUT.search(os.path.basename(m)):
                    out.append(m)
        else:
            raise InputError(f"{p}: no such file or directory")
    seen: set[str] = set()
    unique = []
    for p in out:
        key = p if p == "-" else os.path.realpath(p)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


class _UpTo(io.RawIOBase):
    """A regular file read only up to the size it had when opened: a log that is still being
    written (even faster than it can be read) is diagnosed as it was, and the run ends."""

    def __init__(self, f: BinaryIO, limit: int) -> None:
        self.f = f
        self.left = limit

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        if self.left <= 0:
            return 0
        n = self.f.readinto(memoryview(b)[: min(len(b), self.left)]) or 0  # type: ignore[attr-defined]
        self.left -= n
        return n

    def close(self) -> None:
        self.f.close()
        super().close()


class _Salvage(io.RawIOBase):
    """A gzip stream that hands over everything it could decompress before it broke.

    GzipFile raises on a truncated or corrupt stream, and a large read loses the data it
    had decompressed. Here the stream just ends where the damage is, and the damage is kept
    for the reader to report (`damage()`), after it has diagnosed the lines before it.
    Closing it closes the compressed file under it too (GzipFile leaves a file it was handed
    open), whatever state the damage left the decompressor in."""

    def __init__(self, gz: gzip.GzipFile, src: BinaryIO) -> None:
        self.gz = gz
        self.src = src
        self.error: Optional[BaseException] = None

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        if self.error is not None:
            return 0
        try:
            data = self.gz.read1(min(len(b), 1 << 16))
        except READ_ERRORS as e:
            self.error = e
            return 0
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self.gz.close()
        except Exception:  # closing a damaged gzip can raise again
            pass
        finally:
            try:
                self.src.close()
            finally:
                super().close()


class Gunzipped(io.BufferedReader):
    """The decompressed stream of a gzip input (its size on disk says nothing of its length)."""


def damage(f: BinaryIO, name: str, lines: int) -> Optional[str]:
    """The warning for a gzip input that ended in damage, once it has been read to its end."""
    e = f.raw.error if isinstance(f, Gunzipped) else None  # type: ignore[attr-defined]
    return None if e is None else read_failure(name, e, lines)


READ_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile, OSError)  # what reading an input may raise


def read_failure(name: str, e: BaseException, lines: int) -> str:
    """The warning for an input whose reading failed after `lines` lines."""
    what = "truncated gzip" if isinstance(e, EOFError) else f"read error ({e})"
    return f"{name}: skipped, {what}" if lines == 0 else f"{name}: {what} after line {lines}; diagnosed the lines before it"


def _gunzip(f: BinaryIO) -> BinaryIO:
    return Gunzipped(_Salvage(gzip.GzipFile(fileobj=f, mode="rb"), f), buffer_size=1 << 16)  # type: ignore[return-value]


def _open_file(path: str) -> BinaryIO:
    f = open(path, "rb", buffering=0)
    try:
        st = os.fstat(f.fileno())
    except OSError:
        f.close()
        raise
    if stat.S_ISREG(st.st_mode):
        f = io.BufferedReader(_UpTo(f, st.st_size), buffer_size=1 << 16)  # type: ignore[assignment]
    else:  # a pipe or FIFO (`<(zcat job.log.gz)`): read until its writer closes it
        f = io.BufferedReader(f, buffer_size=1 << 16)  # type: ignore[assignment]
    try:
        head = f.peek(2)[:2] if hasattr(f, "peek") else b""
    except BaseException:
        f.close()  # unreadable from its first byte: not left open for the collector
        raise
    if head == b"\x1f\x8b":
        return _gunzip(f)
    return f


def _open_stdin() -> BinaryIO:
    if sys.stdin is None or sys.stdin.isatty():
        raise InputError("-: standard input is a terminal, not a log", "pipe a log in, e.g. `cat job.log | slurmdoc diagnose -`")
    raw = sys.stdin.buffer
    buffered = raw if hasattr(raw, "peek") else io.BufferedReader(raw)  # type: ignore[arg-type]
    if buffered.peek(2)[:2] == b"\x1f\x8b":
        return _gunzip(buffered)  # type: ignore[arg-type]
    return buffered  # type: ignore[return-value]


def make_inputs(paths: list[str], warnings: list[str], tail_bytes: Optional[int] = None) -> list[Input]:
    """One Input per file; with `tail_bytes`, each regular file's last bytes only (tail_input)."""
    files = expand(paths, warnings)
    inputs: list[Input] = []
    for i, p in enumerate(files):
        if p == "-":
            inputs.append(Input(SourceInfo(index=i, path="<stdin>"), _open_stdin, None))
            continue
        if tail_bytes is not None:
            inp = tail_input(p, tail_bytes, i)
            if inp.info.first_line > 1:
                warnings.append(f"{p}: diagnosed from line {inp.info.first_line} on (its last {inp.size} bytes), not the lines before")
            elif inp.info.path != p:
                warnings.append(f"{p}: diagnosed its last {inp.size} bytes only, numbered from there (too large to count the lines before in time)")
            inputs.append(inp)
            continue
        hints = path_hints(p)
        size: Optional[int] = None
        try:
            st = os.stat(p)
            size = st.st_size if stat.S_ISREG(st.st_mode) else None
        except OSError:
            pass
        inputs.append(Input(SourceInfo(index=i, path=p, **hints), (lambda p=p: _open_file(p)), size))
    return inputs


TAIL_COUNT_SECONDS = 5.0  # spent counting the lines before a tail (a few GB from the page cache)


def tail_input(path: str, nbytes: int, index: int = 0) -> Input:
    """The last `nbytes` of a log file (from the first line that starts within them), read
    as an input of its own that keeps the file's name and line numbers: what a diagnosis
    cut short by a time budget reads, and still names `path:line` as the whole file would.

    The lines before the tail are counted (newlines only, at memory speed), not parsed; past
    TAIL_COUNT_SECONDS of counting, lines are numbered from the tail's start and the source
    is named `path (its last N bytes)`, so no line number is ever wrong.
    A gzip file or anything but a regular file is read whole: its bytes are no lines.
    """
    hints = path_hints(path)
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or f.read(2) == b"\x1f\x8b" or st.st_size <= nbytes:
                raise LookupError
            size = st.st_size
            start = size - max(0, nbytes)
            f.seek(start - 1)
            while True:  # the tail starts after the newline that ends the line cut by `start`
                piece = f.read(1 << 16)
                nl = piece.find(b"\n")
                if nl >= 0:
                    start = f.tell() - len(piece) + nl + 1
                    break
                if not piece:
                    start = size
                    break
            f.seek(0)
            lines: Optional[int] = 0
            left = start
            buf = bytearray(1 << 22)
            view = memoryview(buf)
            until = time.monotonic() + TAIL_COUNT_SECONDS
            while left > 0:
                n = f.readinto(view[: min(left, len(buf))])
                if not n:
                    break
                lines += buf.count(b"\n", 0, n)  # type: ignore[operator]
                left -= n
                if left > 0 and time.monotonic() > until:
                    lines = None  # too large to count in time: the tail's own numbers, said so
                    break
    except (OSError, LookupError):
        return Input(SourceInfo(index=index, path=path, **hints), (lambda: _open_file(path)), None)

    def open_tail() -> BinaryIO:
        f = open(path, "rb", buffering=0)
        f.seek(start)
        return io.BufferedReader(_UpTo(f, size - start), buffer_size=1 << 16)  # type: ignore[return-value]

    if lines is None:
        return Input(SourceInfo(index=index, path=f"{path} (its last {size - start} bytes)", **hints), open_tail, size - start)
    return Input(SourceInfo(index=index, path=path, first_line=lines + 1, **hints), open_tail, size - start)


class _Prefixed(io.RawIOBase):
    """A stream that first returns bytes already read, then the rest of `f`."""

    def __init__(self, head: bytes, f: BinaryIO) -> None:
        self.head = head
        self.f = f

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        if self.head:
            n = min(len(b), len(self.head))
            b[:n] = self.head[:n]
            self.head = self.head[n:]
            return n
        data = self.f.read(len(b))
        b[: len(data)] = data
        return len(data)


NUL_RUN = re.compile(rb"\x00+")


def looks_binary(head: bytes) -> bool:
    """True for data that is not a text log: NULs or mostly non-text bytes early on.

    NULs are counted by runs: binary data has them scattered, while a text log that a crash
    cut mid-write has one hole of NULs (the bytes never written) and text around it; the
    text is judged without the hole.
    """
    if not head:
        return False
    if b"\x00" in head:
        runs = len(NUL_RUN.findall(head))
        if runs > len(head) // 100 + 1:
            return True
        head = NUL_RUN.sub(b"", head)
        if not head:
            return False
    text_bytes = sum(1 for b in head if b >= 0x20 or b in (9, 10, 12, 13, 27, 8))
    if text_bytes < 0.85 * len(head):
        return True
    # random or compressed data is mostly printable bytes but not UTF-8 (nor a legacy
    # single-byte text, where the odd accented letter stays well under this share)
    bad = head.decode("utf-8", "replace").count("\ufffd")
    return bad > 16 and bad > len(head) // 10


MAX_LINE_WARNINGS = 3  # per file; the rest are counted


def _utf16_lines(f: BinaryIO) -> Iterator[tuple[int, str]]:
    """A UTF-16 log (BOM first), e.g. written by PowerShell: decoded, still line by line."""
    text = io.TextIOWrapper(f, encoding="utf-16", errors="replace", newline=None)  # type: ignore[arg-type]
    lineno = 0
    while True:
        line = text.readline(MAX_LINE)
        if not line:
            return
        lineno += 1
        if not line.endswith("\n") and len(line) == MAX_LINE:
            while (rest := text.readline(MAX_LINE)) and not rest.endswith("\n"):
                pass
        yield lineno, line.rstrip("\r\n")


def read_lines(inp: Input, warnings: list[str], on_bytes: Optional[Callable[[int], None]] = None) -> Iterator[tuple[int, str]]:
    """Yield (line number, decoded line without its newline). Damage becomes warnings."""
    name = inp.info.path
    try:
        f = inp.open()
    except InputError:
        raise
    except OSError as e:
        warnings.append(f"{name}: skipped, cannot open: {e.strerror or e}")
        return
    long_lines = 0
    pending = 0  # bytes read but not yet reported (progress is reported per MiB, not per line)
    try:
        lineno = inp.info.first_line - 1
        first = True
        while True:
            try:
                chunk = f.readline(MAX_LINE)
            except READ_ERRORS as e:
                warnings.append(read_failure(name, e, lineno))
                return
            if not chunk:
                return
            if first:
                first = False
                if chunk.startswith((b"\xff\xfe", b"\xfe\xff")):
                    yield from _utf16_lines(io.BufferedReader(_Prefixed(chunk, f)))  # type: ignore[arg-type]
                    return
                if chunk.startswith(b"\xef\xbb\xbf"):
                    chunk = chunk[3:]  # UTF-8 byte-order mark
                if looks_binary(chunk[:SNIFF]):
                    warnings.append(f"{name}: skipped, binary data, not a text log")
                    return
            if on_bytes is not None:
                pending += len(chunk)
                if pending >= 1 << 20:
                    on_bytes(pending)
                    pending = 0
            if len(chunk) == MAX_LINE and not chunk.endswith(b"\n"):
                skipped = 0
                while True:
                    rest = f.readline(MAX_LINE)
                    skipped += len(rest)
                    if on_bytes is not None:
                        on_bytes(len(rest))
                    if not rest or rest.endswith(b"\n"):
                        break
                lineno += 1
                long_lines += 1
                if long_lines <= MAX_LINE_WARNINGS:
                    warnings.append(f"{name}:{lineno}: line longer than {MAX_LINE} bytes; kept its first {MAX_LINE} bytes, skipped {skipped}")
                yield lineno, chunk.decode("utf-8", "replace")
                continue
            lineno += 1
            if chunk.endswith(b"\n"):
                chunk = chunk[:-1]
            if chunk.endswith(b"\r"):
                chunk = chunk[:-1]
            yield lineno, chunk.decode("utf-8", "replace")
    finally:
        if (hurt := damage(f, name, lineno)) is not None:
            warnings.append(hurt)
        if long_lines > MAX_LINE_WARNINGS:
            warnings.append(f"{name}: {long_lines - MAX_LINE_WARNINGS} more lines longer than {MAX_LINE} bytes were cut")
        if on_bytes is not None and pending:
            on_bytes(pending)
        try:
            f.close()
        except Exception:  # closing a damaged gzip can raise again; nothing to do
            pass

"""Reading PyTorch flight-recorder dumps without PyTorch, and without running anything in them.

A job writes one dump per rank (`<prefix><rank>`, e.g. `/tmp/nccl_trace_rank_3`): pickle (what
`torch._C._distributed_c10d._dump_fr_trace()` and NCCL's dump-on-timeout write) or JSON
(`_dump_fr_trace_json()`). The files come from the job, so from its user: every byte is
hostile until checked.

- Pickle goes through an unpickler that admits no global at all (`find_class` and
  `persistent_load` refuse): only the opcodes that build plain containers and scalars can run,
  so nothing in the file can name a function, let alone call one.
- Every size is bounded before it is read: bytes per file (checked with fstat, then read no
  further than the bound), files per directory, entries per dump (the newest are kept, as the
  ring does), frames per entry, the length of each string kept. Nothing walks a loaded object
  generically (a pickle can share one list many times over): fields are read by name.
- Files are opened with O_NOFOLLOW and O_NONBLOCK and must be regular files: a symlink, a FIFO
  or a device is refused, never followed or waited on.

Every failure is a `TraceError` with one line that names the file. In a directory or prefix of
several dumps, a dump that cannot be read (cut short by a kill mid-write, junk, refused) is
skipped with a warning naming it, and its rank counts as one without a dump; only when none
can be read is it an error.
"""

from __future__ import annotations

import gc
import io
import json
import os
import pickle
import re
import stat
from dataclasses import dataclass, field
from typing import Any, Optional


class TraceError(Exception):
    """A one-line reason a dump (or a dump path) could not be read."""


@dataclass(frozen=True)
class TraceLimits:
    file_bytes: int = 64 << 20  # per dump file
    files: int = 65_536  # dump files per directory or prefix
    entries: int = 20_000  # entries kept per dump (the newest)
    frames: int = 64  # frames kept per entry
    text: int = 512  # characters kept of a string field
    dir_scan: int = 200_000  # directory entries looked at
    pg_ranks: int = 1_000_000  # rank numbers (or characters of them) in one dump's pg_config


DEFAULT_LIMITS = TraceLimits()

RANK_NAME = re.compile(r"(\d{1,7})(?:\.(?:json|pkl|pickle))?$")


@dataclass(slots=True)
class Entry:
    """One recorded collective (or point-to-point op) of one rank."""

    pg: str  # the group's name as the entries give it ('0' is the default group)
    desc: str  # e.g. 'default_pg', 'undefined'
    seq: int  # collective_seq_id
    p2p_seq: int
    p2p: bool
    op: str  # profiling_name without its backend ('all_reduce')
    sizes: tuple  # input sizes, as nested tuples
    dtypes: tuple
    created_ns: int
    raw_frames: Any  # the dump's frames as loaded (plain data), read by frames_of() when asked


@dataclass
class Dump:
    rank: int
    path: str
    version: str
    entries: list[Entry]
    groups: dict[str, list[int]]  # pg_config: name -> member ranks (empty when not listed)
    dropped: int = 0  # entries beyond the bound, not kept


@dataclass
class TraceSet:
    """The dumps of one job, by global rank."""

    path: str
    dumps: dict[int, Dump] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    files: int = 0


class _NoGlobals(pickle.Unpickler):
    """Builds plain containers and scalars only: any reference to a global is refused."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D401
        raise TraceError(f"refuses to load the global {str(module)[:80]}.{str(name)[:80]}: a flight-recorder dump holds only plain data")

    def persistent_load(self, pid: Any) -> Any:
        raise TraceError("refuses a persistent reference: a flight-recorder dump holds only plain data")


def _files(path: str, limits: TraceLimits) -> list[tuple[int, str]]:
    """(rank, file) of every dump at `path`: a directory of per-rank files, a `<prefix>` whose
    files are `<prefix><rank>`, or one file (its rank from its name, else 0)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror or e}") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise TraceError(f"{path}: is a symbolic link; give the directory or files it points to")
    if st is not None and stat.S_ISREG(st.st_mode):
        m = RANK_NAME.search(os.path.basename(path))
        return [(int(m.group(1)) if m else 0, path)]
    if st is not None and stat.S_ISDIR(st.st_mode):
        folder, prefix = path, ""
    elif st is not None:
        raise TraceError(f"{path}: not a file or a directory")
    else:
        folder, prefix = os.path.dirname(path) or ".", os.path.basename(path)
        if not prefix:
            raise TraceError(f"{path}: no such file or directory")
    found: dict[int, str] = {}
    stems: dict[str, dict[int, str]] = {}  # in a directory: the names' common stem -> rank -> file
    seen = 0
    try:
        with os.scandir(folder) as it:
            for de in it:
                seen += 1
                if seen > limits.dir_scan:
                    raise TraceError(f"{folder}: more than {limits.dir_scan} entries; give the dumps' own directory")
                if not de.name.startswith(prefix) or de.name.startswith("."):
                    continue
                m = RANK_NAME.search(de.name[len(prefix):]) if prefix else RANK_NAME.search(de.name)
                if m is None or (prefix and m.start() != 0):
                    continue
                if not de.is_file(follow_symlinks=False):
                    continue  # a symlink, a FIFO, a directory: never followed or read
                rank = int(m.group(1))
                group = stems.setdefault(prefix or de.name[: m.start()], {})
                if rank in group:
                    continue  # the same rank twice (`_3` and `_3.json`): one of them
                group[rank] = os.path.join(folder, de.name)
                if len(group) > limits.files:
                    raise TraceError(f"{path}: more than {limits.files} dump files")
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file or directory") from None
    except NotADirectoryError:
        raise TraceError(f"{path}: no such file or directory") from None
    except OSError as e:
        raise TraceError(f"{folder}: {e.strerror or e}") from None
    if stems:
        # a directory may hold other numbered files: the dumps are the largest family of names
        found = max(stems.values(), key=lambda g: (len(g), -min(g)))
    if not found:
        raise TraceError(f"{path}: no flight-recorder dump files (expected <prefix><rank>, e.g. nccl_trace_rank_0)")
    return sorted(found.items())


def _read(path: str, limits: TraceLimits) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TraceError(f"{path}: not a regular file")
        if st.st_size > limits.file_bytes:
            raise TraceError(f"{path}: {st.st_size >> 20} MiB, more than a dump's bound of {limits.file_bytes >> 20} MiB")
        chunks, left = [], limits.file_bytes + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
        if len(data) > limits.file_bytes:
            raise TraceError(f"{path}: grew past a dump's bound of {limits.file_bytes >> 20} MiB while read")
        return data
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror or e}") from None
    finally:
        os.close(fd)


def _decode(path: str, data: bytes) -> dict:
    head = data[:64].lstrip()
    try:
        if head[:1] == b"{":
            obj = json.loads(data)
        else:
            # a buffered reader: the unpickler peeks ahead in it instead of one read() call per
            # opcode as on a bare BytesIO, 3-4x faster on real dumps
            obj = _NoGlobals(io.BufferedReader(io.BytesIO(data), buffer_size=1 << 16)).load()
    except TraceError as e:
        raise TraceError(f"{path}: {e}") from None
    except RecursionError:
        raise TraceError(f"{path}: nested too deeply to be a flight-recorder dump") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError, UnicodeDecodeError, OverflowError, MemoryError) as e:
        raise TraceError(f"{path}: not a flight-recorder dump (neither JSON nor plain pickle: {type(e).__name__})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("entries"), list):
        raise TraceError(f"{path}: not a flight-recorder dump (no list of entries)")
    return obj


def _text(v: Any, limits: TraceLimits) -> str:
    if isinstance(v, bytes):
        v = v[: 4 * limits.text].decode("utf-8", "replace")  # cut first: one huge shared value, many fields
    return v[: limits.text] if isinstance(v, str) else ""


def _int(v: Any) -> Optional[int]:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and len(v) < 24 and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def _shape(v: Any) -> Any:
    """Sizes as a tuple of shapes of ints: `[[1024]]` -> ((1024,),). At most 16 x 16 values are
    looked at and none is rendered: a pickle can nest one list in itself many times over, so a
    deeper walk (or str() of a value) could take hours on a file of kilobytes."""
    if not isinstance(v, (list, tuple)):
        return ()
    return tuple(tuple(_dim(y) for y in x[:16]) if isinstance(x, (list, tuple)) else _dim(x) for x in v[:16])


def _dim(v: Any) -> Any:
    n = _int(v)
    if n is not None:
        return n
    return v[:32] if isinstance(v, str) else "?"


def _sizes(v: Any) -> Any:
    """`_shape`, with a fast path for the usual list of lists of ints."""
    if type(v) is list and len(v) <= 16:
        try:
            out = tuple([tuple(x) for x in v])
            if all(len(x) <= 16 and all(type(n) is int for n in x) for x in out):
                return out
        except TypeError:
            pass
    return _shape(v)


def _ranks(v: Any) -> list[int]:
    """pg_config's ranks: a list, or a string holding one (`'[0, 1, 2, 3]'`)."""
    if isinstance(v, str):
        nums = re.findall(r"\d+", v[:200_000])
        return sorted({int(x) for x in nums[:100_000]})
    if isinstance(v, (list, tuple)):
        return sorted({r for r in (_int(x) for x in v[:100_000]) if r is not None})
    return []


def _entry(e: Any, limits: TraceLimits) -> Optional[Entry]:
    if type(e) is not dict:
        return None
    seq = e.get("collective_seq_id")
    if type(seq) is not int:
        seq = _int(seq)
        if seq is None:
            return None
    pg = e.get("process_group")
    if type(pg) in (tuple, list) and pg:
        name = pg[0] if type(pg[0]) is str and len(pg[0]) <= limits.text else _text(pg[0], limits)
        desc = (pg[1] if type(pg[1]) is str and len(pg[1]) <= limits.text else _text(pg[1], limits)) if len(pg) > 1 else ""
    else:
        name, desc = str(_int(e.get("pg_id")) or 0), ""
    op = e.get("profiling_name")
    op = op if type(op) is str and len(op) <= limits.text else _text(op, limits)
    if ":" in op:
        op = op.split(":", 1)[1]
    p2p = e.get("is_p2p")
    if type(p2p) is not bool:
        p2p = op.startswith(("send", "recv", "isend", "irecv"))
    raw = e.get("frames")
    dtypes = e.get("input_dtypes")
    if type(dtypes) is list and len(dtypes) <= 16 and all(type(x) is str and len(x) <= 64 for x in dtypes):
        dt = tuple(dtypes)
    else:
        dt = tuple(_text(d, limits) for d in dtypes[:16]) if isinstance(dtypes, (list, tuple)) else ()
    p2p_seq = e.get("p2p_seq_id")
    created = e.get("time_created_ns")
    return Entry(
        pg=name,
        desc=desc,
        seq=seq,
        p2p_seq=p2p_seq if type(p2p_seq) is int else (_int(p2p_seq) or 0),
        p2p=p2p,
        op=op,
        sizes=_sizes(e.get("input_sizes", ())),
        dtypes=dt,
        created_ns=created if type(created) is int else (_int(created) or 0),
        raw_frames=raw if isinstance(raw, (list, tuple)) else (),
    )


def frames_of(e: Entry, limits: TraceLimits = DEFAULT_LIMITS) -> list[tuple[str, int, str]]:
    """The entry's frames as (file, line, function), innermost first, read when asked for
    (only the culprit's are ever needed)."""
    out = []
    for f in e.raw_frames[: limits.frames]:
        if isinstance(f, dict):
            out.append((_text(f.get("filename"), limits), _int(f.get("line")) or 0, _text(f.get("name"), limits)))
    return out


def _dump(rank: int, path: str, obj: dict, limits: TraceLimits) -> Dump:
    raw = obj["entries"]
    dropped = max(0, len(raw) - limits.entries)
    entries = [x for x in (_entry(e, limits) for e in raw[dropped:]) if x is not None]
    groups: dict[str, list[int]] = {}
    cfg = obj.get("pg_config")
    if isinstance(cfg, dict):
        budget = limits.pg_ranks  # one shared ranks list under many groups costs each time
        for key, val in list(cfg.items())[:10_000]:
            if isinstance(val, dict):
                ranks = val.get("ranks")
                budget -= len(ranks) if isinstance(ranks, (str, list, tuple)) else 1
                if budget < 0:
                    raise TraceError(f"{path}: pg_config lists more than {limits.pg_ranks} ranks in all; not a flight-recorder dump")
                groups[_text(key, limits)] = _ranks(ranks)
    return Dump(rank, path, _text(obj.get("version"), limits), entries, groups, dropped)


def read_traces(path: "str | os.PathLike[str]", *, limits: TraceLimits = DEFAULT_LIMITS) -> TraceSet:
    """Every rank's dump at `path` (a directory, a `<prefix>`, or one file)."""
    p = os.fspath(path)
    if not p:
        raise TraceError("no flight-recorder path given")
    out = TraceSet(path=p)
    # a dump is many small dicts that hold no cycles: the cyclic collector, run every few
    # hundred allocations, would cost several times the loading itself
    was = gc.isenabled()
    gc.disable()
    try:
        files = _files(p, limits)
        one = len(files) == 1 and files[0][1] == p  # the path named one file: its failure is the error
        unread: list[str] = []
        for rank, f in files:
            try:
                obj = _decode(f, _read(f, limits))
            except TraceError as e:
                if one:
                    raise
                # a rank killed while dumping leaves a truncated file: the others still speak,
                # and that rank counts as one without a dump
                unread.append(str(e))
                continue
            d = _dump(rank, f, obj, limits)
            del obj
            if d.dropped:
                out.warnings.append(f"{f}: {d.dropped} older entries beyond the bound of {limits.entries} not read")
            out.dumps[rank] = d
            out.files += 1
        if not out.dumps:
            more = f" (and {len(unread) - 1} more)" if len(unread) > 1 else ""
            raise TraceError(f"{unread[0]}{more}")
        out.warnings.extend(f"skipped, unreadable: {u}" for u in unread)
    finally:
        if was:
            gc.enable()
    return out

"""`slurmdoc scan`: list the jobs, diagnose each on its own (in K processes, rules loaded once per
process), and stream one record per job in the listing's order."""

from __future__ import annotations

import heapq
import json
import multiprocessing as mp
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from slurmdoc.errors import InputError, SlurmdocError
from slurmdoc.fleet.jobs import JobFiles, group_paths
from slurmdoc.fleet.record import JobRecord, from_diagnosis, from_error

PART_KIND = "scan-part"
SCHEMA_VERSION = 1

_BOOK = None  # the rule pack of this process


@dataclass
class ScanOptions:
    paths: list[str]
    rule_dirs: list[str] = field(default_factory=list)
    jobs: int = 1
    shard: Optional[tuple[int, int]] = None  # (I, N): every N-th job from the I-th
    cache: Optional[str] = None
    window: Any = None  # fleet.accounting.Window: the jobs come from sacct, not from PATHs


@dataclass
class Work:
    """One job to diagnose (picklable: it goes to a worker process)."""

    index: int
    job_id: Optional[str]
    paths: tuple[str, ...]
    acct: Any = None  # JobTriage, when the job comes from the accounting
    found_by: Optional[str] = None
    note: Optional[str] = None
    located: bool = False


def parse_shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise InputError(f"--shard {text}: expected I/N, e.g. 0/3") from None
    if n < 1 or not 0 <= i < n:
        raise InputError(f"--shard {text}: I must be 0 to N-1 and N at least 1")
    return i, n


def _init(rule_dirs: list[str]) -> None:
    global _BOOK
    if _BOOK is None:
        from slurmdoc.engine.loader import load_rulebook

        _BOOK = load_rulebook(rule_dirs)


def diagnose_one(w: Work) -> JobRecord:
    """One job's record (runs in a worker process). Never raises for a bad log."""
    from slurmdoc.api import diagnose

    d = None
    error = None
    if w.paths:
        try:
            d = diagnose(list(w.paths), rulebook=_BOOK)
        except SlurmdocError as e:
            error = e.one_line()
        except Exception as e:  # noqa: BLE001 - one bad job must not end a scan of thousands
            error = f"internal error: {type(e).__name__}: {e}"
    if w.acct is not None:
        from slurmdoc.fleet.record import from_accounting

        return from_accounting(w.index, w.paths, d, w.acct, w.found_by, error or w.note)
    if d is None:
        return from_error(w.index, w.job_id, w.paths, error or "no log")
    return from_diagnosis(w.index, w.job_id, w.paths, d)


def listing(paths: list[str], warnings: list[str]) -> list[JobFiles]:
    groups = group_paths(paths, warnings)
    if not groups:
        raise InputError("no log files found", "name log files, directories or globs")
    return groups


def scan(opts: ScanOptions, warnings: list[str]) -> tuple[int, Iterator[JobRecord]]:
    """(number of jobs in the whole listing, records of this shard's jobs in listing order).
    The rule pack is loaded before returning, so an invalid pack fails here."""
    if opts.window is not None:
        from slurmdoc.fleet.accounting import accounting_jobs

        jobs = accounting_jobs(opts.window)
        total = len(jobs)
        items = [Work(i, j.job_id, (), acct=j) for i, j in enumerate(jobs)]
    else:
        groups = listing(opts.paths, warnings)
        total = len(groups)
        items = [Work(i, g.job_id, g.paths) for i, g in enumerate(groups)]
    if opts.shard is not None:
        k, n = opts.shard
        items = [it for it in items if it.index % n == k]
    _init(opts.rule_dirs)
    return total, _records(items, opts)


def _locate(w: Work) -> Work:
    if w.acct is not None and not w.located:
        from slurmdoc.fleet.accounting import locate_logs

        w.paths, w.found_by, w.note = locate_logs(w.acct)
        w.located = True
    return w


def _records(items: list, opts: ScanOptions) -> Iterator[JobRecord]:
    cache = None
    keys: list[Optional[str]] = [None] * len(items)
    cached: list[Optional[JobRecord]] = [None] * len(items)
    if opts.cache:
        from slurmdoc.fleet.cache import Cache, files_key, pack_fingerprint

        cache = Cache(opts.cache)
        fp = pack_fingerprint(opts.rule_dirs)
        for j, w in enumerate(items):
            _locate(w)
            extra = w.acct.model_dump_json() if w.acct is not None else ""
            keys[j] = files_key(fp + extra, w.paths)
            cached[j] = cache.get(keys[j], w.index)
    todo = [it for it, c in zip(items, cached) if c is None]
    pool = None
    try:
        if opts.jobs > 1 and len(todo) > 1:
            ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
            pool = ctx.Pool(min(opts.jobs, len(todo)), initializer=_init, initargs=(opts.rule_dirs,))
            fresh = pool.imap(diagnose_one, map(_locate, todo), chunksize=1)
        else:
            fresh = map(diagnose_one, map(_locate, todo))
        for j, c in enumerate(cached):
            if c is not None:
                yield c
                continue
            rec = next(fresh)
            if cache is not None:
                cache.put(keys[j], rec)
            yield rec
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
        if cache is not None:
            cache.close()


# ---- parts: `scan --shard I/N` writes one, `scan merge` reads them ------------------------


def part_header(total: int, shard: tuple[int, int]) -> str:
    return json.dumps({"kind": PART_KIND, "schema_version": SCHEMA_VERSION, "shard": shard[0], "of": shard[1],
                       "jobs_total": total}) + "\n"


def record_line(rec: JobRecord) -> str:
    return json.dumps(rec.to_dict(), ensure_ascii=False) + "\n"


def _read_part(path: str) -> tuple[dict, Iterator[JobRecord]]:
    try:
        fh = open(path, encoding="utf-8")
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})")
    first = fh.readline()
    try:
        head = json.loads(first)
    except json.JSONDecodeError:
        head = None
    if not isinstance(head, dict) or head.get("kind") != PART_KIND:
        fh.close()
        raise InputError(f"{path}: not a scan part", "parts are written by `slurmdoc scan --shard I/N`")
    if head.get("schema_version") != SCHEMA_VERSION:
        fh.close()
        raise InputError(f"{path}: scan part schema_version {head.get('schema_version')}, this slurmdoc reads {SCHEMA_VERSION}")

    def records() -> Iterator[JobRecord]:
        with fh:
            for n, line in enumerate(fh, 2):
                if not line.strip():
                    continue
                try:
                    yield JobRecord.from_dict(json.loads(line))
                except (json.JSONDecodeError, TypeError) as e:
                    raise InputError(f"{path}:{n}: damaged scan part ({e})") from None

    return head, records()


def merge(parts: list[str]) -> tuple[int, Iterator[JobRecord]]:
    """(jobs in the whole listing, every part's records in listing order). The parts must be the
    N shards of one listing, each once."""
    if not parts:
        raise InputError("scan merge: no part given", "name the files written by `scan --shard I/N`")
    heads, streams = [], []
    for p in parts:
        h, s = _read_part(p)
        heads.append(h)
        streams.append(s)
    n = {h.get("of") for h in heads}
    totals = {h.get("jobs_total") for h in heads}
    if len(n) != 1 or len(totals) != 1:
        raise InputError("scan merge: the parts come from different scans (their shard counts or job totals differ)")
    (of,) = n
    shards = sorted(h.get("shard") for h in heads)
    if shards != list(range(of)):
        missing = sorted(set(range(of)) - set(shards))
        extra = sorted({s for s in shards if shards.count(s) > 1})
        what = (f"missing shard(s) {', '.join(map(str, missing))}" if missing else "") + \
               ("; " if missing and extra else "") + (f"shard(s) {', '.join(map(str, extra))} given twice" if extra else "")
        raise InputError(f"scan merge: {what} of {of}")
    (total,) = totals
    return total, heapq.merge(*streams, key=lambda r: r.index)

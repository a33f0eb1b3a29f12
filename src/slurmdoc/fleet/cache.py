"""The incremental cache of `scan --cache FILE`: a job's record, keyed by its files' paths, sizes
and modification times and by the rule pack in effect, so a nightly scan re-reads only new or
grown logs. SQLite (standard library): lookups without loading the whole cache in memory."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from typing import Optional

from slurmdoc import __version__
from slurmdoc.errors import InputError
from slurmdoc.fleet.record import JobRecord
from slurmdoc.fleet.signature import MASKS_FILE

COMMIT_EVERY = 200


def pack_fingerprint(rule_dirs: list[str]) -> str:
    """What the verdicts depend on besides the logs: slurmdoc's version, every rule file and
    the signature masks (path, size, mtime)."""
    from slurmdoc.engine.loader import bundled_rules_dir

    h = hashlib.sha256(__version__.encode())
    for d in [str(bundled_rules_dir())] + list(rule_dirs):
        for root, dirs, files in os.walk(d):
            dirs.sort()
            for name in sorted(files):
                if name.endswith((".yaml", ".yml")):
                    p = os.path.join(root, name)
                    try:
                        st = os.stat(p)
                    except OSError:
                        continue
                    h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    st = os.stat(MASKS_FILE)
    h.update(f"{MASKS_FILE}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()


def files_key(fingerprint: str, paths: tuple[str, ...]) -> Optional[str]:
    """The cache key of a job's files; None when there is none or one cannot be stat'ed (never cached)."""
    if not paths:
        return None
    h = hashlib.sha256(fingerprint.encode())
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            return None
        h.update(f"{os.path.abspath(p)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


class Cache:
    def __init__(self, path: str) -> None:
        try:
            self.db = sqlite3.connect(path)
            self.db.execute("CREATE TABLE IF NOT EXISTS records (key TEXT PRIMARY KEY, record TEXT NOT NULL)")
        except sqlite3.Error as e:
            raise InputError(f"{path}: cannot use as a scan cache ({e})", "give a new file name, or delete it")
        self.path = path
        self.pending = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Optional[str], index: int) -> Optional[JobRecord]:
        if key is None:
            return None
        row = self.db.execute("SELECT record FROM records WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return JobRecord.from_dict({**json.loads(row[0]), "index": index})

    def put(self, key: Optional[str], rec: JobRecord) -> None:
        if key is None or rec.status == "error":
            return
        d = rec.to_dict()
        d.pop("index", None)
        self.db.execute("INSERT OR REPLACE INTO records (key, record) VALUES (?, ?)", (key, json.dumps(d)))
        self.pending += 1
        if self.pending >= COMMIT_EVERY:
            self.db.commit()
            self.pending = 0

    def close(self) -> None:
        try:
            self.db.commit()
            self.db.close()
        except sqlite3.Error:
            pass

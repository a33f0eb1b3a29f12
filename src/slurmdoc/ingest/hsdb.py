"""The Hyperscan databases of the prefilter (prefilter.py): compiled from the rule pack's
trigger literals (the set cut to those worth searching for, `covering`) and, for the quiet
search, from the guards' line supersets and the expressions that let colour codes split a
keyword; kept beside the bytecode and loaded while what they were made of is the same.
"""

from __future__ import annotations

import hashlib
import os
import sys
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import Optional

try:  # the accelerator: wheels exist for x86-64 Linux/Windows and macOS
    import hyperscan as _hs
except Exception:  # pragma: no cover - depends on the platform
    _hs = None


# Hyperscan finds a literal longer than 32 bytes by a slower path: the rule pack's four such
# literals doubled the time of the whole search (0.45 s a GiB against 0.23 s, one core). A
# longer literal is searched for by its first HS_HEAD bytes, and the rest is checked by the
# prefilter (Prefilter._scan).
HS_HEAD = 32


# The compiled Hyperscan databases of the last literal set, kept beside this package's bytecode
# (compiling ~320 literals is several ms of every start-up): the digest of what each was
# compiled from, then Hyperscan's own serialised form, which it refuses to load on a
# machine or a version it does not fit (then it is compiled again). Written like bytecode.
# One file for the search, one for the quiet search, one for the guarded keywords split by a
# colour code (named for the prefilter they serve).
HS_CACHE = Path(__file__).resolve().parent / "__pycache__" / "prefilter.hsdb"
MAX_HS_CACHE = 64 << 20


def _hs_key(words: list[tuple[bytes, bool]], exprs: list[str]) -> bytes:
    """The digest of a literal set, and of what its database is made with: the sources of
    this module and of the prefilter (which literals are kept, how they are written, which the
    quiet search holds), Hyperscan's and Python's versions; and of the expressions searched for
    beside the literals."""
    try:
        own = b"".join(Path(__file__).with_name(name).read_bytes() for name in ("hsdb.py", "prefilter.py"))
    except OSError:
        own = os.urandom(16)  # no source to key on: nothing will match
    h = hashlib.sha256(own + f"\0{_hs.__version__}\0{sys.version}\0{HS_HEAD}\0".encode())
    for w, ci in words:
        h.update(b"%d:%d:%s\0" % (ci, len(w), w))
    for e in exprs:
        h.update(b"e%d:%s\0" % (len(e), e.encode()))
    return h.digest()


def _hs_path(quiet: bool, split: bool = False) -> Path:
    if split:
        return HS_CACHE.with_name("prefilter-split.hsdb")
    return HS_CACHE.with_name("prefilter-quiet.hsdb") if quiet else HS_CACHE


def _hs_database(words: list[tuple[bytes, bool]], kept: list[tuple[bytes, bool]]):
    """The search's database (the `kept` literals of `words`): loaded from its cache when that
    holds it, else compiled and kept."""
    key = _hs_key(words, [])
    db = _hs_load(key)
    if db is None:
        db = _hs_compile(kept, [])
        _hs_keep(key, db)
    return db


def _hs_compile(kept: list[tuple[bytes, bool]], exprs: list[str]):
    """A database finding the `kept` literals (ids 0..) and the expressions (ids after them)."""
    db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
    db.compile(
        expressions=[_hs_literal(w[:HS_HEAD]) for w, _ in kept] + [e.encode() for e in exprs],
        ids=list(range(len(kept) + len(exprs))),
        elements=len(kept) + len(exprs),
        # an expression may only find more than its pattern would (prefilter mode)
        flags=[_hs.HS_FLAG_CASELESS if ci else 0 for _, ci in kept] + [_hs.HS_FLAG_PREFILTER | _hs.HS_FLAG_ALLOWEMPTY] * len(exprs),
    )
    return db


# escape sequences a colour code is made of, as the paste repair takes them off (damage.ANSI)
_ESC = r"(?:\x1b(?:\[[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]|[\x40-\x5a\x5c-\x5f]))*"


def _word_byte(c: int) -> bool:
    return 48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c == 95 or c >= 128


def _tolerant(w: bytes) -> str:
    """A literal as an expression that lets escape sequences stand between two of its bytes
    unless both are word bytes (a colour code splits words apart, not a word)."""
    out = []
    for i, c in enumerate(w):
        if i and not (_word_byte(w[i - 1]) and _word_byte(c)):
            out.append(_ESC)
        out.append(_hs_literal(bytes([c])).decode())
    return "".join(out)


def _split_guarded(held: set) -> tuple[list[str], list[tuple[bytes, bool]]]:
    """Expressions for the guarded keywords a colour code can split (more than one word, or
    punctuation: `timed\x1b[0m out`), with escape sequences let in between their words, and
    the keyword of each (lower case when it ignores case). Searched for by Prefilter.search
    only in a block holding an escape byte, and a match that is the keyword whole is dropped:
    whole, its rules' line supersets speak for it (or, on a coloured line, the quiet search's
    own expression); split, neither does, and its line holds an escape byte."""
    exprs, keywords = [], []
    for w, ci in sorted(held):
        body = _tolerant(w)
        if body != _hs_literal(w).decode():  # (one word: no colour code splits it)
            exprs.append(("(?i)" if ci else "") + body)
            keywords.append((w.lower() if ci else w, ci))
    return exprs, keywords


def _split_marked(words: list[tuple[bytes, bool]], marks: set, held: set) -> list[str]:
    """Expressions for the quiet search in place of the marks (colour codes): each keyword of
    more than one word with escape sequences let in between its words; the guarded keywords,
    whole, on a line that holds a mark (one expression for all: unmarked, their line supersets
    speak for them; letting escapes into them there made the search ten times as slow)."""
    out = []
    if not marks:
        return out
    guarded: dict[bool, list[str]] = {False: [], True: []}
    for w, ci in words:
        if (w, ci) in marks:
            continue
        if (w, ci) in held:
            guarded[ci].append(_hs_literal(w).decode())
            continue
        body = _tolerant(w)
        if body != _hs_literal(w).decode():  # (one word: no colour code splits it, the literal finds it)
            out.append(("(?i)" if ci else "") + body)
    for ci, lits in guarded.items():
        for alt in _alternations(sorted(lits)):
            for m, _ in sorted(marks):
                # a line the reader takes escape sequences off: any escape byte, not only the
                # mark (`\x1bM`, `\x1b\\` hold no `[`, and may stand inside a rule's match)
                mark = r"\x1b" if m.startswith(b"\x1b") else _hs_literal(m).decode()
                out.append(("(?i)" if ci else "") + f"{mark}[^\\n]*(?:{alt})|(?:{alt})[^\\n]*{mark}")
    return out


# Hyperscan refuses an expression longer than about 16,000 characters; an expression above
# repeats its alternation twice
ALTERNATION_MAX = 6000


def _alternations(lits: list[str]) -> list[str]:
    """The literals as alternations of at most ALTERNATION_MAX characters each (a literal
    longer than that stands alone): together they find what one alternation of all would, and
    a rule pack that grows does not lose its quiet search to Hyperscan's length limit."""
    out: list[str] = []
    cur: list[str] = []
    size = 0
    for lit in lits:
        if cur and size + 1 + len(lit) > ALTERNATION_MAX:
            out.append("|".join(cur))
            cur, size = [], 0
        cur.append(lit)
        size += len(lit) + (1 if size else 0)
    if cur:
        out.append("|".join(cur))
    return out


def _refused(exprs: list[str]) -> set[str]:
    """The expressions Hyperscan refuses alone (asked only when it refused them together)."""
    out = set()
    for e in exprs:
        try:
            _hs_compile([], [e])
        except Exception:  # noqa: BLE001 - too long, too large, unsupported
            out.add(e)
    return out


def _held_blob(held: set) -> bytes:
    """The guarded literals, as kept in the quiet search's cache after its key: a count, then
    each as ignore-case flag, length, bytes."""
    out = [b"%08d" % len(held)]
    for w, ci in sorted(held):
        out.append(b"%d%08d" % (ci, len(w)) + w)
    return b"".join(out)


def _hs_load_quiet(key: bytes, path: Path):
    """(database, guarded literals) from the quiet search's cache, or None."""
    got = _hs_read(key, path, _read_held)
    return (got[1], got[0]) if got is not None else None


def _read_held(blob: bytes) -> tuple[set, int]:
    """The guarded literals as _held_blob wrote them, and where they end."""
    n = int(blob[:8])
    at = 8
    held = set()
    for _ in range(n):
        ci, size = blob[at:at + 1] == b"1", int(blob[at + 1:at + 9])
        held.add((bytes(blob[at + 9:at + 9 + size]), ci))
        at += 9 + size
    return held, at


def _long_literals(kept: list[tuple[bytes, bool]]) -> dict[int, tuple[bytes, bool]]:
    """Hyperscan id -> a kept literal longer than HS_HEAD (searched for by its head)."""
    return {i: (w.lower() if ci else w, ci) for i, (w, ci) in enumerate(kept) if len(w) > HS_HEAD}


def _loud_ids(kept: list[tuple[bytes, bool]], words: list[tuple[bytes, bool]], held: set) -> frozenset[int]:
    """Ids of the kept literals whose hits make a block dense (the quiet search then pays): a
    guarded literal itself (`Error`, whose guard is where a traceback may begin: the literals
    holding it that no guard covers, `DistStoreError`, are searched for on their own once the
    search is quiet), and one every hit of which is a guarded literal's (one in `held`). A
    hit of a kept literal stands for each literal holding it (covering left those out): the
    exact ones holding it exactly and, when it ignores case, any holding it in any case. Each
    is looked for in all the literals at once, as covering does."""
    if any(b"\0" in w for w, _ in words):
        return frozenset()  # the separator below: guard nothing
    text, low, starts = _joined(words)
    loud = set()
    for k, (w0, ci0) in enumerate(kept):
        if (w0, ci0) in held:
            loud.add(k)
            continue
        hay, needle = (low, w0.lower()) if ci0 else (text, w0)
        stands = False
        i = hay.find(needle)
        while i >= 0:
            o = bisect_right(starts, i) - 1
            if ci0 or not words[o][1]:  # an exact literal stands for exact ones only
                if words[o] not in held:
                    break
                stands = True
            i = hay.find(needle, i + 1)
        else:
            if stands:
                loud.add(k)
    return frozenset(loud)


def _hs_load(key: bytes):
    """The search's database from its cache, or None."""
    got = _hs_read(key, HS_CACHE)
    return got[1] if got is not None else None


def _hs_read(key: bytes, path: Path, head: Optional[Callable[[bytes], tuple[object, int]]] = None):
    """(what `head` read after the key, the database after that) from a cache file kept under
    `key`, or None: missing, too big, another key, damaged, another machine's (compile then).
    `head(blob)` reads what is kept between the key and the database, and where it ends."""
    try:
        with open(path, "rb") as f:
            blob = f.read(MAX_HS_CACHE + 1)
        if len(blob) > MAX_HS_CACHE or blob[: len(key)] != key:
            return None
        blob = blob[len(key):]
        kept, at = head(blob) if head is not None else (None, 0)
        db = _hs.loadb(blob[at:], _hs.HS_MODE_BLOCK)
        db.scratch = _hs.Scratch(db)  # a loaded database comes without one
        return kept, db
    except Exception:  # noqa: BLE001 - unreadable, damaged, another machine's: compile instead
        return None


def _hs_keep(key: bytes, db, path: Optional[Path] = None) -> None:
    path = path or HS_CACHE
    if sys.dont_write_bytecode:
        return
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(key + _hs.dumpb(db))
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - a cache that cannot be written is only not kept
        try:
            tmp.unlink()
        except OSError:
            pass


def covering(words: list[tuple[bytes, bool]]) -> list[tuple[bytes, bool]]:
    """The literals (bytes, ignore case) worth searching for: a literal that holds another one
    is left out, as every line holding it holds the other (`CUDA error: out of memory` and
    `CUDA error`), unless only it ignores case; so are repeats, and other cases of a literal
    that ignores case. Same lines found, fewer literals to search for (the rule pack's 329
    are 257: a quarter of the prefilter's time)."""
    uniq = list(dict.fromkeys(words))
    if any(b"\0" in w for w, _ in uniq):
        return uniq  # the separator below: keep every literal
    text, low, starts = _joined(uniq)  # each literal searched for in all of them at once
    first_case: dict[bytes, int] = {}  # lower case -> the first case-free literal of it
    for k, (w, ci) in enumerate(uniq):
        if ci:
            first_case.setdefault(w.lower(), k)
    held = [False] * len(uniq)
    for k, (w, ci) in enumerate(uniq):
        if ci and first_case[w.lower()] != k:
            held[k] = True  # another case of one kept
            continue
        hay, needle = (low, w.lower()) if ci else (text, w)
        i = hay.find(needle)
        while i >= 0:
            o = bisect_right(starts, i) - 1  # the literal it was found in
            if o != k and (ci or not uniq[o][1]):  # an exact literal never holds a case-free one
                held[o] = True
            i = hay.find(needle, i + 1)
    return [u for u, h in zip(uniq, held) if not h]


def _joined(words: list[tuple[bytes, bool]]) -> tuple[bytes, bytes, list[int]]:
    """The literals joined by NULs (to look for one in all of them at once), that in lower
    case, and where each starts (bisect a find's offset to the literal it fell in)."""
    text = b"\0".join(w for w, _ in words)
    starts = []
    at = 0
    for w, _ in words:
        starts.append(at)
        at += len(w) + 1
    return text, text.lower(), starts


def _hs_literal(w: bytes) -> bytes:
    """A literal as a Hyperscan expression (every non-alphanumeric byte escaped)."""
    return b"".join(bytes([c]) if (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122) else b"\\x%02x" % c for c in w)

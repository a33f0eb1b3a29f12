"""Lining the ranks' flight-recorder dumps up: which rank never joined, or joined differently.

Per process group, each rank's entries are keyed by the collective's sequence id, which every
member numbers alike. The evidence is presence: a member whose dump has no entry for a
sequence id that other members entered never issued that collective. Neither `state` (gloo
leaves every entry `scheduled`) nor `pg_status` (it reports a timed-out collective as
completed) is trusted.

- A *hole* is the first sequence id of a group that not every dumped member entered (the
  members without it are missing there), or that every member entered but not alike (another
  op, other input sizes or dtypes: the odd rank out is the minority; an even split names
  nobody). A rank's dump is a ring of its newest entries: below the oldest entry any member
  still holds, nothing is compared.
- Holes cause holes. A rank stuck in one group's collective never reaches the next collective
  of the others, so it is missing there too: a rank whose own last entry is a hole's collective
  (it entered and waited) is that hole's victim where it is missing elsewhere. The culprits are
  the missing ranks that are not waiting in any hole: they stopped outside every collective
  (a sleep, a data-loader stall, another code path). Their hole is the verdict. Such a rank is
  missing from several holes (its subgroup's and then the world's, which the other half reached);
  the one whose missing ranks ALL stopped outside collectives is the cause, a hole that also
  lacks ranks waiting elsewhere is an effect (which group's members entered first is a race
  and decides only between equals). A rank whose last collective no other dump recorded is
  waiting too (in a group whose other members no dump shows). When every
  missing rank waits somewhere (ranks waiting in each other's collectives), the hole whose
  collective was issued first is.
- Members: pg_config's list where a dump has one (the default group is listed under the name
  `''`, its entries say `'0'`); else the ranks whose dumps name the group; for the default
  group, every rank up to the highest dumped one. A member with no dump is said so: with no
  hole among the dumps, it is the suspect, on weaker evidence (`absent_dump`).
- Point-to-point ops pair two ranks, not a group: they are not lined up here.
"""

from __future__ import annotations

from collections import Counter
from typing import Optional

from slurmdoc.traces.model import TraceVerdict
from slurmdoc.traces.read import Dump, Entry, TraceSet, frames_of

DEFAULT = "0"


def _is_default(name: str, desc: str) -> bool:
    return name == DEFAULT or desc == "default_pg"


class _Group:
    def __init__(self, name: str) -> None:
        self.name = name
        self.desc = ""
        self.by_rank: dict[int, dict[int, Entry]] = {}
        self.listed: set[int] = set()


def _groups(dumps: dict[int, Dump]) -> dict[str, _Group]:
    groups: dict[str, _Group] = {}
    for rank, d in dumps.items():
        for e in d.entries:
            if e.p2p:
                continue
            g = groups.get(e.pg)
            if g is None:
                g = groups[e.pg] = _Group(e.pg)
            if e.desc and (not g.desc or g.desc == "undefined"):
                g.desc = e.desc
            g.by_rank.setdefault(rank, {})[e.seq] = e
    for d in dumps.values():
        for key, ranks in d.groups.items():
            if not ranks:
                continue  # listed with no ranks (subgroups' dumps list the default group so)
            name = DEFAULT if key == "" else key
            if name in groups:
                groups[name].listed.update(ranks)
    top = max(dumps) if dumps else -1
    for g in groups.values():
        if not g.listed and _is_default(g.name, g.desc):
            g.listed.update(range(top + 1))  # the world: every rank up to the highest dumped
        # a rank that dumped but never entered this group is a member only if listed
        for r in g.listed:
            if r in dumps:
                g.by_rank.setdefault(r, {})
    return groups


def _members(g: _Group) -> list[int]:
    return sorted(g.listed | set(g.by_rank))


class _Hole:
    def __init__(self, g: _Group, seq: int, missing: list[int], present: list[int], odd: Optional[dict] = None) -> None:
        self.g, self.seq, self.missing, self.present, self.odd = g, seq, missing, present, odd
        first = [g.by_rank[r][seq] for r in present]
        self.entry = min(first, key=lambda e: e.created_ns)
        counts = Counter((e.op, e.sizes) for e in first)
        self.op, self.sizes = counts.most_common(1)[0][0]


def _holes(groups: dict[str, _Group]) -> list[_Hole]:
    out = []
    for g in groups.values():
        dumped = {r: s for r, s in g.by_rank.items()}
        entered = [s for s in dumped.values() if s]
        if len(dumped) < 2 or not entered:
            continue
        lo = max(min(s) for s in entered)  # every member's ring still holds this and later
        hi = max(max(s) for s in entered)
        for seq in range(lo, hi + 1):
            present = sorted(r for r, s in dumped.items() if seq in s)
            if not present:
                continue
            missing = sorted(r for r, s in dumped.items() if seq not in s)
            if missing:
                out.append(_Hole(g, seq, missing, present))
                break
            e0 = dumped[present[0]][seq]
            if all(_same(e0, dumped[r][seq]) for r in present):
                continue
            odd = _odd_one(g, seq, present)
            if odd is not None:
                out.append(_Hole(g, seq, [], present, odd))
                break
    return out


def _same(a: Entry, b: Entry) -> bool:
    return a.op == b.op and a.sizes == b.sizes and a.dtypes == b.dtypes


def _odd_one(g: _Group, seq: int, present: list[int]) -> Optional[dict]:
    """The member that entered collective `seq` unlike the others, as a mismatch record."""
    for fld, key in (("op", lambda e: e.op), ("sizes", lambda e: e.sizes), ("dtypes", lambda e: e.dtypes)):
        vals = {r: key(g.by_rank[r][seq]) for r in present}
        counts = Counter(vals.values())
        if len(counts) < 2:
            continue
        (common, n1), (_, n2) = counts.most_common(2)
        odd = sorted(r for r, v in vals.items() if v != common)
        if n1 == n2:
            return {"rank": None, "ranks": odd + sorted(r for r in present if r not in odd), "field": fld, "expected": None, "got": None}
        r = odd[0]
        return {"rank": r, "ranks": odd, "field": fld, "expected": _plain(common), "got": _plain(vals[r])}
    return None


def _plain(v):
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


def _last(d: Optional[Dump]) -> Optional[Entry]:
    if d is None:
        return None
    coll = [e for e in d.entries if not e.p2p]
    return max(coll, key=lambda e: (e.created_ns, e.seq)) if coll else None


def _user_frames(e: Entry, n: int = 5) -> list[str]:
    """The entry's innermost frames in the job's own code (slurmdoc.frames.is_library says
    what is the installation's), or all of them when none is."""
    from slurmdoc.frames import is_library

    frames = frames_of(e)
    own = [f for f in frames if f[0] and not is_library(f[0])]
    return [f"{file}:{line} in {name}" for file, line, name in (own or frames)[:n]]


def analyze(ts: TraceSet) -> TraceVerdict:
    dumps = ts.dumps
    groups = _groups(dumps)
    holes = _holes(groups)
    dumped = sorted(dumps)
    world = next((g for g in groups.values() if _is_default(g.name, g.desc)), None)
    members_all = sorted(set(dumped) | (set(_members(world)) if world else set()))
    absent = [r for r in members_all if r not in dumps]
    warnings = list(ts.warnings)

    # which hole is each rank waiting in (its own last collective is that hole's collective)
    waiting_in: dict[int, Optional[_Hole]] = {}
    lasts: dict[int, Optional[Entry]] = {}
    for h in holes:
        for r in h.present:
            if r not in lasts:
                lasts[r] = _last(dumps.get(r))
            last = lasts[r]
            if last is not None and last.pg == h.g.name and last.seq == h.seq:
                waiting_in[r] = h
    # a rank whose last collective no other dump recorded waits in it as well, in a group whose
    # other members no dump shows (a subgroup whose hung member stopped before its first
    # collective there never names the group): it is not free either
    holding = {rank: {g.name: set(g.by_rank.get(rank, ())) for g in groups.values()} for rank in dumped}
    for r in dumped:
        if r in waiting_in:
            continue
        last = _last(dumps[r])
        if last is not None and not last.p2p and not any(
            last.seq in holding[o].get(last.pg, ()) for o in dumped if o != r
        ):
            waiting_in[r] = None  # type: ignore[assignment]

    chosen: Optional[_Hole] = None
    culprits: list[int] = []
    # a hole some of whose missing ranks wait in another hole is (at least partly) that hole's
    # effect: holes whose missing ranks all stopped outside every collective come first, and
    # only then the time the first member entered (a race between groups in a real run)
    for h in sorted(holes, key=lambda h: (sum(r in waiting_in for r in h.missing), h.entry.created_ns)):
        if h.odd is not None:
            # every member entered, one of them unlike the others: that is the cause (an even
            # split names nobody)
            chosen, culprits = h, list(h.odd["ranks"]) if h.odd["rank"] is not None else []
            break
        free = [r for r in h.missing if r not in waiting_in]
        if free:
            chosen, culprits = h, free
            break
    if chosen is None and holes:
        warnings.append("every missing rank waits in another group's collective: collectives issued in a different order?")
        chosen = min(holes, key=lambda h: h.entry.created_ns)
        culprits = list(chosen.missing) if chosen.odd is None else ([chosen.odd["rank"]] if chosen.odd["rank"] is not None else [])

    if chosen is None:
        if absent and dumped:
            # no hole among the dumps: the ranks that left none are the suspects
            tail = _last(dumps[dumped[0]])
            return TraceVerdict(
                kind="missing", culprits=absent, evidence="absent_dump",
                pg=tail.pg if tail else DEFAULT, pg_desc=(world.desc if world else "") or "default_pg",
                members=members_all, seq=tail.seq if tail else None, op=tail.op if tail else None,
                sizes=_plain(tail.sizes) if tail else None, missing_ranks=absent, waiting_ranks=dumped,
                ranks_dumped=dumped, absent_dumps=absent, files=ts.files, warnings=warnings,
            )
        return TraceVerdict(kind="consistent" if dumped else "undecided", members=members_all, ranks_dumped=dumped,
                            absent_dumps=absent, files=ts.files, warnings=warnings)

    g = chosen.g
    last = None
    if culprits:
        e = _last(dumps.get(culprits[0]))
        if e is not None:
            last = {"rank": culprits[0], "pg": e.pg, "seq": e.seq, "op": e.op, "frames": _user_frames(e)}
    mismatch = None
    if chosen.odd is not None:
        mismatch = {k: chosen.odd[k] for k in ("rank", "field", "expected", "got")}
    members = _members(g)
    return TraceVerdict(
        kind="mismatch" if chosen.odd is not None else "missing",
        culprits=culprits,
        evidence="dump",
        pg=g.name,
        pg_desc=g.desc or ("default_pg" if g.name == DEFAULT else ""),
        members=members,
        seq=chosen.seq,
        op=chosen.op,
        sizes=_plain(chosen.sizes),
        missing_ranks=chosen.missing,
        mismatch=mismatch,
        waiting_ranks=[r for r in chosen.present if r not in culprits],
        culprit_last=last,
        ranks_dumped=dumped,
        absent_dumps=absent,
        files=ts.files,
        warnings=warnings,
    )

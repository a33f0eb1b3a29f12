"""Stage 6 of the diagnosis: explanation. The chosen root becomes the RootCause model
(its ranks, node, the evidence lines behind it, refinements by other findings, the
remediation, filled by advice.py from the rule's templates and the facts); the other
findings become symptoms; one verdict line says it all.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Optional

from slurmdoc.diagnosis.advice import facts_of, fill_field, label_of, remediation
from slurmdoc.diagnosis.findings import Collector, Finding, Group, before, nonzero
from slurmdoc.diagnosis.hang import Stall
from slurmdoc.diagnosis.ladder import level_of
from slurmdoc.diagnosis.layout import Layout
from slurmdoc.diagnosis.liveness import Liveness
from slurmdoc.diagnosis.order import named_elsewhere
from slurmdoc.diagnosis.ranks import describe, parse_tasks, ranges, to_int
from slurmdoc.models import Handled, RootCause, Symptom
from slurmdoc.slurm.exitcodes import SIGNAL_CATEGORY

# said of a timeout's reporters when the log names no rank they waited for (the dumps may)
NOT_NAMED = "the rank they waited for is not named in the log"
MASK = re.compile(r"0x[0-9a-fA-F]+|\d+")


# Windows status codes a crashed child exits with (NTSTATUS): access violation, stack
# overflow, stack buffer overrun; all native crashes
NATIVE_CRASH_CODES = {0xC0000005, 0xC00000FD, 0xC0000409}
EXIT_STATUS = re.compile(r"(?:exit(?:ed with)? (?:status|code)|exitcode|return(?:ed)? code|returncode)\s*[:=]?\s*(-?\d+)", re.IGNORECASE)


def exit_category(exitcode: Optional[str]) -> Optional[str]:
    """The category an exit status points to when it is all there is: a signal (`-9`, or a
    shell's 128+9 = 137) by its usual meaning (slurm.exitcodes), a native crash's Windows
    status, else None."""
    code = to_int(exitcode)
    if code is None:
        return None
    if code in NATIVE_CRASH_CODES:
        return "segfault"
    sig = -code if code < 0 else code - 128 if 128 < code < 160 else None
    return SIGNAL_CATEGORY.get(sig) if sig is not None else None


def rank_source_of(lay: Layout, refs, rank: Optional[int]) -> Optional[str]:
    """How the rank was learnt: the most trusted of the refs that resolve to it."""
    if rank is None:
        return None
    order = ("prefix", "file", "launcher", "message")
    kinds = [r.source_kind() for r in refs if lay.resolve(r) == rank]
    return min(kinds, key=order.index) if kinds else None


def handled_of(c: Collector, lay: Layout, live: Liveness, found: list[Finding]) -> list[Handled]:
    out = []
    # in the order they happened (by time where lines carry one), whatever the interleaving
    found = sorted(found, key=lambda f: (f.ts is None, f.ts or datetime.min, lay.ranks(f.refs)[:1], f.event.first.source, f.lineno()))
    for f in found[:100]:
        ranks = lay.ranks(f.refs)
        out.append(
            Handled(
                category=f.rule.category, rule_id=f.rule.id, rank=ranks[0] if ranks else None, source=c.src(f),
                message=f.message()[:300], evidence=level_of(f), resumed_at=live.resumed(f) or "",
            )
        )
    return out


def group_key(f: Finding) -> tuple:
    return (f.rule.id, MASK.sub("#", f.message()))


def root_model(c: Collector, lay: Layout, root: Finding, promoted: bool, total: int, all_ranks: list[int], rank_host: dict[int, str], stragglers: list[int], ended_by: Optional[Finding] = None, stall: Optional[Stall] = None):
    key = group_key(root)
    group = [f for f in c.causes if group_key(f) == key] if not promoted else [root]
    ranks = lay.ranks(r for f in group for r in f.refs)
    own = lay.ranks(root.refs)
    rank = own[0] if own else None
    rank_source = rank_source_of(lay, root.refs, rank)
    evidence: list[str] = []
    reporters: list[int] = []
    if stragglers:
        if stall is not None and stall.kind != "known":
            reporters = stall.others
            evidence.extend(stall.evidence)
        else:
            reporters = lay.ranks(c.symptoms[root.rule.id].refs.values()) if root.rule.id in c.symptoms else []
            evidence.append(
                f"{describe(reporters)} reported it (first at {c.src(root)}); {describe(stragglers)} never did"
            )
            if stall is not None:
                evidence.extend(stall.evidence)
        ranks = stragglers
        rank = stragglers[0]
        rank_source = "message" if rank in parse_tasks(root.captures.get("straggler") or "") else "prefix"
        if ended_by is not None:
            evidence.append(f"then {c.src(ended_by)}: {ended_by.message()[:200]}")
    if promoted and not stragglers and root.rule.spec.missing_rank_is_root and own:
        # the reporters of a timeout are not its cause; no rank stalled visibly
        evidence.append(f"reported by {describe(own)}; {NOT_NAMED}")
        rank, ranks, rank_source = None, [], None
    elif rank is None and not stragglers and len(group) == 1:
        # the error text names no rank (printed before torch set up its prefix, or by
        # native code): take it from the exit evidence when that names exactly one
        named = named_elsewhere(c, lay, root)
        if named is not None:
            rank, by = named
            ranks = [rank]
            rank_source = rank_source_of(lay, by.refs, rank)
            evidence.append(f"rank {rank} from {c.src(by)}: {by.message()[:200]}")
    node = root.node or (rank_host.get(rank) if rank is not None else None)
    if node is None and rank is None and root.event.first.who.label is not None:
        node = lay.node_host.get((root.event.first.source, root.event.first.who.label))  # an agent's node
    if stragglers and rank is not None:
        # the straggler's own host, not the host of the line that revealed it (a
        # reporter's prefix, the job's batch host in a CANCELLED line)
        hosts = set(rank_host.values())
        node = rank_host.get(rank) or (root.node if len(hosts) <= 1 and (not hosts or root.node in hosts or root.rule.spec.attribution == "text") else None)
    rule = root.rule
    caps = dict(root.captures)
    exit_code: Optional[str] = None
    level = level_of(root)
    category = rule.category
    # refine: a bare SIGKILL next to OOM-killer evidence is a host OOM, and so on
    for cat in rule.spec.refine_with:
        other = c.categories.get(cat)
        if other is not None and other is not root:
            evidence.append(f"{c.src(other)}: {other.message()}")
            for k, v in other.captures.items():
                caps.setdefault(k, v)
            rule = other.rule
            category = rule.category
            break
    if category in ("unknown", "python_exception") and level in ("launcher", "exit"):
        # only an exit status: a signal says what kind of end it was (a launcher's own
        # exception is no Python error of the job's)
        code = caps.get("exitcode")
        if code is None and (m := EXIT_STATUS.search(root.message())):
            code = m.group(1)
        category = exit_category(code) or "unknown"
        exit_code = code if exit_category(code) else None
    # context that explains this kind of failure (NCCL on TCP sockets behind a timeout)
    explained = [f for f in c.contexts if rule.category in f.rule.spec.explains][:3]
    for f in explained:
        evidence.append(f"{c.src(f)}: {f.message()[:200]}")
    frame = root.frame() if not stragglers else None  # the reporter's frame says nothing of the straggler
    if frame:
        caps.setdefault("frame", frame)
    processes = len(group)
    every = False
    if not ranks and processes > 1 and processes == total:
        ranks = list(all_ranks)  # as many identical failures as the job has ranks: all of them
        every = True
    elif not ranks and processes > 1 and total == 0:
        # no prefixes at all (per-node files), but the scheduler names the tasks that
        # failed: as many identical errors as failed tasks means every one of them
        failed = sorted({r for f in c.exits if nonzero(f) for r in lay.ranks(f.refs)})
        if len(failed) == processes:
            ranks, every = failed, True
    everyone = (total > 1 and len(ranks) == total) or (every and len(ranks) > 1)
    phase = root.phase() if not stragglers else None
    seen = [cat for cat, f in c.categories.items() if f.rule.role != "context"]
    facts = facts_of(rank, ranks, total, everyone, phase, c.facts, promoted, seen)
    if "peak_rss" not in facts:
        # the log's own word on peak memory (a capture with that meaning, in the root's or any
        # context line: GNU time's `Maximum resident set size`, the kernel's anon-rss)
        kbs = [to_int(f.captures.get("peak_rss_kb")) for f in (root, *c.contexts)] + [to_int(caps.get("peak_rss_kb"))]
        kb = max((k for k in kbs if k is not None and k > 0), default=None)
        if kb is not None:
            facts["peak_rss"] = fill_field("size(x)", {"x": kb * 1024})
            facts["peak_rss_from"] = "the log"
    rem = remediation(
        lay.total, rule, caps, facts=facts, rank=rank, ranks=ranks, node=node, source=c.src(root), message=root.message(), count=len(group),
        stragglers=ranges(stragglers) if stragglers else None, reporters=ranges(reporters) if reporters else None,
        progress=stall.values.get("progress") if stall else None, last_line=stall.values.get("last_line") if stall else None,
    )
    for f in explained:
        extra = remediation(lay.total, f.rule, dict(f.captures), facts=facts, rank=rank, ranks=ranks, node=node, source=c.src(f), message=f.message(), count=1)
        rem = rem.model_copy(update={"fix": rem.fix + (extra.summary,) + extra.fix})
    ev = root.event
    tb = tuple(ev.lines)
    model = RootCause(
        category=category,
        rule_id=rule.id,
        rank=rank,
        node=node,
        source=c.src(root),
        message=root.message(),
        traceback=tb,
        timestamp=root.ts.isoformat() if root.ts else None,
        remediation=rem.as_text(),
        evidence=level,
        rank_source=rank_source if rank is not None else None,
        title=rule.spec.title,
        ranks=tuple(ranks),
        all_ranks=everyone,
        remediation_parts=rem,
        captures={k: v for k, v in sorted(caps.items())},
        evidence_lines=tuple(evidence),
        promoted=promoted,
        frame=frame,
        raised_at=root.user_frame() if frame else None,
        raised_in=frame,
        processes=processes,
        stragglers=tuple(stragglers),
        job_level=rank is None and not ranks and rule.spec.attribution == "text",
        traceback_lines_dropped=ev.truncated,
        label=label_of(rule, caps, exit_code),
    )
    return model, key


def symptoms_of(c: Collector, lay: Layout, root: Optional[Finding], root_key, root_ranks: set[int], handled: list[Finding] = ()) -> list[Symptom]:
    out: list[Symptom] = []
    # other causes that are not the root: they happened, but after it
    by_rule: dict[str, Group] = {}
    outlived = {id(f) for f in handled}
    for f in c.causes:
        if f is root or id(f) in outlived or (root_key is not None and group_key(f) == root_key):
            continue
        g = by_rule.get(f.rule.id)
        if g is None:
            g = by_rule[f.rule.id] = Group(f)
        elif before(f, g.first):
            g.first = f  # the group shows its earliest finding, whatever order they completed in
        g.count += 1
        for r in f.refs:
            g.refs.setdefault(r.key(), r)
        if f.node:
            g.nodes.add(f.node)
    groups = list(by_rule.items()) + [
        (rid, g) for rid, g in c.symptoms.items() if not (root is not None and g.first is root and g.count == 1)
    ]
    for rid, g in groups:
        if id(g.first) in outlived:
            continue  # listed as handled
        ranks = lay.ranks(g.refs.values())
        f = g.first
        if f.rule.spec.exit_evidence and ranks and set(ranks) <= root_ranks:
            continue  # the root rank's own exit status, reported by its launcher
        out.append(
            Symptom(
                category=f.rule.category,
                rule_id=rid,
                ranks=tuple(ranks),
                count=g.count,
                first_source=c.src(f),
                title=f.rule.spec.title,
                role=f.rule.role,
                rank_ranges=ranges(ranks),
                nodes=tuple(sorted(g.nodes)[:64]),
                message=f.message()[:300],
                first_time=f.ts.isoformat() if f.ts else None,
            )
        )
    out.sort(key=lambda s: (0 if s.role == "cause" else 1, -len(s.ranks), -s.count, s.rule_id))
    return out



def named(root: RootCause) -> str:
    """The category id, with the rule's words when it has some: `segfault (SIGABRT, abort)`."""
    return f"{root.category} ({root.label})" if root.label else root.category


def no_failure_line(total: int, lines: int = 0, files: int = 0, printers: int = 0, reached: Optional[str] = None) -> str:
    """What a run with no failure showed: its ranks when lines told them apart; else what
    was read, and why no rank is counted (a count of 0 would claim no rank ran)."""
    where = f"{lines} line{'s' if lines != 1 else ''}" + (f" from {files} files" if files > 1 else "")
    progress = f"; progress reached {reached}" if reached else ""
    if total > 0 or (lines == 0 and printers == 0):
        return f"No failure found: {total} rank{'s' if total != 1 else ''} seen in {where}{progress}."
    return f"No failure found in {where}: no line names its rank (no rank prefixes, no per-rank file names), so ranks are not counted{progress}."


def verdict_line(root: Optional[RootCause], symptoms: list[Symptom], total: int, **seen) -> str:
    if root is None:
        return no_failure_line(total, **seen)
    if root.evidence == "flight_recorder" and root.collective is not None:
        c = root.collective
        op = f"{c.op or 'collective'} #{c.seq}" if c.seq is not None else (c.op or "a collective")
        did = "entered {op} differently" if c.mismatch else "never entered {op}"
        weak = ", its dump missing" if c.dump_evidence == "absent_dump" else ""
        who = f"{describe(root.ranks or (root.rank,))} (flight recorder: {did.format(op=op)}{weak})"
    elif root.stragglers:
        who = f"{describe(root.stragglers)} (straggler)"
    elif len(root.ranks) > 1:
        who = describe(root.ranks, total)
    elif root.rank is not None:
        who = f"rank {root.rank}"
    elif root.processes > 1:
        who = f"{root.processes} processes alike (ranks not shown in the log)"
    elif root.job_level:
        who = "the whole job"
    else:
        who = "an unknown rank"
    where = (f" ({root.node})" if root.job_level else f" on {root.node}") if root.node else ""
    head = f"{named(root)} on {who}{where} at {root.source}"
    if root.promoted:
        head = f"No root-cause error found; earliest failure evidence: {head}"
    sym = [s for s in symptoms if s.role != "context"]
    if sym:
        own = set(root.ranks) | ({root.rank} if root.rank is not None else set())
        affected = {r for s in sym for r in s.ranks} - own
        parts = ", ".join(f"{s.category} x{s.count}" for s in sym[:4])
        others = f"{len(affected)} other rank{'s' if len(affected) != 1 else ''}" if affected else "the launcher"
        head += f"; {others} then failed or showed symptoms ({parts}{', ...' if len(sym) > 4 else ''})"
    return head + "."

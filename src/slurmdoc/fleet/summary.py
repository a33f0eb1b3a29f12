"""The fleet summary, built one job record at a time: counters and bounded lists only, never
every job. The same records in the same order give the same summary, byte for byte (that is
what makes `scan --shard` + `scan merge` equal to one scan)."""

from __future__ import annotations

from collections import Counter

from slurmdoc.fleet.record import HARDWARE, UNCLASSIFIED, JobRecord

MAX_SIGNATURES = 10_000  # distinct signatures counted; the rest are counted together
MAX_NODES = 10_000
SAMPLE_JOBS = 5  # job ids kept per signature and per suspect node
TOP = 20  # signatures and suspects shown
NOT_A_NODE = ("localhost", "127.0.0.1", "::1")  # what a launcher says when it does not know the host


def _label(r: JobRecord) -> str:
    return r.job_id if r.job_id is not None else r.where


def _share(n: int, of: int) -> float:
    return round(n / of, 4) if of else 0.0


class FleetSummary:
    def __init__(self, suspect_min: int = 2, top: int = TOP) -> None:
        self.suspect_min = suspect_min
        self.top = top
        self.status: Counter = Counter()
        self.category: Counter = Counter()
        self.evidence: Counter = Counter()
        self.signatures: dict[str, dict] = {}
        self.other_signatures = 0
        self.days: dict[str, Counter] = {}
        self.no_time = 0
        self.nodes: dict[str, dict] = {}
        self.hardware_without_node = 0

    def add(self, r: JobRecord) -> None:
        self.status[r.status] += 1
        if r.status != "failed":
            return
        cat = r.category or "unknown"
        self.category[cat] += 1
        if r.evidence:
            self.evidence[r.evidence] += 1
        sig = r.signature or cat
        s = self.signatures.get(sig)
        if s is None and len(self.signatures) < MAX_SIGNATURES:
            s = self.signatures[sig] = {"count": 0, "category": cat, "jobs": [], "first": r.day, "last": r.day}
        if s is None:
            self.other_signatures += 1
        else:
            s["count"] += 1
            if len(s["jobs"]) < SAMPLE_JOBS:
                s["jobs"].append(_label(r))
            if r.day:
                s["first"] = min(s["first"] or r.day, r.day)
                s["last"] = max(s["last"] or r.day, r.day)
        if r.day:
            self.days.setdefault(r.day, Counter())[cat] += 1
        else:
            self.no_time += 1
        if cat in HARDWARE:
            if not r.node or r.node in NOT_A_NODE:
                self.hardware_without_node += 1
            elif r.node in self.nodes or len(self.nodes) < MAX_NODES:
                n = self.nodes.setdefault(r.node, {"count": 0, "categories": Counter(), "jobs": [], "first": None, "last": None})
                n["count"] += 1
                n["categories"][cat] += 1
                if len(n["jobs"]) < SAMPLE_JOBS:
                    n["jobs"].append(_label(r))
                if r.day:
                    n["first"] = min(n["first"] or r.day, r.day)
                    n["last"] = max(n["last"] or r.day, r.day)

    def suspects(self) -> list[dict]:
        out = []
        ranked = sorted(self.nodes.items(), key=lambda kv: (-kv[1]["count"], kv[0]))
        for node, n in ranked:
            if n["count"] < self.suspect_min:
                continue
            cats = ", ".join(f"{c} x{k}" for c, k in sorted(n["categories"].items(), key=lambda kv: (-kv[1], kv[0])))
            reason = f"slurmdoc: {n['count']} hardware-looking failures ({cats}); jobs {','.join(n['jobs'])}"
            out.append({
                "node": node, "count": n["count"], "categories": dict(sorted(n["categories"].items())),
                "jobs": list(n["jobs"]), "first": n["first"], "last": n["last"],
                "drain": f"scontrol update nodename={node} state=drain reason=\"{reason}\"",
            })
            if len(out) >= self.top:
                break
        return out

    def to_dict(self) -> dict:
        failed = self.status.get("failed", 0)
        jobs = sum(self.status.values())
        unclassified = sum(self.category.get(c, 0) for c in UNCLASSIFIED)
        sigs = sorted(self.signatures.items(), key=lambda kv: (-kv[1]["count"], kv[0]))[: self.top]
        return {
            "jobs": jobs,
            "failed": failed,
            "no_failure": self.status.get("no_failure", 0),
            "errors": self.status.get("error", 0),
            "categories": [{"category": c, "count": k, "share": _share(k, failed)}
                           for c, k in sorted(self.category.items(), key=lambda kv: (-kv[1], kv[0]))],
            "signatures": [{"signature": s, "count": v["count"], "share": _share(v["count"], failed),
                            "category": v["category"], "jobs": list(v["jobs"]), "first": v["first"], "last": v["last"]}
                           for s, v in sigs],
            "distinct_signatures": len(self.signatures) + (1 if self.other_signatures else 0),
            "signatures_not_counted": self.other_signatures,
            "per_day": [{"day": d, "failed": sum(c.values()), "categories": dict(sorted(c.items()))}
                        for d, c in sorted(self.days.items())],
            "failed_without_time": self.no_time,
            "node_suspects": self.suspects(),
            "hardware_failures_without_node": self.hardware_without_node,
            "unclassified": {"count": unclassified, "rate": _share(unclassified, failed),
                             "unknown": self.category.get("unknown", 0),
                             "python_exception": self.category.get("python_exception", 0)},
            "evidence": dict(sorted(self.evidence.items())),
        }

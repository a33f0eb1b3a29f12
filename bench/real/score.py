"""Score slurmdoc on the real-log set: logs from public issue threads, labelled by hand.

    python bench/real/score.py                    # the dev split, figures only
    python bench/real/score.py --misses           # and every miss, one line each
    python bench/real/score.py --split holdout3   # a held-out split (the honest measure)
    python bench/real/score.py --split all --json # machine-readable figures

The labels (bench/real/labels.yaml, and any labels-*.yaml in the logs folder) hold each log's
source URL, the search that found it and what is true about it: status, category, global root
rank (or null), a substring of the root-cause line. The texts themselves are not in this
repository (they are other people's words): they live in a folder outside it, by default
/work/reallogs or $SLURMDOC_REAL_LOGS, as <split>/<id>.log; re-collect them from the URLs when
a machine is new. A label is written before slurmdoc is run on its log.

Figures:
- category: the root cause's category equals the label's, over failing logs;
- rank: the root rank equals the label's, over failing logs whose label names a rank;
- line: the line at the reported source (or the reported message) contains the label's
  root-line substring, over failing logs; a label whose failure is printed as one event on
  two lines, where labellers of the same form named either (a server's warning-level tries
  and the error-level line that ends them; a metrics line with a nan gradient norm and the
  next one whose loss shows the weights gone), names the other in `root_line_also`, and
  either counts;
- no-failure on failing logs and failures on healthy logs: the two answers that must not happen.
This is a benchmark, not a test: it prints figures and exits 0 unless it cannot run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_LOGS = Path(os.environ.get("SLURMDOC_REAL_LOGS", "/work/reallogs"))


class LabelError(Exception):
    """A label file that cannot be read as a list of labels with ids."""


def load_labels(paths: list[Path]) -> list[dict]:
    by_id: dict[str, dict] = {}
    for p in paths:
        try:
            entries = yaml.safe_load(p.read_text(encoding="utf-8")) or []
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise LabelError(f"{p}: cannot be read as labels: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        if not isinstance(entries, list) or not all(isinstance(e, dict) and "id" in e for e in entries):
            raise LabelError(f"{p}: not a list of labels, each with an id")
        for e in entries:
            by_id[str(e["id"])] = e
    return sorted(by_id.values(), key=lambda e: str(e["id"]))


def norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().lower()


def line_at(path: Path, lineno: int) -> str:
    with path.open("rb") as f:
        for i, raw in enumerate(f, 1):
            if i == lineno:
                return raw.decode("utf-8", "replace")
    return ""


def run_one(path: Path) -> dict:
    """slurmdoc's JSON for one log, in-process through the library API."""
    from slurmdoc.api import diagnose

    try:
        d = diagnose([str(path)])
    except Exception as e:  # a crash is a wrong answer, and worth seeing
        return {"error": f"{type(e).__name__}: {e}"}
    return d.model_dump(mode="json")


def judge(label: dict, got: dict, path: Path) -> dict:
    failing = label.get("status") == "failed"
    rc = got.get("root_cause") or {}
    status = got.get("status", "error")
    res = {"id": label["id"], "failing": failing, "status": status,
           "got_category": rc.get("category"), "got_rank": rc.get("rank"),
           "got_source": rc.get("source"), "error": got.get("error")}
    if not failing:
        res["healthy_ok"] = status == "no_failure"
        return res
    res["category_ok"] = rc.get("category") == label.get("category")
    if label.get("rank") is not None:
        res["rank_ok"] = rc.get("rank") == label["rank"]
    want = label.get("root_line")
    if want:
        also = label.get("root_line_also") or []
        wants = [want, *([also] if isinstance(also, str) else also)]
        text = ""
        src = rc.get("source") or ""
        m = re.match(r"(.*):(\d+)$", src)
        if m:
            text = line_at(path, int(m.group(2)))
        res["line_ok"] = any(norm(w) in norm(text) or norm(w) in norm(rc.get("message") or "") for w in wants)
    res["no_failure"] = status != "failed"
    return res


def pct(n: int, d: int) -> str:
    return f"{100 * n / d:5.1f}% ({n}/{d})" if d else "   n/a"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", type=Path, default=DEFAULT_LOGS, help="folder holding <split>/<id>.log (default %(default)s)")
    ap.add_argument("--labels", type=Path, action="append", help="label file(s); default: bench/real/labels.yaml and LOGS/labels-*.yaml")
    ap.add_argument("--split", default="dev", help="a split named in the labels (dev, dev2, dev3, holdout3, ...) or all (every split but the held-out ones; default %(default)s)")
    ap.add_argument("--misses", action="store_true", help="list every miss")
    ap.add_argument("--json", action="store_true", help="print figures as JSON")
    args = ap.parse_args()

    label_files = args.labels or [p for p in [HERE / "labels.yaml", *sorted(args.logs.glob("labels-*.yaml"))] if p.exists()]
    if not label_files:
        print("score: no label files found", file=sys.stderr)
        return 2
    try:
        everything = load_labels(label_files)
    except LabelError as e:  # (a label file being written by someone else, say)
        print(f"score: {e}", file=sys.stderr)
        return 2
    # `all`: every development split, never a blind one (a held-out split is scored by name)
    labels = [e for e in everything if e.get("split") == args.split
              or (args.split == "all" and not str(e.get("split", "")).startswith("holdout"))]
    if not labels:
        known = sorted({str(e.get("split")) for e in everything})
        print(f"score: no labels of split {args.split!r} (splits: {', '.join(known)}, all)", file=sys.stderr)
        return 2
    results, missing = [], []
    t0 = time.perf_counter()
    for e in labels:
        path = args.logs / str(e.get("split", "dev")) / f"{e['id']}.log"
        if not path.exists():
            missing.append(e["id"])
            continue
        r = judge(e, run_one(path), path)
        r["repo"], r["launcher"], r["want_category"], r["want_rank"] = e.get("repo"), e.get("launcher"), e.get("category"), e.get("rank")
        results.append(r)
    secs = time.perf_counter() - t0

    fail = [r for r in results if r["failing"]]
    healthy = [r for r in results if not r["failing"]]
    ranked = [r for r in fail if "rank_ok" in r]
    lined = [r for r in fail if "line_ok" in r]
    figs = {
        "split": args.split, "logs": len(results), "failing": len(fail), "healthy": len(healthy),
        "repositories": len({r["repo"] for r in results}), "missing_texts": len(missing),
        "category": sum(r["category_ok"] for r in fail), "rank": sum(r["rank_ok"] for r in ranked), "ranked": len(ranked),
        "line": sum(r["line_ok"] for r in lined), "lined": len(lined),
        "no_failure_on_failing": sum(r["no_failure"] for r in fail),
        "failed_on_healthy": sum(not r["healthy_ok"] for r in healthy),
        "crashes": sum(1 for r in results if r.get("error")), "seconds": round(secs, 2),
    }
    if args.json:
        print(json.dumps(figs, indent=2))
    else:
        print(f"real-log set, split {args.split}: {len(results)} logs ({len(fail)} failing, {len(healthy)} healthy) "
              f"from {figs['repositories']} repositories, {secs:.1f} s")
        if missing:
            print(f"  {len(missing)} labelled logs have no text under {args.logs}: re-collect them from their URLs")
        print(f"  category              {pct(figs['category'], len(fail))}")
        print(f"  root rank             {pct(figs['rank'], len(ranked))}")
        print(f"  root line             {pct(figs['line'], len(lined))}")
        print(f"  'no failure' on failing logs   {figs['no_failure_on_failing']}")
        print(f"  failures on healthy logs       {figs['failed_on_healthy']} of {len(healthy)}")
        if figs["crashes"]:
            print(f"  crashes                        {figs['crashes']}")
        by_launcher = Counter((r["launcher"], r.get("category_ok", r.get("healthy_ok"))) for r in results)
        launchers = sorted({r["launcher"] for r in results}, key=str)
        print("  by launcher (right/total): " + ", ".join(
            f"{l} {by_launcher[(l, True)]}/{by_launcher[(l, True)] + by_launcher[(l, False)]}" for l in launchers))
    if args.misses:
        for r in results:
            bad = [k for k in ("category_ok", "rank_ok", "line_ok", "healthy_ok") if r.get(k) is False]
            if bad or r.get("error"):
                want = "no_failure" if not r["failing"] else f"{r['want_category']} rank {r['want_rank']}"
                got = r["status"] if r["status"] != "failed" else f"{r['got_category']} rank {r['got_rank']} at {r['got_source']}"
                print(f"MISS {r['id']:6} [{','.join(b[:-3] for b in bad)}] want {want}; got {got}" + (f"; {r['error']}" if r.get("error") else ""), file=sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Score slurmdoc on damaged copies of the real-log set: the cuts and rewrites a log suffers
between the job and the person who hands it to slurmdoc.

    python bench/real/damage.py                      # the dev split, every kind of damage
    python bench/real/damage.py --split dev4 --kinds tail0,noprefix --misses
    python bench/real/damage.py --split all --json

The logs are other people's (bench/real/score.py says where they live); nobody here wrote
them, so this measures the reader on text it was not built on. Each labelled log is
diagnosed as it is and after each kind of damage, written to a temporary file:

  tail0      the log from its root-cause line on (what is left when only the end was kept);
  tail5      the same, from five lines before it;
  fragment   five lines before the root-cause line to fifteen after it (a pasted excerpt);
  cut_end    from the start to three lines after the root-cause line (a log cut short);
  noprefix   every srun label (`3: `) and torchrun prefix (`[rank3]:`, `[default3]:`) taken off;
  stamped    a log collector's timestamp put in front of every line (`2026-01-05T10:00:00.000123Z `);
  lstrip     every line's leading blanks lost (a copy out of a web page);
  wrap100    every line longer than 100 characters hard-wrapped at 100;
  crlf       Windows line ends;
  colour     every line naming an error wrapped in an ANSI colour;
  gzip       the log compressed (slurmdoc reads .gz).

The cuts need the root-cause line, found by the label's `root_line` (the first line holding
it); a failing log whose root line is not found is left out of them. A healthy log gets
every rewrite and, for the cuts, its last half (it must stay healthy).
Figures per kind, over the logs it applies to: how often the category stays the label's,
how often it stays what slurmdoc said on the undamaged log, "no failure" on failing logs,
and failures on healthy ones. This is a benchmark, not a test: it prints figures and exits 0
unless it cannot run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from score import DEFAULT_LOGS, LabelError, load_labels, norm  # noqa: E402

Lines = list[str]
# the line index of the root cause (None for a healthy log) -> the damaged lines, or None
# when the kind does not apply
Damage = Callable[[Lines, Optional[int]], Optional[Lines]]

PREFIX = re.compile(r"^(?:\s*\d+: )?(?:\[(?:rank|default)\d+\]:\s?)*")
ERRORISH = re.compile(r"error|exception|traceback|killed|fault", re.IGNORECASE)


def _half(lines: Lines) -> Lines:
    return lines[len(lines) // 2:]


def tail(before: int) -> Damage:
    return lambda lines, at: lines[max(at - before, 0):] if at is not None else _half(lines)


def fragment(lines: Lines, at: Optional[int]) -> Optional[Lines]:
    return lines[max(at - 5, 0): at + 16] if at is not None else _half(lines)[:21]


def cut_end(lines: Lines, at: Optional[int]) -> Optional[Lines]:
    return lines[: at + 4] if at is not None else lines[: max(len(lines) // 2, 1)]


def each(f: Callable[[str], str]) -> Damage:
    return lambda lines, at: [f(line) for line in lines]


def _unprefixed(line: str) -> str:
    return PREFIX.sub("", line, count=1)


def _stamped(lines: Lines, at: Optional[int]) -> Lines:
    return [f"2026-01-05T10:{i // 6000 % 60:02d}:{i // 100 % 60:02d}.{i % 100:06d}Z {line}" for i, line in enumerate(lines)]


def _wrapped(lines: Lines, at: Optional[int]) -> Lines:
    out: Lines = []
    for line in lines:
        out.extend([line[i: i + 100] for i in range(0, len(line), 100)] or [""])
    return out


def _coloured(line: str) -> str:
    return f"\x1b[31m{line}\x1b[0m" if ERRORISH.search(line) else line


KINDS: dict[str, Damage] = {
    "tail0": tail(0),
    "tail5": tail(5),
    "fragment": fragment,
    "cut_end": cut_end,
    "noprefix": each(_unprefixed),
    "stamped": _stamped,
    "lstrip": each(str.lstrip),
    "wrap100": _wrapped,
    "crlf": each(lambda s: s),  # written with \r\n
    "colour": each(_coloured),
    "gzip": each(lambda s: s),  # written compressed
}
CUTS = {"tail0", "tail5", "fragment", "cut_end"}


def root_index(lines: Lines, root_line: str) -> Optional[int]:
    want = norm(root_line)
    if not want:
        return None
    for i, line in enumerate(lines):
        if want in norm(line):
            return i
    return None


def diagnose(path: Path) -> tuple[str, Optional[str]]:
    """(status, category) of slurmdoc's answer, in-process; ("error", message) on a crash."""
    from slurmdoc.api import diagnose as run

    try:
        d = run([str(path)]).model_dump(mode="json")
    except Exception as e:  # a crash is a wrong answer, and worth seeing
        return "error", f"{type(e).__name__}: {e}"
    return d.get("status", "error"), (d.get("root_cause") or {}).get("category")


def write(tmp: Path, name: str, lines: Lines, kind: str) -> Path:
    text = ("\r\n" if kind == "crlf" else "\n").join(lines) + ("\r\n" if kind == "crlf" else "\n")
    data = text.encode("utf-8", "surrogateescape")
    if kind == "gzip":
        p = tmp / f"{name}.log.gz"
        p.write_bytes(gzip.compress(data, 6))
    else:
        p = tmp / f"{name}.log"
        p.write_bytes(data)
    return p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", type=Path, default=DEFAULT_LOGS, help="folder holding <split>/<id>.log (default %(default)s)")
    ap.add_argument("--split", default="dev", help="a split named in the labels, or all (default %(default)s)")
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds of damage (default: all)")
    ap.add_argument("--misses", action="store_true", help="list every log whose answer a kind of damage changed")
    ap.add_argument("--json", action="store_true", help="print figures as JSON")
    args = ap.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        print(f"damage: unknown kinds {', '.join(unknown)} (kinds: {', '.join(KINDS)})", file=sys.stderr)
        return 2
    files = [p for p in [HERE / "labels.yaml", *sorted(args.logs.glob("labels-*.yaml"))] if p.exists()]
    try:
        labels = [e for e in load_labels(files) if args.split == "all" or e.get("split") == args.split]
    except LabelError as e:
        print(f"damage: {e}", file=sys.stderr)
        return 2
    if args.split == "all":  # never the blind splits
        labels = [e for e in labels if not str(e.get("split", "")).startswith("holdout")]
    if not labels:
        print(f"damage: no labels of split {args.split!r}", file=sys.stderr)
        return 2

    t0 = time.perf_counter()
    rows: dict[str, dict] = {k: {"n": 0, "label": 0, "base": 0, "nofail": 0, "healthy": 0, "flagged": 0, "changed": []} for k in kinds}
    base_right = base_n = 0
    with tempfile.TemporaryDirectory(prefix="slurmdoc-damage-") as d:
        tmp = Path(d)
        for e in labels:
            src = args.logs / str(e.get("split", "dev")) / f"{e['id']}.log"
            if not src.exists():
                continue
            lines = src.read_bytes().decode("utf-8", "surrogateescape").splitlines()
            failing = e.get("status") == "failed"
            at = root_index(lines, str(e.get("root_line") or "")) if failing else None
            base = diagnose(src)
            if failing:
                base_n += 1
                base_right += base[1] == e.get("category")
            for k in kinds:
                if failing and k in CUTS and at is None:
                    continue
                damaged = KINDS[k](lines, at)
                if not damaged:
                    continue
                got = diagnose(write(tmp, f"{e['id']}-{k}", damaged, k))
                row = rows[k]
                if failing:
                    row["n"] += 1
                    row["label"] += got[1] == e.get("category")
                    row["base"] += got == base
                    row["nofail"] += got[0] != "failed"
                    if got[1] != e.get("category") and base[1] == e.get("category"):
                        row["changed"].append(f"{e['id']} {base[1]} -> {got[0] if got[0] != 'failed' else got[1]}")
                else:
                    row["healthy"] += 1
                    if got[0] != "no_failure":
                        row["flagged"] += 1
                        row["changed"].append(f"{e['id']} healthy -> {got[0] if got[0] != 'failed' else got[1]}")
    secs = time.perf_counter() - t0
    if args.json:
        print(json.dumps({"split": args.split, "failing": base_n, "undamaged_category": base_right, "seconds": round(secs, 1),
                          "kinds": {k: {x: v for x, v in r.items() if x != "changed"} | {"lost": len(r["changed"])} for k, r in rows.items()}}, indent=2))
        return 0
    print(f"real-log set, split {args.split}, damaged copies ({secs:.0f} s); undamaged: category right on {base_right}/{base_n} failing logs")
    print(f"  {'kind':9} {'failing':>7} {'label':>15} {'as undamaged':>15} {'no failure':>10} {'healthy flagged':>15} {'right->wrong':>12}")
    for k, r in rows.items():
        n = r["n"]
        lab = f"{100 * r['label'] / n:5.1f}% ({r['label']})" if n else "n/a"
        same = f"{100 * r['base'] / n:5.1f}% ({r['base']})" if n else "n/a"
        print(f"  {k:9} {n:7} {lab:>15} {same:>15} {r['nofail']:10} {r['flagged']:>7} of {r['healthy']:<5} {len(r['changed']):12}")
    if args.misses:
        for k, r in rows.items():
            for c in r["changed"]:
                print(f"LOST {k:9} {c}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

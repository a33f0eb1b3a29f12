"""Per-rank last activity: the last line each rank printed and the last step it reached.

A hung job prints no error: it ends by the time limit, a cancellation or a collective
timeout. What tells the hung rank apart is that it stopped advancing while the others went
on. `ActivityTracker.observe` is called on parsed rank lines in order per source (not
necessarily every line: the reader may skip the middle of a huge log), so it must be cheap,
tolerate gaps and keep bounded state (one record per printer).

Progress lines are recognised by the markers in `progress.yaml` (data, with examples that
the tests run): Megatron's `iteration  120/ 1000 |`, tqdm bars, `step 120`, DeepSpeed's
`steps: 120`, `global_step=120`, `batch 200`, ...
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from slurmdoc.engine.loader import parsed_yaml
from slurmdoc.engine.safeyaml import safe_loader
from slurmdoc.engine.matcher import trie_regex
from slurmdoc.models import LogLine, ProgressMark, RankActivity, SourceInfo

MAX_PRINTERS = 200_000  # beyond this many rank streams, new ones are not tracked
MAX_TEXT = 300  # characters of a line kept for the report
MAX_SCAN = 2000  # characters of a line searched for a progress marker
MAX_EXCERPT_MARKS = 100_000  # (printer, marker, excerpt) progress entries kept, over all printers


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MarkerExample(_Strict):
    text: str
    step: int
    epoch: Optional[int] = None


class MarkerExamples(_Strict):
    match: list[MarkerExample] = Field(min_length=1)
    no_match: list[str] = Field(min_length=1)


class MarkerSpec(_Strict):
    id: str = Field(min_length=1)
    label: str = Field(min_length=1)
    keywords: list[str] = Field(min_length=1)
    ignore_case: bool = False
    pattern: str
    examples: MarkerExamples

    @field_validator("pattern")
    @classmethod
    def _has_step(cls, v: str) -> str:
        try:
            rx = re.compile(v)
        except re.error as e:
            raise ValueError(f"invalid regex: {e}") from e
        if "step" not in rx.groupindex:
            raise ValueError("the pattern needs a named group 'step'")
        return v


class MarkerFile(_Strict):
    markers: list[MarkerSpec] = Field(min_length=1)


class Marker:
    __slots__ = ("id", "label", "keywords", "rx", "lower", "spec", "epoch", "total")

    def __init__(self, spec: MarkerSpec) -> None:
        self.spec = spec
        self.id = spec.id
        self.label = spec.label
        self.lower = spec.ignore_case
        self.keywords = tuple(k.lower() for k in spec.keywords) if spec.ignore_case else tuple(spec.keywords)
        self.rx = re.compile(spec.pattern, re.IGNORECASE if spec.ignore_case else 0)
        # the optional groups' numbers (0: the pattern has none), read without a groupdict
        self.epoch = self.rx.groupindex.get("epoch", 0)
        self.total = self.rx.groupindex.get("total", 0)


# the bundled markers file as parsed, kept beside this module's bytecode (parsing it, and
# importing PyYAML for it, was a few ms of every start-up); validated again on every run
MARKERS_CACHE = Path(__file__).resolve().parent / "__pycache__" / "progress-parsed.marshal"


def _parse(text: str) -> object:
    import yaml

    return yaml.load(text, Loader=safe_loader())  # safe: plain types only


def load_markers(text: Optional[str] = None) -> list[Marker]:
    """Parse and validate a markers file (the bundled one when `text` is None)."""
    if text is None:
        text = resources.files("slurmdoc.ingest").joinpath("progress.yaml").read_text(encoding="utf-8")
        raw = parsed_yaml(text, MARKERS_CACHE, _parse)
    else:
        raw = _parse(text)
    data = MarkerFile.model_validate(raw)
    ids = [m.id for m in data.markers]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise ValueError(f"duplicate progress marker id(s): {', '.join(sorted(dup))}")
    return [Marker(m) for m in data.markers]


@lru_cache(maxsize=1)
def bundled_markers() -> tuple[Marker, ...]:
    return tuple(load_markers())


def read_progress(markers, text: str) -> Optional[tuple[Marker, int, Optional[int], Optional[int]]]:
    """(marker, step, epoch, total) of the first marker that reads `text`, or None."""
    lowered: Optional[str] = None
    for mk in markers:
        hay = text
        if mk.lower:
            if lowered is None:
                lowered = text.lower()
            hay = lowered
        for k in mk.keywords:
            if k in hay:
                break
        else:
            continue
        m = mk.rx.search(text)
        if m is None:
            continue
        epoch = m.group(mk.epoch) if mk.epoch else None
        total = m.group(mk.total) if mk.total else None
        return mk, int(m.group("step")), int(epoch) if epoch else None, int(total) if total else None
    return None


class ActivityTracker:
    """Observe rank lines; `result()` gives one RankActivity per printer."""

    def __init__(self, markers=None, sources: Optional[list[SourceInfo]] = None) -> None:
        self.markers = tuple(markers) if markers is not None else bundled_markers()
        self.sources = sources  # their excerpt breaks (a paste's code fences) part their progress
        self.excerpt_marks = 0  # progress entries kept per excerpt so far (MAX_EXCERPT_MARKS)
        # one cheap search decides whether a line can hold progress at all: the fewest
        # keywords that cover them all, factored as a trie (see engine.matcher.trie_regex)
        parts = []
        for ci in (False, True):
            words = {k for mk in self.markers if mk.lower == ci for k in mk.keywords}
            words = {w for w in words if not any(o != w and o in w for o in words)}
            if words:
                rx = trie_regex(sorted(words))
                parts.append(f"(?i:{rx})" if ci else rx)
        self._pre = re.compile("|".join(parts)) if parts else None
        self._recs: dict[tuple, RankActivity] = {}
        self.dropped = 0

    def observe(self, ll: LogLine) -> None:
        # rank lines, and lines with no prefix (a single-process log, or a fragment whose
        # ranks are not shown): liveness (diagnosis.liveness) reads their progress too
        if ll.origin != "rank" and ll.origin != "unknown":
            return
        text = ll.text
        if not text or text.isspace():
            return
        kept = text if len(text) <= MAX_TEXT else text[:MAX_TEXT]
        rec = self._recs.get(ll.stream)
        if rec is None:
            if len(self._recs) >= MAX_PRINTERS:
                self.dropped += 1
                return
            rec = self._recs[ll.stream] = RankActivity(ll.who, ll.source, ll.lineno, kept, ll.ts, ll.ts)
            rec.tagged = ll.origin == "unknown" and (ll.tag is not None or ll.node is not None)
        else:
            rec.source, rec.lineno, rec.text, rec.line_ts = ll.source, ll.lineno, kept, ll.ts
            if ll.ts is not None:
                rec.last_ts = ll.ts
        rec.lines += 1
        pre = self._pre
        if pre is None or not pre.search(text, 0, MAX_SCAN):
            return
        found = read_progress(self.markers, text[:MAX_SCAN])
        if found is None:
            return
        mk, step, epoch, total = found
        rec.progress[mk.id] = ProgressMark(mk.id, mk.label, step, epoch, total, ll.source, ll.lineno, ll.ts or rec.last_ts, kept)
        at = (-1 if epoch is None else epoch, step)
        # progress is read within one pasted excerpt: another may be an earlier or a later
        # part of the run, or another run (SourceInfo.excerpt_breaks)
        key = mk.id
        if self.sources is not None and ll.source < len(self.sources):
            src = self.sources[ll.source]
            if src.excerpt_breaks:
                key = (mk.id, src.excerpt(ll.lineno))
        best = rec.advanced.get(key)
        if best is None:
            if key is not mk.id:
                if self.excerpt_marks >= MAX_EXCERPT_MARKS:
                    return  # bounded whatever the input: an excerpt past the budget is not read
                self.excerpt_marks += 1
            rec.advanced[key] = (at, ll.source, ll.lineno, False)  # a first mark: a state, no motion yet
        elif at > best[0]:
            rec.advanced[key] = (at, ll.source, ll.lineno, True)

    def result(self) -> list[RankActivity]:
        return list(self._recs.values())


_SHARED: Optional[ActivityTracker] = None


def is_progress(text: str) -> bool:
    """Does `text` read as a progress mark of the bundled markers (`step 12 loss 1.8`,
    `Epoch 3: 40%|...`)? For readers that must tell a program's next output from more of
    what it printed before (an exception message running on over several lines)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = ActivityTracker()
    pre = _SHARED._pre
    return pre is not None and pre.search(text, 0, MAX_SCAN) is not None and read_progress(_SHARED.markers, text[:MAX_SCAN]) is not None


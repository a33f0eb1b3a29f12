"""The diagnosis run stage by stage (diagnosis.analyze): an Analyzer fed directly, as the
API and `rules show` feed it. Each stage has its own test file (test_findings, test_diagnosis_layout,
test_ladder, test_liveness, test_order, test_straggler, test_explain, test_launchers,
test_replay)."""

from __future__ import annotations

from slurmdoc.diagnosis.analyze import Analyzer
from slurmdoc.engine.loader import load_rulebook
from slurmdoc.engine.matcher import Matcher
from slurmdoc.ingest.assemble import Assembler
from slurmdoc.ingest.prefix import PrefixParser
from slurmdoc.models import SourceInfo


def run(lines: list[str]):
    src = SourceInfo(index=0, path="job.log")
    parser, matcher = PrefixParser(2025), Matcher(load_rulebook())
    asm, an = Assembler(matcher.interesting), Analyzer([src])
    events = []
    for i, text in enumerate(lines, 1):
        ll = parser.parse(src, i, text)
        if ll.origin == "rank":
            an.note_stream(ll.stream, ll.who)
        events.extend(asm.feed(ll))
    events.extend(asm.flush())
    for ev in events:
        m = matcher.classify(ev)
        if m is not None:
            an.add(ev, m)
    return an.finish(len(lines), ("job.log",), [])


def test_nothing_on_the_ladder_is_no_failure_with_the_ranks_counted():
    d = run([f"[rank{r}]: step 1 loss 2.0" for r in range(4)])
    assert d.status == "no_failure" and d.root_cause is None and d.ranks_seen == 4


def test_every_stage_contributes_to_one_diagnosis():
    d = run(
        ["[rank0]: Traceback (most recent call last):", '[rank0]:   File "t.py", line 1, in <module>', "[rank0]: ValueError: bad shard"]
        + ["[rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:29877"]
    )
    rc = d.root_cause
    assert d.status == "failed" and rc.rank == 0 and rc.evidence == "traceback" and rc.rank_source == "prefix"
    assert rc.source == "job.log:3" and rc.remediation and d.verdict.startswith("python_exception on rank 0")
    assert [s.ranks for s in d.symptoms] == [(1,)]

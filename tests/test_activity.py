"""Per-rank last activity (ingest.activity): progress markers and what observe() keeps."""

from __future__ import annotations

import pytest

from slurmdoc.ingest.activity import MAX_TEXT, ActivityTracker, bundled_markers, load_markers, read_progress
from slurmdoc.ingest.prefix import PrefixParser
from slurmdoc.models import SourceInfo

MARKERS = bundled_markers()
CASES = [(mk, i, ex) for mk in MARKERS for i, ex in enumerate(mk.spec.examples.match)]
NEGATIVE = [(mk, i, text) for mk in MARKERS for i, text in enumerate(mk.spec.examples.no_match)]


@pytest.mark.parametrize("mk,i,ex", CASES, ids=lambda x: x.id if hasattr(x, "id") else str(x) if isinstance(x, int) else "")
def test_marker_reads_its_examples(mk, i, ex):
    found = read_progress(MARKERS, ex.text)
    assert found is not None, f"{mk.id} match[{i}] not read"
    got, step, epoch, _ = found
    assert (got.id, step, epoch) == (mk.id, ex.step, ex.epoch), f"{mk.id} match[{i}]: read by {got.id} as step {step} epoch {epoch}"


@pytest.mark.parametrize("mk,i,text", NEGATIVE, ids=lambda x: x.id if hasattr(x, "id") else str(x) if isinstance(x, int) else "")
def test_marker_ignores_its_counter_examples(mk, i, text):
    found = read_progress(MARKERS, text)
    assert found is None or found[0].id != mk.id, f"{mk.id} no_match[{i}] was read: {found}"


def test_every_marker_has_examples_and_a_unique_id():
    ids = [m.id for m in MARKERS]
    assert len(ids) == len(set(ids)) and len(ids) >= 5


def test_marker_file_is_validated():
    bad = "markers:\n  - {id: a, label: step, keywords: [step], pattern: 'step (\\d+)', examples: {match: [{text: step 1, step: 1}], no_match: [x]}}\n"
    with pytest.raises(ValueError, match="named group 'step'"):
        load_markers(bad)
    ok = bad.replace("(\\d+)", "(?P<step>\\d+)")
    assert [m.id for m in load_markers(ok)] == ["a"]
    with pytest.raises(ValueError, match="duplicate"):
        load_markers(ok + ok.replace("markers:\n", ""))


def lines(raw: list[str], path="job.log"):
    p = PrefixParser(2025)
    src = SourceInfo(index=0, path=path)
    out = []
    for n, r in enumerate(raw, 1):
        for seg in r.split("\r"):
            out.append(p.parse(src, n, seg))
    return out


def test_observe_keeps_each_ranks_last_line_and_last_progress():
    t = ActivityTracker()
    for ll in lines([
        "[rank0]:[2025-03-01 10:00:00] step 1 loss 2.0",
        "[rank1]:[2025-03-01 10:00:00] step 1 loss 2.0",
        "W0301 10:00:01.000 9 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 7 closing signal SIGTERM",
        "[rank0]:[2025-03-01 10:01:00] step 2 loss 1.9",
        "[rank0]: saving checkpoint",
        "[rank0]:",
    ]):
        t.observe(ll)
    acts = {a.who.rank: a for a in t.result()}
    assert set(acts) == {0, 1}  # the launcher line is nobody's activity
    a0 = acts[0]
    assert a0.text == "saving checkpoint" and a0.lineno == 5  # a blank line is not activity
    assert a0.progress["step"].step == 2 and a0.progress["step"].lineno == 4
    assert str(a0.last_ts) == "2025-03-01 10:01:00"
    assert acts[1].progress["step"].step == 1


def test_observe_tolerates_gaps_and_takes_the_last_tqdm_update():
    t = ActivityTracker()
    ll = lines(["[rank3]: 10%|#         | 10/100 [00:01<00:09]\r[rank3]: 11%|#         | 11/100 [00:01<00:09]"])
    far = lines(["x"] * 1 + ["[rank3]: Epoch 0:  52%|#####     | 52/100 [00:05<00:05]"])[1]
    for x in ll:
        t.observe(x)
    assert t.result()[0].progress["tqdm"].step == 11
    far.lineno = 100_000  # the reader skipped the middle of the file
    t.observe(far)
    a = t.result()[0]
    assert a.progress["tqdm-epoch"].step == 52 and a.lineno == 100_000


def test_long_lines_are_cut():
    t = ActivityTracker()
    for x in lines(["[rank0]: step 7 " + "x" * 10_000]):
        t.observe(x)
    a = t.result()[0]
    assert len(a.text) == MAX_TEXT and len(a.progress["step"].text) == MAX_TEXT and a.progress["step"].step == 7


def test_lines_without_progress_words_are_cheap_to_reject():
    t = ActivityTracker()
    assert t._pre is not None and t._pre.search("NCCL INFO comm 0x55 rank 3 nranks 8 - Init COMPLETE") is None
    assert t._pre.search(" iteration      120/    1000 |") is not None


def test_the_bundled_markers_kept_parsed_are_the_markers_parsed_from_their_file():
    """The bundled markers come from a parse kept beside the bytecode: the same markers, in the
    same order, with the same patterns and examples, as parsing the file now."""
    from importlib import resources

    text = resources.files("slurmdoc.ingest").joinpath("progress.yaml").read_text(encoding="utf-8")
    kept, fresh = load_markers(), load_markers(text)
    assert [(m.spec.model_dump(), m.rx.pattern) for m in kept] == [(m.spec.model_dump(), m.rx.pattern) for m in fresh]
    assert len(kept) > 5


def test_progress_is_kept_per_pasted_excerpt_within_a_bound(monkeypatch):
    # an input pasted as excerpts (fences at lines 3 and 6): each fenced excerpt's progress is
    # its own, the lines outside the fences are one excerpt (0); entries kept per excerpt are
    # bounded over all printers, whatever the input holds
    from slurmdoc.ingest import activity

    src = SourceInfo(index=0, path="paste.log", excerpt_breaks=[3, 6])
    parser = PrefixParser(2025)
    t = ActivityTracker(sources=[src])
    for n, raw in ((1, "step 5 loss 1.0"), (2, "step 6 loss 1.0"), (4, "step 2 loss 3.0"), (7, "step 9 loss 0.9")):
        t.observe(parser.parse(src, n, raw))
    (a,) = t.result()
    assert sorted((k[1], v[2]) for k, v in a.advanced.items()) == [(0, 7), (1, 4)]
    monkeypatch.setattr(activity, "MAX_EXCERPT_MARKS", 2)
    t = ActivityTracker(sources=[src])
    for n, raw in ((1, "[rank0]: step 5"), (4, "[rank1]: step 2"), (7, "[rank2]: step 9"), (8, "[rank0]: step 6")):
        t.observe(parser.parse(src, n, raw))
    assert sum(len(a.advanced) for a in t.result()) == 2 and t.excerpt_marks == 2

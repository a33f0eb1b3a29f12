"""The fast reader (ingest/scan.py) must see what the exact, line-by-line reader sees.

The reference is `diagnose(..., budget=None)`, which parses every line. The fast reader
parses only heads, tails and windows around prefilter hits; these tests shrink those
budgets to nothing so that on small logs too the windows alone must carry the diagnosis.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from slurmdoc.api import diagnose
from slurmdoc.ingest import prefilter as prefilter_mod
from slurmdoc.ingest import scan as scan_mod
from slurmdoc.ingest import sources
from slurmdoc.ingest.prefilter import Prefilter
from slurmdoc.ingest.scan import Budget, Scan
from slurmdoc.ingest.sources import make_inputs
from slurmdoc.report.json_format import render

ROOT = Path(__file__).resolve().parent.parent

NOTHING = Budget(head=0, tail=0, min_head=0, min_tail=0)

# a hang is named from each rank's last progress line, which the fast reader finds in the
# tail of each input, not in windows around hits: for those cases, windows plus the tail
TAIL_ONLY = Budget(head=0, min_head=0)

NEEDS_TAIL = {"19_time_limit_hang_r6.log"}

CASES = sorted(
    [str(p) for p in (ROOT / "tests" / "forms").glob("*.log")]
    + [str(p) for p in (ROOT / "tests" / "forms").iterdir() if p.is_dir()]
    + [str(p) for p in (ROOT / "fixtures").glob("*/*") if p.is_dir()]
)


def _key(d: dict) -> tuple:
    rc = d["root_cause"] or {}
    return (
        d["status"],
        rc.get("category"),
        rc.get("rule_id"),
        rc.get("rank"),
        rc.get("source"),
        rc.get("message"),
        rc.get("timestamp"),
        rc.get("traceback"),
        [(s["category"], s["rule_id"], s["ranks"], s["count"], s["first_source"]) for s in d["symptoms"]],
    )


def _json(paths, **kw) -> dict:
    return json.loads(render(diagnose(paths, **kw)))


@pytest.mark.parametrize("case", CASES, ids=lambda c: Path(c).name)
def test_windows_alone_give_the_exact_readers_diagnosis(case):
    """With no head and no tail, prefilter windows alone still find every event."""
    budget = TAIL_ONLY if Path(case).name in NEEDS_TAIL else NOTHING
    assert _key(_json([case], budget=budget)) == _key(_json([case], budget=None))


@pytest.mark.parametrize("case", CASES, ids=lambda c: Path(c).name)
def test_small_blocks_and_short_lines_change_nothing(case, monkeypatch):
    """Block boundaries every 4 KiB and a 1 KiB line cap: same result as the exact reader
    under the same cap (many block edges, lines cut by both readers alike)."""
    monkeypatch.setattr(scan_mod, "BLOCK", 4096)
    monkeypatch.setattr(scan_mod, "MAX_LINE", 1024)
    monkeypatch.setattr(sources, "MAX_LINE", 1024)
    budget = TAIL_ONLY if Path(case).name in NEEDS_TAIL else NOTHING
    assert _key(_json([case], budget=budget)) == _key(_json([case], budget=None))


def _genlog():
    spec = importlib.util.spec_from_file_location("genlog", ROOT / "bench" / "genlog.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.mark.parametrize("layout", ["srun", "rank", "files"])
def test_generated_log_fast_json_is_byte_identical_to_exact(layout, tmp_path):
    """A 10 MiB, 64-rank log: the default budgets leave most of it to the prefilter, and
    the JSON report is byte for byte the exact reader's, and right."""
    out = tmp_path / ("job" if layout == "files" else "job.log")
    truth = _genlog().generate(str(out), 10, 64, layout, root_rank=37)
    stats: dict = {}
    fast = render(diagnose([str(out)], stats=stats))
    exact = render(diagnose([str(out)], budget=None))
    assert fast == exact
    assert stats["parsed"] < stats["lines"] / 2, stats
    d = json.loads(fast)
    assert d["root_cause"]["category"] == truth["category"]
    assert d["root_cause"]["rank"] == truth["root_rank"]
    assert d["root_cause"]["source"] == f"{truth['root_file']}:{truth['root_line']}"
    assert d["ranks_seen"] == 64


@pytest.mark.parametrize("engine", ["re2", "re"])
def test_fallback_prefilters_give_the_same_report(tmp_path, monkeypatch, engine):
    """Where Hyperscan has no wheel, RE2 (or else Python's re) prefilters: same JSON."""
    if engine == "re2":
        pytest.importorskip("re2", reason="google-re2 is in the test extras")
    out = tmp_path / "job.log"
    _genlog().generate(str(out), 3, 16, "srun", root_rank=5)
    exact = render(diagnose([str(out)], budget=None))
    monkeypatch.setenv("SLURMDOC_PREFILTER", engine)
    stats: dict = {}
    windows_only = render(diagnose([str(out)], budget=NOTHING, stats=stats))
    assert stats["engine"] == engine and stats["parsed"] < stats["lines"]
    assert _key(json.loads(windows_only)) == _key(json.loads(exact))
    assert render(diagnose([str(out)])) == exact


COUNTERS = ["bytes"] + (["simd"] if prefilter_mod._Str is not None else [])


@pytest.mark.parametrize("counter", COUNTERS)
def test_both_newline_counters_give_the_exact_readers_json(tmp_path, monkeypatch, counter):
    """Skipped regions are only counted: stringzilla's SIMD count where it has a wheel, else
    bytearray.count. Either way, with 4 KiB blocks and a 64 KiB head and tail (thousands of
    counted stretches, windows cut at block edges), the report is the exact reader's: every
    line counted, every source line right."""
    out = tmp_path / "job.log"
    _genlog().generate(str(out), 3, 16, "srun", root_rank=5)
    exact = json.loads(render(diagnose([str(out)], budget=None)))
    count = prefilter_mod.count_lf_simd if counter == "simd" else prefilter_mod.count_lf_bytes
    for mod in (scan_mod, prefilter_mod):  # the reader's count, and the prefilter's (dense blocks)
        monkeypatch.setattr(mod, "count_lf", count)
    monkeypatch.setattr(scan_mod, "BLOCK", 4096)
    stats: dict = {}
    fast = json.loads(render(diagnose([str(out)], budget=Budget(head=64 << 10, tail=64 << 10), stats=stats)))
    assert stats["parsed"] < stats["lines"] / 4, stats
    assert _key(fast) == _key(exact) and fast["lines_read"] == exact["lines_read"] == stats["lines"]


@pytest.mark.skipif(prefilter_mod._hs is None, reason="Hyperscan has no wheel here")
def test_parts_scanned_on_four_threads_give_the_exact_readers_json(tmp_path, monkeypatch):
    """The whole reader with every block scanned in four parts (as on four cores): the
    exact reader's report, every line counted."""
    from slurmdoc import api

    out = tmp_path / "job.log"
    _genlog().generate(str(out), 3, 16, "srun", root_rank=5)
    exact = json.loads(render(diagnose([str(out)], budget=None)))
    monkeypatch.setattr(prefilter_mod, "cores", lambda: 4)
    monkeypatch.setattr(scan_mod, "BLOCK", 64 << 10)
    monkeypatch.setattr(prefilter_mod, "PARALLEL_MIN", 4096)
    monkeypatch.setattr(prefilter_mod, "PARALLEL_PIECE", 4096)
    monkeypatch.setattr(api, "_PREFILTERS", {})
    stats: dict = {}
    fast = json.loads(render(diagnose([str(out)], budget=Budget(head=64 << 10, tail=64 << 10), stats=stats)))
    assert api._PREFILTERS and all(p._parts == 4 for p in api._PREFILTERS.values())
    assert stats["parsed"] < stats["lines"] / 4, stats
    assert _key(fast) == _key(exact) and fast["lines_read"] == exact["lines_read"] == stats["lines"]


def _scan(path, head, tail, keywords, warnings=None):
    warnings = [] if warnings is None else warnings
    (inp,) = make_inputs([str(path)], warnings)
    b = Budget(head=head, tail=tail, min_head=head, min_tail=tail, before=0, after=0)
    s = Scan(inp, Prefilter(*keywords), head, tail, b, warnings, lambda: False, lambda: None)
    return s, list(s)


@pytest.mark.parametrize("compressed", [False, True])
def test_tail_is_parsed_with_exact_line_numbers(tmp_path, keywords, compressed):
    """Regular files know their size; gzip does not, and keeps the skipped end in a ring."""
    lines = [f"iteration {i} loss 1.0" for i in range(1, 5001)]
    raw = ("\n".join(lines) + "\n").encode()
    path = tmp_path / ("a.log.gz" if compressed else "a.log")
    path.write_bytes(gzip.compress(raw) if compressed else raw)
    s, got = _scan(path, 0, 200, keywords)
    assert s.lines == 5000
    assert got, "the tail was not parsed"
    assert got[-1] == (5000, "iteration 5000 loss 1.0", False)
    for n, text, _ in got:
        assert text == lines[n - 1]
    assert sum(len(t) + 1 for _, t, _ in got) <= 200 + 30


def test_head_hits_and_counts(tmp_path, keywords):
    body = [f"step {i}" for i in range(1, 2001)]
    body[1499] = "Traceback (most recent call last):"
    path = tmp_path / "a.log"
    path.write_text("\n".join(body))  # no final newline
    s, got = _scan(path, 50, 0, keywords)
    assert s.lines == 2000
    numbers = [n for n, _, _ in got]
    assert numbers[:3] == [1, 2, 3]  # the head
    assert (1500, "Traceback (most recent call last):", True) in got
    assert 1000 not in numbers  # skipped
    assert s.hits == 1


def test_crlf_bom_and_a_line_longer_than_a_block(tmp_path, keywords, monkeypatch):
    monkeypatch.setattr(scan_mod, "BLOCK", 4096)
    long = "x" * 10000 + " Traceback"
    text = "\ufefffirst\r\n" + "a\r\n" * 100 + long + "\r\n" + "RuntimeError: boom Traceback\r\nlast"
    path = tmp_path / "a.log"
    path.write_bytes(text.encode("utf-8"))
    warnings: list[str] = []
    s, got = _scan(path, 0, 0, keywords, warnings)
    assert s.lines == 104
    by_no = {n: t for n, t, _ in got}
    assert len(by_no[102]) == min(scan_mod.MAX_LINE, 4096)  # a giant line keeps its start
    assert by_no[103] == "RuntimeError: boom Traceback"  # CR removed
    assert any("line longer than" in w for w in warnings)


def test_progress_reports_every_byte(tmp_path):
    path = tmp_path / "a.log"
    path.write_bytes(b"hello world\n" * 300_000)
    got: list[int] = []
    diagnose([str(path)], on_bytes=got.append)
    assert sum(got) == path.stat().st_size


def test_binary_and_utf16_inputs(tmp_path):
    b = tmp_path / "a.log"
    b.write_bytes(b"\x00\x01\x02" * 5000)
    u = tmp_path / "b.log"
    u.write_text("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n", encoding="utf-16")
    d = diagnose([str(b), str(u)])
    assert d.root_cause is not None and d.root_cause.rank == 1
    assert any("binary" in w for w in d.warnings)


def test_lines_before_a_hit_at_a_block_start_come_from_the_previous_block(tmp_path, keywords, monkeypatch):
    monkeypatch.setattr(scan_mod, "BLOCK", 4096)
    lines = [f"[2026-11-20 10:00:{i % 60:02d}] step {i}".ljust(99) for i in range(1, 201)]
    lines[40] = "Traceback (most recent call last):".ljust(99)  # line 41: the first of block 2
    path = tmp_path / "a.log"
    path.write_text("\n".join(lines) + "\n")
    (inp,) = make_inputs([str(path)], [])
    b = Budget(head=0, tail=0, min_head=0, min_tail=0, before=5, after=0)
    got = [(n, t) for n, t, _ in Scan(inp, Prefilter(*keywords), 0, 0, b, [], lambda: False, lambda: None)]
    assert [n for n, _ in got][:6] == [36, 37, 38, 39, 40, 41]
    assert all(t == lines[n - 1].rstrip() or t == lines[n - 1] for n, t in got)


@pytest.mark.parametrize(
    "fragment",
    [
        # an exception line standing alone, deep in a long log
        "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.",
        # a header behind a logging prefix whose frames follow bare
        "[RANK 2] 2030-01-01 00:00:05,000 [ERROR] Traceback (most recent call last):\n"
        '  File "/srv/a.py", line 4, in f\n    g()\nFileNotFoundError: [Errno 2] No such file or directory: \'/data/x\'',
        # frames with no header, cut at a trim mark
        '  File "/srv/a.py", line 4, in f\n    g()\n[... trimmed ...]\nunrelated output',
        # a launcher summary whose failure entry holds the signal
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n" + "=" * 40 + "\nRoot Cause (first observed failure):\n[0]:\n"
        "  time      : 2030-01-01_00:00:06\n  host      : n2\n  rank      : 9 (local_rank: 1)\n  exitcode  : -7 (pid: 41)\n"
        "  error_file: <N/A>\n  traceback : Signal 7 (SIGBUS) received by PID 41\n" + "=" * 40,
    ],
)
def test_fragments_deep_in_a_long_log_are_found_by_the_fast_reader(fragment, tmp_path):
    filler = [f"[rank{r}]: step {i} loss {1 + i % 7}.{r}" for i in range(3000) for r in range(4)]
    log = tmp_path / "job.log"
    # after every rank's progress (a rank that went on stepping would have outlived it),
    # found with no head and no tail budget: by the prefilter's windows alone
    log.write_text("\n".join(filler + fragment.split("\n")) + "\n")
    exact = _json([str(log)], budget=None)
    assert exact["status"] == "failed"
    assert _key(_json([str(log)], budget=NOTHING)) == _key(exact)


_LINE = st.one_of(
    st.sampled_from(["step 1 loss 2.0", "Traceback (most recent call last):", "RuntimeError: boom", "", "  File \"a.py\", line 3, in f"]),
    st.integers(0, 5000).map(lambda n: "x" * n + " Error"),  # up to longer than a block
)


@pytest.mark.skipif(prefilter_mod._hs is None, reason="Hyperscan has no wheel here")
@given(st.lists(_LINE, max_size=80), st.booleans(), st.integers(0, 3), st.booleans())
@example(lines=["a" * 100] * 50 + ["y" * 5000 + " Error"] + ["b Error"] * 50, final_newline=True, parts=2, compressed=False)
@example(lines=["a" * 100] * 50 + ["y" * 5000 + " Error"] + ["b Error"] * 50, final_newline=True, parts=2, compressed=True)
def test_reading_ahead_yields_what_reading_in_line_does(tmp_path_factory, keywords, lines, final_newline, parts, compressed):
    """A big regular file is read and searched ahead on another thread, block after block:
    with 1 KiB blocks, any lines (some longer than a block: the read-ahead stops and the
    reader goes on in line), gzip (its size unknown) or not,
    with or without a last newline, the lines yielded, their
    numbers, texts and hits, the warnings and the line count are those of the reader that
    reads each block itself."""
    import gzip as gz

    text = "\n".join(lines) + ("\n" if final_newline else "")
    path = tmp_path_factory.mktemp("ahead") / ("a.log.gz" if compressed else "a.log")
    path.write_bytes(gz.compress(text.encode()) if compressed else text.encode())
    real = (scan_mod.BLOCK, scan_mod.AHEAD_MIN, scan_mod.MAX_LINE, sources.MAX_LINE)
    scan_mod.BLOCK, scan_mod.MAX_LINE, sources.MAX_LINE = 1024, 300, 300
    try:
        b = Budget(head=200, tail=300, min_head=200, min_tail=300, before=2, after=1)
        got = {}
        for ahead in (0, 10**9):
            scan_mod.AHEAD_MIN = ahead
            p = Prefilter(*keywords)
            p._parts = parts or 1
            warnings: list[str] = []
            (inp,) = make_inputs([str(path)], warnings)
            s = Scan(inp, p, 200, 300, b, warnings, lambda: False, lambda: None)
            got[ahead] = (list(s), s.lines, warnings)
        assert got[0] == got[10**9]
    finally:
        scan_mod.BLOCK, scan_mod.AHEAD_MIN, scan_mod.MAX_LINE, sources.MAX_LINE = real


@pytest.mark.skipif(prefilter_mod._hs is None, reason="Hyperscan has no wheel here")
def test_a_reader_left_early_stops_its_read_ahead(tmp_path, keywords, monkeypatch):
    """A consumer that stops reading (an error, a closed generator) leaves no thread reading
    the file behind it."""
    import threading as th

    monkeypatch.setattr(scan_mod, "BLOCK", 4096)
    path = tmp_path / "a.log"
    path.write_text("step 1 loss 2.0 Error\n" * 20000)
    (inp,) = make_inputs([str(path)], [])
    before = th.active_count()
    s = iter(Scan(inp, Prefilter(*keywords), 0, 0, Budget(head=0, tail=0, min_head=0, min_tail=0), [], lambda: False, lambda: None))
    for _ in range(300):
        next(s)
    assert any(t.name.startswith("slurmdoc-ahead") for t in th.enumerate())
    s.close()
    assert not any(t.name.startswith("slurmdoc-ahead") for t in th.enumerate())
    assert th.active_count() <= before + 1  # the prefilter's own helper may stay for the next block


# A progress bar that names the run on every line ("Training", a keyword of the clean-end
# rule, which is judged line by line): each line is a hit, and without the quiet search every
# window would join the next and the whole log be parsed
_NOISY = "[rank{r}]: Training: epoch 0 step {i}/3000 loss {l}.{r}1 lr 1e-4"


@pytest.mark.skipif(prefilter_mod._hs is None, reason="the quiet search is Hyperscan's")
@pytest.mark.parametrize(
    "events",
    [
        # events of rules judged line by line, inside the noise: the quiet search must find them
        {1500: "[rank2]: Training: epoch 0 step 1500/3000 loss=nan", 2999: "[rank1]: 2030-01-01 00:00:09 | ERROR | trainer | the parameter server went away"},
        # an error outlived by a clean end of training (the run went on and ended well)
        {1000: "[rank2]: 2030-01-01 00:00:09 | ERROR | loader | shard 17 unreadable, skipped", 2000: "[rank0]: Training completed in 1:02:03."},
        # a traceback: its keywords are never guarded
        {1200: "[rank3]: Training: epoch 0 step 1200/3000 loss=nan", 2999: "[rank1]: Traceback (most recent call last):\n[rank1]:   File \"/srv/train.py\", line 9, in <module>\n"
               "[rank1]:     step()\n[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"},
    ],
)
def test_a_keyword_on_every_line_is_searched_quietly_and_changes_no_finding(events, tmp_path):
    _quiet_finds_what_exact_finds(_NOISY, events, tmp_path)


def _quiet_finds_what_exact_finds(noise: str, events: dict, tmp_path) -> None:
    """3000 steps of 4 ranks' `noise` lines with `events` after some steps: the quiet search
    gives the exact reader's root cause, symptoms and handled failures, parsing a small part."""
    lines = []
    for i in range(3000):
        for r in range(4):
            lines.append(noise.format(s=i % 60, r=r, i=i, l=1 + i % 7))
        if i in events:
            lines.extend(events[i].split("\n"))
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    exact = _json([str(log)], budget=None)
    assert exact["root_cause"] is not None or exact["handled"]
    stats: dict = {}
    # no head; a tail, as every input has (each rank's last line says it went on)
    quiet = _json([str(log)], budget=Budget(head=0, min_head=0, tail=4 << 10, min_tail=4 << 10), stats=stats)
    assert _key(quiet) == _key(exact) and quiet["handled"] == exact["handled"]
    assert any("only the lines a rule may match" in w for w in quiet["warnings"])
    assert stats["parsed"] < len(lines) // 20  # not the whole log


@pytest.mark.skipif(prefilter_mod._hs is None, reason="the quiet search is Hyperscan's")
def test_no_quiet_search_for_unguarded_keywords_or_an_input_read_whole(tmp_path):
    """A keyword of a rule with a pattern no line superset can be written for (`multiple of`:
    a pattern that only `regex` reads) is never guarded: a block dense with it is searched as
    always; nor is an input its head and tail cover searched quietly."""
    log = tmp_path / "job.log"
    log.write_text("".join(f"[rank{i % 4}]: step {i} batch 64 is a multiple of 8, packing on\n" for i in range(4000)))
    assert not any("only the lines" in w for w in _json([str(log)], budget=NOTHING)["warnings"])
    log.write_text("".join(_NOISY.format(r=i % 4, i=i, l=3) + "\n" for i in range(4000)))
    assert any("only the lines" in w for w in _json([str(log)], budget=NOTHING)["warnings"])
    assert not any("only the lines" in w for w in _json([str(log)])["warnings"])  # the default head and tail hold it


# A metric named Error on every line (`Top-1 Error`): `Error` is a keyword of the traceback
# rules, guarded by the lines a traceback begins at, which a metric line is not
_METRIC = "[rank{r}]: step {i} | loss {l}.{r} | Top-1 Error: 2{r}.{l} | lr 1e-4"


# A retry line on every line holding `timed out`, a keyword of `any` rules whose patterns may
# match across lines (in a traceback event): guarded by their line supersets and the starts
_RETRY = "[rank{r}]: step {i} | loss {l}.{r} | object store fetch timed out, retrying (attempt {l})"


_COLOURED = "\x1b[32m2030-01-01 00:00:{s:02d}\x1b[0m | \x1b[1mINFO\x1b[0m | [rank{r}] step {i} loss {l}.{r} lr 1e-4"


@pytest.mark.skipif(prefilter_mod._hs is None, reason="the quiet search is Hyperscan's")
@pytest.mark.parametrize(
    ("noise", "events"),
    [
        # a whole traceback
        (_METRIC, {1200: "[rank1]: Traceback (most recent call last):\n[rank1]:   File \"/srv/train.py\", line 9, in <module>\n"
               "[rank1]:     step()\n[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}),
        # frames with no header above them (a log that lost it)
        (_METRIC, {900: "[rank2]:   File \"/srv/data.py\", line 40, in __next__\n[rank2]:     batch = next(it)\n[rank2]: ValueError: shard 17 is empty"}),
        # an exception line alone, no other keyword on it
        (_METRIC, {2700: "[rank3]: ValueError: 42 is not a valid shard id"}),
        # a launcher's summary whose banner was cut, and an error-level line
        (_METRIC, {1500: "[rank0]: 2030-01-01 00:00:09 | ERROR | trainer | the parameter server went away",
         2999: "Root Cause (first observed failure):\n[0]:\n  time      : 2030-01-01_00:00:10\n  host      : n1\n"
               "  rank      : 3 (local_rank: 3)\n  exitcode  : 1 (pid: 77)\n  error_file: <N/A>"}),
        # a store timeout, one line
        (_RETRY, {1200: "[rank1]: torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 2/4 clients joined."}),
        # a watchdog's timeout, and a traceback whose message says timed out on its last line
        (_RETRY, {900: "[rank2]: [E ProcessGroupNCCL.cpp:455] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600123 milliseconds before timing out.",
         2500: "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"/srv/train.py\", line 9, in <module>\n"
               "[rank0]:     dist.barrier()\n[rank0]: RuntimeError: [../gloo/transport/tcp/pair.cc:598] Connection closed by peer; the operation timed out"}),
        # keywords split by colour codes between their words and at their punctuation
        (_COLOURED, {900: "\x1b[1m[rank2]\x1b[0m \x1b[31mtorch.OutOfMemoryError\x1b[0m: \x1b[1mCUDA\x1b[0m out of memory. Tried to allocate 2.00 GiB"}),
        (_COLOURED, {1500: "\x1b[33m[rank1]\x1b[0m Watchdog caught collective operation \x1b[1mtimeout\x1b[0m: WorkNCCL(SeqNum=7, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
         2999: "\x1b[31m[rank3] RuntimeError\x1b[0m: CUDA error: an illegal memory access was encountered"}),
        # frames with no header, a colour code between the words of `File "` (a traceback
        # rule's keyword, guarded by the lines a traceback begins at)
        (_COLOURED, {1700: "\x1b[2m[rank2]\x1b[0m   File\x1b[0m \"/srv/data.py\", line 40, in __next__\n\x1b[2m[rank2]\x1b[0m     batch = next(it)\n"
               "\x1b[2m[rank2]\x1b[0m \x1b[31mValueError\x1b[0m: shard 17 is empty"}),
        # a guarded keyword (the clean end's) on a coloured line, after an error it outlives
        (_COLOURED, {1000: "[rank2] 2030-01-01 00:00:09 | \x1b[31mERROR\x1b[0m | loader | shard 17 unreadable, skipped", 2000: "\x1b[32m[rank0] Training completed in 1:02:03.\x1b[0m"}),
    ],
)
def test_a_keyword_on_every_line_is_searched_quietly_and_changes_no_finding(noise, events, tmp_path):
    """A metric named `Error` (a traceback rule's keyword, guarded by the lines a traceback
    begins at), a retry saying `timed out` (an `any` rule's, whose patterns may match across
    lines), a colour code (the mark that a keyword may be split there) on every line: each
    line would be a hit; the quiet search finds what the exact reader finds."""
    _quiet_finds_what_exact_finds(noise, events, tmp_path)


@pytest.mark.skipif(prefilter_mod._hs is None, reason="the quiet search is Hyperscan's")
def test_a_user_rule_hyperscan_refuses_leaves_the_others_guarded(tmp_path):
    """A user's pattern whose superset Hyperscan refuses (too long for it) costs its own rule
    its guard, its keyword searched as a plain literal, and not the whole pack its quiet search."""
    rules = tmp_path / "rules"
    rules.mkdir()
    long = r"\w" * 700
    (rules / "long-token.yaml").write_text(
        "title: A long token\ncategory: config_error\nrole: cause\npriority: 70\nscope: line\n"
        "keywords: ['bad token']\n"
        f"patterns:\n  - 'bad token x{long}'\n"
        "remediation:\n  summary: 'a bad token'\n"
        f"examples:\n  match:\n    - 'bad token x{'a' * 700}'\n  no_match:\n    - 'good token'\n"
    )
    lines = [_NOISY.format(r=i % 4, i=i, l=3) for i in range(12000)]
    lines[6000] = "[rank2]: bad token x" + "a" * 700
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    exact = _json([str(log)], budget=None, rule_dirs=[str(rules)])
    stats: dict = {}
    quiet = _json([str(log)], budget=Budget(head=0, min_head=0, tail=4 << 10, min_tail=4 << 10), rule_dirs=[str(rules)], stats=stats)
    assert any("only the lines a rule may match" in w for w in quiet["warnings"])
    assert _key(quiet) == _key(exact) and quiet["handled"] == exact["handled"]
    assert "long-token" in json.dumps(exact)
    assert stats["parsed"] < len(lines) // 20


@pytest.mark.parametrize("fence", ["```", "~~~"])
def test_a_fence_far_from_any_hit_still_parts_a_pasted_log(tmp_path, fence):
    """A paste's code fence (either of Markdown's) ends one excerpt (liveness reads each
    excerpt's progress on its own): the fast reader searches for fence lines too, so a fence
    deep in lines it would otherwise skip parts the log as the exact reader parts it."""
    filler = [f"data shard {i} loaded, {i * 7 % 1000} samples" for i in range(20000)]
    lines = [fence, "Traceback (most recent call last):", '  File "loader.py", line 40, in fetch',
             "ConnectionResetError: [Errno 104] Connection reset by peer", *filler[:10000], fence, "", fence,
             *filler[10000:], "step 11 loss 1.9", "step 12 loss 1.8", fence]
    log = tmp_path / "paste.log"
    log.write_text("\n".join(lines) + "\n")
    budget = Budget(head=0, min_head=0, tail=4 << 10, min_tail=4 << 10)
    fast, exact = _json([str(log)], budget=budget), _json([str(log)], budget=None)
    assert _key(fast) == _key(exact) and fast["status"] == "failed"


def test_a_launchers_summary_apart_from_its_traceback_is_read_as_the_exact_reader_reads_it(tmp_path):
    # torchrun's summary whose head ('Failures:') is set apart from its ChildFailedError by
    # another printer's line (a blank one a paste left, unlabelled): the summary starts at its
    # head in both readers, though the head holds none of the rules' keywords
    agent = ["E1122 00:09:47.464000 6177 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1 (pid: 6186) of binary: /usr/bin/python3",
             "Traceback (most recent call last):", '  File "/usr/bin/torchrun", line 8, in <module>', "    sys.exit(main())",
             "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", None, "=" * 60, "/work/fit.py FAILED", "-" * 60, "Failures:", "[1]:",
             "  time      : 2026-11-22_00:09:47", "  host      : node-1", "  rank      : 2 (local_rank: 0)", "  exitcode  : -15 (pid: 6184)",
             "  error_file: <N/A>", "  traceback : Signal 15 (SIGTERM) received by PID 6184", "-" * 60, "Root Cause (first observed failure):", "[0]:",
             "  time      : 2026-11-22_00:09:47", "  host      : node-1", "  rank      : 3 (local_rank: 1)", "  exitcode  : 1 (pid: 6186)",
             "  error_file: <N/A>", "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html", "=" * 60]
    lines = ["1: [rank3]: Traceback (most recent call last):", '1: [rank3]:   File "/work/fit.py", line 40, in <module>', "1: [rank3]:     step(batch)",
             "1: [rank3]: ValueError: bad batch at step 2"] + [" " if ln is None else "1: " + ln for ln in agent]
    p = tmp_path / "job.log"
    p.write_text("\n".join(lines) + "\n")
    assert _key(_json([str(p)], budget=NOTHING)) == _key(_json([str(p)], budget=None))
    assert _key(_json([str(p)])) == _key(_json([str(p)], budget=None))


# A keyword line every so often, not on a quarter of the lines (no block is dense): each would
# open a window of lines before and after it, parsed for nothing when no rule can match it
_PLAIN = "[rank{r}]: step {i} | loss {l}.{r} | lr 1e-4 | 812 samples/s"


@pytest.mark.skipif(prefilter_mod._hs is None, reason="the quiet search is Hyperscan's")
@pytest.mark.parametrize(
    ("noise", "events"),
    [
        (_RETRY, {}),
        (_METRIC, {}),
        # what a rule does match among the recurring lines still opens its window
        (_RETRY, {1200: "[rank1]: torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 2/4 clients joined."}),
        (_RETRY, {900: "[rank2]: [E ProcessGroupNCCL.cpp:455] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600123 milliseconds before timing out.",
         2500: "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"/srv/train.py\", line 9, in <module>\n"
               "[rank0]:     dist.barrier()\n[rank0]: RuntimeError: [../gloo/transport/tcp/pair.cc:598] Connection closed by peer; the operation timed out"}),
        (_METRIC, {900: "[rank2]:   File \"/srv/data.py\", line 40, in __next__\n[rank2]:     batch = next(it)\n[rank2]: ValueError: shard 17 is empty"}),
        (_METRIC, {2700: "[rank3]: ValueError: 42 is not a valid shard id"}),
        (_COLOURED, {1500: "\x1b[33m[rank1]\x1b[0m Watchdog caught collective operation \x1b[1mtimeout\x1b[0m: WorkNCCL(SeqNum=7, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
         2999: "\x1b[31m[rank3] RuntimeError\x1b[0m: CUDA error: an illegal memory access was encountered"}),
    ],
)
def test_a_recurring_line_no_rule_matches_opens_no_window(noise, events, tmp_path):
    """A keyword line now and then (a retry warning saying `timed out`, a metric named
    `Error`) that no rule can match, as the quiet search judges one line, costs the search of
    that line, not a window of parsing around it; the findings are the exact reader's, and what
    a rule matches among those lines still opens its window."""
    lines = []
    every = 30
    for i in range(3000):
        for r in range(4):
            lines.append((noise if i % every == 0 else _PLAIN).format(s=i % 60, r=r, i=i, l=1 + i % 7))
        if i in events:
            lines.extend(events[i].split("\n"))
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    exact = _json([str(log)], budget=None)
    stats: dict = {}
    budget = Budget(head=0, min_head=0, tail=4 << 10, min_tail=4 << 10)
    fast = _json([str(log)], budget=budget, stats=stats)
    assert _key(fast) == _key(exact) and fast["handled"] == exact["handled"]
    assert not any("only the lines a rule may match" in w for w in fast["warnings"])  # no block was dense
    recurring = 4 * (3000 // every)
    windows = sum(len(e.split("\n")) for e in events.values()) * (budget.before + budget.after + 1)
    # each recurring line parsed alone, the tail, the events' windows; a window around each
    # recurring line would be several times that
    assert stats["parsed"] < recurring + 200 + windows < recurring * (budget.before + budget.after) // 4


def _rank_files(tmp_path: Path) -> Path:
    """A job written one file per rank, in the forms such files come in: plain, gzip, a byte
    order mark, CRLF, an empty one, one longer than several blocks, and the failing rank."""
    d = tmp_path / "job"
    d.mkdir()
    steps = "".join(f"step {i} loss {1 + i % 7}.{i % 10} lr 1e-4 | 812 samples/s\n" for i in range(400))
    fail = ("Traceback (most recent call last):\n  File \"/srv/train.py\", line 9, in <module>\n    step()\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    watchdog = "[E ProcessGroupNCCL.cpp:455] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600123 milliseconds before timing out.\n"
    for r in range(12):
        text = steps + (fail if r == 5 else watchdog.format(r=r))
        name = d / f"rank{r}.log"
        if r == 1:
            with gzip.open(str(name) + ".gz", "wt") as g:
                g.write(text)
        elif r == 2:
            name.write_bytes(b"\xef\xbb\xbf" + text.encode())
        elif r == 3:
            name.write_bytes(text.replace("\n", "\r\n").encode())
        elif r == 4:
            name.write_text("")
        elif r == 7:
            name.write_text(steps * 40 + watchdog.format(r=r))  # several blocks: read ahead on its own
        else:
            name.write_text(text)
    return d


def test_per_rank_files_in_every_form_give_the_exact_readers_findings(tmp_path, monkeypatch):
    """A job written one file per rank, its files in the forms such files come in (gzip, a
    byte order mark, CRLF, empty, one several blocks long that is read ahead on its own): the
    fast reader, with small blocks and little head or tail, names what the exact reader names."""
    d = _rank_files(tmp_path)
    monkeypatch.setattr(scan_mod, "BLOCK", 16 << 10)
    budget = Budget(head=0, min_head=0, tail=4 << 10, min_tail=1 << 10)
    exact = _json([str(d)], budget=None)
    stats: dict = {}
    fast = _json([str(d)], budget=budget, stats=stats)
    assert _key(fast) == _key(exact)
    assert fast["root_cause"]["rank"] == 5 and stats["parsed"] < stats["lines"]



# a long run's steps on four ranks, then a failure, then rank 0 stepping on past the tail
_STEPS = [f"[rank{r}]: step {i} | loss {1 + i % 7}.{r} | lr 1e-4" for i in range(1500) for r in range(4)]
_AFTER = [f"[rank0]: step {i} | loss {1 + i % 7}.0 | lr 1e-4" for i in range(1500, 1800)]
_SMALL = Budget(head=0, min_head=0, tail=4 << 10, min_tail=4 << 10)


@pytest.mark.skipif(prefilter_mod._hs is None, reason="the quiet search is Hyperscan's")
@pytest.mark.parametrize("width", [62, 65, 68, 71, 74, 77, 80, 100])
def test_a_record_a_hard_wrap_cut_into_keyword_pieces_is_read_from_its_first_piece(width, tmp_path):
    """A record hard-wrapped at a terminal's width: its rank prefix on the first piece, its
    keywords on the pieces after, where no rule matches a piece alone. A piece parsed alone
    (no window) lost the first piece, and with it the rank; a later piece's window could not
    reach back past it. Deep in a long log, the fast reader reads the exact reader's record."""
    rec = ("[rank{r}]: 2031-02-03 04:05:06.000 E external/runtime/tsl/distributed_runtime/coordination/"
           "coordination_service.cc:377 DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: PjRT_Client_Connect. "
           "Timed out task names: /job:trainer/replica:0/task:{r}")
    cut = [ln[i: i + width] for ln in (rec.format(r=r) for r in (1, 2, 3)) for i in range(0, len(ln), width)]
    log = tmp_path / "job.log"
    log.write_text("\n".join(_STEPS + cut + _AFTER) + "\n")
    exact = _json([str(log)], budget=None)
    assert exact["root_cause"]["rank"] == 1
    assert _key(_json([str(log)], budget=_SMALL)) == _key(exact)


@pytest.mark.skipif(prefilter_mod._hs is None, reason="the quiet search is Hyperscan's")
@pytest.mark.parametrize("between", [0, 1, 5])
def test_a_line_no_rule_matches_just_before_an_error_keeps_the_errors_lines_before(between, tmp_path):
    """A keyword line no rule matches (a retry that timed out) printed just before an error
    without a time of its own: the error's window still takes in the lines before both, where
    its rank printed the time, as the exact reader has them; parsed alone, the keyword line
    cut the window short and the error had no time."""
    event = (["[rank1]: [2031-02-03 04:05:06,000] step 1500: loading shard 12"]
             + [f"[rank1]: shard 12 part {k} fetched" for k in range(between)]
             + ["[rank1]: fetch of shard 12 part 3 timed out after 30s, retrying",
                "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered"])
    log = tmp_path / "job.log"
    log.write_text("\n".join(_STEPS + event + _AFTER) + "\n")
    exact = _json([str(log)], budget=None)
    assert exact["root_cause"]["timestamp"] is not None
    assert _key(_json([str(log)], budget=_SMALL)) == _key(exact)


def _hard_wrap(lines: list[str], width: int) -> list[str]:
    """Lines as a terminal of `width` columns shows them when copied: each longer line cut
    into pieces of `width` characters, the last piece holding the rest."""
    return [ln[i: i + width] for ln in lines for i in range(0, max(len(ln), 1), width)]


_LAUNCH = ["$ srun --nodes=2 --ntasks-per-node=4 python -m torch.distributed.run --nproc-per-node 4 "
           "train.py --tensor-parallel 2 --pipeline-parallel 2 --micro-batch-size 4 --global-batch-size 512",
           "W1203 04:05:06.000000 140 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable "
           "for each process to be 1 in default, to avoid your system being overloaded",
           "[rank0]: using world size: 8, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel "
           "size: 2, pipeline-model-parallel size: 2"]
_TIMEOUT = ("[rank1]:[E ProcessGroupNCCL.cpp:455] [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600123 milliseconds before timing out.")


@pytest.mark.parametrize("width", range(60, 141, 4))
def test_a_keyword_a_terminals_hard_wrap_cut_in_two_deep_in_a_long_log_is_found(width, tmp_path):
    """A long log copied from a terminal that hard-wrapped every line at its width: a rule's
    keyword that the wrap cut in two is in neither piece, so a search of the raw bytes does not
    see it, while the exact reader rejoins the pieces and reads it. The wrap shows in the log's
    first lines (the launch command, a launcher's warning, the run's sizes); deep in the log,
    past head and window reach, the fast reader finds the cut keyword too and names what the
    exact reader names."""
    log = tmp_path / "job.log"
    log.write_text("\n".join(_hard_wrap([*_LAUNCH, *_STEPS, _TIMEOUT, *_AFTER], width)) + "\n")
    exact = _json([str(log)], budget=None)
    assert exact["root_cause"]["category"] == "nccl_timeout"
    stats: dict = {}
    assert _key(_json([str(log)], budget=Budget(head=2 << 10, min_head=2 << 10, tail=4 << 10, min_tail=4 << 10), stats=stats)) == _key(exact)
    assert stats["parsed"] < stats["lines"] / 2  # the fast reader did skip most of the log


def test_a_long_log_of_fixed_format_records_is_not_taken_for_a_hard_wrap():
    """Records of one template that share their length (each the next record of its kind, or
    behind an srun label) show no wrap: the block is searched once, raw."""
    steps = "".join(f"[rank{r}]: 2031-02-03 04:05:{i % 60:02d} iteration {1000 + i} | loss 1.{i % 10}{r} | lr 1.0e-04 | grad norm 0.{r}{i % 10}\n"
                    for i in range(300) for r in range(4))
    labelled = "".join(f"{r:3d}: iteration {1000 + i} | loss 1.{i % 10} | lr 1.0e-04 | grad norm 0.5{i % 10} | tokens/s 8123{i % 10}\n"
                       for i in range(300) for r in range(8, 12))
    for text in (steps, labelled):
        data = bytearray(text.encode())
        assert prefilter_mod.wrap_width(data, len(data)) == 0

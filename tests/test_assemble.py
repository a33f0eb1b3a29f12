"""Traceback and report assembly per stream."""

from __future__ import annotations

from slurmdoc.ingest.assemble import Assembler
from slurmdoc.ingest.prefix import PrefixParser
from slurmdoc.models import SourceInfo

SRC = SourceInfo(index=0, path="job.log")


def events(text: str, interesting=lambda t: "WATCH" in t):
    parser = PrefixParser(2025)
    asm = Assembler(interesting)
    out = []
    for i, raw in enumerate(text.split("\n"), 1):
        out.extend(asm.feed(parser.parse(SRC, i, raw)))
    out.extend(asm.flush())
    return out


TB = """Traceback (most recent call last):
  File "train.py", line 10, in <module>
    main()
  File "train.py", line 5, in main
    raise ValueError("bad")
ValueError: bad"""


def test_simple_traceback_is_one_event():
    evs = events(TB + "\nafter")
    assert len(evs) == 1
    ev = evs[0]
    assert ev.kind == "traceback"
    assert ev.lines[-1] == "ValueError: bad"
    assert ev.exception_idx == [5]
    assert ev.linenos == [1, 2, 3, 4, 5, 6]


def test_chained_traceback_stays_one_event():
    text = (
        TB.replace("ValueError: bad", "KeyError: 'shard'")
        + "\n\nDuring handling of the above exception, another exception occurred:\n\n"
        + TB.replace("ValueError: bad", "RuntimeError: failed to load checkpoint shard")
    )
    evs = events(text)
    assert len(evs) == 1
    ev = evs[0]
    assert [ev.lines[i] for i in ev.exception_idx] == ["KeyError: 'shard'", "RuntimeError: failed to load checkpoint shard"]


def test_ranks_interleaved_by_prefix_are_separate_tracebacks():
    a = [f"[rank1]: {l}" for l in TB.replace("bad", "one").split("\n")]
    b = [f"[rank2]: {l}" for l in TB.replace("bad", "two").split("\n")]
    mixed = [x for pair in zip(a, b) for x in pair]
    evs = events("\n".join(mixed))
    assert sorted(ev.lines[-1] for ev in evs) == ["ValueError: one", "ValueError: two"]
    assert {ev.first.who.rank for ev in evs} == {1, 2}


def test_unprefixed_interleaved_tracebacks_still_yield_both_exceptions():
    a = TB.replace("bad", "one").split("\n")
    b = TB.replace("bad", "two").split("\n")
    mixed = [x for pair in zip(a, b) for x in pair]
    evs = events("\n".join(mixed))
    excs = [ev.lines[i] for ev in evs for i in ev.exception_idx]
    assert "ValueError: one" in excs and "ValueError: two" in excs


def test_exception_message_lines_follow_until_a_blank_line():
    text = TB.replace("ValueError: bad", "RuntimeError: Error(s) in loading state_dict:\n\tsize mismatch for w: a vs b") + "\n\nstep 4"
    evs = events(text)
    assert len(evs) == 1
    assert evs[0].lines[-1] == "\tsize mismatch for w: a vs b"


def test_interesting_lines_become_events_and_others_do_not():
    evs = events("step 1\nWATCH this\nstep 2")
    assert [e.lines for e in evs] == [["WATCH this"]]


def test_a_log_record_ends_the_exception_message():
    evs = events(TB + "\nE0101 00:00:00.1 1 x.py:1] WATCH next")
    assert [e.kind for e in evs] == ["traceback", "line"]


def test_event_size_is_bounded():
    frames = "\n".join(f'  File "f.py", line {i}, in g' for i in range(5000))
    evs = events("Traceback (most recent call last):\n" + frames + "\nRecursionError: maximum recursion depth exceeded")
    assert len(evs) == 1
    ev = evs[0]
    assert len(ev.lines) <= 400 and ev.truncated > 0
    assert ev.lines[ev.exception_idx[-1]].startswith("RecursionError")


def test_traceback_timestamp_is_inherited_from_the_stream():
    text = "[rank1]: 2025-03-01 12:00:05,000 INFO step 3\n" + "\n".join(f"[rank1]: {l}" for l in TB.split("\n"))
    evs = events(text)
    assert evs[0].ts is not None and evs[0].ts.second == 5


def test_chain_survives_unprefixed_blank_lines():
    # torch's excepthook prefixes each traceback line with [rankN]: but leaves blank lines bare
    first = [f"[rank3]: {l}" for l in TB.replace("ValueError: bad", "KeyError: 'k'").split("\n")]
    second = [f"[rank3]: {l}" for l in TB.replace("ValueError: bad", "RuntimeError: failed").split("\n")]
    text = "\n".join(first + ["", "[rank3]: During handling of the above exception, another exception occurred:", ""] + second)
    evs = [e for e in events(text) if e.kind == "traceback"]
    assert len(evs) == 1
    assert [evs[0].lines[i] for i in evs[0].exception_idx] == ["KeyError: 'k'", "RuntimeError: failed"]


def test_dataloader_worker_original_traceback_is_the_origin():
    text = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "train.py", line 5, in <module>',
            "    batch = next(it)",
            "ValueError: Caught ValueError in DataLoader worker process 0.",
            "Original Traceback (most recent call last):",
            '  File "worker.py", line 374, in _worker_loop',
            "    data = fetcher.fetch(index)",
            '  File "data.py", line 62, in __getitem__',
            '    raise ValueError(f"corrupt sample {i}")',
            "ValueError: corrupt sample 17",
            "",
            "step 9",
        ]
    )
    (ev,) = [e for e in events(text) if e.kind == "traceback"]
    assert ev.lines[ev.origin()] == "ValueError: corrupt sample 17"


def test_origin_of_a_chain_is_its_first_exception():
    text = TB.replace("ValueError: bad", "KeyError: 'k'") + "\n\nThe above exception was the direct cause of the following exception:\n\n" + TB
    (ev,) = events(text)
    assert ev.lines[ev.origin()] == "KeyError: 'k'"


def test_truncating_a_long_chain_keeps_its_first_exception():
    frames = lambda n: "\n".join(f'  File "f.py", line {i}, in g' for i in range(n))  # noqa: E731
    text = (
        "Traceback (most recent call last):\n" + frames(55) + "\ntorch.OutOfMemoryError: CUDA out of memory.\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n" + frames(600) + "\nRuntimeError: step failed"
    )
    (ev,) = events(text)
    assert len(ev.lines) <= 400
    assert ev.lines[ev.origin()] == "torch.OutOfMemoryError: CUDA out of memory."
    assert ev.lines[ev.exception_idx[-1]] == "RuntimeError: step failed"

"""Traceback and report assembly per stream."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from slurmdoc.api import split_line
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
    evs = events(TB + "\n\nafter")
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


def test_a_progress_line_after_a_message_ending_in_a_colon_is_the_programs_next_output():
    # a message that announces more (`...:`) takes the lines after it, but a progress mark is
    # the program going on, not more of the message (liveness reads it as progress)
    for progress in ("step 11 loss 1.9", "Epoch 3:  45%|####5     | 450/1000 [01:23<01:42,  5.37it/s]"):
        (ev,) = [e for e in events(TB.replace("ValueError: bad", "ValueError: the batch held these bad ids:") + "\n" + progress) if e.kind == "traceback"]
        assert ev.lines[-1] == "ValueError: the batch held these bad ids:", progress
    (ev,) = events(TB.replace("ValueError: bad", "ValueError: the batch held these bad ids:") + "\n3, 17, 40")
    assert ev.lines[-1] == "3, 17, 40"


def test_interesting_lines_become_events_and_others_do_not():
    evs = events("step 1\nWATCH this\nstep 2")
    assert [e.lines for e in evs] == [["WATCH this"]]


def test_a_log_record_ends_the_exception_message():
    evs = events(TB + "\nE0101 00:00:00.1 1 x.py:1] WATCH next")
    assert [e.kind for e in evs] == ["traceback", "line"]
    # PyTorch's own C++ logger writes glog's form with the month unpadded (three digits)
    for record in ("W902 17:45:03.120044981 socket.cpp:752] the next record", "[W902 17:45:03.120044981 socket.cpp:752] the next record"):
        (ev,) = events(TB + "\n" + record)
        assert ev.kind == "traceback" and ev.lines[-1] == 'ValueError: bad', record


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


def test_frames_under_an_exception_line_carry_the_exception_that_started_it():
    # a wrapper whose message holds the traceback of what it wraps (a task runner printing the
    # remote task's frames under its own head): the exception those frames end in was raised
    # inside, and is the origin; carriers nested in carriers end at the innermost
    def carrier(cls: str, task: str, depth: int) -> list[str]:
        return [f"tasks.RemoteError({cls}): run::{task}() (pid={100 + depth}, host=n{depth})",
                f'  File "/srv/app/{task}.py", line {10 + depth}, in {task}',
                "    result = wait(handle)"]
    for depth in (1, 2, 3):
        lines = [ln for d in range(depth) for ln in carrier("OSError", f"stage{d}", d)]
        lines += ["OSError: [Errno 5] Input/output error: '/data/shard_3'", "", "step 4"]
        (ev,) = [e for e in events("\n".join(lines)) if e.kind == "traceback"]
        assert ev.lines[ev.origin()] == "OSError: [Errno 5] Input/output error: '/data/shard_3'", depth
        # the innermost carrier when the paste stops before the error itself
        cut = [ln for d in range(depth + 1) for ln in carrier("OSError", f"stage{d}", d)]
        (ev,) = [e for e in events("\n".join(cut)) if e.kind == "traceback"]
        assert ev.lines[ev.origin()].startswith(f"tasks.RemoteError(OSError): run::stage{depth}()"), depth
    # an exception line with no frames under it carries nothing: it stays the origin
    plain = ["ValueError: bad value 3", "RuntimeError: second failure"]
    assert events("\n".join(plain))[0].lines[events("\n".join(plain))[0].origin()] == plain[0]


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


# ---- fragments: what is left of a traceback in pasted and tailed logs ----------------

FRAMES = """  File "/srv/job/run.py", line 40, in <module>
    fit()
  File "/srv/job/loop.py", line 12, in fit
    out = model(batch)"""


def tracebacks(text: str):
    """Traceback events, read as the pipeline reads (glued records split first)."""
    parser = PrefixParser(2025)
    asm = Assembler(lambda t: "WATCH" in t)
    out = []
    for i, raw in enumerate(text.split("\n"), 1):
        for ll in split_line(parser, SRC, i, raw):
            out.extend(asm.feed(ll))
    out.extend(asm.flush())
    return [e for e in out if e.kind == "traceback"]


def test_frames_without_a_header_are_a_traceback():
    (ev,) = tracebacks(FRAMES + "\nIndexError: index 9 is out of bounds")
    assert ev.form == "headerless" and not ev.partial()
    assert ev.lines[ev.origin()] == "IndexError: index 9 is out of bounds"
    assert ev.linenos[0] == 1


def test_a_header_behind_a_logging_prefix_starts_a_traceback():
    text = "2031-07-02 08:00:00 - [ERROR] - Traceback (most recent call last):\n" + FRAMES + "\nOSError: disk quota exceeded"
    (ev,) = tracebacks(text)
    assert ev.form == "whole" and ev.lines[-1] == "OSError: disk quota exceeded"


def test_bare_frames_after_a_rank_prefixed_header_stay_with_that_rank():
    text = "[RANK 6] 2031-07-02 08:00:00,120 [ERROR] Traceback (most recent call last):\n" + FRAMES + "\nOSError: disk quota exceeded\n\nstep 5"
    (ev,) = tracebacks(text)
    assert ev.first.who.rank == 6
    assert ev.lines[ev.origin()] == "OSError: disk quota exceeded"


def test_bare_lines_do_not_join_a_prefixed_traceback_that_has_ended():
    text = "[rank2]: Traceback (most recent call last):\n" + "\n".join("[rank2]: " + l for l in FRAMES.split("\n")) + "\n[rank2]: KeyError: 'x'\nloading next shard"
    (ev,) = tracebacks(text)
    assert ev.lines[-1] == "KeyError: 'x'"


def test_a_traceback_cut_at_the_end_of_input():
    (ev,) = tracebacks("Traceback (most recent call last):\n" + FRAMES)
    assert ev.form == "cut" and ev.partial()
    assert ev.lines[-1] == "    out = model(batch)"


def test_a_traceback_cut_inside_a_frame_lines_path_is_reported_at_the_line_before_it():
    # the paste's last words are the head of a frame line: no frame, and no line to report
    (ev,) = tracebacks("Traceback (most recent call last):\n" + FRAMES + '\n  File "/opt/venv/lib/pyth')
    assert ev.form == "cut" and ev.lines[-1] == '  File "/opt/venv/lib/pyth'
    assert ev.lines[ev.origin()] == "    out = model(batch)"


def test_a_traceback_cut_at_a_trim_mark_then_other_output():
    text = FRAMES + "\n[... 120 lines trimmed ...]\nWATCH the next thing\nepoch 2"
    evs = events(text)
    assert [e.kind for e in evs] == ["traceback", "line"]
    assert evs[0].form == "cut" and evs[0].lines[-1] == "[... 120 lines trimmed ...]"
    assert evs[1].lines == ["WATCH the next thing"]


def test_a_traceback_cut_at_a_blank_line_then_unrelated_output():
    text = "Traceback (most recent call last):\n" + FRAMES + "\n\n\nepoch 2 begins\nValueError-free line"
    evs = tracebacks(text)
    assert len(evs) == 1 and evs[0].form == "cut"
    assert evs[0].lines[-1] == "    out = model(batch)"  # the blank gap is not part of it


def test_an_elided_middle_does_not_cut_a_traceback():
    text = "Traceback (most recent call last):\n" + FRAMES + "\n    ...\n...\n" + FRAMES + "\nRuntimeError: boom"
    (ev,) = tracebacks(text)
    assert ev.form == "whole" and ev.lines[ev.origin()] == "RuntimeError: boom"


def test_an_exception_line_standing_alone():
    (ev,) = tracebacks("epoch 1\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n\nepoch 2")
    assert ev.form == "alone" and ev.partial()
    assert ev.lines == ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"]
    (ev,) = tracebacks("my_pkg.sub.errors.ShardReadException: shard 4 unreadable")
    assert ev.form == "alone"


def test_ordinary_lines_that_mention_errors_are_not_exceptions():
    assert tracebacks("Validation Error rate: 0.12\nerror: 0.3\nNo Exception raised, continuing\nKeyboardInterrupt") == []


def test_a_chain_pasted_without_frames_keeps_its_first_exception():
    text = "KeyError: 'layer.3'\n\nThe above exception was the direct cause of the following exception:\n\nRuntimeError: could not load the checkpoint"
    (ev,) = tracebacks(text)
    assert [ev.lines[i] for i in ev.exception_idx] == ["KeyError: 'layer.3'", "RuntimeError: could not load the checkpoint"]
    assert ev.lines[ev.origin()] == "KeyError: 'layer.3'"


def test_a_message_runs_on_over_unindented_lines_until_a_blank_line():
    text = FRAMES + "\nMyError: the first part of the message\nthe second part of it\n\nepoch 3"
    (ev,) = tracebacks(text)
    assert ev.lines[-2:] == ["MyError: the first part of the message", "the second part of it"]


def test_a_message_stops_at_the_next_structure():
    for after in ("2031-07-02 08:00:01 INFO resumed", "INFO:root:resumed", "Traceback (most recent call last):", "  3%|#  | 3/100 [00:01<00:30, 3.1it/s]"):
        evs = tracebacks(FRAMES + "\nMyError: short\n" + after)
        assert evs[0].lines[-1] == "MyError: short", after


def test_a_rich_traceback_is_a_traceback():
    box = [
        "╭──────────── Traceback (most recent call last) ────────────╮",
        "│ /srv/job/run.py:40 in <module>                            │",
        "│                                                           │",
        "│ ❱ 40 fit()                                                │",
        "╰───────────────────────────────────────────────────────────╯",
        "ZeroDivisionError: division by zero",
    ]
    (ev,) = tracebacks("\n".join(box))
    assert ev.form == "whole" and ev.lines[ev.origin()] == "ZeroDivisionError: division by zero"
    (ev,) = tracebacks("\n".join(box[1:]))  # a paste starting inside the box
    assert ev.form == "headerless" and ev.lines[ev.origin()] == "ZeroDivisionError: division by zero"


def test_a_stack_announced_by_a_warning_is_not_a_failure():
    text = "train.py:3: UserWarning: anomaly found. Stack of the call that caused it:\n" + FRAMES + "\nepoch 4"
    assert tracebacks(text) == []
    # but the same frames ending in an exception are a traceback
    (ev,) = tracebacks("Printing the stack:\n" + FRAMES + "\nValueError: bad")
    assert ev.lines[ev.origin()] == "ValueError: bad"


SUMMARY = """Traceback (most recent call last):
  File "/usr/bin/torchrun", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2031-01-01_00:00:09
  host      : n7
  rank      : 12 (local_rank: 4)
  exitcode  : -15 (pid: 78)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 78
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2031-01-01_00:00:08
  host      : n7
  rank      : 11 (local_rank: 3)
  exitcode  : 1 (pid: 77)
  error_file: /tmp/torchelastic/err.json
  traceback : Traceback (most recent call last):
    File "/srv/train.py", line 9, in step
      loss.backward()
  RuntimeError: CUDA error: an illegal memory access was encountered
============================================================"""


def test_a_launcher_summary_yields_each_failure_entry_traceback_as_that_ranks_event():
    evs = tracebacks(SUMMARY)
    summary = [e for e in evs if "ChildFailedError" in e.text()]
    assert len(summary) == 1  # the summary stays one event
    (inner,) = [e for e in evs if e is not summary[0]]
    assert inner.first.who.rank == 11 and inner.first.node == "n7"
    assert inner.lines[inner.origin()] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert inner.lines[1] == '  File "/srv/train.py", line 9, in step'  # dedented to a traceback's own shape


def test_a_launcher_summary_entry_ended_by_a_signal_is_its_exit_code_line_of_that_rank():
    # the entry's `traceback :` field only restates its exit code (`Signal 15 (SIGTERM)
    # received by PID 78` under `exitcode : -15`): the exit code line is the entry's report
    evs = events(SUMMARY)
    (sig,) = [e for e in evs if e.kind == "line"]
    assert sig.lines == ["exitcode  : -15 (pid: 78)"]
    assert sig.first.who.rank == 12 and sig.linenos == [13]
    # `<N/A>` or an empty field says nothing
    assert [e for e in events(SUMMARY.replace("Signal 15 (SIGTERM) received by PID 78", "<N/A>")) if e.kind == "line"] == []


def test_a_summary_entry_whose_rank_field_lost_its_value_still_yields_its_exit_line():
    # a field cut or damaged right after its colon (a NUL hole, a paste) names no rank: the
    # entry's other fields still count, and nothing raises
    text = "\n".join(ln if not ln.strip().startswith("rank ") else ln.split(":")[0] + ":" for ln in SUMMARY.split("\n"))
    assert text != SUMMARY
    (sig,) = [e for e in events(text) if e.kind == "line"]
    assert sig.lines == ["exitcode  : -15 (pid: 78)"] and sig.first.who.rank is None


def test_a_summary_entry_whose_signal_field_is_cut_short_still_reports_its_exit_code():
    # a paste that stops inside the last entry's `traceback :` field (`Signal 9 (SIGKILL)
    # rece`): the exit code above it still says how that rank ended, and is cited there
    body = SUMMARY.split("\n")[:-1]
    body = [ln.replace("Signal 15 (SIGTERM) received by PID 78", "Signal 15 (SIGT") for ln in body]
    entry = ["[0]:", "  time      : 2031-01-01_00:00:08", "  host      : n7", "  rank      : 11 (local_rank: 3)",
             "  exitcode  : -9 (pid: 77)", "  error_file: <N/A>", "  traceback : Signal 9 (SIGKILL) rece"]
    cut = body.index("Root Cause (first observed failure):")
    evs = events("\n".join(body[: cut + 1] + entry))
    lines = sorted((e.linenos[0], e.lines[0], e.first.who.rank) for e in evs if e.kind == "line")
    assert lines == [(13, "exitcode  : -15 (pid: 78)", 12), (cut + 6, "exitcode  : -9 (pid: 77)", 11)]


def test_a_progress_line_ends_the_exception_message():
    # a rank that logs an exception and trains on: its next progress line (any wording the
    # progress markers know) is the program's next output, not more of the message
    for nxt in ("step 11 loss 1.9", "iteration 12/100 | lm loss: 2.1", "Epoch 0:  40%|####      | 4/10"):
        (tb,) = [e for e in events(TB + "\n" + nxt + "\nmore output") if e.kind == "traceback"]
        assert tb.lines[-1] == "ValueError: bad", nxt


def test_a_lowercase_name_and_colon_after_frames_is_not_an_exception_line():
    # exception classes are capitalised or dotted: `env: ...` after a traceback cut before its
    # exception line is the program's (or the shell's) next output, and the traceback is cut
    text = "\n".join(TB.split("\n")[:5] + ["env: MODULEPATH entry /opt/modules added"])
    (ev,) = [e for e in events(text) if e.kind == "traceback"]
    assert ev.exception_idx == [] and ev.form == "cut" and "env:" not in "\n".join(ev.lines)


def test_a_summary_pasted_without_its_banner_still_yields_its_entries():
    # a paste or a tail that starts at a section head of the launcher's summary ("Failures:",
    # "Root Cause (first observed failure):"), its banner and ChildFailedError cut off: the
    # entries are read as in a whole summary, and it ends at the first line that is not its own
    for start in ("Failures:", "Root Cause (first observed failure):"):
        body = SUMMARY.split("\n")
        cut = body.index(start)
        text = "\n".join(body[cut:-1] + ["", "the next words of whoever pasted it"])
        evs = events(text)
        (inner,) = [e for e in evs if e.kind == "traceback" and e.first.who.rank == 11]
        assert inner.lines[inner.origin()] == "RuntimeError: CUDA error: an illegal memory access was encountered"
        assert all("whoever pasted" not in e.text() for e in evs if e.kind == "traceback"), start
        if start == "Failures:":
            (sig,) = [e for e in evs if e.kind == "line" and "exitcode  : -15" in e.text()]
            assert sig.first.who.rank == 12


OLD_SUMMARY = """\
==============================================
             finetune.py FAILED
==============================================
Root Cause:
[0]:
  time: 2031-02-03_04:05:06
  rank: 6 (local_rank: 2)
  exitcode: 1 (pid: 4242)
  error_file: /tmp/elastic/attempt_0/2/error.json
  msg:
    {
      "message": "ValueError: tokenizer has no pad token \\"<pad>\\"",
      "extraInfo": {
        "py_callstack": "Traceback (most recent call last):\\n  File \\"finetune.py\\", line 3"
      }
    }
==============================================
Other Failures:
  <NO_OTHER_FAILURES>
=============================================="""


def test_an_older_launcher_summary_yields_its_entry_message_as_that_ranks_exception():
    # the summary format of older torchelastic: `Root Cause:` and `Other Failures:` heads,
    # `field: value` without alignment, and a `msg:` field holding the worker's error record
    # (JSON) whose "message" is the exception line; also when the paste ends inside it
    for text in (OLD_SUMMARY, OLD_SUMMARY.split('"extraInfo"')[0]):
        evs = events(text)
        (exc,) = [e for e in evs if e.first.who.rank == 6 and "ValueError" in e.text()]
        assert exc.lines[exc.origin()] == 'ValueError: tokenizer has no pad token "<pad>"'
        assert exc.linenos[0] == 12
    # a one-line msg (a signal) is that rank's line, quotes off
    one = OLD_SUMMARY.replace("  msg:\n", '  msg: "Signal 9 (SIGKILL) received by PID 4242"\n', 1).split("    {")[0]
    (sig,) = [e for e in events(one) if e.kind == "line" and "SIGKILL" in e.text()]
    assert sig.lines == ["Signal 9 (SIGKILL) received by PID 4242"] and sig.first.who.rank == 6


def test_a_summary_entry_whose_traceback_field_says_none_was_recorded_reports_its_exit_code():
    # torchrun writes "To enable traceback see: <docs url>" when the worker recorded no
    # traceback: the entry's exit code is then the launcher's whole report on that rank
    text = SUMMARY.replace("Signal 15 (SIGTERM) received by PID 78", "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
    (code,) = [e for e in events(text) if e.kind == "line"]
    assert code.lines == ["exitcode  : -15 (pid: 78)"] and code.first.who.rank == 12 and code.linenos == [13]


def test_an_exception_wrapping_another_type_in_parentheses_is_an_exception_line():
    # a task framework re-raises a worker's error as `Wrapper(InnerType): ...`, its message
    # carrying the worker's own frames; after frames, or standing alone, it is the exception
    wrapped = "ray.exceptions.RayTaskError(IndexError): ray::Worker.run() (pid=77, ip=10.0.0.2)"
    text = "\n".join(['  File "/srv/lib/driver.py", line 12, in wait', "    get(ref)", wrapped,
                      '  File "/srv/job/train.py", line 40, in loop', "    batch = next(it)"])
    (ev,) = tracebacks(text)
    assert ev.lines[ev.origin()] == wrapped
    (alone,) = tracebacks("some output\n" + wrapped)
    assert alone.lines[alone.origin()] == wrapped


# pieces of lines an idle stream may see: the beginnings of tracebacks and summaries, near
# misses of them, and other output
_PIECES = ["Traceback (most recent call last):", "  File \"t.py\", line 3, in f", "File \"x\", line 1", "│ /t.py:3 in f │",
           "ValueError: bad", "torch.OutOfMemoryError", "Error: 3", "Top-1 Error: 2", "Exception in thread", "RuntimeError", "ray.exceptions.RayTaskError(IndexError): x",
           "Root Cause (first observed failure):", "Root Cause:", "Other Failures:", "Failures:", "[0]:", "  rank : 3",
           "-- Process 2 terminated with the following error:", "During handling of the above exception, another exception occurred:",
           "╭──── Traceback (most recent call last) ────╮", "step 3 loss 2.0", ": ", " ", "    ", "x", "[rank1]: ", "3: "]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=4))
def test_a_traceback_begins_only_at_a_line_one_of_the_starts_matches(pieces):
    """The quiet search guards the traceback rules' keywords with assemble.STARTS (engine.superset):
    a line that begins a traceback event in a stream in no event is one a start matches."""
    from slurmdoc.ingest.assemble import STARTS

    line = "".join(pieces)
    parser = PrefixParser(2025)
    asm = Assembler(lambda t: False)
    ll = parser.parse(SRC, 1, line)
    out = asm.feed(ll)
    began = any(e.kind == "traceback" for e in out + asm.flush())
    if began:
        assert any(rx.match(ll.text) for rx in STARTS), ll.text


def test_a_launcher_summary_ends_at_its_closing_banner():
    # nothing torchrun prints after the banner that closes its summary belongs to it: the
    # next line, whatever its words, is the program's (or a paste's) next output; another
    # section of an older summary (`Other Failures:` after `Root Cause:`) is still the summary
    for text in (SUMMARY, OLD_SUMMARY, "\n".join(OLD_SUMMARY.split("\n")[3:])):
        for after in ("all reduce ring 3 built in 12 ms", "see the log of node 7 for more", "x"):
            evs = [e for e in events(text + "\n" + after) if e.kind == "traceback" and e.first.who.rank is None]
            assert len(evs) == 1, (text[:20], after)
            assert after not in evs[0].lines and evs[0].lines[-1].startswith("=====")
            if "Other Failures:" in text:
                assert "  <NO_OTHER_FAILURES>" in evs[0].lines


def test_an_older_summary_framed_in_asterisks_ends_at_its_last_section():
    # older torchelastic frames its summary in a border of asterisks (no banner) and its
    # sections in `=` banners: `Other Failures:` after `Root Cause:`'s closing section banner
    # runs to that border, and what follows it (an error of another program, another
    # traceback) is no more of the summary, however many lines come after
    star = "*" * 46
    body = OLD_SUMMARY.split("\n")
    framed = "\n".join([TB.split("\n")[0], '  File "/usr/bin/torchrun", line 8, in <module>', "    sys.exit(main())",
                        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", star, *body[1:-1], star])
    for gap in ([], [""]):
        for after in (["WATCH: n3 task 0 exited with code 1"], TB.split("\n")):
            evs = events("\n".join([framed, *gap, *after]))
            (summary,) = [e for e in evs if e.kind == "traceback" and "ChildFailedError" in e.text()]
            assert "  <NO_OTHER_FAILURES>" in summary.lines
            assert summary.lines[-1] == star and summary.linenos[-1] == len(framed.split("\n")), (gap, after[0])
            assert any(e.lines[-1] == after[-1] for e in evs if e is not summary), (gap, after[0])


def test_an_exception_chained_after_a_summary_keeps_its_whole_message():
    # the summary's end (its closing banner) ends only the summary: an exception raised while
    # handling the launcher's (its traceback chained after the summary) is read like any
    # other, its message running on after a line that ends in ':'
    chained = ["", "During handling of the above exception, another exception occurred:", "", *TB.split("\n")[:-1]]
    for exc in (["ValueError: could not write the error file:", "/scratch/err.json is read-only"],
                ["ValueError: bad:", "  indented detail", "more after the detail"]):
        for frames in (True, False):
            body = chained if frames else chained[:3]
            (ev,) = [e for e in events("\n".join([SUMMARY, *body, *exc, "", "WATCH next"])) if e.kind == "traceback" and e.first.who.rank is None]
            assert ev.lines[-len(exc):] == exc, (exc, frames)
            assert ev.lines[ev.exception_idx[-1]] == exc[0]


def test_a_traceback_under_pythons_dropped_exception_head_is_marked_unraised():
    """Python prints a traceback for an exception it drops under the unraisable hook's head
    (`Exception ignored in|on|while ...`: a finalizer, a callback): such a traceback is marked,
    also when the head's object wrapped onto a second line; one under any other line (a
    thread's `Exception in thread <name>:` included: its exception is a real one) is not."""
    tb = ["Traceback (most recent call last):", '  File "w.py", line 3, in close', "    self.h.release()", "RuntimeError: handle gone"]
    heads = {
        "Exception ignored in: <function Writer.__del__ at 0x7f00aa>": True,
        "Exception ignored on calling ctypes callback function: <function cb at 0x7f01>": True,
        "Exception ignored while finalizing file <_io.FileIO name=3>:": True,
        "Exception ignored in: <bound method Pool.__del__ of \n    <lib.pool.Pool object at 0x7f02>>": True,
        "Error in atexit._run_exitfuncs:": True,
        "the atexit handler printed: Error in atexit._run_exitfuncs: below": False,
        "Exception in thread Thread-2 (_prefetch):": False,
        "step 40 done": False,
        "the run printed: Exception ignored in a log message": False,
    }
    for head, unraised in heads.items():
        evs = [e for e in events("\n".join([head] + tb)) if e.kind == "traceback"]
        assert len(evs) == 1, head
        assert (evs[0].unraised, evs[0].waived) == (unraised, False), head
        # the mark is the head just above: a traceback a line later is a new one
        evs = [e for e in events("\n".join([head, "step 41 done"] + tb)) if e.kind == "traceback"]
        assert not evs[0].unraised, head


def test_an_error_records_message_naming_an_exception_is_an_exception_line_alone():
    # a pretty-printed JSON error record (a launcher's, written by the process that failed or
    # logged by the launcher's own failing agent): its "message" string, decoded, is read as an
    # exception line; a message that names no exception, or a record cut in its string, is not
    record = ['ERROR:launcher.errors:{', '  "message": {', '    "message": "OSError: [Errno 13] cannot bind \\"/run/x\\"\\nsecond line",',
              '    "extraInfo": {', '      "py_callstack": [', '        "  File \\"run.py\\", line 3, in <module>\\n    main()\\n"']
    (ev,) = [e for e in events("\n".join(record)) if e.kind == "traceback"]
    assert ev.lines == ['OSError: [Errno 13] cannot bind "/run/x"'] and ev.form == "alone" and ev.exception_idx == [0] and ev.linenos == [3]
    for other in ('    "message": "worker 3 finished",', '    "message": "see the log of rank 3 for the ValueError",', '"message": {'):
        assert not [e for e in events(other) if e.kind == "traceback"], other


def test_a_json_string_s_escape_of_half_a_character_does_not_reach_the_report():
    # JSON may escape half of a UTF-16 pair alone (`\ud800`): decoded, that is no character and
    # cannot be written as UTF-8, so a report, a ledger line or a page that carried it would
    # fail. An error record's message and a launcher summary's JSON field keep their words,
    # with such a half replaced by U+FFFD, as the reader does for bytes that are not UTF-8
    for half, shown in (("\\ud800", "\ufffd"), ("\\udfff", "\ufffd"), ("\\udc80 and \\ud834", "\ufffd and \ufffd")):
        record = ['{', '  "message": {', f'    "message": "ValueError: shard {half} unreadable",', '    "extraInfo": {}', '  }', '}']
        summary = ["=" * 40, "run.py FAILED", "-" * 40, "Failures:", "  <NO_OTHER_FAILURES>", "-" * 40,
                   "Root Cause (first observed failure):", "[0]:", "  time      : 2031-01-01_00:00:00", "  host      : n1",
                   "  rank      : 2 (local_rank: 2)", "  exitcode  : 1 (pid: 9)", "  error_file: /tmp/e.json",
                   f'  msg       : "ValueError: shard {half} unreadable"', "=" * 40]
        for text in (record, summary):
            evs = [e for e in events("\n".join(text)) if "shard" in "\n".join(e.lines)]
            assert [e for e in evs if e.kind == "traceback" and e.form == "alone"], text
            for e in evs:
                for line in e.lines:
                    line.encode("utf-8")  # raises on a lone surrogate
                    if e.form == "alone":
                        assert line == f"ValueError: shard {shown} unreadable"
    # a pair escaped whole is one character, kept
    (ev,) = [e for e in events('  "message": "ValueError: shard \\ud83d\\ude00 unreadable",') if e.kind == "traceback"]
    assert ev.lines == ["ValueError: shard \U0001F600 unreadable"]


@settings(max_examples=20, deadline=None, database=None)
@given(st.integers(min_value=1, max_value=4), st.booleans(), st.booleans())
def test_a_traceback_indented_as_a_whole_keeps_its_exception_line(shift, header, chained):
    # a traceback pasted in an indented block, or left under a launcher's field whose head
    # was cut off: every line is shifted right, the exception line still stands left of its
    # frames, and it is read as the exception line (without the shift), whether the header
    # survived or not
    text = TB if header else TB.split("\n", 1)[1]
    if chained:
        text = text.replace("ValueError: bad", "KeyError: 'shard'") + "\n\nDuring handling of the above exception, another exception occurred:\n\n" + TB
    pad = " " * shift
    evs = [e for e in events("\n".join(pad + ln if ln else ln for ln in (text + "\n\nafter").split("\n"))) if e.kind == "traceback"]
    assert len(evs) == 1 and evs[0].exception_idx
    assert evs[0].lines[evs[0].exception_idx[-1]] == "ValueError: bad"
    # its frames stay frames: no line deeper than the first frame is an exception line
    assert all(evs[0].lines[i] in ("ValueError: bad", "KeyError: 'shard'") for i in evs[0].exception_idx)


def test_an_error_record_naming_its_class_in_a_field_of_its_own_is_that_exception():
    # an error copied as a JSON object: its class in one field ("name", nbformat's "ename"),
    # its message in the next ("message", "evalue"), pretty-printed (any indentation, the
    # string left open where the paste is cut) or on one line; read as `Class: message`
    forms = [
        '{\n\t"name": "FileNotFoundError",\n\t"message": "[Errno 2] No such file or directory: \'shards/00017.bin\'",\n\t"stack": "---"\n}',
        '  {\n    "ename": "FileNotFoundError",\n    "evalue": "[Errno 2] No such file or directory: \'shards/00017.bin\'\nthe rest',
        '{"name": "FileNotFoundError", "message": "[Errno 2] No such file or directory: \'shards/00017.bin\'", "stack": "..."}',
    ]
    for text in forms:
        found = [ev for ev in events("epoch 3 step 120\n" + text) if ev.kind == "traceback"]
        assert [ev.lines for ev in found] == [["FileNotFoundError: [Errno 2] No such file or directory: 'shards/00017.bin'"]], text


def test_a_record_whose_name_is_no_exception_class_is_not_one():
    # a JSON config's name field above a message that is no exception; a record whose message
    # already names its class keeps it as it is
    assert not [ev for ev in events('{\n  "name": "ResNet50",\n  "message": "loaded 25M parameters"\n}') if ev.kind == "traceback"]
    (ev,) = [ev for ev in events('{\n  "name": "ChildFailedError",\n  "message": "ValueError: bad batch"\n}') if ev.kind == "traceback"]
    assert ev.lines == ["ValueError: bad batch"]

"""Prefix splitting: who printed a line, and what it says."""

from __future__ import annotations

from datetime import datetime

import pytest

from slurmdoc.ingest.prefix import LAUNCHER_MARKS, LAUNCHER_WORDS, PrefixParser, classify_origin
from slurmdoc.models import SourceInfo

SRC = SourceInfo(index=0, path="job.log")
P = PrefixParser(2025)


def parse(raw, src=SRC):
    return P.parse(src, 1, raw)


@pytest.mark.parametrize(
    "raw, label, rank, local, host, text",
    [
        ("3: Traceback (most recent call last):", 3, None, None, None, "Traceback (most recent call last):"),
        (" 7: step 3", 7, None, None, None, "step 3"),
        ("12: x", 12, None, None, None, "x"),
        ("[rank3]: RuntimeError: boom", None, 3, None, None, "RuntimeError: boom"),
        ("[rank3]:[E0321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 3] x", None, 3, None, None, "[E0321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 3] x"),
        ("[default2]:Traceback (most recent call last):", None, None, 2, None, "Traceback (most recent call last):"),
        ("1: [rank9]: ValueError: x", 1, 9, None, None, "ValueError: x"),
        ("node-12: [rank19]: ValueError: x", None, 19, None, "node-12", "ValueError: x"),
        ("192.168.13.81: [rank19]: ValueError: x", None, 19, None, "192.168.13.81", "ValueError: x"),
        ("[alphagpu12:5]:[rank5]: ValueError: x", None, 5, None, "alphagpu12", "ValueError: x"),
        ("i.pretrain/0 [default2]:[rank2]: ValueError: x", None, 2, 2, None, "ValueError: x"),
        ("[gpu-node-3:1]: hello", None, None, 1, "gpu-node-3", "hello"),
        ("gpu003: Traceback (most recent call last):", None, None, None, "gpu003", "Traceback (most recent call last):"),
        ("10.0.0.3: hello", None, None, None, "10.0.0.3", "hello"),
        ("[rank: 3] Traceback (most recent call last):", None, 3, None, None, "Traceback (most recent call last):"),
        ("[RANK 1] 2026-05-19 10:10:29,701 [ERROR] boom", None, 1, None, None, "2026-05-19 10:10:29,701 [ERROR] boom"),
    ],
)
def test_prefix_forms(raw, label, rank, local, host, text):
    ll = parse(raw)
    assert (ll.who.label, ll.who.rank, ll.who.local, ll.node, ll.text) == (label, rank, local, host, text)
    assert ll.raw[ll.offset :] == ll.text


@pytest.mark.parametrize(
    "raw",
    [
        "RuntimeError: [PG 0 (default_pg) Rank 1] Watchdog caught collective operation timeout",
        "node1:1234:1290 [3] NCCL INFO comm 0x5566 rank 11 nranks 16 cudaDev 3 busId 1b000 - Init COMPLETE",
        "ValueError: expected 3 got 4",
        "c10d: connect failed",
        "Epoch 3: 100%",
    ],
)
def test_ranks_inside_messages_are_not_prefixes(raw):
    ll = parse(raw)
    assert ll.who.rank is None and ll.who.label is None and ll.who.local is None
    assert ll.text == raw


def test_inner_pg_rank_is_not_the_global_rank():
    ll = parse("[rank9]:[E1107 10:00:00.1 ProcessGroupNCCL.cpp:1] [PG ID 5 PG GUID 55(mesh_replicate) Rank 1] Watchdog caught")
    assert ll.who.rank == 9


def test_timestamp_before_rank_prefix():
    ll = parse("2026-09-18 19:29:24 [rank3]: Traceback (most recent call last):")
    assert ll.who.rank == 3
    assert ll.ts == datetime(2026, 9, 18, 19, 29, 24)
    assert ll.text.startswith("Traceback")


def test_ray_and_determined_prefixes():
    ll = parse("(RayTrainWorker pid=499400, ip=10.0.0.5) Traceback (most recent call last):")
    assert ll.tag == "RayTrainWorker pid=499400" and ll.node == "10.0.0.5"
    assert ll.text.startswith("Traceback")
    ll = parse("[2024-02-27T21:35:32.106313Z] fa88a9df || Traceback (most recent call last):")
    assert ll.text.startswith("Traceback") and ll.ts == datetime(2024, 2, 27, 21, 35, 32, 106313)


def test_per_rank_file_gives_rank():
    src = SourceInfo(index=1, path="logs/rank_7.log", rank_hint=7)
    ll = parse("Traceback (most recent call last):", src)
    assert ll.who.rank == 7 and ll.origin == "rank"


def test_torchrun_logdir_file_gives_local_rank():
    src = SourceInfo(index=1, path="run/attempt_0/3/stderr.log", rank_hint=3, rank_hint_local=True)
    ll = parse("boom", src)
    assert ll.who.local == 3 and ll.who.rank is None


def test_launcher_and_scheduler_lines_carry_no_rank_from_the_label():
    ll = parse("0: E0726 10:59:50.786825 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0")
    assert ll.origin == "launcher" and ll.who.label == 0 and ll.who.rank is None
    ll = parse("srun: error: node-1: task 3: Exited with exit code 1")
    assert ll.origin == "scheduler"


def test_exception_naming_a_launcher_module_is_not_a_launcher_record():
    assert classify_origin("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:") is None
    assert classify_origin("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1)") == "launcher"


@pytest.mark.parametrize(
    "raw, pieces",
    [
        ("100%|##########| 10/10 [00:01<00:00]Traceback (most recent call last):", ["100%|##########| 10/10 [00:01<00:00]", "Traceback (most recent call last):"]),
        ("…| 12/100 [00:12<01:30][rank1]:Traceback (most recent call last):", ["…| 12/100 [00:12<01:30]", "[rank1]:Traceback (most recent call last):"]),
        ("[rank1]: Traceback (most recent call last):", ["[rank1]: Traceback (most recent call last):"]),
        ("i.pretrain/0 [default2]:[rank2]: x", ["i.pretrain/0 [default2]:[rank2]: x"]),
        ("  traceback : Traceback (most recent call last):", ["  traceback : Traceback (most recent call last):"]),
        ("ValueError: Caught ValueError in DataLoader worker process 0. Original Traceback (most recent call last):", ["ValueError: Caught ValueError in DataLoader worker process 0. Original Traceback (most recent call last):"]),
        ("step 1 loss 2.7277step 1 loss 2.7277", ["step 1 loss 2.7277step 1 loss 2.7277"]),
    ],
)
def test_glued_records_are_split(raw, pieces):
    got = P.split_glued(raw)
    assert got == pieces and "".join(got) == raw


def test_record_glued_after_a_prefixed_progress_bar_is_split():
    raw = "[rank0]: 12%|#         | 12/100 [00:12<01:30][rank1]:Traceback (most recent call last):"
    assert P.split_glued(raw) == ["[rank0]: 12%|#         | 12/100 [00:12<01:30]", "[rank1]:Traceback (most recent call last):"]


def test_file_names_and_epoch_stamps_are_not_hosts_or_streams():
    ll = parse("train_llama3.py: error: unrecognized arguments: --foo")
    assert ll.node is None and ll.text.startswith("train_llama3.py:")
    a = parse("1711000000.001 [rank0]: Traceback (most recent call last):")
    b = parse("1711000000.002 [rank0]:   File \"t.py\", line 1, in <module>")
    assert a.stream == b.stream and a.who.rank == 0


def test_scheduler_line_glued_to_a_progress_bar_is_split():
    raw = " 46%|####6     | 31/67 [29:02<35:12, 58.67s/it]slurmstepd: error: *** STEP 6053.0 ON gpu-2 CANCELLED AT 2024-04-23T12:18:08 ***"
    head, tail = P.split_glued(raw)
    assert tail.startswith("slurmstepd: error:") and head + tail == raw
    assert parse(tail).origin == "scheduler"
    assert parse("slurmstepd-gpu20-15: error: Detected 1 oom_kill event in StepId=5.0.").origin == "scheduler"


@pytest.mark.parametrize(
    "raw, tag, host, text",
    [
        ("(pid=881) ValueError: x", "pid=881", None, "ValueError: x"),
        ("(pid=881, ip=10.1.2.3) ValueError: x", "pid=881", "10.1.2.3", "ValueError: x"),
        ("(raylet) worker died", "raylet", None, "worker died"),
        ("(raylet, ip=10.1.2.3) worker died", "raylet", "10.1.2.3", "worker died"),
        # the remnant of a colour code whose escape byte was lost in a paste
        ("(MyActor pid=12, ip=10.1.2.3)[0m Fatal Python error: Aborted", "MyActor pid=12", "10.1.2.3", "Fatal Python error: Aborted"),
        ("stderr: Traceback (most recent call last):", "stderr", None, "Traceback (most recent call last):"),
        ("stdout | epoch 3", "stdout", None, "epoch 3"),
    ],
)
def test_process_prefixes_are_not_ranks(raw, tag, host, text):
    ll = parse(raw)
    assert (ll.tag, ll.node, ll.text) == (tag, host, text)
    assert ll.who.rank is None and ll.who.local is None and ll.who.label is None


def test_ray_actors_and_daemons_are_separate_printers():
    a, b, c = parse("(A pid=1) x"), parse("(A pid=2) x"), parse("(raylet) x")
    assert len({a.stream, b.stream, c.stream}) == 3


def test_bracketed_rank_at_line_start_is_global_but_a_process_group_message_is_not():
    assert parse("[Rank 5] RuntimeError: x").who.rank == 5
    assert parse("[RANK 5] 2026-01-01 00:00:00,000 [ERROR] x").who.rank == 5
    ll = parse("[Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3)")
    assert ll.who.rank is None and ll.text.startswith("[Rank 5] Watchdog")
    ll = parse("[rank9]:[E ProcessGroupNCCL.cpp:1] [PG 1 Rank 0] Watchdog caught collective operation timeout")
    assert ll.who.rank == 9
    # a Lightning rank inside a Ray worker's output
    assert parse("(RayTrainWorker pid=7) [rank: 3] loss 0.1").who.rank == 3


def test_words_that_look_like_prefixes_are_text():
    for raw in ("(1) load the data", "stdout_file = run.log", "(see above) RuntimeError: x"):
        ll = parse(raw)
        assert ll.offset == 0 and ll.tag is None, raw


@pytest.mark.parametrize("head", ["[2024-04-20 18:56:38,931] ", "2024-04-20 18:56:38,931 - ", "2024-04-20T18:56:38.931Z | "])
def test_a_launcher_record_behind_a_logging_time_is_the_launchers(head):
    # a logging formatter's time, then the record's logger name and level: once the time is
    # taken off as a prefix, the rest is still a launcher's log record, whatever it starts with
    for body in ("torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 0 (pid: 358104) of binary: /usr/bin/python3",
                 "torch.distributed.run: [WARNING] Setting OMP_NUM_THREADS environment variable for each process"):
        ll = parse(head + body)
        assert ll.origin == "launcher" and ll.text == body and ll.ts is not None
    # the program's own words behind the same time stay the program's
    assert parse(head + "step 3 loss 2.0").origin == "unknown"


@pytest.mark.parametrize("tag, gap", [("job-a/0", " "), ("trainer-1", "  | "), ("exp.pretrain/3", "   "), ("w@node7", " ")])
def test_a_tools_tag_in_front_of_a_traceback_is_learnt_and_taken_off(tag, gap):
    # a job runner's or a container tool's tag in front of every line: learnt from lines
    # whose rest is a traceback's structure, then taken off every line with a tag of that
    # shape (another replica's number included), so the traceback reads as one
    p = PrefixParser(2025)
    lines = [tag + gap + t for t in ('  File "/srv/run.py", line 3, in <module>', "    main()", '  File "/srv/run.py", line 9, in main', "    raise ValueError(x)", "ValueError: bad value 7")]
    out = [p.parse(SRC, i, raw) for i, raw in enumerate(lines, 1)]
    assert out[0].tag is None and out[1].tag is None  # one frame is not enough to learn a tag from
    # from the second frame on: taken off, the frames' and source lines' indentation kept
    assert [ll.text for ll in out[2:]] == ['  File "/srv/run.py", line 9, in main', "    raise ValueError(x)", "ValueError: bad value 7"]
    assert {ll.tag for ll in out[2:]} == {tag}
    other = tag.replace("0", "5").replace("1", "6").replace("3", "8").replace("7", "2")
    assert p.parse(SRC, 9, other + gap + "step 12 loss 2.0").tag == other


def test_a_first_word_is_no_tag_without_a_traceback_behind_it():
    # words before a gap at the start of ordinary lines (a table, a log without prefixes)
    # are the program's own, however often they recur
    p = PrefixParser(2025)
    rows = [f"epoch-{i}   loss 2.{i}   lr 1e-4" for i in range(9)] + ["gpu0   Tesla V100   32GB"] * 3
    assert all(p.parse(SRC, i, r).tag is None and p.parse(SRC, i, r).text == r for i, r in enumerate(rows, 1))
    # a word with no digit, dot, slash or @ before a plain gap is never taken for a tag
    q = PrefixParser(2025)
    assert [q.parse(SRC, i, "worker   File \"a.py\", line 1, in f").tag for i in (1, 2, 3)] == [None, None, None]


@pytest.mark.parametrize(
    "raw, rank, host, local, tag, text",
    [
        ("[rank: 2] x", 2, None, None, None, "x"),
        ("[gpu-1:3]: x", None, "gpu-1", 3, None, "x"),
        ("[12:3]: x", None, None, None, None, "[12:3]: x"),  # a number is no host
        ("[2024-02-27T21:35:32Z] fa88a9df || x", None, None, None, "fa88a9df", "x"),
        ("[2024-02-27 21:35:32] x", None, None, None, None, "x"),  # a logging time, no bracketed prefix
    ],
)
def test_what_a_bracket_at_the_start_opens(raw, rank, host, local, tag, text):
    ll = parse(raw)
    assert (ll.who.rank, ll.node, ll.who.local, ll.tag, ll.text) == (rank, host, local, tag, text)


def test_lines_of_one_printer_share_its_rank_and_stream():
    p = PrefixParser(2025)
    a, b = p.parse(SRC, 1, "[rank3]: x"), p.parse(SRC, 2, "[rank3]: y")
    assert a.who is b.who and a.stream is b.stream
    # the same stream read from a source with a node hint: that source's own RankRef
    c = p.parse(SourceInfo(index=0, path="node2.log", node_index_hint=2), 3, "[rank3]: z")
    assert c.who.node_index == 2 and a.who.node_index is None and c.stream == a.stream


def test_every_launcher_mark_holds_a_word_the_cheap_test_looks_for():
    """A line is tried for a launcher's marks only when its head holds one of LAUNCHER_WORDS:
    a mark without any of them would never be found."""
    assert all(any(w in m for w in LAUNCHER_WORDS) for m in LAUNCHER_MARKS)


# ---- text glued after a progress bar ---------------------------------------------------------

from hypothesis import given, strategies as st  # noqa: E402


@st.composite
def progress_bars(draw):
    """A tqdm-style bar as it is drawn: description, percentage and bar, count, then the
    bracketed field of elapsed<remaining time, rate and postfix, in the forms tqdm prints."""
    total = draw(st.integers(1, 10**6))
    n = draw(st.integers(0, total))
    pct = n * 100 // total
    clock = st.builds(lambda h, m, s: (f"{h}:" if h else "") + f"{m:02d}:{s:02d}", st.integers(0, 30), st.integers(0, 59), st.integers(0, 59))
    elapsed = draw(clock)
    remaining = draw(st.one_of(clock, st.just("?")))
    rate = draw(st.sampled_from(["?it/s", " 3.06it/s", "12.50it/s", " 1.84s/it", "41.2MB/s", "7.00kB/s", None]))
    postfix = draw(st.sampled_from(["", ", loss=0.314", ", lr=3e-4, loss=nan"]))
    desc = draw(st.sampled_from(["", "Epoch 0: ", "Warmup: ", "train "]))
    field = f"[{elapsed}<{remaining}" + (f", {rate}" if rate else "") + (postfix if rate else "") + "]"
    if draw(st.booleans()) and rate:  # a bar with no total: count, then elapsed and rate
        return f"{desc}{n}it {field.split('<')[0]}, {rate}{postfix}]"
    bar = "#" * (pct // 10) + " " * (10 - pct // 10)
    return f"{desc}{pct:3d}%|{bar}| {n}/{total} {field}"


@st.composite
def keras_bars(draw):
    """Keras's bar as it is drawn mid-epoch: count, the bar (`[====>....]`, or Keras 3's heavy
    line), then the time left or the step time, then each metric's value; no closing mark."""
    total = draw(st.integers(1, 10**6))
    n = draw(st.integers(0, total))
    done = n * 30 // total
    value = st.builds(lambda v, e: f"{v:.4f}" if not e else f"{v:.4e}", st.floats(0, 100, allow_nan=False), st.booleans())
    metrics = "".join(f" - {name}: {draw(value)}" for name in draw(st.lists(st.sampled_from(["loss", "acc", "val_loss", "accuracy", "mae"]), max_size=3)))
    if draw(st.booleans()):
        left = draw(st.sampled_from(["365s", "1:02:11", "0s"]))
        return f"{n}/{total} [" + "=" * done + (">" if done < 30 else "") + "." * max(0, 29 - done) + f"] - ETA: {left}" + metrics
    return f"{n}/{total} " + "\u2501" * 20 + f" {draw(st.integers(0, 900))}s {draw(st.integers(1, 900))}ms/step" + metrics


MESSAGES = st.sampled_from([
    "Killed", "Segmentation fault (core dumped)", "double free or corruption (out)", "free(): invalid pointer",
    "Traceback (most recent call last):", "RuntimeError: CUDA error: an illegal memory access was encountered",
    "terminate called after throwing an instance of 'std::bad_alloc'", "zsh: killed     python fit.py",
])


@given(st.one_of(progress_bars(), keras_bars()), MESSAGES)
def test_text_glued_after_a_progress_bar_is_a_line_of_its_own(bar, message):
    assert P.split_glued(bar + message) == [bar, message]


@given(st.one_of(progress_bars(), keras_bars()), st.sampled_from(["", " ", "  "]))
def test_a_progress_bar_alone_or_padded_is_one_line(bar, tail):
    assert P.split_glued(bar + tail) == [bar + tail]


def test_the_text_after_a_bar_keeps_the_bar_s_physical_line():
    from slurmdoc.api import split_line

    parser = PrefixParser(2000)
    src = SourceInfo(index=0, path="x.log")
    lines = split_line(parser, src, 7, " 31%|###       | 331/1063 [01:06<03:59,  3.06it/s]Killed")
    assert [ll.text for ll in lines][-1] == "Killed" and {ll.lineno for ll in lines} == {7}


@pytest.mark.parametrize("unit", ["1/1 [=] - a: x ", "2/9 \u2501\u2501 - loss: 0.5 ", "3/3 [>..] 12ms/step - b c: 7 "])
def test_looking_for_text_glued_after_a_bar_takes_time_in_proportion_to_the_line(unit):
    # a line (up to the reader's 1 MiB) made of many bar-like pieces and no glued text: each
    # piece's search for the end of a bar must not run on to the end of the line, or a long
    # line costs minutes
    import time

    line = unit * ((256 << 10) // len(unit))
    t0 = time.perf_counter()
    assert P.split_glued(line) == [line]
    assert P.split_glued(line + "5/5 [=====] - loss: 0.25Killed")[-1] == "Killed"
    assert time.perf_counter() - t0 < 2.0


@pytest.mark.parametrize("unit", ["[00:01<00:02, 3.1it/s]x", "5/5 [=] - a: 1x", "x Traceback (most recent call last): ", "[rank1]: x "])
def test_a_line_of_very_many_glued_records_is_cut_in_time_in_proportion_to_it(unit):
    # each cut searches the rest of the line again: cuts are bounded per physical line, the
    # pieces after the last one stay together, and they all concatenate back to the line
    import time

    from slurmdoc.ingest import prefix

    line = unit * ((256 << 10) // len(unit))
    t0 = time.perf_counter()
    pieces = P.split_glued(line)
    assert time.perf_counter() - t0 < 2.0
    assert "".join(pieces) == line and 2 <= len(pieces) <= prefix.MAX_GLUED_PIECES
    few = unit * 10
    assert len(P.split_glued(few)) >= 9  # a few glued records are all cut apart


def test_past_the_bound_on_cuts_the_text_after_a_line_s_last_bar_is_still_its_own():
    # hundreds of progress updates glued with no line break between them (a paste that lost
    # its carriage returns), then the message that ended the run: the message is still a
    # line of its own, whatever the bound on cuts left together before it
    bars = "".join(f"Epoch 1: {i % 100:2d}%|#   | {i}/900 [00:{i % 60:02d}<01:00,  9.9it/s]" for i in range(300))
    pieces = P.split_glued(bars + "Killed")
    assert pieces[-1] == "Killed" and "".join(pieces) == bars + "Killed"


@pytest.mark.parametrize("stamp", ["2031-02-03T04:05:06.123456789Z ", "2031-02-03T04:05:06.1234567Z ", "2031-02-03 04:05:06.123 ",
                                   "2031-02-03T04:05:06+02:00 ", "2031-02-03T04:05:06Z "])
def test_a_collectors_time_in_front_of_every_line_is_taken_off(stamp):
    # a container runtime, a CI runner or a log shipper puts its time and one blank before each
    # line it passes on: the program's line behind it (its prefixes, a frame's indentation, its
    # own time) reads as it would without it, and the line carries the collector's time
    p = PrefixParser(2025)
    for body, label, rank, text in [
        ("4: Traceback (most recent call last):", 4, None, "Traceback (most recent call last):"),
        ('4:   File "train.py", line 3, in <module>', 4, None, '  File "train.py", line 3, in <module>'),
        ("[rank5]: ValueError: x", None, 5, "ValueError: x"),
        ("1: [rank9]: ValueError: x", 1, 9, "ValueError: x"),
        ('  File "train.py", line 3, in <module>', None, None, '  File "train.py", line 3, in <module>'),
        ("RuntimeError: boom", None, None, "RuntimeError: boom"),
    ]:
        ll = p.parse(SRC, 1, stamp + body)
        assert (ll.who.label, ll.who.rank, ll.text) == (label, rank, text), body
        assert ll.ts is not None
    # the program's own time behind the collector's is the line's time
    ll = p.parse(SRC, 1, stamp + "[2030-01-01 00:00:00,000] step 3")
    assert ll.ts == datetime(2030, 1, 1)
    # a launcher's record behind it is still the launcher's
    assert p.parse(SRC, 1, stamp + "[E1105 10:00:03.123 1234 torch/distributed/elastic/multiprocessing/api.py:869] failed").origin == "launcher"


@pytest.mark.parametrize("own, ts", [
    ("2031-02-03 03:00:05,000 INFO step 3", datetime(2031, 2, 3, 10, 0, 5)),  # seven hours behind
    ("2031-02-03 15:30:04,900 INFO step 3", datetime(2031, 2, 3, 10, 0, 4, 900000)),  # five and a half ahead
    ("2031-02-04 00:00:05 step 3", datetime(2031, 2, 3, 10, 0, 5)),  # fourteen ahead, past midnight
    ("2031-02-03 10:00:04,000 INFO step 3", datetime(2031, 2, 3, 10, 0, 4)),  # one clock: as written
    ("2031-02-03T03:00:04-07:00 step 3", datetime(2031, 2, 3, 10, 0, 4)),  # its own zone: as written
    ("E0203 03:00:05.000000 1 x.cc:1] boom", datetime(2031, 2, 3, 10, 0, 5)),  # glog: no year, no zone
    ("2030-01-01 00:00:00,000 step 3", datetime(2030, 1, 1)),  # further apart than any zone: two clocks, as written
])
def test_a_programs_own_time_in_another_zone_is_read_on_the_collectors_clock(own, ts):
    # a collector writes its time with its zone; the program behind it often writes its local
    # time with none. Read as written, its lines and the lines that carry only the collector's
    # time (a traceback's) would be hours apart, and so would two printers of which only one
    # writes its own time: the program's time is moved by the whole quarter hours between the
    # two clocks (a zone's offset, up to a day's)
    p = PrefixParser(2031)
    assert p.parse(SRC, 1, "2031-02-03T10:00:05.250Z " + own).ts == ts


def test_a_programs_zone_is_learnt_once_per_input():
    # the offset is learnt from the input's first line with both times and moves every own
    # time of the input alike: a line the collector passed on late (buffered output) keeps the
    # program's spacing, and another input learns its own
    p = PrefixParser(2025)
    assert p.parse(SRC, 1, "2031-02-03T10:00:05Z 2031-02-03 03:00:05,000 step 1").ts == datetime(2031, 2, 3, 10, 0, 5)
    assert p.parse(SRC, 2, "2031-02-03T10:40:00Z 2031-02-03 03:10:00,000 step 2").ts == datetime(2031, 2, 3, 10, 10)
    other = SourceInfo(index=1, path="other.log")
    assert p.parse(other, 1, "2031-02-03T10:00:05Z 2031-02-03 10:00:05,000 step 1").ts == datetime(2031, 2, 3, 10, 0, 5)


@pytest.mark.parametrize("raw, text", [
    ("2031-02-03 04:05:06,123 - ERROR - boom", "ERROR - boom"),  # a logging formatter's head, read off as always
    ("[2031-02-03 04:05:06,123] torch.distributed.elastic.multiprocessing.api: [ERROR] failed", "torch.distributed.elastic.multiprocessing.api: [ERROR] failed"),
    ("2031-02-03T04:05:06.123456Z", "2031-02-03T04:05:06.123456Z"),  # a time alone is the line
    ("2031-02-03T04:05:06Z  x", " x"),  # one blank is the collector's, the rest the line's
])
def test_what_a_leading_time_leaves(raw, text):
    assert PrefixParser(2025).parse(SRC, 1, raw).text == text


@pytest.mark.parametrize("raw, rank, tag, text", [
    ("[1,3]<stderr>:Traceback (most recent call last):", 3, None, "Traceback (most recent call last):"),
    ("[1,12]<stdout>:step 5", 12, None, "step 5"),
    ("[1,mpirank:7,algo-2]<stderr>:RuntimeError: x", 7, None, "RuntimeError: x"),
    ("[5]<stderr>:  File \"a.py\", line 1, in <module>", 5, None, "  File \"a.py\", line 1, in <module>"),
    ("[pod/job-worker-3/pytorch] Traceback (most recent call last):", None, "pod/job-worker-3/pytorch", "Traceback (most recent call last):"),
    ("[3] Traceback (most recent call last):", 3, None, "Traceback (most recent call last):"),  # MPICH's, Intel MPI's -l
    ("[2]   File \"a.py\", line 1, in <module>", 2, None, "  File \"a.py\", line 1, in <module>"),
])
def test_a_launchers_output_tag_names_the_printer(raw, rank, tag, text):
    # an MPI launcher's tag (Open MPI's --tag-output, horovodrun's) names the rank and the
    # stream; kubectl's --prefix names the pod and container: each is a prefix, and lines
    # of one printer share its stream whichever stream (stdout, stderr) they came by
    ll = parse(raw)
    assert (ll.who.rank, ll.tag, ll.text) == (rank, tag, text)
    if rank is not None:
        assert ll.origin == "rank"
        other = parse(raw.replace("<stderr>", "<stdout>") if "<stderr>" in raw else raw.replace("<stdout>", "<stderr>"))
        assert other.stream == ll.stream


def test_a_bracketed_number_is_mpichs_rank_tag_once_it_recurs_or_heads_a_traceback():
    # MPICH's `[N] ` stands before every line of rank N, so a rank's tag recurs, and it stands
    # before a traceback's lines; a program's numbered list names each number once. A number
    # seen once before a program's words is the program's; seen again, or before a traceback's
    # header, frame or exception line, it is a rank's tag, and then every `[N] ` of that input is
    p = PrefixParser(2025)
    assert [p.parse(SRC, i, raw).who.rank for i, raw in enumerate(["[1] Preparing data", "[2] Building model", "[3] Training"], 1)] == [None, None, None]
    q = PrefixParser(2025)
    assert [q.parse(SRC, i, raw).who.rank for i, raw in enumerate(["[0] start", "[1] start", "[0] step 1", "[1] step 1", "[5] x"], 1)] == [None, None, 0, 1, 5]
    r = PrefixParser(2025)
    assert r.parse(SRC, 1, "[3] Traceback (most recent call last):").who.rank == 3
    assert r.parse(SRC, 2, "[2] done").who.rank == 2


@pytest.mark.parametrize("raw", ["[1] 51877", "[1]  + 51877 killed     python fit.py --epochs 4", "[2]  - 9120 done       python eval.py",
                                 # bash's table for a job that is neither the current (`+`) nor the
                                 # previous (`-`) one: a blank where the mark would be
                                 "[3]   Killed                  python fit.py --epochs 3",
                                 "[2]   Segmentation fault      (core dumped) ./fit",
                                 "[4]   Exit 1                  python eval.py",
                                 "[5]   Done                    python export.py",
                                 "[1]   Running                 python fit.py &"])
def test_a_shells_job_table_is_no_rank_tag(raw):
    # `[N]` before a process id, or before a job's state in the shell's words, is a shell's
    # job (started, or its end), not rank N's output
    ll = parse(raw)
    assert ll.who.rank is None and ll.text == raw


@pytest.mark.parametrize("head", ["[1]", "[1] ", "[1] +", "[12]\t", "[1,3]<stderr>:", "[pod/p/c] ", "(a, rank=1, pid=2) "])
@pytest.mark.parametrize("run", [" ", "\t ", "1 ", "a, "])
def test_a_launchers_tag_before_a_long_run_is_read_in_time_in_proportion_to_the_line(head, run):
    # a line (up to the reader's 1 MiB) that starts like a launcher's tag or a shell's job and
    # goes on with a long run of what those patterns repeat (blanks, digits, names and commas):
    # telling a tag from a job table must not try every way of splitting the run
    import time

    line = head + run * ((256 << 10) // len(run)) + "x"
    t0 = time.perf_counter()
    ll = parse(line)
    P.split_glued(line)
    assert time.perf_counter() - t0 < 2.0
    assert line.endswith(ll.text)


@pytest.mark.parametrize("raw, tag, node, text", [
    ("(head, rank=0, pid=23862) Traceback (most recent call last):", "head pid=23862", "head", "Traceback (most recent call last):"),
    ("(node-0, worker1, rank=1, pid=22755, ip=172.31.81.91) RuntimeError: x", "node-0, worker1 pid=22755", "172.31.81.91", "RuntimeError: x"),
])
def test_a_skypilot_nodes_prefix_names_a_printer_not_a_rank(raw, tag, node, text):
    # SkyPilot's `(<node names>, rank=N, pid=P[, ip=...])`: N is the node's rank in the
    # cluster, not a process's, so the prefix names a printer (its node), no rank
    ll = parse(raw)
    assert (ll.who.rank, ll.tag, ll.node, ll.text) == (None, tag, node, text)


@pytest.mark.parametrize("head", ["(worker1, rank=1, pid=2990, ip=10.0.0.2) ", "(RayTrainWorker pid=4001) ", "[1,5]<stderr>:"])
def test_a_launchers_prefix_before_a_torchrun_chain_is_one_line(head):
    # a node's or a worker's prefix, then torchrun's `[rankN]:`: one line of rank N, not a
    # record glued onto another
    raw = head + "[rank5]: Traceback (most recent call last):"
    assert P.split_glued(raw) == [raw]
    ll = parse(raw)
    assert (ll.who.rank, ll.text) == (5, "Traceback (most recent call last):")


def test_a_collectors_time_without_a_year_and_journalds_process():
    # moreutils' `ts`, syslog's and journald's short time (no year: dated as a glog time is),
    # and journald's `host ident[pid]: ` after it, one printer per process
    p = PrefixParser(2025, until=datetime(2025, 12, 1))
    ll = p.parse(SRC, 1, "Nov 27 13:40:01 4: Traceback (most recent call last):")
    assert (ll.who.label, ll.text, ll.ts) == (4, "Traceback (most recent call last):", datetime(2025, 11, 27, 13, 40, 1))
    ll = p.parse(SRC, 2, 'Nov 27 13:40:01 gpu-3 python[1234]:   File "a.py", line 3, in <module>')
    assert (ll.node, ll.tag, ll.text) == ("gpu-3", "python[1234]", '  File "a.py", line 3, in <module>')
    assert p.parse(SRC, 3, "Nov 27 13:40:02 gpu-3 python[99]: x").stream != ll.stream
    # a program's words after the time are not journald's process (no `[pid]`)
    assert p.parse(SRC, 4, "Nov 27 13:40:01 Epoch 3: loss 2.0").text == "Epoch 3: loss 2.0"
    assert p.parse(SRC, 5, "November rain").text == "November rain"


@pytest.mark.parametrize("head", ["Nov 27 13:40:01 ", "Nov  7 13:40:01.250 ", "Nov 27 13:40:01 gpu-3 python[1234]: ", "2025-11-27T13:40:01Z "])
@pytest.mark.parametrize("body, label, rank", [
    ("[rank3]: RuntimeError: boom", None, 3),
    ("4: [rank3]: RuntimeError: boom", 4, 3),
    ("[1,3]<stderr>:RuntimeError: boom", None, 3),
    ("(worker1, rank=1, pid=22) [rank3]: RuntimeError: boom", None, 3),
])
def test_a_collectors_time_before_a_lines_own_prefix_keeps_the_line_whole(head, body, label, rank):
    # whatever the collector's time looks like (with a year or without, journald's process
    # after it), the line behind it is one record: its prefix is the line's own, not a record
    # glued on, and the line keeps the collector's time with its rank and label
    p = PrefixParser(2025, until=datetime(2025, 12, 1))
    assert p.split_glued(head + body) == [head + body]
    ll = p.parse(SRC, 1, head + body)
    assert (ll.who.label, ll.who.rank, ll.text) == (label, rank, "RuntimeError: boom") and ll.ts is not None


@pytest.mark.parametrize("raw, pieces", [
    ("[1,0]<stdout>:---- train end ----[1,1]<stdout>:step 3", ["[1,0]<stdout>:---- train end ----", "[1,1]<stdout>:step 3"]),
    ("[1,mpirank:0,algo-1]<stdout>:done[1,mpirank:1,algo-1]<stderr>:Traceback (most recent call last):",
     ["[1,mpirank:0,algo-1]<stdout>:done", "[1,mpirank:1,algo-1]<stderr>:Traceback (most recent call last):"]),
    ("[1,0]<stderr>:RuntimeError: x", ["[1,0]<stderr>:RuntimeError: x"]),
])
def test_an_mpi_tagged_line_glued_onto_another_is_cut_off(raw, pieces):
    # a rank's line printed without its newline, and the next tagged line lands on it
    assert PrefixParser(2025).split_glued(raw) == pieces


@pytest.mark.parametrize(
    "raw, replica, local, text",
    [
        # TorchX's `<role>/<replica> ` before torchrun's `[<local rank>]:` (a role name with
        # dots, dashes or underscores; the line's own indentation kept)
        ("trainer/1 [3]:Traceback (most recent call last):", 1, 3, "Traceback (most recent call last):"),
        ("ddp/0 [0]:[1] loss: 2.046", 0, 0, "[1] loss: 2.046"),
        ("my_app.train-x/12 [7]:  File \"t.py\", line 9, in step", 12, 7, "  File \"t.py\", line 9, in step"),
        ("worker/2 [1]:", 2, 1, ""),
    ],
)
def test_torchx_replica_and_local_rank(raw, replica, local, text):
    ll = PrefixParser(2025).parse(SRC, 1, raw)
    # the replica stands where `srun torchrun`'s node label does: one printer per replica
    # and local rank; the global rank is left to the layout (it needs the ranks per replica)
    assert (ll.who.label, ll.who.local, ll.who.rank, ll.text, ll.origin) == (replica, local, None, text, "rank")
    assert ll.tag == raw.split(" ", 1)[0]


def test_torchx_replicas_are_separate_printers():
    p = PrefixParser(2025)
    a = p.parse(SRC, 1, "trainer/0 [1]:step 3")
    b = p.parse(SRC, 2, "trainer/1 [1]:step 3")
    c = p.parse(SRC, 3, "trainer/0 [1]:step 4")
    assert a.stream != b.stream and a.stream == c.stream


@pytest.mark.parametrize(
    "raw",
    [
        "see docs/3 [1]: the first note",  # words before it: no prefix
        "trainer/0 [x]:boom",
        "trainer/0 [3] boom",  # no colon after the bracket
        "/0 [3]:boom",
    ],
)
def test_torchx_lookalikes_are_not_prefixes(raw):
    ll = PrefixParser(2025).parse(SRC, 1, raw)
    assert (ll.who.label, ll.who.local) == (None, None)

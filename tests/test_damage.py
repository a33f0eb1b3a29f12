"""ingest/damage.py: each form of paste damage undone, and clean text left exactly as it is."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmdoc.ingest.damage import COLUMN, LOST_ESC_HEAD, MAX_HOLD, _bracket_code, repair

TB = [
    "Traceback (most recent call last):",
    '  File "/opt/app/train.py", line 88, in <module>',
    "    main()",
    '  File "/opt/app/train.py", line 41, in main',
    "    loss = step(batch)",
    "           ^^^^^^^^^^^",
    "ValueError: bad batch at step 2",
]


def fix(lines: list[str]) -> list[str]:
    return [raw for _, raw, _ in repair((i, ln, False) for i, ln in enumerate(lines, 1))]


def numbers(lines: list[str]) -> list[int]:
    return [n for n, _, _ in repair((i, ln, False) for i, ln in enumerate(lines, 1))]


def test_clean_lines_pass_unchanged():
    clean = ["[rank0]: step 1 loss 2.0", "[rank1]: step 1 loss 2.0", *TB, "", "srun: error: n1: task 1: Exited with exit code 1"]
    assert fix(clean) == clean
    assert numbers(clean) == list(range(1, len(clean) + 1))


def test_markdown_fences_and_bold_lines_go():
    pasted = ["**Error log:**", "```text", *TB, "```", "**"]
    assert fix(pasted) == ["Error log:", *TB]


def test_fence_lines_are_recorded_as_the_breaks_between_pasted_excerpts():
    # each fence line (opening or closing, with a language or not) is a break; a fence glued
    # to a log line is no line of its own and breaks before that line (glued at its start) or
    # after it (at its end), so that fences still open and close excerpts in turn; the record
    # is bounded
    from slurmdoc.ingest import damage

    pasted = ["the run dies with:", "```text", *TB, "```", "and the bars:", "```", "step 3", " ``` ", "```" + TB[0], TB[1]]
    breaks: list[int] = []
    kept = [n for n, _, _ in repair(((i, ln, False) for i, ln in enumerate(pasted, 1)), breaks)]
    assert breaks == [2, 10, 12, 14, 14] and not set(breaks) & set(kept)
    glued = ["the run dies with:", "```" + TB[0], *TB[1:], "and the bars:", "```", "step 3" + "```", "ok"]
    breaks = []
    kept = [n for n, _, _ in repair(((i, ln, False) for i, ln in enumerate(glued, 1)), breaks)]
    fence_line = len(TB) + 3
    assert breaks == [1, fence_line, fence_line + 1] and kept == [n for n in range(1, len(glued) + 1) if n != fence_line]
    many: list[int] = []
    list(repair(((i, "```", False) for i in range(1, damage.MAX_BREAKS + 50)), many))
    assert len(many) == damage.MAX_BREAKS


def test_tilde_fences_break_pasted_excerpts_as_backtick_fences_do():
    # Markdown's other fence, `~~~` (with a language or not, bare or glued to a log line), is
    # decoration and a break between excerpts alike; a program's own row of tildes is its words
    pasted = ["the run dies with:", "~~~text", *TB, "~~~", "and the bars:", "~~~", "step 3", " ~~~ ", "~~~" + TB[0], TB[1] + "~~~", "ok"]
    breaks: list[int] = []
    kept = [(n, t) for n, t, _ in repair(((i, ln, False) for i, ln in enumerate(pasted, 1)), breaks)]
    assert breaks == [2, 10, 12, 14, 14, 16] and [t for _, t in kept] == ["the run dies with:", *TB, "and the bars:", "step 3", *TB[:2], "ok"]
    own = ["~~~~~~~~~~~~~~~~~~~~~~~~", "~~~ epoch 3 ~~~", "home is ~/data and ~/ckpt"]
    breaks = []
    assert [t for _, t, _ in repair(((i, ln, False) for i, ln in enumerate(own, 1)), breaks)] == own and breaks == []


def test_asterisks_followed_by_a_space_are_a_programs_words_not_bold():
    # as in Markdown, a run of asterisks followed by a space opens no emphasis: a program's
    # banner framed by asterisks is kept whole; bold (also bold italic) still goes
    banners = ["*** SIGABRT received at time=1712000000 on cpu 3 ***", "** nothing bold here **", "***** 5 stars *****"]
    assert fix(banners) == banners
    assert fix(["***Killed: out of memory***", "**Warning:**"]) == ["Killed: out of memory", "Warning:"]


def test_a_banner_whose_asterisks_a_markdown_editor_escaped_gets_them_back():
    # an issue tracker's editor saves a line starting with `*** ` as `**\* ` or `\*\*\* `
    # (so that it is not read as emphasis): the failure-signal handler's banner under it
    saved = [
        "**\\* Check failure stack trace: ***",
        "\\*\\*\\* SIGBUS (@0x7f00) received by PID 77 (TID 0x7f01) from PID 0; stack trace: \\*\\*\\*",
        "  **\\* Aborted at 1700000000 (unix time) try \"date -d @1700000000\" if you are using GNU date **\\*",
    ]
    assert fix(saved) == [
        "*** Check failure stack trace: ***",
        "*** SIGBUS (@0x7f00) received by PID 77 (TID 0x7f01) from PID 0; stack trace: ***",
        "  *** Aborted at 1700000000 (unix time) try \"date -d @1700000000\" if you are using GNU date ***",
    ]
    # a program's own backslashes and asterisks elsewhere are left alone
    own = ["\\*.ckpt matched no file", "C:\\data\\*** 3 files"]
    assert fix(own) == own


def test_fence_glued_to_a_log_line_is_taken_off_the_line_only():
    assert fix(["```" + TB[0], *TB[1:-1], TB[-1] + "```"]) == TB


def test_an_inline_code_mark_a_paste_left_open_is_taken_off():
    # a log pasted as Markdown inline code: its backticks open on the first line and close on
    # the last, so each of those lines carries one unmatched mark; a lone mark goes
    pasted = ["`node-4: line 7:  5120 Killed                  python fit.py --cfg a.yaml", "2031-01-01 epoch 3 done", "exit status 137`", "`"]
    assert fix(pasted) == ["node-4: line 7:  5120 Killed                  python fit.py --cfg a.yaml", "2031-01-01 epoch 3 done", "exit status 137"]
    # a program's own balanced marks, and a doubled one, are its words
    own = ["hint: pass `weights_only=True` to torch.load", "see ``docs`` first", "quote `a` and `b`"]
    assert fix(own) == own


def test_line_number_column_taken_off_when_consistent():
    for form in ("[{}] ", "{:>6} | "):
        pasted = [form.format(300 + i) + ln for i, ln in enumerate(TB)]
        assert fix(pasted) == TB, form


def test_numbers_counting_from_0_with_the_lines_are_no_viewers_column():
    # a viewer numbers the lines it shows from 1: bracketed numbers that start at 0 and go up
    # one a line (MPICH's `[N] ` tags when ranks 0, 1, 2, ... each print one line in turn) are
    # the program's, kept, however many lines follow in step; a viewer's column from 1 still goes
    lines = ["job 41 on 2 nodes"] + [f"[{r}] rank {r} ready on device {r % 4}" for r in range(12)]
    assert fix(lines) == lines
    pasted = [f"[{i + 1}] rank {i} ready on device {i % 4}" for i in range(12)]
    assert fix(pasted) == [f"rank {i} ready on device {i % 4}" for i in range(12)]


# a collector's time in each of the forms the prefix parser reads as one (dated, with a zone,
# in brackets before an srun label, year-less)
COLLECTOR_TIMES = ["2026-11-27T13:40:01.123456789Z ", "2026-11-27 13:40:01.123 ", "2026-11-27T13:40:01+01:00 ", "Nov 27 13:40:01 "]


@pytest.mark.parametrize("stamp", COLLECTOR_TIMES + ["[2026-11-27T13:40:01Z] "])
@pytest.mark.parametrize("form", ["[{}] ", "{:>6} | "])
def test_a_line_number_column_behind_a_collectors_time_is_taken_off(stamp, form):
    # a viewer numbering lines a collector had timed: the numbers go, each line keeps its time
    pasted = [stamp + form.format(40 + i) + ln for i, ln in enumerate(TB)]
    assert fix(pasted) == [stamp + ln for ln in TB]


def test_numbers_behind_a_collectors_time_that_do_not_follow_the_lines_are_kept():
    own = [f"2026-11-27T13:40:0{i}Z [{d}] worker ready" for i, d in enumerate((0, 3, 1, 2, 0, 5))]
    assert fix(own) == own


@pytest.mark.parametrize("stamp", COLLECTOR_TIMES)
@pytest.mark.parametrize("width", [80, 100, 120])
def test_a_wrap_the_program_made_is_joined_though_a_collector_timed_each_piece(stamp, width):
    # the collector saw the wrapped pieces as lines of their own and timed each; the joined line
    # keeps its first piece's time, the rests' go
    lines = LONG[:3] + TB + LONG[3:]
    got = fix([stamp + ln for ln in wrap(lines, width)])
    assert got == [stamp + ln for ln in lines]


def test_lines_a_collector_timed_that_were_not_wrapped_stay_apart():
    # records of the same length as the longest, each timed: no wrap is invented
    lines = [f"2026-11-27T13:40:0{i}Z " + f"[rank{i}]: step 10 loss 2.{i} " + "y" * 60 for i in range(6)]
    assert fix(lines) == lines


def test_numbers_that_do_not_follow_the_lines_are_kept():
    # a program's own `[N] ` output (a device index, a worker id) is not a column
    own = [f"[{d}] worker ready" for d in (0, 3, 1, 2, 0, 5)]
    assert fix(own) == own
    # a column on too few lines is not taken either
    few = ["[10] a", "[11] b", "c", "[13] d"]
    assert fix(few) == few


def test_line_ends_and_colour():
    assert fix([ln + "\r" for ln in TB]) == TB  # \r\r\n: the reader took one \r off
    assert fix(["\x1b[31m" + ln + "\x1b[0m" for ln in TB]) == TB
    # a stream whose lines end in a lone \r arrives as one physical line
    got = list(repair([(1, "\r".join(TB), False)]))
    assert [raw for _, raw, _ in got] == TB
    assert [n for n, _, _ in got] == list(range(1, len(TB) + 1))


def test_progress_redraws_are_not_line_ends():
    bar = "\r".join(f"{p:3d}%|##  | {p}/100 [00:01<00:09, 9.9it/s]" for p in (10, 20, 30))
    assert fix([bar]) == [bar]


def test_lone_cr_line_ends_around_progress_bars():
    # a whole log with `\r` line ends arrives as one physical line; its own progress bars
    # are a few of its many lines, so the `\r`s are line ends, bars included
    lines = ["step 1 loss 2.0", " 45%|####  | 45/100 [00:05<00:06, 9.1it/s]", *TB, "step 2 loss 1.9", "step 3 loss 1.8"]
    assert fix(["\r".join(lines)]) == lines
    assert numbers(["\r".join(lines)]) == list(range(1, len(lines) + 1))


def test_lost_indentation_of_frames_comes_back():
    got = fix([ln.lstrip() for ln in TB])
    # frames and their source lines are indented again (a caret line's exact column is
    # lost with its indentation; indented is what a reader of the traceback needs)
    assert [g.strip() for g in got] == [t.strip() for t in TB]
    assert [g[0].isspace() for g in got] == [t[0].isspace() for t in TB]


def test_unindented_frame_without_source_line():
    lines = ["Traceback (most recent call last):", 'File "<string>", line 1, in <module>', "ZeroDivisionError: division by zero"]
    assert fix(lines) == ["Traceback (most recent call last):", '  File "<string>", line 1, in <module>', "ZeroDivisionError: division by zero"]


@pytest.mark.parametrize("record", ["E0321 02:07:08.408271 1 socket.cpp:752] the next record", "W902 17:45:03.120044981 socket.cpp:752] the next record"])
def test_a_log_record_after_an_unindented_frame_is_no_source_line(record):
    # a glog-form record (PyTorch's own C++ logger writes the month unpadded, three digits)
    # after a frame that lost its indentation is the program's next record, left as it is
    lines = ["Traceback (most recent call last):", 'File "<string>", line 1, in <module>', record]
    assert fix(lines) == ["Traceback (most recent call last):", '  File "<string>", line 1, in <module>', record]


def wrap(lines: list[str], width: int) -> list[str]:
    out = []
    for ln in lines:
        while len(ln) > width:
            out.append(ln[:width])
            ln = ln[width:]
        out.append(ln)
    return out


LONG = [
    "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.11 GiB of which 1.02 GiB is free.",
    "[rank3]: " + "x" * 300,
    "[rank2]: RuntimeError: [/pytorch/third_party/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:30121: Connection reset by peer.",
    "[rank1]: short line",
]


@settings(max_examples=30, deadline=None, database=None)
@given(st.sampled_from([80, 100, 120, 200]), st.lists(st.sampled_from(LONG + TB), min_size=3, max_size=20))
def test_hard_wrapping_is_joined(width, lines):
    lines = LONG[:3] + lines  # several lines longer than the width: the width shows
    assert fix(wrap(lines, width)) == lines


def test_one_wrapped_line_at_a_terminal_width():
    line = "0: [rank0]: RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 1099511627776 bytes."
    lines = ["0: step 1 loss 1.0", line, "1: step 1 loss 1.0"]
    assert fix(wrap(lines, 80)) == lines


@pytest.mark.parametrize("mark", list(">#*=|<+$@~"))
def test_a_line_opened_by_a_mark_is_no_wrapped_rest_of_one_terminal_width_line(mark):
    # one line that happens to be exactly a terminal width wide, ending in a word, then a
    # line that opens with a mark programs start their own lines with: two records, not a
    # word cut at the width and its rest
    first = ("RuntimeError: worker 3 stopped: " + "x" * 200)[:120]
    lines = [first, f"{mark} next record of the program"]
    # (`> ` is a Markdown quote mark: taken off, and the line still stands on its own)
    assert fix(lines) == (lines if mark != ">" else [first, "next record of the program"])
    # the same first line followed by the rest of a word is still a wrap undone
    assert fix([first, "yz and more"]) == [first + "yz and more"]


@pytest.mark.parametrize("width", [80, 120, 132])
def test_a_capitalised_line_after_one_terminal_width_line_is_a_record_of_its_own(width):
    # one line that happens to be a terminal width wide, its last word whole, then a line a
    # message of its own opens with a capital (a shell's report, a library's): a word ends
    # there, no column cut one in two
    first = ("I0101 00:00:00.000 opened the plugin library for the tracer " + "z" * 200)[:width - 8] + " locally"
    assert len(first) == width
    assert fix([first, "Segmentation fault (core dumped)"]) == [first, "Segmentation fault (core dumped)"]
    # the same line followed by the rest of a word is still a wrap undone
    assert fix([first, "ish and more"]) == [first + "ish and more"]


def test_lines_of_the_same_length_that_are_records_are_not_joined():
    # fixed-format progress lines: the longest lines, all the same length, each a record
    rows = [f"iteration {i:6d} | loss {1.0 / (i + 1):.6f} | lr 3.0e-04 | grad norm 1.234 | tokens/s 12345.6" for i in range(10)]
    assert fix(rows) == rows
    # an exception line after a line of the wrap width is never swallowed
    wrapped = wrap(LONG[:3], 80)
    w80 = "y" * 80
    assert fix([*wrapped, w80, "ValueError: boom"])[-2:] == [w80, "ValueError: boom"]


def test_one_template_of_one_length_followed_by_short_lines_is_not_a_wrap_width():
    # the longest lines all come from one template and happen to share a length; each is
    # followed by a short unprefixed line that could be a wrapped rest: no wrap width is
    # learnt from one kind of line, so the line after the last of them stays its own record
    row = "iteration {} | consumed samples {}00 | lm loss 2.{} | grad norm 0.{} | learning rate 3.0E-04"
    lines = []
    for i in range(5):
        lines += [row.format(i, i, i, i), str(i)]
    lines += [row.format(7, 7, 7, 7), "Fatal Python error: Aborted", "train.py: error: unrecognized arguments: --x"]
    assert fix(lines) == lines


def test_a_wrapped_rest_that_looks_like_an_srun_label_is_no_label():
    # a line cut right before `<number>: ` leaves a rest that reads like srun's `3: ` label;
    # labels are learnt from records, so the next wrapped line of that kind is still joined
    line = "[rank2]: RuntimeError: [/pytorch/third_party/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:30121: Connection reset by peer."
    lines = LONG[:3] + [line, line]
    assert fix(wrap(lines, 100)) == lines


def test_a_drawn_box_is_not_wrapping():
    # rich draws a traceback in a box whose lines are all padded to its width; the message
    # under the box, word-wrapped by rich to the same width, is not a hard wrap to undo
    w = 60
    inside = ["/opt/app/train.py:88 in <module>", "", "  85 │   cfg = load(args)", "❱ 88 │   engine = build(cfg)", "", "/opt/app/engine.py:41 in build", "  40 │   check(cfg)", "❱ 41 │   assert ok, msg"]
    box = ["╭" + "─" * (w - 2) + "╮"] + [("│ " + t).ljust(w - 1) + "│" for t in inside] + ["╰" + "─" * (w - 2) + "╯"]
    msg = ["AssertionError: the global batch size 640 does not match the", "product of the micro batch size and the data parallel size"]
    assert len(msg[0]) == w  # rich broke it at a space that fell on the box's width
    lines = box + msg
    assert fix(lines) == lines


def test_colour_codes_that_lost_their_escape_byte():
    # a paste drops the ESC byte and leaves `[36m` ... `[0m` in the text: taken off a line
    # that starts with one, so the prefix after it is read; elsewhere the text is kept
    assert fix(["[36m(TrainWorker pid=41, ip=10.0.0.2)[0m Fatal Python error: Aborted", "[2m[36m(raylet)[0m [2026-01-01] worker died"]) == [
        "(TrainWorker pid=41, ip=10.0.0.2) Fatal Python error: Aborted",
        "(raylet) [2026-01-01] worker died",
    ]
    assert fix(["[36mshort[0m"]) == ["short"]  # short lines too (the fast path)
    assert fix(["eta [5m] remaining [0m", "x [36m y", "[5m] waited"]) == ["eta [5m] remaining [0m", "x [36m y", "[5m] waited"]


def test_a_heading_made_of_a_bold_log_line():
    assert fix(["### **FileNotFoundError: [Errno 2] No such file or directory: 'x'**", "## **Step 3"]) == [
        "FileNotFoundError: [Errno 2] No such file or directory: 'x'",
        "Step 3",
    ]
    assert fix(["# comment in a config dump", "### Not bold"]) == ["# comment in a config dump", "### Not bold"]


def test_markdown_quote_marks_are_taken_off():
    # a log quoted in a reply: `> ` before every line, fences and blank lines included,
    # and nested quotes; the lines come back as they were printed
    quoted = ["> ```", *("> " + ln for ln in TB), "> ```", ">", "> > " + TB[-1]]
    assert fix(quoted) == [*TB, "", TB[-1]]
    assert numbers(quoted)[:len(TB)] == list(range(2, len(TB) + 2))


def test_lines_that_only_start_with_a_greater_than_sign_are_kept():
    own = [">>> import torch", ">text glued to the sign", "->  not a quote", "x > y"]
    assert fix(own) == own


def test_ray_deduplication_note_is_taken_off():
    # Ray folds identical lines of several workers into one and says so at the end
    assert fix(["(Worker pid=7) RuntimeError: boom [repeated 2x across cluster]", "\x1b[36m(Worker pid=8)\x1b[0m ValueError: x\x1b[32m [repeated 3x across cluster]\x1b[0m"]) == [
        "(Worker pid=7) RuntimeError: boom",
        "(Worker pid=8) ValueError: x",
    ]


def test_joined_line_keeps_the_first_number_and_any_hit():
    lines = wrap(LONG[:3], 80)
    got = list(repair((i, ln, i == 2) for i, ln in enumerate(lines, 1)))
    assert got[0][0] == 1 and got[0][2] is True
    assert [raw for _, raw, _ in got] == LONG[:3]


def test_a_joined_line_is_a_hit_though_no_piece_was():
    # the prefilter searched the physical lines: a keyword the wrap cut in two is in none of
    # its pieces, so the whole line is handed to the rules; a line left alone keeps its flag
    lines = wrap(LONG[:3], 80) + ["[rank1]: short line"]
    got = list(repair((i, ln, False) for i, ln in enumerate(lines, 1)))
    assert [raw for _, raw, _ in got] == LONG[:3] + ["[rank1]: short line"]
    assert [hit for _, _, hit in got] == [True, True, True, False]


def test_holding_is_bounded():
    # a line of the wrap width followed by endless continuations is let go in bounded pieces
    lines = wrap(LONG[:3], 80) + ["z" * 80] * (MAX_HOLD * 3)
    got = fix(lines)
    assert "".join(got) == "".join(lines)
    assert max(len(g) for g in got) <= 80 * MAX_HOLD


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab F:[]1 |`*\x1b\r\t\"ei>"), max_size=90), max_size=40))
def test_never_raises_and_keeps_every_word(lines):
    """Whatever the input, no non-decoration character is lost or invented, and the line
    numbers only grow."""
    got = list(repair((i, ln, False) for i, ln in enumerate(lines, 1)))
    ns = [n for n, _, _ in got]
    assert ns == sorted(ns)
    kept = "".join(raw for _, raw, _ in got).replace(" ", "")
    for ch in "abeiF":
        assert kept.count(ch) <= "".join(lines).count(ch)


@given(st.text(alphabet="0123456789];m -[x\u0661", max_size=14))
def test_the_plain_test_before_the_column_and_colour_regexes_misses_none(rest):
    # `_bracket_code` only spares the regexes lines they cannot match (a bracketed time)
    raw = "[" + rest
    if COLUMN.match(raw) or LOST_ESC_HEAD.match(raw):
        assert _bracket_code(raw)
    assert not _bracket_code("[2025-03-01 12:00:00] x")


def test_a_line_holding_both_fences_of_a_pair_breaks_no_excerpt():
    # `...```42```` (a model's sample, a sentence quoting code) opens and closes on its own
    # line: no excerpt starts or ends there, so the fences after it still pair up as before;
    # one fence glued to a line does break
    for line in ("Answer: ```42```", "```pip install x```", "use ```a``` or ```b```"):
        breaks: list[int] = []
        list(repair(((i, ln, False) for i, ln in enumerate(["step 1", line, "step 2"], 1)), breaks))
        assert breaks == [], line
    for line in ("```Traceback (most recent call last):", "ValueError: x```"):
        breaks = []
        list(repair(((i, ln, False) for i, ln in enumerate(["step 1", line, "step 2"], 1)), breaks))
        assert len(breaks) == 1, line


def test_a_template_of_the_wrap_width_does_not_hide_the_wraps_around_it():
    # a log hard-wrapped at a width no terminal is known for, whose own fixed-format records
    # happen to be that long: the records are one template (one shape of line, however often
    # it recurs), the wrapped lines are of several shapes, so the width is learnt and the
    # records stay as they are
    width = 90
    beat = "[2025-08-18 18:10:{:02d}.{:03d}] [2025-08-18 18:10:{:02d}.{:03d}] There are 6 training processes running"
    rows = [beat.format(i, 7 * i, i, 7 * i) for i in range(9)]
    assert {len(r) for r in rows} == {width}
    lines = [LONG[2], *rows, LONG[0], TB[-1] + " " + "because the shard index is out of range " * 3, "[rank1]: short line"]
    assert fix(wrap(lines, width)) == lines


def test_a_wrapped_rest_in_capitals_is_no_exception_line():
    # a column that cuts `NCCL_BLOCKING_WAIT: 0` or `SIGBUS` leaves a rest (`CCL_BLOCKING_WAIT:
    # 0`, `S`) that reads like an exception class and its message; Python names its classes
    # in CamelCase (or by their dotted path), so a name all in capitals is the rest of a line
    width = 90
    lines = [
        "I0425 17:05:53.758841  4566 ProcessGroupNCCL.cpp:686] [Rank 0] ProcessGroupNCCL initialization options: NCCL_ASYNC_ERROR_HANDLING: 1,"
        " NCCL_DESYNC_DEBUG: 0, NCCL_ENABLE_TIMING: 0, NCCL_BLOCKING_WAIT: 0, TIMEOUT(ms): 1800000",
        "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGBUS",
        *LONG[:3],
    ]
    cut = wrap(lines, width)
    assert "S" in cut and any(c.startswith("CCL_BLOCKING_WAIT: 0") for c in cut)
    assert fix(cut) == lines
    # a real exception line, or a log level's record, after a line of that width stays its own
    for own in ("ValueError: boom", "torch.OutOfMemoryError: CUDA out of memory", "KeyboardInterrupt", "ERROR: disk quota exceeded"):
        assert fix(cut + ["y" * (width - 1) + "z", own])[-1] == own


def test_many_fence_lines_are_repaired_in_linear_time():
    # every fence line of each form (bare, with a language, either fence, glued to a log line
    # at either end) costs a few microseconds and nothing grows with their number (the breaks
    # kept are bounded): 200,000 of each in well under a few seconds
    import time

    from slurmdoc.ingest import damage

    for form in ("```", "~~~", "```text", "```step 1 loss 1.0", "step 1 loss 1.0~~~"):
        breaks: list[int] = []
        t0 = time.perf_counter()
        for _ in repair(((i, form, True) for i in range(1, 200_001)), breaks):
            pass
        assert time.perf_counter() - t0 < 5.0, form
        assert len(breaks) == damage.MAX_BREAKS, form


@pytest.mark.parametrize("width", [72, 93, 111])
def test_a_frame_line_cut_in_two_shows_the_width_at_any_column(width):
    # a traceback hard-wrapped where no terminal is known to wrap: each frame line's path is
    # as long as the column, so every frame is cut right after its file name; a frame line
    # that only the two lines make whole was cut at the width
    head = '  File "'
    path = ("/home/user/envs/py37/lib/python3.7/site-packages/torch/multiprocessing/" * 3)[: width - len(head) - len('spawn.py"')] + "spawn.py"
    frames = [f'{head}{path}", line {n}, in {f}' for n, f in ((200, "spawn"), (158, "start_processes"), (118, "join"))]
    assert all(len(fr.split(",")[0]) == width for fr in frames)
    lines = ["Traceback (most recent call last):", *(x for fr in frames for x in (fr, "    raise ProcessRaisedException(msg, error_index, failed_process.pid)")),
             "torch.multiprocessing.spawn.ProcessRaisedException: process 0 terminated with an exception"]
    assert fix(wrap(lines, width)) == lines


@pytest.mark.parametrize("width", [100, 120, 132])
def test_a_device_side_assert_wrapped_inside_its_kernel_name_and_quoted_condition(width):
    # CUDA's device-side assert, one line per thread, hard-wrapped: the column falls inside the
    # kernel's name (a rest `NLLCriterion_updateOutput_kernel: block: ...` that reads like an
    # exception class and its message) and right before the backtick closing the quoted
    # condition (a rest that opens with it): the rest of a C function's name is no
    # exception, and a mark that closes one the line before left open is the program's own
    lines = []
    for t in range(6):
        head = "/opt/build/pytorch/aten/src/THCUNN/{}.cu:108: cunn_Class"
        head = head.format(("ClassNLLCriterion" + "_generic" * 20)[: width - len(head) + 2])
        rest = f"NLLCriterion_updateOutput_kernel: block: [0,0,0], thread: [{t},0,0] Assertion `t >= 0 && t < {{}}"
        rest = rest.format(("n_classes" + "_of_target" * 20)[: width - len(rest) + 2])
        assert len(head) == len(rest) == width
        lines.append(head + rest + "` failed.")
    cut = wrap(lines, width)
    assert cut[1].startswith("NLLCriterion_") and cut[2] == "` failed."
    assert fix(cut) == lines


@pytest.mark.parametrize("width", [80, 120])
def test_one_line_cut_after_a_path_separator_at_a_terminal_width(width):
    # the only line longer than the terminal, cut right after a `/` of the path it names:
    # the rest carries the error (`... error=2 : out of memory`), and is joined back
    line = "THCudaCheck FAIL file=" + ("/opt/conda/build/pytorch_1513368888240/work/torch/lib/" * 3)[: width - 23] + "/THC/generic/THCStorage.c line=82 error=2 : out of memory"
    assert line[width - 1] == "/" and line[width].isalnum()
    lines = ["step 1", line, "Segmentation fault (core dumped)"]
    assert fix(wrap(lines, width)) == lines
    # a line that ends on a path's separator, followed by a line of its own, is left alone
    own = ["saved to " + ("/scratch/run/" * 10)[: width - 10] + "/", "> next record"]
    assert fix(own) == [own[0], "next record"]


# a soft wrap: a writer that fills lines up to a column breaks after a space and keeps it
SOFT = "orterun noticed that the process of rank 3 with PID 5512 on node gpu-b7 exited on "


def test_a_sentence_soft_wrapped_after_a_space_is_one_line():
    assert fix(["----", SOFT, "signal 11 (Segmentation fault).", "----"]) == ["----", SOFT + "signal 11 (Segmentation fault).", "----"]
    assert numbers(["----", SOFT, "signal 11 (Segmentation fault).", "----"]) == [1, 2, 4]


@pytest.mark.parametrize("nxt", [
    "Signal handler installed for rank 3",  # a sentence of its own
    "[2024-01-02 10:00:00] step 12",  # a record
    "  continued with an indent",  # an indented line is its own
    "",  # a blank line ends the paragraph
])
def test_a_line_after_a_trailing_space_that_cannot_be_its_rest_stays_apart(nxt):
    assert fix([SOFT, nxt]) == [SOFT, nxt]


def test_a_short_line_or_padding_at_the_end_is_no_soft_wrap():
    short = "rank 3 exited on "
    padded = SOFT.rstrip() + "    "
    assert fix([short, "signal 11"]) == [short, "signal 11"]
    assert fix([padded, "signal 11"]) == [padded, "signal 11"]


def test_lines_of_one_kind_ending_in_a_space_stay_apart():
    rows = [f"epoch {i} step {i * 100} loss 0.{i}{i} lr 0.0001 throughput 512.0 samples per second " for i in range(1, 4)]
    assert fix(rows) == rows


# a line a program ends with a space, then a record that opens with its printer's label, in
# lower case: a program's or a shell's name and a colon, a C function's `name():` (glibc's
# heap checks, the C++ runtime's `what():`), NCCL's `host:pid:tid`, or an MPI launcher's
# name: each is a record of its own, however the line before it ended
AHEAD = "Loading the tokenizer from /models/tok-v2 and the dataset index, one moment "


@pytest.mark.parametrize("nxt", [
    "munmap_chunk(): invalid pointer",
    "what():  std::bad_alloc",
    "gpu-b7:5512:5530 [3] NCCL WARN Cuda failure 'out of memory'",
    "zsh: killed     python pretrain.py",
    "python3: can't open file '/work/pretrian.py': [Errno 2] No such file or directory",
    "mpiexec noticed that process rank 2 with PID 0 on node gpu-b7 exited on signal 9 (Killed).",
])
def test_a_record_opening_with_its_printers_label_is_no_soft_wrapped_rest(nxt):
    assert fix([AHEAD, nxt]) == [AHEAD, nxt]


def test_a_sentence_broken_after_a_word_that_cannot_end_it_goes_on_whatever_follows():
    # a line that ends on a preposition, an article or a conjunction cannot end a sentence:
    # the next line is its rest even when it opens like a label (`exception: ...`)
    head = "[E ProcessGroupNCCL.cpp:915] [Rank 2] NCCL watchdog thread terminated with "
    rest = "exception: [Rank 2] Watchdog caught collective operation timeout"
    assert fix([head, rest]) == [head + rest]
    assert fix([AHEAD, rest]) == [AHEAD, rest]


@pytest.mark.parametrize("width", [64, 72, 80, 96])
def test_a_hard_wrap_cut_after_a_space_keeps_all_its_pieces(width):
    # a terminal that hard-wrapped every long line at its width: where a cut falls right
    # after a space and the next piece goes on in lower case, the line is still one line of
    # all its pieces (not two pieces joined as a soft wrap, and the third left alone)
    records = [f"[2031-05-06 07:08:0{i}] INFO loader: " + f"shard {i} of the corpus opened " * 8 for i in range(4)]
    head = "E0506 07:09:00 watchdog.cc:12] collective"
    head += "s" * (width - 1 - len(head)) + " "
    rest = " ".join("caught a collective operation timeout on rank 3 waiting for its peers for 600123 milliseconds".split() * 2)
    msg = head + rest
    wrapped = [piece for rec in records + [msg] for piece in (rec[i:i + width] for i in range(0, len(rec), width))]
    assert len(msg) > 2 * width and msg[width].islower()
    assert fix(wrapped)[-1] == msg

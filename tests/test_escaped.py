"""A traceback kept inside a string, read as the lines it holds (ingest.escaped), alone and
through the reader."""

from __future__ import annotations

import json

import pytest

from slurmdoc.api import diagnose
from slurmdoc.ingest.escaped import escaped_lines, unescape_frame

TB = ["Traceback (most recent call last):", '  File "/srv/fit.py", line 40, in <module>', "    run(cfg)",
      '  File "/srv/fit.py", line 31, in run', "    batch = collate(items)", "IndexError: list index out of range"]


def test_a_json_field_holding_a_traceback_gives_its_lines_between_the_records_head_and_tail():
    record = json.dumps({"ts": "2025-06-01T08:00:00", "level": "ERROR", "exc": "\n".join(TB), "pid": 77})
    pieces = escaped_lines(record)
    assert pieces is not None
    assert pieces[1 : 1 + len(TB)] == TB
    assert '"level": "ERROR"' in pieces[0] and not pieces[0].rstrip().endswith('"')
    assert '"pid": 77' in pieces[-1]


def test_a_string_whose_message_comes_before_its_traceback_starts_at_its_own_quote():
    # a worker's re-raised error: the message, then the worker's traceback, in one string
    text = "Caught IndexError in DataLoader worker process 2.\nOriginal " + "\n".join(TB)
    pieces = escaped_lines('{"name": "IndexError", "message": ' + json.dumps(text) + "}")
    assert pieces is not None and pieces[1] == "Caught IndexError in DataLoader worker process 2."
    assert pieces[2].startswith("Original Traceback") and pieces[-1] == TB[-1]


def test_a_string_cut_before_it_closes_runs_to_the_end_of_the_line():
    record = json.dumps({"exc": "\n".join(TB)})[:-30]  # a paste cut inside the string
    pieces = escaped_lines(record)
    assert pieces is not None and pieces[1] == TB[0] and pieces[-1] in TB[-1]


def test_a_repr_of_a_traceback_with_plain_quotes_runs_to_the_end_of_the_line():
    pieces = escaped_lines("failed trials: " + repr(["\n".join(TB)]))
    assert pieces is not None and pieces[0] == "failed trials: ['" and pieces[1:len(TB)] == TB[:-1]


@pytest.mark.parametrize("line", [
    "step 4 loss 2.31",
    r'File "C:\new_runs\fit.py", line 3, in <module>',  # a Windows path holds `\n`
    r'{"msg": "epoch done\nnext epoch", "loss": 1.2}',  # escaped breaks, no traceback
])
def test_a_line_holding_no_traceback_in_a_string_is_left_as_it_is(line):
    assert escaped_lines(line) is None


def test_a_frame_with_escaped_quotes_reads_as_a_frame():
    assert unescape_frame(r'  File \"/srv/fit.py\", line 31, in run') == '  File "/srv/fit.py", line 31, in run'
    assert unescape_frame(r'  data = row[\"x\"]') is None


@pytest.mark.parametrize("prefix,rank", [("", None), ("3: ", 3)])
def test_a_structured_logs_error_record_is_the_failure_it_holds(write, prefix, rank):
    # a JSON logger's lines: progress, then a record whose field holds the traceback; the
    # exception is the failure, cited at that record, on the rank whose prefix printed it
    lines = [prefix + json.dumps({"level": "INFO", "msg": f"step {i} loss 1.{i}"}) for i in range(1, 4)]
    lines.append(prefix + json.dumps({"level": "ERROR", "msg": "trial failed", "exc_info": "\n".join(TB)}))
    d = diagnose([write("json.log", "\n".join(lines))])
    assert d.status == "failed" and d.root_cause.category == "python_exception"
    assert d.root_cause.source.endswith("json.log:4") and "IndexError: list index out of range" in d.root_cause.message
    assert d.root_cause.rank == rank

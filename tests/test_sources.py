"""Inputs: paths, directories, globs, stdin, gzip, damage."""

from __future__ import annotations

import gzip
import os

import pytest

from slurmdoc.errors import InputError
from slurmdoc.ingest.sources import MAX_LINE, expand, looks_binary, make_inputs, path_hints, read_lines


def lines_of(path, warnings=None):
    w = [] if warnings is None else warnings
    (inp,) = make_inputs([path], w)
    return list(read_lines(inp, w))


def test_plain_and_crlf(write):
    p = write("a.log", "one\r\ntwo\nthree")
    assert lines_of(p) == [(1, "one"), (2, "two"), (3, "three")]


def test_gzip_by_magic_not_name(write, tmp_path):
    p = tmp_path / "job.out"
    p.write_bytes(gzip.compress(b"alpha\nbeta\n"))
    assert lines_of(str(p)) == [(1, "alpha"), (2, "beta")]


def test_truncated_gzip_keeps_what_was_read(tmp_path):
    data = gzip.compress(("line\n" * 20000).encode())
    p = tmp_path / "job.log.gz"
    p.write_bytes(data[: len(data) // 2])
    w: list[str] = []
    got = lines_of(str(p), w)
    assert 0 < len(got) < 20000
    assert any("truncated gzip" in x for x in w)


def test_invalid_utf8_is_replaced_not_fatal(write):
    p = write("bad.log", b"ok \xff\xfe line\nnext\n")
    got = lines_of(p)
    assert got[0][1].startswith("ok ") and got[1] == (2, "next")


def test_binary_file_is_skipped_with_a_warning(write):
    p = write("core.log", bytes(range(256)) * 40)
    w: list[str] = []
    assert lines_of(p, w) == []
    assert "binary" in w[0]


def test_overlong_line_is_cut_and_reading_goes_on(write):
    p = write("long.log", b"x" * (MAX_LINE * 2 + 10) + b"\nafter\n")
    w: list[str] = []
    got = lines_of(p, w)
    assert len(got[0][1]) == MAX_LINE and got[1] == (2, "after")
    assert "longer than" in w[0]


def test_directory_walk_finds_logs_sorted_and_skips_others(write, tmp_path):
    write("d/b.err", "x")
    write("d/a.out", "x")
    write("d/run/attempt_0/1/stderr.log", "x")
    write("d/notes.md", "x")
    found = expand([str(tmp_path / "d")], [])
    names = [os.path.relpath(f, tmp_path / "d") for f in found]
    assert names == ["a.out", "b.err", os.path.join("run", "attempt_0", "1", "stderr.log")]


@pytest.mark.parametrize("name", ["slurm-5.slurmdoc.txt", "slurm-5.slurmdoc.json", "slurm-5.slurmdoc.html",
                                  "train-5-node0.slurmdoc.txt.gz", "job.SLURMDOC.TXT", "ledger.jsonl", "part-0.jsonl"])
def test_a_walk_never_reads_slurmdocs_own_outputs(write, tmp_path, name):
    """The epilog's reports beside a log and JSON-lines files (ledger, scan parts) are not logs,
    whether a directory is walked or a glob expanded; a file named on its own is read."""
    write("d/slurm-5.out", "x")
    write(f"d/{name}", "x")
    assert [os.path.basename(f) for f in expand([str(tmp_path / "d")], [])] == ["slurm-5.out"]
    assert [os.path.basename(f) for f in expand([str(tmp_path / "d" / "*")], [])] == ["slurm-5.out"]
    assert [os.path.basename(f) for f in expand([str(tmp_path / "d" / name)], [])] == [name]


def test_a_log_whose_name_only_mentions_slurmdoc_is_read(write, tmp_path):
    write("d/slurmdoc-test.out", "x")
    write("d/run.slurmdoc.log/x.out", "x")  # a directory so named is still walked
    assert len(expand([str(tmp_path / "d")], [])) == 2


def test_directory_without_logs_is_an_input_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no log files"):
        expand([str(tmp_path / "empty")], [])


def test_missing_path_and_empty_glob(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        expand([str(tmp_path / "nope.log")], [])
    with pytest.raises(InputError, match="no file matches"):
        expand([str(tmp_path / "*.nothing")], [])


def test_glob_expands(write, tmp_path):
    write("n0.log", "x")
    write("n1.log", "x")
    assert len(expand([str(tmp_path / "n*.log")], [])) == 2


def test_symlink_loop_terminates(write, tmp_path):
    write("d/a.log", "x")
    os.symlink(tmp_path / "d", tmp_path / "d" / "loop")
    assert len(expand([str(tmp_path / "d")], [])) >= 1


@pytest.mark.parametrize(
    "path, hints",
    [
        ("logs/rank_12.log", {"rank_hint": 12}),
        ("logs/train.rank-3.err", {"rank_hint": 3}),
        ("out/task_5.out", {"rank_hint": 5}),
        ("run/abc/attempt_1/3/stderr.log", {"attempt": 1, "rank_hint": 3, "rank_hint_local": True}),
        ("logs/node1.log", {"node_index_hint": 1}),
        ("slurm-1234_7.out", {}),
        ("logs/franking.log", {}),
    ],
)
def test_path_hints(path, hints):
    assert path_hints(path) == hints


def test_looks_binary():
    import random

    rng = random.Random(7)
    assert looks_binary(bytes(rng.randrange(256) for _ in range(4096)))
    assert not looks_binary("Überprüfung fehlgeschlagen: Fehler beim Laden\n".encode("latin-1") * 20)
    assert looks_binary(b"\x00\x01\x02" * 100)
    assert not looks_binary(b"plain text \x1b[31mred\x1b[0m\n")


# ---- a log's tail read on its own keeps the file's name and line numbers -----------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from slurmdoc.ingest.sources import tail_input  # noqa: E402


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="ab \u00e9", max_size=12), min_size=1, max_size=40), st.integers(0, 400), st.booleans())
def test_a_tail_is_the_files_lines_from_the_first_whole_one_with_their_numbers(tmp_path_factory, texts, nbytes, final_newline):
    p = tmp_path_factory.mktemp("tail") / "job.log"
    body = "\n".join(texts) + ("\n" if final_newline else "")
    p.write_bytes(body.encode("utf-8"))
    whole = list(read_lines(make_inputs([str(p)], [])[0], []))
    raw = body.encode("utf-8")
    start = max(0, len(raw) - nbytes)
    if start > 0:  # the first line that starts within the last nbytes
        nl = raw.find(b"\n", start - 1)
        start = len(raw) if nl < 0 else nl + 1
    first = raw.count(b"\n", 0, start) + 1
    inp = tail_input(str(p), nbytes)
    got = list(read_lines(inp, []))
    assert inp.info.path == str(p)
    assert got == ([(n, t) for n, t in whole if n >= first] if start < len(raw) else [])
    assert inp.info.first_line == (first if nbytes < len(raw) else 1)


def test_a_gzip_log_is_read_whole_not_cut(tmp_path):
    p = tmp_path / "job.log.gz"
    p.write_bytes(gzip.compress(b"".join(b"line %d\n" % i for i in range(1000))))
    inp = tail_input(str(p), 100)
    assert inp.info.first_line == 1 and len(list(read_lines(inp, []))) == 1000


def test_budget_cut_diagnosis_names_the_real_path_and_line(tmp_path):
    # the part of a log a time budget allows: its failure is reported where it is in the file,
    # not as line 4 of an anonymous <stdin>
    from slurmdoc.api import diagnose

    log = tmp_path / "slurm-7.out"
    with open(log, "w") as fh:
        for i in range(50_000):
            fh.write(f"0: step {i} loss 2.3\n")
        fh.write('1: Traceback (most recent call last):\n1:   File "t.py", line 1, in <module>\n'
                 "1: RuntimeError: CUDA error: an illegal memory access was encountered\n")
        fh.write("0: step 50000 loss 2.3\n" * 10)
    for exact in (False, True):
        kw = {"budget": None} if exact else {}
        d = diagnose([str(log)], tail_bytes=4096, **kw)
        assert d.root_cause is not None and d.root_cause.rank == 1
        assert d.root_cause.source == f"{log}:50003", d.root_cause.source
        assert any("diagnosed from line" in w and str(log) in w for w in d.warnings)


def test_a_hole_of_nuls_does_not_make_a_log_binary():
    # a crash mid-write leaves one run of NULs (the bytes never written) inside text
    text = b"0: step 1 loss 2.3\n" * 3
    for n in (1, 16, 4096, 60_000):
        assert not looks_binary(b"\x00" * n + b"1: Traceback (most recent call last):\n")
        assert not looks_binary(text + b"\x00" * n + text)
    assert not looks_binary(b"\x00" * 100)  # nothing but the hole: nothing to judge, nothing lost
    # scattered NULs (UTF-16 without its BOM, executables) are still binary
    assert looks_binary("0: step 1 loss 2.3\n".encode("utf-16-le") * 10)
    assert looks_binary(b"\x7fELF\x02\x01\x01\x00" + b"\x00\x03\x00\x3e\x00\x01\x00\x00\x00" * 50)


def test_a_tail_too_large_to_count_in_time_says_where_its_numbers_start(tmp_path, monkeypatch):
    import slurmdoc.ingest.sources as sources

    p = tmp_path / "job.log"
    p.write_bytes(b"".join(b"line %d\n" % i for i in range(2_000_000)))  # more than one counting block
    monkeypatch.setattr(sources, "TAIL_COUNT_SECONDS", 0.0)
    w: list[str] = []
    (inp,) = make_inputs([str(p)], w, tail_bytes=100)
    got = list(read_lines(inp, w))
    assert inp.info.path == f"{p} (its last {inp.size} bytes)" and inp.info.first_line == 1
    assert got[0] == (1, got[0][1]) and got[-1][1] == "line 1999999"
    assert any("numbered from there" in x for x in w)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts this process's open files in /proc")
@pytest.mark.parametrize("damage", ["whole", "cut short", "corrupt"])
def test_a_gzip_input_closes_its_file_when_read_whatever_its_damage(tmp_path, damage):
    """Reading a gzip input, whole or damaged (cut short, bytes garbled in the middle), closes
    the file under it when the reading ends, not when the garbage collector finds it: a run
    over thousands of compressed logs keeps no descriptor per log."""
    import gc

    data = gzip.compress(b"".join(b"step %d loss 0.5\n" % i for i in range(20000)))
    if damage == "cut short":
        data = data[: len(data) // 2]
    elif damage == "corrupt":
        mid = len(data) // 2
        data = data[:mid] + bytes(64) + data[mid + 64:]
    paths = []
    for i in range(5):
        p = tmp_path / f"job{i}.log.gz"
        p.write_bytes(data)
        paths.append(str(p))
    from slurmdoc.api import diagnose

    gc.collect()
    gc.disable()
    try:
        before = len(os.listdir("/proc/self/fd"))
        for p in paths:
            lines_of(p)
        diagnose(paths)
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        gc.enable()

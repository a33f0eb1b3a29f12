"""Hostile and broken logs, through the public API and the command line.

Each gives either a correct diagnosis of what is readable (with a warning naming what was
skipped) or a one-line error with exit code 2: never a Python traceback, never a hang
(every run has a timeout), memory bounded (peak RSS measured where the input is large).
Large inputs are generated in tmp_path by streaming, never held in memory.
"""

from __future__ import annotations

import ctypes
import gzip
import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from slurmdoc.api import diagnose
from slurmdoc.errors import InputError
from slurmdoc.ingest.sources import make_inputs, read_lines

ROOT = Path(__file__).resolve().parent.parent
TB = (
    b"[rank1]: Traceback (most recent call last):\n"
    b'[rank1]:   File "train.py", line 3, in <module>\n'
    b"[rank1]: ModuleNotFoundError: No module named 'apex'\n"
)
HEALTHY = b"[rank0]: iteration 5 | loss 2.31 | grad norm 0.8\n"
MEASURE = """
import resource, subprocess, sys, json
r = subprocess.run(sys.argv[1:], capture_output=True)
print(json.dumps({"rc": r.returncode, "out": r.stdout.decode("utf-8", "replace"), "err": r.stderr.decode("utf-8", "replace"),
                  "rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def _env() -> dict:
    e = dict(os.environ)
    for var in ("SLURMDOC_DEBUG", "SLURMDOC_RULES", "SLURMDOC_CONFIG"):
        e.pop(var, None)
    e["XDG_CONFIG_HOME"] = str(ROOT / "tests" / "data" / "no-config-here")
    return e


class Run:
    def __init__(self, rc: int, out: str, err: str, rss_mib: float = 0.0) -> None:
        self.rc, self.out, self.err, self.rss_mib = rc, out, err, rss_mib
        # never a traceback; every stderr line is one of ours
        assert "Traceback (most recent call last)" not in err, err
        assert all(line.startswith("slurmdoc: ") for line in err.splitlines()), err
        if rc == 2:
            assert err.count("\n") == 1 and err.startswith("slurmdoc: error: ") and out == "", err
        self.doc = json.loads(out) if rc in (0, 1) else None

    @property
    def root(self) -> dict:
        assert self.doc is not None and self.doc["root_cause"] is not None, (self.rc, self.err)
        return self.doc["root_cause"]

    def warned(self, *needles: str) -> bool:
        return all(n in self.err for n in needles)


def cli(*paths: str, stdin: bytes | None = None, timeout: float = 60, measure: bool = False, preexec=None) -> Run:
    cmd = [sys.executable, "-m", "slurmdoc", "diagnose", "-f", "json", *paths]
    if measure:  # a fresh parent, so the children's peak RSS is slurmdoc's own
        r = subprocess.run([sys.executable, "-c", MEASURE, *cmd], capture_output=True, env=_env(), timeout=timeout)
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        return Run(got["rc"], got["out"], got["err"], got["rss_mib"])
    r = subprocess.run(cmd, input=stdin, capture_output=True, env=_env(), timeout=timeout, preexec_fn=preexec)
    return Run(r.returncode, r.stdout.decode(), r.stderr.decode())


def write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


# ---- binary data and NUL bytes ----------------------------------------------------------


def test_nul_bytes_inside_a_log_and_glued_before_a_record(tmp_path):
    # a node that crashed mid-write leaves a block of NULs; the next record is glued to it
    log = write(tmp_path / "job.log", HEALTHY.replace(b"iteration", b"iter\x00ation") + b"\x00" * 4096 + TB)
    d = diagnose([log])
    assert d.root_cause.category == "import_error" and d.root_cause.rank == 1
    r = cli(log)
    assert r.rc == 1 and r.root["category"] == "import_error" and r.root["source"].endswith("job.log:4")


def test_binary_file_is_skipped_and_named_the_others_diagnosed(tmp_path):
    good = write(tmp_path / "good.log", TB)
    binary = write(tmp_path / "core.log", b"\x7fELF\x02\x01\x01" + os.urandom(64 << 10).replace(b"\n", b""))  # a core dump
    r = cli(good, binary)
    assert r.rc == 1 and r.root["category"] == "import_error"
    assert r.warned("core.log: skipped, binary data")
    r = cli(binary)
    assert r.rc == 2 and "binary data" in r.err


# ---- encodings, line ends, terminal decoration --------------------------------------------


def test_invalid_utf8_and_mixed_encodings(tmp_path):
    log = write(
        tmp_path / "job.log",
        "[rank0]: Schritt 5 für Gerät 0\n".encode("latin-1")  # a latin-1 line
        + "[rank0]: ステップ 6\n".encode("utf-8")
        + b"[rank0]: \xff\xfe\xc3( \xed\xa0\x80 broken\n"  # invalid UTF-8, an encoded surrogate
        + TB.replace(b"'apex'", b"'gr\xfc\xdfe'"),
    )
    d = diagnose([log])
    assert d.root_cause.category == "import_error" and d.root_cause.rank == 1
    assert "No module named 'gr\ufffd\ufffde'" in d.root_cause.message
    assert cli(log).rc == 1


def test_utf16_log(tmp_path):
    log = write(tmp_path / "job.log", ("\ufeff" + TB.decode()).encode("utf-16-le"))
    assert diagnose([log]).root_cause.category == "import_error"


def test_crlf_line_ends(tmp_path):
    log = write(tmp_path / "job.log", (HEALTHY + TB).replace(b"\n", b"\r\n"))
    r = cli(log)
    assert r.rc == 1 and r.root["source"].endswith("job.log:4")
    assert r.root["message"] == "ModuleNotFoundError: No module named 'apex'"


def test_carriage_return_progress_bars_with_an_error_glued_to_them(tmp_path):
    bar = b"".join(b"[rank1]: Epoch 0: %3d%%|%-10s| %d/100 [00:01<00:09]\r" % (p, b"#" * (p // 10), p) for p in range(0, 100, 7))
    log = write(tmp_path / "job.log", HEALTHY + bar + TB + bar + b"\n")
    d = diagnose([log])
    assert d.root_cause.category == "import_error" and d.root_cause.rank == 1
    assert d.root_cause.message == "ModuleNotFoundError: No module named 'apex'"


def test_ansi_colour_codes(tmp_path):
    coloured = b"\x1b[1;31m" + TB.replace(b"\n", b"\x1b[0m\n\x1b[31m") + b"\x1b[0m\x1b[2K\n"
    r = cli(write(tmp_path / "job.log", HEALTHY + coloured))
    assert r.rc == 1 and r.root["category"] == "import_error" and r.root["rank"] == 1
    assert "\x1b" not in r.out


def test_lines_wrapped_mid_message(tmp_path):
    # a log collector that wraps at 80 columns: the exception line is cut in two
    text = (
        b"[rank2]: Traceback (most recent call last):\n"
        b'[rank2]:   File "train.py", line 3, in <module>\n'
        b"[rank2]: torch.OutOfMemoryError: CUDA out of me\n"
        b"mory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of wh\n"
        b"ich 1.23 GiB is free.\n"
    )
    d = diagnose([write(tmp_path / "job.log", HEALTHY + text)])
    assert d.root_cause.category == "cuda_oom" and d.root_cause.rank == 2


# ---- one huge line, bounded memory ----------------------------------------------------------


def test_a_single_200_mib_line_in_bounded_memory(tmp_path):
    p = tmp_path / "long.log"
    with open(p, "wb") as f:
        f.write(HEALTHY + b"[rank0]: ")
        block = b"x" * (1 << 20)
        for _ in range(200):
            f.write(block)
        f.write(b"\n" + TB)
    t = time.monotonic()
    r = cli(str(p), measure=True, timeout=120)
    took = time.monotonic() - t
    assert r.rc == 1 and r.root["category"] == "import_error" and r.root["source"].endswith("long.log:5")
    assert r.warned("long.log:2: line longer than 1048576 bytes")
    assert r.rss_mib < 300, r.rss_mib
    print(f"200 MiB line: {took:.1f} s, peak RSS {r.rss_mib:.0f} MiB")


# ---- compressed input damaged ------------------------------------------------------------------


def test_truncated_gzip_diagnoses_what_it_could_decompress(tmp_path):
    data = HEALTHY * 20000 + TB + HEALTHY * 20000
    cut = gzip.compress(data, mtime=0)[:-300]  # the end of the stream is missing
    r = cli(write(tmp_path / "job.log.gz", cut))
    assert r.rc == 1 and r.root["category"] == "import_error"
    assert r.warned("job.log.gz: truncated gzip after line", "diagnosed the lines before it")
    r = cli("-", stdin=cut)
    assert r.rc == 1 and r.warned("<stdin>: truncated gzip after line")


def test_corrupt_gzip(tmp_path):
    g = gzip.compress(TB + HEALTHY * 50000, mtime=0)
    r = cli(write(tmp_path / "bad.log.gz", g[:20] + b"\x00garbage" * 16 + g[150:]))
    assert r.rc == 2 and "bad.log.gz: skipped, read error" in r.err
    good = write(tmp_path / "good.log", TB)
    r = cli(good, str(tmp_path / "bad.log.gz"))
    assert r.rc == 1 and r.warned("bad.log.gz: skipped, read error")


def test_empty_file(tmp_path):
    empty = write(tmp_path / "empty.log", b"")
    r = cli(empty)
    assert r.rc == 2 and "empty" in r.err
    with pytest.raises(InputError, match="empty"):
        diagnose([empty])
    assert cli(empty, write(tmp_path / "good.log", TB)).rc == 1


# ---- files that change or block ---------------------------------------------------------------

WRITER = """
import sys, time
chunk = b"[rank0]: iteration 1 | loss 2.0 | still writing\\n" * 20000  # 1 MiB
with open(sys.argv[1], "ab") as f:
    while True:
        f.write(chunk)
        f.flush()
        time.sleep(0.02)  # up to ~50 MiB/s: faster than lines are parsed, so a reader
                          # that read to the end of the file would never get there
"""


def test_a_file_still_being_written_is_read_as_it_was_when_opened(tmp_path):
    p = tmp_path / "job.log"
    p.write_bytes(HEALTHY * 10 + TB)
    [inp] = make_inputs([str(p)], [])
    f = inp.open()
    with open(p, "ab") as g:  # grows after it was opened
        g.write(b"[rank2]: torch.OutOfMemoryError: CUDA out of memory.\n" * 1000)
    assert len(f.read()) == len(HEALTHY * 10 + TB)
    f.close()
    lines = list(read_lines(make_inputs([str(p)], [])[0], []))
    assert len(lines) == 1013  # a new open sees the new size


def test_a_growing_file_does_not_hang_the_run(tmp_path):
    p = tmp_path / "job.log"
    p.write_bytes(TB)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(p)])
    try:
        time.sleep(0.2)
        t = time.monotonic()
        r = cli(str(p), timeout=90)
        took = time.monotonic() - t
    finally:
        writer.kill()
        writer.wait()
    assert r.rc == 1 and r.root["category"] == "import_error"
    print(f"growing file: finished in {took:.1f} s after {r.doc['lines_read']} lines, file at {p.stat().st_size >> 20} MiB")


def test_fifo_given_directly_is_read_to_its_end(tmp_path):
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as f:
            for _ in range(3):
                f.write(HEALTHY)
                time.sleep(0.05)
            f.write(TB)

    t = threading.Thread(target=feed)
    t.start()
    r = cli(str(fifo), timeout=60)
    t.join(10)
    assert r.rc == 1 and r.root["category"] == "import_error" and r.root["source"].endswith("pipe.log:6")


def test_fifo_inside_a_directory_is_skipped_and_named(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    os.mkfifo(d / "stuck.log")  # nobody will ever write to it: opening it would block forever
    write(d / "rank_1.log", TB)
    r = cli(str(d), timeout=60)
    assert r.rc == 1 and r.root["category"] == "import_error"
    assert r.warned("stuck.log: skipped, not a regular file")


# ---- directories: many files, loops, permissions -----------------------------------------------


def test_a_directory_of_10000_files(tmp_path):
    d = tmp_path / "ranks"
    d.mkdir()
    for i in range(10000):
        (d / f"rank_{i}.log").write_bytes(b"iteration 1 | loss 2.0\n")
    (d / "rank_7777.log").write_bytes(b"iteration 1\nTraceback (most recent call last):\n  File \"t.py\", line 1, in <module>\nValueError: boom\n")
    t = time.monotonic()
    r = cli(str(d), measure=True, timeout=120)
    took = time.monotonic() - t
    assert r.rc == 1 and r.root["rank"] == 7777 and r.root["category"] == "python_exception"
    assert r.doc["ranks_seen"] == 10000 and len(r.doc["inputs"]) == 10000
    assert r.rss_mib < 300, r.rss_mib
    print(f"10,000 files: {took:.1f} s, peak RSS {r.rss_mib:.0f} MiB")


def test_symlink_loops(tmp_path):
    d = tmp_path / "logs"
    (d / "a").mkdir(parents=True)
    write(d / "a" / "rank_1.log", TB)
    os.symlink("..", d / "a" / "up")  # a directory loop
    os.symlink("y.log", d / "x.log")  # a file loop
    os.symlink("x.log", d / "y.log")
    r = cli(str(d), timeout=60)
    assert r.rc == 1 and r.root["category"] == "import_error"
    assert r.warned("x.log: skipped, Too many levels of symbolic links", "y.log: skipped")
    assert r.doc["inputs"] == [str(d / "a" / "rank_1.log")]  # read once, not once per loop
    r = cli(str(d / "x.log"))
    assert r.rc == 2 and "x.log" in r.err and "symbolic links" in r.err


def _without_file_permission_override():
    """A preexec_fn that makes the child subject to file permissions, and why it is honest.

    As root, permissions are not checked (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH). The child
    drops both from its capability bounding set before exec, so it runs as root but can no
    longer read a mode-000 file, exactly as any other user could not. Not root: nothing to do.
    """
    if os.geteuid() != 0:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "prctl"):
        pytest.skip("no prctl: cannot make root subject to file permissions here")

    def drop():
        for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                os._exit(97)

    probe = subprocess.run(["cat", "/proc/self/status"], preexec_fn=drop, capture_output=True)
    if probe.returncode == 97:
        pytest.skip("cannot drop capabilities here (no CAP_SETPCAP)")
    return drop


def test_unreadable_files_among_readable_ones(tmp_path):
    drop = _without_file_permission_override()
    d = tmp_path / "logs"
    (d / "private").mkdir(parents=True)
    write(d / "rank_1.log", TB)
    write(d / "rank_2.log", b"[rank2]: secret\n")
    write(d / "private" / "rank_3.log", b"[rank3]: secret\n")
    os.chmod(d / "rank_2.log", 0)
    os.chmod(d / "private", 0)
    try:
        r = cli(str(d), preexec=drop, timeout=60)
        assert r.rc == 1 and r.root["category"] == "import_error"
        assert r.warned("rank_2.log: skipped, cannot open: Permission denied", "cannot list", "private")
        r = cli(str(d / "rank_2.log"), preexec=drop, timeout=60)
        assert r.rc == 2 and "rank_2.log" in r.err and "Permission denied" in r.err
    finally:
        os.chmod(d / "private", stat.S_IRWXU)


# ---- many ranks ---------------------------------------------------------------------------------


def test_100000_distinct_ranks(tmp_path):
    p = tmp_path / "job.log"
    watchdog = b"[rank%d]: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600001 milliseconds before timing out.\n"
    with open(p, "wb") as f:
        f.writelines(b"[rank%d]: iteration 1\n" % i for i in range(76543, 76543 + 10))
        f.write(b"[rank76543]: Traceback (most recent call last):\n[rank76543]:   File \"t.py\", line 1, in <module>\n")
        f.write(b"[rank76543]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n")
        f.writelines(watchdog % i for i in range(100000) if i != 76543)
    t = time.monotonic()
    r = cli(str(p), measure=True, timeout=180)
    took = time.monotonic() - t
    assert r.rc == 1 and r.root["category"] == "cuda_oom" and r.root["rank"] == 76543
    assert r.doc["ranks_seen"] == 100000
    [sym] = [s for s in r.doc["symptoms"] if s["category"] == "nccl_timeout"]
    assert sym["count"] == 99999 and sym["rank_ranges"] == "0-76542, 76544-99999"
    # state grows with the number of ranks (a few KiB each), not with the log's length
    assert r.rss_mib < 600, r.rss_mib
    print(f"100,000 ranks: {took:.1f} s, peak RSS {r.rss_mib:.0f} MiB")

"""The bundled rule pack: every rule's own examples, and properties every rule must have."""

from __future__ import annotations

import pytest

from slurmdoc.engine.loader import load_rulebook
from slurmdoc.engine.schema import CATEGORIES
from slurmdoc.engine.selftest import check_book

BOOK = load_rulebook()
RESULTS = check_book(BOOK)


@pytest.mark.parametrize("result", [r for r in RESULTS if r.kind != "todo_match"], ids=lambda r: f"{r.rule_id}-{r.kind}-{r.index}")
def test_rule_example(result):
    assert result.ok, f"{result.rule_id} {result.kind}[{result.index}]: {result.detail}"


def test_known_misses_still_missing():
    # a todo example that starts to pass must be promoted to `match`
    promoted = [f"{r.rule_id} todo_match[{r.index}]" for r in RESULTS if r.kind == "todo_match" and not r.ok]
    assert not promoted, f"now matching, move to match: {promoted}"


def test_pack_covers_the_first_catalog():
    cats = {r.category for r in BOOK.rules}
    for needed in ("cuda_oom", "host_oom", "killed", "shape_divisibility", "import_error", "nccl_timeout", "sigterm_cascade", "time_limit", "python_exception"):
        assert needed in cats, needed


def test_every_rule_has_a_known_category_and_examples():
    for r in BOOK.rules:
        assert r.category in CATEGORIES
        assert r.spec.examples.match and r.spec.examples.no_match, r.id


def test_symptom_categories_are_never_plain_causes():
    # NCCL timeouts and SIGTERM deaths are echoes: they may only lead when nothing else failed
    for r in BOOK.rules:
        if r.category in ("nccl_timeout", "sigterm_cascade"):
            assert r.role == "symptom", r.id


HEALTHY = [
    " iteration      100/  500000 | consumed samples:       102400 | elapsed time per iteration (ms): 1234.5 | learning rate: 2.999E-04 | global batch size:  1024 | lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 0.812 | number of skipped iterations:   0 | number of nan iterations:   0 |",
    "gpu-node-1:1234:1290 [3] NCCL INFO comm 0x5566 rank 11 nranks 16 cudaDev 3 busId 1b000 - Init COMPLETE",
    "gpu-node-1:1234:1290 [3] NCCL INFO Channel 00/02 :    0   1   2   3",
    "W1121 10:00:00.000000 140 torch/distributed/run.py:792] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default",
    "[2025-03-01 12:00:00,123] [INFO] [config.py:1000:print] timeout ..................... 600",
    "Epoch 3:  45%|████▌     | 450/1000 [01:23<01:42,  5.37it/s, loss=2.31, v_num=0]",
    "> building GPTTokenizer tokenizer ... padded vocab (size: 50257) with 47 dummy tokens (new size: 50304)",
    "  error_file: <N/A>",
    "[rank0]:[W1121 10:00:00.000000 1 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 0]  using GPU 0 to perform barrier as devices used by this process are currently unknown.",
    "torch.distributed.init_process_group(backend='nccl', timeout=timedelta(minutes=10))",
    "saving checkpoint at iteration     500 to /ckpt in torch_dist format",
    "Killed 0 stale processes before launch",
    "INFO: world size 16, tensor model parallel size 2, pipeline model parallel size 2",
    "validation loss at iteration 500 | lm loss value: 2.1 | lm loss PPL: 8.2 |",
    "time to initialize megatron (seconds): 42.1",
]


def test_healthy_lines_are_not_even_candidates():
    # the keyword prefilter is what keeps the per-line cost low: it must stay quiet on
    # the lines a healthy run prints millions of times
    from slurmdoc.engine.matcher import Matcher

    m = Matcher(BOOK)
    noisy = [line for line in HEALTHY if m.interesting(line) and line not in ADMITTED]
    assert not noisy, noisy
    # lines a keyword admits on purpose must still yield nothing
    from slurmdoc.models import Event, LogLine, RankRef

    for line in ADMITTED:
        ll = LogLine(0, 1, line, 0, line, "unknown", RankRef(0), None, None, None, (0,))
        assert m.interesting(line) and m.classify(Event("line", ll, [line], [1])) is None, line


# a shell's bare `Killed` line (a command lost to SIGKILL) has no literal that sets it apart,
# so `Killed` is a keyword and these healthy lines reach the patterns, which reject them
ADMITTED = {"Killed 0 stale processes before launch"}


def test_every_pattern_is_shown_by_an_example():
    # a pattern no example exercises may be unreachable (no keyword admits it) or wrong
    bare = []
    for r in BOOK.rules:
        texts = [e.text for e in r.spec.examples.matches()]
        for i, pat in enumerate(r.patterns):
            if not any(pat.search(t) for t in texts):
                bare.append(f"{r.id} patterns[{i}]")
    assert not bare, bare


def _setup_tb(inner: list[str], exc: str) -> str:
    return "\n".join(["Traceback (most recent call last):", '  File "/u/run.py", line 9, in main', "    setup(rank)", *inner, exc])


C10D = ['  File "/p/site-packages/torch/distributed/distributed_c10d.py", line 700, in _new_process_group_helper', "    pg = Backend(store, rank, size)"]
TCP_HANDLER = ['  File "/p/site-packages/torch/distributed/rendezvous.py", line 190, in _tcp_rendezvous_handler', "    store = make_store(host, port)"]


@pytest.mark.parametrize("inner", [C10D, TCP_HANDLER], ids=["backend-constructor", "rendezvous-handler"])
def test_where_the_process_group_is_built_decides_the_category_unless_the_words_are_more_specific(inner):
    """An exception raised while the process group is being built is a rendezvous failure
    whatever its words (the frame says so, not the message); an exception whose words a more
    specific rule knows keeps that rule's category there; the same words raised in a
    program's own code are no rendezvous failure."""
    from slurmdoc.engine.matcher import Matcher
    from slurmdoc.engine.selftest import classify_text

    m = Matcher(BOOK)

    def category(text: str):
        got = [x for ev, x in classify_text(m, text) if x is not None and ev.kind == "traceback"]
        return got[0].rule.category if got else None

    for words in ("RuntimeError: [enforce fail at x/y.cc:12] p != nullptr. cannot look up peer-17",
                  "some.pkg.TransportError: handshake with 10.0.0.5 failed",
                  "RuntimeError: address lookup for host-3 gave nothing"):
        assert category(_setup_tb(inner, words)) == "rendezvous_error", words
        assert category(_setup_tb(['  File "/u/model.py", line 3, in fwd', "    y = f(x)"], words)) != "rendezvous_error", words
    assert category(_setup_tb(inner, "RuntimeError: CUDA error: an illegal memory access was encountered")) == "cuda_error"
    assert category(_setup_tb(inner, "ValueError: world_size must be positive")) != "rendezvous_error"


STORAGE_STRERRORS = ["Input/output error", "Remote I/O error", "Structure needs cleaning", "No space left on device",
                     "Disk quota exceeded", "File too large", "Stale file handle", "Read-only file system"]
ON_A_PATH_ONLY = ["Permission denied", "Operation not permitted", "No such file or directory", "Is a directory", "File exists"]


@pytest.mark.parametrize("cls", ["OSError", "IOError", "EnvironmentError", "mylib.storage.ShardReadError", None])
def test_an_oserror_is_a_filesystem_error_by_its_errno_words_whatever_class_carries_it(cls):
    """Python prints any OSError as `[Errno N] <strerror>` (then `: '<path>'`): the storage's own
    failures are filesystem errors with or without a path, and whatever class carries them;
    an errno any call returns (a socket's EACCES, a process's ENOENT) counts only on a path."""
    from slurmdoc.engine.matcher import Matcher
    from slurmdoc.engine.selftest import classify_text

    m = Matcher(BOOK)

    def category(text: str):
        got = [x for _, x in classify_text(m, text) if x is not None]
        return got[0].rule.category if got else None

    head = f"{cls}: " if cls else ""
    for n, words in enumerate(STORAGE_STRERRORS, 1):
        assert category(f"{head}[Errno {n}] {words}") == "io_error", words
        assert category(f"{head}[Errno {n}] {words}: '/vol/x/{n}.bin'") == "io_error", words
    for n, words in enumerate(ON_A_PATH_ONLY, 1):
        assert category(f"{head}[Errno {n}] {words}: '/vol/y/{n}'") == "io_error", words
        assert category(f"{head}[Errno {n}] {words}") != "io_error", words


def test_a_storage_errno_reported_by_c_code_is_a_filesystem_error_unless_warned_or_retried():
    """C code reports an errno as its words after what failed (`<op>: <strerror>`,
    `<path>; <strerror>`): a failure, unless the line is a warning or says it retries (a
    retried try stands only on the ladder's bottom rung, a failure only as a last word)."""
    from slurmdoc.engine.matcher import Matcher
    from slurmdoc.engine.selftest import classify_text

    m = Matcher(BOOK)

    def category(text: str):
        got = [x for _, x in classify_text(m, text) if x is not None and x.rule.spec.evidence != "error_line"]
        return got[0].rule.category if got else None

    for words in ("Input/output error", "Stale file handle", "Read-only file system", "Structure needs cleaning"):
        for line in (f"save of /vol/ck/7 failed: {words}", f"writer: /vol/ck/7; {words}", f"open(/vol/ck/7) (errno 9 - {words})"):
            assert category(line) == "io_error", line
        for line in (f"WARNING save of /vol/ck/7 failed: {words}", f"read /vol/ck/7 failed: {words}, retrying"):
            assert category(line) != "io_error", line


@pytest.mark.parametrize("errno_words", ["[Errno 5] Input/output error", "[Errno 13] Permission denied: '/vol/c/kernels'",
                                         "[Errno 39] Directory not empty: '/vol/tmp/run'", "[Errno 30] Read-only file system: '/vol/ro'"])
def test_an_errno_on_a_warning_or_a_retried_line_is_no_filesystem_failure(errno_words, tmp_path):
    """Python's `[Errno N] <strerror>` inside a warning (a cache the program could not write, a
    temporary directory it could not remove) or a line that says it retries is handled by the
    program: no filesystem failure, and a later traceback stays the root. The same words as
    the exception line of a traceback, or logged as an error, are the failure."""
    from slurmdoc.api import diagnose
    from slurmdoc.engine.matcher import Matcher
    from slurmdoc.engine.selftest import classify_text

    m = Matcher(BOOK)

    def category(text: str):  # (a retried try stands only on the ladder's bottom rung)
        got = [x for _, x in classify_text(m, text) if x is not None and x.rule.spec.evidence != "error_line"]
        return got[0].rule.category if got else None

    for line in (f"2031-05-06 07:08:09,100 WARNING cache: could not store entry: {errno_words}",
                 f"[W] cleanup: {errno_words}", f"UserWarning: falling back to no cache: {errno_words}",
                 f"shard 4: {errno_words}; retrying in 2 s"):
        assert category(line) != "io_error", line
    for line in (f"OSError: {errno_words}", f"2031-05-06 07:08:09,100 ERROR saver: {errno_words}"):
        assert category(line) == "io_error", line
    log = tmp_path / "job.log"
    log.write_text(f"2031-05-06 07:08:09,100 WARNING cache: could not store entry: {errno_words}\n"
                   "2031-05-06 07:08:10,000 INFO step 1 loss 2.3\n"
                   "Traceback (most recent call last):\n  File \"/w/train.py\", line 9, in <module>\n    main()\n"
                   "ValueError: the batch holds no tokens\n"
                   "srun: error: n3: task 0: Exited with exit code 1\n")
    root = diagnose([str(log)]).root_cause
    assert root is not None and root.category == "python_exception"


@pytest.mark.parametrize("report", [
    "/var/spool/slurmd/job77/slurm_script: line 31: 18234 Terminated              nvidia-smi dmon -s um -d 10",
    "[1]+  Terminated              watch -n 30 free -g",
    "[2]  + 18234 terminated  nvidia-smi --query-gpu=utilization.gpu --format=csv -l 10",
    "zsh: terminated  tail -f /scratch/run/metrics.jsonl",
])
def test_a_script_stopping_its_own_background_job_is_no_failure(report, tmp_path):
    """A batch script that starts a helper in the background (a GPU monitor, a log follower)
    and `kill`s it when training is done: the shell reports that SIGTERM ended the job. The
    shell survives to say so only when the signal was sent to that job alone; Slurm's
    cancellation and time limit end the shell too and report themselves, and a launcher's
    cascade has its own words. A run that finished is not failed by it."""
    from slurmdoc.api import diagnose

    log = tmp_path / "slurm-77.out"
    log.write_text("step 100 loss 2.31\nstep 200 loss 2.01\nTraining complete.\n" + report + "\n")
    d = diagnose([str(log)])
    assert d.status == "no_failure", (report, d.root_cause)


def test_every_numerical_rule_that_reads_a_line_is_a_state():
    # a loss, a gradient norm or values printed as NaN describe the run, not an event: every
    # numerical rule that reads lines (not exceptions, which end their process) persists, so a
    # report repeated between steps is judged by its last repetition (diagnosis.liveness)
    events = [r.id for r in BOOK.rules if r.spec.category == "numerical" and r.spec.scope != "traceback" and not r.spec.persists]
    assert not events, events


@pytest.mark.parametrize("line", [
    "Error writing to " + "ab " * 35_000,  # words after the failure's words
    "ab " * 35_000 + "Error writing to file /ckpt/x",  # ... and before them
    "Error writing " + "a" * 100_000,  # one long word
    "a: " * 35_000 + "[Errno 5] Input/output error",
])
def test_the_filesystem_rule_reads_a_long_line_well_inside_its_time_bound(line):
    # a line of a hundred kilobytes (a progress bar's redraws kept on one line, a dumped
    # tensor) with a failure's words on it: every pattern of the rule within the bound each
    # pattern has (MATCH_TIMEOUT), so the rule is neither cut short nor dropped (a greedy run
    # before alternatives took seconds here: quadratic; the lint flags that construct)
    from time import perf_counter

    from slurmdoc.engine.loader import MATCH_TIMEOUT

    rule = BOOK.by_id("io-error")
    for rx in [*rule.patterns, *rule.excludes]:
        t0 = perf_counter()
        rx.search(line, timeout=10 * MATCH_TIMEOUT)
        assert perf_counter() - t0 < MATCH_TIMEOUT, rx.pattern[:80]


def _within_time_bound(rule_id: str, line: str) -> None:
    """Every pattern of the rule searches `line` within the time each pattern has on one event
    (MATCH_TIMEOUT), CPU time: past it the rule is cut short, and dropped after a few."""
    from time import process_time

    from slurmdoc.engine.loader import MATCH_TIMEOUT

    rule = BOOK.by_id(rule_id)
    for rx in [*rule.patterns, *rule.excludes]:
        t0 = process_time()
        try:
            rx.search(line, timeout=10 * MATCH_TIMEOUT)
        except TimeoutError:
            pass
        assert process_time() - t0 < MATCH_TIMEOUT, rx.pattern[:80]


@pytest.mark.parametrize("line", [
    "Error x " * 12_500,  # an error word every few characters, no layout named
    "AssertionError: world_size " * 3_700,  # the assert and the size, never an equation
    "Error " * 16_000 + "Assertion failed: mpiSize == tp * pp",  # ... then the equation at the end
])
def test_the_layout_equation_is_read_on_a_long_line_of_error_words_within_its_time_bound(line):
    # a line of a hundred kilobytes holding many error words (a message that lists a
    # collection's failures, a dumped log on one line): an assert's words at each of them
    # must not start a scan of the rest of the line, or the rule is cut short and dropped
    _within_time_bound("shape-divisibility", line)


@pytest.mark.parametrize("line", [
    "Loss" * 25_000,  # one word of a hundred kilobytes made of a loss's name
    "Loss" * 25_000 + ": nan",  # ... ending as a metric
    "epoch 3 RunLoss: 0.41 " * 4_500,  # a metrics line's redraws kept on one line
    "x/" * 50_000 + " loss: nan",  # a path of a hundred kilobytes, then the metric
    "see https://" + "x/" * 50_000 + "val_loss: nan",  # ... the metric at the path's end
])
def test_a_loss_named_in_one_word_is_read_on_a_long_line_within_its_time_bound(line):
    # a loss whose qualifier is written into its name (LastLoss) is found by trying where
    # the name could end; on a long word that search must stay linear, or the rule is cut
    # short and dropped
    _within_time_bound("nan-metric", line)


@pytest.mark.parametrize("line", [
    "pool: rank 0 noticed the job ended with exit code 1",  # the rank reports, another ended
    "pool: rank 0 reports node trn-044 failed with exit code 1",
    "pool: rank 0: node trn-044 failed with exit code 1",  # a label's colon, another subject
    "pool: local rank 6 (pid 7712) exited with exit code 1",  # a rank within its node
    "pool: Local rank 6 exited with exit code 1",
])
def test_a_launchers_exit_report_names_no_rank_that_is_not_its_subjects_global_rank(line):
    from slurmdoc.engine.matcher import Matcher
    from slurmdoc.engine.selftest import classify_text

    got = [m for _, m in classify_text(Matcher(BOOK), line) if m is not None and m.rule.id == "worker-exit-nonzero"]
    assert got and got[0].captures.get("exitcode") == "1", got
    assert got[0].captures.get("rank") is None, got[0].captures


@pytest.mark.parametrize("line", [
    "Error executing job with overrides: [" + " " * 500_000 + "x",  # a run of blanks in the list
    "Error executing job with overrides: [" + "'a', " * 100_000,  # a long list, cut
    "Error executing job with overrides: [" + "] " * 250_000 + "x",  # closing brackets all along
])
def test_a_hydra_report_is_read_on_a_long_line_within_its_time_bound(line):
    # the list of overrides runs to the line's end, closed or cut: finding that end must not
    # try every place where blanks or a closing bracket could end it
    _within_time_bound("hydra-job-error", line)


@pytest.mark.parametrize("line", [
    "step 9: CUDA out of memory " * 20_000,  # the words over and over, no trainer's word after
    "skipping batch " * 40_000,  # the trainer's words over and over, no OOM
    "Retrying " * 60_000 + "x",
])
def test_a_handled_oom_is_told_on_a_long_line_within_its_time_bound(line):
    # whether a line says the trainer caught the OOM and went on is read once from the line's
    # start, in either order, not from every place the words occur
    _within_time_bound("cuda-oom", line)

"""The evidence ladder (diagnosis.ladder): each root cause says what it rests on, and the
root is chosen from the strongest rung present."""

from __future__ import annotations

from slurmdoc.api import diagnose

SUMMARY = [
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "============================================================",
    "train.py FAILED",
    "------------------------------------------------------------",
    "Failures:",
    "  <NO_OTHER_FAILURES>",
    "------------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2025-03-01_12:05:02",
    "  host      : node-3",
    "  rank      : 6 (local_rank: 2)",
    "  exitcode  : {code} (pid: 4242)",
    "  error_file: <N/A>",
    "  traceback : {what}",
    "============================================================",
]


def summary(code: int, what: str) -> list[str]:
    head = ["Traceback (most recent call last):", '  File "/usr/bin/torchrun", line 8, in <module>', "    sys.exit(main())"]
    return head + [line.format(code=code, what=what) for line in SUMMARY]


def test_an_assembled_traceback_is_the_top_rung(write):
    text = ["[rank2]: Traceback (most recent call last):", '[rank2]:   File "t.py", line 3, in <module>', "[rank2]: KeyError: 'label'"]
    rc = diagnose([write("j.log", "\n".join(text))]).root_cause
    assert rc.evidence == "traceback" and rc.rank == 2 and rc.rank_source == "prefix"


def test_a_launcher_summary_alone_is_launcher_evidence_and_its_signal_names_the_category(write):
    d = diagnose([write("j.log", "\n".join(["step 10 loss 2.1"] + summary(-9, "Signal 9 (SIGKILL) received by PID 4242")))])
    rc = d.root_cause
    assert d.status == "failed" and rc.evidence == "launcher"
    assert rc.category == "killed" and rc.rank == 6 and rc.rank_source == "launcher"


def test_a_summary_with_a_plain_exit_code_keeps_its_unknown_category(write):
    d = diagnose([write("j.log", "\n".join(summary(1, "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")))])
    assert d.status == "failed" and d.root_cause.evidence == "launcher" and d.root_cause.category == "unknown"


def test_a_bare_signal_with_no_rank_is_exit_evidence(write):
    text = ["step 1 loss 2.0", "step 2 loss 1.9", "/var/spool/slurmd/job01/slurm_script: line 12:  8123 Killed                  python train.py"]
    rc = diagnose([write("j.log", "\n".join(text))]).root_cause
    assert rc is not None and rc.evidence == "exit" and rc.category == "killed"


def test_an_error_like_line_at_the_end_is_the_bottom_rung(write):
    text = ["epoch 1 step 10 loss 2.0", "epoch 1 step 20 loss 1.9", "2025-01-01 10:00:00 | ERROR | shard reader: manifest does not match the files on disk"]
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "failed" and d.root_cause.evidence == "error_line" and "manifest" in d.root_cause.message


def test_the_rank_s_own_words_outrank_a_launcher_report_printed_earlier(write):
    # the launcher's exit line about rank 1 comes first in the file; the rank's own
    # traceback (flushed late) is stronger evidence and leads
    text = [
        "srun: error: n1: task 1: Exited with exit code 1",
        "1: Traceback (most recent call last):",
        '1:   File "t.py", line 3, in <module>',
        "1: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    ]
    rc = diagnose([write("j.log", "\n".join(text))]).root_cause
    assert rc.category == "cuda_oom" and rc.rank == 1 and rc.evidence == "traceback"


def test_no_ladder_evidence_is_no_failure(write):
    text = ["epoch 1 step 10 loss 2.0", "WARNING: deprecated flag --foo", "val_error 0.12", "epoch 1 step 20 loss 1.9"]
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "no_failure" and d.root_cause is None


FORMS = __import__("pathlib").Path(__file__).resolve().parent / "forms"


def test_the_ladder_forms_say_their_level_and_rank_source():
    want = {
        "ladder_summary_only_sigkill.log": ("launcher", "launcher"),
        "ladder_rank_in_message_no_prefix.log": (None, "message"),
        "ladder_local_rank_in_usage_error.log": ("exception", "message"),
        "ladder_error_line_at_the_end.log": ("error_line", None),
    }
    for name, (level, source) in want.items():
        rc = diagnose([str(FORMS / name)]).root_cause
        assert rc is not None, name
        assert level is None or rc.evidence == level, (name, rc.evidence)
        assert rc.rank_source == source, (name, rc.rank_source)


def test_process_group_ranks_are_not_global_ranks(write):
    text = ["[E1121 09:00:00.000 ProcessGroupNCCL.cpp:1] [PG 1 Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out."]
    rc = diagnose([write("j.log", "\n".join(text))]).root_cause
    assert rc is not None and rc.rank is None and rc.rank_source is None


def test_a_launcher_s_own_traceback_is_its_report_of_the_child_not_the_job_s_error(write):
    text = [
        "epoch 3:  40%|####      | 400/1000 [10:00<15:00, 1.50s/it]",
        "Traceback (most recent call last):",
        '  File "/opt/venv/bin/accelerate", line 8, in <module>',
        "    sys.exit(main())",
        '  File "/opt/venv/lib/python3.11/site-packages/accelerate/commands/launch.py", line 700, in simple_launcher',
        "    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)",
        "subprocess.CalledProcessError: Command '['python', 'train.py']' died with <Signals.SIGSEGV: 11>. exit status -11",
    ]
    rc = diagnose([write("j.log", "\n".join(text))]).root_cause
    assert rc.evidence == "launcher" and rc.category == "segfault"


def test_a_launcher_traceback_yields_to_the_child_s_own_error(write):
    text = [
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "train.py", line 12, in <module>',
        "[rank1]: KeyError: 'input_ids'",
        "Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.11/site-packages/accelerate/commands/launch.py", line 700, in multi_gpu_launcher',
        "    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)",
        "subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero exit status 1.",
    ]
    rc = diagnose([write("j.log", "\n".join(text))]).root_cause
    assert rc.rank == 1 and "KeyError" in rc.message and rc.evidence == "traceback"


def test_a_spawning_parent_s_report_of_a_child_s_error_yields_to_the_child_s_own_traceback(write):
    # torch.multiprocessing.spawn: the parent's join() raises a wrapper exception whose message
    # is the child's traceback; the wrapper is printed first, yet it only reports the child
    for wrapper in ("Exception: ", "torch.multiprocessing.spawn.ProcessRaisedException: "):
        text = [
            "Traceback (most recent call last):",
            '  File "/srv/run.py", line 40, in <module>',
            "    mp.spawn(worker, nprocs=4)",
            '  File "/opt/py/lib/python3.9/site-packages/torch/multiprocessing/spawn.py", line 150, in join',
            "    raise ProcessRaisedException(msg, error_index, failed_process.pid)",
            wrapper,
            "",
            "-- Process 2 terminated with the following error:",
            "Traceback (most recent call last):",
            '  File "/opt/py/lib/python3.9/site-packages/torch/multiprocessing/spawn.py", line 59, in _wrap',
            "    fn(i, *args)",
            '  File "/srv/run.py", line 22, in worker',
            "    table = lookup[key]",
            "KeyError: 'vocab_size'",
        ]
        rc = diagnose([write("j.log", "\n".join(text))]).root_cause
        assert rc.message == "KeyError: 'vocab_size'" and rc.evidence == "traceback", wrapper


def test_a_spawning_parent_s_report_alone_still_leads(write):
    text = [
        "Traceback (most recent call last):",
        '  File "/srv/run.py", line 40, in <module>',
        "    mp.spawn(worker, nprocs=4)",
        '  File "/opt/py/lib/python3.9/site-packages/torch/multiprocessing/spawn.py", line 140, in join',
        "    raise ProcessExitedException(",
        "torch.multiprocessing.spawn.ProcessExitedException: process 3 terminated with exit code 1",
    ]
    d = diagnose([write("j.log", "\n".join(text))])
    assert d.status == "failed" and d.root_cause.evidence == "launcher"


# one retried try of each kind the pack leaves out while it is retried: a store connection
# or bind, a storage read (each with the category it stands for)
TRIES = [
    ("[E0301 10:00:00.000000000 socket.cpp:1023] [c10d] The client socket has timed out after 60000ms while trying to connect to (head-node, 29511).", "rendezvous_error"),
    ("[W0301 10:00:00.000000000 socket.cpp:470] [c10d] The server socket has failed to bind to 0.0.0.0:80 (errno: 13 - Permission denied).", "rendezvous_error"),
    ("reader: shard 7 of /lustre/ds: Remote I/O error, retrying (attempt 5/5)", "io_error"),
]


def test_a_retried_try_that_is_its_printers_last_word_is_the_bottom_rung(write):
    # the line of a try that is retried is no failure while the program goes on, but when
    # nothing after it outlives it (the log ends there, or only lines that are no progress
    # follow), it is the failure's only trace
    for line, category in TRIES:
        d = diagnose([write("j.log", "\n".join(["starting job 17", line, "  (no further output)"]))])
        assert d.status == "failed" and d.root_cause.category == category and d.root_cause.evidence == "error_line", line
        assert d.root_cause.source.endswith(":2"), line
        # the same try followed by progress was retried with success: handled
        d = diagnose([write("j.log", "\n".join(["starting job 17", line, "epoch 0 step 1 loss 2.31", "epoch 0 step 2 loss 2.20"]))])
        assert d.status == "no_failure" and len(d.handled) == 1, line
        # any stronger evidence after it leads (the exception that ends the retries)
        d = diagnose([write("j.log", "\n".join([line, "ValueError: the run configuration names no dataset"]))])
        assert d.status == "failed" and d.root_cause.evidence != "error_line" and d.root_cause.source.endswith(":2"), line

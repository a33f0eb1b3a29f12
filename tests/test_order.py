"""Ordering and root choice (diagnosis.order), through small crafted logs."""

from __future__ import annotations

from slurmdoc.api import diagnose

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB."


def tb(prefix: str, exc: str, ts: str | None = None) -> list[str]:
    head = [f"{prefix}{ts} INFO step 9"] if ts else []
    return head + [f"{prefix}{l}" for l in ["Traceback (most recent call last):", '  File "t.py", line 1, in <module>', exc]]


def test_generic_error_a_hair_earlier_on_another_node_loses_to_a_specific_cause(write):
    a = write("node0.log", "\n".join(tb("[rank0]: ", "RuntimeError: something odd", "2025-01-01 00:00:00,000")))
    b = write("node1.log", "\n".join(tb("[rank5]: ", OOM, "2025-01-01 00:00:00,400")))
    d = diagnose([a, b], skew=1.0)
    assert d.root_cause.category == "cuda_oom" and d.root_cause.rank == 5
    # outside the skew window, time decides
    d = diagnose([a, b], skew=0.1)
    assert d.root_cause.category == "python_exception" and d.root_cause.rank == 0


def test_without_timestamps_position_decides(write):
    text = "\n".join(tb("[rank3]: ", "KeyError: 'x'") + tb("[rank1]: ", OOM))
    d = diagnose([write("j.log", text)])
    assert d.root_cause.rank == 3


def test_symptoms_never_lead_while_a_cause_exists(write):
    lines = [f"[rank{r}]:[E1121 09:00:00.0 1 ProcessGroupNCCL.cpp:1] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)" for r in range(4)]
    lines += ["srun: error: n1: tasks 0-3: Terminated"]
    lines += tb("[rank2]: ", "ModuleNotFoundError: No module named 'flash_attn'")
    d = diagnose([write("j.log", "\n".join(lines))])
    assert d.root_cause.category == "import_error" and d.root_cause.rank == 2


def test_an_error_quoted_in_a_cjk_sentence_yields_to_its_record_but_one_beside_accents_does_not(write):
    """A line whose error words sit in a sentence of another script (CJK, kana, hangul: an
    issue or a chat quoting the error) is a person's quote: where the program's own record of
    the same error follows, that record is the root. Other non-ASCII text (accents, symbols)
    around the same words is no such sign: that earlier line stays the root."""
    later = tb("[rank2]: ", OOM)
    for around, want in (("运行时报错了，请问怎么办 {}", 4), ("Voilà → {} ✓", 1), ("{}", 1)):
        path = write("j.log", "\n".join([around.format(OOM)] + later))
        d = diagnose([path])
        assert d.root_cause.category == "cuda_oom" and d.root_cause.source == f"{path}:{want}", around


def test_an_error_quoted_whole_between_quotation_marks_yields_to_its_record(write):
    """A line that is all one quotation (it opens with a quotation mark and closes with its
    pair: a person quoting the error above the pasted log) is a quote: the program's own record
    of the same error, below it, is the root. A JSON field (`"message": ...`) is no quotation,
    and a quoted error with no record of its kind stays the root (it is all there is)."""
    later = tb("[rank2]: ", OOM)
    record = 2 + len(later)  # the record's exception line, below the quoted line 2
    for around, want in (("' {} '", record), ('"{}".', record), ("\u201c{}\u201d", record), ("{}", 2), ("'{}' was printed, then {}", 2)):
        path = write("j.log", "\n".join(["I get this:", around.format(OOM, OOM)] + later))
        d = diagnose([path])
        assert d.root_cause.category == "cuda_oom" and d.root_cause.source == f"{path}:{want}", (around, d.root_cause.source)
    path = write("q.log", "\n".join(["I get this:", "'{}'".format(OOM), "step 3 done"]))
    assert diagnose([path]).root_cause.source == f"{path}:2"


def test_an_echo_that_says_another_rank_failed_does_not_lead_ahead_of_an_earlier_exit_report(write):
    # with no cause in the log, a report that a process exited with an error comes before
    # the surviving ranks' lines saying only that some rank failed: the earlier one leads
    echo = "2031-02-03 04:05:07.000001: W op_kernel.cc:1318] Aborted: Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce after one of the ranks finished execution."
    text = "\n".join(["step 12 loss 0.41", "Primary job  terminated normally, but 1 process returned",
                      "a non-zero exit code. Per user-direction, the job has been aborted.", "", echo, echo])
    d = diagnose([write("h.log", text)])
    assert d.root_cause.source.endswith("h.log:2") and d.root_cause.category == "unknown"
    # alone, the echo still leads: it is all the log shows
    d = diagnose([write("e.log", "\n".join(["step 12 loss 0.41", echo]))])
    assert d.status == "failed" and d.root_cause.rule_id == "horovod-shutdown"


def test_an_error_printed_then_raised_is_cited_at_its_traceback(write):
    # a program that prints an error's words and then raises them: one error, cited where
    # the traceback says where it was raised; a different line before a traceback stays first
    words = "Error while writing shard: I/O error: No space left on device (os error 28)"
    frames = ["Traceback (most recent call last):", '  File "/srv/save.py", line 9, in save', "    write(blob)"]
    path = write("s.log", "\n".join(["step 400 loss 1.2", words, *frames, f"shardlib.ShardError: {words}"]))
    d = diagnose([path])
    assert d.root_cause.category == "io_error" and d.root_cause.source == f"{path}:6"
    assert d.root_cause.evidence == "traceback"
    other = "OSError: [Errno 28] No space left on device: '/scratch/tmp'"
    path = write("t.log", "\n".join(["step 400 loss 1.2", other, *frames, f"shardlib.ShardError: {words}"]))
    d = diagnose([path])
    assert d.root_cause.source == f"{path}:2"


def _dropped(prefix: str, head: str, exc: str) -> list[str]:
    return [f"{prefix}{head}"] + tb(prefix, exc)


def test_an_exception_python_dropped_is_never_the_failure_but_a_thread_exception_is_an_error_like_any(write):
    """`Exception ignored in: <obj>` above a traceback: Python dropped that exception (a
    finalizer, a callback), the process went on; alone in a log it is no failure, and beside a
    real failure it never leads, whichever comes first. A thread's `Exception in thread X:` is a
    real exception that stopped that thread's work: judged like any error, earliest first."""
    ignored = _dropped("", "Exception ignored in: <function Session.__del__ at 0x7f3c>", "AttributeError: 'NoneType' object has no attribute 'close'")
    d = diagnose([write("a.log", "\n".join(["epoch 3 done", "model saved"] + ignored))])
    assert d.status == "no_failure" and [h.category for h in d.handled] == ["python_exception"]
    for order in ((ignored, tb("", OOM)), (tb("", OOM), ignored)):
        d = diagnose([write("b.log", "\n".join(order[0] + [""] + order[1]))])
        assert d.status == "failed" and d.root_cause.category == "cuda_oom"
    thread = _dropped("", "Exception in thread Thread-3 (_loader):", "ValueError: bad record in shard 4")
    d = diagnose([write("c.log", "\n".join(thread))])
    assert d.status == "failed" and d.root_cause.category == "python_exception"
    d = diagnose([write("d.log", "\n".join(thread + [""] + tb("", OOM)))])
    assert d.root_cause.category == "python_exception" and d.root_cause.source.endswith("d.log:4")
    # the process went on stepping after it (moved from one step to the next): outlived, the
    # later error leads
    d = diagnose([write("e.log", "\n".join(thread + ["", "step 9", "step 10"] + tb("", OOM)))])
    assert d.root_cause.category == "cuda_oom"


def test_an_abort_right_after_an_uncaught_cpp_exception_is_explained_by_what_its_message_says(write):
    """`terminate called after throwing an instance of 'T'` then `what(): <message>`: the
    process aborts (SIGABRT) because of that message. When nothing else failed, the abort
    the launcher reports next is explained by it: the message's own category leads, cited at
    its line. A message no rule knows explains nothing (the abort stays), nor does one printed
    by another rank than the one that aborted, or in another file."""
    timeout = "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLGATHER, Timeout(ms)=600000) ran for 600412 milliseconds before timing out."
    term = "terminate called after throwing an instance of 'c10::DistBackendError'"
    exit6 = "E1127 10:00:00.1 9 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) local_rank: {r} (pid: 4242) of binary: /usr/bin/python"
    sigterm = "W1127 10:00:00.0 9 torch/distributed/elastic/multiprocessing/api.py:890] Sending process 4240 closing signal SIGTERM"
    path = write("a.log", "\n".join(["step 7", term, f"  what():  {timeout}", sigterm, exit6.format(r=3)]))
    d = diagnose([path])
    assert d.root_cause.category == "nccl_timeout" and d.root_cause.source == f"{path}:3"
    # a message nothing classifies: the abort is all the log says
    d = diagnose([write("b.log", "\n".join(["step 7", term, "  what():  queue drained twice", sigterm, exit6.format(r=3)]))])
    assert d.root_cause.category == "segfault"
    # the message on rank 2's prefix, the abort of another rank: not its words
    d = diagnose([write("c.log", "\n".join(["[rank2]: step 7", f"[rank2]: {term}", f"[rank2]:   what():  {timeout}", exit6.format(r=5)]))])
    assert d.root_cause.category == "segfault"
    # in another file than the abort
    d = diagnose([write("d1.log", "\n".join(["step 7", term, f"  what():  {timeout}"])), write("d2.log", "\n".join([sigterm, exit6.format(r=3)]))])
    assert d.root_cause.category == "segfault"


def test_a_plain_non_zero_exit_is_explained_by_the_named_error_its_process_printed_last(write):
    # a process's last output is an error a rule names on the bottom rung (a retried try that
    # never succeeded), then its end is reported only as an exit status: that error is why it
    # exited. An error only the generic lexicon knows, a signal's end, or an error printed after
    # the exit explain nothing
    try_line = "[W socket.cpp:601] [c10d] The client socket has timed out after 60s while trying to connect to (node-a, 29500)."
    exit_line = "srun: error: node-b: task 1: Exited with exit code 1"
    d = diagnose([write("a.log", "\n".join(["step 0 starting", try_line, exit_line]))])
    assert d.root_cause.category == "rendezvous_error" and d.root_cause.source.endswith("a.log:2")
    for lines, cat in (([try_line, "srun: error: node-b: task 1: Killed"], "killed"),
                       (["ERROR: the shard index could not be read", exit_line], "unknown"),
                       ([exit_line, try_line], "unknown")):
        d = diagnose([write("b.log", "\n".join(["step 0 starting", *lines]))])
        assert d.root_cause.category == cat, lines


def test_a_traceback_cut_before_its_exception_is_explained_by_the_named_error_printed_last(write):
    # a paste that stops inside a traceback says where the process failed, not what it raised;
    # the error a rule names on the bottom rung that the same process printed just before (values
    # printed as NaN, a loss of nan) is what the lost line would have said. The generic lexicon's
    # error line, one printed by another rank, or one after the traceback explains nothing
    cut = ["Traceback (most recent call last):", '  File "/srv/fit.py", line 80, in <module>', "    main()", '  File "/srv/fit.py", line 61, in main']
    values = "weights of head.proj: tensor([[nan, nan, nan, nan, nan],"
    d = diagnose([write("a.log", "\n".join(["epoch 3 done", values, *cut]))])
    assert d.root_cause.category == "numerical" and d.root_cause.source.endswith("a.log:2")
    d = diagnose([write("b.log", "\n".join(["epoch 3 done", "step 4 | loss: nan | lr 3e-4", *cut]))])
    assert d.root_cause.category == "numerical" and d.root_cause.source.endswith("b.log:2")
    for name, lines in (("c.log", ["ERROR: the cache could not be refreshed", *cut]),
                        ("d.log", [f"[rank1]: {values}", *(f"[rank0]: {l}" for l in cut)]),
                        ("e.log", [*cut, values])):
        d = diagnose([write(name, "\n".join(["epoch 3 done", *lines]))])
        assert d.root_cause.rule_id == "traceback-cut" and d.root_cause.category == "unknown", name


def test_an_uncaught_cpp_exception_leads_over_a_later_peer_echo_unless_a_rule_reads_its_message(write):
    """A process ends on an exception nothing caught (the C++ runtime's `terminate called after
    throwing an instance of 'T'`, then `what(): <message>`); its peers then lose it (a socket
    the peer closed, a communicator aborted). The process's own end stands first: the peers'
    lines are echoes of it. When a rule reads the message on the `what():` line (a collective
    timeout the watchdog turned into this exception), that finding is what the report is about
    and leads in its place, cited at its own line; a message no rule reads leaves the
    exception as the crash."""
    head = "terminate called after throwing an instance of 'std::out_of_range'"
    echoes = ("RuntimeError: [/opt/src/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.1.2.3]:17001",
              "RuntimeError: NCCL communicator was aborted on rank 0.")
    for echo in echoes:
        lines = ["[rank0]: iteration 40 done", "[rank2]: iteration 40 done", f"[rank2]: {head}", "[rank2]:   what():  unordered_map::at",
                 f"[rank0]: {echo}", f"[rank1]: {echo}"]
        d = diagnose([write("a.log", "\n".join(lines))])
        assert d.root_cause.rule_id == "uncaught-cpp-exception", echo
        assert d.root_cause.rank == 2 and d.root_cause.source.endswith("a.log:3"), echo
    # the message is a collective timeout a rule reads: that finding leads, at the what() line
    timeout = "[Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=17, OpType=BROADCAST, Timeout(ms)=300000) ran for 300050 milliseconds before timing out."
    lines = ["[rank2]: iteration 40 done", "[rank2]: terminate called after throwing an instance of 'c10::DistBackendError'",
             f"[rank2]:   what():  {timeout}", f"[rank0]: {echoes[0]}"]
    d = diagnose([write("b.log", "\n".join(lines))])
    assert d.root_cause.rule_id == "nccl-watchdog-timeout" and d.root_cause.source.endswith("b.log:3")
    # an echo printed before the exception (by time) is no echo of it: the earliest leads
    lines = ["[rank0]: iteration 40 done", f"[rank0]: {echoes[0]}", f"[rank2]: {head}", "[rank2]:   what():  unordered_map::at"]
    d = diagnose([write("c.log", "\n".join(lines))])
    assert d.root_cause.rule_id == "peer-closed"
    # every line stamped (a collector's clock): the peers' echoes a moment later, within the
    # clock-skew allowance, are still echoes, not a more specific cause that rivals it
    stamped = [f"2031-05-06T07:08:0{s}Z {line}" for s, line in
               ((1, "[rank0]: iteration 40 done"), (2, f"[rank2]: {head}"), (2, "[rank2]:   what():  unordered_map::at"),
                (2, f"[rank0]: {echoes[0]}"), (3, f"[rank1]: {echoes[1]}"))]
    d = diagnose([write("t.log", "\n".join(stamped))])
    assert d.root_cause.rule_id == "uncaught-cpp-exception" and d.root_cause.rank == 2
    # a native logging library's fatal record (a failed CHECK, then its stack trace banner) is
    # the process's own end in the same way
    check = ["[rank2]: F0412 07:00:01.000100 7 sampler.cc:81] Check failed: idx < n (1024 vs. 1000) index past the shard",
             "[rank2]: *** Check failure stack trace: ***"]
    for echo in echoes:
        d = diagnose([write("d.log", "\n".join(["[rank0]: iteration 40 done", *check, f"[rank0]: {echo}", f"[rank1]: {echo}"]))])
        assert d.root_cause.rule_id == "fatal-log-check" and d.root_cause.rank == 2, echo


def test_a_pasters_words_around_a_fenced_log_yield_to_the_fenced_record(write):
    """In a paste whose log stands in code fences, a line outside them is the paster's own
    words (a sentence that names the error in passing): where the fenced log records an error
    of the same kind, that record is the root, not the sentence above it, and the two are not
    one report. Without fences the sentence is not told from a log line: the earlier stays."""
    words = "While fitting, a loader process hit a bus error; maybe the shared memory (shm) is too small."
    record = "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm)."
    fenced = ["Setup: 8 GPUs, 12 workers.", words, "", "Log:", "```", "epoch 0:   0%|          | 0/900 [00:00<?, ?it/s]", record, "```", "Any idea?"]
    path = write("j.log", "\n".join(fenced))
    d = diagnose([path])
    assert d.root_cause.category == "host_oom" and d.root_cause.source == f"{path}:7"
    bare = [ln for ln in fenced if ln != "```"]
    path = write("k.log", "\n".join(bare))
    d = diagnose([path])
    assert d.root_cause.category == "host_oom" and d.root_cause.source == f"{path}:2"


def test_an_exception_that_announces_its_message_below_is_what_a_rule_reads_there(write):
    # the exception line ends in a colon after a few words; the message a rule reads comes
    # after a blank line and a stack of where the failing operation was defined
    gpu_oom = ("OOM when allocating tensor with shape[4,256,256] and type float on "
               "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc")
    head = tb("", "mylib.errors.ResourceExhaustedError: Graph execution error:")
    below = ["", "Detected at node 'net/conv' defined at (most recent call last):",
             '    File "t.py", line 1, in <module>', "Node: 'net/conv'", gpu_oom]
    d = diagnose([write("a.log", "\n".join(head + below))])
    assert d.root_cause.category == "cuda_oom" and d.root_cause.source.endswith(":8")
    # an exception that says what it is on its own line stays the failure, whatever follows
    said = tb("", "mylib.errors.InvalidArgumentError: the record header is corrupt") + ["", gpu_oom]
    assert diagnose([write("b.log", "\n".join(said))]).root_cause.category == "python_exception"
    # the message must come soon after the exception that announced it
    far = head + [""] + ["~"] * 60 + [gpu_oom]
    assert diagnose([write("c.log", "\n".join(far))]).root_cause.category == "python_exception"


def test_an_exception_of_its_own_below_an_announcing_one_is_not_its_message(write):
    # the exception line ends in a colon after a few words and its message follows (lines no
    # rule reads); a later exception line with a class of its own, a few lines down, is
    # another failure (here a worker's teardown), not the message the first one announced
    head = tb("", "ValueError: the run's settings are invalid:")
    below = ["", "  * schedule.warmup exceeds schedule.total", "  * data.root is missing",
             "Exception ignored in: <function Loader.__del__ at 0x7f00>",
             "RuntimeError: CUDA error: an illegal memory access was encountered"]
    path = write("a.log", "\n".join(head + below))
    d = diagnose([path])
    assert d.root_cause.category == "python_exception" and d.root_cause.source == f"{path}:3"


def test_frames_cut_before_their_exception_line_say_no_class_unless_a_wrapper_above_names_it(write):
    # a paste that stops inside a traceback says where the process was, not what it raised:
    # the kind of failure is not in the log (unknown). A wrapper line above the frames that names
    # the class it carries (`Wrapper(Inner): ...`, then the remote process's frames, cut) does
    # say what they end in: that class is the failure, read by the generic rule or by the rule
    # for that class
    head = ["Traceback (most recent call last):", '  File "/opt/pool/driver.py", line 30, in collect', "    out = handle.result()"]
    carried = ['  File "/opt/pool/worker.py", line 81, in run_job', "    rows = table[offset]",
               '  File "/opt/pool/table.py", line 12, in __getitem__', "    return self.rows[i]"]
    d = diagnose([write("a.log", "\n".join(["job 12 started", *head, *carried]))])
    assert d.root_cause.category == "unknown" and d.root_cause.rule_id == "traceback-cut"
    wrapper = "pool.errors.JobFailedError(IndexError): job 12 on worker-3 (pid=4410)"
    d = diagnose([write("b.log", "\n".join(["job 12 started", *head, wrapper, *carried]))])
    rc = d.root_cause
    assert rc.category == "python_exception" and rc.rule_id == "python-exception", rc
    assert rc.source.endswith("b.log:5") and "IndexError" in rc.remediation, rc
    oom = "pool.errors.JobFailedError(torch.OutOfMemoryError): job 12 on worker-3 (pid=4410)"
    d = diagnose([write("c.log", "\n".join(["job 12 started", *head, oom, *carried]))])
    assert d.root_cause.category == "cuda_oom", d.root_cause
    # the carried traceback whole: its own exception line speaks, as before
    d = diagnose([write("d.log", "\n".join(["job 12 started", *head, wrapper, *carried, "IndexError: list index out of range"]))])
    assert d.root_cause.category == "python_exception" and "list index out of range" in d.root_cause.remediation


def test_nccls_return_code_traces_rank_below_a_record_of_what_failed(write):
    # NCCL prints `file.cc:N -> code` at INFO level for each caller an error code passes
    # through, also while communicators abort after another failure, before the record of it
    # (a watchdog's timeout): the traces say a call failed, not what; they lead only when
    # nothing else is in the log, and after an NCCL WARN the WARN leads
    traces = [f"gpu-b03:7710:{t} [{g}] NCCL INFO {f} -> {c}" for t, g, f, c in
              ((8801, 0, "misc/socket.cc:540", 3), (8801, 0, "misc/socket.cc:612", 3), (8790, 1, "transport/net.cc:1180", 2))]
    timeout = ("[rank3]:[E1127 10:02:11.118 ProcessGroupNCCL.cpp:1500] [PG 0 Rank 3] Watchdog caught collective operation "
               "timeout: WorkNCCL(SeqNum=881, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600310 milliseconds before timing out.")
    d = diagnose([write("a.log", "\n".join(["step 40 | loss 2.11", *traces, timeout]))])
    assert d.root_cause.category == "nccl_timeout" and d.root_cause.source.endswith("a.log:5"), d.root_cause
    d = diagnose([write("b.log", "\n".join(["step 40 | loss 2.11", *traces]))])
    assert d.root_cause.category == "nccl_error" and d.root_cause.source.endswith("b.log:2"), d.root_cause
    warn = "gpu-b03:7710:8801 [0] NCCL WARN Net : Connection closed by remote peer gpu-b04<51122>"
    d = diagnose([write("c.log", "\n".join(["step 40 | loss 2.11", *traces[:1], warn, *traces[1:]]))])
    assert d.root_cause.rule_id == "nccl-warn" and d.root_cause.source.endswith("c.log:3"), d.root_cause

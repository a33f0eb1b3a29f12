"""Findings as the input streams by (diagnosis.findings): merged reports, hosts, process ids."""

from __future__ import annotations

from slurmdoc.api import diagnose

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB."


def tb(prefix: str, exc: str, ts: str | None = None) -> list[str]:
    head = [f"{prefix}{ts} INFO step 9"] if ts else []
    return head + [f"{prefix}{l}" for l in ["Traceback (most recent call last):", '  File "t.py", line 1, in <module>', exc]]


def test_srun_lines_fold_into_one_symptom_with_every_rank(write):
    text = "\n".join(
        tb("[rank9]: ", "ModuleNotFoundError: No module named 'apex'")
        + ["srun: error: n1: tasks 0-3: Terminated", "srun: error: n2: tasks 4-7: Terminated"]
    )
    d = diagnose([write("j.log", text)])
    (cascade,) = [s for s in d.symptoms if s.category == "sigterm_cascade"]
    assert cascade.ranks == tuple(range(8)) and cascade.count == 2 and cascade.nodes == ("n1", "n2")


def test_srun_lines_about_different_hosts_keep_their_hosts(write):
    text = "\n".join([f"{r}: step 1" for r in range(2)] + ["srun: error: nid04277: task 1: Segmentation fault (core dumped)", "srun: error: nid04276: task 0: Segmentation fault (core dumped)"])
    d = diagnose([write("s.log", text)])
    assert (d.root_cause.rank, d.root_cause.node) == (1, "nid04277")


def test_sigterm_pids_count_for_the_ranks_the_summary_names(write):
    text = "\n".join([
        "[rank2]: Traceback (most recent call last):",
        '[rank2]:   File "t.py", line 1, in <module>',
        "[rank2]: ValueError: bad",
        "W1121 10:00:00.1 140 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 5267 closing signal SIGTERM",
        "E1121 10:00:00.2 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 2 (pid: 5269) of binary: python",
        "Traceback (most recent call last):",
        '  File "/usr/bin/torchrun", line 8, in <module>',
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Failures:",
        "[1]:",
        "  time      : 2025-03-01_12:05:02",
        "  host      : node-3",
        "  rank      : 0 (local_rank: 0)",
        "  exitcode  : -15 (pid: 5267)",
        "  error_file: <N/A>",
        "  traceback : Signal 15 (SIGTERM) received by PID 5267",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2025-03-01_12:05:02",
        "  host      : node-3",
        "  rank      : 2 (local_rank: 2)",
        "  exitcode  : 1 (pid: 5269)",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "============================================================",
    ])
    d = diagnose([write("job.log", text)])
    assert d.root_cause.rank == 2 and d.root_cause.node == "node-3"
    sig = [s for s in d.symptoms if s.category == "sigterm_cascade"]
    assert sig and 0 in sig[0].ranks, d.symptoms


def test_a_merged_report_cites_the_line_its_rule_knows_best(write):
    # one multi-line report of one rule: its opening line is a generic aftermath that a later
    # pattern of the rule knows; the line a more specific (earlier) pattern matches names the
    # operation, and is the one cited, whichever order the printer wrote them in
    generic = "[E ProcessGroupNCCL.cpp:600] [Rank 2] Some NCCL operations have failed or timed out. Data may be corrupt."
    specific = "[E ProcessGroupNCCL.cpp:900] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=BROADCAST, NumelIn=8, NumelOut=8, Timeout(ms)=60000) ran for 60007 milliseconds before timing out."
    for lines in ([generic, "[E ProcessGroupNCCL.cpp:610] taking the process down.", specific], [specific, generic]):
        text = "\n".join(["[rank2]: step 3", *(f"[rank2]:{ln}" for ln in lines)])
        d = diagnose([write("w.log", text)])
        assert d.root_cause.rule_id == "nccl-watchdog-timeout"
        n = 2 + lines.index(specific)
        assert d.root_cause.source.endswith(f"w.log:{n}"), (d.root_cause.source, n)
        assert "OpType=BROADCAST" in d.root_cause.message


def test_a_server_that_gives_up_after_its_tries_is_cited_at_its_error_line(write):
    # the rendezvous store's server tries each local address and logs each refusal at warning
    # level, then logs at error level that it could not listen anywhere: that line is the
    # failure; the tries' reason (the port in use) still fills the advice
    for port, n_tries in ((6123, 1), (41000, 2)):
        tries = [f"[W socket.cpp:401] [c10d] The server socket has failed to bind to {a}:{port} (errno: 98 - Address already in use)." for a in ("[::]", "0.0.0.0")[:n_tries]]
        text = "\n".join(["$ torchrun --nproc-per-node 2 train.py", *tries,
                          "[E socket.cpp:435] [c10d] The server socket has failed to listen on any local network address.",
                          "Traceback (most recent call last):", '  File "/usr/bin/torchrun", line 8, in <module>', "    sys.exit(main())"])
        d = diagnose([write("p.log", text)])
        assert d.root_cause.category == "rendezvous_error"
        assert d.root_cause.source.endswith(f"p.log:{2 + n_tries}"), d.root_cause.source
        assert f"Port {port} is already in use" in d.root_cause.remediation


def test_nccls_network_warn_is_cited_before_the_proxys_report_of_it(write):
    # NCCL's proxy thread reports that an operation it ran for another thread failed (a bare
    # return code), sometimes before that thread's own WARN from the network layer names what
    # failed (the peer closed the socket, a recv broke); the network layer's line is cited
    host = "gpu7:811:"
    proxy = [f"{host}902 [3] proxy.cc:1200 NCCL WARN [Proxy Service 3] Failed to execute operation Connect from rank 3, retcode 6",
             f"{host}901 [3] proxy.cc:890 NCCL WARN Proxy Call to rank 3 failed (Connect)"]
    for net in ("misc/socket.cc:540 NCCL WARN Net : Connection closed by remote peer peer-host<40110>",
                "misc/socket.cc:520 NCCL WARN Net : Call to recv from 10.1.2.3<50001> failed : Broken pipe",
                "transport/net_ib.cc:1400 NCCL WARN NET/IB : Got completion from peer 10.1.2.3<50001> with status=12 opcode=0 len=0 vendor err 129 (Recv)"):
        text = "\n".join(["python train.py --nodes 2", proxy[0], "", f"{host}901 [3] {net}",
                          f"{host}901 [3] NCCL INFO misc/socket.cc:560 -> 6", proxy[1],
                          f"{host}901 [3] NCCL INFO transport.cc:124 -> 6", f"{host}811 [3] NCCL INFO group.cc:421 -> 3"])
        d = diagnose([write("n.log", text)])
        assert d.root_cause.category == "nccl_error" and d.root_cause.rule_id == "nccl-warn"
        assert d.root_cause.source.endswith("n.log:4"), (d.root_cause.source, net)


def test_two_reporters_of_one_signal_merge_at_the_first_report(write):
    # a shell's report of a job a signal ended, then a runner's exit status naming the same
    # signal: two reporters' words for one end, found by different rules and both the
    # claiming rule's finding; the first line is cited, whichever reporter's pattern came
    # earlier in its own rule
    for first, second in (("51234 segmentation fault (core dumped)  python fit.py --cfg a.yaml", "Process finished with exit code 139"),
                          ("Process finished with exit code 139", "51234 segmentation fault (core dumped)  python fit.py --cfg a.yaml")):
        d = diagnose([write("s.log", "\n".join(["epoch 1 step 40 loss 2.1", first, "", second]))])
        assert d.root_cause.category == "segfault" and d.root_cause.source.endswith("s.log:2"), d.root_cause.source


def test_a_sentence_quoting_an_error_does_not_merge_with_the_records_that_follow(write):
    # a person's sentence (another script around the error's words) above the pasted log, then
    # the program's own lines of the same error on the same stream: the records are a finding
    # of their own, and they, not the quotation, are the root
    quote = "训练时一直报错 OSError: [Errno 28] No space left on device，磁盘明明还有空间"
    record = "/opt/env/lib/python3.11/site-packages/pool.py:46: UserWarning: [Errno 28] No space left on device.  falling back to serial mode"
    path = write("q.log", "\n".join([quote, "", "$ python train.py", record, "    warnings.warn(msg)"]))
    d = diagnose([path])
    assert d.root_cause.category == "io_error" and d.root_cause.source == f"{path}:4"


def _timeout(rank: int, stamp: str, seq: int) -> str:
    return (f"[rank{rank}]:[E{stamp} ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.")


def test_times_order_lines_of_one_file_unless_they_are_the_same_instant(write):
    # c10's logger stamps lines with an unpadded month (`E707`): a rank's timeout printed late,
    # under another rank's later one, is still the earlier by its time
    late = [_timeout(6, "707 03:10:00.500000000", 90), _timeout(1, "707 03:02:00.100000000", 90)]
    d = diagnose([write("late.log", "\n".join(late))])
    assert d.root_cause.source.endswith("late.log:2"), d.root_cause.source
    # ranks timing out at one instant (stamps a few microseconds apart, in either order) are
    # cited in the order the file holds them: such differences say nothing of which came first
    same = [_timeout(4, "707 03:10:00.500009000", 91), _timeout(5, "707 03:10:00.500001000", 91)]
    d = diagnose([write("same.log", "\n".join(same))])
    assert d.root_cause.source.endswith("same.log:1"), d.root_cause.source


def test_a_summary_pasted_from_its_head_is_cited_at_the_head_not_its_closing_banner(write):
    # a launcher summary that begins at its `Root Cause` head (its banner and ChildFailedError
    # cut off) holds no exception line: what states the failure is the head the rule matched,
    # not the summary's last line, whatever follows the summary
    summary = ["Root Cause:", "[0]:", "  time: 2030-05-06_07:08:09", "  rank: 5 (local_rank: 1)",
               "  exitcode: 1 (pid: 321)", "  error_file: /scratch/e.json", '  msg: "Process failed with exitcode 1"', "=" * 40]
    for after in ([], ["ring 2 built"], ["", "the run was on 4 nodes"]):
        d = diagnose([write("s.log", "\n".join(["=" * 40, "  tune.py FAILED", "=" * 40] + summary + after))])
        assert d.root_cause is not None and d.root_cause.rule_id == "torchrun-summary", after
        assert d.root_cause.message == "Root Cause:" and d.root_cause.source.endswith(":4"), after


def test_an_uncaught_cpp_exception_merged_into_the_report_before_it_still_explains_the_abort(write):
    """A process often logs an error, then dies of the same error thrown uncaught (`terminate
    called ...`, `what(): <the same words>`): the two lines are one report (one finding, cited at
    the first), and that finding still stands for the abort the launcher reports next."""
    words = "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLGATHER, Timeout(ms)=600000) ran for 600412 milliseconds before timing out."
    text = "\n".join([
        "step 7",
        f"[E1127 10:00:00.000 9 ProcessGroupNCCL.cpp:616] {words}",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        f"  what():  {words}",
        "E1127 10:00:01.0 9 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) local_rank: 3 (pid: 4242) of binary: /usr/bin/python",
    ])
    path = write("m.log", text)
    d = diagnose([path])
    assert d.root_cause.category == "nccl_timeout" and d.root_cause.source == f"{path}:2"


def test_a_weaker_echo_among_a_reports_lines_does_not_split_the_report(write):
    """A report of one rule over several lines (a generic aftermath, then the line naming the
    collective) may hold, between its lines, another rule's weaker symptom of the same end (the
    C++ runtime's head for the exception the watchdog throws). That echo is a finding of its
    own, but the report stays one: cited at the line its rule knows best. A finding of a
    stronger rule between two lines does split them."""
    generic = "[E ProcessGroupNCCL.cpp:456] Some NCCL operations have failed or timed out. Data may be corrupt."
    head = "terminate called after throwing an instance of 'c10::DistBackendError'"
    specific = "  what():  [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600100 milliseconds before timing out."
    d = diagnose([write("a.log", "\n".join(["step 12", generic, head, specific]))])
    assert d.root_cause.rule_id == "nccl-watchdog-timeout" and d.root_cause.source.endswith("a.log:4")
    assert any(s.rule_id == "uncaught-cpp-exception" for s in d.symptoms)
    # a stronger finding between them (a CUDA error, a cause) is no echo: it leads
    cuda = "RuntimeError: CUDA error: an illegal memory access was encountered"
    d = diagnose([write("b.log", "\n".join(["step 12", generic, cuda, specific]))])
    assert d.root_cause.category == "cuda_error"


def test_an_echo_inside_another_report_merges_its_own_next_lines(write):
    """A process logs an error, then gives up on it in a report of another, weaker rule that
    takes several lines (a failed CHECK's fatal record, then the `*** Check failure stack
    trace: ***` banner above its frames). The echo does not split the first report, and its
    own lines are one report too: one event, counted once among the symptoms."""
    lines = [
        "I0301 08:00:00.000000  700 solver.cpp:239] Iteration 300, loss = 0.41",
        "E0301 08:00:01.000000  700 reader.cpp:52] Could not open file /data/shard-0007.bin: No such file or directory",
        "F0301 08:00:01.000100  700 reader.cpp:53] Check failed: fd >= 0 (-1 vs. 0) cannot read the shard",
        "*** Check failure stack trace: ***",
        "    @     0x7f00aa001000  google::LogMessage::Fail()",
        "    @     0x7f00aa002000  (unknown)",
    ]
    d = diagnose([write("a.log", "\n".join(lines))])
    assert d.root_cause.category == "io_error"
    checks = [s for s in d.symptoms if s.rule_id == "fatal-log-check"]
    assert len(checks) == 1 and checks[0].count == 1 and checks[0].first_source.endswith("a.log:3")

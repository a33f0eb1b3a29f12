"""End to end through the library: generated multi-rank logs with known truth."""

from __future__ import annotations

import pytest

from slurmdoc.api import diagnose
from slurmdoc.ingest.scan import Budget
from slurmdoc.errors import InputError

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.15 GiB of which 1.23 GiB is free."


def torchrun_summary(rank: int, local: int, exitcode: int, traceback: str) -> list[str]:
    """The launcher's own traceback with its ChildFailedError summary (one Root Cause)."""
    return [
        "Traceback (most recent call last):",
        '  File "/usr/bin/torchrun", line 8, in <module>',
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2025-03-01_12:05:02",
        "  host      : node-3",
        f"  rank      : {rank} (local_rank: {local})",
        f"  exitcode  : {exitcode} (pid: 1234)",
        "  error_file: <N/A>",
        f"  traceback : {traceback}",
        "============================================================",
    ]


def watchdog(rank: int, seq: int = 4012) -> list[str]:
    return [
        f"[E1121 10:10:{10 + rank % 40:02d}.000000 140 ProcessGroupNCCL.cpp:629] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.",
        f"[E1121 10:10:{10 + rank % 40:02d}.000001 140 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        f"  what():  [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated with exception: [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE) ran for 600081 milliseconds before timing out.",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f0 in /usr/lib/libc10.so)",
        "frame #1: <unknown function> + 0x1234 (0x7f1 in /usr/lib/libtorch_cuda.so)",
    ]


def test_512_rank_srun_log_with_one_oom_among_511_watchdog_timeouts(write):
    lines = []
    for step in range(1, 4):
        lines += [f"{r:>3}: iteration {step}/1000 | lm loss 2.3 | elapsed 1.1" for r in range(512)]
    tb = [
        "Traceback (most recent call last):",
        '  File "/workspace/megatron/pretrain_gpt.py", line 388, in <module>',
        "    pretrain(train_valid_test_datasets_provider, model_provider)",
        '  File "/workspace/megatron/core/transformer/mlp.py", line 142, in forward',
        "    intermediate = self.linear_fc1(hidden_states)",
        OOM,
    ]
    # rank 137's traceback interleaved with other ranks' output
    for i, t in enumerate(tb):
        lines.append(f"137: {t}")
        lines.append(f"{i:>3}: iteration 4/1000 | lm loss 2.2")
    oom_line = len(lines) - 1  # 1-based number of the OOM line
    for r in range(512):
        if r != 137:
            lines += [f"{r:>3}: {w}" for w in watchdog(r)]
    lines.append("srun: error: gpu-node-17: task 137: Exited with exit code 1")
    lines.append("srun: error: gpu-node-3: tasks 0-7,24-31: Aborted")
    p = write("job_1234.log", "\n".join(lines) + "\n")
    d = diagnose([p])
    rc = d.root_cause
    assert d.status == "failed"
    assert rc.category == "cuda_oom" and rc.rank == 137
    assert rc.source == f"{p}:{oom_line}"
    assert rc.frame == "/workspace/megatron/core/transformer/mlp.py:142"
    assert rc.node == "gpu-node-17"
    assert rc.traceback[0].startswith("Traceback") and rc.traceback[-1] == OOM
    assert d.ranks_seen == 512
    nccl = [s for s in d.symptoms if s.category == "nccl_timeout"]
    assert len(nccl) == 1
    assert nccl[0].ranks == tuple(r for r in range(512) if r != 137)
    assert nccl[0].count == 511  # one multi-line watchdog report per rank
    assert nccl[0].rank_ranges == "0-136, 138-511"


def test_cause_printed_after_its_symptoms_but_earlier_by_timestamp(write):
    # node 1's files are flushed late: in file order the OOM comes after node 0's timeouts
    node0 = [f"[rank{r}]:[E1121 10:20:00.{r:06d} 1 ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600000 milliseconds before timing out." for r in range(4)]
    node1 = ["[rank5]:[I1121 10:09:58.000000 1 train.py:1] iteration 9"]
    node1 += [f"[rank5]: {t}" for t in ["Traceback (most recent call last):", '  File "train.py", line 9, in step', "    y = f(x)", OOM]]
    node1 += [f"[rank{r}]:[E1121 10:20:00.5{r} 1 ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out." for r in (4, 6, 7)]
    a = write("logs/node0.log", "\n".join(node0) + "\n")
    b = write("logs/node1.log", "\n".join(node1) + "\n")
    d = diagnose([a, b])
    assert d.root_cause.category == "cuda_oom"
    assert d.root_cause.rank == 5
    assert d.root_cause.source == f"{b}:5"
    assert d.root_cause.timestamp.startswith("2")  # inherited from rank 5's own last line
    # symptoms only: the earliest timeout is the root when nothing crashed
    d2 = diagnose([a])
    assert d2.root_cause.category == "nccl_timeout" and d2.root_cause.promoted


def test_every_rank_failing_identically_is_said_so(write):
    lines = []
    for r in range(16):
        lines += [
            f"[rank{r}]: Traceback (most recent call last):",
            f'[rank{r}]:   File "/workspace/megatron/training/arguments.py", line 301, in validate_args',
            f"[rank{r}]:     check(args)",
            f"[rank{r}]: AssertionError: num_attention_heads (28) must be divisible by tensor_model_parallel_size (8)",
        ]
    d = diagnose([write("job.log", "\n".join(lines))])
    rc = d.root_cause
    assert rc.category == "shape_divisibility"
    assert rc.all_ranks and rc.ranks == tuple(range(16))
    assert "all 16 ranks" in d.verdict
    assert not [s for s in d.symptoms if s.rule_id == rc.rule_id]


def test_sigkill_with_oom_killer_evidence_is_host_oom(write):
    text = "\n".join(
        [
            "E1121 10:00:00.1 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 3 (pid: 4411) of binary: /usr/bin/python",
            "W1121 10:00:00.2 140 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 4410 closing signal SIGTERM",
            "slurmstepd: error: Detected 1 oom_kill event in StepId=5512.0. Some of the step tasks have been OOM Killed.",
        ]
    )
    d = diagnose([write("job.log", text)])
    assert d.root_cause.category == "host_oom"
    assert d.root_cause.rank == 3
    assert d.root_cause.source.endswith("job.log:1")
    assert any("oom_kill" in e for e in d.root_cause.evidence_lines)
    bare = diagnose([write("bare.log", text.rsplit("\n", 1)[0])])
    assert bare.root_cause.category == "killed" and bare.root_cause.rank == 3


def test_srun_torchrun_nested_local_ranks_become_global(write):
    # srun --label over one torchrun per node, 4 local ranks each: label = node index
    lines = [f"{n}: [default{l}]:step 1" for n in range(2) for l in range(4)]
    lines += [
        "1: [default2]:Traceback (most recent call last):",
        '1: [default2]:  File "train.py", line 3, in <module>',
        "1: [default2]:ModuleNotFoundError: No module named 'megatron.core.tensor_parallel'",
        "1: E1121 10:00:00.1 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 2 (pid: 4411) of binary: python",
    ]
    d = diagnose([write("job.log", "\n".join(lines))])
    assert d.root_cause.category == "import_error"
    assert d.root_cause.rank == 6  # node 1 x 4 + local 2
    assert d.ranks_seen == 8
    assert d.root_cause.captures["module"] == "megatron.core.tensor_parallel"


def test_torchrun_summary_naming_a_symptom_is_flagged(write):
    lines = [
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "train.py", line 3, in <module>',
        "[rank1]: ValueError: bad batch at step 3",
        "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:4242",
    ] + torchrun_summary(rank=0, local=0, exitcode=-15, traceback="Signal 15 (SIGTERM) received by PID 1234")
    d = diagnose([write("job.log", "\n".join(lines))])
    assert d.root_cause.category == "python_exception" and d.root_cause.rank == 1
    (v,) = d.launcher_verdicts
    assert v.rank == 0 and v.exitcode == -15 and v.agrees is False
    assert "downstream symptom" in v.note
    assert not any(s.category == "python_exception" for s in d.symptoms)  # the launcher's own traceback is not a failure


def test_clean_log_is_no_failure(write):
    d = diagnose([write("ok.log", "\n".join(f"[rank{r}]: iteration 10 loss 1.0" for r in range(8)))])
    assert d.status == "no_failure" and d.root_cause is None and d.ranks_seen == 8


def test_only_a_nonzero_exit_is_reported_as_unknown(write):
    d = diagnose([write("job.log", "training...\nsrun: error: node-1: task 3: Exited with exit code 2\n")])
    assert d.status == "failed"
    assert d.root_cause.category == "unknown" and d.root_cause.rank == 3 and d.root_cause.node == "node-1"


@pytest.mark.parametrize("state, category", [("Killed", "killed"), ("Bus error", "segfault"), ("Segmentation fault      (core dumped)", "segfault")])
def test_a_shells_report_of_a_job_a_signal_ended_is_a_failure_in_any_row_of_its_table(write, state, category):
    # with several jobs in the background, bash's table marks the current one `+`, the previous
    # one `-` and any other with a blank: each row is the shell's report, not a rank's output
    for mark in "+- ":
        d = diagnose([write("run.log", f"loading data\nstep 1 loss 2.3\n[3]{mark}  {state:<24}python fit.py --epochs 3\n")])
        assert d.status == "failed" and d.root_cause.category == category and d.root_cause.rank is None, mark


def test_the_rank_a_collector_saw_fail_first_leads_whatever_zone_the_program_logs_in(write):
    # per-pod logs under a collector's UTC time; the program logs its own local time, seven
    # hours behind, with no zone, and a traceback's lines carry only the collector's time:
    # rank 0 failed at 10:00:15 UTC, rank 1 five minutes later
    def collected(lines, minute):
        out = []
        for i, ln in enumerate(lines):
            t = f"{minute:02d}:{i * 5:02d}"
            out.append(f"2031-02-03T10:{t}.000000000Z " + ln.replace("{own}", f"2031-02-03 03:{t},000"))
        return "\n".join(out) + "\n"

    start = ["{own} INFO starting", "{own} INFO step 1 loss 2.3"]
    first = collected(start + ["Traceback (most recent call last):", '  File "train.py", line 10, in <module>', "    batch = next(it)", "KeyError: 'input_ids'"], 0)
    later = collected(start + ["{own} ERROR Traceback (most recent call last):", '  File "train.py", line 10, in <module>',
                               "    batch = next(it)", "ValueError: bad value in sample 7"], 5)
    d = diagnose([write("rank0.log", first), write("rank1.log", later)])
    assert d.root_cause.rank == 0 and d.root_cause.message == "KeyError: 'input_ids'"


def test_a_programs_numbered_list_is_not_a_launchers_rank_tags(write):
    # one program that numbers its stages (`[1] Preparing data`) is not MPICH's `[N] ` rank tags:
    # its fallback's traceback and the progress after it are one printer's, so the run went on
    log = "\n".join([
        "[1] Preparing data", "[2] Building model",
        "Traceback (most recent call last):", '  File "/opt/app/ops.py", line 12, in <module>', "    import flash_attn",
        "ModuleNotFoundError: No module named 'flash_attn'", "falling back to the eager attention", "[3] Training",
        *(f"Epoch {e}: {p}%|#   | {p}/100 [00:0{p // 20}<00:05, 9.9it/s, loss=1.{9 - p // 20}]" for e in (1, 2) for p in (10, 50, 100)),
        "[4] Saving model", "Done.",
    ]) + "\n"
    d = diagnose([write("run.log", log)])
    assert d.status == "no_failure" and d.ranks_seen == 0


def test_ranks_read_before_mpichs_tags_are_confirmed_count_as_ranks(write):
    # MPICH's `[N] ` tags are confirmed only once a number recurs or heads a traceback: every
    # rank that printed before that (one line each, in rank order) was read untagged, yet it
    # is a rank of the job: all 8 count, and the one that failed is named, not "all ranks"
    log = ["[0] starting on host-a", *(f"[{r}] rank {r} of 8 ready" for r in range(8)),
           "[5] Traceback (most recent call last):", '[5]   File "/srv/fit.py", line 40, in <module>',
           "[5]     torch.cuda.set_device(5)", "[5] RuntimeError: CUDA error: invalid device ordinal"]
    d = diagnose([write("mpich.log", "\n".join(log[1:]) + "\n")])
    assert d.ranks_seen == 8 and d.root_cause.rank == 5 and d.root_cause.category == "cuda_error"
    # one rank's line that recurs confirms them just as well
    d = diagnose([write("mpich2.log", "\n".join(log) + "\n")])
    assert d.ranks_seen == 8 and d.root_cause.rank == 5


def test_time_limit(write):
    d = diagnose([write("job.log", "[rank0]: iteration 5\nslurmstepd: error: *** JOB 1234 ON node-3 CANCELLED AT 2025-03-02T00:00:12 DUE TO TIME LIMIT ***\n")])
    assert d.root_cause.category == "time_limit"
    assert d.root_cause.captures["job"] == "1234"


def test_per_rank_files_of_a_torchrun_log_dir(write):
    for r in range(4):
        body = "iteration 1\n"
        if r == 2:
            body += 'Traceback (most recent call last):\n  File "t.py", line 1, in <module>\nKeyError: \'input_ids\'\n'
        write(f"run/attempt_0/{r}/stderr.log", body)
    import os

    d = diagnose([os.path.join(os.path.dirname(write("run/x.txt", "")), "")])
    assert d.root_cause.rank == 2 and d.root_cause.category == "python_exception"
    assert d.ranks_seen == 4


def test_empty_input_is_an_input_error(write):
    with pytest.raises(InputError, match="empty"):
        diagnose([write("e.log", "")])


def test_result_does_not_depend_on_argument_order(write):
    a = write("a/node0.log", "[rank0]: 2025-01-01 00:00:02,000 x\n[rank0]: ValueError: not a traceback\n")
    b = write("b/node1.log", "[rank1]: 2025-01-01 00:00:01,000 x\n[rank1]: Traceback (most recent call last):\n[rank1]:   File \"t.py\", line 1, in <module>\n[rank1]: KeyError: 'k'\n")
    d1 = diagnose([a, b])
    d2 = diagnose([b, a])
    assert d1.root_cause.rank == d2.root_cause.rank == 1


def test_ansi_colour_codes_do_not_hide_prefixes_or_errors(write):
    text = "\x1b[32m[rank2]:\x1b[0m Traceback (most recent call last):\n[rank2]:   File \"t.py\", line 1, in <module>\n\x1b[31m[rank2]: ValueError: boom\x1b[0m\n"
    d = diagnose([write("c.log", text)])
    assert d.root_cause.rank == 2 and d.root_cause.message == "ValueError: boom"


def test_error_glued_to_a_tqdm_bar_after_carriage_returns(write):
    text = "[rank0]: 10%|#         | 1/10 [00:01<00:09]\r[rank0]: 20%|##        | 2/10 [00:02<00:08]torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n"
    d = diagnose([write("t.log", text)])
    assert d.root_cause.category == "cuda_oom" and d.root_cause.rank == 0


def test_memory_does_not_grow_with_log_length(tmp_path):
    # the same 64-rank job, 1x and 8x as long: peak Python memory must stay flat
    import tracemalloc

    def make(name: str, steps: int) -> str:
        p = tmp_path / name
        with open(p, "w") as f:
            for step in range(steps):
                for r in range(64):
                    f.write(f"{r:>2}: [rank{r}]:[I1121 10:00:{step % 60:02d}.000000 1 train.py:9] iteration {step} | lm loss: 2.3 | grad norm: 0.8\n")
            f.write("13: [rank13]: Traceback (most recent call last):\n13: [rank13]:   File \"t.py\", line 1, in <module>\n")
            f.write(f"13: [rank13]: {OOM}\n")
        return str(p)

    peaks = []
    for name, steps in (("short.log", 50), ("long.log", 400)):
        path = make(name, steps)
        tracemalloc.start()
        d = diagnose([path])
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert d.root_cause.rank == 13
    assert peaks[1] < peaks[0] * 1.5 + (256 << 10), peaks


def test_a_torchrun_summary_alone_is_a_failure(write):
    text = "\n".join(torchrun_summary(rank=5, local=1, exitcode=1, traceback="To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"))
    d = diagnose([write("summary.log", text)])
    assert d.status == "failed" and d.root_cause.rank == 5 and d.root_cause.promoted


def test_remediation_leaves_out_what_the_log_does_not_say(write):
    d = diagnose([write("oom.log", "[rank4]: RuntimeError: CUDA error: out of memory\n")])
    assert d.root_cause.remediation_parts.summary == "Rank 4 ran out of GPU memory."
    d = diagnose([write("bare.log", "Traceback (most recent call last):\n  File \"t.py\", line 3, in f\n    assert ok\nAssertionError\n")])
    assert d.root_cause.remediation_parts.summary == "A process (rank unknown) raised AssertionError"
    assert "?" not in d.root_cause.remediation


# ---- damage a crash leaves in a log never detaches a line from its printer ---------------

DAMAGE = {
    "nul16": b"\x00" * 16,
    "nul4k": b"\x00" * 4096,
    "controls": b"\x01\x02\x7f",
    "undecodable": b"\x80\xfe\xc3",
}
LABELLED_TB = [
    b"1: Traceback (most recent call last):",
    b'1:   File "train.py", line 12, in <module>',
    b"1: RuntimeError: CUDA error: an illegal memory access was encountered",
]


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("context", [0, 300])
@pytest.mark.parametrize("where", ["header", "frame", "exception", "every", "glued"])
@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damage_before_an_srun_label_keeps_the_line_with_its_rank(write, exact, context, where, kind):
    hole = DAMAGE[kind]
    lines = [b"0: step %d loss 2.345" % i for i in range(context)]
    tb = list(LABELLED_TB)
    if where == "glued":
        # the hole swallowed the newline too: the record lands on the line before it
        if not lines:
            lines = [b"0: step 0 lo"]
        lines[-1] = lines[-1][: len(lines[-1]) // 2] + hole + tb.pop(0)
    else:
        for i in {"header": [0], "frame": [1], "exception": [2], "every": [0, 1, 2]}[where]:
            tb[i] = hole + tb[i]
    body = b"\n".join(lines + tb + [b"0: step 999 loss 2.3"]) + b"\n"
    path = write("job.log", body)
    d = diagnose([path], budget=None) if exact else diagnose([path])
    assert d.root_cause is not None, d.warnings
    rc = d.root_cause
    exc_line = body.split(b"\n").index(next(x for x in body.split(b"\n") if x.endswith(b"illegal memory access was encountered"))) + 1
    assert (rc.category, rc.rank, rc.source) == ("cuda_error", 1, f"{path}:{exc_line}")


@pytest.mark.parametrize("exact", [False, True])
def test_a_colour_code_inside_a_keyword_does_not_hide_the_line(write, exact):
    # terminals colour single words: the raw bytes of `train.py: error: ...` then hold an
    # escape sequence inside the rule's keyword; both readers find the line
    steps = [f"step {i} loss 2.0" for i in range(20_000)]
    line = "train.py: \x1b[1;31merror\x1b[0m: argument --lr: invalid float value: '3e-4x'"
    d = diagnose([write("j.log", "\n".join(steps + [line] + steps[:50]) + "\n")], budget=None if exact else Budget())
    assert d.status == "failed" and d.root_cause.rule_id == "bad-cli-arguments" and d.root_cause.source.endswith(":20001")


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("width", [80, 100, 120, 160])
def test_a_keyword_a_hard_wrap_cut_in_two_still_reaches_the_rules(write, exact, width):
    # a log hard-wrapped at a terminal's width: the prefilter searches the physical lines,
    # where a rule's keyword may be cut in two at the column; the rejoined line is still read.
    # (glog prints the full source path: an install's path sets where the words fall)
    keyword = "Watchdog caught collective operation timeout"
    lines = []
    for r in (1, 5, 7):
        head = f"[rank{r}]:[E1121 10:10:1{r}.000000 140 {{}}ProcessGroupNCCL.cpp:629] [Rank {r}] "
        room = width - 10 - len(head.format(""))  # the column 10 characters into the keyword
        path = "" if room <= 0 else ("/home/u/" + "torch-env-cu121-" * 20)[: room - 1] + "/"
        lines.append(head.format(path) + keyword + ": WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.")
        at = lines[-1].index(keyword)
        assert at < width < at + len(keyword)  # the column falls inside the keyword
    cut = [ln[i: i + width] for ln in lines for i in range(0, len(ln), width)]
    d = diagnose([write("j.log", "\n".join(cut) + "\n")], budget=None if exact else Budget())
    assert d.status == "failed" and d.root_cause.category == "nccl_timeout"


def test_a_json_diagnosis_imports_neither_the_slurm_side_nor_rich(tmp_path):
    """Start-up: `diagnose --format json` pays for what it uses. `from slurmdoc.api import
    diagnose` asks the module for __path__, which must not import the Slurm entry points, and
    the JSON renderer needs no console; the Slurm names still resolve when asked for."""
    import subprocess
    import sys

    log = tmp_path / "job.log"
    log.write_text("0: Traceback (most recent call last):\n0:   File \"train.py\", line 1, in <module>\n0: " + OOM + "\n")
    code = (
        "import io, sys\n"
        "from slurmdoc.api import diagnose\n"
        "from slurmdoc.report.emit import emit\n"
        f"emit(diagnose([{str(log)!r}]), 'json', io.StringIO())\n"
        "print(sorted(m for m in sys.modules if m == 'rich' or m.startswith(('rich.', 'slurmdoc.slurm.api', 'slurmdoc.slurm.sacct'))))\n"
        "import slurmdoc.api\n"
        "print(slurmdoc.api.triage.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "slurmdoc.slurm.api"


def test_unknown_prefilter_is_a_usage_error(tmp_path, monkeypatch):
    (tmp_path / "a.log").write_text("hello\n")
    monkeypatch.setenv("SLURMDOC_PREFILTER", "grep")
    with pytest.raises(InputError, match="SLURMDOC_PREFILTER"):
        diagnose([str(tmp_path / "a.log")])


def test_another_pattern_is_another_prefilter(monkeypatch):
    """A prefilter is kept per rule set for the process (a scan of many jobs); its guards come
    from the rules' patterns, so rules with the same keywords and other patterns get their own."""
    import dataclasses

    from slurmdoc import api
    from slurmdoc.engine.loader import Rulebook, load_rulebook
    from slurmdoc.engine.matcher import Matcher

    monkeypatch.setattr(api, "_PREFILTERS", {})
    book = load_rulebook(None)
    same = Matcher(Rulebook(list(book.rules)))
    first = api._prefilter(Matcher(book), "auto")
    assert api._prefilter(same, "auto") is first
    r = next(r for r in book.rules if r.id == "clean-end")
    other = dataclasses.replace(r, patterns=r.patterns[:1])
    changed = Matcher(Rulebook([other if x is r else x for x in book.rules]))
    assert changed.keywords == same.keywords
    assert api._prefilter(changed, "auto") is not first

"""Causal ordering and rank layout (diagnosis.analyze and its stages), through small crafted logs."""

from __future__ import annotations

from slurmdoc.api import diagnose
from slurmdoc.diagnosis.analyze import Analyzer
from slurmdoc.diagnosis.layout import Layout
from slurmdoc.models import RankRef, SourceInfo

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


def test_layout_resolution():
    an = Analyzer([SourceInfo(index=0, path="a"), SourceInfo(index=1, path="b")])
    # source 0: srun labels over torchrun with [defaultN] (labels are node indexes), 4 per node
    for node in range(2):
        for local in range(4):
            an.note_stream((0, node, local), RankRef(0, label=node, local=local))
    an.note_stream((1, 7), RankRef(1, label=7))  # source 1: plain srun-native labels
    lay = Layout(an)
    assert lay.resolve(RankRef(0, label=1, local=2)) == 6
    assert lay.resolve(RankRef(0, label=1)) is None  # a node-level line: no rank
    assert lay.resolve(RankRef(1, label=7)) == 7
    assert lay.resolve(RankRef(0, rank=11, label=0)) == 11


def test_srun_lines_fold_into_one_symptom_with_every_rank(write):
    text = "\n".join(
        tb("[rank9]: ", "ModuleNotFoundError: No module named 'apex'")
        + ["srun: error: n1: tasks 0-3: Terminated", "srun: error: n2: tasks 4-7: Terminated"]
    )
    d = diagnose([write("j.log", text)])
    (cascade,) = [s for s in d.symptoms if s.category == "sigterm_cascade"]
    assert cascade.ranks == tuple(range(8)) and cascade.count == 2 and cascade.nodes == ("n1", "n2")


def test_srun_native_label_and_rank_prefix_agree(write):
    # srun --label over srun-native ranks, with torch's excepthook prefix: `3: [rank3]:`
    lines = [f"{r}: step 1" for r in range(4)]
    lines += ["1: [rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:29877"]
    lines += ["srun: error: n1: task 3: Out Of Memory"]
    d = diagnose([write("j.log", "\n".join(lines))])
    assert d.root_cause.category == "host_oom" and d.root_cause.rank == 3


def test_a_file_name_rank_does_not_override_prefixes_inside(write):
    # named like a per-rank file, but the content is a whole job with [rankN]: prefixes
    lines = [f"[rank{r}]: step 1" for r in range(8)]
    lines += [f"[rank{r}]:[E1121 09:00:00.0 1 ProcessGroupNCCL.cpp:1] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE)" for r in range(8) if r != 5]
    lines += ["terminate called after throwing an instance of 'c10::DistBackendError'", "  what():  [PG 0 Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE)"]
    d = diagnose([write("debug_rank5.log", "\n".join(lines))])
    assert d.root_cause.stragglers == (5,)


def test_a_hung_rank_killed_at_the_end_is_reported_as_the_straggler(write):
    lines = [f"{r}: step 1" for r in range(16)]
    lines += [f"{r}: [E1121 09:10:00.0 1 ProcessGroupNCCL.cpp:1] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE)" for r in range(16) if r != 9]
    lines += ["srun: error: n3: task 9: Killed"]
    d = diagnose([write("j.log", "\n".join(lines))])
    assert d.root_cause.category == "nccl_timeout" and d.root_cause.stragglers == (9,)
    assert any("task 9: Killed" in e for e in d.root_cause.evidence_lines)
    # a SIGKILL with no hang before it stays a kill
    d = diagnose([write("k.log", "\n".join([f"{r}: step 1" for r in range(4)] + ["srun: error: n3: task 2: Killed"]))])
    assert d.root_cause.category == "killed" and d.root_cause.rank == 2


def test_per_node_files_named_after_hosts_are_numbered_in_order(write):
    tb5 = "\n".join(f"[default{l}]:step 1" for l in range(4)) + "\n" + "\n".join(
        ["[default2]:Traceback (most recent call last):", '[default2]:  File "t.py", line 1, in <module>', "[default2]:KeyError: 'x'"]
    )
    a = write("pn/slurm-node017.out", "\n".join(f"[default{l}]:step 1" for l in range(4)))
    b = write("pn/slurm-node018.out", tb5)
    d = diagnose([a, b])
    assert d.root_cause.rank == 6 and d.ranks_seen == 8


def test_filtered_local_ranks_do_not_invent_global_ranks(write):
    # --local-ranks-filter 0 on 2 nodes: only local rank 0 prints; local 0 of node 1 is not rank 1
    lines = ["0: [default0]:step 1", "1: [default0]:step 1", "1: [default0]:Traceback (most recent call last):", '1: [default0]:  File "t.py", line 1, in <module>', "1: [default0]:KeyError: 'x'"]
    # torchrun on node 1 reports local rank 3 too: there are more local ranks than printed
    lines += ["1: E1121 10:00:00.1 1 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 3 (pid: 9) of binary: python"]
    d = diagnose([write("f.log", "\n".join(lines))])
    assert d.root_cause.category == "python_exception" and d.root_cause.rank is None


def test_the_rank_others_waited_for_is_named_when_the_text_says(write):
    lines = [f"[rank{r}]: [rank{r}] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait timeout after 600000ms" for r in range(1, 4)]
    d = diagnose([write("u.log", "\n".join(lines))])
    assert d.root_cause.category == "nccl_timeout" and d.root_cause.rank == 0 and d.root_cause.stragglers == (0,)


def test_a_lone_reporter_of_a_timeout_is_not_called_its_cause(write):
    line = "[rank3]:[E1121 10:00:00.0 1 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)"
    d = diagnose([write("w.log", line)])
    assert d.root_cause.category == "nccl_timeout" and d.root_cause.rank is None
    assert any("reported by rank 3" in e for e in d.root_cause.evidence_lines)


def test_srun_lines_about_different_hosts_keep_their_hosts(write):
    text = "\n".join([f"{r}: step 1" for r in range(2)] + ["srun: error: nid04277: task 1: Segmentation fault (core dumped)", "srun: error: nid04276: task 0: Segmentation fault (core dumped)"])
    d = diagnose([write("s.log", text)])
    assert (d.root_cause.rank, d.root_cause.node) == (1, "nid04277")


def test_launcher_summary_naming_a_symptom_says_why_and_who_failed_first():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    d = diagnose([str(root / "tests" / "forms" / "30_gloo_peer_closed_summary_disagrees.log")])
    (v,) = d.launcher_verdicts
    assert v.agrees is False and v.rank == 1 and v.first_failure == 0
    assert "it only printed nccl_error" in v.note and "rank 0 failed first (python_exception" in v.note
    d = diagnose([str(root / "fixtures" / "torchrun" / "hang")])
    (v,) = d.launcher_verdicts
    assert v.agrees is False and v.first_failure == 2 and "rank 2 stalled first" in v.note


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


def test_context_that_explains_a_timeout_joins_its_evidence_and_remediation(write):
    lines = ["gpu-1:11:12 [0] NCCL INFO Using network Socket"]
    lines += [f"[rank{r}]:[E1121 10:10:00.0 1 ProcessGroupNCCL.cpp:629] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600081 milliseconds before timing out." for r in range(4)]
    rc = diagnose([write("j.log", "\n".join(lines))]).root_cause
    assert rc.category == "nccl_timeout"
    assert any("Using network Socket" in e for e in rc.evidence_lines)
    assert any("TCP sockets" in f for f in rc.remediation_parts.fix)
    # without a timeout or NCCL error, the same line is no failure at all
    assert diagnose([write("k.log", lines[0])]).status == "no_failure"

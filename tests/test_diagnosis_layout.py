"""Rank resolution (diagnosis.layout): prefixes, labels, file names and launcher lines become global ranks."""

from __future__ import annotations

from slurmdoc.api import diagnose
from slurmdoc.diagnosis.analyze import Analyzer
from slurmdoc.diagnosis.layout import Layout
from slurmdoc.models import RankRef, SourceInfo


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


def _host_tagged_launcher_exit(hosts: list[str]) -> list[str]:
    # a launcher that tags every line with its host (pdsh under DeepSpeed's runner), the failing
    # process named only by the local rank its command line was given
    lines = [f"{h}: [launch] starting 4 processes, world size {4 * len(hosts)}" for h in hosts]
    lines += [f"{hosts[-1]}: Traceback (most recent call last):", f'{hosts[-1]}:   File "/srv/fit.py", line 9, in <module>',
              f"{hosts[-1]}: ValueError: batch of 0 rows"]
    lines += [f"{hosts[-1]}: [launch] ['/usr/bin/python3', '-u', 'fit.py', '--local_rank=2'] exits with return code = 1"]
    return lines


def test_a_local_rank_on_one_of_several_hosts_is_no_global_rank(write):
    # lines tagged with two hosts make a multi-node job: local rank 2 of the second host is
    # not global rank 2, and with no index for the host it is no global rank at all
    d = diagnose([write("two.log", "\n".join(_host_tagged_launcher_exit(["dgx-a07", "dgx-b12"])))])
    assert d.root_cause is not None and d.root_cause.category == "python_exception"
    assert d.root_cause.rank is None and d.root_cause.node == "dgx-b12"
    # on one host, the local rank is the global rank
    d = diagnose([write("one.log", "\n".join(_host_tagged_launcher_exit(["dgx-a07"])))])
    assert d.root_cause is not None and d.root_cause.rank == 2


def _one_nodes_torchrun_log(rank: int, local: int) -> list[str]:
    # one node's torchrun output: the agent's line for its failed worker names the local rank
    # and pid, the summary below names the same process's global rank
    return [
        "step 12 | loss 3.04",
        f"E1127 09:00:01.500000 77 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: {local} (pid: 6120) of binary: /opt/py/bin/python",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "fit.py FAILED",
        "------------------------------------------------------------",
        "Failures:", "  <NO_OTHER_FAILURES>",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):", "[0]:",
        "  time      : 2026-11-27_09:00:01", "  host      : trn-31",
        f"  rank      : {rank} (local_rank: {local})", "  exitcode  : 1 (pid: 6120)",
        "  error_file: <N/A>", "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "============================================================",
    ]


def test_a_summary_whose_global_rank_is_not_the_local_rank_makes_the_job_multi_node(write):
    # rank 5 (local_rank: 1): this node's local rank 1 is not global rank 1, so the agent's
    # line naming local rank 1 blames no rank 1 (one process, counted once, never as two ranks)
    d = diagnose([write("n.log", "\n".join(_one_nodes_torchrun_log(5, 1)))])
    assert d.root_cause is not None and d.root_cause.rank != 1, d.root_cause
    assert 1 not in {r for s in d.symptoms for r in (s.ranks or [])}, d.symptoms
    # a single-node job's summary (rank equal to local rank) keeps the local rank as the rank
    d = diagnose([write("s.log", "\n".join(_one_nodes_torchrun_log(1, 1)))])
    assert d.root_cause is not None and d.root_cause.rank == 1, d.root_cause

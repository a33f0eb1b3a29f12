"""Generate a large, realistic multi-rank training log with one planted root cause.

Every rank prints a Megatron-style iteration line per step (timestamped), with the odd
untimestamped line between; NCCL start-up chatter at the top; harmless lines that contain
trigger words (retries, warnings) sprinkled through. Near the end, one rank (the root)
dies of a CUDA OOM with its traceback interleaved with the other ranks' output; ten
minutes later every other rank reports the NCCL watchdog timeout and aborts, and srun
reports each task's death. The truth (root rank, category, the line of the OOM) is
written beside the log as JSON.

    python bench/genlog.py --size-mib 1024 --ranks 512 --layout srun --out /tmp/b/job.log

Layouts: `srun` (srun --label, `137: `), `rank` (torchrun's `[rank137]:`), `files` (one
file per rank, no prefix, `--out` is a directory).

Styles of the progress lines: `plain`; `progress` (a progress bar that names the run,
`Training: 12%|...`, on every step: a rule keyword on almost every line); `colour` (the time
stamp and the loss in ANSI colour on every line).
"""

from __future__ import annotations

import argparse
import json
import os
import random
from datetime import datetime, timedelta

START = datetime(2026, 11, 20, 9, 0, 0)


def _prefix(layout: str, rank: int, width: int) -> str:
    if layout == "srun":
        return f"{rank:>{width}}: "
    if layout == "rank":
        return f"[rank{rank}]:"
    return ""


def _iteration_line(it: int, now: datetime, loss: float, style: str = "plain") -> str:
    if style == "progress":
        return (f"Training: {it * 100 // 500000:>3}%|{'#' * (it * 10 // 500000):<10}| {it}/500000 [{now:%H:%M:%S}<71:00:00, "
                f"1.02it/s, lm_loss={loss:.4f}, grad_norm={0.3 + (it % 13) / 100:.3f}, lr=3.0e-04]\n")
    if style == "colour":
        return (f"\x1b[32m[{now:%Y-%m-%d %H:%M:%S}]\x1b[0m iteration {it:>8}/  500000 | consumed samples: {it * 1024:>12} | "
                f"\x1b[1mlm loss:\x1b[0m {loss:.6E} | loss scale: 1.0 | grad norm: {0.3 + (it % 13) / 100:.3f} |\n")
    return (
        f"[{now:%Y-%m-%d %H:%M:%S}] iteration {it:>8}/  500000 | consumed samples: {it * 1024:>12} | "
        f"elapsed time per iteration (ms): {1000 + (it * 37) % 97:.1f} | learning rate: 2.999990E-04 | "
        f"global batch size:  1024 | lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: {0.3 + (it % 13) / 100:.3f} | "
        "number of skipped iterations:   0 | number of nan iterations:   0 |\n"
    )


class Writer:
    """One file (srun/rank layouts) or one file per rank (files layout), with line counts."""

    def __init__(self, layout: str, out: str, ranks: int) -> None:
        self.layout = layout
        self.width = len(str(ranks - 1))
        self.lines: dict[int, int] = {}
        self.size = 0
        if layout == "files":
            os.makedirs(out, exist_ok=True)
            self.files = {r: open(os.path.join(out, f"task-{r}.out"), "w", buffering=1 << 16) for r in range(ranks)}
        else:
            self.file = open(out, "w", buffering=1 << 20)
            self.count = 0
            self.buf: list[str] = []

    def emit(self, rank: int, text: str) -> int:
        """Write one line of `rank`; return its line number in its file."""
        if self.layout == "files":
            self.files[rank].write(text)
            n = self.lines.get(rank, 0) + 1
            self.lines[rank] = n
        else:
            self.buf.append(_prefix(self.layout, rank, self.width) + text)
            self.count += 1
            n = self.count
            if len(self.buf) >= 4096:
                self.flush()
        self.size += len(text) + 8
        return n

    def emit_raw(self, text: str) -> int:
        """A line with no rank prefix (srun's own messages)."""
        if self.layout == "files":
            return self.emit(0, text)
        self.buf.append(text)
        self.count += 1
        self.size += len(text)
        return self.count

    def flush(self) -> None:
        if self.layout != "files":
            self.file.write("".join(self.buf))
            self.buf.clear()

    def close(self) -> None:
        if self.layout == "files":
            for f in self.files.values():
                f.close()
        else:
            self.flush()
            self.file.close()


def generate(out: str, size_mib: int, ranks: int, layout: str, root_rank: int, seed: int = 1, style: str = "plain") -> dict:
    rnd = random.Random(seed)
    w = Writer(layout, out, ranks)
    target = size_mib << 20
    now = START
    nodes = max(1, ranks // 8)
    # start-up: NCCL chatter and a couple of harmless lines with trigger words
    for r in range(ranks):
        host = f"node{r // 8:03d}"
        w.emit(r, f"{host}:{4000 + r}:{4000 + r} [{r % 8}] NCCL INFO Bootstrap : Using eth0:10.0.{r // 8}.1<0>\n")
        w.emit(r, f"{host}:{4000 + r}:{4000 + r} [{r % 8}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.{r // 8}.1<0>\n")
        w.emit(r, f"{host}:{4000 + r}:{4000 + r} [{r % 8}] NCCL INFO comm 0x5612a0 rank {r} nranks {ranks} cudaDev {r % 8} busId {r % 8}000 - Init COMPLETE\n")
    for r in range(ranks):
        w.emit(r, f"[{now:%Y-%m-%d %H:%M:%S}] > building GPT model ... number of parameters on (tensor, pipeline) model parallel rank ({r % 8}, {r // 8 % 4}): 1678430208\n")
    it = 0
    order = list(range(ranks))
    fail_at = int(target * 0.985)
    while w.size < fail_at:
        it += 1
        now += timedelta(seconds=1)
        rnd.shuffle(order)
        loss = 2.5 - it * 1e-5
        line = _iteration_line(it, now, loss, style)
        for r in order:
            w.emit(r, line)
        if it % 50 == 0:
            r = rnd.randrange(ranks)
            w.emit(r, f"[{now:%Y-%m-%d %H:%M:%S}] saving checkpoint at iteration {it:>8} to /lustre/ckpt/gpt-7b\n")
            w.emit(rnd.randrange(ranks), f"[{now:%Y-%m-%d %H:%M:%S}] WARNING: connection to object store timed out, retrying (attempt 1 of 5)\n")
        if it % 7 == 0:
            w.emit(rnd.randrange(ranks), "  data shard loaded: 1048576 samples, 0 skipped\n")
    # the failure: rank `root_rank` runs out of GPU memory; the others keep printing a bit
    it += 1
    now += timedelta(seconds=1)
    tb = [
        "Traceback (most recent call last):\n",
        '  File "/workspace/megatron/pretrain_gpt.py", line 289, in <module>\n',
        "    pretrain(train_valid_test_datasets_provider, model_provider, ModelType.encoder_or_decoder, forward_step)\n",
        '  File "/workspace/megatron/training/training.py", line 386, in pretrain\n',
        "    iteration, num_floating_point_operations_so_far = train(\n",
        '  File "/workspace/megatron/training/training.py", line 1434, in train_step\n',
        "    losses_reduced = forward_backward_func(\n",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py", line 1553, in _call_impl\n',
        "    return forward_call(*args, **kwargs)\n",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 5 has a total capacity of 79.10 GiB "
        "of which 2.11 GiB is free. Including non-PyTorch memory, this process has 76.98 GiB memory in use. Of the allocated "
        "memory 71.50 GiB is allocated by PyTorch, and 3.90 GiB is reserved by PyTorch but unallocated. If reserved but "
        "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
        "See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n",
    ]
    others = [r for r in range(ranks) if r != root_rank]
    rnd.shuffle(others)
    line = _iteration_line(it, now, 2.5, style)
    root_line = 0
    for i, t in enumerate(tb):
        n = w.emit(root_rank, t)
        if t.startswith("torch.OutOfMemoryError"):
            root_line = n
        for r in others[i * len(others) // len(tb): (i + 1) * len(others) // len(tb)]:
            w.emit(r, line)
    # ten minutes later: every other rank's watchdog fires, then the process aborts
    now += timedelta(seconds=600)
    ts = now.strftime("%m%d %H:%M:%S")
    for r in others:
        w.emit(r, f"[E{ts}.512000 {9000 + r} ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: "
               f"WorkNCCL(SeqNum=88123, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600074 milliseconds before timing out.\n")
    for r in others:
        w.emit(r, f"[E{ts}.513000 {9000 + r} ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank {r}] Exception (either an error or timeout) "
               "detected by watchdog at work: 88123, last enqueued NCCL work: 88123, last completed NCCL work: 88122.\n")
        w.emit(r, f"[E{ts}.514000 {9000 + r} ProcessGroupNCCL.cpp:630] [Rank {r}] Some NCCL operations have failed or timed out. "
               "Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.\n")
        w.emit(r, "terminate called after throwing an instance of 'c10::DistBackendError'\n")
    w.flush()
    for r in sorted(others):
        w.emit_raw(f"srun: error: node{r // 8:03d}: task {r}: Aborted (core dumped)\n")
    w.emit_raw(f"srun: error: node{root_rank // 8:03d}: task {root_rank}: Exited with exit code 1\n")
    w.close()
    truth = {
        "category": "cuda_oom",
        "root_rank": root_rank,
        "root_line": root_line,
        "root_file": os.path.join(out, f"task-{root_rank}.out") if layout == "files" else out,
        "ranks": ranks,
        "nodes": nodes,
        "symptom_ranks": len(others),
        "layout": layout,
        "style": style,
        "iterations": it,
    }
    return truth


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=64)
    ap.add_argument("--ranks", type=int, default=512)
    ap.add_argument("--layout", choices=["srun", "rank", "files"], default="srun")
    ap.add_argument("--root-rank", type=int, default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--style", choices=["plain", "progress", "colour"], default="plain")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    root = a.root_rank if a.root_rank is not None else (a.ranks * 137 // 512) % a.ranks
    truth = generate(a.out, a.size_mib, a.ranks, a.layout, root, a.seed, a.style)
    with open(a.out.rstrip("/") + ".truth.json", "w") as f:
        json.dump(truth, f, indent=1)
    print(json.dumps(truth))


if __name__ == "__main__":
    main()

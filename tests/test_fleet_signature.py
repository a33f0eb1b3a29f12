"""fleet/signature.py + masks.yaml: root messages with what varies between jobs masked."""

from __future__ import annotations

import pytest

from slurmdoc.errors import InputError
from slurmdoc.fleet.signature import MAX_SIGNATURE, _masks, load_masks, mask, signature


def test_every_mask_has_examples_and_they_hold():
    masks = _masks()
    assert masks and len({m.id for m in masks}) == len(masks)
    for m in masks:
        assert m.examples, m.id
        for text, want in m.examples:
            assert mask(text) == want, m.id


@pytest.mark.parametrize("a, b", [
    ("CUDA out of memory. Tried to allocate 4.35 GiB on GPU 3", "CUDA out of memory. Tried to allocate 512.00 MiB on GPU 0"),
    ("Connection closed by peer [10.1.2.3]:42126 on gpu-e04", "Connection closed by peer [10.9.9.9]:393 on gpu-a17"),
    ("[Rank 12] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE)",
     "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12093, OpType=ALLREDUCE)"),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/scratch/u1/ckpt/iter_0002/model.pt'",
     "FileNotFoundError: [Errno 2] No such file or directory: '/lustre/team/run7/iter_0400/model.pt'"),
    ("illegal memory access at 0x7f3a9c000000", "illegal memory access at 0x55d0aa10"),
    ("*** JOB 42 ON n1 CANCELLED AT 2026-11-22T01:41:38 DUE TO TIME LIMIT ***",
     "*** JOB 9917 ON gpu-b12 CANCELLED AT 2025-01-02T23:00:01 DUE TO TIME LIMIT ***"),
])
def test_one_failure_in_many_jobs_is_one_signature(a, b):
    assert signature("x", a) == signature("x", b)


@pytest.mark.parametrize("a, b", [
    ("ModuleNotFoundError: No module named 'apex'", "ModuleNotFoundError: No module named 'megatron'"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "RuntimeError: CUDA error: invalid device ordinal"),
])
def test_different_failures_stay_apart(a, b):
    assert signature("x", a) != signature("x", b)


def test_tokens_are_never_masked_again():
    assert mask("rank 3 at /a/b/c line 12") == "<rank> at <path> line <n>"


def test_signature_shape():
    assert signature(None, "anything") is None
    assert signature("unknown", "") == "unknown"
    assert signature("cuda_oom", "first line 1\nsecond line") == "cuda_oom: first line <n>"
    assert len(signature("c", "word " * 200)) <= len("c: ") + MAX_SIGNATURE + 3


def test_invalid_masks_file_is_one_clear_error(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("masks:\n  - id: bad\n    regex: '('\n    token: '<x>'\n")
    with pytest.raises(InputError, match="mask 1"):
        load_masks(p)

"""The fuzz target (fuzz/fuzz_diagnose.py) for a fixed, reproducible budget.

Hypothesis drives it here with a fixed seed (derandomize) on mutated real logs and raw
bytes, in every mode (log, gzip, damaged gzip, two files, rule file); atheris drives it
by hand for longer, with coverage guidance (see the target's docstring).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_spec = importlib.util.spec_from_file_location("fuzz_diagnose", Path(__file__).resolve().parent.parent / "fuzz" / "fuzz_diagnose.py")
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)  # type: ignore[union-attr]

# about 6 s of CPU in CI; longer by hand: SLURMDOC_FUZZ_EXECUTIONS=20000 pytest tests/test_fuzz.py
# (the same fixed seed unless SLURMDOC_FUZZ_RANDOM=1), or atheris: python fuzz/fuzz_diagnose.py
EXECUTIONS = int(os.environ.get("SLURMDOC_FUZZ_EXECUTIONS", "600"))
DERANDOMIZE = not os.environ.get("SLURMDOC_FUZZ_RANDOM")
SEEDS = [s[1:] for s in fuzz.seed_corpus(2048)]
TOKENS = [
    b"\x00",
    b"\r",
    b"\r\n",
    b"\n\n",
    b"\x1b[31m",
    b"\x1b[2K\r",
    b"\xff\xfe",
    b"\xef\xbb\xbf",
    b"\xc3(",
    b"\xed\xa0\x80",
    b"\x1f\x8b\x08\x00",
    b"Traceback (most recent call last):\n",
    b"During handling of the above exception, another exception occurred:\n",
    b"[rank99999999999999999999]: ",
    b"[default-1]:",
    b"2: ",
    b"srun: error: n1: tasks 0-99999999: Killed\n",
    b"E1399 99:99:99.999999 ",
    b"2025-02-30 25:61:61 ",
    b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ",
    b"Watchdog caught collective operation timeout: WorkNCCL(SeqNum=",
    b"\t" * 64,
    b"x" * 3000,
    b"{",
    b"!!python/object/apply:os.system ['true']\n",
    b"keywords: [\"\"]\n",
    b"patterns: ['(']\n",
    b" {divisor} ",  # text to Python's re, a fuzzy-match constraint to regex (a crash atheris found)
]

edit = st.tuples(st.integers(0, 4), st.integers(0, 1 << 16), st.integers(0, 64), st.sampled_from(TOKENS), st.binary(max_size=16))


def mutate(seed: bytes, edits: list) -> bytes:
    data = bytearray(seed)
    for kind, pos, n, token, raw in edits:
        pos = pos % (len(data) + 1)
        if kind == 0:
            data[pos:pos] = token
        elif kind == 1:
            del data[pos : pos + n]
        elif kind == 2:
            data[pos:pos] = raw
        elif kind == 3:
            data[pos:pos] = data[pos : pos + n] * 3
        else:
            del data[pos:]
    return bytes(data)


inputs = st.tuples(
    st.integers(0, len(fuzz.MODES) - 1),
    st.one_of(
        st.builds(mutate, st.sampled_from(SEEDS), st.lists(edit, max_size=8)),
        st.binary(max_size=3000),
        st.lists(st.sampled_from(TOKENS), max_size=30).map(b"".join),
    ),
).map(lambda t: bytes([t[0]]) + t[1])

TARGET = fuzz.Target()


@settings(max_examples=EXECUTIONS, derandomize=DERANDOMIZE, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(inputs)
def test_fuzz_target_fixed_budget(data):
    TARGET.one_input(data)


def test_the_budget_ran_every_mode():
    # the fuzz test above must really have exercised the target in every mode
    modes = {TARGET.one_input(bytes([i]) + s) for i in range(len(fuzz.MODES)) for s in SEEDS[:2]}
    assert modes == set(fuzz.MODES)

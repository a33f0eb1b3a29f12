"""Hypothesis: splitting is lossless, the pipeline never raises on arbitrary input, the
interleaving of ranks does not matter when lines carry timestamps, noise changes nothing."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from slurmdoc.api import ANSI, DAMAGE, DAMAGE_CHARS, diagnose, iter_loglines
from slurmdoc.ingest.damage import COMMON_WIDTHS, FRAME_ANY
from slurmdoc.ingest.sources import Input
from slurmdoc.models import SourceInfo

PREFIXES = ["", "0: ", " 12: ", "[rank3]: ", "[default1]:", "1: [rank9]: ", "node-3: ", "[gpu1:2]: ", "(Actor pid=1) ", "2025-01-01 00:00:00 [rank2]: "]
BODIES = [
    "Traceback (most recent call last):",
    '  File "x.py", line 1, in f',
    "ValueError: boom",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.",
    "srun: error: n1: tasks 0-3: Killed",
    "[E0101 00:00:00.1 1 ProcessGroupNCCL.cpp:1] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)",
    "",
    "During handling of the above exception, another exception occurred:",
    "iteration 3 | loss 1.0",
    "===================",
]

line_st = st.one_of(
    st.tuples(st.sampled_from(PREFIXES), st.sampled_from(BODIES)).map("".join),
    st.text(alphabet=st.one_of(st.characters(blacklist_categories=("Cc", "Cs")), st.sampled_from("\t\r\x1b")), max_size=80),
)


def as_input(data: bytes) -> Input:
    return Input(SourceInfo(index=0, path="<mem>"), lambda: io.BytesIO(data), len(data))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(line_st, max_size=60))
def test_splitting_is_lossless_and_ordered(lines):
    data = "\n".join(lines).encode("utf-8", "surrogatepass") if lines else b""
    got = list(iter_loglines([as_input(data)], [], exact=True))
    # every physical line is present, in order, once (a \r splits a line into segments)
    expected = ANSI.sub("", data.decode("utf-8", "replace")).split("\n") if data else []
    if expected and expected[-1] == "" and data.endswith(b"\n"):
        expected.pop()
    rebuilt: dict[int, list[str]] = {}
    for ll in got:
        assert ll.raw[ll.offset :] == ll.text
        rebuilt.setdefault(ll.lineno, []).append(ll.raw)
    assert sorted(rebuilt) == list(range(1, len(expected) + 1))
    for n, raws in rebuilt.items():
        want = expected[n - 1]
        if want.endswith("\r"):
            want = want[:-1]
        if want[:1] in DAMAGE_CHARS:
            # control bytes and undecodable bytes (U+FFFD) before a record are damage, dropped
            # from the start of each `\r` segment (api.split_line); every other byte is kept
            want = "\r".join(DAMAGE.sub("", seg) for seg in want.split("\r"))
        # pieces split at `\r` (which is dropped) and at glued records concatenate back
        assert "".join(raws) == want.replace("\r", "")
    # within each stream, lines keep their input order
    last: dict[tuple, int] = {}
    for ll in got:
        assert last.get(ll.stream, 0) <= ll.lineno
        last[ll.stream] = ll.lineno


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=2000))
def test_pipeline_never_raises_on_arbitrary_bytes(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("fz") / "x.log"
    p.write_bytes(data)
    try:
        d = diagnose([str(p)])
    except Exception as e:  # only the documented error types may escape
        from slurmdoc.errors import InputError

        assert isinstance(e, InputError), repr(e)
    else:
        assert d.status in ("failed", "no_failure")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(line_st, min_size=1, max_size=80))
def test_pipeline_never_raises_on_log_shaped_text(tmp_path_factory, lines):
    p = tmp_path_factory.mktemp("fz") / "x.log"
    text = "\n".join(lines)
    p.write_text(text, encoding="utf-8")
    if not text:
        return
    d = diagnose([str(p)])
    assert (d.root_cause is None) == (d.status == "no_failure")
    assert d.lines_read >= len(text.rstrip("\n").split("\n"))


# ---- the interleaving of ranks does not matter when lines carry timestamps ---------------

import re as _re
from datetime import datetime, timedelta

from slurmdoc.engine.loader import load_rulebook
from slurmdoc.report.json_format import render

BOOK = load_rulebook()
T0 = datetime(2025, 3, 1, 12, 0, 0)

HEALTHY_BODIES = [
    "iteration {n} | loss 2.{n} | grad norm 0.8",
    "saving checkpoint at iteration {n} to /ckpt",
    "NCCL INFO comm 0x{n} rank {n} nranks 16 - Init COMPLETE",
]
FAILURE_BLOCKS = {
    "oom": ["Traceback (most recent call last):", '  File "train.py", line 10, in <module>', "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."],
    "import": ["Traceback (most recent call last):", '  File "train.py", line 1, in <module>', "ModuleNotFoundError: No module named 'apex'"],
    "value": ["Traceback (most recent call last):", '  File "model.py", line 88, in forward', "ValueError: shapes (4, 8) and (7, 8) not aligned"],
    "nan": ["FloatingPointError: Loss is NaN at iteration 12"],
    "watchdog": [
        "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out."
    ],
}

# per rank: healthy lines, then up to two failure reports (a timeout, then the crash), more healthy lines
rank_plan = st.lists(st.one_of(st.integers(0, 3), st.sampled_from(sorted(FAILURE_BLOCKS))), max_size=4)


@st.composite
def job(draw):
    """Per-rank line lists with timestamps distinct across the job (3 s apart, beyond --skew)."""
    n = draw(st.integers(1, 6))
    plans = [draw(rank_plan) for _ in range(n)]
    bodies = []
    for r, plan in enumerate(plans):
        lines: list[str] = []
        for item in plan:
            if isinstance(item, int):
                lines += [HEALTHY_BODIES[(r + k) % len(HEALTHY_BODIES)].format(n=k + 10 * r) for k in range(item)]
            else:
                lines += FAILURE_BLOCKS[item]
        bodies.append(lines)
    total = sum(len(b) for b in bodies)
    slots = draw(st.permutations(range(total)))
    per_rank, i = [], 0
    for r, lines in enumerate(bodies):
        mine = sorted(slots[i : i + len(lines)])
        i += len(lines)
        per_rank.append([f"{(T0 + timedelta(seconds=3 * s)):%Y-%m-%d %H:%M:%S} [rank{r}]: {text}" for s, text in zip(mine, lines)])
    return per_rank


def interleave(per_rank, rnd) -> list[str]:
    queues = [list(q) for q in per_rank if q]
    out = []
    while queues:
        q = queues[rnd.randrange(len(queues))]
        out.append(q.pop(0))
        queues = [q for q in queues if q]
    return out


def normalised_json(lines: list[str], path) -> str:
    path.write_text("\n".join(lines) + "\n")
    doc = render(diagnose([str(path)], rulebook=BOOK))
    return _re.sub(_re.escape(str(path)) + r":\d+", "LOG:N", doc)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(job(), st.randoms(use_true_random=False))
def test_interleaving_of_ranks_does_not_change_the_diagnosis(tmp_path_factory, per_rank, rnd):
    d = tmp_path_factory.mktemp("il")
    if not any(per_rank):
        return
    rank_by_rank = normalised_json([line for q in per_rank for line in q], d / "job.log")
    shuffled = normalised_json(interleave(per_rank, rnd), d / "job.log")
    assert shuffled == rank_by_rank


# ---- noise around a rule example does not change what it yields ---------------------------

from slurmdoc.engine.matcher import Matcher

MATCHER = Matcher(BOOK)
EXAMPLES = [(r, i, e.text) for r in BOOK.rules for i, e in enumerate(r.spec.examples.matches())]
NOISE_TEMPLATES = [
    "iteration {n} | consumed samples {n}00 | lm loss 2.{n} | grad norm 0.{n} | learning rate 3.0E-04",
    "Epoch {n}:  45%|████▌     | {n}/1000 [01:23<01:42,  5.37it/s, loss=2.31]",
    "saving checkpoint at iteration {n} to /ckpt/run{n}",
    "NCCL INFO Channel {n}/02 :    0   1   2   3",
    "> building tokenizer ... padded vocab (size: 50257) with {n} dummy tokens",
    "",
]
noise_line = st.one_of(
    st.tuples(st.sampled_from(NOISE_TEMPLATES), st.integers(0, 999)).map(lambda t: t[0].format(n=t[1])),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 .,|=", max_size=60),
).filter(lambda line: not MATCHER.interesting(line))


from slurmdoc.ingest.activity import bundled_markers, read_progress

# after the error, noise that is not progress: progress after an error on the same printer
# means it was handled (diagnosis.liveness), which tests/test_liveness.py covers
quiet_line = noise_line.filter(lambda line: read_progress(bundled_markers(), line) is None)


def projection(d) -> tuple:
    root = d.root_cause
    return (
        d.status,
        root and (root.rule_id, root.category, root.rank, tuple(sorted(root.captures.items()))),
        tuple(sorted((s.rule_id, s.ranks, s.count) for s in d.symptoms)),
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(EXAMPLES), st.lists(noise_line, max_size=15), st.lists(quiet_line, max_size=15))
def test_noise_around_a_rule_example_yields_exactly_that_finding(tmp_path_factory, example, before, after):
    rule, _, text = example
    # a line exactly a common terminal width whose next line starts mid-word is, to the
    # paste-damage repair, a hard-wrapped line and its rest (ingest.damage): genuinely
    # ambiguous, so noise that would read as such a rest is not noise here
    last = text.split("\n")[-1]
    assume(not (after and len(last) in COMMON_WIDTHS and last[-1:].isalnum() and after[0][:1].isalnum()))
    # an example that ends inside a traceback (its last line a frame, or the source line under
    # one) is cut only if nothing follows: a line after it may be the exception line it lacked
    assume(not (after and any(FRAME_ANY.match(ln) for ln in text.split("\n")[-2:])))
    d = tmp_path_factory.mktemp("nz")
    alone, noisy = d / "alone.log", d / "noisy.log"
    alone.write_text(text + "\n")
    noisy.write_text("\n".join(before + [text] + after) + "\n")
    got_alone = diagnose([str(alone)], rulebook=BOOK)
    got = diagnose([str(noisy)], rulebook=BOOK)
    found = {s.rule_id for s in got.symptoms} | ({got.root_cause.rule_id} if got.root_cause else set())
    if rule.role == "cause":
        assert got.root_cause is not None and got.root_cause.rule_id == rule.id
    elif rule.role == "symptom" or rule.spec.exit_evidence:
        # a launcher summary whose entry carries the rank's own evidence (its `traceback :`
        # field) becomes that rank's event; the summary is then its launcher's verdict on it
        # a reporter's words for a signal another rule claims (`signals`) are that rule's finding
        claimers = {r.id for r in BOOK.rules if r.signums} if rule.spec.reports_signal else set()
        assert rule.id in found or found & claimers or (rule.spec.launcher_verdict and any(v.rank == got.root_cause.rank for v in got.launcher_verdicts))
    # a pure context rule (an attempt boundary) is evidence for others, never a finding itself
    assert projection(got) == projection(got_alone)
    # an exception message may run on over the unindented lines after it (multi-line
    # messages are common), so noise after it can only lengthen it, never change it
    if got_alone.root_cause is not None:
        assert got.root_cause.message.startswith(got_alone.root_cause.message)

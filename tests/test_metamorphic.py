"""Metamorphic properties over every fixture of the corpus: what a user does to a log before
slurmdoc sees it must not change the answer.

(a) tail cuts: a suffix of a failing log that still holds the root line names the same
    category and rank; a suffix that still holds failure evidence is `failed`;
(b) paste damage: Markdown fences and `**` lines, a `[12345] ` line-number column, hard
    wrapping at 80/120/200 columns, lost leading indentation, CRLF or lone-CR line ends,
    ANSI colour, a log collector's time in front of every line, with a viewer's line-number
    column behind it, or on every piece of lines the program wrapped: same category and rank
    (every one of these keeps the line prefixes);
(c) prefix rewriting: the program's lines re-prefixed in each supported style (none, srun
    `N: `, `[rankN]:`, host `node-N: `, Ray `(RayTrainWorker pid=N) `, Open MPI's tag
    `[1,N]<stderr>:`, MPICH's `[N] `, SkyPilot's `(workerN, rank=N, pid=P, ip=...)`, a logging
    timestamp):
    same category, and the same rank where the style carries one;
(d) healthy runs stay `no_failure` under all of the above.

The comparison is with slurmdoc's own answer on the undamaged case (a relation between two
runs, whatever the truth), and each case must first match its truth where its golden test
says it does. Everything runs in memory through the library API. Hypothesis draws the cut
points, wrap widths and colour; it is derandomized (CI runs the same examples every time),
does not shrink (a failure is reported as found) and keeps no example database.

A property that fails today for a reason outside paste damage is a strict xfail naming the
general form behind it, per case: when the mechanism lands, the xfail fails and goes.
"""

from __future__ import annotations

import io
import re
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional
from unittest import mock

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from corpus_cases import FIXTURES, case_dirs, inputs, load_truth
from slurmdoc import api
from slurmdoc.engine.loader import load_rulebook
from slurmdoc.ingest.prefix import PrefixParser
from slurmdoc.ingest.sources import Input, expand, path_hints
from slurmdoc.models import Diagnosis, SourceInfo

CASES = case_dirs("torchrun", "slurm", "documented", "launchers")
SETTINGS = settings(
    max_examples=2,
    deadline=None,  # one diagnosis is ~30 ms idle; CI machines are shared
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


# ---- running a case in memory ---------------------------------------------------------


@lru_cache(maxsize=1)
def _book():
    return load_rulebook()


@lru_cache(maxsize=None)
def case_files(case: Path) -> tuple[tuple[str, bytes], ...]:
    """(path, bytes) of every log the case's diagnosis reads, in the reader's order."""
    truth = load_truth(case)
    return tuple((p, Path(p).read_bytes()) for p in expand(inputs(case, truth), []))


def run(files: tuple[tuple[str, bytes], ...]) -> Diagnosis:
    """diagnose() on these texts, each under its original path (so per-rank file names and
    the year from the file's date still count), without writing anything."""

    def make_inputs(_paths: list[str], _warnings: list[str], *_how: object) -> list[Input]:
        return [Input(SourceInfo(index=i, path=p, **path_hints(p)), (lambda b=b: io.BytesIO(b)), len(b)) for i, (p, b) in enumerate(files)]

    with mock.patch.object(api, "make_inputs", make_inputs):
        return api.diagnose([p for p, _ in files], rulebook=_book())


@lru_cache(maxsize=None)
def baseline(case: Path) -> Diagnosis:
    return run(case_files(case))


def answer(d: Diagnosis) -> tuple:
    rc = d.root_cause
    if rc is None:
        return (d.status, None, None)
    return (d.status, rc.category, "all" if rc.all_ranks else rc.rank)


def failing(case: Path) -> bool:
    return load_truth(case).get("expect_status", "failed") != "no_failure"


def rel(case: Path) -> str:
    return str(case.relative_to(FIXTURES))


def cases_where(pred: Callable[[Path], bool], misses: dict[str, str]) -> list:
    out = []
    for c in CASES:
        if not pred(c):
            continue
        marks = [pytest.mark.xfail(strict=True, reason=misses[rel(c)])] if rel(c) in misses else []
        out.append(pytest.param(c, id=rel(c), marks=marks))
    return out


def lines_of(data: bytes) -> list[str]:
    return data.decode("utf-8", "replace").split("\n")


def text_of(lines: list[str]) -> bytes:
    return "\n".join(lines).encode("utf-8")


def test_baseline_is_the_golden_answer():
    """The undamaged in-memory run gives what the golden tests expect of the files on disk."""
    for c in CASES:
        d = baseline(c)
        on_disk = api.diagnose(inputs(c, load_truth(c)), rulebook=_book())
        assert answer(d) == answer(on_disk), rel(c)
        assert d.status == load_truth(c).get("expect_status", "failed"), rel(c)


# ---- (a) tail cuts --------------------------------------------------------------------

TB_HEADER = "Traceback (most recent call last):"


def root_place(case: Path) -> Optional[tuple[int, int, int]]:
    """(index of the root file, 0-based root line, 0-based first line of its record): the
    record starts at the traceback header above the root line in the same printer's
    stream, else at the root line itself."""
    rc = baseline(case).root_cause
    if rc is None:
        return None
    path, _, lineno = rc.source.rpartition(":")
    files = case_files(case)
    idx = next((i for i, (p, _) in enumerate(files) if p == path), None)
    if idx is None or not lineno.isdigit():
        return None
    root = int(lineno) - 1
    lines = lines_of(files[idx][1])
    parser = PrefixParser(2026)
    src = SourceInfo(index=0, path=path)
    stream = parser.parse(src, root + 1, lines[root]).stream
    start = root
    for i in range(root - 1, -1, -1):
        ll = parser.parse(src, i + 1, lines[i])
        if ll.stream == stream and ll.text.strip() == TB_HEADER:
            start = i
            break
    return idx, root, start


def evidence_end(case: Path) -> Optional[tuple[int, int]]:
    """(index of the root file, 0-based line of the last failure evidence in it): the root
    line or the last symptom the undamaged diagnosis cites in that file."""
    place = root_place(case)
    if place is None:
        return None
    idx, root, _ = place
    path = case_files(case)[idx][0]
    last = root
    for s in baseline(case).symptoms:
        p, _, n = s.first_source.rpartition(":")
        if p == path and n.isdigit():
            last = max(last, int(n) - 1)
    return idx, last


def cut(files: tuple[tuple[str, bytes], ...], idx: int, k: int) -> tuple[tuple[str, bytes], ...]:
    """The files with the first `k` lines of file `idx` cut off."""
    out = list(files)
    out[idx] = (files[idx][0], text_of(lines_of(files[idx][1])[k:]))
    return tuple(out)


def _has_place(c: Path) -> bool:
    return failing(c) and root_place(c) is not None


def _has_header(c: Path) -> bool:
    place = root_place(c) if failing(c) else None
    return place is not None and place[2] < place[1]


# case -> the general form that a cut leaves and that slurmdoc does not handle yet
CONTEXT_CUT = (
    "core: the root's rank is inferred from lines before the root record (the ranks' progress "
    "before a time-limit cancel; other ranks' different errors before an identical one), and a "
    "tail starting at the root record no longer has them"
)
RAY_CONTEXT_CUT = (
    "core: in a Ray Train log the lines that name a worker's rank (the controller's "
    "'(ip=..., pid=P) world_rank=R' list) and that call the controller's retried traceback "
    "harmless come before the root record; a tail without them loses the rank, or leaves that "
    "traceback to lead"
)
TAIL_AT_RECORD_MISSES: dict[str, str] = {
    "launchers/ray_import": RAY_CONTEXT_CUT,
    "launchers/ray_nan": RAY_CONTEXT_CUT,
    "launchers/ray_sigkill": RAY_CONTEXT_CUT,
    "launchers/spawn_oom": CONTEXT_CUT,
    "launchers/spawn_numpy_oom": CONTEXT_CUT,
    "documented/invalid_device_ordinal": CONTEXT_CUT,
    "slurm/srun_time_limit_hang": CONTEXT_CUT,
}
TAIL_BEFORE_RECORD_MISSES: dict[str, str] = {"launchers/ray_nan": RAY_CONTEXT_CUT}
HEADERLESS = (
    "ingest: a traceback whose `Traceback (most recent call last):` header was cut off (frames, "
    "then the exception line) is not assembled, so its exception line does not become the root"
)
TAIL_HEADERLESS_MISSES: dict[str, str] = {
    # the child's process index is named on the line above its traceback
    'launchers/spawn_oom': CONTEXT_CUT,
    'launchers/spawn_numpy_oom': CONTEXT_CUT,
    'documented/invalid_device_ordinal': HEADERLESS,
    'slurm/srun_eaddrinuse': HEADERLESS,
}
TAIL_EVIDENCE_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("case", cases_where(_has_place, TAIL_AT_RECORD_MISSES))
def test_tail_cut_at_the_root_record(case):
    """(a) A log that starts with the root line's record (its traceback header, or the root
    line itself) names the same root cause."""
    idx, root, start = root_place(case)
    got = run(cut(case_files(case), idx, start))
    assert answer(got) == answer(baseline(case)), f"first {start} lines cut"


@pytest.mark.parametrize("case", cases_where(_has_place, TAIL_BEFORE_RECORD_MISSES))
@SETTINGS
@given(data=st.data())
def test_tail_cut_before_the_root_record(case, data):
    """(a) Any suffix that starts before the root line's record names the same root cause."""
    idx, root, start = root_place(case)
    k = data.draw(st.integers(0, start), label="cut")
    got = run(cut(case_files(case), idx, k))
    assert answer(got) == answer(baseline(case)), f"first {k} lines cut"


@pytest.mark.parametrize("case", cases_where(_has_header, TAIL_HEADERLESS_MISSES))
def test_tail_cut_inside_the_root_traceback(case):
    """(a) A suffix that starts inside the root traceback (just after its header, and at its
    exception line) names the same root cause."""
    idx, root, start = root_place(case)
    for k in sorted({start + 1, root}):
        got = run(cut(case_files(case), idx, k))
        assert answer(got) == answer(baseline(case)), f"first {k} lines cut"


@pytest.mark.parametrize("case", cases_where(_has_place, TAIL_EVIDENCE_MISSES))
@SETTINGS
@given(data=st.data())
def test_tail_cut_with_failure_evidence_is_failed(case, data):
    """(a) Any suffix that still holds a line of failure evidence (the root line or a cited
    symptom) is `failed`."""
    idx, last = evidence_end(case)
    k = data.draw(st.integers(0, last), label="cut")
    got = run(cut(case_files(case), idx, k))
    assert got.status == "failed", f"first {k} lines cut: {got.status}"


# ---- (b) paste damage -----------------------------------------------------------------

ANSI_COLOURS = ["\x1b[31m", "\x1b[1;31m", "\x1b[33m", "\x1b[0;36m", "\x1b[1m"]


def fenced(lines: list[str]) -> list[str]:
    return ["**Error log:**", "", "```text"] + lines + ["```", "", "**Environment**"]


def numbered(lines: list[str], first: int, piped: bool = False) -> list[str]:
    return [(f"{first + i:6} | " if piped else f"[{first + i}] ") + ln for i, ln in enumerate(lines)]


def wrapped(lines: list[str], width: int) -> list[str]:
    out = []
    for ln in lines:
        while len(ln) > width:
            out.append(ln[:width])
            ln = ln[width:]
        out.append(ln)
    return out


def unindented(lines: list[str]) -> list[str]:
    return [ln.lstrip() for ln in lines]


def coloured(lines: list[str], picks: list[bool]) -> list[str]:
    """Colour whole lines, and error words inside others, as a terminal log would be."""
    out = []
    for i, ln in enumerate(lines):
        colour = ANSI_COLOURS[i % len(ANSI_COLOURS)]
        if picks[i % len(picks)]:
            out.append(f"{colour}{ln}\x1b[0m")
        else:
            out.append(re.sub(r"\b(\w*Error|error|ERROR|WARNING)\b", lambda m: f"\x1b[1;31m{m.group(1)}\x1b[0m", ln))
    return out


# a log collector's time in front of every line (a container runtime's, a CI runner's, a log
# shipper's export), whatever the line is; one time for all lines, so it orders nothing
COLLECTOR_STAMPS = ["2031-02-03T04:05:06.123456789Z ", "2031-02-03T04:05:06.1234567Z ", "2031-02-03 04:05:06.123 ",
                    "2031-02-03T04:05:06+02:00 ", "[2031-02-03T04:05:06Z] ", "Feb  3 04:05:06 "]


def collected(lines: list[str], stamp: str) -> list[str]:
    return [stamp + ln for ln in lines]


def damaged(files: tuple[tuple[str, bytes], ...], hurt: Callable[[list[str]], list[str]], sep: str = "\n") -> tuple[tuple[str, bytes], ...]:
    out = []
    for p, data in files:
        lines = lines_of(data)
        trailing = lines and lines[-1] == ""
        body = hurt(lines[:-1] if trailing else lines)
        out.append((p, (sep.join(body) + (sep if trailing else "")).encode("utf-8")))
    return tuple(out)


DAMAGE: dict[str, Callable[[st.DataObject], Callable[[list[str]], list[str]]]] = {
    "fences": lambda data: fenced,
    "line_numbers": lambda data: (lambda ls, n=data.draw(st.integers(1, 99_999), label="first number"): numbered(ls, n)),
    "wrap80": lambda data: (lambda ls: wrapped(ls, 80)),
    "wrap120": lambda data: (lambda ls: wrapped(ls, 120)),
    "wrap200": lambda data: (lambda ls: wrapped(ls, 200)),
    "unindented": lambda data: unindented,
    "collector_stamps": lambda data: (lambda ls, s=data.draw(st.sampled_from(COLLECTOR_STAMPS), label="collector's time"): collected(ls, s)),
    # a log viewer's line-number column behind a collector's time (the viewer numbers the
    # collected lines after the time it shows first)
    "collector_line_numbers": lambda data: (
        lambda ls, s=data.draw(st.sampled_from(COLLECTOR_STAMPS), label="collector's time"), n=data.draw(st.integers(1, 99_999), label="first number"),
        piped=data.draw(st.booleans(), label="piped column"): collected(numbered(ls, n, piped), s)
    ),
    # a program's hard wrap, then a collector's time on every physical line it wrote: the
    # wrapped rest carries a time too
    "wrap120_collected": lambda data: (lambda ls, s=data.draw(st.sampled_from(COLLECTOR_STAMPS), label="collector's time"): collected(wrapped(ls, 120), s)),
    "ansi": lambda data: (lambda ls, picks=data.draw(st.lists(st.booleans(), min_size=1, max_size=7), label="coloured lines"): coloured(ls, picks)),
}
LINE_ENDS = {"crlf": "\r\n", "cr": "\r"}

# (case, damage) -> the general form that fails today for another reason than paste damage
ONE_WRAP_AT_A_WORD_BREAK = (
    "ingest: a log whose only line longer than the width is cut where a word ends is not "
    "rejoined (one wrapped pair at a terminal width is taken as a wrap only when the cut falls "
    "inside a word), so the error line's rule no longer matches"
)
COLOURED_WRAP = (
    "ingest: a coloured log wrapped with its colour codes counted as characters has no single "
    "visible width once the codes are gone, so the wrap is not undone; in a Ray log the line "
    "that calls the controller's retried traceback harmless is then split from it"
)
DAMAGE_MISSES: dict[tuple[str, str], str] = {
    **{(f"launchers/{c}", w): COLOURED_WRAP for c in ("ray_barrier_straggler", "ray_import", "ray_nan", "ray_sigkill") for w in ("wrap80", "wrap120", "wrap200")},
    **{(f"launchers/{c}", "wrap120_collected"): COLOURED_WRAP for c in ("ray_barrier_straggler", "ray_sigkill")},
    ("launchers/spawn_straggler", "wrap120"): ONE_WRAP_AT_A_WORD_BREAK,
    ("launchers/spawn_straggler", "wrap120_collected"): ONE_WRAP_AT_A_WORD_BREAK,
}


# the kinds a log collector's time takes part in, run by a test of their own: one Hypothesis
# test function runs ~950 times at most in a session before its settings fail to resolve
COLLECTED_KINDS = ("collector_stamps", "collector_line_numbers", "wrap120_collected")


def _damage_params(pred: Callable[[Path], bool], kinds: tuple[str, ...] = ()) -> list:
    out = []
    for c in CASES:
        if not pred(c):
            continue
        for kind in kinds or [k for k in [*DAMAGE, *LINE_ENDS] if k not in COLLECTED_KINDS]:
            why = DAMAGE_MISSES.get((rel(c), kind))
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            out.append(pytest.param(c, kind, id=f"{rel(c)}-{kind}", marks=marks))
    return out


def apply_damage(case: Path, kind: str, data: st.DataObject) -> tuple[tuple[str, bytes], ...]:
    files = case_files(case)
    if kind in LINE_ENDS:
        return damaged(files, lambda ls: ls, LINE_ENDS[kind])
    return damaged(files, DAMAGE[kind](data))


@pytest.mark.parametrize("case,kind", _damage_params(failing))
@settings(SETTINGS, max_examples=1)
@given(data=st.data())
def test_paste_damage_keeps_the_answer(case, kind, data):
    """(b) Pasted through Markdown, a log viewer, a terminal or a web form: same answer."""
    got = run(apply_damage(case, kind, data))
    assert answer(got) == answer(baseline(case))


@pytest.mark.parametrize("case,kind", _damage_params(failing, COLLECTED_KINDS))
@settings(SETTINGS, max_examples=1)
@given(data=st.data())
def test_collected_paste_damage_keeps_the_answer(case, kind, data):
    """(b) Timed by a log collector (then numbered by a viewer, or wrapped by the program
    before the collector timed each piece): same answer."""
    got = run(apply_damage(case, kind, data))
    assert answer(got) == answer(baseline(case))


# ---- (c) prefix rewriting -------------------------------------------------------------

STAMP0 = datetime(2025, 3, 1, 12, 0, 0)


def body_and_rank(parser: PrefixParser, src: SourceInfo, n: int, raw: str, agents: bool) -> tuple[Optional[str], Optional[int], Optional[int], Optional[int]]:
    """The program's text, global rank, agent label and local rank of one line, or Nones
    for a launcher's or the scheduler's line (those keep their own form). Where torchrun
    runs under `srun --label` (`agents`), the label names the node's agent, never a rank."""
    ll = parser.parse(src, n, raw)
    if ll.origin in ("launcher", "scheduler"):
        return None, None, None, None
    w = ll.who
    if agents:
        return ll.text, w.rank, w.label, w.local
    return ll.text, (w.rank if w.rank is not None else (w.label if w.local is None else None)), None, w.local


@lru_cache(maxsize=None)
def agent_labels(case: Path) -> bool:
    """Is this torchrun under `srun --label` (the truth says so, or a line carries both an
    srun label and torchrun's `[rankN]:`)?"""
    launcher = str(load_truth(case).get("launcher", ""))
    if "srun" in launcher and "torchrun" in launcher:
        return True
    for i, (p, data) in enumerate(case_files(case)):
        parser = PrefixParser(2026)
        src = SourceInfo(index=i, path=p, **path_hints(p))
        for n, raw in enumerate(lines_of(data), 1):
            w = parser.parse(src, n, raw).who
            if w.label is not None and (w.rank is not None or w.local is not None):
                return True
    return False


def reprefix(case: Path, files: tuple[tuple[str, bytes], ...], style: str) -> tuple[tuple[str, bytes], ...]:
    """Every program line under `style`'s prefix. Under srun over torchrun the agent's label
    stays: the rank style gives `0: [rank3]:`, the srun style `0: ` (the label names the
    agent, so that style carries no rank there)."""
    agents = agent_labels(case)
    out = []
    for i, (p, data) in enumerate(files):
        parser = PrefixParser(2026)
        src = SourceInfo(index=i, path=p, **path_hints(p))
        lines = []
        for n, raw in enumerate(lines_of(data), 1):
            body, rank, agent, local = body_and_rank(parser, src, n, raw, agents)
            if body is None:
                lines.append(raw)
                continue
            if style == "timestamp":
                stamp = (STAMP0 + timedelta(milliseconds=10 * n)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
                lines.append(f"{stamp} - {body}")
            elif style == "rank" and rank is None and local is not None:
                # torchrun's local-rank prefix: the global rank is not on the line to rewrite
                lines.append((f"{agent}: " if agent is not None else "") + f"[default{local}]:" + body)
            elif style in ("srun", "rank") and agent is not None:
                lines.append(f"{agent}: " + (f"[rank{rank}]:" if style == "rank" and rank is not None else "") + body)
            elif rank is None or style == "none":
                lines.append(body)
            else:
                lines.append(PREFIX_STYLES[style](rank) + body)
        out.append((p, text_of(lines)))
    return tuple(out)


PREFIX_STYLES: dict[str, Callable[[int], str]] = {
    "none": lambda r: "",
    "srun": lambda r: f"{r}: ",
    "rank": lambda r: f"[rank{r}]:",
    "host": lambda r: f"node-{r}: ",
    "ray": lambda r: f"(RayTrainWorker pid={4000 + r}) ",
    "mpi": lambda r: f"[1,{r}]<stderr>:",  # Open MPI's --tag-output: the job, then the rank
    "hydra": lambda r: f"[{r}] ",  # MPICH's and Intel MPI's -prepend-rank
    "skypilot": lambda r: f"(worker{r}, rank={r}, pid={4000 + r}, ip=10.0.{r // 250}.{r % 250 + 1}) ",  # one node per printer
    "timestamp": lambda r: "",
}

NO_RANK_PREFIX = (
    "core: with no rank in the prefix (none, host, Ray actor), collective-timeout lines are not "
    "attributed to ranks, so the hang/straggler analysis has no ranks to compare (ranks from text)"
)
ONE_PRINTER = (
    "core: with the Ray actor prefixes replaced by timestamps (no printer named), a worker's "
    "traceback and the driver's later progress read as one printer's, so the traceback counts "
    "as outlived"
)
LABEL_AS_AGENT = (
    "core: in a torchrun job whose worker lines carry srun-style labels, a label over a torchrun "
    "traceback is read as the agent's (a node), not a rank, so the rank the label gives is dropped"
)
# (case, style) -> the general form that fails today
PREFIX_MISSES: dict[tuple[str, str], str] = {
    ("launchers/acc_straggler", "none"): NO_RANK_PREFIX,
    ("launchers/acc_straggler", "host"): NO_RANK_PREFIX,
    ("launchers/acc_straggler", "ray"): NO_RANK_PREFIX,
    **{(c, "skypilot"): NO_RANK_PREFIX for c in ("launchers/acc_straggler", "torchrun/hang", "torchrun/rank0_barrier", "slurm/srun_gloo_straggler")},
    ("launchers/acc_straggler", "timestamp"): NO_RANK_PREFIX,
    ("launchers/ray_barrier_straggler", "timestamp"): NO_RANK_PREFIX,
    ("launchers/ray_sigkill", "timestamp"): ONE_PRINTER,
    ("torchrun/exception_record", "srun"): LABEL_AS_AGENT,
    ('torchrun/hang', 'timestamp'): NO_RANK_PREFIX,
    ('torchrun/rank0_barrier', 'timestamp'): NO_RANK_PREFIX,
    ('slurm/srun_gloo_straggler', 'timestamp'): NO_RANK_PREFIX,
    ('slurm/srun_gloo_straggler', 'none'): NO_RANK_PREFIX,
    ('slurm/srun_gloo_straggler', 'host'): NO_RANK_PREFIX,
    ('slurm/srun_gloo_straggler', 'ray'): NO_RANK_PREFIX,
    ('torchrun/hang', 'none'): NO_RANK_PREFIX,
    ('torchrun/hang', 'host'): NO_RANK_PREFIX,
    ('torchrun/hang', 'ray'): NO_RANK_PREFIX,
    ('torchrun/rank0_barrier', 'none'): NO_RANK_PREFIX,
    ('torchrun/rank0_barrier', 'host'): NO_RANK_PREFIX,
    ('torchrun/rank0_barrier', 'ray'): NO_RANK_PREFIX,
}


def _prefix_params(pred: Callable[[Path], bool]) -> list:
    out = []
    for c in CASES:
        if not pred(c):
            continue
        for style in PREFIX_STYLES:
            why = PREFIX_MISSES.get((rel(c), style))
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            out.append(pytest.param(c, style, id=f"{rel(c)}-{style}", marks=marks))
    return out


@pytest.mark.parametrize("case,style", _prefix_params(failing))
def test_prefix_rewriting_keeps_the_answer(case, style):
    """(c) The same program output under another launcher's prefix: same category, and the
    same rank where the prefix carries one."""
    got = run(reprefix(case, case_files(case), style))
    want = answer(baseline(case))
    assert got.status == want[0]
    if style == "rank" or (style in ("srun", "mpi", "hydra") and not agent_labels(case)):
        assert answer(got) == want
    else:
        assert answer(got)[1] == want[1]


# ---- (d) healthy runs -----------------------------------------------------------------

WRAPPED_PROGRESS = (
    "ingest: hard-wrapped at 80 columns, a Ray worker's long lines (actor prefix, logging "
    "prefix, message) are not all rejoined, and the progress that showed a logged error was "
    "outlived is no longer read as that worker's"
)
HEALTHY_MISSES: dict[tuple[str, str], str] = {
    ("launchers/ray_ok_fallback", "wrap80"): WRAPPED_PROGRESS,
    ("launchers/ray_ok_handled_metrics", "wrap80"): WRAPPED_PROGRESS,
}


def _healthy_params() -> list:
    out = []
    for c in CASES:
        if failing(c):
            continue
        for kind in [*DAMAGE, *LINE_ENDS, *(f"prefix-{s}" for s in PREFIX_STYLES), "tail"]:
            why = HEALTHY_MISSES.get((rel(c), kind))
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            out.append(pytest.param(c, kind, id=f"{rel(c)}-{kind}", marks=marks))
    return out


@pytest.mark.parametrize("case,kind", _healthy_params())
@settings(SETTINGS, max_examples=2)
@given(data=st.data())
def test_healthy_run_stays_healthy(case, kind, data):
    """(d) A run that did not fail stays `no_failure` pasted, re-prefixed or cut."""
    files = case_files(case)
    if kind.startswith("prefix-"):
        files = reprefix(case, files, kind[len("prefix-"):])
    elif kind == "tail":
        idx = data.draw(st.integers(0, len(files) - 1), label="file")
        k = data.draw(st.integers(0, max(len(lines_of(files[idx][1])) - 2, 0)), label="cut")
        files = cut(files, idx, k)
    else:
        files = apply_damage(case, kind, data)
    got = run(files)
    assert got.status == "no_failure" and got.root_cause is None, answer(got)

"""Traceback frames: the user's code against the Python installation and installed
packages; `raised_at` (the user's innermost frame) and `raised_in` (the innermost frame)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from slurmdoc import frames
from slurmdoc.api import diagnose

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CASES = sorted(p.parent for p in FIXTURES.rglob("truth.yaml"))
FILE_LINE = re.compile(r'\s*File "([^"]+)", line (\d+)')


@pytest.mark.parametrize("path", [
    "/opt/venv/lib/python3.11/site-packages/torch/autograd/graph.py",
    "/usr/lib/python3/dist-packages/numpy/core/x.py",
    "/opt/conda/lib/python3.10/threading.py",
    "/usr/lib64/python3.9/runpy.py",
    "/home/u/.pyenv/versions/3.12.1/lib/python3.12/multiprocessing/process.py",
    "C:\\Python311\\Lib\\runpy.py",
    "C:\\envs\\x\\Lib\\site-packages\\torch\\nn\\modules\\module.py",
    "<frozen importlib._bootstrap>",
    "<string>",
])
def test_library_paths(path):
    assert frames.is_library(path)


@pytest.mark.parametrize("path", [
    "/home/u/proj/train.py",
    "/lustre/proj/llm/Megatron-LM/megatron/core/pipeline_parallel/schedules.py",
    "/home/u/proj/lib/data.py",  # a project's own lib/ folder
    "/home/u/python3/tools/run.py",
    "train.py",
])
def test_user_paths(path):
    assert not frames.is_library(path)


def test_a_console_script_of_an_installation_seen_in_the_same_traceback_is_library():
    tb = [
        "Traceback (most recent call last):",
        '  File "/opt/env/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        '  File "/opt/env/lib/python3.11/site-packages/torch/run.py", line 9, in main',
        "    run(args)",
        "RuntimeError: boom",
    ]
    assert frames.raised_at(tb) is None
    assert frames.raised_in(tb) == "/opt/env/lib/python3.11/site-packages/torch/run.py:9"
    # without a frame of that installation, a script in some bin/ is the user's own
    assert frames.raised_at(tb[:3] + tb[-1:]) == "/opt/env/bin/torchrun:8"


def test_frames_span_their_source_lines_and_carets():
    tb = [
        "Traceback (most recent call last):",
        '  File "/home/u/a.py", line 3, in <module>',
        "    f()",
        "    ^^^",
        '  File "/usr/lib/python3.11/json/__init__.py", line 7, in f',
        "    raise ValueError",
        "ValueError",
    ]
    fs = frames.frames(tb)
    assert [(f.index, f.end, f.user) for f in fs] == [(1, 4, True), (4, 6, False)]
    assert frames.raised_at(tb) == "/home/u/a.py:3"
    assert frames.raised_in(tb) == "/usr/lib/python3.11/json/__init__.py:7"


def _user_frames(tb: tuple[str, ...]) -> list[str]:
    """The traceback's frames outside site-packages, dist-packages, lib/pythonX.Y and bin/
    scripts of such an installation, read here independently of slurmdoc.frames."""
    paths = [(m.group(1), m.group(2)) for t in tb if (m := FILE_LINE.match(t))]
    prefixes = {p.split("/lib/python")[0] for p, _ in paths if "/lib/python" in p}
    out = []
    for p, n in paths:
        if "-packages/" in p or re.search(r"/lib(64)?/python\d", p) or p.startswith("<"):
            continue
        if any(p.startswith(pre + "/bin/") for pre in prefixes):
            continue
        out.append(f"{p}:{n}")
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_raised_at_is_a_user_frame_on_every_fixture_that_has_one(case):
    rc = diagnose([str(case)]).root_cause
    if rc is None or not rc.traceback:
        return
    if rc.stragglers:  # the traceback is a reporter's: its frames say nothing of the straggler
        assert rc.raised_at is None and rc.raised_in is None
        return
    users = _user_frames(rc.traceback)
    if not users:
        assert rc.raised_at is None
        return
    assert rc.raised_at in users, (rc.raised_at, users)
    assert rc.raised_in is not None and rc.raised_in == rc.frame
    if rc.raised_in in users:
        assert rc.raised_at == rc.raised_in  # the user's code raised it itself


def test_the_user_frame_is_named_over_the_library_frame_that_raised():
    rc = diagnose([str(FIXTURES / "documented" / "cuda_oom_allocator")]).root_cause
    assert rc.raised_at.endswith("megatron/core/pipeline_parallel/schedules.py:368")
    assert rc.raised_in.endswith("site-packages/torch/autograd/graph.py:825")


def _tb(*frames_):
    out = ["Traceback (most recent call last):"]
    for path, fn in frames_:
        out += [f'  File "{path}", line 1, in {fn}', "    x()"]
    return out + ["RuntimeError: boom"]


def test_the_phase_is_the_innermost_frame_that_tells():
    from slurmdoc.frames import phase

    site = "/opt/venv/lib/python3.11/site-packages/torch"
    # Megatron: forward_backward_func -> backward_step -> torch's engine
    assert phase(_tb(("/w/train.py", "train_step"), ("/w/schedules.py", "forward_backward_no_pipelining"),
                     ("/w/schedules.py", "backward_step"), (f"{site}/autograd/graph.py", "_engine_run_backward"))) == "backward"
    # Lightning runs the forward inside the optimizer's closure: the innermost telling frame wins
    assert phase(_tb(("/w/loop.py", "optimizer_step"), ("/w/loop.py", "closure"), ("/w/model.py", "training_step"),
                     (f"{site}/nn/modules/module.py", "_call_impl"), ("/w/model.py", "forward"), (f"{site}/nn/functional.py", "linear"))) == "forward"
    # an optimizer's own `step`; a `step` elsewhere says nothing
    assert phase(_tb(("/w/train.py", "train_step"), (f"{site}/optim/adam.py", "step"))) == "optimizer"
    assert phase(_tb(("/w/train.py", "main"), ("/w/env.py", "step"))) is None
    assert phase(["RuntimeError: boom"]) is None

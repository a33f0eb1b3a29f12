"""Python traceback frames: which are the user's code, which belong to the Python
installation or an installed package. Shared by the diagnosis (`raised_at`, `raised_in`)
and the renderers (trimming a traceback to the frames a user will open).

A frame is library code when its path lies under a `site-packages` or `dist-packages`
directory, under the standard library (`.../lib/pythonX.Y/`, `...\\Lib\\`), or is not a
file at all (`<frozen importlib._bootstrap>`, `<string>`). Everything else is the user's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

FRAME = re.compile(r'\s*File "([^"]+)", line (\d+)')
_LIBRARY = re.compile(
    r"(?:^|[/\\])(?:site-packages|dist-packages)(?:[/\\]|$)"  # installed packages
    r"|(?:^|[/\\])lib(?:64)?[/\\](?:pypy|python)\d+(?:\.\d+)?[/\\]"  # the standard library
    r"|(?:^|[/\\])Lib[/\\]"  # the standard library on Windows
    r"|^<",  # <frozen ...>, <string>, <stdin>
)


_PREFIX = re.compile(r"^(.*?)[/\\]lib(?:64)?[/\\](?:pypy|python)\d+(?:\.\d+)?[/\\]")
_SCRIPT = re.compile(r"^(.*)[/\\](?:bin|Scripts)[/\\][^/\\]+$")


def is_library(path: str, prefixes: Sequence[str] = ()) -> bool:
    """Is this frame's file part of the Python installation or an installed package?
    `prefixes` are installation prefixes seen in the same traceback: a console script in
    their `bin/` (`<venv>/bin/torchrun`) is the installation's too."""
    if _LIBRARY.search(path):
        return True
    m = _SCRIPT.match(path)
    return bool(m and m.group(1) in prefixes)


def install_prefixes(paths: Sequence[str]) -> tuple[str, ...]:
    """Installation prefixes (`/opt/venv` of `/opt/venv/lib/python3.11/...`) of these paths."""
    return tuple({m.group(1) for p in paths if (m := _PREFIX.match(p))})


@dataclass(frozen=True, slots=True)
class Frame:
    index: int  # index of its `File "...", line N` line in the traceback's lines
    end: int  # index after its last line (the source line, caret markers)
    path: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    user: bool = True  # the user's code (see is_library)


def frames(lines: Sequence[str], upto: Optional[int] = None) -> list[Frame]:
    """The frames of a traceback's lines (before index `upto`), each with the lines it spans:
    its `File` line and the indented lines under it, up to the next frame or exception line."""
    stop = len(lines) if upto is None else min(upto, len(lines))
    out: list[Frame] = []
    starts = [(i, m) for i in range(stop) if (m := FRAME.match(lines[i]))]
    for k, (i, m) in enumerate(starts):
        nxt = starts[k + 1][0] if k + 1 < len(starts) else stop
        end = i + 1
        indent = len(lines[i]) - len(lines[i].lstrip())
        while end < nxt and lines[end].strip() and (len(lines[end]) - len(lines[end].lstrip())) > indent:
            end += 1
        out.append(Frame(i, end, m.group(1), int(m.group(2))))
    prefixes = install_prefixes([f.path for f in out])
    return [Frame(f.index, f.end, f.path, f.line, not is_library(f.path, prefixes)) for f in out]


def raised_in(lines: Sequence[str], upto: Optional[int] = None) -> Optional[str]:
    """`file:line` of the innermost frame (before index `upto`): where the error was raised."""
    fs = frames(lines, upto)
    return fs[-1].where if fs else None


def raised_at(lines: Sequence[str], upto: Optional[int] = None) -> Optional[str]:
    """`file:line` of the innermost frame in the user's code (outside the Python
    installation and site-packages), before index `upto`; None when every frame is a
    library's."""
    for f in reversed(frames(lines, upto)):
        if f.user:
            return f.where
    return None


_FUNCTION = re.compile(r'\s*File "[^"]+", line \d+, in ([\w.<>]+)')
# which phase of a training step a frame's function is: the names torch, Megatron,
# DeepSpeed and Lightning give to the forward pass, the backward pass and the optimizer step.
# A traceback's phase is that of its innermost frame that names one: Lightning runs forward
# and backward inside the optimizer's closure, and a module's forward inside a training step.
PHASES = (
    ("backward", frozenset({"backward", "backward_step", "_engine_run_backward", "run_backward", "backward_pass",
                            "manual_backward", "_run_backward", "custom_backward", "backward_step_helper"})),
    ("optimizer", frozenset({"optimizer_step", "_single_tensor_adam", "_multi_tensor_adam", "_fused_adam",
                             "_single_tensor_adamw", "_multi_tensor_adamw", "_fused_adamw", "_take_model_step",
                             "_single_tensor_sgd", "_multi_tensor_sgd", "step_optimizer"})),
    ("forward", frozenset({"forward", "forward_step", "_forward", "forward_pass", "training_step", "model_forward",
                           "forward_step_helper", "_call_impl", "_wrapped_call_impl"})),
)
# `step` is the optimizer's only in an optimizer's own file (torch/optim/adam.py, megatron's
# optimizer.py, apex's fused_adam.py); a module called `step` elsewhere says nothing
_OPTIM_FILE = re.compile(r"(?:^|[/\\_])optim", re.IGNORECASE)


def phase(lines: Sequence[str], upto: Optional[int] = None) -> Optional[str]:
    """'forward', 'backward' or 'optimizer': the part of a training step the traceback's
    innermost telling frame (before index `upto`) belongs to; None when no frame tells."""
    for f in reversed(frames(lines, upto)):
        m = _FUNCTION.match(lines[f.index])
        if m is None:
            continue
        fn = m.group(1).rsplit(".", 1)[-1]
        if fn == "step" and _OPTIM_FILE.search(f.path):
            return "optimizer"
        for name, fns in PHASES:
            if fn in fns:
                return name
    return None

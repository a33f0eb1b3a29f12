"""Remediation placeholders: a name, or a call of a named helper on names and numbers.

`{rank}` fills in a value; `{divisors(heads)}` or `{near_multiples(gbs, product(mbs, dp))}`
computes one from the captured numbers, so a configuration assert can say which values
would satisfy it ("valid tensor-parallel sizes for 28 heads: 1, 2, 4, 7, 14, 28"). The
helpers are a small fixed set (HELPERS); a template is parsed and checked when the rule pack
loads (unknown helper, wrong number of arguments, a name that is no capture group), and a
helper that cannot compute (a missing or non-numeric value, no exact quotient) gives no
value, so the line is left out like any line with a missing value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Optional, Union

MAX_N = 10**12  # numbers beyond this are not worth factoring in a remediation message
MAX_LIST = 24  # list at most this many values
MAX_DEPTH = 8  # helper calls nested in one placeholder (evaluation recurses this deep)
MAX_CHARS = 1_000  # one placeholder's text


@dataclass(frozen=True)
class Call:
    fn: str
    args: tuple["Expr", ...]


Expr = Union[str, int, Call]  # a placeholder name, an integer literal, or a helper call


def _num(v) -> Optional[int]:
    if isinstance(v, int):
        return v
    if isinstance(v, str) and re.fullmatch(r"-?\d{1,15}", v.strip()):
        return int(v)
    return None


def _listing(nums: list[int]) -> str:
    if len(nums) > MAX_LIST:
        half = MAX_LIST // 2
        return ", ".join(map(str, nums[:half])) + ", ..., " + ", ".join(map(str, nums[-2:]))
    return ", ".join(map(str, nums))


def divisors(n) -> Optional[str]:
    """'1, 2, 4, 7, 14, 28': every value that divides n exactly."""
    n = _num(n)
    if n is None or n <= 0 or n > MAX_N:
        return None
    small, large = [], []
    for d in range(1, math.isqrt(n) + 1):
        if n % d == 0:
            small.append(d)
            if d != n // d:
                large.append(n // d)
    return _listing(small + large[::-1])


def quotient(a, b) -> Optional[int]:
    """a / b when b divides a exactly, else no value."""
    a, b = _num(a), _num(b)
    if a is None or b is None or b == 0 or a % b:
        return None
    return a // b


def product(*xs) -> Optional[int]:
    """The product of the values present: a missing factor (a parallel size the message
    does not print) counts as 1; no value when none is present or one is not a number."""
    nums = [_num(x) for x in xs]
    if not nums or any(n is None for n in nums):
        return None
    out = 1
    for n in nums:
        out *= n  # type: ignore[operator]
        if abs(out) > MAX_N:
            return None
    return out


def near_multiples(n, m) -> Optional[str]:
    """'1008 or 1032': the multiples of m just below and above n ('8' when n < m)."""
    n, m = _num(n), _num(m)
    if n is None or m is None or m <= 0 or n < 0:
        return None
    lo = (n // m) * m
    hi = lo + m if lo != n else lo
    if lo == hi:
        return str(lo)
    return str(hi) if lo == 0 else f"{lo} or {hi}"


def gcd(a, b) -> Optional[int]:
    a, b = _num(a), _num(b)
    if a is None or b is None:
        return None
    return math.gcd(a, b)


def size(n) -> Optional[str]:
    """A byte count for people: '8.00 GiB', '1.00 TiB'."""
    n = _num(n)
    if n is None or n < 0:
        return None
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{n} bytes" if unit == "bytes" else f"{value:.2f} {unit}"
        value /= 1024
    return None


# how a shell, srun and Python's faulthandler name the signal that ended a process
SHELL_WORDS = {
    "segmentation fault": 11, "bus error": 7, "illegal instruction": 4, "floating point exception": 8,
    "aborted": 6, "abort": 6, "killed": 9, "terminated": 15, "hangup": 1, "interrupt": 2,
    # zsh's words (for SIGILL and SIGABRT), a DataLoader worker's handler's (SIGFPE), macOS's
    "illegal hardware instruction": 4, "iot instruction": 6, "floating-point exception": 8, "abort trap": 6,
    # the C library's words in the shell's language (zh_CN, de, ja), as `Killed` is in English
    "段错误": 11, "已放弃": 6, "总线错误": 7, "非法指令": 4, "浮点数例外": 8, "已杀死": 9,
    "speicherzugriffsfehler": 11, "abgebrochen": 6, "getötet": 9, "セグメンテーション違反です": 11, "強制終了": 9,
}


def signum(v) -> Optional[int]:
    """A signal number from how launchers print one: `-9` (a Python exit code), `137`
    (a shell's 128+N), `9`, a name, `SIGKILL`, or a shell's words, `Bus error`."""
    if isinstance(v, str) and v.strip().upper().startswith("SIG"):
        from slurmdoc.slurm.exitcodes import SIGNALS

        name = v.strip().upper()
        return next((n for n, (nm, _) in SIGNALS.items() if nm == name), None)
    if isinstance(v, str) and v.strip().lower() in SHELL_WORDS:
        return SHELL_WORDS[v.strip().lower()]
    n = _num(v)
    if n is None:
        return None
    if n < 0:
        n = -n
    elif n > 128:
        n -= 128
    return n if 0 < n < 128 else None


def exit_signal(v) -> Optional[int]:
    """The signal an exit status names, if it names one: a shell's 128+N (`137`, `139`) or
    Python's minus N (`-9`); an ordinary status (`1`, `2`, `127`, `255`) names none."""
    n = _num(v)
    if n is None:
        return None
    if n < 0:
        return -n if -n < 65 else None
    return n - 128 if 128 < n < 193 else None


def signal(v) -> Optional[str]:
    """'SIGFPE (signal 8)' from -8, 136, 8 or 'SIGFPE'."""
    from slurmdoc.slurm.exitcodes import SIGNALS

    n = signum(v)
    if n is None:
        return None
    name = SIGNALS.get(n, (None, None))[0]
    return f"{name} (signal {n})" if name and name.startswith("SIG") else f"signal {n}"


def signal_label(v) -> Optional[str]:
    """'SIGBUS, bus error': a signal's name and its short words, for a verdict line."""
    from slurmdoc.slurm.exitcodes import SIGNAL_WORDS, SIGNALS

    n = signum(v)
    if n is None:
        return None
    name = SIGNALS.get(n, (f"signal {n}", ""))[0]
    return f"{name}, {SIGNAL_WORDS[n]}" if n in SIGNAL_WORDS else name


def first(*xs):
    """The first of its arguments that has a value (missing ones are skipped)."""
    return xs[0] if xs else None


def signal_meaning(v) -> Optional[str]:
    """What a signal usually means, from the same forms as signal()."""
    from slurmdoc.slurm.exitcodes import SIGNALS

    n = signum(v)
    return SIGNALS[n][1] if n in SIGNALS else None


HELPERS: dict[str, tuple[Callable, int, Optional[int]]] = {
    # name: (function, fewest arguments, most arguments or None)
    "divisors": (divisors, 1, 1),
    "quotient": (quotient, 2, 2),
    "product": (product, 2, None),
    "near_multiples": (near_multiples, 2, 2),
    "gcd": (gcd, 2, 2),
    "size": (size, 1, 1),
    "signal": (signal, 1, 1),
    "signal_meaning": (signal_meaning, 1, 1),
    "signal_label": (signal_label, 1, 1),
    "first": (first, 1, None),
}

MISSING_IS_ONE = {"product", "first"}  # helpers whose missing arguments are left out

_TOKEN = re.compile(r"\s*(?:(?P<int>\d+)|(?P<name>[A-Za-z_]\w*)|(?P<sym>[(),]))")


class TemplateError(ValueError):
    pass


def parse(field: str) -> Expr:
    """Parse a placeholder's text: NAME | INT | NAME '(' expr {',' expr} ')'.

    Calls nest at most MAX_DEPTH deep, so that neither parsing nor evaluating a template
    a rule pack loaded can run out of stack.
    """
    if len(field) > MAX_CHARS:
        raise TemplateError(f"placeholder of {len(field)} characters, longer than {MAX_CHARS}")
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = field.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise TemplateError(f"cannot read '{field}' at '{text[pos:]}'")
        kind = m.lastgroup or ""
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    if not tokens:
        raise TemplateError("empty placeholder")
    i = 0

    def expr(depth: int = 0) -> Expr:
        nonlocal i
        if depth > MAX_DEPTH:
            raise TemplateError(f"helper calls nested deeper than {MAX_DEPTH} levels")
        if i >= len(tokens):
            raise TemplateError(f"'{field}' ends too early")
        kind, val = tokens[i]
        i += 1
        if kind == "int":
            return int(val)
        if kind != "name":
            raise TemplateError(f"unexpected '{val}' in '{field}'")
        if i < len(tokens) and tokens[i] == ("sym", "("):
            i += 1
            args = [expr(depth + 1)]
            while i < len(tokens) and tokens[i] == ("sym", ","):
                i += 1
                args.append(expr(depth + 1))
            if i >= len(tokens) or tokens[i] != ("sym", ")"):
                raise TemplateError(f"missing ')' in '{field}'")
            i += 1
            if val not in HELPERS:
                raise TemplateError(f"unknown helper '{val}' (helpers: {', '.join(sorted(HELPERS))})")
            _, lo, hi = HELPERS[val]
            if len(args) < lo or (hi is not None and len(args) > hi):
                want = f"{lo}" if lo == hi else f"{lo} or more" if hi is None else f"{lo}-{hi}"
                raise TemplateError(f"{val}() takes {want} argument(s), got {len(args)}")
            return Call(val, tuple(args))
        return val

    out = expr()
    if i != len(tokens):
        raise TemplateError(f"unexpected '{tokens[i][1]}' in '{field}'")
    return out


def names(e: Expr) -> set[str]:
    """The placeholder names an expression reads."""
    if isinstance(e, str):
        return {e}
    if isinstance(e, Call):
        out: set[str] = set()
        for a in e.args:
            out |= names(a)
        return out
    return set()


def evaluate(e: Expr, values: dict) -> Optional[str]:
    """The text an expression fills in, or None when it has no value."""
    v = _eval(e, values)
    return None if v is None else str(v)


def _eval(e: Expr, values: dict):
    if isinstance(e, int):
        return e
    if isinstance(e, str):
        return values.get(e)
    args = [_eval(a, values) for a in e.args]
    if e.fn in MISSING_IS_ONE:
        args = [a for a in args if a is not None]
    if any(a is None for a in args):
        return None
    return HELPERS[e.fn][0](*args)

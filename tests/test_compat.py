"""slurmdoc runs on every Python that pyproject.toml's requires-python admits."""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from pathlib import Path

import pytest

import slurmdoc

ROOT = Path(__file__).resolve().parent.parent

# what the standard library's `re` learnt after 3.10: atomic groups `(?>...)` and possessive
# quantifiers (`x*+`, `x++`, `x?+`, `x{m,n}+`), both 3.11; a pattern with either fails to
# compile on 3.10, at import for a module-level one, so every run ends in an internal error
NEWER_THAN_310 = ("ATOMIC_GROUP", "POSSESSIVE_REPEAT")


def _oldest_python() -> tuple[int, int]:
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'requires-python\s*=\s*">=\s*(\d+)\.(\d+)', text)
    assert m, "pyproject.toml names no lowest Python"
    return int(m.group(1)), int(m.group(2))


def _ops(parsed) -> set[str]:
    """The names of the opcodes anywhere in a parsed pattern (re._parser's tree, whose repr
    names every opcode and shows literals as numbers)."""
    return set(re.findall(r"\b[A-Z][A-Z_]+\b", repr(parsed)))


def _module_patterns():
    for info in pkgutil.walk_packages(slurmdoc.__path__, "slurmdoc."):
        try:
            mod = importlib.import_module(info.name)
        except ImportError:
            continue  # an optional dependency this machine lacks
        for name, value in vars(mod).items():
            if isinstance(value, re.Pattern):
                yield f"{info.name}.{name}", value


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the 3.11 parser tells the 3.11-only syntax apart")
def test_no_module_level_regex_needs_a_newer_python_than_the_package_admits():
    """Every regex a module compiles with the standard library's `re` at import parses on the
    oldest Python admitted: an atomic group or a possessive quantifier (3.11's) would fail
    every run on 3.10 before reading a line."""
    if _oldest_python() >= (3, 11):
        pytest.skip("the package no longer admits 3.10")
    from re import _parser  # type: ignore[attr-defined]

    bad = []
    for where, pat in _module_patterns():
        if isinstance(pat.pattern, str) and set(NEWER_THAN_310) & _ops(_parser.parse(pat.pattern, pat.flags)):
            bad.append(where)
    assert not bad, f"3.11-only regex syntax in: {', '.join(bad)}"


def test_the_check_sees_3_11_syntax():
    """The opcode walk above finds an atomic group and a possessive quantifier nested deep."""
    from re import _parser  # type: ignore[attr-defined]

    if sys.version_info < (3, 11):
        pytest.skip("3.10's parser refuses them outright")
    assert "ATOMIC_GROUP" in _ops(_parser.parse(r"a(?:b|(?=c(?>d+)))", 0))
    assert "POSSESSIVE_REPEAT" in _ops(_parser.parse(r"x(?P<g>[ab]*+)?", 0))
    assert not set(NEWER_THAN_310) & _ops(_parser.parse(r"(?=(?P<v>\d+))(?P=v)", 0))

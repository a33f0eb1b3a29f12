from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from slurmdoc.engine.loader import load_rulebook
from slurmdoc.engine.matcher import Matcher

ROOT = Path(__file__).resolve().parent.parent

# The suite's properties run a fixed, reproducible set of examples by default, so a red run
# is the code's doing and can be replayed; `pytest --hypothesis-profile=explore` searches
# new examples, and what it finds becomes a test.
settings.register_profile("default", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False, max_examples=1000)
settings.load_profile("default")


@pytest.fixture(scope="session")
def book():
    return load_rulebook()


@pytest.fixture(scope="module")
def keywords():
    """The bundled pack's trigger literals: (case-sensitive, ignore-case)."""
    return Matcher(load_rulebook(None)).keywords


@pytest.fixture
def write(tmp_path):
    """write(name, text) -> path of a new file under tmp_path."""

    def _write(name: str, text: str | bytes) -> str:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
        return str(p)

    return _write

"""The README's "What it prints" is the real output of the command it shows."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from slurmdoc.cli import app

ROOT = Path(__file__).resolve().parent.parent


def test_what_it_prints_is_what_it_prints():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## What it prints", 1)[1]
    block = re.search(r"```\n\$ (slurmdoc [^\n]+)\n(.*?)```\n", section, re.S)
    assert block, "the section shows a command and its output"
    cmd, shown = block.group(1), block.group(2)
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        res = CliRunner().invoke(app, shlex.split(cmd)[1:], env={"NO_COLOR": "1", "FORCE_COLOR": ""})
    finally:
        os.chdir(old)
    assert res.exit_code == 1
    assert res.stdout == shown


def test_flight_recorder_excerpt_is_what_it_prints():
    """The README's `--traces` excerpt: every line it shows is a line of the real report."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Hangs: the flight recorder", 1)[1]
    block = re.search(r"`(slurmdoc diagnose job\.log --traces traces/)` prints, in part:\n\n```\n(.*?)```\n", section, re.S)
    assert block, "the section shows what the report says"
    case = re.search(r"On `(fixtures/traces/[a-z0-9_]+)`", section).group(1)
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        res = CliRunner().invoke(app, ["diagnose", f"{case}/job.log", "--traces", f"{case}/traces/", "--no-picture"],
                                 env={"NO_COLOR": "1", "FORCE_COLOR": ""})
    finally:
        os.chdir(old)
    assert res.exit_code == 1
    printed = res.stdout.splitlines()
    shown = [ln for ln in block.group(2).splitlines() if ln and ln != "..."]
    assert shown and all(ln in printed for ln in shown)

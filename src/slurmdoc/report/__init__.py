"""Renderers: one function per output format, each taking a Diagnosis."""

from __future__ import annotations

FORMATS = ("text", "json", "markdown")

"""The few errors slurmdoc raises on purpose. Only the CLI turns them into exit codes."""

from __future__ import annotations


class SlurmdocError(Exception):
    """Base class: a one-line message for the user, and the exit code it maps to."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        text = self.message if not self.hint else f"{self.message} ({self.hint})"
        return " ".join(text.split())


class InputError(SlurmdocError):
    """A path that does not exist, a directory with no logs, nothing readable."""

    exit_code = 2


class ConfigError(SlurmdocError):
    """An unreadable or invalid config file, or a setting naming something missing."""

    exit_code = 2


class RuleError(SlurmdocError):
    """An invalid rule pack. The message names file, rule and field."""

    exit_code = 3

    def __init__(self, file: str, rule: str | None, field: str | None, problem: str) -> None:
        where = file
        if rule:
            where += f": rule '{rule}'"
        if field:
            where += f": field '{field}'"
        super().__init__(f"{where}: {problem}")
        self.file = file
        self.rule = rule
        self.field = field
        self.problem = problem

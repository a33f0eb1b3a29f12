"""The rule file schema (see rules/README.md for the same, field by field)."""

# Annotations are objects, not text (no `from __future__ import annotations`): pydantic would
# otherwise compile and evaluate each field's annotation at import, on every run.

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Stable category ids of the outward contract.
CATEGORIES = (
    "cuda_oom",
    "host_oom",
    "shape_divisibility",
    "import_error",
    "nccl_timeout",
    "sigterm_cascade",
    "killed",
    "cancelled",
    "time_limit",
    "preemption",
    "node_failure",
    "nccl_error",
    "cuda_error",
    "segfault",
    "rendezvous_error",
    "io_error",
    "numerical",
    "config_error",
    "python_exception",
    "unknown",
)

# The evidence ladder, strongest first (see diagnosis/ladder.py and the README's contract note).
EVIDENCE_LEVELS = ("traceback", "exception", "launcher", "exit", "error_line")

BUILTIN_PLACEHOLDERS = (
    "rank", "ranks", "node", "source", "message", "count", "frame", "stragglers", "reporters", "progress", "last_line",
    # facts the diagnosis knows beyond the rule's own captures (diagnosis/explain.py, facts_of):
    # the training phase read from the traceback's frames, the job id and its accounting
    # (peak RSS, the memory request) when the job is known (`diagnose --job`, the epilogue)
    "phase", "job", "peak_rss", "peak_rss_from", "mem_request",
)
# built-ins that always have a value; any other placeholder can be missing (lint)
ALWAYS_FILLED = ("ranks", "source", "message", "count")

# yes/no facts a conditional fix line may test (`if:`/`unless:`), besides any capture group
# or built-in placeholder (which holds when it has a value)
FACTS = {
    "rank_zero": "the root cause is on rank 0",
    "rank_nonzero": "the root cause is on a known rank other than 0",
    "one_rank": "one rank of several failed this way",
    "all_ranks": "every rank of several failed this way",
    "several_ranks": "more than one rank, not all, failed this way",
    "phase_forward": "the traceback shows the forward pass",
    "phase_backward": "the traceback shows the backward pass",
    "phase_optimizer": "the traceback shows the optimizer step",
    "rss_at_limit": "the job's peak RSS reached 90% or more of its memory request (accounting)",
    "no_cause": "no error that starts a failure was found: this finding leads as the earliest evidence",
}
# and one per category: `seen_time_limit` holds when a cause or symptom of that category is in the log
FACTS.update({f"seen_{c}": f"a finding of category {c} is in the log" for c in CATEGORIES})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Example(_Strict):
    text: str
    captures: dict[str, str] = {}


class Examples(_Strict):
    match: list[Union[str, Example]] = Field(min_length=1)
    no_match: list[str] = Field(min_length=1)
    todo_match: list[str] = []

    def matches(self) -> list[Example]:
        return [e if isinstance(e, Example) else Example(text=e) for e in self.match]


class FixWhen(_Strict):
    """A fix line shown only when facts hold: `if` (all of them hold) and `unless` (none
    does). A name is a fact of FACTS, a built-in placeholder or a capture group; a
    placeholder or group holds when it has a value, `name=value` when that value is exactly
    `value` (`exitcode=127`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    text: str = Field(min_length=1)
    if_: list[str] = Field(default=[], alias="if")
    unless: list[str] = []

    @field_validator("if_", "unless", mode="before")
    @classmethod
    def _one_is_a_list(cls, v):
        return [v] if isinstance(v, str) else [] if v is None else v


class RemediationSpec(_Strict):
    summary: str = Field(min_length=1)
    why: Optional[str] = None
    fix: list[Union[str, FixWhen]] = []

    @field_validator("fix", mode="before")
    @classmethod
    def _fix_items(cls, v):
        # say what is wrong with a conditional line in one sentence (a union's errors would
        # list both of its branches)
        for i, item in enumerate(v if isinstance(v, list) else []):
            if isinstance(item, dict):
                extra = [str(k) for k in item if k not in ("text", "if", "unless")]
                if extra:
                    raise ValueError(f"fix[{i}]: unknown field '{extra[0]}' (a conditional line has text, if, unless)")
                if not isinstance(item.get("text"), str) or not item.get("text"):
                    raise ValueError(f"fix[{i}]: a conditional line needs its text")
                for k in ("if", "unless"):
                    got = item.get(k)
                    if got is not None and not isinstance(got, str) and not (isinstance(got, list) and all(isinstance(x, str) for x in got)):
                        raise ValueError(f"fix[{i}].{k}: a fact name or a list of them")
            elif not isinstance(item, str):
                raise ValueError(f"fix[{i}]: a line of text, or a mapping with text and if/unless")
        return v
    straggler: Optional[str] = None  # summary used when missing_rank_is_root names stragglers


class RuleSpec(_Strict):
    id: Optional[str] = None
    title: str = Field(min_length=1)
    category: str
    role: Literal["cause", "symptom", "context"]
    priority: int = Field(default=50, ge=0, le=100)
    scope: Literal["line", "traceback", "any"] = "any"
    attribution: Literal["prefix", "text"] = "prefix"
    keywords: list[str] = Field(min_length=1)
    ignore_case: bool = False
    patterns: list[str] = Field(min_length=1)
    exclude: list[str] = []
    # regexes: the rule matches an exception only when the innermost frame of that
    # exception's own traceback (its `File` line and the source under it) matches one; for
    # words any program may raise (`Permission denied`) whose origin says what failed
    raised_in: list[str] = []
    root_if_alone: bool = False
    refine_with: list[str] = []
    launcher_verdict: bool = False
    known_ranks: Optional[str] = None
    missing_rank_is_root: bool = False
    defer_to_straggler: bool = False
    exit_evidence: bool = False
    attempt_start: bool = False
    explains: list[str] = []  # root-cause categories this context finding is evidence for
    # the rung of the evidence ladder a finding of this rule stands on, when its form alone
    # does not say it (a shell's `Killed` line is an `exit` with no words)
    evidence: Optional[Literal["traceback", "exception", "launcher", "exit", "error_line"]] = None
    # how far a `rank` capture is trusted: a launcher's report of a failed rank, or a rank
    # named inside an error message (below a prefix, a file name and a launcher)
    rank_source: Literal["launcher", "message"] = "launcher"
    clean_end: bool = False  # the line shows its printer (or the job) ended cleanly
    # the signals this rule stands for (`SIGKILL`, or a number): a report of a process ended
    # by one of them, in any reporter's words (a rule with `reports_signal`), is this rule's
    signals: list[Union[str, int]] = []
    # the rule's patterns are reporters' words for a process ended by a signal, captured in
    # the group `sig` (`9`, `-9`, `SIGKILL`, `Killed`): a match is a finding of the rule
    # whose `signals` hold that signal, and this rule's only when no rule claims it
    reports_signal: bool = False
    persists: bool = False  # a state, not an event: judged at its printer's last repetition
    # the rule also reads a wrapper exception's line as the wrapped class's own
    # (`Wrapper(Inner): msg` as `Inner: msg`, engine.matcher.unwrapped)
    reads_wrapped: bool = True

    @field_validator("exclude", "raised_in", "refine_with", "keywords", "patterns", "label", mode="before")
    @classmethod
    def _null_is_empty(cls, v):
        return [] if v is None else [v] if isinstance(v, str) else v  # `exclude:` with nothing after it; one text
    remediation: RemediationSpec
    # words the verdict adds after the category id ("segfault (SIGBUS, bus error)"); a list:
    # the first whose placeholders all have values
    label: list[str] = []
    examples: Examples
    description: Optional[str] = None

    @field_validator("category", "refine_with", "explains")
    @classmethod
    def _known_category(cls, v):
        for c in [v] if isinstance(v, str) else v:
            if c not in CATEGORIES:
                raise ValueError(f"unknown category '{c}' (known: {', '.join(CATEGORIES)})")
        return v

    @field_validator("keywords")
    @classmethod
    def _nonempty_keywords(cls, v: list[str]) -> list[str]:
        if any(not k for k in v):
            raise ValueError("a keyword is empty")
        return v

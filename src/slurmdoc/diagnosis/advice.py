"""Advice from facts: a rule's remediation filled in for one root cause. Its templates'
placeholders take capture groups and built-ins (engine.template computes the helper calls);
its conditional fix lines are kept or left out by the facts the diagnosis knows (the root's
rank, how many ranks failed, the phase its traceback shows, the job's peak RSS); its label
names how the process ended, for the verdict.
"""

from __future__ import annotations

import re
import string
from functools import lru_cache
from typing import Iterable, Optional

from slurmdoc.diagnosis.ranks import describe
from slurmdoc.engine.loader import Rule
from slurmdoc.engine.schema import FACTS
from slurmdoc.engine.template import evaluate, parse
from slurmdoc.models import Remediation

OPTIONAL = re.compile(r"\[\[(.*?)\]\]")


@lru_cache(maxsize=4096)
def _template(field_: str):
    return parse(field_)


def fill_field(field_: str, values: dict) -> Optional[str]:
    """A placeholder's text: a value, or a helper computed from values (engine.template)."""
    if field_ in values:
        return str(values[field_])
    try:
        return evaluate(_template(field_), values)
    except (ValueError, TypeError, ArithmeticError):
        return None


PHASE_WORDS = {"forward": "forward pass", "backward": "backward pass", "optimizer": "optimizer step"}


def facts_of(rank: Optional[int], ranks: list[int], total: int, everyone: bool, phase: Optional[str], outside: dict,
             promoted: bool = False, seen: Iterable[str] = ()) -> dict[str, object]:
    """The facts a conditional fix line may test (engine.schema.FACTS) and the built-in
    values they bring: the root's rank, how many ranks failed, the phase its traceback
    shows, and what the job's accounting says (`outside`, slurm.triage.job_facts)."""
    out: dict[str, object] = {k: v for k, v in outside.items() if v is not None}
    out["rank_zero"] = rank == 0
    out["rank_nonzero"] = rank is not None and rank != 0
    out["all_ranks"] = everyone
    out["one_rank"] = len(ranks) == 1 and total > 1 and not everyone
    out["several_ranks"] = len(ranks) > 1 and not everyone
    out["no_cause"] = promoted
    for category in seen:
        out[f"seen_{category}"] = True
    if phase:
        out["phase"] = PHASE_WORDS.get(phase, phase)
        out[f"phase_{phase}"] = True
    return out


def remediation(total: int, rule: Rule, caps: dict[str, str], facts: Optional[dict] = None, **builtins) -> Remediation:
    facts = facts or {}
    values = {k: v for k, v in builtins.items() if v is not None and v != []}
    values["ranks"] = describe(values["ranks"], total) if "ranks" in values else "a process (rank unknown)"
    values.update({k: v for k, v in facts.items() if k not in FACTS and v is not None})
    values.update({k: v for k, v in caps.items() if v is not None})

    def holds(cond: str) -> bool:
        name, eq, want = cond.partition("=")
        if name in FACTS:
            return bool(facts.get(name))
        got = fill_field(name, values)
        return got is not None and (not eq or got.strip() == want)

    def fill(text: str, drop_if_missing: bool) -> Optional[str]:
        out = []
        for lit, name, spec, conv in string.Formatter().parse(text):
            out.append(lit)
            if name is None:
                continue
            got = fill_field(name, values)
            if got is not None:
                out.append(got)
            elif drop_if_missing:
                return None
            else:
                out.append("?")
        return "".join(out).strip()

    def fill_text(text: str) -> str:
        # [[ ... ]] is left out when a placeholder inside it has no value
        text = OPTIONAL.sub(lambda m: fill(m.group(1), True) is not None and m.group(1) or "", text)
        done = fill(text, False) or ""
        return done[:1].upper() + done[1:]

    spec = rule.spec.remediation
    def fill_fix(text: str) -> Optional[str]:
        # [[ ... ]] is left out when a value inside is missing; any other missing value
        # drops the whole line
        text = OPTIONAL.sub(lambda m: fill(m.group(1), True) is not None and m.group(1) or "", text)
        return fill(text, True)

    def shown(x) -> Optional[str]:
        if isinstance(x, str):
            return x
        if all(holds(n) for n in x.if_) and not any(holds(n) for n in x.unless):
            return x.text
        return None

    fixes = [t for t in (fill_fix(x) for x in (shown(x) for x in spec.fix) if x is not None) if t]
    summary = spec.straggler if (spec.straggler and "stragglers" in values) else spec.summary
    return Remediation(summary=fill_text(summary), why=fill_text(spec.why) if spec.why else None, fix=tuple(fixes))


def label_of(rule: Rule, caps: dict[str, str], exit_signal: Optional[str] = None) -> Optional[str]:
    """The rule's label, the first alternative whose placeholders all have values; else, for
    an exit status that shows a signal (`exit_signal`: -9, 137), that signal."""
    values = {k: v for k, v in caps.items() if v is not None}
    for text in rule.spec.label:
        out = []
        for lit, name, _, _ in string.Formatter().parse(text):
            out.append(lit)
            if name is None:
                continue
            got = fill_field(name, values)
            if got is None:
                break
            out.append(got)
        else:
            return "".join(out).strip() or None
    return fill_field("signal_label(x)", {"x": exit_signal}) if exit_signal is not None else None

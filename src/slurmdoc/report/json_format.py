"""`--format json`: the contract's schema (schema_version 1), plus extension fields."""

from __future__ import annotations

import json

from slurmdoc.models import Diagnosis


def render(d: Diagnosis) -> str:
    return json.dumps(d.model_dump(mode="json"), indent=2, ensure_ascii=False, sort_keys=False) + "\n"

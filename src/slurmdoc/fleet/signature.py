"""Signatures: a root message with what varies between jobs masked (numbers, hex, paths, hosts,
ranks, sizes), so one failure seen in forty jobs is one recurring signature. The masks are data
(masks.yaml), applied in order, Drain-style."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

import yaml

from slurmdoc.errors import InputError

MASKS_FILE = Path(__file__).with_name("masks.yaml")
MAX_SIGNATURE = 200  # characters kept of a masked message
_TOKEN = re.compile(r"<[a-z]+>")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Mask:
    id: str
    regex: re.Pattern
    token: str
    examples: tuple[tuple[str, str], ...] = ()


def load_masks(path: Path = MASKS_FILE) -> tuple[Mask, ...]:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"{path}: cannot read the signature masks ({e})")
    out = []
    for i, m in enumerate((doc or {}).get("masks") or []):
        try:
            flags = re.IGNORECASE if "ignorecase" in (m.get("flags") or []) else 0
            rx = re.compile(m["regex"], flags)
            ex = tuple((e["text"], e["masked"]) for e in m.get("examples") or [])
            out.append(Mask(str(m["id"]), rx, str(m["token"]), ex))
        except (KeyError, TypeError, re.error) as e:
            raise InputError(f"{path}: mask {i + 1}: invalid ({e})")
    return tuple(out)


@lru_cache(maxsize=1)
def _masks() -> tuple[Mask, ...]:
    return load_masks()


def _apply(rx: re.Pattern, token: str, text: str) -> str:
    """Replace matches of `rx` outside tokens already placed."""
    parts = _TOKEN.split(text)
    toks = _TOKEN.findall(text)
    out = [rx.sub(token, parts[0])]
    for t, p in zip(toks, parts[1:]):
        out += [t, rx.sub(token, p)]
    return "".join(out)


def mask(text: str, masks: Optional[tuple[Mask, ...]] = None) -> str:
    t = _SPACE.sub(" ", text.strip())
    for m in masks if masks is not None else _masks():
        t = _apply(m.regex, m.token, t)
    return t


def signature(category: Optional[str], message: Optional[str]) -> Optional[str]:
    """`category: masked message` (None when nothing failed)."""
    if category is None:
        return None
    msg = mask((message or "").splitlines()[0] if message else "")
    if len(msg) > MAX_SIGNATURE:
        msg = msg[:MAX_SIGNATURE] + "..."
    return f"{category}: {msg}" if msg else category

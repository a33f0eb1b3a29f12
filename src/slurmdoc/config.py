"""Where the user's rule directories come from: command line, environment, config file.

The bundled pack is always loaded first. User directories add to it, and a user rule whose
id is already taken replaces the earlier rule (a later directory wins over an earlier one).
Which user directories are used is decided by the first of these that is set, alone:

1. `--rules DIR` on the command line (repeatable);
2. the environment variable `SLURMDOC_RULES`, directories separated by `os.pathsep`
   (`:` on Linux); set but empty means "no user rules", which also ignores the config file;
3. `rules = [...]` in the config file: `$SLURMDOC_CONFIG` if set, else
   `$XDG_CONFIG_HOME/slurmdoc/config.toml` (`~/.config/...`), else
   `/etc/slurmdoc/config.toml`. Relative directories are relative to the config file.

A higher source replaces a lower one rather than adding to it, so one command line or one
environment variable (an epilogue's) says exactly which rules run, whatever a config file
elsewhere says.
"""

from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from slurmdoc.errors import ConfigError

ENV_RULES = "SLURMDOC_RULES"
ENV_CONFIG = "SLURMDOC_CONFIG"
SYSTEM_CONFIG = Path("/etc/slurmdoc/config.toml")
CONFIG_KEYS = ("rules",)


@dataclass(frozen=True)
class RuleDirs:
    """The user rule directories in load order, and which setting named them."""

    dirs: tuple[str, ...]
    origin: str  # "--rules", "SLURMDOC_RULES", the config file's path, or "none"


def config_path(env: Mapping[str, str]) -> Optional[Path]:
    """The config file that applies, or None when there is none."""
    explicit = env.get(ENV_CONFIG)
    if explicit:
        p = Path(os.path.expanduser(explicit))
        if not p.is_file():
            raise ConfigError(f"{p}: config file named by {ENV_CONFIG} does not exist")
        return p
    xdg = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    for cand in (Path(xdg) / "slurmdoc" / "config.toml", SYSTEM_CONFIG):
        if cand.is_file():
            return cand
    return None


def read_config(path: Path) -> dict:
    """The config file's settings, validated: only known keys, `rules` a list of strings."""
    if sys.version_info >= (3, 11):  # imported here: most runs have no config file to read
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config file: {e.strerror or e}")
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}")
    for key in data:
        if key not in CONFIG_KEYS:
            close = difflib.get_close_matches(key, CONFIG_KEYS, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(CONFIG_KEYS)}"
            raise ConfigError(f"{path}: unknown key '{key}'{hint}")
    rules = data.get("rules", [])
    if isinstance(rules, str):
        rules = [rules]
    if not isinstance(rules, list) or not all(isinstance(r, str) and r for r in rules):
        raise ConfigError(f"{path}: 'rules' must be a list of directory names, e.g. rules = [\"~/my-rules\"]")
    base = path.resolve().parent
    return {"rules": [str(base / os.path.expanduser(r)) for r in rules]}


def resolve_rule_dirs(cli_dirs: Optional[Sequence[str]] = None, env: Optional[Mapping[str, str]] = None) -> RuleDirs:
    """The user rule directories to load on top of the bundled pack (see the module doc)."""
    env = os.environ if env is None else env
    if cli_dirs:
        return RuleDirs(tuple(os.path.expanduser(d) for d in cli_dirs), "--rules")
    if ENV_RULES in env:
        dirs = tuple(os.path.expanduser(d) for d in env[ENV_RULES].split(os.pathsep) if d.strip())
        return RuleDirs(dirs, ENV_RULES)
    path = config_path(env)
    if path is None:
        return RuleDirs((), "none")
    return RuleDirs(tuple(read_config(path)["rules"]), str(path))

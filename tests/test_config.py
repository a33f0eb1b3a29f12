"""Which user rule directories apply: --rules, else SLURMDOC_RULES, else the config file."""

from __future__ import annotations

import os

import pytest

from slurmdoc.config import config_path, read_config, resolve_rule_dirs
from slurmdoc.errors import ConfigError


def cfg(tmp_path, text, name="config.toml"):
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_command_line_wins_over_environment_and_config(tmp_path):
    c = cfg(tmp_path, 'rules = ["from-config"]\n')
    env = {"SLURMDOC_RULES": f"a{os.pathsep}b", "SLURMDOC_CONFIG": str(c)}
    got = resolve_rule_dirs(["x", "y"], env)
    assert got.dirs == ("x", "y") and got.origin == "--rules"


def test_environment_wins_over_config_and_keeps_its_order(tmp_path):
    c = cfg(tmp_path, 'rules = ["from-config"]\n')
    got = resolve_rule_dirs([], {"SLURMDOC_RULES": f"b{os.pathsep}a{os.pathsep}", "SLURMDOC_CONFIG": str(c)})
    assert got.dirs == ("b", "a") and got.origin == "SLURMDOC_RULES"


def test_empty_environment_variable_means_no_user_rules(tmp_path):
    c = cfg(tmp_path, 'rules = ["from-config"]\n')
    got = resolve_rule_dirs(None, {"SLURMDOC_RULES": "", "SLURMDOC_CONFIG": str(c)})
    assert got.dirs == () and got.origin == "SLURMDOC_RULES"


def test_config_dirs_are_relative_to_the_config_file(tmp_path):
    c = cfg(tmp_path / "etc", 'rules = ["team-rules", "/abs/rules"]\n')
    got = resolve_rule_dirs(None, {"SLURMDOC_CONFIG": str(c)})
    assert got.dirs == (str((tmp_path / "etc" / "team-rules").resolve()), "/abs/rules") and got.origin == str(c)


def test_xdg_config_home_is_found(tmp_path):
    c = cfg(tmp_path / "xdg" / "slurmdoc", 'rules = "one"\n')
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}
    assert config_path(env) == c
    assert resolve_rule_dirs(None, env).dirs == (str(c.parent.resolve() / "one"),)


def test_no_config_anywhere_means_no_user_rules(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "none"), "HOME": str(tmp_path)}
    got = resolve_rule_dirs(None, env)
    if got.origin == "/etc/slurmdoc/config.toml":  # this machine has a system-wide config
        pytest.skip("a system-wide /etc/slurmdoc/config.toml exists here")
    assert got.dirs == () and got.origin == "none"


@pytest.mark.parametrize(
    "text, needle",
    [
        ('rule = ["x"]\n', "unknown key 'rule'; did you mean 'rules'?"),
        ("rules = [\n", "not valid TOML"),
        ("rules = [1, 2]\n", "'rules' must be a list of directory names"),
        ("rules = ['']\n", "'rules' must be a list of directory names"),
    ],
)
def test_bad_config_is_a_one_line_usage_error(tmp_path, text, needle):
    c = cfg(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        read_config(c)
    assert needle in e.value.one_line() and str(c) in e.value.one_line() and e.value.exit_code == 2


def test_missing_explicit_config_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_rule_dirs(None, {"SLURMDOC_CONFIG": str(tmp_path / "nope.toml")})

"""Bounded YAML: every way a few bytes of YAML can grow or nest is refused before it is built."""

from __future__ import annotations

import glob
import time

import pytest
import yaml

from slurmdoc.engine import safeyaml
from slurmdoc.engine.safeyaml import YamlLimitError

LOADERS = [yaml.SafeLoader] + ([yaml.CSafeLoader] if hasattr(yaml, "CSafeLoader") else [])


@pytest.fixture(params=LOADERS, ids=lambda c: c.__name__)
def loader(request, monkeypatch):
    monkeypatch.setattr(safeyaml, "_LOADER", request.param)
    return request.param


def refused(text, **limits):
    t = time.perf_counter()
    with pytest.raises(YamlLimitError) as e:
        safeyaml.load(text, **limits)
    assert time.perf_counter() - t < 10  # sanity cap: refused from the event stream, not after building
    return e.value


def merge_bomb(levels, width):
    """Each level merges `width` copies of the level below: width**levels keys if expanded."""
    out = ["m0: &m0 {k0: v, k1: v, k2: v}"]
    for i in range(1, levels + 1):
        out.append(f"m{i}: &m{i}\n  <<: [" + ", ".join([f"*m{i - 1}"] * width) + "]")
    return "\n".join(out) + "\n"


def alias_bomb(levels, width):
    """Each level is a list of `width` aliases of the level below."""
    out = ['l0: &l0 "x"']
    for i in range(1, levels + 1):
        out.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    return "\n".join(out) + "\n"


def test_plain_yaml_loads_as_the_safe_loader_would(loader):
    for path in sorted(glob.glob("rules/**/*.yaml", recursive=True)) + ["src/slurmdoc/ingest/progress.yaml"]:
        text = open(path, encoding="utf-8").read()
        assert safeyaml.load(text) == yaml.load(text, Loader=yaml.SafeLoader), path
    text = "a: &x [1, 2.5, true, null, 2001-02-03, !!str 7]\nb: *x\nc: {d: e}\n"
    assert safeyaml.load(text) == yaml.load(text, Loader=yaml.SafeLoader)
    assert safeyaml.load("") is None


@pytest.mark.parametrize("levels, width", [(1, 2), (8, 9), (30, 30)])
def test_merge_keys_are_refused_whatever_they_would_expand_to(loader, levels, width):
    err = refused(merge_bomb(levels, width))
    assert "merge keys" in err.problem and err.line == 3  # the first `<<`


def test_a_plain_merge_key_is_refused_even_with_one_mapping(loader):
    assert "merge keys" in refused("a: &a {x: 1}\nb:\n  <<: *a\n").problem


def test_aliases_count_at_the_size_they_would_expand_to(loader):
    # a billion-laughs pack of under 1 KB: 10**9 strings if expanded
    assert "expands to more than" in refused(alias_bomb(9, 10)).problem
    # the same shape under the budget loads, aliases shared
    small = safeyaml.load(alias_bomb(2, 10))
    assert len(small["l2"]) == 10 and small["l2"][0] is small["l1"]


def test_node_budget_counts_every_node(loader):
    text = "[" + ", ".join(["x"] * 50) + "]"
    assert safeyaml.load(text, max_nodes=51) == ["x"] * 50
    assert "more than 50 nodes" in refused(text, max_nodes=50).problem


@pytest.mark.parametrize("opener, closer", [("[", "]"), ("{a: ", "}")])
@pytest.mark.parametrize("depth", [33, 999, 30_000])
def test_deep_flow_nesting_is_refused_without_crashing(loader, opener, closer, depth):
    # 30,000 nested `[` overran libyaml's C stack when composed: the depth is counted on
    # the parser's events, which the parser produces without recursing
    with pytest.raises((YamlLimitError, yaml.YAMLError)) as e:
        safeyaml.load("k: " + opener * depth + closer * depth + "\n")
    assert isinstance(e.value, YamlLimitError) or "nesting depth" in str(e.value)


def test_deep_block_nesting_is_refused(loader):
    text = "".join("  " * i + "-\n" for i in range(40))
    assert "deeper than 32" in refused(text).problem


def test_depth_at_the_limit_loads(loader):
    assert safeyaml.load("[" * 32 + "]" * 32) is not None
    refused("[" * 33 + "]" * 33)


def test_a_mapping_with_too_many_keys_is_refused(loader):
    text = "{" + ", ".join(f"k{i}: 1" for i in range(1_001)) + "}"
    assert "more than 1000 keys" in refused(text).problem
    assert len(safeyaml.load(text, max_keys=1_001)) == 1_001


def test_a_recursive_alias_is_refused(loader):
    assert "recursive" in refused("a: &a [1, *a]\n").problem


def test_an_alias_to_nothing_or_several_documents_are_errors(loader):
    with pytest.raises((YamlLimitError, yaml.YAMLError)):
        safeyaml.load("a: *nothing\n")
    assert "more than one YAML document" in refused("a: 1\n---\nb: 2\n").problem


def test_oversized_text_is_refused_before_parsing(loader, tmp_path):
    assert "larger than" in refused("a: 1\n" * 10, max_chars=20).problem
    big = tmp_path / "big.yaml"
    with open(big, "wb") as f:
        f.truncate(safeyaml.MAX_BYTES * 50)  # sparse: reading it all would take 50 MB
    with pytest.raises(YamlLimitError, match="larger than"):
        safeyaml.read_capped(big)
    assert len(safeyaml.read_capped(big, limit=safeyaml.MAX_BYTES * 50)) == safeyaml.MAX_BYTES * 50

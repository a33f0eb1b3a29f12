"""Lining dumps up across ranks (slurmdoc.traces.match): the rank that never joined, the odd
rank out, cause before effect across groups, rings, absent dumps."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from slurmdoc.traces import analyze, read_traces

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_700_000_000_000_000_000


def rec(seq, t, pg=("0", "default_pg"), op="all_reduce", size=1024, line=50):
    return {"collective_seq_id": seq, "p2p_seq_id": 0, "process_group": pg, "profiling_name": f"gloo:{op}",
            "time_created_ns": T0 + t, "input_sizes": [[size]], "input_dtypes": ["Float"], "state": "scheduled",
            "is_p2p": False, "frames": [{"name": "all_reduce", "filename": "/x/site-packages/torch/distributed/distributed_c10d.py", "line": 1},
                                        {"name": "train_step", "filename": "/job/train.py", "line": line}]}


def write(tmp: Path, per_rank: dict[int, list[dict]], world: int | None = None, listed: str | None = None) -> Path:
    d = tmp / "traces"
    d.mkdir(exist_ok=True)
    ranks = listed if listed is not None else str(list(range(world if world is not None else max(per_rank) + 1)))
    for r, entries in per_rank.items():
        body = {"version": "2.10", "pg_config": {"": {"name": "", "desc": "", "ranks": ranks}}, "pg_status": {}, "entries": entries}
        (d / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(body))
    return d


def steps(n, skew=0, **kw):
    return [rec(s, 10 * s + skew, **kw) for s in range(1, n + 1)]


@pytest.mark.parametrize("world, late", [(4, 2), (8, 5), (16, 0)])
def test_the_rank_that_never_entered_is_named(tmp_path, world, late):
    per = {r: steps(7 if r != late else 6, skew=r) for r in range(world)}
    v = analyze(read_traces(write(tmp_path, per)))
    assert (v.kind, v.culprits, v.seq, v.op, v.pg, v.evidence) == ("missing", [late], 7, "all_reduce", "0", "dump")
    assert v.waiting_ranks == [r for r in range(world) if r != late] and v.members == list(range(world))
    assert v.culprit_last["seq"] == 6 and v.culprit_last["frames"] == ["/job/train.py:50 in train_step"]


def test_a_healthy_run_is_consistent(tmp_path):
    v = analyze(read_traces(write(tmp_path, {r: steps(6, skew=r) for r in range(4)})))
    assert v.kind == "consistent" and v.culprits == [] and v.absent_dumps == []


@pytest.mark.parametrize("field, odd", [("op", {"op": "broadcast"}), ("sizes", {"size": 1032})])
def test_the_odd_rank_out_of_a_collective_everyone_entered(tmp_path, field, odd):
    per = {r: steps(3, skew=r) + [rec(4, 40 + r, **(odd if r == 1 else {}))] for r in range(4)}
    v = analyze(read_traces(write(tmp_path, per)))
    assert (v.kind, v.culprits, v.seq, v.mismatch["rank"], v.mismatch["field"]) == ("mismatch", [1], 4, 1, field)
    assert v.op == "all_reduce" and v.sizes == [[1024]]  # as most members entered it


def test_an_even_split_names_nobody(tmp_path):
    per = {r: steps(3, skew=r) + [rec(4, 40 + r, size=1024 if r < 2 else 2048)] for r in range(4)}
    v = analyze(read_traces(write(tmp_path, per)))
    assert v.kind == "mismatch" and v.culprits == [] and v.mismatch["rank"] is None


@pytest.mark.parametrize("other_half_first", [False, True])
def test_a_hang_inside_a_subgroup_is_the_cause_and_the_world_hole_its_effect(tmp_path, other_half_first):
    # each step: a world all_reduce, then one in the rank's pair group ('1': ranks 0,1; '2':
    # ranks 2,3). Rank 3 stops before its pair's 3rd all_reduce: rank 2 waits there, ranks
    # 0 and 1 go on to the next world all_reduce, where 2 and 3 never arrive. Which of rank 2
    # (entering its pair's #3) and ranks 0,1 (entering world #4) comes first is a race: the
    # real run (fixtures/traces/subgroup) had 0,1 first
    per: dict[int, list[dict]] = {}
    for r in range(4):
        pg = ("1", "undefined") if r < 2 else ("2", "undefined")
        es = []
        for s in range(1, 4):
            es.append(rec(s, 100 * s + r))
            if not (r == 3 and s == 3):
                es.append(rec(s, 100 * s + (90 if r == 2 and s == 3 and other_half_first else 50) + r, pg=pg))
        if r < 2:
            es.append(rec(4, (360 if other_half_first else 400) + r))
        per[r] = es
    v = analyze(read_traces(write(tmp_path, per, listed="[]")))  # subgroup dumps list no ranks
    assert (v.kind, v.culprits, v.pg, v.seq, v.members) == ("missing", [3], "2", 3, [2, 3])
    assert v.waiting_ranks == [2] and v.culprit_last["pg"] == "0"


def test_a_ring_compares_only_what_every_member_still_holds(tmp_path):
    # rank 0's ring holds #11-#20, rank 1's #15-#20 (it recorded more of something else):
    # the seq ids below 15 say nothing; rank 2 stopped after #19
    per = {0: [rec(s, s) for s in range(11, 21)], 1: [rec(s, s + 1) for s in range(15, 21)], 2: [rec(s, s + 2) for s in range(13, 20)]}
    v = analyze(read_traces(write(tmp_path, per)))
    assert (v.kind, v.culprits, v.seq) == ("missing", [2], 20)


def test_a_member_without_a_dump_is_the_suspect_on_weaker_evidence(tmp_path):
    per = {r: steps(5, skew=r) for r in (0, 1, 3)}  # rank 2 of 4 left no dump
    v = analyze(read_traces(write(tmp_path, per, world=4)))
    assert (v.kind, v.culprits, v.evidence, v.absent_dumps) == ("missing", [2], "absent_dump", [2])
    # a hole among the dumps outranks an absent dump: it names a rank on its own evidence
    per[3] = steps(4, skew=3)
    v = analyze(read_traces(write(tmp_path, per, world=4)))
    assert (v.culprits, v.evidence, v.absent_dumps) == ([3], "dump", [2])


FIXTURES = sorted(p.parent for p in (ROOT / "fixtures" / "traces").glob("*/truth.yaml"))


@pytest.mark.skipif(not FIXTURES, reason="no flight-recorder fixtures in this checkout")
@pytest.mark.parametrize("case", FIXTURES, ids=lambda p: p.name)
def test_real_dumps_name_what_was_planted(case):
    # real torchrun + gloo runs (fixtures/traces): what was planted, against what the dumps say
    truth = yaml.safe_load((case / "truth.yaml").read_text())
    v = analyze(read_traces(case / truth.get("traces", "traces")))
    if truth.get("kind") in (None, "none", "consistent"):
        assert v.kind == "consistent" and v.culprits == []
        return
    assert (v.kind, v.culprits, v.seq, v.pg) == (truth["kind"], sorted(truth["culprits"]), truth["seq"], str(truth["pg"]))
    assert v.evidence == truth.get("trace_evidence", "dump")
    for key in ("pg_desc", "members", "op", "sizes", "missing_ranks", "waiting_ranks", "mismatch", "absent_dumps"):
        if key in truth:
            assert getattr(v, key) == truth[key], key


def test_ranks_waiting_on_each_other_in_different_groups_are_named_with_a_warning(tmp_path):
    # collectives issued in a different order: rank 0 enters group 'a' first, rank 1 group 'b';
    # each waits for the other, neither stopped outside a collective
    d = tmp_path / "traces"
    d.mkdir()
    for r, first in ((0, "a"), (1, "b")):
        body = {"version": "2.10", "entries": [rec(1, 10 + r), rec(1, 20 + r, pg=(first, "undefined"))],
                "pg_config": {"": {"ranks": "[0, 1]"}, "a": {"ranks": "[0, 1]"}, "b": {"ranks": "[0, 1]"}}}
        (d / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(body))
    v = analyze(read_traces(d))
    assert v.kind == "missing" and v.pg == "a" and v.culprits == v.missing_ranks == [1]
    assert any("different order" in w for w in v.warnings)


@given(n=st.integers(2, 12), stop=st.integers(2, 60), data=st.data())
def test_property_the_rank_that_stopped_early_is_named_whatever_each_ring_kept(tmp_path_factory, n, stop, data):
    # every rank but one reaches collective #stop; the culprit stops after #stop-1; each ring
    # keeps its own number of newest entries
    culprit = data.draw(st.integers(0, n - 1), label="culprit")
    per = {}
    for r in range(n):
        last = stop - 1 if r == culprit else stop
        keep = data.draw(st.integers(1, last), label=f"ring of {r}")
        per[r] = [rec(s, 10 * s + r) for s in range(last - keep + 1, last + 1)]
    v = analyze(read_traces(write(tmp_path_factory.mktemp("run"), per)))
    assert (v.kind, v.culprits, v.seq, v.missing_ranks) == ("missing", [culprit], stop, [culprit])
    assert v.waiting_ranks == [r for r in range(n) if r != culprit] and v.evidence == "dump"


@given(chunk=st.sampled_from([2, 4]), chunks=st.integers(2, 4), step=st.integers(1, 5), data=st.data())
def test_property_a_subgroup_hang_is_blamed_on_the_subgroup_whoever_entered_first(tmp_path_factory, chunk, chunks, step, data):
    # each step: a world all_reduce, then one in the rank's chunk (groups '1', '2', ...); the
    # culprit stops before its chunk's #step. Times are drawn so that the culprit's partners may
    # enter their chunk's #step before or after the other chunks enter world #step+1. A culprit
    # that stopped before its chunk's FIRST collective never names the chunk in its dump:
    # nothing then says it belongs to it, and when its partners' dumps agree among themselves
    # they look as finished as it does: the culprit is named among its chunk, at the world
    # collective (with a pair, the partner waits alone in the chunk, and the culprit alone is named).
    n = chunk * chunks
    culprit = data.draw(st.integers(0, n - 1), label="culprit")
    mine = culprit // chunk
    per = {}
    for r in range(n):
        pg = (str(1 + r // chunk), "undefined")
        es = []
        for s in range(1, step + 1):
            es.append(rec(s, 2000 * s + data.draw(st.integers(0, 99))))
            late = 1999 if r // chunk == mine else 999
            if not (r == culprit and s == step):
                es.append(rec(s, 2000 * s + data.draw(st.integers(100, late)), pg=pg))
        if r // chunk != mine:
            es.append(rec(step + 1, 2000 * step + data.draw(st.integers(1000, 1999))))
        per[r] = es
    v = analyze(read_traces(write(tmp_path_factory.mktemp("run"), per, listed="[]")))
    assert v.kind == "missing" and culprit in v.culprits
    assert set(v.culprits) <= set(range(mine * chunk, (mine + 1) * chunk))
    if step > 1 or chunk == 2:
        assert v.culprits == [culprit]
    if step > 1:
        assert (v.pg, v.seq) == (str(1 + mine), step)
        assert v.waiting_ranks == [r for r in range(mine * chunk, (mine + 1) * chunk) if r != culprit]

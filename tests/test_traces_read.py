"""Reading flight-recorder dumps (slurmdoc.traces.read): plain data only, every size bounded,
every failure one line naming the file."""

from __future__ import annotations

import json
import os
import pickle
import time

import pytest

from slurmdoc.traces import TraceError, TraceLimits, read_traces
from slurmdoc.traces.read import frames_of


def entry(seq, pg=("0", "default_pg"), op="gloo:all_reduce", sizes=((1024,),), frames=True):
    e = {
        "record_id": seq, "pg_id": 0, "process_group": pg, "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
        "profiling_name": op, "time_created_ns": 1_000_000 + seq, "input_sizes": [list(s) for s in sizes],
        "input_dtypes": ["Float"], "output_sizes": [list(s) for s in sizes], "output_dtypes": ["Float"],
        "state": "scheduled", "retired": True, "timeout_ms": 5000, "is_p2p": False,
    }
    if frames:
        e["frames"] = [{"name": "all_reduce", "filename": "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", "line": 3245},
                       {"name": "step", "filename": "/home/u/train.py", "line": 40 + seq}]
    return e


def dump(n_entries=3, ranks="[0, 1]", **kw):
    return {"version": "2.10", "pg_config": {"": {"name": "", "desc": "", "ranks": ranks}}, "comm_lib_version": "",
            "pg_status": {"0": {"last_enqueued_collective": n_entries, "last_started_collective": -1, "last_completed_collective": n_entries}},
            "entries": [entry(s, **kw) for s in range(1, n_entries + 1)]}


def test_pickle_and_json_dumps_read_alike(tmp_path):
    d = dump()
    (tmp_path / "p").mkdir()
    (tmp_path / "j").mkdir()
    for r in (0, 1):
        (tmp_path / "p" / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(d))
        dj = json.loads(json.dumps(d))
        for e in dj["entries"]:
            e.pop("frames")  # JSON dumps carry no frames
        (tmp_path / "j" / f"nccl_trace_rank_{r}").write_text(json.dumps(dj))
    a, b = read_traces(tmp_path / "p"), read_traces(tmp_path / "j")
    assert sorted(a.dumps) == sorted(b.dumps) == [0, 1] and a.files == 2
    ea, eb = a.dumps[1].entries[-1], b.dumps[1].entries[-1]
    assert (ea.pg, ea.desc, ea.seq, ea.op, ea.sizes) == (eb.pg, eb.desc, eb.seq, eb.op, eb.sizes) == ("0", "default_pg", 3, "all_reduce", ((1024,),))
    assert frames_of(ea)[-1] == ("/home/u/train.py", 43, "step") and frames_of(eb) == []
    assert a.dumps[0].groups == {"": [0, 1]}


def test_a_prefix_names_the_files_and_other_names_are_not_dumps(tmp_path):
    for r in (0, 1, 3):
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(dump()))
    (tmp_path / "job.log").write_text("not a dump")
    (tmp_path / "other_7").write_text("a file of another family")
    ts = read_traces(str(tmp_path / "nccl_trace_rank_"))
    assert sorted(ts.dumps) == [0, 1, 3]
    # the directory alone: the largest family of numbered names is the dumps
    assert sorted(read_traces(tmp_path).dumps) == [0, 1, 3]


def test_a_pickle_that_would_call_a_function_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "nccl_trace_rank_0").write_bytes(pickle.dumps({"version": "2.10", "entries": [Evil()]}))
    with pytest.raises(TraceError) as e:
        read_traces(tmp_path / "d")
    msg = str(e.value)
    assert "\n" not in msg and "nccl_trace_rank_0" in msg and "global" in msg
    assert not marker.exists()
    # an object built from a class (no call, just a global reference) is refused the same way
    (tmp_path / "d" / "nccl_trace_rank_0").write_bytes(pickle.dumps({"entries": [], "x": TraceLimits()}))
    with pytest.raises(TraceError, match="global"):
        read_traces(tmp_path / "d")


@pytest.mark.parametrize("payload, why", [
    (b"\x80\x04junk that is no pickle", "not a flight-recorder dump"),
    (pickle.dumps(dump())[:-40], "not a flight-recorder dump"),  # cut short
    (pickle.dumps([1, 2, 3]), "no list of entries"),
    (b"{" + b'"entries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    (b'{"entries": 5}', "no list of entries"),
])
def test_junk_is_one_line_naming_the_file(tmp_path, payload, why):
    f = tmp_path / "nccl_trace_rank_0"
    f.write_bytes(payload)
    with pytest.raises(TraceError) as e:
        read_traces(f)
    assert why in str(e.value) and str(f) in str(e.value) and "\n" not in str(e.value)


def test_a_huge_file_ends_fast_without_being_read(tmp_path):
    f = tmp_path / "nccl_trace_rank_0"
    with open(f, "wb") as fh:
        fh.truncate(300 << 20)  # 300 MiB (sparse)
    t0 = time.perf_counter()
    with pytest.raises(TraceError, match="more than a dump's bound"):
        read_traces(f)
    assert time.perf_counter() - t0 < 1.0


def test_symlinks_fifos_and_missing_paths_are_refused_not_followed(tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(pickle.dumps(dump()))
    d = tmp_path / "d"
    d.mkdir()
    (d / "nccl_trace_rank_0").symlink_to(secret)
    os.mkfifo(d / "nccl_trace_rank_1")
    with pytest.raises(TraceError, match="no flight-recorder dump files"):
        read_traces(d)  # neither the link nor the FIFO is a dump; nothing blocks
    with pytest.raises(TraceError, match="symbolic link"):
        read_traces(d / "nccl_trace_rank_0")
    with pytest.raises(TraceError, match="not a regular file|not a file"):
        read_traces(d / "nccl_trace_rank_1")
    with pytest.raises(TraceError, match="no such file"):
        read_traces(tmp_path / "nowhere" / "nccl_trace_rank_")


def test_entries_beyond_the_bound_keep_the_newest(tmp_path):
    f = tmp_path / "nccl_trace_rank_0"
    f.write_bytes(pickle.dumps(dump(n_entries=50)))
    ts = read_traces(f, limits=TraceLimits(entries=10, frames=1))
    d = ts.dumps[0]
    assert [e.seq for e in d.entries] == list(range(41, 51)) and d.dropped == 40
    assert all(len(frames_of(e, TraceLimits(frames=1))) == 1 for e in d.entries) and ts.warnings


def test_an_unreadable_dump_among_readable_ones_is_skipped_with_a_warning(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    d = tmp_path / "d"
    d.mkdir()
    for r in (0, 3):
        (d / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(dump()))
    (d / "nccl_trace_rank_1").write_bytes(pickle.dumps(dump())[:-40])  # killed while dumping
    (d / "nccl_trace_rank_2").write_bytes(pickle.dumps({"entries": [Evil()]}))
    ts = read_traces(d)
    assert sorted(ts.dumps) == [0, 3] and ts.files == 2 and not marker.exists()
    assert [w for w in ts.warnings if "nccl_trace_rank_1" in w] and [w for w in ts.warnings if "nccl_trace_rank_2" in w]
    assert all("\n" not in w for w in ts.warnings)
    # one file named on its own is still an error, and so is a set none of which can be read
    with pytest.raises(TraceError, match="nccl_trace_rank_1"):
        read_traces(d / "nccl_trace_rank_1")
    for r in (0, 3):
        (d / f"nccl_trace_rank_{r}").write_bytes(b"junk")
    with pytest.raises(TraceError, match="and 3 more") as e:
        read_traces(d)
    assert "\n" not in str(e.value)


def _shared_value_bombs():
    # pickle stores a value once and refers to it again by a 2-byte memo index, so a file of
    # kilobytes can hand the reader one huge or self-nested value under every field of every entry
    nested = 1
    for _ in range(6):
        nested = [nested] * 16  # 16**6 leaves if walked
    ranks = list(range(100_000))
    ranks_text = str(ranks)  # one string, shared
    long_bytes, long_text = b"x" * (4 << 20), "7" * (4 << 20)
    return [
        ("nested sizes", {"input_sizes": nested}, {}),
        ("a dict in sizes", {"input_sizes": [[{"k": nested}]]}, {}),
        ("huge name", {"profiling_name": long_bytes, "input_dtypes": [long_text] * 16}, {}),
        ("huge digits", {"input_sizes": [[long_text] * 16] * 16}, {}),
        ("one ranks list under many groups", {}, {"pg_config": {str(i): {"ranks": ranks} for i in range(10_000)}}),
        ("one ranks string under many groups", {}, {"pg_config": {str(i): {"ranks": ranks_text} for i in range(10_000)}}),
    ]


@pytest.mark.parametrize("what, in_entry, at_top", _shared_value_bombs(), ids=lambda x: x if isinstance(x, str) else "")
def test_a_value_shared_many_times_over_costs_no_more_than_once(tmp_path, what, in_entry, at_top):
    body = dump(n_entries=2000)
    for e in body["entries"]:
        e.update(in_entry)
    body.update(at_top)
    f = tmp_path / "nccl_trace_rank_0"
    data = pickle.dumps(body, protocol=4)  # 4: bytes as bytes (2 would need a global for them)
    assert len(data) < 20 << 20
    f.write_bytes(data)
    t0 = time.perf_counter()
    try:
        ts = read_traces(f)
    except TraceError as e:
        assert "pg_config" in str(e) and "\n" not in str(e)  # refused, in one line
    else:
        assert len(ts.dumps[0].entries) == 2000
    assert time.perf_counter() - t0 < 5.0, what

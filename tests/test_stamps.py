"""Times at the start of a line (ingest/stamps.py): glog and ISO-like forms, a logging
formatter's head, times read once and remembered."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmdoc.ingest.stamps import ISO_TS, LOGGING_HEAD, _logging_head, parse_ts


@pytest.mark.parametrize(
    "text, expected",
    [
        ("E0321 02:07:08.408271 1 x", datetime(2025, 3, 21, 2, 7, 8, 408271)),
        ("[E0321 02:07:08.408271257 ProcessGroupNCCL.cpp:607]", datetime(2025, 3, 21, 2, 7, 8, 408271)),
        # PyTorch's own C++ logger (c10, built without glog) writes the month unpadded
        ("[W902 17:45:03.120044981 socket.cpp:752]", datetime(2025, 9, 2, 17, 45, 3, 120044)),
        ("[E1107 01:02:03.000000001 TCPStore.cpp:99]", datetime(2025, 11, 7, 1, 2, 3)),
        ("2025-03-01T13:10:00 x", datetime(2025, 3, 1, 13, 10)),
        ("2025-03-01 12:00:00,123 INFO", datetime(2025, 3, 1, 12, 0, 0, 123000)),
        ("[2024-02-27T21:35:32.106313Z] x", datetime(2024, 2, 27, 21, 35, 32, 106313)),
        ("[2025-03-01 12:00:00] iteration 100", datetime(2025, 3, 1, 12)),
        ("2025-03-01_12:05:02", datetime(2025, 3, 1, 12, 5, 2)),
        ("2025-03-01T14:10:00+02:00 x", datetime(2025, 3, 1, 12, 10)),
        ("Epoch 3", None),
        ("2025-13-45T99:00:00 broken", None),
    ],
)
def test_timestamps(text, expected):
    assert parse_ts(text, 2025) == expected



def test_timestamp_overflow_is_no_timestamp():
    assert parse_ts("0001-01-01T00:10:00+05:00 x", 2025) is None


# a time as logging formatters and launchers write it, with what may follow it
_TIME_PIECES = st.lists(st.sampled_from(["", ".", ",", "1", "123456789", "1234567890", "Z", "+01:00", "+0100", "-05", ":", "]", "[", " ", " - ", " | ", "-", "|", "x"]), max_size=5)


@given(st.sampled_from(["", "[", "[["]), st.sampled_from(["2025", "1999"]), st.sampled_from("T _"), _TIME_PIECES)
def test_the_logging_head_is_read_off_the_time_as_the_regex_reads_it(bracket, year, sep, rest):
    text = f"{bracket}{year}-12-31{sep}12:00:00{''.join(rest)}"
    m = LOGGING_HEAD.match(text)
    iso = ISO_TS.match(text)
    got = _logging_head(text, iso.end()) if iso is not None else 0
    assert got == (m.end() if m is not None else 0)


def test_a_time_read_once_is_read_the_same_again():
    # times are remembered by their text; a glog time by its text and the year it is given
    for text in ("2025-13-45T99:00:00 broken", "0001-01-01T00:10:00+05:00 x", "2025-03-01 12:00:00,123 INFO", "E0229 01:00:00 x"):
        assert parse_ts(text, 2025) == parse_ts(text, 2025)
    assert parse_ts("E0229 01:00:00 x", 2025) is None and parse_ts("E0229 01:00:00 x", 2024) == datetime(2024, 2, 29, 1)
    assert parse_ts("I0301 02:00:00 x", 2024) != parse_ts("I0301 02:00:00 x", 2025)

"""Year-less glog times (`E0321 02:07:08.408271`) dated per printer: a month going backwards on
one printer is a new year, the first time of a printer is placed by the nearest full timestamp
or else not after the file's last change, and the process's time zone changes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from slurmdoc.ingest.prefix import PrefixParser
from slurmdoc.models import SourceInfo

ROOT = Path(__file__).resolve().parent.parent
SRC = SourceInfo(index=0, path="job.log")
UNTIL = datetime(2027, 1, 1, 0, 5)  # the log's last change, UTC


def dated(parser, line):
    return parser.parse(SRC, 1, line).ts


def test_a_month_going_back_on_one_printer_is_a_new_year_for_that_printer_only():
    p = PrefixParser(2027, until=UNTIL)
    assert dated(p, "[rank0]:I1231 23:59:58.000000 1 train.py:1] step 99") == datetime(2026, 12, 31, 23, 59, 58)
    assert dated(p, "[rank0]:E0101 00:00:03.000000 1 train.py:2] failed") == datetime(2027, 1, 1, 0, 0, 3)
    # another printer's December line, read after rank 0's January one, is still December 2026
    assert dated(p, "[rank1]:I1231 23:59:59.000000 2 train.py:1] step 99") == datetime(2026, 12, 31, 23, 59, 59)
    assert dated(p, "[rank0]:E0101 00:00:04.000000 1 train.py:3] again") == datetime(2027, 1, 1, 0, 0, 4)


@pytest.mark.parametrize("line, want", [
    ("E1231 23:59:58.1 1 x.cc:1] a", datetime(2026, 12, 31, 23, 59, 58, 100000)),  # not after the file's change
    ("E0101 00:04:00.0 1 x.cc:1] a", datetime(2027, 1, 1, 0, 4)),
    ("E0101 12:00:00.0 1 x.cc:1] a", datetime(2027, 1, 1, 12)),  # a printer ahead of UTC: within a day
    ("E0601 12:00:00.0 1 x.cc:1] a", datetime(2026, 6, 1, 12)),
])
def test_a_printers_first_glog_time_is_not_after_the_files_last_change(line, want):
    assert dated(PrefixParser(2027, until=UNTIL), line) == want


@pytest.mark.parametrize("iso, glog, want", [
    ("2026-01-01 00:00:01", "E1231 23:59:59.0 1 x.cc:1] late", datetime(2025, 12, 31, 23, 59, 59)),
    ("2025-12-31 23:59:50", "E0101 00:00:02.0 1 x.cc:1] after", datetime(2026, 1, 1, 0, 0, 2)),
    ("2026-07-14 08:00:00", "E0714 08:00:05.0 1 x.cc:1] same", datetime(2026, 7, 14, 8, 0, 5)),
])
def test_a_glog_time_takes_the_year_nearest_the_latest_full_timestamp(iso, glog, want):
    p = PrefixParser(2030, until=datetime(2030, 1, 1))
    dated(p, f"[rank2]:{iso},000 INFO train: step 1")
    assert dated(p, f"[rank2]:{glog}") == want
    p = PrefixParser(2030, until=datetime(2030, 1, 1))
    dated(p, f"[rank0]:{iso},000 INFO train: step 1")  # another printer's: the nearest there is
    assert dated(p, f"[rank5]:{glog}") == want


NEW_YEAR = "".join([
    "[rank0]:I1231 23:59:50.000000 11 train.py:10] iteration 99\n",
    "[rank3]:I1231 23:59:51.000000 22 train.py:10] iteration 99\n",
    "[rank3]:E1231 23:59:58.000000 22 train.py:40] step failed\n",
    "[rank3]: Traceback (most recent call last):\n",
    '[rank3]:   File "train.py", line 40, in <module>\n',
    "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.\n",
    "[rank0]:E0101 00:00:10.000000 11 train.py:40] step failed\n",
    "[rank0]: Traceback (most recent call last):\n",
    '[rank0]:   File "train.py", line 41, in <module>\n',
    "[rank0]: ValueError: the batch came back empty\n",
])


@pytest.mark.parametrize("tz", ["UTC", "Asia/Tokyo", "America/Los_Angeles", "Pacific/Kiritimati", "Etc/GMT+12"])
def test_a_job_across_new_year_is_ordered_and_dated_whatever_the_time_zone(tmp_path, tz):
    # the failure on 31 December leads, not the one on 1 January that sorted first when every
    # glog time had one year; and that year came from the file time in the local zone
    log = tmp_path / "job.log"
    log.write_text(NEW_YEAR)
    t = datetime(2027, 1, 1, 3, 0, tzinfo=timezone.utc).timestamp()  # still 2026 west of UTC-3
    os.utime(log, (t, t))
    env = {k: v for k, v in os.environ.items() if k not in ("SLURMDOC_DEBUG", "SLURMDOC_RULES", "SLURMDOC_CONFIG")}
    env.update(TZ=tz, XDG_CONFIG_HOME=str(ROOT / "tests" / "data" / "no-config-here"))
    r = subprocess.run([sys.executable, "-m", "slurmdoc", "diagnose", "-f", "json", str(log)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1, r.stderr
    root = json.loads(r.stdout)["root_cause"]
    assert (root["category"], root["rank"], root["timestamp"]) == ("cuda_oom", 3, "2026-12-31T23:59:58"), root


def test_a_look_ahead_for_glued_records_dates_nothing():
    p = PrefixParser(2027, until=UNTIL)
    p.split_glued("[rank0]:E0601 00:00:01.0 1 x.cc:1] 50%|#####| Traceback (most recent call last):")
    # had the look-ahead dated rank 0's June line, its December line would be taken for the next year
    assert dated(p, "[rank0]:E1231 23:00:00.0 1 x.cc:1] a") == datetime(2026, 12, 31, 23)

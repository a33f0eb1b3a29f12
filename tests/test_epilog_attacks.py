"""The epilogue as a hostile job's user would attack it (issue 10). Slurm runs it as root on
paths the user chooses; these tests run it as root the same way, with the job owned by an
unprivileged uid (`nobody`, or a uid with no passwd entry) who plants things first, acting as
that uid in a forked helper.

Tests that need root skip when not root, except under SLURMDOC_REQUIRE_SLURM=1 (CI runs as
root), where that is a failure; the same goes for strace.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import pytest

from slurmdoc.slurm import epilog as ep
from slurmdoc.slurm import locate, privsep

DATA = Path(__file__).parent / "data" / "sacct"
REQUIRE = os.environ.get("SLURMDOC_REQUIRE_SLURM") == "1"
ROOT = os.geteuid() == 0
JOB = "987002"
NOBODY = 65534
SECRET = "ROOTSECRET-7f3a"
SLURMDOC = str(Path(sys.executable).parent / "slurmdoc")


def need_root() -> None:
    if not ROOT:
        if REQUIRE:
            pytest.fail("these tests must run as root in CI (SLURMDOC_REQUIRE_SLURM=1)")
        pytest.skip("needs root: the epilogue drops to the job's user only when it is root")


root_only = pytest.mark.usefixtures("_need_root")


@pytest.fixture
def _need_root():
    need_root()


def as_user(uid: int, gid: int, fn) -> None:
    """Run fn in a forked child that has become uid/gid (the attacker)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            fn()
            code = 0
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the attacker's step failed"


@pytest.fixture
def arena():
    """/tmp/X (root, 0755): job/ (the attacker's, 0755), secret/ (root, 0700) with a log-shaped
    root-only file, victim (root, 0644), ledger/ (root, 0755)."""
    base = Path(tempfile.mkdtemp(prefix="sd-attack-"))
    os.chmod(base, 0o755)
    job = base / "job"
    job.mkdir()
    shutil.copy(DATA / "killonbad.8.out", job / f"slurm-{JOB}.out")
    secret = base / "secret"
    secret.mkdir(mode=0o700)
    os.chmod(secret, 0o700)
    (secret / "root.log").write_text(
        f"0: Traceback (most recent call last):\n0:   File \"{SECRET}.py\", line 1, in <module>\n"
        f"0: RuntimeError: {SECRET} password=hunter2\n")
    os.chmod(secret / "root.log", 0o600)
    (base / "victim").write_text("keep me\n")
    os.chmod(base / "victim", 0o644)
    (base / "ledger").mkdir()
    if ROOT:
        for p in [job, *job.iterdir()]:
            os.chown(p, NOBODY, NOBODY)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def epilog(arena: Path, extra_env=None, args=(), uid=NOBODY, gid=NOBODY, cwd=None, timeout=60, preexec=None,
           wrap=()):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_JOB_ID": JOB, "SLURM_JOB_UID": str(uid),
           "SLURM_JOB_GID": str(gid), "SLURM_SCRIPT_CONTEXT": "epilog_slurmd", "SLURM_JOB_EXIT_CODE2": "1:0",
           "SLURM_JOB_STDOUT": str(arena / "job" / "slurm-%j.out"), "SLURM_JOB_WORK_DIR": str(arena / "job")}
    env.update(extra_env or {})
    t0 = time.monotonic()
    p = subprocess.run([*wrap, SLURMDOC, "epilog", "--no-sacct", "--ledger", str(arena / "ledger" / "l.jsonl"),
                        *args], capture_output=True, env=env, cwd=cwd or "/", timeout=timeout, preexec_fn=preexec)
    return p, time.monotonic() - t0


def everything_written(arena: Path) -> bytes:
    out = b""
    for d, _, files in os.walk(arena):
        if Path(d) == arena / "secret":
            continue
        for f in files:
            p = Path(d) / f
            if p.is_file() and not p.is_symlink():
                out += p.read_bytes()
    return out


def ok_exit(p) -> None:
    assert p.returncode == 0
    assert p.stderr.count(b"\n") <= 1 and b"Traceback" not in p.stderr, p.stderr


# ---- privilege separation


@root_only
@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_reports_belong_to_the_job_user_and_are_no_more_readable_than_the_log(arena, mode):
    os.chmod(arena / "job" / f"slurm-{JOB}.out", mode)
    p, _ = epilog(arena)
    ok_exit(p)
    for suffix in ("json", "txt"):
        st = os.lstat(arena / "job" / f"slurm-{JOB}.slurmdoc.{suffix}")
        assert stat.S_ISREG(st.st_mode) and (st.st_uid, st.st_gid) == (NOBODY, NOBODY)
        assert stat.S_IMODE(st.st_mode) == mode
    line = json.loads((arena / "ledger" / "l.jsonl").read_text())
    assert line["category"] == "import_error"
    assert os.stat(arena / "ledger" / "l.jsonl").st_uid == 0  # the ledger stays root's


@root_only
def test_uid_without_a_passwd_entry(arena):
    uid = 54321
    for p in [arena / "job", *(arena / "job").iterdir()]:
        os.chown(p, uid, uid)
    p, _ = epilog(arena, uid=uid, gid=uid)
    ok_exit(p)
    assert os.stat(arena / "job" / f"slurm-{JOB}.slurmdoc.json").st_uid == uid


@root_only
def test_dropped_worker_cannot_regain_root():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            privsep.drop_privileges(privsep.Creds(NOBODY, NOBODY))
            try:
                os.setuid(0)
                got = "regained"
            except PermissionError:
                got = f"{os.getresuid()} {os.getresgid()} {sorted(os.getgroups())}"
        except BaseException as e:  # noqa: BLE001
            got = f"error {e}"
        os.write(w, got.encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    got = os.read(r, 4096).decode()
    os.close(r)
    assert got.startswith(f"({NOBODY}, {NOBODY}, {NOBODY}) ({NOBODY}, {NOBODY}, {NOBODY})"), got
    assert "[0]" not in got and ", 0," not in got.split(")")[-1]


@root_only
def test_no_create_then_chown_window(arena):
    """The race (swap the report's temporary name for a symlink between create and chown) needs
    a window in which root holds a path in the user's tree. Traced: no chown of any kind, and
    every system call that names a path in the job's directory, or creates or renames a file, is
    made by a process that has already become the job's user."""
    if shutil.which("strace") is None:
        if REQUIRE:
            pytest.fail("strace is missing (.ci/run installs it)")
        pytest.skip("no strace")
    trace = arena / "trace"
    p, _ = epilog(arena, wrap=("strace", "-f", "-qq", "-s", "512", "-o", str(trace), "-e",
                               "trace=chown,fchown,lchown,fchownat,setresuid,openat,open,creat,rename,renameat,"
                               "renameat2,unlink,unlinkat,link,linkat,symlink,symlinkat,mkdir,mkdirat,"
                               "clone,clone3,fork,vfork"), timeout=120)
    ok_exit(p)
    assert (arena / "job" / f"slurm-{JOB}.slurmdoc.txt").exists()
    dropped: set[int] = set()
    parent_of: dict[int, int] = {}
    user_tree = str(arena / "job")
    checked = 0
    for line in trace.read_text(errors="replace").splitlines():
        pid_s, _, call = line.partition(" ")
        if not pid_s.isdigit():
            continue
        pid = int(pid_s)
        call = call.strip()
        name = call.split("(", 1)[0].lstrip("<.").strip()
        if name.startswith(("clone", "fork", "vfork")) or "clone resumed" in call or "fork resumed" in call:
            ret = call.rsplit("=", 1)[-1].strip().split(" ")[0]
            if ret.isdigit():
                parent_of[int(ret)] = pid
                if pid in dropped:
                    dropped.add(int(ret))
            continue
        assert "chown" not in name, line
        if name == "setresuid" and call.startswith(f"setresuid({NOBODY}, {NOBODY}, {NOBODY})") and call.endswith("= 0"):
            dropped.add(pid)
            continue
        creates = ("O_CREAT" in call) or name.startswith(("rename", "link", "symlink", "mkdir", "unlink", "creat"))
        if user_tree in call or (creates and ("slurmdoc.json" in call or "slurmdoc.txt" in call)):
            checked += 1
            assert pid in dropped, f"root touched the user's tree: {line}"
            if "O_CREAT" in call:
                assert "O_EXCL" in call and "O_NOFOLLOW" in call, line
    assert checked >= 4  # the log found and read, two reports created and renamed


@root_only
@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
def test_planted_file_at_every_report_path_is_not_followed(arena, kind):
    victim = arena / "victim"
    before = (victim.read_bytes(), os.stat(victim).st_mode, os.stat(victim).st_uid)
    targets = [arena / "job" / f"slurm-{JOB}.slurmdoc.{s}" for s in ("json", "txt")]

    def plant():
        for t in targets:
            if kind == "symlink":
                os.symlink(victim, t)
            elif kind == "fifo":
                os.mkfifo(t)
            else:
                os.link(victim, t)

    if kind == "hardlink":
        try:
            as_user(NOBODY, NOBODY, plant)
        except AssertionError:  # fs.protected_hardlinks=1: the link exists anyway (root made it)
            plant()
    else:
        as_user(NOBODY, NOBODY, plant)
    p, took = epilog(arena)
    ok_exit(p)
    assert took < 30
    assert (victim.read_bytes(), os.stat(victim).st_mode, os.stat(victim).st_uid) == before
    for t in targets:
        st = os.lstat(t)
        assert stat.S_ISREG(st.st_mode) and st.st_uid == NOBODY and st.st_ino != os.stat(victim).st_ino
    assert json.loads(targets[0].read_text())["job"]["category"] == "import_error"
    assert not [f for f in os.listdir(arena / "job") if f.endswith(".tmp")]


@root_only
@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_planted_file_at_the_html_report_path_is_not_followed(arena, kind):
    """--html writes a third file the same way: as the job's user, through a fresh temporary
    name renamed over whatever was planted at <log>.slurmdoc.html."""
    victim = arena / "victim"
    before = (victim.read_bytes(), os.stat(victim).st_mode, os.stat(victim).st_uid)
    target = arena / "job" / f"slurm-{JOB}.slurmdoc.html"
    as_user(NOBODY, NOBODY, lambda: os.symlink(victim, target) if kind == "symlink" else os.mkfifo(target))
    p, took = epilog(arena, args=("--html",))
    ok_exit(p)
    assert took < 30
    assert (victim.read_bytes(), os.stat(victim).st_mode, os.stat(victim).st_uid) == before
    st = os.lstat(target)
    assert stat.S_ISREG(st.st_mode) and (st.st_uid, st.st_gid) == (NOBODY, NOBODY)
    assert stat.S_IMODE(st.st_mode) == stat.S_IMODE(os.stat(arena / "job" / f"slurm-{JOB}.out").st_mode)
    assert b"import_error" in target.read_bytes()
    assert not [f for f in os.listdir(arena / "job") if f.endswith(".tmp")]


@root_only
def test_oversize_html_report_is_not_written(arena, monkeypatch):
    """The page is bounded: one that would pass the cap is left out (never cut into broken
    markup), said in one problem line; the text and JSON reports are still written."""
    monkeypatch.setattr(ep, "HTML_MAX", 2000)  # the root side sends its cap to the worker
    env = {"SLURM_JOB_ID": JOB, "SLURM_JOB_UID": str(NOBODY), "SLURM_JOB_GID": str(NOBODY),
           "SLURM_SCRIPT_CONTEXT": "epilog_slurmd", "SLURM_JOB_EXIT_CODE2": "1:0",
           "SLURM_JOB_STDOUT": str(arena / "job" / "slurm-%j.out"), "SLURM_JOB_WORK_DIR": str(arena / "job")}
    res = ep.run_epilog(ep.EpilogOptions(html=True, sacct=False, budget=60), env)
    assert any("HTML report would be" in p and "over the cap of 2000" in p for p in res.problems), res.problems
    assert not (arena / "job" / f"slurm-{JOB}.slurmdoc.html").exists()
    for suffix in ("json", "txt"):
        assert os.lstat(arena / "job" / f"slurm-{JOB}.slurmdoc.{suffix}").st_uid == NOBODY
    assert not [f for f in os.listdir(arena / "job") if f.endswith(".tmp")]


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
def test_planted_file_at_the_ledger_is_refused(arena, kind):
    """The ledger sits in the admin's directory; still, what is found at its path is not followed."""
    ledger = arena / "ledger" / "l.jsonl"
    victim = arena / "victim"
    if kind == "symlink":
        os.symlink(victim, ledger)
    elif kind == "fifo":
        os.mkfifo(ledger)
    else:
        os.link(victim, ledger)
    p, took = epilog(arena, extra_env={"SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid())})
    ok_exit(p)
    assert took < 30 and b"cannot append to the ledger" in p.stderr
    assert victim.read_text() == "keep me\n"


@root_only
@pytest.mark.parametrize("where", ["root-only-dir", "root-only-file"])
def test_log_symlink_to_root_only_file_leaks_nothing(arena, where):
    target = arena / "secret" / "root.log"
    if where == "root-only-file":  # readable directory, 0600 file
        target = arena / "root.log"
        shutil.copy(arena / "secret" / "root.log", target)
        os.chmod(target, 0o600)
    log = arena / "job" / f"slurm-{JOB}.out"
    log.unlink()
    as_user(NOBODY, NOBODY, lambda: os.symlink(target, log))
    p, _ = epilog(arena)
    ok_exit(p)
    assert SECRET.encode() not in p.stdout + p.stderr
    written = everything_written(arena).replace((arena / "root.log").read_bytes() if target.parent == arena else b"", b"")
    assert SECRET.encode() not in written and b"hunter2" not in written
    rep = json.loads((arena / "job" / f"slurm-{JOB}.slurmdoc.json").read_text())
    assert rep["job"]["status"] == "failed" and rep["job"]["log_note"] and rep["lines_read"] == 0


@root_only
def test_directory_symlink_into_a_root_only_directory(arena):
    rootdir = arena / "rootdir"
    rootdir.mkdir(mode=0o755)
    shutil.copy(DATA / "killonbad.8.out", rootdir / f"slurm-{JOB}.out")  # readable, in root's directory
    os.chmod(rootdir / f"slurm-{JOB}.out", 0o644)
    as_user(NOBODY, NOBODY, lambda: os.symlink(rootdir, arena / "job" / "out"))
    p, _ = epilog(arena, {"SLURM_JOB_STDOUT": str(arena / "job" / "out" / "slurm-%j.out")})
    ok_exit(p)
    assert sorted(os.listdir(rootdir)) == [f"slurm-{JOB}.out"]
    assert b"cannot write the report" in p.stderr and b"Permission denied" in p.stderr
    assert json.loads((arena / "ledger" / "l.jsonl").read_text())["category"] == "import_error"


def test_planted_package_in_the_working_directory_is_not_imported(arena):
    """Run from the job's directory (slurmd's Epilog does not, an sbatch line does): a planted
    `slurmdoc/` package there never runs, in the epilogue or in its worker."""
    pkg = arena / "job" / "slurmdoc"
    pkg.mkdir()
    marker = arena / "pwned"
    (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (pkg / "__main__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    os.chmod(arena, 0o777)
    env = {"SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid())} if not ROOT else {}
    if ROOT:
        for p in [pkg, *pkg.iterdir()]:
            os.chown(p, NOBODY, NOBODY)
    p, _ = epilog(arena, env, cwd=str(arena / "job"))
    ok_exit(p)
    assert not marker.exists()
    assert (arena / "job" / f"slurm-{JOB}.slurmdoc.json").exists()


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                fields = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_killed_supervisor_takes_the_worker_with_it(arena):
    """kill -9 of the epilogue (timeout -k, slurmd's cleanup) ends its worker and the worker's
    diagnosis at once; the worker stays in the epilogue's process group."""
    log = arena / "job" / f"slurm-{JOB}.out"
    with open(log, "w") as fh:
        for i in range(150_000):
            r = i % 64
            fh.write(f"{r}: Traceback (most recent call last):\n{r}:   File \"t.py\", line {i}, in <module>\n"
                     f"{r}: ValueError: noise {i}\n")
    if ROOT:
        os.chown(log, NOBODY, NOBODY)
    env = {"PATH": os.environ.get("PATH", ""), "SLURM_JOB_ID": JOB, "SLURM_JOB_UID": str(NOBODY if ROOT else os.getuid()),
           "SLURM_JOB_GID": str(NOBODY if ROOT else os.getgid()), "SLURM_SCRIPT_CONTEXT": "epilog_slurmd",
           "SLURM_JOB_EXIT_CODE2": "1:0", "SLURM_JOB_STDOUT": str(log)}
    sup = subprocess.Popen([SLURMDOC, "epilog", "--no-sacct", "--budget", "120"], env=env, cwd="/",
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        worker = None
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30 and worker is None:
            for c in _children(sup.pid):
                if b"slurmdoc.slurm.privsep" in Path(f"/proc/{c}/cmdline").read_bytes() and _children(c):
                    worker = c
            time.sleep(0.1)
        assert worker is not None, "no worker with a running diagnosis seen"
        grand = _children(worker)
        assert os.getpgid(worker) == os.getpgid(sup.pid) == sup.pid
        cmd = Path(f"/proc/{worker}/cmdline").read_bytes().split(b"\0")
        assert cmd[1] == b"-I" and os.readlink(f"/proc/{worker}/cwd") == "/"
        limits = Path(f"/proc/{worker}/limits").read_text()
        assert any(x.startswith("Max address space") and str(privsep.WORKER_AS_MAX) in x for x in limits.splitlines())
        assert any(x.startswith("Max file size") and str(privsep.WORKER_FSIZE_MAX) in x for x in limits.splitlines())
        if ROOT:  # it has become the job's owner, and so has its diagnosis
            for pid in [worker, *grand]:
                uids = [x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("Uid:")]
                assert uids[0].split()[1:] == [str(NOBODY)] * 4
        os.kill(sup.pid, signal.SIGKILL)
        sup.wait()
        t1 = time.monotonic()
        while (_alive(worker) or any(_alive(g) for g in grand)) and time.monotonic() - t1 < 3:
            time.sleep(0.05)
        assert not _alive(worker) and not any(_alive(g) for g in grand)
    finally:
        try:
            os.killpg(sup.pid, signal.SIGKILL)
        except OSError:
            pass
        sup.wait()


# ---- bounds


@pytest.mark.parametrize("width", ["11", "99999999", "999999999", "0" * 50 + "7", "9" * 100_000])
def test_padding_is_capped_like_slurm(width):
    ctx = locate.JobContext(job_id="42")
    t0 = time.monotonic()
    got, exact = locate.expand(f"/x/slurm-%{width}j.out", ctx)
    assert time.monotonic() - t0 < 1 and exact
    w = 7 if width.endswith("7") else 10
    assert got == f"/x/slurm-{'42'.zfill(w)}.out"


def test_huge_padding_finds_the_ten_digit_log_quickly(arena):
    log = arena / "job" / f"slurm-{JOB.zfill(10)}.out"
    (arena / "job" / f"slurm-{JOB}.out").rename(log)
    env = {} if ROOT else {"SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid())}
    for width in ("99999999", "999999999"):
        p, took = epilog(arena, dict(env, SLURM_JOB_STDOUT=str(arena / "job" / f"slurm-%{width}j.out")))
        ok_exit(p)
        assert took < 20
        rep = json.loads((arena / "job" / f"slurm-{JOB.zfill(10)}.slurmdoc.json").read_text())
        assert rep["job"]["category"] == "import_error"


def test_latin1_bytes_in_the_directory_name(arena):
    d = os.path.join(os.fsencode(arena / "job"), b"caf\xe9")
    os.mkdir(d)
    shutil.copy(DATA / "killonbad.8.out", os.path.join(d, f"slurm-{JOB}.out".encode()))
    if ROOT:
        os.chown(d, NOBODY, NOBODY)
        os.chown(os.path.join(d, f"slurm-{JOB}.out".encode()), NOBODY, NOBODY)
    env = {} if ROOT else {"SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid())}
    env["SLURM_JOB_STDOUT"] = os.fsdecode(os.path.join(d, b"slurm-%j.out"))
    p, _ = epilog(arena, env)
    ok_exit(p)
    rep = os.path.join(d, f"slurm-{JOB}.slurmdoc.json".encode())
    doc = json.loads(Path(os.fsdecode(rep)).read_bytes().decode("utf-8"))  # valid UTF-8 JSON
    assert doc["job"]["category"] == "import_error" and "caf\\xe9" in doc["job"]["logs"][0]
    assert Path(os.fsdecode(os.path.join(d, f"slurm-{JOB}.slurmdoc.txt".encode()))).read_bytes().decode("utf-8")
    line = json.loads((arena / "ledger" / "l.jsonl").read_bytes().decode("utf-8"))
    assert line["log"].endswith(f"caf\\xe9/slurm-{JOB}.out") and line["report"].endswith(".slurmdoc.txt")


def _valid_lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_bytes().decode("utf-8").split("\n") if x]


def test_full_ledger_is_left_as_it_was_file_size_limit(arena):
    """RLIMIT_FSIZE: the write stops short in the middle of the line; the line is taken back."""
    ledger = arena / "ledger" / "l.jsonl"
    ledger.write_text('{"kind": "epilog", "job_id": "1"}\n' * 3)
    before = ledger.read_bytes()
    env = {"SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid())}
    limit = len(before) + 40

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    p, _ = epilog(arena, env, args=("--out-dir", str(arena / "ledger")), preexec=small_files)
    ok_exit(p)
    assert b"cannot append to the ledger" in p.stderr
    assert ledger.read_bytes() == before
    p, _ = epilog(arena, env)  # space again: the next line is whole, on its own line
    ok_exit(p)
    lines = _valid_lines(ledger)
    assert len(lines) == 4 and lines[-1]["job_id"] == JOB


@root_only
def test_full_ledger_is_left_as_it_was_full_filesystem(arena):
    mnt = arena / "ledger"
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32k", "tmpfs", str(mnt)], capture_output=True).returncode:
        if REQUIRE:
            pytest.fail("cannot mount a tmpfs as root")
        pytest.skip("cannot mount a tmpfs here")
    try:
        ledger = mnt / "l.jsonl"
        # 4000 bytes: the new line needs a page the full file system does not have
        ledger.write_text('{"kind": "epilog", "job_id": "1", "pad": "' + "p" * 3955 + '"}\n')
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"x" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        before = ledger.read_bytes()
        assert len(before) == 4000
        p, _ = epilog(arena)
        ok_exit(p)
        assert b"cannot append to the ledger" in p.stderr and ledger.read_bytes() == before
        os.unlink(mnt / "filler")
        p, _ = epilog(arena)
        ok_exit(p)
        assert [x["job_id"] for x in _valid_lines(ledger)] == ["1", JOB]
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_unterminated_ledger_line_is_not_glued_to(arena):
    ledger = arena / "ledger" / "l.jsonl"
    ledger.write_bytes(b'{"kind": "epilog", "job_id": "1"}\n{"kind": "epi')  # an older writer's half line
    env = {"SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid())}
    p, _ = epilog(arena, env)
    ok_exit(p)
    lines = ledger.read_text().split("\n")
    assert lines[1] == '{"kind": "epi' and json.loads(lines[2])["job_id"] == JOB


def test_500kb_names_give_bounded_records(arena):
    """A node name and a message of 500 KB in the log, 120 KB names in the environment: every
    record stays small."""
    from http.server import BaseHTTPRequestHandler, HTTPServer
    import threading

    node = "n" * 500_000
    log = arena / "job" / f"slurm-{JOB}.out"
    log.write_text(f"srun: error: {node}: task 1: Exited with exit code 1\n"
                   f"1: Traceback (most recent call last):\n1:   File \"t.py\", line 3, in <module>\n"
                   f"1: RuntimeError: {'m' * 500_000}\n")
    if ROOT:
        os.chown(log, NOBODY, NOBODY)
    got = []

    class H(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            got.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.handle_request, daemon=True).start()
    env = {} if ROOT else {"SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid())}
    # (an environment string is at most 128 KiB on Linux)
    env.update(SLURM_JOB_NAME="x" * 120_000, SLURMD_NODENAME="n" * 120_000, SLURM_JOB_USER="u" * 120_000)
    try:
        p, _ = epilog(arena, env, args=("--webhook", f"http://127.0.0.1:{srv.server_port}/"))
    finally:
        srv.server_close()
    ok_exit(p)
    assert len(p.stdout) < 4096 and len(p.stderr) < 4096
    line = (arena / "ledger" / "l.jsonl").read_bytes()
    assert len(line) < 8192 and json.loads(line)["status"] == "failed"
    assert got and len(got[0]) < 8192
    for suffix in ("json", "txt"):
        rep = (arena / "job" / f"slurm-{JOB}.slurmdoc.{suffix}").read_text()
        assert len(rep) < 200_000
    doc = json.loads((arena / "job" / f"slurm-{JOB}.slurmdoc.json").read_text())
    assert all(len(s) <= ep.REPORT_STR_MAX for s in _strings(doc))


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def test_comment_is_one_short_printable_line():
    text = "slurmdoc: x: " + ("a\nb\x1b[31m\t" * 100_000)
    got = ep._one_line(text, ep.COMMENT_MAX)
    assert len(got) <= ep.COMMENT_MAX and got.isprintable()


@pytest.mark.parametrize("doc", [None, [], "x", {"verdict": "x"}, {"verdict": {"job_id": 1}},
                                 {"verdict": {"job_id": "1", "status": "failed", "category": None, "verdict": "v",
                                              "evil": 1}}])
def test_nonsense_from_the_worker_is_refused(doc):
    assert ep._answer(doc) is None


def test_worker_answer_fields_are_capped():
    doc = {"verdict": {"job_id": "1", "status": "failed", "category": None, "verdict": "v"},
           "wrote": ["/p" * 100_000] * 100, "problems": ["q" * 100_000] * 100, "partial": "yes", "skipped": 3,
           "log": "l" * 100_000}
    a = ep._answer(doc)
    assert len(a["wrote"]) <= 4 and all(len(w) <= ep.PATH_MAX for w in a["wrote"])
    assert len(a["problems"]) <= 16 and all(len(w) <= ep.VERDICT_MAX for w in a["problems"])
    assert a["partial"] is False and a["skipped"] is None and len(a["log"]) <= ep.PATH_MAX


def test_oversized_worker_answer_is_cut_off():
    p = subprocess.Popen([sys.executable, "-I", "-c", "import sys; sys.stdin.read(); sys.stdout.write('x' * (5 << 20))"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, _, why = privsep._exchange(p, b"{}", 20)
    finally:
        p.kill()
        p.wait()
    assert why and "cap" in why and len(out) <= privsep.RESULT_MAX + (1 << 16)


@pytest.mark.parametrize("env", [
    {"SLURM_JOB_UID": "abc"}, {"SLURM_JOB_UID": "-1"}, {"SLURM_JOB_UID": "99999999999999999999"},
    {"SLURM_JOB_ID": "1;rm -rf /"}, {"SLURM_JOB_ID": "9" * 100_000},
    {"SLURM_JOB_STDOUT": "/" + "%n" * 50_000}, {"SLURM_JOB_STDOUT": "/" + "a/" * 3000},
    {"SLURM_JOB_EXIT_CODE2": "x:y", "SLURM_JOB_EXIT_CODE": "-5"},
])
def test_bad_environment_never_fails_the_epilog(arena, env):
    p, took = epilog(arena, env)
    ok_exit(p)
    assert took < 30


# ---- the flight-recorder dumps (--traces): read by the worker as the job's user, bounded,
# and a bad one never costs the log's diagnosis


def _report(arena: Path) -> dict:
    return json.loads((arena / "job" / f"slurm-{JOB}.slurmdoc.json").read_text())


@root_only
def test_traces_symlink_into_a_root_only_directory_leaks_nothing(arena):
    (arena / "secret" / "rank_0").write_bytes(f"{SECRET} password=hunter2".encode())
    os.chmod(arena / "secret" / "rank_0", 0o600)
    as_user(NOBODY, NOBODY, lambda: os.symlink(arena / "secret", arena / "job" / "fr"))
    p, _ = epilog(arena, args=("--traces", "fr/"))
    ok_exit(p)
    assert b"flight-recorder dumps were not read" in p.stderr
    assert SECRET.encode() not in p.stdout + p.stderr and SECRET.encode() not in everything_written(arena)
    rep = _report(arena)
    assert rep["job"]["category"] == "import_error" and rep["flight_recorder"] is None  # the log, diagnosed without them


@root_only
def test_traces_file_symlink_to_a_root_only_file_leaks_nothing(arena):
    target = arena / "root-dump"
    target.write_bytes(f"{SECRET} password=hunter2".encode())
    os.chmod(target, 0o600)

    def plant():
        (arena / "job" / "fr").mkdir()
        os.symlink(target, arena / "job" / "fr" / "rank_0")

    as_user(NOBODY, NOBODY, plant)
    p, _ = epilog(arena, args=("--traces", f"{arena}/job/fr/"))
    ok_exit(p)
    assert SECRET.encode() not in p.stdout + p.stderr and SECRET.encode() not in everything_written(arena).replace(target.read_bytes(), b"")
    assert _report(arena)["job"]["category"] == "import_error"


@root_only
def test_traces_fifo_does_not_hang_the_epilog(arena):
    def plant():
        (arena / "job" / "fr").mkdir()
        os.mkfifo(arena / "job" / "fr" / "rank_0")
        os.mkfifo(arena / "job" / "fr" / "verdict.json")

    as_user(NOBODY, NOBODY, plant)
    p, took = epilog(arena, args=("--traces", "fr/", "--budget", "20"))
    ok_exit(p)
    assert took < 15, f"a FIFO held the epilogue {took:.1f} s"
    assert _report(arena)["job"]["category"] == "import_error"


@root_only
def test_traces_huge_dump_ends_fast_and_the_log_is_still_diagnosed(arena):
    def plant():
        d = arena / "job" / "fr"
        d.mkdir()
        with open(d / "rank_0", "wb") as fh:  # 300 MiB, sparse: junk all the same
            fh.truncate(300 << 20)
            fh.seek(0)
            fh.write(b"\x80\x04junk")

    as_user(NOBODY, NOBODY, plant)
    p, took = epilog(arena, args=("--traces", "fr/", "--budget", "20"))
    ok_exit(p)
    assert took < 15
    assert b"flight-recorder dumps were not read" in p.stderr
    assert _report(arena)["job"]["category"] == "import_error"


def test_traces_pattern_with_a_per_task_field_is_not_guessed():
    ctx = locate.JobContext(job_id=JOB, user="u", work_dir="/w")
    assert ep.traces_path("fr-%j/", ctx) == ("/w/fr-987002/", None)
    assert ep.traces_path("/scratch/%u/fr_", ctx) == ("/scratch/u/fr_", None)
    path, problem = ep.traces_path("fr-%t/", ctx)
    assert path is None and "more than one path" in problem


# ---- what reaches an admin's terminal: stdout, stderr and the ledger hold no control characters


HOSTILE_NAME = "d\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\u009b31m\r\nslurmdoc: epilog: job 1: forged\u2028{\"x\":1}\u202e\x7f"


def _unprintable(text: str) -> list[str]:
    return sorted({hex(ord(c)) for c in text if not c.isprintable()})


@pytest.mark.parametrize("readable", [True, False])
def test_control_characters_in_the_log_path_never_reach_a_terminal(arena, readable):
    """The job's user names the log's directory: escape sequences (an OSC 52 clipboard write, a
    screen clear, a C1 CSI), a carriage return and newline that would start a forged line, a
    line separator, a bidi override and DEL. The summary on stdout, the problem line on stderr
    (an unreadable log) and the ledger line are each one line with every such character written
    as an escape."""
    d = arena / "job" / HOSTILE_NAME
    d.mkdir()
    log = d / f"slurm-{JOB}.out"
    shutil.copy(DATA / "killonbad.8.out", log)
    os.chmod(log, 0o644 if readable else 0)
    if ROOT:
        for p in (d, log):
            os.chown(p, NOBODY, NOBODY)
    env = {} if ROOT else {"SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid())}
    p, _ = epilog(arena, dict(env, SLURM_JOB_STDOUT=str(d / "slurm-%j.out"), SLURM_JOB_NAME=HOSTILE_NAME))
    ok_exit(p)
    out, err = p.stdout.decode("utf-8"), p.stderr.decode("utf-8")
    assert out.count("\n") == 1 and out.endswith("\n") and not _unprintable(out[:-1]), out
    assert "forged" in out and "\\x1b" in out  # the path is still there, escaped
    if not readable:
        assert err.count("\n") == 1 and not _unprintable(err[:-1]) and "\\x1b" in err, err
    raw = (arena / "ledger" / "l.jsonl").read_bytes().decode("utf-8")
    assert raw.count("\n") == 1 and not _unprintable(raw[:-1]), raw
    line = json.loads(raw)
    assert line["name"] == HOSTILE_NAME and line["log"] == str(log)  # escaped, not altered


# ---- scontrol's record: a job name (or any free text) holding `Key=value` is not a field


def _fake_scontrol(arena: Path, record: str) -> str:
    """A PATH whose `scontrol` prints `record` for `show job`: what slurmctld would print for a
    job whose name the user chose."""
    bindir = arena / "bin"
    bindir.mkdir(exist_ok=True)
    (arena / "record.txt").write_text(record + "\n")
    script = bindir / "scontrol"
    script.write_text(f"#!/bin/sh\n[ \"$1\" = show ] && exec cat {arena / 'record.txt'}\nexit 1\n")
    os.chmod(script, 0o755)
    return f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"


def _record(name: str, uid: int, log: str, host: str = "n1") -> str:
    return (f"JobId={JOB} JobName={name} UserId=u({uid}) GroupId=g({uid}) MCS_label=N/A Priority=1 "
            f"JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0 NodeList={host} BatchHost={host} "
            f"WorkDir={os.path.dirname(log)} StdErr={log} StdIn=/dev/null StdOut={log} Power=")


def test_injected_fields_in_a_job_name_are_not_taken():
    rec = locate.parse_scontrol(_record("x UserId=root(0) GroupId=root(0) HetJobOffset=1 ArrayJobId=1 "
                                        "ArrayTaskId=7 BatchHost=elsewhere StdOut=/root/secret", 1000, "/home/u/slurm-5.out"))[0]
    assert rec["JobId"] == JOB
    for k in ("UserId", "GroupId", "BatchHost", "StdOut"):  # twice in the record: neither is believed
        assert k not in rec, (k, rec)
    for k in ("HetJobOffset", "ArrayJobId", "ArrayTaskId"):  # Slurm prints these before JobName only
        assert k not in rec, (k, rec)
    assert rec["StdErr"] == "/home/u/slurm-5.out" and rec["JobState"] == "FAILED"
    plain = locate.parse_scontrol(_record("plain name", 1000, "/home/u/slurm-5.out"))[0]
    assert (plain["JobName"], plain["UserId"], plain["BatchHost"]) == ("plain name", "u(1000)", "n1")
    het = locate.parse_scontrol("JobId=12 HetJobId=11 HetJobOffset=1 JobName=h UserId=u(1) StdOut=/o")[0]
    assert (het["HetJobOffset"], het["HetJobId"]) == ("1", "11")


def test_a_job_name_cannot_make_the_epilog_skip_its_job(arena):
    """A name holding HetJobOffset=1 (another component reports) or BatchHost=elsewhere (another
    node reports) or ArrayJobId/ArrayTaskId (the ledger would name another job): the job is
    still reported, under its own id."""
    uid = NOBODY if ROOT else os.getuid()
    log = str(arena / "job" / f"slurm-{JOB}.out")
    path = _fake_scontrol(arena, _record("x HetJobOffset=1 BatchHost=elsewhere ArrayJobId=1 ArrayTaskId=7", uid, log))
    env = {"PATH": path, "SLURMD_NODENAME": "n1"}
    if not ROOT:
        env.update(SLURM_JOB_UID=str(os.getuid()), SLURM_JOB_GID=str(os.getgid()))
    p, _ = epilog(arena, env)
    ok_exit(p)
    line = json.loads((arena / "ledger" / "l.jsonl").read_text())
    assert line["job_id"] == JOB and line["category"] == "import_error", line
    assert (arena / "job" / f"slurm-{JOB}.slurmdoc.json").exists()


@root_only
def test_a_job_name_cannot_make_a_root_run_by_hand_act_as_root(arena):
    """Run by hand as root (`slurmdoc epilog --job-id N`, no Slurm environment), the worker
    becomes the owner scontrol names. A job name holding `UserId=root(0) GroupId=root(0)
    StdOut=<a root-only log>` must not make it read that log as root: the owner is then
    unknown and the job's files are not read. The same record without the injection is read
    as the job's owner."""
    secret = arena / "secret" / "root.log"
    log = str(arena / "job" / f"slurm-{JOB}.out")
    env = {"SLURM_JOB_ID": "", "SLURM_JOB_UID": "", "SLURM_JOB_GID": "", "SLURM_SCRIPT_CONTEXT": "",
           "SLURM_JOB_EXIT_CODE2": "", "SLURM_JOB_STDOUT": "", "SLURM_JOB_WORK_DIR": ""}
    env["PATH"] = _fake_scontrol(arena, _record(f"x UserId=root(0) GroupId=root(0) StdOut={secret} StdErr={secret}",
                                                NOBODY, log))
    p, _ = epilog(arena, env, args=("--job-id", JOB, "--exit-code", "1"))
    ok_exit(p)
    assert SECRET.encode() not in p.stdout + p.stderr
    assert SECRET.encode() not in everything_written(arena) and sorted(os.listdir(arena / "secret")) == ["root.log"]
    assert b"not read as root" in p.stderr
    env["PATH"] = _fake_scontrol(arena, _record("x", NOBODY, log))
    p, _ = epilog(arena, env, args=("--job-id", JOB, "--exit-code", "1"))
    ok_exit(p)
    assert os.stat(arena / "job" / f"slurm-{JOB}.slurmdoc.json").st_uid == NOBODY
    assert json.loads((arena / "ledger" / "l.jsonl").read_text().splitlines()[-1])["category"] == "import_error"


# ---- sacct's parsable output: a job name (or work dir) holding the delimiter or a newline


def _fake_sacct(tmp: Path, name: str) -> str:
    """A PATH whose `sacct` prints job 5 (FAILED 1:0) and its step in `-P` form, with the
    delimiter it is given (`|` by default), the job's name being `name`."""
    (tmp / "bin").mkdir(exist_ok=True)
    (tmp / "name.txt").write_text(name)
    script = tmp / "bin" / "sacct"
    script.write_text(f"""#!{sys.executable}
import sys
d = "|"
fields = []
for i, a in enumerate(sys.argv):
    if a.startswith("--delimiter="):
        d = a.split("=", 1)[1]
    if a == "-o":
        fields = sys.argv[i + 1].split(",")
name = open({str(tmp / 'name.txt')!r}).read()
rows = [dict(JobID="5", JobIDRaw="5", JobName=name, State="FAILED", ExitCode="1:0", User="u", UID="1000",
             WorkDir="/w"),
        dict(JobID="5.batch", JobIDRaw="5.batch", JobName="batch", State="FAILED", ExitCode="1:0")]
out = [d.join(fields)] + [d.join(r.get(f, "") for f in fields) for r in rows]
sys.stdout.write("\\n".join(out) + "\\n")
""")
    os.chmod(script, 0o755)
    return f"{tmp / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"


@pytest.mark.parametrize("name", [
    "x|COMPLETED|0:0|0:0",  # shifts every later column: the job would read COMPLETED 0:0
    "x\n77|77|victim|FAILED|9:0|0:0",  # a row of its own, for another job
    "x\x1e77|77|victim|FAILED|9:0|0:0",  # a separator str.splitlines() breaks on
    "x\u202877|77|victim|FAILED|9:0|0:0",
])
def test_a_job_name_cannot_forge_sacct_columns_or_rows(tmp_path, monkeypatch, name):
    from slurmdoc.slurm import sacct

    monkeypatch.setenv("PATH", _fake_sacct(tmp_path, name))
    rows = sacct.run_sacct(["5"])
    assert sorted(r.job_id for r in rows) == ["5", "5.batch"], [(r.job_id, r.state) for r in rows]
    job = next(r for r in rows if r.job_id == "5")
    assert job.state == "FAILED" and str(job.exit_code) == "1:0" and job.name == name and job.work_dir == "/w"


# ---- the live tests' Epilog wrapper (scripts/slurm-epilog): a root shell script in the job's work dir


def _wrapper(arena: Path) -> Path:
    script = Path(__file__).parent.parent / "scripts" / "slurm-epilog"
    text = subprocess.run(["bash", str(script), "print-wrapper", SLURMDOC], capture_output=True, text=True,
                          check=True).stdout
    w = arena / "wrapper.sh"
    w.write_text(text)
    os.chmod(w, 0o755)
    return w


def _run_wrapper(arena: Path, w: Path):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_JOB_ID": JOB, "SLURM_JOB_UID": str(NOBODY),
           "SLURM_JOB_GID": str(NOBODY), "SLURM_SCRIPT_CONTEXT": "epilog_slurmd", "SLURM_JOB_EXIT_CODE2": "1:0",
           "SLURM_JOB_STDOUT": str(arena / "job" / "slurm-%j.out"), "SLURM_JOB_WORK_DIR": str(arena / "job")}
    return subprocess.run(["/bin/sh", str(w)], env=env, cwd="/", capture_output=True, timeout=120)


@root_only
@pytest.mark.parametrize("plant", ["symlinks", "opt-in-symlink", "none"])
def test_live_epilog_wrapper_touches_the_work_dir_only_as_the_job_user(arena, plant):
    """The wrapper runs as root and appends its output and the ledger to files in the job's
    work dir: a symlink the user plants there (to a file root may write, to a root-only opt-in
    file) gets nothing; with nothing planted, the files are the user's and the job is reported."""
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv")
    victim = arena / "victim"
    job = arena / "job"
    names = ["epilog.out", "epilog.err", "epilog-ledger.jsonl"]

    def do_plant():
        if plant == "symlinks":
            (job / ".slurmdoc-epilog").write_text("opt in\n")
            for n in names:
                os.symlink(victim, job / n)
        elif plant == "opt-in-symlink":
            os.symlink(arena / "secret" / "root.log", job / ".slurmdoc-epilog")
        else:
            (job / ".slurmdoc-epilog").write_text("opt in\n")

    as_user(NOBODY, NOBODY, do_plant)
    p = _run_wrapper(arena, _wrapper(arena))
    assert p.returncode == 0, p.stderr
    assert victim.read_text() == "keep me\n"
    report = job / f"slurm-{JOB}.slurmdoc.json"
    if plant == "opt-in-symlink":  # the user cannot open it: the job did not opt in
        assert not report.exists() and not (job / "epilog-ledger.jsonl").exists()
    elif plant == "none":
        assert report.exists()
        for n in ("epilog.out", "epilog-ledger.jsonl"):
            assert os.lstat(job / n).st_uid == NOBODY
        assert json.loads((job / "epilog-ledger.jsonl").read_text())["job_id"] == JOB
    assert not [d for d in os.listdir(tempfile.gettempdir()) if d.startswith("tmp") and
                os.path.exists(os.path.join(tempfile.gettempdir(), d, "ledger.jsonl"))]


def test_a_pattern_over_a_symlink_loop_still_gets_a_report(arena):
    """A per-task pattern (`%t/%t/.../slurm-%j.out`) over a directory of symlinks to itself names
    20^8 paths: the search is cut off early, and the report (from the accounting record) is
    still written within the budget."""
    job = arena / "job"

    def plant():
        for i in range(20):
            os.symlink(".", job / f"l{i}")

    if ROOT:
        as_user(NOBODY, NOBODY, plant)
    else:
        plant()
    env = {} if ROOT else {"SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid())}
    env["SLURM_JOB_STDOUT"] = str(job / "%t/%t/%t/%t/%t/%t/%t/%t/slurm-%j.out")
    t0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p, _ = epilog(arena, env, args=("--budget", "20"))
    t1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    ok_exit(p)
    assert b"too many paths" in p.stderr, p.stderr
    rep = json.loads((job / f"slurm-{JOB}.slurmdoc.json").read_text())
    assert rep["job"]["status"] == "failed" and rep["lines_read"] == 0
    cpu = (t1.ru_utime + t1.ru_stime) - (t0.ru_utime + t0.ru_stime)
    assert cpu < 12, f"{cpu:.1f} s of CPU"


def test_html_report_holds_no_markup_from_the_log_or_its_path(arena):
    """The page quotes the log's lines, its path and node names: markup in any of them (a
    script, an event handler, an attribute break-out, a CDATA or comment end) is text on the
    page, never an element. (A defence that holds: the page is escaped throughout.)"""
    d = arena / "job" / 'h"><svg onload=alert(1)>'
    d.mkdir()
    log = d / f"slurm-{JOB}.out"
    log.write_text('[rank0]: Traceback (most recent call last):\n'
                   '[rank0]:   File "</pre><script>alert(1)</script>.py", line 1, in <module>\n'
                   "[rank0]: RuntimeError: <script>alert(2)</script><img src=x onerror=alert(3)> ]]> --></style>\n"
                   "srun: error: <b>n1</b>: task 0: Exited with exit code 1\n")
    if ROOT:
        for p in (d, log):
            os.chown(p, NOBODY, NOBODY)
    env = {} if ROOT else {"SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid())}
    p, _ = epilog(arena, dict(env, SLURM_JOB_STDOUT=str(d / "slurm-%j.out")), args=("--html",))
    ok_exit(p)
    page = (d / f"slurm-{JOB}.slurmdoc.html").read_text().lower()
    assert "&lt;script&gt;" in page  # the message is there, as text
    for bad in ("<script", "<img", "<svg onload", "<b>n1"):
        assert bad not in page, bad
    assert page.count("</style>") == 1 and page.count("<svg") == page.count("</svg>")


@root_only
def test_a_ledger_the_job_user_owns_is_refused(arena):
    """A ledger in a directory anyone may write (a misplaced /tmp/ledger.jsonl): the job's user
    creates the file first, so root's lines would land in a file the user can rewrite at will
    (forged or deleted lines). Root appends only to a ledger that root (or the caller) owns."""
    shared = arena / "ledger"
    os.chmod(shared, 0o1777)
    ledger = shared / "l.jsonl"
    as_user(NOBODY, NOBODY, lambda: ledger.write_text(""))
    p, _ = epilog(arena)
    ok_exit(p)
    assert b"cannot append to the ledger" in p.stderr and b"owned by uid" in p.stderr
    assert ledger.read_text() == ""
    assert (arena / "job" / f"slurm-{JOB}.slurmdoc.json").exists()  # the report is still written


def test_a_new_ledger_is_not_readable_by_other_users(arena):
    """The ledger quotes every job's verdict, a line of its log (an error message can carry a
    token), while a report is never more readable than its log: a ledger the epilogue creates
    is readable by its owner only (an admin may widen it; an existing ledger keeps its mode)."""
    ledger = arena / "ledger" / "l.jsonl"
    env = {} if ROOT else {"SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid())}
    old = os.umask(0o022)
    try:
        p, _ = epilog(arena, env)
    finally:
        os.umask(old)
    ok_exit(p)
    assert json.loads(ledger.read_text())["job_id"] == JOB
    assert stat.S_IMODE(os.stat(ledger).st_mode) & 0o077 == 0, oct(os.stat(ledger).st_mode)
    os.chmod(ledger, 0o640)
    p, _ = epilog(arena, env)
    ok_exit(p)
    assert stat.S_IMODE(os.stat(ledger).st_mode) == 0o640 and len(ledger.read_text().splitlines()) == 2

"""Privilege separation for the epilogue.

Slurm runs the node Epilog as root, on paths the job's user chooses (`--output`, the work
dir). Everything that touches those paths (resolving the log's pattern, reading the log,
writing the reports) runs in a worker process that becomes the job's user (its uid, primary
gid and supplementary groups) before it opens anything there, so the kernel decides what may be
read and written. The root parent never opens a path in the user's tree: it keeps the
admin-owned side (scontrol, sacct, the ledger, the webhook, the job's comment) and receives the
worker's result as size-capped JSON on a pipe, which it parses as untrusted input.

The worker is `python -I -m slurmdoc.slurm.privsep` (isolated: no cwd or user site on
sys.path, no PYTHON* variables), started with cwd `/`, a minimal environment and no inherited
descriptors besides its three pipes, in the parent's process group (so `timeout -k` and
slurmd's cleanup reach it). It has a parent-death signal (SIGKILL), an alarm at its deadline,
and caps on CPU time, address space, file size and core dumps. When the caller is not root the
same worker runs without the change of user.
"""

from __future__ import annotations

import json
import math
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Optional

REQUEST_MAX = 1 << 20  # the parent's request, read by the worker
RESULT_MAX = 4 << 20  # the worker's answer, read by the parent; more is an error
STDERR_MAX = 16 << 10
WORKER_AS_MAX = 4 << 30  # address space
WORKER_FSIZE_MAX = 64 << 20  # largest file the worker may write
PR_SET_PDEATHSIG = 1
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Creds:
    """Whom the worker becomes."""

    uid: int
    gid: int


class PrivsepError(Exception):
    pass


def _digits(text: Optional[str]) -> Optional[int]:
    t = (text or "").strip()
    if t.isdigit() and len(t) <= 10:
        n = int(t)
        if n < 2**32 - 1:
            return n
    return None


def _paren_id(text: Optional[str]) -> Optional[int]:
    """scontrol's `name(1234)` -> 1234."""
    t = (text or "").strip()
    if t.endswith(")") and "(" in t:
        return _digits(t[t.rfind("(") + 1:-1])
    return None


def job_creds(env, rec) -> Optional[Creds]:
    """The job owner's uid and gid: SLURM_JOB_UID/GID (slurmd sets them for Prolog/Epilog), else
    scontrol's UserId/GroupId, else the uid's primary group from the user database."""
    uid = _digits(env.get("SLURM_JOB_UID"))
    if uid is None:
        uid = _paren_id(rec.get("UserId"))
    if uid is None:
        return None
    gid = _digits(env.get("SLURM_JOB_GID"))
    if gid is None:
        gid = _paren_id(rec.get("GroupId"))
    if gid is None:
        import pwd

        try:
            gid = pwd.getpwuid(uid).pw_gid
        except KeyError:
            return None
    return Creds(uid, gid)


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """prctl(PR_SET_PDEATHSIG): Linux only, best effort. The kernel clears it when the
    credentials change, so it is set again after dropping privileges."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def drop_privileges(c: Creds) -> None:
    """Become uid/gid with the user's supplementary groups, for good. Raises PrivsepError if any
    step fails or if root can be regained afterwards."""
    import pwd

    try:
        name = pwd.getpwuid(c.uid).pw_name
    except KeyError:
        name = None
    try:
        if name is not None:
            os.initgroups(name, c.gid)
        else:
            os.setgroups([])
        os.setresgid(c.gid, c.gid, c.gid)
        os.setresuid(c.uid, c.uid, c.uid)
    except OSError as e:
        raise PrivsepError(f"cannot become uid {c.uid} gid {c.gid} ({e.strerror or e})") from None
    if os.getresuid() != (c.uid,) * 3 or os.getresgid() != (c.gid,) * 3:
        raise PrivsepError(f"still not uid {c.uid} gid {c.gid} after dropping privileges")
    if c.uid != 0:
        for regain in (lambda: os.setresuid(0, 0, 0), lambda: os.seteuid(0), lambda: os.setuid(0)):
            try:
                regain()
            except PermissionError:
                continue
            raise PrivsepError("root could be regained after dropping privileges")


def _limits(deadline: float) -> None:
    import resource

    def cap(which: int, value: int) -> None:
        try:
            soft, hard = resource.getrlimit(which)
            v = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (v, v))
        except (ValueError, OSError):
            pass

    cap(resource.RLIMIT_CPU, int(deadline) + 5)
    cap(resource.RLIMIT_AS, WORKER_AS_MAX)
    cap(resource.RLIMIT_FSIZE, WORKER_FSIZE_MAX)
    cap(resource.RLIMIT_CORE, 0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-large write fails with EFBIG instead
    signal.alarm(max(1, math.ceil(deadline) + 1))


def worker_env() -> dict[str, str]:
    env = {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "NO_COLOR": "1", "HOME": "/"}
    for k in ("SLURMDOC_PREFILTER", "TZ"):
        if k in os.environ:
            env[k] = os.environ[k]
    return env


def run_worker(request: dict, creds: Optional[Creds], timeout: float) -> tuple[Optional[dict], Optional[str]]:
    """Run the user-side half in a worker; (result, None) or (None, why not). Never raises."""
    timeout = max(0.5, timeout)
    # CLOCK_MONOTONIC is one clock for every process on the machine: the worker's deadline is on
    # this one, its start-up included; it aims to finish a little before the parent stops waiting
    inner = timeout - min(1.0, timeout * 0.2)
    req = dict(request, parent=os.getpid(), deadline=inner, deadline_at=time.monotonic() + inner,
               creds=[creds.uid, creds.gid] if creds is not None else None)
    try:
        data = json.dumps(req, ensure_ascii=True).encode("ascii")
    except (TypeError, ValueError) as e:
        return None, f"internal error: request not serialisable ({e})"
    if len(data) > REQUEST_MAX:
        return None, "the request to the worker is too large"
    try:
        p = subprocess.Popen([sys.executable, "-I", "-m", "slurmdoc.slurm.privsep"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/", env=worker_env(),
                             close_fds=True, start_new_session=False)
    except OSError as e:
        return None, f"cannot start the worker ({e.strerror or e})"
    try:
        out, err, why = _exchange(p, data, timeout)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    if why:
        return None, why
    if p.returncode != 0:
        lines = [x for x in err.decode("utf-8", "backslashreplace").splitlines() if x.strip()]
        tail = lines[-1][:300] if lines else f"exit status {p.returncode}"
        if p.returncode < 0:
            tail = f"killed by signal {-p.returncode}"
        return None, f"the worker failed ({tail})"
    try:
        doc = json.loads(out)
    except (ValueError, RecursionError):
        return None, "the worker's answer is not JSON"
    if not isinstance(doc, dict):
        return None, "the worker's answer is not a JSON object"
    return doc, None


def _exchange(p: subprocess.Popen, data: bytes, timeout: float) -> tuple[bytes, bytes, Optional[str]]:
    """Write the request, read stdout (at most RESULT_MAX) and stderr (its last STDERR_MAX)
    until both close or the time is up."""
    assert p.stdin and p.stdout and p.stderr
    end = time.monotonic() + timeout
    try:
        os.set_blocking(p.stdin.fileno(), False)
    except OSError:
        pass
    sel = selectors.DefaultSelector()
    pending = memoryview(data)
    sel.register(p.stdin, selectors.EVENT_WRITE)
    sel.register(p.stdout, selectors.EVENT_READ)
    sel.register(p.stderr, selectors.EVENT_READ)
    out = bytearray()
    err = bytearray()
    why = None
    try:
        while sel.get_map():
            left = end - time.monotonic()
            if left <= 0:
                why = f"the worker did not finish within {timeout:.1f} s"
                break
            events = sel.select(min(left, 1.0))
            for key, _ in events:
                f = key.fileobj
                if f is p.stdin:
                    try:
                        n = os.write(p.stdin.fileno(), pending[:65536])
                        pending = pending[n:]
                    except (BrokenPipeError, OSError):
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(p.stdin)
                        p.stdin.close()
                    continue
                chunk = os.read(f.fileno(), 65536)  # type: ignore[union-attr]
                if not chunk:
                    sel.unregister(f)
                    continue
                if f is p.stdout:
                    out += chunk
                    if len(out) > RESULT_MAX:
                        why = "the worker's answer is larger than the cap"
                        break
                else:
                    err += chunk
                    if len(err) > STDERR_MAX:
                        del err[:-STDERR_MAX]
            if why:
                break
    finally:
        sel.close()
        for f in (p.stdin, p.stdout, p.stderr):
            try:
                f.close()
            except OSError:
                pass
    if why is None:
        try:
            p.wait(max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            why = f"the worker did not finish within {timeout:.1f} s"
    return bytes(out), bytes(err), why


def _fail(msg: str) -> None:
    try:
        os.write(2, ("slurmdoc: worker: " + " ".join(msg.split())[:500] + "\n").encode("utf-8", "backslashreplace"))
    finally:
        os._exit(3)


def main() -> None:
    """The worker. Reads the request, prepares as the caller (admin-owned code and rules only),
    becomes the job's user, does the user-side half, prints its answer as JSON."""
    set_parent_death_signal()
    try:
        raw = sys.stdin.buffer.read(REQUEST_MAX + 1)
        if len(raw) > REQUEST_MAX:
            _fail("request too large")
        req = json.loads(raw)
        parent = int(req["parent"])
        deadline = float(req["deadline_at"]) - time.monotonic()
        creds = req.get("creds")
    except Exception as e:  # noqa: BLE001
        _fail(f"bad request ({type(e).__name__})")
        return
    if os.getppid() != parent:
        _fail("the epilogue is gone")
    _limits(deadline)
    os.umask(0o077)
    try:
        from slurmdoc.slurm import epilog

        prepared = epilog.prepare_user_side(req)  # imports and rules: before the user can interfere
        if creds is not None:
            drop_privileges(Creds(int(creds[0]), int(creds[1])))
            set_parent_death_signal()
            if os.getppid() != parent:
                _fail("the epilogue is gone")
        answer = epilog.user_side(req, prepared)
        data = json.dumps(answer, ensure_ascii=True).encode("ascii")
    except PrivsepError as e:
        _fail(str(e))
        return
    except BaseException as e:  # noqa: BLE001 - one line for the parent, never a traceback
        _fail(f"internal error: {type(e).__name__}: {e}")
        return
    view = memoryview(data)
    while view:
        n = os.write(1, view)
        view = view[n:]
    os._exit(0)


if __name__ == "__main__":
    main()

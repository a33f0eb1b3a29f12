"""The command line: parse arguments, call the library, pick a renderer, map errors to exit codes.

stdout carries the report only; progress, warnings and errors go to stderr.
Exit codes (diagnose): 0 no failure, 1 failure found, 2 usage error or unreadable input,
3 invalid rule pack. `rules test|lint`: 0 clean, 1 a problem found, 2 usage error.
`rules list|show|try`: 0 (try: 1 when the rule matched nothing), 2 usage error, 3 invalid pack.

Annotations here are real objects, not strings (no `from __future__ import annotations`):
typer reads every command's signature on each run, and strings would be compiled and
evaluated again each time (about 4 ms of start-up).
"""

import gc
import os
import re
import sys
from contextlib import contextmanager
from enum import Enum
from typing import Iterator, List, Optional

import typer

from slurmdoc import __version__
from slurmdoc.errors import SlurmdocError

HELP = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    add_completion=True,
    context_settings=HELP,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Find the first real failure in a multi-node distributed training log.",
)

PROGRESS_MIN_BYTES = 64 << 20


class Fmt(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    html = "html"


class TriageFmt(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class Color(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


def _err(msg: str) -> None:
    sys.stderr.write(f"slurmdoc: {msg}\n")
    sys.stderr.flush()


_GC_PAUSED = False  # main() (or slurmdoc.__main__) paused the cyclic collector for start-up
_REPORTED = False  # `diagnose` has written its report: nothing is left to do but exit (_leave)


def _pause_gc() -> None:
    """Start-up (typer building the commands and their option adapters, the command importing
    its modules, pydantic building models) makes tens of thousands of long-lived objects and
    next to no garbage: the cyclic collector would walk them again and again for nothing
    (about 10 ms per run). Paused by main() (or before it, by slurmdoc.__main__), until the
    command's work begins (_reported)."""
    global _GC_PAUSED
    if gc.isenabled():
        gc.disable()
        _GC_PAUSED = True


def _resume_gc() -> None:
    """The command's work begins (reading logs, sacct, ...): collect again. What start-up
    made is moved out of the collector's sight (gc.freeze): it lives as long as the process,
    and a long run's collections need not walk it."""
    global _GC_PAUSED
    if _GC_PAUSED:
        _GC_PAUSED = False
        gc.freeze()
        gc.enable()


@contextmanager
def _reported() -> Iterator[None]:
    """A command's body: a library error becomes one line on stderr and its documented exit
    code, Ctrl-C exit 130; never a traceback. Its start ends start-up (_resume_gc)."""
    _resume_gc()
    try:
        yield
    except SlurmdocError as e:
        _err(f"error: {e.one_line()}")
        raise typer.Exit(e.exit_code)
    except KeyboardInterrupt:
        _err("interrupted")
        raise typer.Exit(130)


def _version(value: bool) -> None:
    if value:
        print(f"slurmdoc {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    pass


@app.command(short_help="Name the root cause of a failed job from its logs.", epilog="Exit codes: 0 no failure found, 1 failure found, 2 usage error or unreadable input, 3 invalid rule pack.")
def diagnose(
    paths: List[str] = typer.Argument(None, metavar="PATH", help="Log files, directories, globs, or - for stdin (.gz read transparently)."),
    fmt: Fmt = typer.Option(Fmt.text, "--format", "-f", metavar="FORMAT", help="text (terminal), json (the contract), markdown (for a ticket), html (one self-contained page with the timeline)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", metavar="FILE", help="Write the report to FILE instead of stdout."),
    color: Color = typer.Option(Color.auto, "--color", metavar="WHEN", help="Colour: auto (a terminal, unless NO_COLOR; FORCE_COLOR forces it), always, never."),
    full: bool = typer.Option(False, "--full", help="Show the whole traceback, library frames included."),
    picture: bool = typer.Option(True, "--picture/--no-picture", help="The rank x time strip under the verdict (text format, when the log has times)."),
    width: Optional[int] = typer.Option(None, "--width", min=40, max=1000, metavar="COLUMNS", help="Wrap the text report at COLUMNS (default: the terminal's width; off a terminal, no wrapping)."),
    rules: List[str] = typer.Option([], "--rules", "-r", metavar="DIR", help="User rule directory (repeatable; default $SLURMDOC_RULES, else the config file); same id replaces a bundled rule."),
    skew: float = typer.Option(1.0, "--skew", min=0.0, max=86400.0, metavar="SECONDS", help="Clock skew tolerated between nodes when ordering failures."),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="Progress bar on stderr (default: on for large inputs on a terminal)."),
    exact: bool = typer.Option(False, "--exact", help="Parse every line instead of only the lines near trigger words (much slower; same verdict)."),
    job: Optional[str] = typer.Option(None, "--job", "-j", metavar="JOBID", help="Diagnose a Slurm job: find its log (scontrol, sacct, slurm-%j.out) and join the diagnosis with its accounting record."),
    log: List[str] = typer.Option([], "--log", metavar="PATH", help="With --job: the job's log, instead of locating it (repeatable; PATH arguments work too)."),
    sacct_file: Optional[str] = typer.Option(None, "--sacct-file", metavar="FILE", help="With --job: saved `sacct -P`/`--json` output instead of running sacct."),
    tail: Optional[int] = typer.Option(None, "--tail", min=1, metavar="BYTES", help="Read only the last BYTES of each log file (a huge log in part); sources keep the file's line numbers."),
    traces: Optional[str] = typer.Option(None, "--traces", metavar="PATH", help="The ranks' PyTorch flight-recorder dumps (a directory, or a prefix of <prefix><rank> files such as /tmp/nccl_trace_rank_): a hang's root rank is the one they show never entered the collective."),
) -> None:
    """Name the root-cause failure of a job log, its rank and node, the symptoms it caused, and a fix."""
    from slurmdoc.api import diagnose as api_diagnose

    def run(*a, **kw):
        return api_diagnose(*a, budget=None, tail_bytes=tail, traces=traces, **kw) if exact else api_diagnose(*a, tail_bytes=tail, traces=traces, **kw)

    paths = list(paths or [])
    if job is not None and tail is not None:
        _err("error: --tail goes with log files, not with --job")
        raise typer.Exit(2)
    if not paths and job is None and _stdin_is_piped():
        paths = ["-"]  # `... | slurmdoc diagnose`: the log comes on stdin
    if job is None and (log or sacct_file):
        _err("error: --log and --sacct-file go with --job JOBID")
        raise typer.Exit(2)
    if job is None and not paths:
        _err("error: no log given (name log files, directories or -, pipe one in, or name a Slurm job with --job JOBID)")
        raise typer.Exit(2)
    if job is not None:
        from slurmdoc.api import diagnose_job

        logs = paths + list(log)

        def run(logs_, rule_dirs, skew, on_bytes=None):  # noqa: F811
            return diagnose_job(job, logs=logs_ or None, sacct_file=sacct_file, rule_dirs=rule_dirs, skew=skew,
                                exact=exact, traces=traces)

        paths = logs

    for stream in (sys.stdout, sys.stderr):
        try:  # a report must not die on a terminal that cannot show a character
            stream.reconfigure(errors="replace")  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            pass

    with _reported():
        if job is None and not _one_file(paths):  # logs of several jobs are never diagnosed as one
            from slurmdoc.fleet.jobs import one_job

            one_job(paths)
        rules = _rule_dirs(rules)
        want = progress if progress is not None else sys.stderr.isatty()
        total = _total_size(paths) if want and paths else 0  # walks directories: only when it may show
        show = want and total > 0 and (progress or total >= PROGRESS_MIN_BYTES)
        if show:
            from slurmdoc.report.emit import with_progress

            result = with_progress(lambda cb: run(paths, rule_dirs=rules, skew=skew, on_bytes=cb), total)
        else:
            result = run(paths, rule_dirs=rules, skew=skew)
    for w in result.warnings:
        _err(f"warning: {w}")
    from slurmdoc.report.emit import emit

    try:
        if output is not None and output != "-":
            try:
                with open(output, "w", encoding="utf-8", errors="replace") as fh:
                    emit(result, fmt.value, fh, color.value, full=full, picture=picture, width=width)
            except OSError as e:
                _err(f"error: cannot write {output}: {e.strerror or e}")
                raise typer.Exit(2)
        else:
            emit(result, fmt.value, sys.stdout, color.value, full=full, picture=picture, width=width)
    except BrokenPipeError:  # `slurmdoc ... | head`: the reader left; the verdict still stands
        _silence_stdout()
    failed = result.status == "failed" or (result.job is not None and result.job.status == "failed")
    global _REPORTED
    _REPORTED = True
    raise typer.Exit(1 if failed else 0)


def _rule_dirs(cli_dirs: List[str]) -> List[str]:
    """User rule directories by precedence: --rules, else $SLURMDOC_RULES, else the config file."""
    from slurmdoc.config import resolve_rule_dirs
    from slurmdoc.errors import RuleError

    found = resolve_rule_dirs(cli_dirs)
    for d in found.dirs:
        if not os.path.isdir(d):
            raise RuleError(d, None, None, f"rule directory does not exist (named by {found.origin})")
    return list(found.dirs)


def _one_file(paths: List[str]) -> bool:
    """One file (or stdin) is one job's log: what only a directory, a glob or several paths
    can hold, logs of several jobs, needs no look (fleet.jobs sniffs each file for its job)."""
    if len(paths) != 1:
        return False
    p = paths[0]
    return p == "-" or (os.path.lexists(p) and not os.path.isdir(p))


def _stdin_is_piped() -> bool:
    """stdin is a pipe or a redirected file (not a terminal, not /dev/null, not closed)."""
    import stat

    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (AttributeError, ValueError, OSError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def _total_size(paths: List[str]) -> int:
    """Bytes to read, for the progress bar (compressed size for .gz: an estimate)."""
    from slurmdoc.ingest.sources import expand

    total = 0
    try:
        files = expand(paths, [])
    except SlurmdocError:
        return 0  # diagnose() reports it
    for p in files:
        try:
            if p != "-":
                total += os.path.getsize(p)
        except OSError:
            pass
    return total


@app.command(short_help="Why jobs failed, from Slurm's accounting.", epilog="Exit codes: 0 every job completed without a failure (or is still running), 1 at least one "
             "job failed, 2 usage error, sacct missing or failing, unreadable --sacct-file, or no job found.")
def triage(
    job_ids: List[str] = typer.Argument(None, metavar="JOBID", help="Job ids: 1234, 1234_7 (array task), 1234+1 (het component); comma lists too."),
    sacct_file: Optional[str] = typer.Option(None, "--sacct-file", metavar="FILE", help="Read saved `sacct -P` or `sacct --json` output instead of running sacct (- for stdin)."),
    fmt: TriageFmt = typer.Option(TriageFmt.text, "--format", "-f", metavar="FORMAT", help="text (terminal: one job in detail, many as a table), json, markdown."),
    logs: bool = typer.Option(False, "--logs", help="Also find each job's log, diagnose it and join the two (as diagnose --job does)."),
    rules: List[str] = typer.Option([], "--rules", "-r", metavar="DIR", help="With --logs: user rule directory (repeatable)."),
    color: Color = typer.Option(Color.auto, "--color", metavar="WHEN", help="Colour: auto (a terminal, unless NO_COLOR; FORCE_COLOR forces it), always, never."),
    width: Optional[int] = typer.Option(None, "--width", min=40, max=1000, metavar="COLUMNS", help="Fit the text report in COLUMNS (default: the terminal's width; off a terminal, no wrapping): a table while it fits, else one row per job."),
    since: Optional[str] = typer.Option(None, "--since", metavar="TIME", help="Instead of JOBIDs: every job that ended since TIME (2026-11-01, now-7days), from sacct -D."),
    until: Optional[str] = typer.Option(None, "--until", metavar="TIME", help="With --since: up to TIME."),
    user: List[str] = typer.Option([], "--user", "-u", metavar="USER", help="With --since or --sacct-file: only these users' jobs (repeatable, or a comma list)."),
    partition: List[str] = typer.Option([], "--partition", metavar="P", help="With --since or --sacct-file: only these partitions."),
    state: List[str] = typer.Option([], "--state", metavar="STATE", help="With --since or --sacct-file: only jobs that ended in these states (FAILED, TIMEOUT, ...)."),
    traces: Optional[str] = typer.Option(None, "--traces", metavar="PATH", help="With --logs and one JOBID: the job's PyTorch flight-recorder dumps (a directory or a <prefix> of <prefix><rank> files), fused with its log."),
) -> None:
    """Why did these jobs fail, from Slurm's accounting: first failing step, exit codes in words, memory, time and CPU against the request, the category."""
    from slurmdoc.api import triage as run
    from slurmdoc.report.emit import make_console
    from slurmdoc.report.triage import render_json, render_markdown, render_text

    with _reported():
        if since or until or user or partition or state:
            from slurmdoc.errors import InputError
            from slurmdoc.slurm.api import triage_window

            if job_ids:
                raise InputError("JOBIDs or --since/--until/--user/--partition/--state, not both")
            report = triage_window(since, until, user, partition, state, sacct_file)
        else:
            report = run(job_ids or [], sacct_file=sacct_file)
        if traces is not None and not logs:
            from slurmdoc.errors import InputError

            raise InputError("--traces goes with --logs (the dumps are fused with the job's log)")
        if logs and report.jobs:
            from slurmdoc.slurm.api import triage_with_logs

            report = triage_with_logs(report, rule_dirs=_rule_dirs(rules), traces=traces)
    for m in report.not_found:
        _err(f"warning: job {m}: not in the accounting records")
    if not report.jobs:
        _err("error: no job found" + (f" in {report.source}" if report.source != "sacct" else ""))
        raise typer.Exit(2)
    try:
        if fmt == TriageFmt.json:
            sys.stdout.write(render_json(report))
        elif fmt == TriageFmt.markdown:
            sys.stdout.write(render_markdown(report))
        else:
            console, cols = make_console(sys.stdout, color.value, width)
            render_text(report, console, cols)
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    raise typer.Exit(1 if report.status == "failed" else 0)


@app.command(short_help="Diagnose many jobs: one row each, then the fleet summary.", epilog="Exit codes: 0 no job failed, 1 at least one job failed, 2 usage error or no readable input, "
             "3 invalid rule pack. `scan merge PART...` (a first argument `merge`) builds the report from the parts "
             "that `scan --shard I/N` wrote.")
def scan(
    paths: List[str] = typer.Argument(None, metavar="PATH", help="Log files, directories or globs of many jobs; or `merge PART...`."),
    fmt: str = typer.Option("text", "--format", "-f", metavar="FORMAT", help="text (terminal), json, markdown, jsonl (one line per job)."),
    rules: List[str] = typer.Option([], "--rules", "-r", metavar="DIR", help="User rule directory (repeatable)."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, max=256, metavar="K", help="Diagnose with K processes."),
    shard: Optional[str] = typer.Option(None, "--shard", metavar="I/N", help="Only every N-th job from the I-th (0-based); writes a part for `scan merge`."),
    cache: Optional[str] = typer.Option(None, "--cache", metavar="FILE", help="Reuse verdicts of unchanged logs (keyed by path, size, mtime and the rule pack)."),
    ledger: Optional[str] = typer.Option(None, "--ledger", metavar="FILE", help="Summarise the epilog's JSON-lines ledger instead of reading logs."),
    suspect_min: int = typer.Option(2, "--suspect-min", min=1, metavar="N", help="Hardware-looking root causes that make a node a suspect."),
    top: int = typer.Option(20, "--top", min=1, max=10000, metavar="N", help="Signatures and node suspects listed."),
    since: Optional[str] = typer.Option(None, "--since", metavar="TIME", help="Jobs from sacct that ended since TIME (2026-11-01, now-7days) instead of PATHs; logs located as diagnose --job does."),
    until: Optional[str] = typer.Option(None, "--until", metavar="TIME", help="With --since: up to TIME (give it when sharding)."),
    user: List[str] = typer.Option([], "--user", "-u", metavar="USER", help="With --since: only these users' jobs (repeatable, or a comma list)."),
    partition: List[str] = typer.Option([], "--partition", metavar="P", help="With --since: only these partitions."),
    state: List[str] = typer.Option([], "--state", metavar="STATE", help="With --since: only jobs that ended in these states (FAILED, TIMEOUT, ...)."),
    sacct_file: Optional[str] = typer.Option(None, "--sacct-file", metavar="FILE", help="Saved `sacct -P -D` or `--json` output instead of running sacct."),
    color: Color = typer.Option(Color.auto, "--color", metavar="WHEN", help="Colour of the text rows' status: auto (a terminal, unless NO_COLOR; FORCE_COLOR forces it), always, never."),
) -> None:
    """Diagnose many jobs, each on its own: one row per job, then the fleet summary (categories, signatures, per day, node suspects, unclassified rate)."""
    from slurmdoc.fleet.command import ScanRequest, run_scan

    paths = list(paths or [])
    parts = None
    if paths and paths[0] == "merge" and not os.path.exists("merge"):
        parts, paths = paths[1:], []
    with _reported():
        req = ScanRequest(paths=paths, fmt=fmt, rule_dirs=_rule_dirs(rules), jobs=jobs, shard=shard, cache=cache,
                          ledger=ledger, merge_parts=parts, suspect_min=suspect_min, top=top, since=since,
                          until=until, users=list(user), partitions=list(partition), states=list(state),
                          sacct_file=sacct_file, color=color.value)
        try:
            code = run_scan(req, sys.stdout, lambda w: _err(f"warning: {w}"))
        except BrokenPipeError:
            _silence_stdout()
            code = 0
    raise typer.Exit(code)


# ---- rules: authoring commands --------------------------------------------------------

rules_app = typer.Typer(
    context_settings=HELP,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="List, show, test, lint and try rules (the bundled pack and your own).",
)
app.add_typer(rules_app, name="rules", short_help="List, show, test, lint and try rules.")

_RULES_OPT = typer.Option([], "--rules", "-r", metavar="DIR", help="User rule directory (repeatable; default $SLURMDOC_RULES, else the config file).")


def _guard(fn):
    """Run a rules command body: library errors become one line and their exit code."""
    with _reported():
        return fn()


def _out(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()


@rules_app.command("list", short_help="Every rule in effect.", epilog="Exit codes: 0 listed, 2 usage error, 3 invalid rule pack.")
def rules_list(rules: List[str] = _RULES_OPT) -> None:
    """Every rule in effect: id, category, role, priority, and the pack it comes from."""
    from slurmdoc.engine.authoring import list_rules, render_list
    from slurmdoc.engine.loader import load_rulebook

    _out(_guard(lambda: render_list(list_rules(load_rulebook(_rule_dirs(rules))))))


@rules_app.command("show", short_help="One rule and the remediation it prints.", epilog="Exit codes: 0 shown, 2 no such rule, 3 invalid rule pack.")
def rules_show(rule_id: str = typer.Argument(..., metavar="ID"), rules: List[str] = _RULES_OPT) -> None:
    """One rule: its fields, its remediation template and the remediation a user sees."""
    from slurmdoc.engine.authoring import show_rule
    from slurmdoc.engine.loader import load_rulebook

    _out(_guard(lambda: show_rule(load_rulebook(_rule_dirs(rules)), rule_id)))


def _pack(dirs: List[str], rules: List[str]):
    from slurmdoc.engine.authoring import load_layers
    from slurmdoc.errors import InputError

    for d in dirs:
        if not os.path.isdir(os.path.expanduser(d)):
            raise InputError(f"{d}: no such rule directory")
    return load_layers(dirs) if dirs else load_layers(_rule_dirs(rules), report_all=True)


@rules_app.command("test", short_help="Run every rule's examples.", epilog="Exit codes: 0 every example behaves, 1 an example failed or a rule file does not load, 2 usage error, 3 a directory named by --rules, SLURMDOC_RULES or the config file does not exist.")
def rules_test(
    dirs: List[str] = typer.Argument(None, metavar="[DIR]...", help="Rule directories to test (default: every rule in effect)."),
    rules: List[str] = _RULES_OPT,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also list the rules that pass."),
) -> None:
    """Run every rule's examples through the whole pipeline and the whole pack.

    A `match` example must be classified as its rule (no other rule may take it first), with
    the expected captures; a `no_match` example must not be; a `todo_match` example is a known
    miss and fails the run once it starts to match.
    """
    from slurmdoc.engine.authoring import render_test, test_rules

    report = _guard(lambda: test_rules(_pack(dirs or [], rules)))
    _out(render_test(report, verbose))
    raise typer.Exit(0 if report.ok else 1)


@rules_app.command("lint", short_help="Check rule files.", epilog="Exit codes: 0 no errors (warnings allowed unless --strict), 1 errors found, 2 usage error, 3 a directory named by --rules, SLURMDOC_RULES or the config file does not exist.")
def rules_lint(
    dirs: List[str] = typer.Argument(None, metavar="[DIR]...", help="Rule directories to lint (default: every rule in effect)."),
    rules: List[str] = _RULES_OPT,
    strict: bool = typer.Option(False, "--strict", help="Warnings fail the run too."),
    info: bool = typer.Option(False, "--info", help="Also print notes (replaced bundled rules, keywords no example shows)."),
) -> None:
    """Check rule files: schema, duplicate ids, placeholders, examples, links, risky regexes."""
    from slurmdoc.engine.authoring import lint, render_lint

    report = _guard(lambda: lint(_pack(dirs or [], rules)))
    _out(render_lint(report, info))
    raise typer.Exit(1 if report.failed(strict) else 0)


@rules_app.command("try", short_help="What one rule matches in a log.", epilog="Exit codes: 0 the rule matched, 1 it matched nothing, 2 usage error or unreadable input, 3 invalid rule pack.")
def rules_try(
    rule_id: str = typer.Argument(..., metavar="ID"),
    paths: List[str] = typer.Argument(..., metavar="PATH...", help="Logs (files, directories, globs) or - for stdin."),
    rules: List[str] = _RULES_OPT,
    near: bool = typer.Option(False, "--near", help="Also list events that held a keyword but matched no pattern."),
) -> None:
    """Show what one rule matches in a log: line, rank, captures, and whether it wins."""
    from slurmdoc.engine.authoring import render_try, try_rule
    from slurmdoc.engine.loader import load_rulebook

    report = _guard(lambda: try_rule(load_rulebook(_rule_dirs(rules)), rule_id, paths))
    for w in report.warnings:
        _err(f"warning: {w}")
    _out(render_try(report, near))
    raise typer.Exit(0 if report.hits else 1)

class CommentTo(str, Enum):
    comment = "comment"
    admin = "admin"


@app.command(short_help="The post-job hook: report next to the log.", epilog="Always exits 0 (a failing Epilog would drain the node); its own problems go to stderr in one line.")
def epilog(
    job_id: Optional[str] = typer.Option(None, "--job-id", metavar="JOBID", help="The job (default: $SLURM_JOB_ID)."),
    exit_code: Optional[str] = typer.Option(None, "--exit-code", metavar="CODE", help="srun's status ($? after srun) or status:signal (default: $SLURM_JOB_EXIT_CODE2)."),
    log: List[str] = typer.Option([], "--log", metavar="PATH", help="The job's log (default: $SLURM_JOB_STDOUT/STDERR, scontrol's StdOut/StdErr, slurm-%j.out); Slurm's %j %x %u %N ... patterns are expanded."),
    out_dir: Optional[str] = typer.Option(None, "--out-dir", metavar="DIR", help="Write the report here instead of next to the log."),
    ledger: Optional[str] = typer.Option(None, "--ledger", metavar="FILE", help="Append one JSON line per job to FILE (locked while writing)."),
    webhook: Optional[str] = typer.Option(None, "--webhook", metavar="URL", help="POST the ledger line as JSON to URL (short timeout, within the budget)."),
    comment: Optional[CommentTo] = typer.Option(None, "--comment", metavar="comment|admin", help="Record the verdict of a failed job in its Comment or AdminComment (scontrol update)."),
    budget: float = typer.Option(30.0, "--budget", min=1.0, max=3600.0, metavar="SECONDS", help="Finish within this many seconds (a huge log is then diagnosed in part)."),
    always: bool = typer.Option(False, "--always", help="Also write a report when the job had no failure."),
    html: bool = typer.Option(False, "--html", help="Also write the HTML report (slurm-JOBID.slurmdoc.html: one self-contained page with the timeline) next to the text report."),
    all_nodes: bool = typer.Option(False, "--all-nodes", help="In a node Epilog, act on every node of the job, not only its batch host."),
    rules: List[str] = typer.Option([], "--rules", "-r", metavar="DIR", help="Extra rule directory (repeatable)."),
    no_sacct: bool = typer.Option(False, "--no-sacct", help="Do not ask sacct (accounting from the exit code and scontrol only)."),
    traces: Optional[str] = typer.Option(None, "--traces", metavar="PATTERN", help="The ranks' flight-recorder dumps: a directory or a <prefix> of <prefix><rank> files; Slurm's %j %u %x ... patterns expanded, a relative path taken from the job's work dir; read as the job's user (default: $SLURMDOC_TRACES)."),
) -> None:
    """The post-job hook: diagnose the job's log, join it with the accounting record, write slurm-JOBID.slurmdoc.txt/.json (and .html with --html) next to the log."""
    import threading

    def _give_up() -> None:
        _err(f"epilog: job {job_id or os.environ.get('SLURM_JOB_ID', '?')}: budget of {budget:.0f} s exhausted, stopping")
        os._exit(0)

    guard = threading.Timer(max(0.5, budget - 0.2), _give_up)
    guard.daemon = True
    guard.start()
    from slurmdoc.slurm.epilog import EpilogOptions, run_epilog

    opts = EpilogOptions(job_id=job_id, exit_code=exit_code, logs=list(log), out_dir=out_dir, ledger=ledger,
                         webhook=webhook, comment=comment.value if comment else None, budget=budget, always=always, html=html,
                         all_nodes=all_nodes, rule_dirs=list(rules), sacct=not no_sacct,
                         traces=traces if traces is not None else (os.environ.get("SLURMDOC_TRACES") or None))
    res = run_epilog(opts)
    guard.cancel()
    from slurmdoc.slurm.epilog import printable

    # (run_epilog made the summary and the problems printable, one line each; the report's
    # path and the job id are made so here)
    try:
        if res.summary:
            where = printable(f" (report: {res.wrote[-1]})") if res.wrote else ""
            sys.stdout.write(f"slurmdoc: {res.summary}{where}\n")
            sys.stdout.flush()
    except (OSError, ValueError):
        pass
    if res.problems:
        _err(f"epilog: job {printable(res.job_id or '?')}: " + "; ".join(res.problems))
    raise typer.Exit(0)


_VALIDATION_WORDS = [  # the argument parser's validation wording, in the words of this tool
    (re.compile(r"Value error, "), ""),
    (re.compile(r"Input should be greater than or equal to (\S+)"), r"must be at least \1"),
    (re.compile(r"Input should be less than or equal to (\S+)"), r"must be at most \1"),
    (re.compile(r"Input should be greater than (\S+)"), r"must be more than \1"),
    (re.compile(r"Input should be less than (\S+)"), r"must be less than \1"),
    (re.compile(r"Input should be a valid integer[^.\n]*"), "must be a whole number"),
    (re.compile(r"Input should be a valid number[^.\n]*"), "must be a number"),
]


class _PlainErrors:
    """stderr for the argument parser: its messages without validation-library wording."""

    def __init__(self, stream) -> None:
        self._s = stream

    def write(self, text: str) -> int:
        for pat, rep in _VALIDATION_WORDS:
            text = pat.sub(rep, text)
        return self._s.write(text)

    def __getattr__(self, name):
        return getattr(self._s, name)


def main(gc_paused: bool = False) -> None:
    """Console-script entry point: no Python traceback ever reaches the user. `gc_paused`:
    the caller paused the cyclic collector for start-up (slurmdoc.__main__.run), main()
    resumes it as if it had paused it itself."""
    # pydantic looks for plugins (the `pydantic` entry-point group) when it builds the first
    # model, by reading the metadata of every installed distribution: a cost that grows with
    # the environment (a cluster's shared Python holds hundreds). slurmdoc's models are its
    # own, no plugin is meant to watch them (typer turns plugins off for its own adapters
    # too), and this is the command line, not the library. setdefault: whoever sets the
    # variable keeps their choice.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _defer_plugin_loader()
    # a user rule's `[[` or `--` in a class makes Python's regex engines warn at each compile,
    # on stderr, with slurmdoc's source lines: `slurmdoc rules lint` says it once instead
    import warnings

    warnings.filterwarnings("ignore", message=r"Possible (?:nested set|set \w+(?: \w+)?) at position", category=FutureWarning)
    global _GC_PAUSED
    _GC_PAUSED = _GC_PAUSED or gc_paused
    if len(sys.argv) > 1 and sys.argv[1] == "epilog":
        _resume_gc()  # the epilogue's whole run is bounded by --budget: collect from here on
        _main_epilog()
    _pause_gc()
    global _REPORTED
    _REPORTED = False
    sys.stderr = _PlainErrors(sys.stderr)  # type: ignore[assignment]
    try:
        app()
    except SystemExit as e:
        if _REPORTED:
            _leave(e.code)
        raise
    except BrokenPipeError:
        _silence_stdout()
        sys.exit(0)
    except Exception as e:  # a bug in slurmdoc: one line, and a way to see more
        if os.environ.get("SLURMDOC_DEBUG"):
            raise
        _err(f"internal error: {type(e).__name__}: {e} (set SLURMDOC_DEBUG=1 for the traceback)")
        sys.exit(2)


_PLUGIN_LOADER = "pydantic.plugin._loader"
_PLUGINS_OFF = ("__all__", "1", "true")  # the values that turn every pydantic plugin off


def _defer_plugin_loader() -> None:
    """With pydantic's plugins off, its plugin loader is still imported when the first
    validator is built (typer builds one per option), and the loader imports
    importlib.metadata, which pulls in email, zipfile, csv, socket...: about 15 ms of every
    run, to answer "no plugins". A stand-in module answers that itself while the plugins are
    off, and for anything else (the plugins turned back on, a name it does not know) loads
    pydantic's own loader in its place and defers to it, so pydantic behaves as it would."""
    if _PLUGIN_LOADER in sys.modules or os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in _PLUGINS_OFF:
        return
    import types

    stand_in = types.ModuleType(_PLUGIN_LOADER, "slurmdoc's stand-in for pydantic's plugin loader while plugins are off")

    def _real():
        import importlib

        if sys.modules.get(_PLUGIN_LOADER) is stand_in:
            del sys.modules[_PLUGIN_LOADER]
        return importlib.import_module(_PLUGIN_LOADER)

    def get_plugins():
        if os.environ.get("PYDANTIC_DISABLE_PLUGINS") in _PLUGINS_OFF:
            return ()
        return _real().get_plugins()

    def __getattr__(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_real(), name)

    stand_in.get_plugins = get_plugins  # type: ignore[attr-defined]
    stand_in.__getattr__ = __getattr__  # type: ignore[attr-defined]
    sys.modules[_PLUGIN_LOADER] = stand_in


def _leave(code: object) -> None:
    """Exit at once, once `diagnose` has written its report (as `epilog` does). The
    interpreter's own teardown, freeing module by module every object that start-up made,
    is about 10 ms of a small log's run and buys nothing here: the report and any --output
    file are written and closed, slurmdoc registers no exit handler, and what the reader may
    still hold (idle daemon threads, a read-ahead thread) only reads."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a reader that left: the verdict still stands
            pass
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


def _main_epilog() -> None:
    """`slurmdoc epilog` exits 0 whatever happens, a usage error included: a non-zero Epilog
    drains the node. Anything wrong is one line on stderr."""
    try:
        app(standalone_mode=False)
    except SystemExit:
        pass
    except BaseException as e:  # noqa: BLE001 - usage errors (format_message) and anything else
        fmt = getattr(e, "format_message", None)
        msg = fmt() if callable(fmt) else f"internal error: {type(e).__name__}: {e}"
        _err("epilog: " + " ".join(str(msg).split()))
    _leave(0)


if __name__ == "__main__":
    main()

"""The command line: parse arguments, call the library, pick a renderer, map errors to exit codes.

stdout carries the report only; progress, warnings and errors go to stderr.
Exit codes (diagnose): 0 no failure, 1 failure found, 2 usage error or unreadable input,
3 invalid rule pack. `rules test|lint`: 0 clean, 1 a problem found, 2 usage error.
`rules list|show|try`: 0 (try: 1 when the rule matched nothing), 2 usage error, 3 invalid pack.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import List, Optional

import typer

from slurmdoc import __version__
from slurmdoc.errors import SlurmdocError

app = typer.Typer(
    add_completion=False,
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


def _err(msg: str) -> None:
    sys.stderr.write(f"slurmdoc: {msg}\n")
    sys.stderr.flush()


def _version(value: bool) -> None:
    if value:
        print(f"slurmdoc {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    pass


@app.command(epilog="Exit codes: 0 no failure found, 1 failure found, 2 usage error or unreadable input, 3 invalid rule pack.")
def diagnose(
    paths: List[str] = typer.Argument(..., metavar="PATH", help="Log files, directories, globs, or - for stdin (.gz read transparently)."),
    fmt: Fmt = typer.Option(Fmt.text, "--format", "-f", metavar="FORMAT", help="text (terminal), json (the contract), markdown (for a ticket)."),
    rules: List[str] = typer.Option([], "--rules", "-r", metavar="DIR", help="User rule directory (repeatable; default $SLURMDOC_RULES, else the config file); same id replaces a bundled rule."),
    skew: float = typer.Option(1.0, "--skew", min=0.0, max=86400.0, metavar="SECONDS", help="Clock skew tolerated between nodes when ordering failures."),
    progress: Optional[bool] = typer.Option(None, "--progress/--no-progress", help="Progress bar on stderr (default: on for large inputs on a terminal)."),
    exact: bool = typer.Option(False, "--exact", help="Parse every line instead of only the lines near trigger words (much slower; same verdict)."),
) -> None:
    """Name the root-cause failure of a job log, its rank and node, the symptoms it caused, and a fix."""
    from slurmdoc.api import diagnose as api_diagnose

    def run(*a, **kw):
        return api_diagnose(*a, budget=None, **kw) if exact else api_diagnose(*a, **kw)

    for stream in (sys.stdout, sys.stderr):
        try:  # a report must not die on a terminal that cannot show a character
            stream.reconfigure(errors="replace")  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            pass

    try:
        rules = _rule_dirs(rules)
        want = progress if progress is not None else sys.stderr.isatty()
        total = _total_size(paths) if want else 0  # walks directories: only when it may show
        show = want and total > 0 and (progress or total >= PROGRESS_MIN_BYTES)
        if show:
            result = _with_progress(lambda cb: run(paths, rule_dirs=rules, skew=skew, on_bytes=cb), total)
        else:
            result = run(paths, rule_dirs=rules, skew=skew)
    except SlurmdocError as e:
        _err(f"error: {e.one_line()}")
        raise typer.Exit(e.exit_code)
    except KeyboardInterrupt:
        _err("interrupted")
        raise typer.Exit(130)
    for w in result.warnings:
        _err(f"warning: {w}")
    try:
        _emit(result, fmt)
    except BrokenPipeError:  # `slurmdoc ... | head`: the reader left; the verdict still stands
        _silence_stdout()
    raise typer.Exit(1 if result.status == "failed" else 0)


def _rule_dirs(cli_dirs: List[str]) -> List[str]:
    """User rule directories by precedence: --rules, else $SLURMDOC_RULES, else the config file."""
    from slurmdoc.config import resolve_rule_dirs

    return list(resolve_rule_dirs(cli_dirs).dirs)


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


def _with_progress(fn, total: int):
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as prog:
        task = prog.add_task("reading", total=total)
        return fn(lambda n: prog.advance(task, n))


def _emit(result, fmt: Fmt) -> None:
    if fmt == Fmt.json:
        from slurmdoc.report.json_format import render

        sys.stdout.write(render(result))
    elif fmt == Fmt.markdown:
        from slurmdoc.report.markdown import render as render_md

        sys.stdout.write(render_md(result))
    else:
        from rich.console import Console

        from slurmdoc.report.terminal import render as render_term

        tty = sys.stdout.isatty()
        console = Console(
            file=sys.stdout,
            no_color=bool(os.environ.get("NO_COLOR")) or not tty,
            width=None if tty else 120,
            highlight=False,
            soft_wrap=not tty,
        )
        render_term(result, console)
    sys.stdout.flush()


def _text_console():
    from rich.console import Console

    tty = sys.stdout.isatty()
    return Console(
        file=sys.stdout,
        no_color=bool(os.environ.get("NO_COLOR")) or not tty,
        width=None if tty else 120,
        highlight=False,
        soft_wrap=not tty,
    )


@app.command(epilog="Exit codes: 0 every job completed without a failure (or is still running), 1 at least one "
             "job failed, 2 usage error, sacct missing or failing, unreadable --sacct-file, or no job found.")
def triage(
    job_ids: List[str] = typer.Argument(None, metavar="JOBID", help="Job ids: 1234, 1234_7 (array task), 1234+1 (het component); comma lists too."),
    sacct_file: Optional[str] = typer.Option(None, "--sacct-file", metavar="FILE", help="Read saved `sacct -P` or `sacct --json` output instead of running sacct (- for stdin)."),
    fmt: Fmt = typer.Option(Fmt.text, "--format", "-f", metavar="FORMAT", help="text (terminal: one job in detail, many as a table), json, markdown."),
) -> None:
    """Why did these jobs fail, from Slurm's accounting: first failing step, exit codes in words, memory and time against the request, the category."""
    from slurmdoc.api import triage as run
    from slurmdoc.report.triage import render_json, render_markdown, render_text

    try:
        report = run(job_ids or [], sacct_file=sacct_file)
    except SlurmdocError as e:
        _err(f"error: {e.one_line()}")
        raise typer.Exit(e.exit_code)
    for m in report.not_found:
        _err(f"warning: job {m}: not in the accounting records")
    if not report.jobs:
        _err("error: no job found" + (f" in {report.source}" if report.source != "sacct" else ""))
        raise typer.Exit(2)
    try:
        if fmt == Fmt.json:
            sys.stdout.write(render_json(report))
        elif fmt == Fmt.markdown:
            sys.stdout.write(render_markdown(report))
        else:
            render_text(report, _text_console())
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    raise typer.Exit(1 if report.status == "failed" else 0)


# ---- rules: authoring commands --------------------------------------------------------

rules_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="List, show, test, lint and try rules (the bundled pack and your own).",
)
app.add_typer(rules_app, name="rules")

_RULES_OPT = typer.Option([], "--rules", "-r", metavar="DIR", help="User rule directory (repeatable; default $SLURMDOC_RULES, else the config file).")


def _guard(fn):
    """Run a rules command body: library errors become one line and their exit code."""
    try:
        return fn()
    except SlurmdocError as e:
        _err(f"error: {e.one_line()}")
        raise typer.Exit(e.exit_code)


def _out(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()


@rules_app.command("list", epilog="Exit codes: 0 listed, 2 usage error, 3 invalid rule pack.")
def rules_list(rules: List[str] = _RULES_OPT) -> None:
    """Every rule in effect: id, category, role, priority, and the pack it comes from."""
    from slurmdoc.engine.authoring import list_rules, render_list
    from slurmdoc.engine.loader import load_rulebook

    _out(_guard(lambda: render_list(list_rules(load_rulebook(_rule_dirs(rules))))))


@rules_app.command("show", epilog="Exit codes: 0 shown, 2 no such rule, 3 invalid rule pack.")
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


@rules_app.command("test", epilog="Exit codes: 0 every example behaves, 1 an example failed or a rule file does not load, 2 usage error.")
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


@rules_app.command("lint", epilog="Exit codes: 0 no errors (warnings allowed unless --strict), 1 errors found, 2 usage error.")
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


@rules_app.command("try", epilog="Exit codes: 0 the rule matched, 1 it matched nothing, 2 usage error or unreadable input, 3 invalid rule pack.")
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


def main() -> None:
    """Console-script entry point: no Python traceback ever reaches the user."""
    try:
        app()
    except SystemExit:
        raise
    except BrokenPipeError:
        _silence_stdout()
        sys.exit(0)
    except Exception as e:  # a bug in slurmdoc: one line, and a way to see more
        if os.environ.get("SLURMDOC_DEBUG"):
            raise
        _err(f"internal error: {type(e).__name__}: {e} (set SLURMDOC_DEBUG=1 for the traceback)")
        sys.exit(2)


if __name__ == "__main__":
    main()

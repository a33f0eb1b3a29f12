"""`python -m slurmdoc`, and the `slurmdoc` command (the console script calls `run`)."""

import gc


def run() -> None:
    """The command line, with the cyclic collector paused from the first import on: typer,
    pydantic and slurmdoc's own modules make tens of thousands of long-lived objects and next
    to no garbage, and the collector walked them again and again before main() had even
    started (about 10 ms). slurmdoc.cli resumes it when the command's work begins."""
    paused = gc.isenabled()
    gc.disable()
    from slurmdoc.cli import main

    main(gc_paused=paused)


if __name__ == "__main__":
    run()

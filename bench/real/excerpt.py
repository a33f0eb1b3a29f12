"""Take the search tool's header off re-collected excerpts, in place.

    python bench/real/excerpt.py /work/reallogs/dev7 [/work/reallogs/holdout9 ...]

A real log's text (score.py) is what the person pasted into the thread: the excerpt the
search returned for the label's URL and query, without the lines the search puts in front of
it (the repository and issue number, the thread's labels, its title as a `# ` heading, and
the first turn's author and date, or a `[turn N by ...]` marker). The title is the thread's
summary, not the paste: labels were written on the paste alone. Later turns inside the
excerpt (a comment's author line, then its text) stay: a conversation is one of the forms.
Prints how many files it changed; a file without the header is left as it is.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = re.compile(r"[\w.-]+/[\w.-]+ · (?:issue|pull request|pr|discussion) #\d+\b")
AUTHOR = re.compile(r"\S+ · (?:description|comment|review|review comment) · \d{4}-\d\d-\d\d\s*$|\[turn \d+ by [^\]]*\]\s*$")


def strip(text: str) -> str:
    """`text` without its leading header, if it has one."""
    lines = text.split("\n")
    if not lines or not REPO.match(lines[0]):
        return text
    i = 1
    if i < len(lines) and lines[i].startswith("labels: "):
        i += 1
    if i < len(lines) and lines[i].startswith("# "):
        i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i < len(lines) and AUTHOR.match(lines[i]):
        i += 1
    return "\n".join(lines[i:])


def main(argv: list[str]) -> int:
    changed = 0
    for d in argv:
        for p in sorted(Path(d).glob("*.log")):
            text = p.read_text(encoding="utf-8", errors="surrogateescape")
            out = strip(text)
            if out != text:
                p.write_text(out, encoding="utf-8", errors="surrogateescape")
                changed += 1
    print(f"{changed} files had the search's header taken off")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

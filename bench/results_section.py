"""One helper the benchmark scripts share: write a report between two markers of a RESULTS.md.

A script that owns a section of another benchmark's RESULTS.md (the docker halves of bench/grade
and bench/sandbox) replaces only the text between its markers, or appends the marked section.
"""

from __future__ import annotations

from pathlib import Path


def write_section(results: Path, report: str, begin: str, end: str) -> None:
    text = results.read_text() if results.exists() else ""
    if begin in text and end in text:
        text = text.split(begin)[0] + begin + "\n\n" + report + "\n" + end + text.split(end, 1)[1]
    else:
        text = text.rstrip() + f"\n\n{begin}\n\n{report}\n{end}\n"
    results.write_text(text)

"""Small, dependency-free facts about unified diffs that several layers need.

Only what can be read from the diff text without applying it: which files it touches and whether
it is empty. Full patch checking (parsing, size caps, path rules) is the grader's
(`patchgym.harness`).
"""

from __future__ import annotations

import re

_DIFF_GIT = re.compile(r"^diff --git a/(.+?) b/(.+)$")
_PLUS_MINUS = re.compile(r"^(?:\+\+\+|---) (?:[ab]/)?(.+?)(?:\t.*)?$")


def files_touched(diff: str) -> list[str]:
    """Paths (relative, as in the diff) that a unified diff adds, changes, renames or deletes."""
    paths: list[str] = []

    def add(path: str) -> None:
        path = path.strip()
        if path and path != "/dev/null" and path not in paths:
            paths.append(path)

    for line in diff.splitlines():
        match = _DIFF_GIT.match(line)
        if match:
            add(match.group(1))
            add(match.group(2))
            continue
        match = _PLUS_MINUS.match(line)
        if match and not line.startswith("--- a/dev/null") and match.group(1) != "/dev/null":
            add(match.group(1))
    return paths


def is_empty_patch(diff: str | None) -> bool:
    """True when a prediction carries no change at all (None, blank, or whitespace)."""
    return diff is None or not diff.strip()

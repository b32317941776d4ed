"""Inspecting extended attributes: text attached to files that no git command shows.

Every file and directory of the git directories and the working tree is asked for its extended
attributes; any in the `user.` or `trusted.` namespaces (free text a person can set) is reported.
Security labels and ACLs (`security.`, `system.`) are left alone: the system sets those.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from patchgym.scrubber.report import Leak

_FREE_TEXT_NAMESPACES = ("user.", "trusted.")


def _paths_under(root: Path) -> Iterable[Path]:
    yield root
    for directory, subdirs, files in os.walk(root):
        for name in subdirs + files:
            yield Path(directory) / name


def inspect_extended_attributes(roots: list[tuple[Path, str]]) -> list[Leak]:
    """Leaks among the extended attributes of everything under ROOTS ((root, channel) pairs;
    a path under two roots is reported once, under the first)."""
    leaks: list[Leak] = []
    seen: set[Path] = set()
    for root, channel in roots:
        if not root.exists():
            continue
        for path in _paths_under(root):
            if path in seen:
                continue
            seen.add(path)
            try:
                names = os.listxattr(path, follow_symlinks=False)
            except OSError:  # a filesystem without extended attributes, or a vanished file
                continue
            for name in names:
                if name.startswith(_FREE_TEXT_NAMESPACES):
                    leaks.append(Leak(channel, f"{path} has the extended attribute {name}"))
    return leaks

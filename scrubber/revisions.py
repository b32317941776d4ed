"""Turning a user's base SHA (full or abbreviated hex) into the full id of a commit.

Only hexadecimal object names are accepted: a ref name, `HEAD~1` or a branch that happens to be
spelled like an abbreviated SHA (a trap: git prefers refs) never decides what `base` means.
"""

from __future__ import annotations

import re
from pathlib import Path

from patchgym.scrubber.errors import ScrubError
from patchgym.scrubber.git import run_git

_HEX = re.compile(r"^[0-9a-fA-F]{4,64}$")


def object_types(cwd: str | Path, oids: list[str]) -> dict[str, str]:
    """Map each object id to its type ('missing' when the store lacks it)."""
    if not oids:
        return {}
    proc = run_git(
        ["cat-file", "--batch-check=%(objectname) %(objecttype)"],
        cwd=cwd,
        input=("\n".join(oids) + "\n").encode(),
    )
    types: dict[str, str] = {}
    for oid, line in zip(oids, proc.stdout.decode().splitlines()):
        parts = line.split()
        types[oid] = parts[1] if len(parts) == 2 and parts[1] != "missing" else "missing"
    return types


def resolve_commit(cwd: str | Path, base: str, *, where: str) -> str:
    """The full id of the commit named by BASE in the repository at CWD, or a ScrubError."""
    base = (base or "").strip()
    if not _HEX.match(base):
        raise ScrubError(f"base {base!r} is not a commit SHA (expected 4 to 40 hexadecimal digits)")
    base = base.lower()
    if len(base) in (40, 64):
        candidates = [base]
    else:
        proc = run_git(["rev-parse", f"--disambiguate={base}"], cwd=cwd, check=False)
        candidates = proc.stdout.decode().split() if proc.returncode == 0 else []
    types = object_types(cwd, candidates)
    commits = [oid for oid in candidates if types.get(oid) == "commit"]
    if len(commits) == 1:
        return commits[0]
    if len(commits) > 1:
        raise ScrubError(f"base {base} is ambiguous in {where}: it could be any of {', '.join(commits)}")
    others = [f"{oid} is a {types[oid]}" for oid in candidates if types.get(oid, "missing") != "missing"]
    if others:
        raise ScrubError(f"base {base} does not name a commit in {where} ({'; '.join(others)})")
    raise ScrubError(f"base {base} is not a commit in {where}")

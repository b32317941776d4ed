"""Inspecting the index and the working tree of a non-bare repository against base.

The index must equal base's tree, and the working tree must equal the index with nothing
untracked or ignored in it (a `fix.patch` hidden by .gitignore is a leak like any other), nothing
in a submodule's directory, no `.git` below the top level and no empty directory (git status
shows none of them).
Every tracked file is hashed too, since git status trusts stat data that can be forged.
`git status` runs with optional locks off, so the check never rewrites the index.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from patchgym.scrubber.facts import RepoFacts
from patchgym.scrubber.git import run_git
from patchgym.scrubber.report import Leak


# The repository's config must not narrow what git compares: a case-insensitive view on a
# case-sensitive filesystem lets readme.md pass for README.md.
_PLAIN_VIEW = ["-c", "core.ignoreCase=false"]


def inspect_index_and_worktree(facts: RepoFacts, forbidden: dict[str, str]) -> list[Leak]:
    work_tree = facts.paths.work_tree
    if work_tree is None:
        return []
    leaks: list[Leak] = []
    diff = run_git(
        [*_PLAIN_VIEW, "diff-index", "--cached", "--no-renames", "--ignore-submodules=none", "--name-status", "-z",
         facts.base],
        cwd=work_tree,
        check=False,
    )
    if diff.returncode != 0:
        reason = diff.stderr.decode(errors="replace").strip()
        leaks.append(Leak("index", f"the index cannot be compared with base: {reason}"))
    else:
        fields = diff.stdout.decode(errors="replace").split("\0")
        for status, path in zip(fields[0::2], fields[1::2]):
            if status:
                leaks.append(Leak("index", f"index entry {path} differs from base ({status})"))
    flagged = run_git(["ls-files", "-v", "-z"], cwd=work_tree, check=False).stdout.decode(errors="replace")
    for record in flagged.split("\0"):
        tag, _, path = record.partition(" ")
        if path and (tag.islower() or tag == "S"):
            bit = "skip-worktree" if tag == "S" else "assume-unchanged"
            leaks.append(Leak("index", f"index entry {path} is hidden from git status ({bit})"))
    status = run_git(
        [*_PLAIN_VIEW, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=matching",
         "--no-renames", "--ignore-submodules=none"],
        cwd=work_tree,
        check=False,
    )
    if status.returncode != 0:
        leaks.append(Leak("worktree", f"git status failed: {status.stderr.decode(errors='replace').strip()}"))
        return leaks
    leaks += _inspect_places_status_skips(work_tree)
    reported: set[str] = set()
    for record in status.stdout.decode(errors="replace").split("\0"):
        if len(record) < 4:
            continue
        code, path = record[:2], record[3:]
        reported.add(path)
        if code == "??":
            what = "untracked file"
        elif code == "!!":
            what = "ignored file"
        elif code[1] != " ":
            what = f"modified file ({code[1]})"
        else:
            continue  # an index-only difference, reported above
        note = _post_image_note(work_tree, path, forbidden)
        leaks.append(Leak("worktree", f"{what} {path}{note}"))
    for path in _tracked_files_unlike_their_entries(work_tree, facts.hash_len):
        if path not in reported:
            note = _post_image_note(work_tree, path, forbidden)
            leaks.append(Leak("worktree", f"modified file {path} (its stat data hides it from git status){note}"))
    return leaks


def _tracked_files_unlike_their_entries(work_tree: Path, hash_len: int) -> list[str]:
    """Tracked files whose content is not their index entry's blob, found by hashing every one
    (git status trusts matching stat data, which can be forged: same size, old mtime, and
    `core.trustctime=false`). Read-only: the index is not refreshed."""
    listing = run_git(["ls-files", "-s", "-z"], cwd=work_tree, check=False).stdout.decode(errors="surrogateescape")
    regular: dict[str, str] = {}
    differing = []
    for record in listing.split("\0"):
        meta, _, path = record.partition("\t")
        fields = meta.split()
        if len(fields) != 3 or fields[2] != "0":
            continue
        mode, oid, _stage = fields
        target = work_tree / path
        if mode == "120000" and (target.is_symlink() or target.is_file()):
            # a link, or (core.symlinks=false) a plain file holding the link's target
            link = os.fsencode(os.readlink(target)) if target.is_symlink() else target.read_bytes()
            digest = hashlib.new("sha256" if hash_len == 32 else "sha1", b"blob %d\0" % len(link) + link)
            if digest.hexdigest() != oid:
                differing.append(path)
        elif mode in ("100644", "100755") and target.is_file() and not target.is_symlink():
            regular[path] = oid
    for path in [path for path in regular if "\n" in path or path.startswith('"')]:
        one = run_git(["hash-object", "--", path], cwd=work_tree, check=False)  # not line-safe below
        if one.stdout.decode().strip() != regular.pop(path):
            differing.append(path)
    if regular:
        paths = list(regular)
        stdin = "".join(f"{path}\n" for path in paths).encode(errors="surrogateescape")
        hashed = run_git(["hash-object", "--stdin-paths"], cwd=work_tree, input=stdin, check=False)
        found = hashed.stdout.decode().split()
        if hashed.returncode != 0 or len(found) != len(paths):
            return differing + paths
        differing += [path for path, oid in zip(paths, found) if regular[path] != oid]
    return differing


def _post_image_note(work_tree: Path, path: str, forbidden: dict[str, str]) -> str:
    if not forbidden or not (work_tree / path).is_file():
        return ""
    proc = run_git(["hash-object", "--no-filters", "--", path], cwd=work_tree, check=False)
    oid = proc.stdout.decode().strip()
    return f": it holds the post-image of {forbidden[oid]}" if oid in forbidden else ""


def _inspect_places_status_skips(work_tree: Path) -> list[Leak]:
    """What `git status` never looks at: anything named `.git` below the top level (a nested
    repository, or just a directory of that name), the contents of a gitlink's directory (a
    submodule's checkout, populated or not), and empty directories (whose names can be read)."""
    leaks = []
    listing = run_git(["ls-files", "-s", "-z"], cwd=work_tree, check=False).stdout.decode(errors="surrogateescape")
    gitlinks = {record.partition("\t")[2] for record in listing.split("\0") if record.startswith("160000 ")}
    for directory, subdirs, files in os.walk(work_tree):
        here = Path(directory)
        relative = here.relative_to(work_tree).as_posix()
        if relative == ".":
            subdirs[:] = [name for name in subdirs if name != ".git"]
            files = [name for name in files if name != ".git"]
        elif relative in gitlinks:
            contents = sorted(subdirs + files)
            if contents:
                shown = ", ".join(contents[:5]) + (", ..." if len(contents) > 5 else "")
                detail = f"submodule path {relative} is not empty ({shown}); git status does not look inside"
                leaks.append(Leak("modules", detail))
            subdirs[:] = []
            continue
        if relative != "." and not subdirs and not files:
            leaks.append(Leak("worktree", f"empty directory {relative} (git status does not list it)"))
        for name in [*subdirs, *files]:
            if name.lower() == ".git":
                path = name if relative == "." else f"{relative}/{name}"
                detail = f"{path} is hidden from git status (a nested repository or a directory named .git)"
                leaks.append(Leak("worktree", detail))
        subdirs[:] = [name for name in subdirs if name.lower() != ".git"]
    return leaks

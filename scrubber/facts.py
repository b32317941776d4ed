"""The object-level facts every inspection of `check` works from.

`types` is every object the store holds (loose, packed, in alternates), from git's own listing;
`reachable` is everything reachable from the base commit. Both are computed with replace refs,
grafts, commit-graph and multi-pack-index ignored, so none of them can bend the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patchgym.scrubber.errors import ScrubError
from patchgym.scrubber.git import RepoPaths, git_text, run_git

# Parse objects from the packs themselves, not from files that could have been planted.
DISTRUST = ["-c", "core.commitGraph=false", "-c", "core.multiPackIndex=false"]


@dataclass(frozen=True)
class RepoFacts:
    paths: RepoPaths
    cwd: Path
    base: str
    hash_len: int
    types: dict[str, str]
    reachable: frozenset[str]
    allowed_commits: frozenset[str]

    @property
    def null_oid(self) -> str:
        return "0" * (self.hash_len * 2)

    def is_allowed_commit(self, oid: str) -> bool:
        return oid in self.allowed_commits


def repo_cwd(paths: RepoPaths) -> Path:
    return paths.work_tree if paths.work_tree is not None else paths.git_dir


def gather_facts(paths: RepoPaths, base: str) -> RepoFacts:
    cwd = repo_cwd(paths)
    object_format = git_text(["rev-parse", "--show-object-format"], cwd=cwd)
    hash_len = 32 if object_format == "sha256" else 20
    listing = run_git(
        [*DISTRUST, "cat-file", "--batch-all-objects", "--unordered", "--batch-check=%(objectname) %(objecttype)"],
        cwd=cwd,
        check=False,
    )
    if listing.returncode != 0:
        detail = listing.stderr.decode(errors="replace").strip()
        raise ScrubError(f"cannot list the objects of {cwd}: {detail}")
    types: dict[str, str] = {}
    for line in listing.stdout.decode().splitlines():
        oid, _, kind = line.partition(" ")
        types[oid] = kind
    walk = run_git([*DISTRUST, "rev-list", "--objects", "--no-object-names", base], cwd=cwd, check=False)
    if walk.returncode != 0:
        detail = walk.stderr.decode(errors="replace").strip()
        raise ScrubError(f"cannot walk the history of {base} in {cwd} (is it complete?): {detail}")
    reachable = frozenset(walk.stdout.decode().split())
    allowed_commits = frozenset(oid for oid in reachable if types.get(oid) == "commit")
    return RepoFacts(paths, cwd, base, hash_len, types, reachable, allowed_commits)

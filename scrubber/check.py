"""`check`: prove, on any repository, that nothing outside the past of a base commit survives.

It gathers the object-level facts (every object in the store, everything reachable from base)
and runs each inspection: refs and reflogs, the git directory's files and config, the object
store's files, the index and working tree, extended attributes, and with a forbidden patch (the
gold fix) a search of every blob, reachable or not, for the fixed files' contents.

After `scrub(..., squash=True)` base itself is absent; `check` then accepts a root commit at HEAD
whose `Squashed-from:` trailer names base, and checks against that commit.
"""

from __future__ import annotations

from pathlib import Path

from patchgym.scrubber.errors import ScrubError
from patchgym.scrubber.facts import RepoFacts, gather_facts, repo_cwd
from patchgym.scrubber.git import git_text, locate_repo, run_git
from patchgym.scrubber.inspect_gitdir import inspect_git_dir
from patchgym.scrubber.inspect_objects import inspect_objects
from patchgym.scrubber.inspect_refs import inspect_refs
from patchgym.scrubber.inspect_worktree import inspect_index_and_worktree
from patchgym.scrubber.inspect_xattrs import inspect_extended_attributes
from patchgym.scrubber.postimages import post_images
from patchgym.scrubber.report import CheckResult, Leak
from patchgym.scrubber.revisions import resolve_commit
from patchgym.scrubber.scrub import SQUASH_TRAILER


def check(
    repo: str | Path,
    base: str,
    *,
    forbid_patch: str | None = None,
    include_worktree: bool = True,
) -> CheckResult:
    """Inspect REPO against BASE (full or abbreviated SHA); `forbid_patch` is a unified diff whose
    post-images must not be anywhere in the store. `include_worktree=False` skips the index and
    working-tree inspection (for a repository something was deliberately built in)."""
    paths = locate_repo(repo, role="repository")
    cwd = repo_cwd(paths)
    base_commit, squashed_from = _effective_base(cwd, base)
    facts = gather_facts(paths, base_commit)
    forbidden = post_images(cwd, base_commit, forbid_patch) if forbid_patch is not None else {}
    leaks: list[Leak] = []
    ref_leaks, refs_checked = inspect_refs(facts)
    leaks += ref_leaks
    known_message = _known_messages(facts)
    leaks += inspect_git_dir(paths.common_dir, base=base_commit, known_message=known_message)
    if paths.git_dir != paths.common_dir:
        leaks += inspect_git_dir(paths.git_dir, base=base_commit, known_message=known_message)
    leaks += inspect_objects(facts)
    leaks += _inspect_post_images(facts, forbidden)
    if include_worktree:
        leaks += inspect_index_and_worktree(facts, forbidden)
    xattr_roots = [(paths.common_dir, "unknown"), (paths.git_dir, "unknown")]
    if include_worktree and paths.work_tree is not None:
        xattr_roots.append((paths.work_tree, "worktree"))
    leaks += inspect_extended_attributes(xattr_roots)
    return CheckResult(
        repo=Path(repo),
        base_commit=base_commit,
        squashed_from=squashed_from,
        leaks=leaks,
        objects_checked=len(facts.types),
        refs_checked=refs_checked,
    )


def _effective_base(cwd: Path, base: str) -> tuple[str, str | None]:
    """(commit to check against, base when that commit is a squash of it)."""
    try:
        return resolve_commit(cwd, base, where=f"repository {cwd}"), None
    except ScrubError as missing:
        head = run_git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd=cwd, check=False)
        if head.returncode != 0:
            raise missing
        head_id = head.stdout.decode().strip()
        raw = run_git(["cat-file", "commit", head_id], cwd=cwd).stdout.decode(errors="replace")
        header, _, message = raw.partition("\n\n")
        is_root = not any(line.startswith("parent ") for line in header.splitlines())
        wanted = base.strip().lower()
        for line in message.splitlines():
            key, _, value = line.partition(":")
            value = value.strip().lower()
            if key == SQUASH_TRAILER and is_root and len(wanted) >= 4 and value.startswith(wanted):
                return head_id, value
        raise missing


def _known_messages(facts: RepoFacts):
    """A test for 'is this the message of base or an ancestor' (history read only if asked)."""
    cache: list[set[str]] = []

    def known(text: str) -> bool:
        if not cache:
            log = run_git(["log", "--format=%B%x00", facts.base], cwd=facts.cwd).stdout.decode(errors="replace")
            cache.append({message.strip() for message in log.split("\0")})
        return text in cache[0]

    return known


def _inspect_post_images(facts: RepoFacts, forbidden: dict[str, str]) -> list[Leak]:
    leaks = []
    for oid, path in forbidden.items():
        if facts.types.get(oid) != "blob":
            continue
        if oid in facts.reachable:
            holders = _commits_holding(facts, oid)
            where = ", ".join(f"commit {commit}" for commit in holders) or "the history of base"
            leaks.append(Leak("post-image", f"post-image of {path} (blob {oid}) found in {where}"))
        else:
            leaks.append(Leak("post-image", f"post-image of {path} (blob {oid}) is in the store, unreachable"))
    return leaks


def _commits_holding(facts: RepoFacts, oid: str) -> list[str]:
    """Commits in base's history whose tree holds blob OID (where it was added or kept)."""
    changed = git_text(["log", "--format=%H", f"--find-object={oid}", facts.base], cwd=facts.cwd).split()
    holders = []
    for commit in changed:
        listing = run_git(["ls-tree", "-r", commit], cwd=facts.cwd).stdout.decode(errors="replace")
        if oid in listing:
            holders.append(commit)
    return holders

"""`scrub`: write a new repository holding a base commit and nothing that came after it.

The new repository is built, never copied: `git init` with no templates (so no hooks), then
`git pack-objects --revs` run in the source writes one pack of exactly the objects reachable from
base (with its index) straight into the new store (no other refs, tags, notes, reflogs, stash,
loose or dangling objects exist there to travel), then `main` is set and checked out. A shallow
source is fetched from instead (`git fetch` of base alone, which also records the shallow
boundary). The source is only read.

With `squash=True` only base's tree is fetched and a single root commit is made from it. Its id
differs from base: `ScrubResult.head` holds it, grading must diff against it, and its message
carries a `Squashed-from: <base>` trailer so `check` accepts either id as the base.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from patchgym.scrubber.errors import ScrubError
from patchgym.scrubber.facts import DISTRUST
from patchgym.scrubber.git import git_text, run_git
from patchgym.scrubber.revisions import resolve_commit
from patchgym.scrubber.source import OpenedSource, open_source

BRANCH = "main"
SQUASH_TRAILER = "Squashed-from"
_NO_REFLOG = ["-c", "core.logAllRefUpdates=false"]
# git clears repository-scoped variables (grafts, replace refs, -c settings) before it starts
# upload-pack in the source, so they are set again inside the command it runs there.
UPLOAD_PACK = (
    "env GIT_GRAFT_FILE=/nonexistent/patchgym-no-grafts GIT_NO_REPLACE_OBJECTS=1 "
    "git -c safe.directory='*' -c uploadpack.allowAnySHA1InWant=true upload-pack"
)


@dataclass(frozen=True)
class ScrubResult:
    """What a scrub produced. `head` is what refs/heads/main points at: base, or the squash commit."""

    src: Path
    dest: Path
    base: str
    head: str
    squashed: bool
    branch: str
    seconds: float


def scrub(src: str | Path, dest: str | Path, base: str, *, squash: bool = False) -> ScrubResult:
    """Write a repository at DEST whose only branch, `main`, is BASE (full or abbreviated SHA) of SRC.

    SRC is a local repository (bare or not) or a bundle file and is never modified. DEST must not
    exist or be an empty directory. Raises ScrubError for bad input.
    """
    started = time.perf_counter()
    src_path = Path(src).expanduser()
    dest_path = Path(dest).expanduser().absolute()
    _refuse_unusable_dest(src_path, dest_path)
    created = not dest_path.exists()
    dest_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open_source(src_path, scratch_parent=dest_path.parent) as source:
            base_id = resolve_commit(source.cwd, base, where=source.label)
            object_format = git_text(["rev-parse", "--show-object-format"], cwd=source.cwd)
            dest_path.mkdir(exist_ok=True)
            run_git(["init", "-q", "--template=", f"--object-format={object_format}", "-b", BRANCH, str(dest_path)])
            shallow = git_text(["rev-parse", "--is-shallow-repository"], cwd=source.cwd) == "true"
            if squash:
                head = _copy_squashed(source, base_id, dest_path, shallow)
            elif shallow:
                _fetch(source, base_id, f"{base_id}:refs/heads/{BRANCH}", dest_path)
                head = base_id
            else:
                _pack_reachable(source, base_id, dest_path)
                run_git([*_NO_REFLOG, "update-ref", f"refs/heads/{BRANCH}", base_id], cwd=dest_path)
                head = base_id
        _tidy_git_dir(dest_path / ".git")
        run_git(["read-tree", "--reset", "-u", "HEAD"], cwd=dest_path)
        checked_out = git_text(["rev-parse", "--verify", "HEAD"], cwd=dest_path)
        if checked_out != head:
            raise ScrubError(f"scrubbed repository {dest_path} ended at {checked_out}, expected {head}")
    except BaseException:
        _discard(dest_path, created)
        raise
    return ScrubResult(
        src=src_path,
        dest=dest_path,
        base=base_id,
        head=head,
        squashed=squash,
        branch=BRANCH,
        seconds=time.perf_counter() - started,
    )


def _refuse_unusable_dest(src: Path, dest: Path) -> None:
    if dest.exists():
        if not dest.is_dir():
            raise ScrubError(f"destination {dest} exists and is not a directory")
        if any(dest.iterdir()):
            raise ScrubError(f"destination {dest} exists and is not empty")
    if src.exists() and src.is_dir():
        src_resolved, dest_resolved = src.resolve(), dest.resolve()
        if dest_resolved == src_resolved or dest_resolved.is_relative_to(src_resolved):
            raise ScrubError(f"destination {dest} lies inside the source {src}")


def _fetch(source: OpenedSource, want: str, refspec_or_oid: str, dest: Path) -> None:
    """Fetch WANT (and what it reaches) from the source; no FETCH_HEAD, tags, reflogs or gc."""
    proc = run_git(
        [
            *_NO_REFLOG,
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--update-head-ok",
            "--no-auto-gc",
            "--no-recurse-submodules",
            "--no-show-forced-updates",
            "--update-shallow",
            f"--upload-pack={UPLOAD_PACK}",
            str(source.fetch_url),
            refspec_or_oid,
        ],
        cwd=dest,
        check=False,
    )
    if proc.returncode != 0:
        detail = proc.stderr.decode(errors="replace").strip()
        raise ScrubError(f"could not fetch {want} from {source.label}: {detail}")


def _pack_reachable(source: OpenedSource, want: str, dest: Path) -> None:
    """Write one pack (and index) of everything reachable from WANT into DEST's object store.

    `git pack-objects` runs in DEST and reads the source's store as an alternate given through
    the environment only (no alternates file is written, and git writes its temporary files in
    DEST, never in the source); it reuses the source's stored deltas, and grafts and replace refs
    are ignored (see git.isolated_env), and so are its commit-graph and multi-pack-index files:
    parents and objects are read from the objects themselves."""
    pack_dir = dest / ".git" / "objects" / "pack"
    pack_dir.mkdir(parents=True, exist_ok=True)
    proc = run_git(
        [*DISTRUST, "pack-objects", "--revs", "--quiet", "--delta-base-offset", str(pack_dir / "pack")],
        cwd=dest,
        input=f"{want}\n".encode(),
        check=False,
        extra_env={"GIT_ALTERNATE_OBJECT_DIRECTORIES": quote_alternate(source.objects_dir)},
    )
    if proc.returncode != 0:
        detail = proc.stderr.decode(errors="replace").strip()
        raise ScrubError(f"could not copy the objects of {want} from {source.label}: {detail}")


def quote_alternate(path: Path) -> str:
    """PATH as one entry of GIT_ALTERNATE_OBJECT_DIRECTORIES (colon-separated; a C-quoted entry may
    hold colons)."""
    text = str(path)
    if not any(char in text for char in ':"\\\n\t'):
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def _copy_squashed(source: OpenedSource, base_id: str, dest: Path, shallow: bool) -> str:
    """Copy base's tree only and make the single root commit; return its id."""
    tree = git_text(["rev-parse", "--verify", f"{base_id}^{{tree}}"], cwd=source.cwd)
    raw = run_git(["cat-file", "commit", base_id], cwd=source.cwd).stdout
    if shallow:
        _fetch(source, base_id, tree, dest)
    else:
        _pack_reachable(source, tree, dest)
    commit = squash_commit_object(raw, tree, base_id)
    head = git_text(["hash-object", "-t", "commit", "-w", "--stdin"], cwd=dest, input=commit)
    run_git([*_NO_REFLOG, "update-ref", f"refs/heads/{BRANCH}", head], cwd=dest)
    return head


def squash_commit_object(base_raw: bytes, tree: str, base_id: str) -> bytes:
    """A parentless commit of TREE that keeps base's author and committer lines (so it is stable)."""
    header = base_raw.split(b"\n\n", 1)[0]
    identities = [line for line in header.split(b"\n") if line.startswith((b"author ", b"committer "))]
    message = f"Snapshot of {base_id[:12]}\n\n{SQUASH_TRAILER}: {base_id}\n".encode()
    return b"tree " + tree.encode() + b"\n" + b"\n".join(identities) + b"\n\n" + message


def _tidy_git_dir(git_dir: Path) -> None:
    """Remove what init/fetch may leave that a scrubbed repository must not have."""
    for name in ("FETCH_HEAD", "ORIG_HEAD", "logs", "hooks", "description"):
        target = git_dir / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    (git_dir / "info").mkdir(exist_ok=True)
    for leftover in (git_dir / "objects" / "pack").glob("*.keep"):
        leftover.unlink()


def _discard(dest: Path, created: bool) -> None:
    """Undo a failed scrub: remove DEST if we made it, else empty it again."""
    if not dest.exists():
        return
    if created:
        shutil.rmtree(dest, ignore_errors=True)
        return
    for child in dest.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)

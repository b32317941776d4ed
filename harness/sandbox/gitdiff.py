"""The diff of a sandbox's /testbed against base_commit, computed with trusted git state only.

The work tree is agent-controlled, including its `.git`: hooks, `core.fsmonitor` (a command git
runs), filter drivers, `core.sshCommand`, alternates pointing anywhere, a forged index or HEAD.
Running git with that repository would run the agent's code on the host. So git never looks at it:

* `GIT_DIR` is the prepared snapshot's own `.git` (read-only lower layer, written by preparation),
  used read-only: the index is a temporary copy (`GIT_INDEX_FILE`) and new objects go to a
  temporary object directory (`GIT_OBJECT_DIRECTORY`) that borrows the pristine objects through
  `GIT_ALTERNATE_OBJECT_DIRECTORIES`;
* system and global config are off (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`), and the
  settings that run commands or write beside the repository are forced off on the command line
  (`core.hooksPath=/dev/null`, `core.fsmonitor=false`, no split index or untracked cache, no auto gc);
* git itself never adds a path named `.git`, so the work tree's `.git` stays out of the diff;
  symlinks are recorded as links (their target text), never followed;
* but git does follow a `.git` *below* the top (`sub/.git`, a directory or a `gitdir: <path>` file)
  to read an embedded repository's HEAD: run with the host's filesystem in view, that reads any
  host repository (or blocks on a planted FIFO). A caller that can confine git (the local backend
  runs it in the sandbox itself, seeing only the sandbox, the trusted `.git` and the scratch
  directory bound in) passes `confined`: the paths git sees them at, and `spawn` receives the
  binds to make.

`git add -A` then `git diff --cached --binary --full-index <base>` gives new, deleted, binary and
mode changes. Starting from a copy of the snapshot's index lets git skip hashing unchanged files.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

HARDENING = [
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "core.untrackedCache=false",
    "-c", "core.splitIndex=false",
    "-c", "core.sparseCheckout=false",
    "-c", "core.attributesFile=/dev/null",
    "-c", "core.excludesFile=/dev/null",
    "-c", "core.symlinks=true",
    "-c", "core.fileMode=true",
    "-c", "core.autocrlf=false",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
    "-c", "safe.directory=*",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
    "-c", "diff.relative=false",
    "-c", "diff.renames=false",
]

DIFF_ARGS = [
    "diff", "--cached", "--binary", "--full-index", "--no-color", "--no-ext-diff", "--no-textconv",
    "--no-renames", "--src-prefix=a/", "--dst-prefix=b/",
]

Spawner = Callable[..., subprocess.Popen]


class DiffError(RuntimeError):
    pass


@dataclass(frozen=True)
class Confinement:
    """Where a confined git sees the trusted `.git` (read-only) and the scratch directory."""

    git_dir: str
    scratch: str


def trusted_git_dir(repo_dir: Path) -> Path:
    git_dir = repo_dir / ".git"
    if not git_dir.is_dir():
        raise DiffError(f"the prepared snapshot {repo_dir} has no .git directory to diff against")
    return git_dir


def git_env(git_dir: Path, work_tree: str, scratch: Path) -> dict[str, str]:
    return {
        "GIT_DIR": str(git_dir),
        "GIT_WORK_TREE": work_tree,
        "GIT_INDEX_FILE": str(scratch / "index"),
        "GIT_OBJECT_DIRECTORY": str(scratch / "objects"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(git_dir / "objects"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "HOME": str(scratch),
        "XDG_CONFIG_HOME": str(scratch),
        "LC_ALL": "C",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
    }


def _run(spawn: Spawner, argv: list[str], env: dict[str, str], cwd: str, timeout_s: float, **extra: object) -> bytes:
    proc = spawn(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **extra)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise DiffError(f"`{' '.join(argv[-3:])}` took longer than {timeout_s:.0f}s")
    if proc.returncode != 0:
        raise DiffError(f"git failed ({proc.returncode}): {err.decode(errors='replace').strip()[:2000]}")
    return out


def diff_worktree(
    repo_dir: Path,
    work_tree: str,
    base_commit: str,
    scratch_parent: Path,
    *,
    spawn: Spawner = subprocess.Popen,
    git: str = "git",
    timeout_s: float = 600.0,
    confined: Confinement | None = None,
) -> str:
    """The git diff of `work_tree` against `base_commit`, using only `repo_dir`'s trusted .git.

    `spawn` starts git (the local backend starts it inside the sandbox's mount namespace, where
    `work_tree` is mounted); `scratch_parent` holds the temporary index and objects."""
    git_dir = trusted_git_dir(repo_dir)
    scratch = Path(tempfile.mkdtemp(prefix="diff-", dir=scratch_parent))
    try:
        (scratch / "objects").mkdir()
        pristine_index = git_dir / "index"
        if pristine_index.is_file():
            # With its modification time (copy2): git re-reads an entry whose file is as new as the
            # index ("racily clean"), and judges the rest by size and whole-second times (no
            # USE_NSEC in Debian's git). A copy dated now hid a same-size edit made in the second
            # the snapshot was checked out: an empty diff for a real fix, reward 0 (1 in ~20
            # episodes of the toy task under load, right after its preparation).
            shutil.copy2(pristine_index, scratch / "index")
        extra: dict[str, object] = {}
        if confined is None:
            env = git_env(git_dir, work_tree, scratch)
        else:
            env = git_env(Path(confined.git_dir), work_tree, Path(confined.scratch))
            extra["binds"] = ((str(git_dir), confined.git_dir, True), (str(scratch), confined.scratch, False))
        # Run from the top of the work tree so "add -A" covers all of it.
        _run(spawn, [git, *HARDENING, "add", "-A"], env, work_tree, timeout_s, **extra)
        out = _run(spawn, [git, *HARDENING, *DIFF_ARGS, base_commit, "--"], env, work_tree, timeout_s, **extra)
        # Bytes that are not UTF-8 (a latin-1 source file) survive as surrogates, so that
        # `.encode("utf-8", "surrogateescape")` gives back the exact patch.
        return out.decode("utf-8", errors="surrogateescape")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


__all__ = ["Confinement", "DiffError", "diff_worktree", "git_env", "HARDENING", "DIFF_ARGS", "trusted_git_dir"]

"""Running real git in isolation: no system or global config, no inherited GIT_* variables.

Everything the scrubber does goes through `run_git`, so a user's `~/.gitconfig` (hooksPath,
templates, URL rewrites), a stray `GIT_DIR` or `GIT_ALTERNATE_OBJECT_DIRECTORIES` in the
environment, replace refs or a grafts file can neither inject objects into a scrubbed repository
nor change what the checker believes is reachable.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from patchgym.scrubber.errors import ScrubError

# Settings passed as command-line scope config (GIT_CONFIG_COUNT), so they also reach the
# `git upload-pack` that `git fetch` spawns inside the source repository, and override its config.
_FORCED_CONFIG: dict[str, str] = {
    "safe.directory": "*",
    "uploadpack.allowAnySHA1InWant": "true",
    "protocol.version": "2",
    "gc.auto": "0",
    "maintenance.auto": "false",
    "fetch.writeCommitGraph": "false",
    "core.fsmonitor": "false",
    "core.untrackedCache": "false",
    "init.defaultBranch": "main",
    "advice.detachedHead": "false",
}


def isolated_env() -> dict[str, str]:
    """The environment every git subprocess runs with."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_NO_REPLACE_OBJECTS": "1",
            # A path that never exists: grafts in any repository are ignored.
            "GIT_GRAFT_FILE": "/nonexistent/patchgym-no-grafts",
            "GIT_ALLOW_PROTOCOL": "file",
            "GIT_OPTIONAL_LOCKS": "0",
            "LC_ALL": "C",
            "LANG": "C",
        }
    )
    env["GIT_CONFIG_COUNT"] = str(len(_FORCED_CONFIG))
    for index, (key, value) in enumerate(_FORCED_CONFIG.items()):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


_ENV = isolated_env()


def run_git(
    args: list[str],
    *,
    cwd: str | Path | None = None,
    input: bytes | None = None,
    check: bool = True,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run `git ARGS` (bytes in, bytes out). With check, a failure raises ScrubError with stderr."""
    env = _ENV if not extra_env else {**_ENV, **extra_env}
    proc = subprocess.run(
        ["git", *args],
        cwd=cwd,
        input=input,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    if check and proc.returncode != 0:
        message = proc.stderr.decode(errors="replace").strip() or f"exit status {proc.returncode}"
        raise ScrubError(f"git {' '.join(args[:3])} failed: {message}")
    return proc


def git_text(args: list[str], **kwargs) -> str:
    """Run git and return its stdout as stripped text."""
    return run_git(args, **kwargs).stdout.decode(errors="replace").strip()


@dataclass(frozen=True)
class RepoPaths:
    """Where a repository keeps things: its git dir, the common dir (objects, refs) and worktree."""

    git_dir: Path
    common_dir: Path
    work_tree: Path | None

    @property
    def is_bare(self) -> bool:
        return self.work_tree is None


def locate_repo(path: str | Path, *, role: str = "repository") -> RepoPaths:
    """Find the git dir of a repository at PATH (bare, non-bare, or a linked worktree)."""
    path = Path(path)
    if not path.exists():
        raise ScrubError(f"{role} {path} does not exist")
    if not path.is_dir():
        raise ScrubError(f"{role} {path} is not a directory")
    proc = run_git(
        ["rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir", "--is-bare-repository"],
        cwd=path,
        check=False,
    )
    if proc.returncode != 0:
        reason = proc.stderr.decode(errors="replace").strip().splitlines()
        detail = f" ({reason[0]})" if reason and "not a git repository" not in reason[0] else ""
        raise ScrubError(f"{role} {path} is not a git repository{detail}")
    git_dir, common_dir, bare = proc.stdout.decode().splitlines()[:3]
    git_dir_path = Path(git_dir).resolve()
    # rev-parse searches upwards; a directory inside some other repository is not a repository.
    inside = path.resolve()
    if bare == "true":
        if git_dir_path != inside:
            raise ScrubError(f"{role} {path} is not a git repository (it is inside {git_dir_path})")
        return RepoPaths(git_dir_path, Path(common_dir).resolve(), None)
    top = run_git(["rev-parse", "--show-toplevel"], cwd=path, check=False)
    work_tree = Path(top.stdout.decode().strip()).resolve() if top.returncode == 0 else None
    if work_tree is None:
        # e.g. PATH is a .git directory of a non-bare repository
        if git_dir_path == inside:
            return RepoPaths(git_dir_path, Path(common_dir).resolve(), None)
        raise ScrubError(f"{role} {path} is not a git repository")
    if work_tree != inside:
        raise ScrubError(f"{role} {path} is not a git repository (it lies inside the one at {work_tree})")
    return RepoPaths(git_dir_path, Path(common_dir).resolve(), work_tree)

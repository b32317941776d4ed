"""A small repository with a past and a future, and a snapshot of a directory, for tests and demos.

`build_sample_history` makes a real git repository (fixed identities and dates, so ids are stable)
whose `main` runs past a base commit holding a bug into a commit that fixes it. With
`injected_bug=True` the bug is injected at base (as in synthetic tasks): base's parent already
holds the fixed file, which only a squash can hide.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from patchgym.scrubber.git import git_text, run_git

IDENTITY = {
    "GIT_AUTHOR_NAME": "Sample Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_COMMITTER_NAME": "Sample Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.invalid",
}

FIXED_PATH = "calc/ops.py"

_OPS_HEAD = '''"""Small numeric helpers."""


def mean(values):
    return sum(values) / len(values)


'''
_CLAMP_FIXED = '''def clamp(value, low, high):
    """Limit VALUE to the closed range [LOW, HIGH]."""
    if value < low:
        return low
    if value > high:
        return high
    return value
'''
_CLAMP_BUGGY = _CLAMP_FIXED.replace("value > high", "value >= high + 1")
_TEST_OPS = '''from calc.ops import clamp, mean


def test_mean():
    assert mean([1, 2, 3]) == 2


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5
'''


@dataclass(frozen=True)
class SampleHistory:
    repo: Path
    base: str
    ancestors: list[str]
    future: list[str]
    fix_patch: str
    fixed_path: str = FIXED_PATH


def git(repo: Path, *args: str, stdin: bytes | None = None, date: int = 0) -> str:
    """Run git in REPO with the sample identity (and commit date offset DATE), return stdout."""
    stamp = f"{1_700_000_000 + date * 3600} +0000"
    env = {**IDENTITY, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    return git_text(list(args), cwd=repo, input=stdin, extra_env=env)


def _commit(repo: Path, files: dict[str, str], message: str, date: int) -> str:
    for path, content in files.items():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, date=date)
    return git(repo, "rev-parse", "HEAD")


def build_sample_history(repo: Path, *, injected_bug: bool = False) -> SampleHistory:
    """Create REPO (a new non-bare repository) and commit a past, a base and a future into it."""
    run_git(["init", "-q", "-b", "main", str(repo)])
    ancestors = [
        _commit(
            repo,
            {"README.md": "# calc\n", "calc/__init__.py": "", FIXED_PATH: _OPS_HEAD, "tests/test_ops.py": _TEST_OPS},
            "Start calc with mean",
            1,
        )
    ]
    if injected_bug:
        ancestors.append(_commit(repo, {FIXED_PATH: _OPS_HEAD + _CLAMP_FIXED}, "Add clamp", 2))
        base = _commit(repo, {FIXED_PATH: _OPS_HEAD + _CLAMP_BUGGY}, "Tidy clamp", 3)
    else:
        ancestors.append(_commit(repo, {"README.md": "# calc\n\nNumeric helpers.\n"}, "Describe calc", 2))
        base = _commit(repo, {FIXED_PATH: _OPS_HEAD + _CLAMP_BUGGY}, "Add clamp", 3)
    future = [
        _commit(repo, {FIXED_PATH: _OPS_HEAD + _CLAMP_FIXED}, "Fix clamp at the upper bound", 4),
        _commit(repo, {"README.md": "# calc 1.1\n\nNumeric helpers, clamp fixed.\n"}, "Release 1.1", 5),
    ]
    fix_patch = run_git(["diff", base, future[0], "--", FIXED_PATH], cwd=repo).stdout.decode()
    return SampleHistory(repo=repo, base=base, ancestors=ancestors, future=future, fix_patch=fix_patch)


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ROOT with its type, mode, size, mtime and content hash (to prove no change)."""
    found: dict[str, tuple] = {}
    for directory, subdirs, files in os.walk(root):
        for name in subdirs + files:
            path = Path(directory) / name
            info = path.lstat()
            digest = ""
            if path.is_file() and not path.is_symlink():
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            elif path.is_symlink():
                digest = os.readlink(path)
            found[path.relative_to(root).as_posix()] = (info.st_mode, info.st_size, info.st_mtime_ns, digest)
    return found

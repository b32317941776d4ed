"""Task preparation: scrubbed snapshot + environment, cached by key, safe to run concurrently."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from patchgym.tasks.environment import SetupError
from patchgym.tasks.model import Task
from patchgym.tasks.prepare import PrepareError, prepare_task, prepare_tasks

pytestmark = pytest.mark.skipif(subprocess.run(["which", "bwrap"], capture_output=True).returncode != 0,
                                reason="bubblewrap is not installed")

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
       "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent", "PATH": "/usr/bin:/bin"}

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=ENV).stdout.strip()


def commit_file(repo: Path, name: str, text: str, message: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def make_repo(tmp_path: Path, *, injected: bool = False) -> tuple[Path, str, str]:
    """A repo whose base holds the bug and whose future holds the fix; returns (repo, base, gold)."""
    repo = tmp_path / "src"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit_file(repo, "README", "calc\n", "start")
    if injected:
        commit_file(repo, "calc.py", FIXED, "working add")
    base = commit_file(repo, "calc.py", BUGGY, "add (the bug)")
    (repo / "calc.py").write_text(FIXED)
    gold = git(repo, "diff")
    git(repo, "commit", "-qam", "fix add")
    git(repo, "tag", "v1.0")
    return repo, base, gold + "\n"


def make_task(repo: Path, base: str, gold: str, **extra) -> Task:
    return Task.model_validate({
        "instance_id": "acme__calc-1", "repo": "acme/calc", "source": str(repo), "base_commit": base,
        "problem_statement": "add subtracts", "FAIL_TO_PASS": ["test_calc.TestCalc.test_add"], "patch": gold,
        # unittest: the environment needs no test runner from the network (see the pytest test below)
        "log_parser": "unittest", **extra,
    })


@pytest.mark.slow
def test_prepare_builds_snapshot_and_venv_once(tmp_path: Path) -> None:
    repo, base, gold = make_repo(tmp_path)
    task = make_task(repo, base, gold, environment={"setup": ["echo built > built.txt", "python -c 'import sys; print(sys.prefix)' > prefix.txt"]})
    prepared = prepare_task(task, tmp_path / "store")
    assert prepared.base_commit == base and prepared.head == base
    assert (prepared.repo_dir / "calc.py").read_text() == BUGGY
    assert git(prepared.repo_dir, "rev-parse", "HEAD") == base
    assert git(prepared.repo_dir, "tag") == "" and git(prepared.repo_dir, "branch", "--format=%(refname)") == "refs/heads/main"
    # setup ran inside the venv at /patchgym/venv, in /testbed
    assert (prepared.repo_dir / "prefix.txt").read_text().strip() == "/patchgym/venv"
    assert (prepared.venv_dir / "bin" / "python").exists()
    # what setup left untracked is hidden from diffs
    assert git(prepared.repo_dir, "status", "--porcelain") == ""
    meta = json.loads((prepared.root / "prepared.json").read_text())
    assert meta["key"] == prepared.key and "patch" not in meta["task"]
    # cached: the same root, not rebuilt
    stamp = (prepared.root / "prepared.json").stat().st_mtime_ns
    again = prepare_task(task, tmp_path / "store")
    assert again.root == prepared.root and (again.root / "prepared.json").stat().st_mtime_ns == stamp
    # a changed task prepares again, under another key
    changed = prepare_task(task.model_copy(update={"environment": task.environment.model_copy(update={"setup": []})}), tmp_path / "store")
    assert changed.key != prepared.key and changed.root != prepared.root


def test_source_is_never_modified(tmp_path: Path) -> None:
    repo, base, gold = make_repo(tmp_path)
    before = sorted(str(p.relative_to(repo)) + str(p.stat().st_mtime_ns) for p in repo.rglob("*"))
    prepare_task(make_task(repo, base, gold), tmp_path / "store")
    after = sorted(str(p.relative_to(repo)) + str(p.stat().st_mtime_ns) for p in repo.rglob("*"))
    assert before == after


def test_injected_bug_is_squashed(tmp_path: Path) -> None:
    repo, base, gold = make_repo(tmp_path, injected=True)
    prepared = prepare_task(make_task(repo, base, gold), tmp_path / "store")
    meta = json.loads((prepared.root / "prepared.json").read_text())
    assert meta["squashed"] is True and prepared.head != base
    assert git(prepared.repo_dir, "rev-list", "--count", "HEAD") == "1"
    assert git(prepared.repo_dir, "rev-parse", "HEAD") == prepared.base_commit
    # the fixed file is nowhere in the object store
    fixed_blob = subprocess.run(["git", "hash-object", "--stdin"], input=FIXED, capture_output=True, text=True).stdout.strip()
    assert subprocess.run(["git", "-C", str(prepared.repo_dir), "cat-file", "-e", fixed_blob]).returncode != 0


def test_concurrent_preparations_build_once(tmp_path: Path) -> None:
    repo, base, gold = make_repo(tmp_path)
    task = make_task(repo, base, gold)
    roots, errors = [], []

    def run() -> None:
        try:
            roots.append(prepare_task(task, tmp_path / "store").root)
        except Exception as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(set(roots)) == 1
    leftovers = [p.name for p in (tmp_path / "store" / task.instance_id).iterdir() if p.name.startswith(".build")]
    assert leftovers == []


@pytest.mark.slow
def test_setup_failures_are_clear(tmp_path: Path) -> None:
    repo, base, gold = make_repo(tmp_path)
    with pytest.raises(SetupError, match="exit code 3"):
        prepare_task(make_task(repo, base, gold, environment={"setup": ["echo boom; exit 3"]}), tmp_path / "s1")
    with pytest.raises(SetupError, match="modified tracked files"):
        prepare_task(make_task(repo, base, gold, environment={"setup": ["echo x >> calc.py"]}), tmp_path / "s2")
    # nothing half-built is left behind
    assert not list((tmp_path / "s1" / "acme__calc-1").glob("*/prepared.json"))


def test_bad_base_commit_names_the_task(tmp_path: Path) -> None:
    repo, _, gold = make_repo(tmp_path)
    with pytest.raises(PrepareError, match="acme__calc-1"):
        prepare_tasks([make_task(repo, "f" * 40, gold)], tmp_path / "store")


@pytest.mark.slow
def test_shared_environment_is_built_once_without_the_repository(tmp_path: Path) -> None:
    repo, base, gold = make_repo(tmp_path)
    setup = {"setup": ["test -z \"$(ls -A /testbed)\"", "echo once >> /patchgym/venv/built"], "shared": True}
    first = prepare_task(make_task(repo, base, gold, environment=setup), tmp_path / "store")
    second = prepare_task(make_task(repo, base, gold, environment=setup, instance_id="acme__calc-2"), tmp_path / "store")
    assert first.venv_dir == second.venv_dir and first.root != second.root
    assert (first.venv_dir / "built").read_text() == "once\n"
    assert (first.repo_dir / "calc.py").read_text() == BUGGY  # the snapshot is still per task


@pytest.mark.slow
def test_pytest_is_installed_when_setup_does_not_bring_it(tmp_path: Path) -> None:
    """A SWE-bench row has no setup; its tests still need pytest, so preparation installs it."""
    repo, base, gold = make_repo(tmp_path)
    task = make_task(repo, base, gold, log_parser="pytest", FAIL_TO_PASS=["test_calc.py::test_add"])
    prepared = prepare_task(task, tmp_path / "store")
    site = next((prepared.venv_dir / "lib").glob("python3*/site-packages"))
    assert list(site.glob("pytest-*.dist-info")), "pytest is not in the task's environment"
    # and not for a task whose tests do not use pytest
    other = prepare_task(make_task(repo, base, gold, instance_id="acme__calc-9"), tmp_path / "store")
    other_site = next((other.venv_dir / "lib").glob("python3*/site-packages"))
    assert not list(other_site.glob("pytest-*.dist-info"))

"""The bundled suite's build: deterministic ids, valid rows, post-base leak channels in every
history, the one injected bug, the cache, and the declarative history's own checks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchgym.tasks.model import Task
from patchgym.tasks.patches import files_touched
from patchgym.tasks.suite import build_suite, bundled_tasks, suite_hash
from patchgym.tasks.suite.cache import SUITE_DIR
from patchgym.tasks.suite.history import Commit, Edit, HistoryError, Library, replay

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    jsonl = bundled_tasks(tmp_path_factory.mktemp("suite-store"))
    return jsonl, [json.loads(line) for line in jsonl.read_text().splitlines()]


def git(repo: Path, *args: str, env: dict | None = None) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)
    assert done.returncode == 0, f"git {args}: {done.stderr}"
    return done.stdout


def refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def post_image_blobs(repo: Path, base: str, patch: str, tmp: Path) -> dict[str, str]:
    """path -> blob id of each file the patch changes, as it is after applying it at `base`."""
    index = tmp / f"index-{base[:12]}-{abs(hash(patch))}"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    git(repo, "read-tree", base, env=env)
    subprocess.run(["git", "-C", str(repo), "apply", "--cached", "-"], input=patch, text=True, env=env, check=True)
    blobs = {}
    for path in files_touched(patch):
        line = git(repo, "ls-files", "-s", "--", path, env=env).split()
        blobs[path] = line[1]
    return blobs


def is_strict_descendant(repo: Path, commit: str, base: str) -> bool:
    if git(repo, "rev-parse", commit).strip() == base:
        return False
    return subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", base, commit]).returncode == 0


def holds(repo: Path, commit: str, blobs: dict[str, str]) -> bool:
    for path, blob in blobs.items():
        found = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "-q", f"{commit}:{path}"],
                               capture_output=True, text=True)
        if found.stdout.strip() != blob:
            return False
    return True


def missing_channels(repo: Path, base: str, fix_blobs: dict[str, str]) -> list[str]:
    """Which post-base channels the repository lacks for a task (empty: all present)."""
    missing = []
    branches = [line for line in git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split() if line != "main"]
    if not any(is_strict_descendant(repo, b, base) and holds(repo, b, fix_blobs) for b in branches):
        missing.append("a branch other than main holding the fix")
    tags = git(repo, "for-each-ref", "--format=%(refname:short) %(objecttype)", "refs/tags").splitlines()
    if not any(is_strict_descendant(repo, f"{t.split()[0]}^{{commit}}", base) for t in tags):
        missing.append("a tag after base")
    if not any(t.split()[1] == "tag" for t in tags):
        missing.append("an annotated tag")
    if not any(t.split()[1] == "commit" for t in tags):
        missing.append("a lightweight tag")
    stashes = git(repo, "log", "-g", "--format=%H", "refs/stash").split() if "refs/stash" in refs(repo) else []
    if not any(holds(repo, s, fix_blobs) for s in stashes):
        missing.append("a stash entry holding the fix")
    notes = git(repo, "notes", "list").split("\n") if "refs/notes/commits" in refs(repo) else []
    noted = [line.split() for line in notes if line.strip()]
    if not any(is_strict_descendant(repo, target, base) and holds(repo, target, fix_blobs) and "fix" in
               git(repo, "notes", "show", target).lower() for _, target in noted):
        missing.append("a note on the fix commit naming the fix")
    remote = [r for r in git(repo, "for-each-ref", "--format=%(refname)", "refs/remotes").split()]
    if not any(is_strict_descendant(repo, r, base) for r in remote):
        missing.append("a remote-tracking ref after base")
    return missing


def test_rows_are_valid_tasks(suite: tuple[Path, list[dict]]) -> None:
    jsonl, rows = suite
    tasks = [Task.model_validate(row) for row in rows]
    assert len(tasks) >= 12
    assert len({t.instance_id for t in tasks}) == len(tasks)
    assert len({t.source for t in tasks}) >= 3, "tasks come from at least three libraries"
    assert sum(t.difficulty == "easy" for t in tasks) >= 3
    assert {t.difficulty for t in tasks} == {"easy", "medium", "hard"}
    assert sum("injected-bug" in row["tags"] for row in rows) == 1
    for kind in ["single-line", "edge-case", "multi-file", "new-test", "pass-to-pass", "new-test-file", "changed-test"]:
        assert any(kind in row["tags"] for row in rows), f"no task tagged {kind}"
    for task, row in zip(tasks, rows):
        assert (jsonl.parent / task.source / ".git").is_dir()
        assert task.log_parser == "pytest"
        assert task.environment.setup == ["python -m pip install --quiet 'pytest>=7'"]
        assert len(task.PASS_TO_PASS) >= 3, task.instance_id
        assert not set(task.FAIL_TO_PASS) & set(task.PASS_TO_PASS)
        assert all(not p.startswith("tests/") for p in files_touched(task.patch or ""))
        assert all(p.startswith("tests/") for p in files_touched(task.test_patch or ""))
        for test in task.FAIL_TO_PASS + task.PASS_TO_PASS:
            assert test.split("::")[0] in files_touched(task.test_patch or ""), test
        assert task.problem_statement.strip() and "diff --git" not in task.problem_statement


def test_build_is_deterministic(suite: tuple[Path, list[dict]], tmp_path: Path) -> None:
    jsonl, rows = suite
    again = build_suite(tmp_path / "again")
    assert again.read_bytes() == jsonl.read_bytes()
    for name in sorted(p.name for p in (jsonl.parent / "repos").iterdir()):
        assert refs(jsonl.parent / "repos" / name) == refs(tmp_path / "again" / "repos" / name)


def test_every_history_carries_the_future_in_every_channel(suite: tuple[Path, list[dict]], tmp_path: Path) -> None:
    jsonl, rows = suite
    problems = []
    for row in rows:
        repo = jsonl.parent / row["source"]
        blobs = post_image_blobs(repo, row["base_commit"], row["patch"], tmp_path)
        problems += [f"{row['instance_id']}: {m}" for m in missing_channels(repo, row["base_commit"], blobs)]
        assert git(repo, "rev-parse", "HEAD").strip() != row["base_commit"]
        assert not git(repo, "status", "--porcelain"), "the built repository's work tree is clean"
    assert not problems, "\n".join(problems)


def test_channel_check_notices_a_repository_without_them(suite: tuple[Path, list[dict]], tmp_path: Path) -> None:
    jsonl, rows = suite
    row = rows[0]
    plain = tmp_path / "plain"
    subprocess.run(["git", "clone", "--quiet", "--no-local", "--single-branch", "--no-tags",
                    str(jsonl.parent / row["source"]), str(plain)], check=True)
    blobs = post_image_blobs(plain, row["base_commit"], row["patch"], tmp_path)
    missing = missing_channels(plain, row["base_commit"], blobs)
    assert "a stash entry holding the fix" in missing
    assert "a tag after base" in missing
    assert "a note on the fix commit naming the fix" in missing


def test_fixed_files_never_exist_before_base_except_for_the_injected_bug(suite: tuple[Path, list[dict]], tmp_path: Path) -> None:
    jsonl, rows = suite
    for row in rows:
        repo = jsonl.parent / row["source"]
        blobs = post_image_blobs(repo, row["base_commit"], row["patch"], tmp_path)
        history = set(git(repo, "rev-list", "--objects", row["base_commit"]).split())
        leaked = {path for path, blob in blobs.items() if blob in history}
        if "injected-bug" in row["tags"]:
            parent = git(repo, "rev-parse", f"{row['base_commit']}^").strip()
            assert holds(repo, parent, blobs), f"{row['instance_id']}: the base's parent should hold the fixed file"
        else:
            assert not leaked, f"{row['instance_id']}: fixed versions of {leaked} exist at or before base"


def test_bundled_tasks_is_cached(suite: tuple[Path, list[dict]]) -> None:
    first, _ = suite
    store = first.parent.parent
    stamp = first.stat().st_mtime_ns
    again = bundled_tasks(store)
    assert again == first and again.stat().st_mtime_ns == stamp
    assert first.parent.name == suite_hash()
    assert [p.name for p in store.iterdir() if not p.name.endswith(".lock")] == [suite_hash()]


def test_bundled_tasks_concurrent_callers_build_once(tmp_path: Path) -> None:
    code = "import sys; from pathlib import Path; from patchgym.tasks.suite import bundled_tasks; print(bundled_tasks(Path(sys.argv[1])))"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(outputs)) == 1 and Path(outputs[0]).is_file()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != suite_hash() and not p.name.endswith(".lock")]
    assert not leftovers


def test_default_store_is_under_patchgym_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from patchgym.tasks.suite.cache import default_store

    monkeypatch.setenv("PATCHGYM_HOME", str(tmp_path))
    assert default_store() == tmp_path / "suite"


def test_suite_hash_follows_the_sources(tmp_path: Path) -> None:
    copy = tmp_path / "suite"
    shutil.copytree(SUITE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert suite_hash(copy) == suite_hash()
    readme = copy / "libraries" / "semverlite" / "tree" / "README.md"
    readme.write_text(readme.read_text() + "\n")
    assert suite_hash(copy) != suite_hash()


def test_history_replay_rejects_an_edit_that_does_not_match(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x = 2\n")
    good = Library("demo", "o", [Commit("a", "add", add=["m.py"]), Commit("b", "two", edit={"m.py": [Edit("x = 1\n", "x = 2\n")]})], [], 0)
    assert [s["m.py"] for s in replay(good, tmp_path)] == ["x = 1\n", "x = 2\n"]
    bad = Library("demo", "o", [Commit("a", "add", add=["m.py"]), Commit("b", "two", edit={"m.py": [Edit("x = 1\n", "x = 3\n")]})], [], 0)
    with pytest.raises(HistoryError, match="demo:b:m.py"):
        replay(bad, tmp_path)
    (tmp_path / "stray.py").write_text("")
    with pytest.raises(HistoryError, match="stray.py"):
        replay(good, tmp_path)


def test_library_tests_are_not_collected_from_the_source_tree() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tasks/suite"],
        cwd=REPO_ROOT, capture_output=True, text=True, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert done.returncode == 5, done.stdout + done.stderr  # 5: no tests collected


def _patchgym(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "patchgym.main", *args], capture_output=True, text=True)


def test_scrubbing_a_task_repo_removes_the_future_and_squash_handles_the_injected_bug(
    suite: tuple[Path, list[dict]], tmp_path: Path
) -> None:
    """The suite exercises the scrubber: the raw repository leaks, a scrub does not, and the
    injected-bug task leaks through its parent unless squashed."""
    pytest.importorskip("patchgym.scrubber.cli", reason="the scrubber is not in this tree")
    jsonl, rows = suite
    injected = next(r for r in rows if "injected-bug" in r["tags"])
    ordinary = next(r for r in rows if "injected-bug" not in r["tags"])
    for row in (injected, ordinary):
        source = str(jsonl.parent / row["source"])
        forbid = tmp_path / f"{row['instance_id']}.patch"
        forbid.write_text(row["patch"])
        raw = _patchgym("scrub", "--check", source, "--base", row["base_commit"], "--forbid", str(forbid))
        assert raw.returncode == 1, raw.stdout + raw.stderr
        dest = tmp_path / row["instance_id"]
        done = _patchgym("scrub", source, str(dest), "--base", row["base_commit"])
        assert done.returncode == 0, done.stdout + done.stderr
        check = _patchgym("scrub", "--check", str(dest), "--base", row["base_commit"], "--forbid", str(forbid))
        assert check.returncode == (1 if row is injected else 0), check.stdout + check.stderr
    squashed = tmp_path / "squashed"
    done = _patchgym("scrub", str(jsonl.parent / injected["source"]), str(squashed), "--base", injected["base_commit"], "--squash")
    assert done.returncode == 0, done.stdout + done.stderr
    head = git(squashed, "rev-parse", "HEAD").strip()
    assert git(squashed, "rev-parse", f"{head}^{{tree}}") == git(jsonl.parent / injected["source"], "rev-parse", f"{injected['base_commit']}^{{tree}}")
    check = _patchgym("scrub", "--check", str(squashed), "--base", head, "--forbid", str(tmp_path / f"{injected['instance_id']}.patch"))
    assert check.returncode == 0, check.stdout + check.stderr


def test_building_over_an_existing_suite_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tasks.jsonl").write_text("")
    done = subprocess.run([sys.executable, "-m", "patchgym.tasks.suite", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2
    assert "already holds a suite" in done.stderr and "Traceback" not in done.stderr

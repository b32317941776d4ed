"""Building the bundled suite: each library's git repository, then `tasks.jsonl`.

`build_suite(dest)` writes

    dest/repos/<library>/   a git repository (with a checked-out `main`) per library
    dest/tasks.jsonl        one task per line (docs/task-format.md); `source` is `repos/<library>`,
                            relative to the JSONL file, so the directory can be moved

Commits are written with `git fast-import` from the replayed history (patchgym.tasks.suite.history)
with fixed authors, committers and dates, and git runs with `HOME` pointed at an empty directory and
`GIT_CONFIG_NOSYSTEM=1`, so every commit id (and so every `base_commit`) is the same on every machine.

Beyond `main`, every repository carries the future of every task in the channels a scrubber must
remove: the fix commit on a `fix/<slug>` branch (some merged with `--no-ff`), lightweight and
annotated tags (the last release tag points after every base), a remote with a remote-tracking
ref, git notes on each fix commit naming the fix, a stash entry per task holding the gold patch and
its tests on top of the task's base, and reflogs that visit all of them.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from patchgym.tasks.suite.history import Commit, HistoryError, Library, TaskSpec, replay, validate

LIBRARIES_DIR = Path(__file__).resolve().parent / "libraries"
SETUP_COMMANDS = ["python -m pip install --quiet 'pytest>=7'"]
TEST_DIR = "tests/"

PEOPLE = {
    "maintainer": ("Ada Marsh", "ada.marsh@suite.patchgym.example"),
    "contributor": ("Tomas Oyelaran", "tomas.oyelaran@suite.patchgym.example"),
    "reviewer": ("Lin Hua", "lin.hua@suite.patchgym.example"),
}
DAY = 86_400


class SuiteBuildError(RuntimeError):
    """A library's history or a task's declaration is inconsistent, or git failed."""


@dataclass(frozen=True)
class LoadedLibrary:
    library: Library
    tree: Path


def load_libraries(root: Path = LIBRARIES_DIR) -> list[LoadedLibrary]:
    """Every `libraries/<name>/history.py` (defining LIBRARY) with its `tree/`, by name."""
    loaded = []
    for folder in sorted(p for p in root.iterdir() if (p / "history.py").is_file()):
        spec = importlib.util.spec_from_file_location(f"_patchgym_suite_history_{folder.name}", folder / "history.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        library = getattr(module, "LIBRARY", None)
        if not isinstance(library, Library):
            raise SuiteBuildError(f"{folder / 'history.py'} defines no LIBRARY")
        if library.name != folder.name:
            raise SuiteBuildError(f"{folder / 'history.py'}: LIBRARY.name {library.name!r} != folder name")
        validate(library)
        loaded.append(LoadedLibrary(library, folder / "tree"))
    return loaded


class Git:
    """git with a fixed, empty configuration and fixed identities."""

    def __init__(self, repo: Path, home: Path) -> None:
        self.repo = repo
        self.base_env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        self.base_env.update(
            HOME=str(home),
            XDG_CONFIG_HOME=str(home / ".config"),
            GIT_CONFIG_NOSYSTEM="1",
            LC_ALL="C",
            TZ="UTC",
        )

    def __call__(self, *args: str, stdin: bytes | None = None, when: int = 0, who: str = "maintainer") -> str:
        name, email = PEOPLE[who]
        env = dict(self.base_env)
        stamp = f"@{when} +0000"
        env.update(
            GIT_AUTHOR_NAME=name, GIT_AUTHOR_EMAIL=email, GIT_AUTHOR_DATE=stamp,
            GIT_COMMITTER_NAME=name, GIT_COMMITTER_EMAIL=email, GIT_COMMITTER_DATE=stamp,
        )
        try:
            done = subprocess.run(["git", "-C", str(self.repo), *args], input=stdin, capture_output=True, env=env)
        except FileNotFoundError:
            raise SuiteBuildError("git is not installed (or not on PATH); the bundled suite is built with it") from None
        if done.returncode != 0:
            raise SuiteBuildError(f"git {' '.join(args)} failed in {self.repo}: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout.decode("utf-8")


def _ident(who: str, when: int) -> bytes:
    name, email = PEOPLE[who]
    return f"{name} <{email}> {when} +0000".encode()


def _data(text: str | bytes) -> bytes:
    raw = text.encode("utf-8") if isinstance(text, str) else text
    return b"data %d\n" % len(raw) + raw + b"\n"


def _commit_time(library: Library, index: int) -> int:
    # One commit every day or two, at varying hours: fixed, so ids never change.
    return library.first_date + index * DAY + (index * 7_919) % (11 * 3_600) + 9 * 3_600


def _file_changes(before: dict[str, str], after: dict[str, str]) -> bytes:
    out = b""
    for path in sorted(set(before) | set(after)):
        if path not in after:
            out += b"D " + path.encode() + b"\n"
        elif before.get(path) != after[path]:
            out += b"M 100644 inline " + path.encode() + b"\n" + _data(after[path])
    return out


@dataclass(frozen=True)
class BuiltRepo:
    path: Path
    states: list[dict[str, str]]
    shas: dict[str, str]  # commit key -> sha of that commit (the branch commit for merged ones)
    bases: dict[str, str]  # task slug -> base sha (the first parent of its fix commit)
    fix_branches: dict[str, str]  # task slug -> branch name holding the fix


def _branch_for(library: Library, commit: Commit) -> str:
    for task in library.tasks:
        if task.fix == commit.key:
            return f"fix/{task.slug}"
    return f"topic/{commit.key}"


def _fast_import_stream(library: Library, states: list[dict[str, str]]) -> bytes:
    stream = b""
    previous: dict[str, str] = {}
    main_mark = 0
    mark = 0
    main_marks: dict[str, int] = {}  # key -> mark of the commit that main points at after it
    for index, commit in enumerate(library.commits):
        when = _commit_time(library, index)
        changes = _file_changes(previous, states[index])
        message = commit.message + "\n"
        if commit.merge:
            if main_mark == 0:
                raise SuiteBuildError(f"{library.name}: the root commit cannot be merged")
            branch = _branch_for(library, commit)
            mark += 1
            branch_mark = mark
            stream += b"commit refs/heads/" + branch.encode() + b"\nmark :%d\n" % branch_mark
            stream += b"author " + _ident(commit.author, when) + b"\ncommitter " + _ident(commit.author, when) + b"\n"
            stream += _data(message) + b"from :%d\n" % main_mark + changes + b"\n"
            mark += 1
            stream += b"commit refs/heads/main\nmark :%d\n" % mark
            stream += b"author " + _ident("maintainer", when + 1_800) + b"\ncommitter " + _ident("maintainer", when + 1_800) + b"\n"
            stream += _data(f"Merge branch '{branch}'\n") + b"from :%d\nmerge :%d\n" % (main_mark, branch_mark)
            stream += changes + b"\n"
            stream += b"reset refs/keys/" + commit.key.encode() + b"\nfrom :%d\n\n" % branch_mark
        else:
            mark += 1
            stream += b"commit refs/heads/main\nmark :%d\n" % mark
            stream += b"author " + _ident(commit.author, when) + b"\ncommitter " + _ident(commit.author, when) + b"\n"
            stream += _data(message)
            if main_mark:
                stream += b"from :%d\n" % main_mark
            stream += changes + b"\n"
            stream += b"reset refs/keys/" + commit.key.encode() + b"\nfrom :%d\n\n" % mark
        main_mark = mark
        main_marks[commit.key] = main_mark
        if commit.tag and commit.tag_message:
            stream += b"tag " + commit.tag.encode() + b"\nfrom :%d\n" % main_mark
            stream += b"tagger " + _ident("maintainer", when + 3_600) + b"\n" + _data(commit.tag_message + "\n")
        elif commit.tag:
            stream += b"reset refs/tags/" + commit.tag.encode() + b"\nfrom :%d\n\n" % main_mark
        previous = states[index]
    return stream + b"done\n"


def _notes_stream(library: Library, shas: dict[str, str]) -> bytes:
    stream = b""
    end = _commit_time(library, len(library.commits))
    for number, task in enumerate(library.tasks):
        note = task.note or (
            f"Reviewed-by: {PEOPLE['reviewer'][0]}\nFixes the report '{task.slug}': {library.commit(task.fix).message}\n"
            f"Branch: fix/{task.slug}\n"
        )
        when = end + number * 600
        stream += b"commit refs/notes/commits\ncommitter " + _ident("reviewer", when) + b"\n"
        stream += _data("Notes added by 'git notes add'\n")
        stream += b"N inline " + shas[task.fix].encode() + b"\n" + _data(note) + b"\n"
    return stream + b"done\n"


def build_repo(loaded: LoadedLibrary, dest: Path, home: Path) -> BuiltRepo:
    """Write `loaded.library`'s repository at `dest` (which must not exist)."""
    library = loaded.library
    try:
        states = replay(library, loaded.tree)
    except HistoryError as exc:
        raise SuiteBuildError(str(exc)) from exc
    dest.mkdir(parents=True)
    git = Git(dest, home)
    git("init", "--quiet", "--initial-branch=main")
    for key, value in [("core.autocrlf", "false"), ("gc.auto", "0"), ("user.name", PEOPLE["maintainer"][0]),
                       ("user.email", PEOPLE["maintainer"][1])]:
        git("config", key, value)
    git("fast-import", "--quiet", "--done", stdin=_fast_import_stream(library, states))
    shas = {}
    for line in git("for-each-ref", "--format=%(refname) %(objectname)", "refs/keys/").splitlines():
        ref, sha = line.split()
        shas[ref.removeprefix("refs/keys/")] = sha
    git("update-ref", "--stdin", stdin="".join(f"delete refs/keys/{key}\n" for key in shas).encode())

    bases: dict[str, str] = {}
    branches: dict[str, str] = {}
    for task in library.tasks:
        fix = library.commit(task.fix)
        bases[task.slug] = git("rev-parse", f"{shas[fix.key]}^1").strip()
        branch = _branch_for(library, fix)
        if not fix.merge:
            git("branch", branch, shas[fix.key])
        branches[task.slug] = branch
    git("fast-import", "--quiet", "--done", stdin=_notes_stream(library, shas))
    end = _commit_time(library, len(library.commits))
    git("reset", "--quiet", "--hard", "main", when=end)
    git("remote", "add", "origin", f"https://git.example.invalid/{library.owner}/{library.name}.git")
    git("update-ref", "refs/remotes/origin/main", "main", when=end)
    git("pack-refs", "--all")

    built = BuiltRepo(dest, states, shas, bases, branches)
    for number, task in enumerate(library.tasks):
        when = end + DAY + number * 900
        git("checkout", "--quiet", "--detach", bases[task.slug], when=when)
        patch = task_diff(git, built, task, tests=False) + task_diff(git, built, task, tests=True)
        git("apply", "--index", "-", stdin=patch.encode(), when=when)
        git("stash", "push", "--quiet", "-m", f"half-done: {task.slug}", when=when + 60, who="contributor")
    git("checkout", "--quiet", "main", when=end + 2 * DAY)
    return built


def task_diff(git: Git, built: BuiltRepo, task: TaskSpec, tests: bool) -> str:
    """The fix commit's diff against the task's base: of `tests/` (tests=True) or of everything else."""
    base, fix = built.bases[task.slug], built.shas[task.fix]
    changed = [p for p in git("diff", "--name-only", "--no-renames", base, fix).splitlines() if p]
    chosen = [p for p in changed if p.startswith(TEST_DIR) == tests]
    if not chosen:
        return ""
    return git("diff", "--no-color", "--no-ext-diff", "--no-renames", base, fix, "--", *chosen)


def test_ids(path: str, text: str) -> list[str]:
    """pytest node ids of the test functions and `Test*` methods defined in a test file."""
    ids = []
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            ids.append(f"{path}::{node.name}")
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and member.name.startswith("test"):
                    ids.append(f"{path}::{node.name}::{member.name}")
    return ids


def task_row(loaded: LoadedLibrary, built: BuiltRepo, git: Git, task: TaskSpec) -> dict:
    """The JSONL row of one task."""
    library = loaded.library
    patch = task_diff(git, built, task, tests=False)
    test_patch = task_diff(git, built, task, tests=True)
    if not patch:
        raise SuiteBuildError(f"{library.name}/{task.slug}: the fix commit changes no non-test file")
    if not test_patch:
        raise SuiteBuildError(f"{library.name}/{task.slug}: the fix commit changes no test")
    fixed_state = built.states[library.index(task.fix)]
    touched_tests = [p for p in git("diff", "--name-only", built.bases[task.slug], built.shas[task.fix]).splitlines()
                     if p.startswith(TEST_DIR)]
    all_ids = [i for path in touched_tests if path.endswith(".py") for i in test_ids(path, fixed_state[path])]
    missing = [t for t in task.fail_to_pass if t not in all_ids]
    if missing:
        raise SuiteBuildError(f"{library.name}/{task.slug}: FAIL_TO_PASS not defined in the fixed test files: {missing}")
    pass_to_pass = [t for t in all_ids if t not in task.fail_to_pass]
    created = datetime.fromtimestamp(_commit_time(library, library.index(task.fix)) - 2 * 3_600, tz=timezone.utc)
    return {
        "instance_id": f"{library.name}-{task.slug}",
        "repo": f"{library.owner}/{library.name}",
        "source": f"repos/{library.name}",
        "base_commit": built.bases[task.slug],
        "problem_statement": task.problem_statement,
        "patch": patch,
        "test_patch": test_patch,
        "FAIL_TO_PASS": list(task.fail_to_pass),
        "PASS_TO_PASS": pass_to_pass,
        "log_parser": "pytest",
        # Setup only installs the test runner, so every task shares one environment (tasks/environment.py).
        "environment": {"setup": list(SETUP_COMMANDS), "shared": True},
        "difficulty": task.difficulty,
        "tags": list(task.tags),
        "created_at": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def build_suite(dest: Path) -> Path:
    """Build every library's repository under `dest/repos` and write `dest/tasks.jsonl` (returned)."""
    dest = Path(dest)
    if (dest / "repos").exists() or (dest / "tasks.jsonl").exists():
        raise SuiteBuildError(f"{dest} already holds a suite; build into an empty directory")
    rows = []
    with tempfile.TemporaryDirectory(prefix="patchgym-suite-home-") as home:
        for loaded in load_libraries():
            repo = dest / "repos" / loaded.library.name
            built = build_repo(loaded, repo, Path(home))
            git = Git(repo, Path(home))
            rows.extend(task_row(loaded, built, git, task) for task in loaded.library.tasks)
    ids = [row["instance_id"] for row in rows]
    if len(set(ids)) != len(ids):
        raise SuiteBuildError("duplicate instance ids in the suite")
    out = dest / "tasks.jsonl"
    out.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return out

"""The declarative history of a bundled library, and how to replay it into file trees.

A library's files on disk (`libraries/<name>/tree/`) are its *final* state: the tip of `main`
after every commit. Its history (`libraries/<name>/history.py`, which defines `LIBRARY`) is a list
of `Commit`s, oldest first; each names the files it adds and the edits it makes. Edits are stated
forwards (what the commit did), and a file's content at commit k is found by starting from the
final file and undoing, newest first, every edit made after k. So the final tree is the truth, and
each older state differs from it only by the edits listed after it.

Two kinds of edit:

* `Edit(before, after)`: the commit replaced the text `before` with `after`. Undoing it needs
  `after` to occur exactly once in the file at that point (checked; an error names the commit).
* `Added("name", "Class.method")` (alias `NewTests`, for tests): the commit added these functions or
  methods. Undoing removes each definition (with its decorators and the blank lines above it),
  found with `ast`.

`Edit("", text)` adds `text` (which must then be unique in the file). Other commit fields:
`add` (files that appear, with their content at that point), `tag` (+ `tag_message` for an
annotated tag) on the commit `main` points at afterwards, and `merge=True`: the commit is made on
`fix/<slug>` (or `topic/<key>`) and merged into `main` with a merge commit.

A `TaskSpec` names its fix commit; the task's `base_commit` is that commit's first parent. The
gold `patch` is the fix commit's diff of non-test files, `test_patch` its diff of `tests/`.
A bug present since its file was created is just part of that file's first version, and the fix
commit's Edit removes it. A bug *injected* at base is an Edit made by the base commit that the fix
commit reverses, so the base's parent holds the fixed file (such a task is tagged `injected-bug`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence, Union

DIFFICULTIES = ("easy", "medium", "hard")
CACHE_DIRS = {"__pycache__", ".pytest_cache"}  # left behind by running a library's tests in place


class HistoryError(ValueError):
    """A library's declared history does not replay onto its final tree."""


@dataclass(frozen=True)
class Edit:
    """The commit replaced `before` with `after` (both literal text)."""

    before: str
    after: str


@dataclass(frozen=True)
class Added:
    """The commit added these functions (`name`) or methods (`Class.name`)."""

    names: tuple[str, ...]

    def __init__(self, *names: str) -> None:
        object.__setattr__(self, "names", tuple(names))


NewTests = Added  # reads better for test functions
Change = Union[Edit, Added]


@dataclass(frozen=True)
class Commit:
    """One commit on `main` (or, with `merge`, on a topic branch merged into `main` with --no-ff)."""

    key: str
    message: str
    add: Sequence[str] = ()
    edit: Mapping[str, Sequence[Change]] = field(default_factory=dict)
    author: str = "maintainer"
    tag: str | None = None
    tag_message: str | None = None  # set: an annotated tag; unset: a lightweight one
    merge: bool = False


@dataclass(frozen=True)
class TaskSpec:
    """A task: the bug fixed by commit `fix`, as a user reported it."""

    slug: str
    fix: str
    problem_statement: str
    fail_to_pass: Sequence[str]
    difficulty: str
    tags: Sequence[str]
    note: str = ""  # the git note attached to the fix commit (defaults to a reviewer's line)


@dataclass(frozen=True)
class Library:
    name: str
    owner: str
    commits: Sequence[Commit]
    tasks: Sequence[TaskSpec]
    first_date: int  # unix time of the first commit; later commits follow at fixed steps

    def commit(self, key: str) -> Commit:
        for commit in self.commits:
            if commit.key == key:
                return commit
        raise HistoryError(f"{self.name}: no commit with key {key!r}")

    def index(self, key: str) -> int:
        return [c.key for c in self.commits].index(self.commit(key).key)


def remove_definition(text: str, qualified_name: str, path: str = "<file>") -> str:
    """`text` without the function or method `qualified_name` ("f" or "Class.f")."""
    tree = ast.parse(text)
    parts = qualified_name.split(".")
    body: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for depth, part in enumerate(parts):
        wanted = (ast.FunctionDef, ast.AsyncFunctionDef) if depth == len(parts) - 1 else (ast.ClassDef,)
        found = [n for n in body if isinstance(n, wanted) and n.name == part]
        if len(found) != 1:
            raise HistoryError(f"{path}: expected one definition of {qualified_name!r}, found {len(found)}")
        node = found[0]
        body = getattr(node, "body", [])
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    lines = text.splitlines(keepends=True)
    start = min([node.lineno, *[d.lineno for d in node.decorator_list]]) - 1
    end = node.end_lineno or node.lineno
    while start > 0 and not lines[start - 1].strip():
        start -= 1
    return "".join(lines[:start] + lines[end:])


def undo(text: str, change: Change, where: str) -> str:
    """The file as it was before `change` (see the module docstring)."""
    if isinstance(change, Added):
        for name in reversed(change.names):
            text = remove_definition(text, name, where)
        return text
    count = text.count(change.after)
    if count != 1 or not change.after:
        raise HistoryError(f"{where}: the edit's `after` text must occur once, found {count}: {change.after[:80]!r}")
    return text.replace(change.after, change.before, 1)


def replay(library: Library, tree: Path) -> list[dict[str, str]]:
    """The full file tree (path -> text) at each commit of `library`, oldest first."""
    final = {}
    for commit in library.commits:
        for path in [*commit.add, *commit.edit]:
            if path not in final:
                source = tree / path
                if not source.is_file():
                    raise HistoryError(f"{library.name}: commit {commit.key!r} names {path}, missing from {tree}")
                final[path] = source.read_text(encoding="utf-8")
    on_disk = {
        p.relative_to(tree).as_posix() for p in tree.rglob("*")
        if p.is_file() and not CACHE_DIRS.intersection(p.relative_to(tree).parts) and p.suffix != ".pyc"
    }
    unlisted = sorted(on_disk - set(final))
    if unlisted:
        raise HistoryError(f"{library.name}: files in the tree that no commit adds: {unlisted}")

    states: list[dict[str, str]] = []
    current = dict(final)
    for commit in reversed(library.commits):
        states.append(dict(current))
        for path, changes in commit.edit.items():
            if path not in current:
                raise HistoryError(f"{library.name}: commit {commit.key!r} edits {path} before it exists")
            for change in reversed(changes):
                current[path] = undo(current[path], change, f"{library.name}:{commit.key}:{path}")
        for path in commit.add:
            if path not in current:
                raise HistoryError(f"{library.name}: commit {commit.key!r} adds {path} twice")
            del current[path]
    if current:
        raise HistoryError(f"{library.name}: files edited before any commit adds them: {sorted(current)}")
    states.reverse()
    return states


def validate(library: Library) -> None:
    """Static checks on a library's declaration (keys, tasks, difficulties)."""
    keys = [c.key for c in library.commits]
    if len(set(keys)) != len(keys):
        raise HistoryError(f"{library.name}: duplicate commit keys")
    for task in library.tasks:
        index = library.index(task.fix)
        if index == 0:
            raise HistoryError(f"{library.name}: task {task.slug!r} is fixed by the root commit")
        if task.difficulty not in DIFFICULTIES:
            raise HistoryError(f"{library.name}: task {task.slug!r} difficulty must be one of {DIFFICULTIES}")
        if not task.fail_to_pass:
            raise HistoryError(f"{library.name}: task {task.slug!r} names no FAIL_TO_PASS test")

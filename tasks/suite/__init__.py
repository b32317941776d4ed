"""The bundled task suite: small Python libraries of our own, with real histories and real bugs.

Layout (all data, read by `build.py`):

    libraries/<name>/tree/        the library's final files (the tip of `main`): package, tests/,
                                  pyproject.toml, README, CHANGELOG
    libraries/<name>/history.py   defines LIBRARY (patchgym.tasks.suite.history.Library): the
                                  commits, oldest first, each naming the files it adds and the edits
                                  it makes (`Edit(before, after)` text replacements, `NewTests(...)`
                                  test functions it added), tags, which fixes land through a merged
                                  branch, and the tasks (TaskSpec): the fix commit, the issue text,
                                  FAIL_TO_PASS, difficulty and tags

A file's content at any commit is the final file with the later edits undone (see history.py). A
task's base is its fix commit's first parent; its gold `patch` and `test_patch` are the fix
commit's diff, split into non-test files and `tests/`; PASS_TO_PASS is every other test of the test
files the fix touches.

Public API:
    build_suite(dest) -> Path            build repos and tasks.jsonl under dest (deterministic ids)
    bundled_tasks(store=None) -> Path    the cached build's tasks.jsonl, built on first use
    python -m patchgym.tasks.suite [DEST] builds into DEST (or the cache) and prints tasks.jsonl
"""

from patchgym.tasks.suite.build import build_suite
from patchgym.tasks.suite.cache import bundled_tasks, suite_hash

__all__ = ["build_suite", "bundled_tasks", "suite_hash"]

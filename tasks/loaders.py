"""Loading task sets: our JSONL, SWE-bench rows, SWE-bench v5 task directories, and `bundled`.

`load_tasks(spec)` accepts:

* a `.jsonl` file, one task per line (our format, docs/task-format.md). SWE-bench, SWE-Gym and
  SWE-rebench rows are the same schema (their test lists arrive as JSON strings) and load unchanged.
  A relative `source` is resolved against the directory of the JSONL file.
* a `.json` file holding a list of such rows (what `datasets.Dataset.to_json(lines=False)` writes).
* a task directory in the SWE-bench v5 layout, one folder per task:

      <dir>/tasks/<instance_id>/task.yaml          the task's fields (instance_id, repo, base_commit,
                                                   source, test_cmd, log_parser, environment, ...)
      <dir>/tasks/<instance_id>/problem_statement.md   the issue text
      <dir>/tasks/<instance_id>/tests.json         {"FAIL_TO_PASS": [...], "PASS_TO_PASS": [...]}
      <dir>/tasks/<instance_id>/gold.patch         the reference fix (optional)
      <dir>/tasks/<instance_id>/test.patch         the test changes (optional)

  (`<dir>` may also be the `tasks/` folder itself.) A relative `source` in task.yaml is resolved
  against the task's folder; a missing `instance_id` defaults to the folder name.
* the word `bundled`: the suite shipped with patchgym, built on first use (patchgym.tasks.suite).

Every problem is reported as a `TaskFileError` naming the file, the line (JSONL) and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

import yaml
from pydantic import ValidationError

from patchgym.tasks.model import Task


class TaskFileError(ValueError):
    """A task file that cannot be loaded; the message names the file, line and field."""

    def __init__(self, path: Path | str, message: str, *, line: int | None = None, field: str | None = None):
        self.path, self.line, self.field = str(path), line, field
        where = self.path + (f":{line}" if line is not None else "")
        what = f" field {field!r}:" if field else ""
        super().__init__(f"{where}:{what} {message}")


def _field_errors(exc: ValidationError) -> list[tuple[str, str]]:
    out = []
    for err in exc.errors():
        field = ".".join(str(part) for part in err.get("loc", ())) or None
        msg = err.get("msg", "invalid")
        if err.get("type") == "missing":
            msg = "is required but missing"
        out.append((field or "", msg))
    return out


def task_from_row(row: Any, *, path: Path | str, line: int | None, base_dir: Path | None) -> Task:
    """Validate one row into a Task; resolve a relative local `source` against `base_dir`."""
    if not isinstance(row, dict):
        raise TaskFileError(path, f"expected a JSON object, got {type(row).__name__}", line=line)
    try:
        task = Task.model_validate(row)
    except ValidationError as exc:
        field, msg = _field_errors(exc)[0]
        extra = len(exc.errors()) - 1
        more = f" (and {extra} more problem{'s' if extra > 1 else ''})" if extra else ""
        raise TaskFileError(path, msg + more, line=line, field=field or None) from None
    if task.source and base_dir is not None and not _looks_remote(task.source):
        src = Path(task.source).expanduser()
        if not src.is_absolute():
            task = task.model_copy(update={"source": str((base_dir / src).resolve())})
    return task


def _looks_remote(source: str) -> bool:
    return "://" in source or source.startswith("git@")


def _check_unique(tasks: Iterable[Task], path: Path | str) -> list[Task]:
    seen: dict[str, int] = {}
    out = []
    for index, task in enumerate(tasks):
        if task.instance_id in seen:
            raise TaskFileError(path, f"duplicate instance_id {task.instance_id!r}", field="instance_id")
        seen[task.instance_id] = index
        out.append(task)
    return out


def load_jsonl(path: Path) -> list[Task]:
    tasks = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TaskFileError(path, f"not UTF-8 text ({exc.reason})") from None
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise TaskFileError(path, f"not valid JSON ({exc.msg} at column {exc.colno})", line=number) from None
        tasks.append(task_from_row(row, path=path, line=number, base_dir=path.parent))
    return _check_unique(tasks, path)


def load_json_list(path: Path) -> list[Task]:
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TaskFileError(path, f"not valid JSON ({exc.msg} at line {exc.lineno})", line=exc.lineno) from None
    if isinstance(rows, dict):  # {"instance_id": row} mapping
        rows = list(rows.values())
    if not isinstance(rows, list):
        raise TaskFileError(path, "expected a JSON list of task objects")
    tasks = [task_from_row(row, path=path, line=None, base_dir=path.parent) for row in rows]
    return _check_unique(tasks, path)


def _read_optional(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.is_file() else None


def load_task_dir(task_dir: Path) -> Task:
    """One SWE-bench v5 style task folder (see the module docstring)."""
    spec_path = task_dir / "task.yaml"
    try:
        spec = yaml.safe_load(spec_path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise TaskFileError(spec_path, f"not valid YAML ({getattr(exc, 'problem', exc)})", line=line) from None
    if not isinstance(spec, dict):
        raise TaskFileError(spec_path, "expected a mapping of task fields")
    row: dict[str, Any] = dict(spec)
    row.setdefault("instance_id", task_dir.name)
    statement = _read_optional(task_dir / "problem_statement.md")
    if statement is not None:
        row["problem_statement"] = statement
    tests_path = task_dir / "tests.json"
    if tests_path.is_file():
        try:
            tests = json.loads(tests_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise TaskFileError(tests_path, f"not valid JSON ({exc.msg})", line=exc.lineno) from None
        if not isinstance(tests, dict):
            raise TaskFileError(tests_path, "expected an object with FAIL_TO_PASS and PASS_TO_PASS")
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            if key in tests:
                row[key] = tests[key]
    for name, key in (("gold.patch", "patch"), ("test.patch", "test_patch")):
        content = _read_optional(task_dir / name)
        if content is not None:
            row[key] = content
    origin = spec_path if "FAIL_TO_PASS" in spec or not tests_path.is_file() else tests_path
    return task_from_row(row, path=origin, line=None, base_dir=task_dir)


def load_task_dirs(root: Path) -> list[Task]:
    base = root / "tasks" if (root / "tasks").is_dir() else root
    folders = sorted(p for p in base.iterdir() if p.is_dir() and (p / "task.yaml").is_file())
    if not folders:
        raise TaskFileError(root, "no task folders found (expected tasks/<id>/task.yaml)")
    return _check_unique([load_task_dir(folder) for folder in folders], root)


def load_tasks(spec: str | Path) -> list[Task]:
    """Load a task set from a JSONL/JSON file, a v5 task directory, or the word `bundled`."""
    if str(spec) == "bundled":
        from patchgym.tasks.suite import bundled_tasks

        return load_jsonl(Path(bundled_tasks()))
    path = Path(spec).expanduser()
    if not path.exists():
        raise TaskFileError(path, "no such file or directory (expected a .jsonl file, a task directory, or `bundled`)")
    if path.is_dir():
        return load_task_dirs(path)
    if path.suffix == ".json":
        return load_json_list(path)
    return load_jsonl(path)


def select(tasks: list[Task], ids: Iterable[str] | None) -> list[Task]:
    """Keep the tasks whose instance_id is in `ids` (all when None); unknown ids are an error."""
    if not ids:
        return tasks
    wanted = list(ids)
    by_id = {task.instance_id: task for task in tasks}
    unknown = [i for i in wanted if i not in by_id]
    if unknown:
        raise KeyError(f"unknown task id(s): {', '.join(unknown)}")
    return [by_id[i] for i in wanted]

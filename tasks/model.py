"""The task model: one coding task, as described in docs/task-format.md.

A task is a repository at `base_commit`, the issue text shown to the agent, and the tests that
decide the reward. The field names are a superset of SWE-bench's instance schema, so SWE-bench,
SWE-Gym and SWE-rebench rows load unchanged: `FAIL_TO_PASS` / `PASS_TO_PASS` may arrive as a list
or as a string holding a JSON list. Unknown fields are kept (and written back) untouched.

Fields the agent must never see (`patch`, `test_patch`, the test ids) live here too; what the agent
is shown is decided by `patchgym.env`, which only ever exposes `public_view()`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from patchgym.tasks.swebench_runners import defaults_for

SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,199}$")
SHA_LIKE = re.compile(r"^[0-9a-fA-F]{4,64}$")


class Environment(BaseModel):
    """How to make a task runnable.

    `setup` runs once, in the repository root (at `/testbed`), at preparation time, with network
    access; for Python tasks a virtual environment is active (`/patchgym/venv`), so `pip install -e .`
    installs into it. `image` is the container image for the docker and modal backends. `python`
    is a version hint (the local backend builds the venv with a matching interpreter of the host).
    `shared: true` declares that setup does not read the repository (e.g. it only installs test
    tools): its environment is then built once, in an empty /testbed, and mounted
    read-only by every task with the same setup (a patchgym extension; default false).
    `memory_gb` raises the grading sandbox's memory cap (default 2 GiB) for a suite whose honest
    tests need more (astropy's `test_heapsize_P_limit` allocates ~2 GiB: `oom_killed` under the
    default, a false-positive hunt, stop 42), and `write_gb` its caps on what the tests write
    (default 256 MiB a file, 1 GiB in all: astropy's `test_heapsize_Q_limit` writes a ~2 GiB file);
    `processes` its cap on processes and threads alive at once (default 1024); all three patchgym
    extensions.
    """

    model_config = ConfigDict(extra="allow")

    setup: list[str] = Field(default_factory=list)
    image: str | None = None
    python: str | None = None
    shared: bool = False
    memory_gb: float | None = Field(default=None, gt=0, le=256)
    write_gb: float | None = Field(default=None, gt=0, le=1024)
    processes: int | None = Field(default=None, gt=0, le=65536)

    @field_validator("setup", mode="before")
    @classmethod
    def _one_command_is_a_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [value]
        return value


def _json_list(value: Any) -> Any:
    """Accept a list, or a string holding a JSON list (SWE-bench's encoding)."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"expected a list or a string holding a JSON list, got {value[:60]!r}") from exc
        if not isinstance(decoded, list):
            raise ValueError(f"expected a JSON list, got {type(decoded).__name__}")
        return decoded
    return value


class Task(BaseModel):
    """One task. See docs/task-format.md for the meaning of each field."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    source: str | None = None
    patch: str | None = None
    test_patch: str | None = None
    test_cmd: str | None = None
    log_parser: str = "pytest"
    environment: Environment = Field(default_factory=Environment)
    hints_text: str | None = None
    created_at: str | None = None
    version: str | None = None
    environment_setup_commit: str | None = None
    difficulty: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _swebench_runner(cls, row: Any) -> Any:
        """A SWE-bench row of Django or sympy naming neither `test_cmd` nor `log_parser` gets
        SWE-bench's own command and parser for its repository (`swebench_runners`)."""
        if isinstance(row, dict) and row.get("test_cmd") is None and "log_parser" not in row and isinstance(row.get("repo"), str):
            filled = defaults_for(row["repo"], row.get("test_patch") if isinstance(row.get("test_patch"), str) else None)
            if filled:
                row = {**row, **filled}
        return row

    @field_validator("instance_id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        if not SAFE_ID.match(value) or value in {".", ".."}:
            raise ValueError(
                "must be safe as a file name: letters, digits and . _ + - only, starting with a "
                f"letter or digit, at most 200 characters (got {value!r})"
            )
        return value

    @field_validator("repo")
    @classmethod
    def _owner_name(cls, value: str) -> str:
        if value.count("/") != 1 or not all(value.split("/")):
            raise ValueError(f"must be 'owner/name' (got {value!r})")
        return value

    @field_validator("base_commit")
    @classmethod
    def _commitish(cls, value: str) -> str:
        if not SHA_LIKE.match(value):
            raise ValueError(f"must be a commit id in hex (got {value!r})")
        return value.lower()

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _decode_lists(cls, value: Any) -> Any:
        return _json_list(value)

    @field_validator("FAIL_TO_PASS")
    @classmethod
    def _not_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("must name at least one test: a task with no failing test has no reward signal")
        return value

    @field_validator("environment", mode="before")
    @classmethod
    def _null_environment(cls, value: Any) -> Any:
        return {} if value is None else value

    @property
    def owner_name(self) -> str:
        """`owner__name`, the directory name SWE-bench tooling uses for a repository."""
        return self.repo.replace("/", "__")

    def public_view(self) -> dict[str, str]:
        """What an agent or a client may see: nothing about the fix or the tests that grade it."""
        return {"instance_id": self.instance_id, "repo": self.repo, "problem_statement": self.problem_statement}

    def test_files(self) -> list[str]:
        """Files that hold the grading tests: named by the test ids and touched by `test_patch`. A
        module named only by doctest ids (`pkg/mod.py::pkg.mod.Cls`, run with --doctest-modules) is
        library code, not a test file: the fix may change it (its gold patch was reverted as a test
        file's, and every doctest of it failed, in a false-positive hunt on boltons)."""
        from patchgym.tasks.patches import files_touched  # local import: patches imports nothing of ours

        files: list[str] = []
        for test_id in [*self.FAIL_TO_PASS, *self.PASS_TO_PASS]:
            path = file_of_test_id(test_id, self.log_parser)
            if path and path not in files and not is_doctest_id(test_id):
                files.append(path)
        for path in files_touched(self.test_patch or ""):
            if path not in files:
                files.append(path)
        return files


def is_doctest_id(test_id: str) -> bool:
    """A pytest doctest item's id: `path.py::dotted.name` (one segment after the file, with dots:
    a test function's or class's name has none)."""
    parts = test_id.split("::")
    return len(parts) == 2 and parts[0].endswith(".py") and "." in parts[1].split("[", 1)[0]


def file_of_test_id(test_id: str, log_parser: str = "pytest") -> str | None:
    """The file a test id lives in: `tests/test_x.py::T::t[p]` -> `tests/test_x.py`; for a text
    file's doctests, `docs/usage.md::usage.md` -> `docs/usage.md`.

    unittest ids (`pkg.module.Class.test`) name a module, not a file; `None` is returned for them.
    """
    if log_parser == "pytest" or "::" in test_id:
        head, _, rest = test_id.partition("::")
        head = head.strip()
        if head.endswith(".py"):
            return head
        # a text file's doctests (`--doctest-glob`): `docs/usage.md::usage.md`, the item named after
        # the file. Left out of the command before, so such a graded test never ran (voluptuous).
        if head.endswith(_DOCTEST_TEXT_SUFFIXES) and rest == head.rsplit("/", 1)[-1]:
            return head
    return None


_DOCTEST_TEXT_SUFFIXES = (".txt", ".rst", ".md")

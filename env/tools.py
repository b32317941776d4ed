"""The agent's tools: their schemas (OpenAI function-calling JSON) and their implementations.

Three tools, all acting on one `Sandbox` through its API (never through host paths):

* `bash`: run a command in /testbed, each in a fresh shell, with a timeout; long output is cut to
  head and tail with a notice of how much was cut.
* `str_replace_editor`: `view` (a file with line numbers, a line range, or a directory listing),
  `create`, `str_replace` (the old string must occur exactly once), `insert` (after a line) and
  `undo_edit` (per-file history).
* `submit`: ends the episode; the episode (not this module) grades the diff.

Two kinds of failure are kept apart. `CallFormatError`: the call itself is malformed (unknown tool,
missing, extra or mistyped arguments); it counts toward the episode's format-error limit. A
well-formed call that fails (file not found, no match) is an ordinary result with `is_error=True`.
"""

from __future__ import annotations

import asyncio
import json
import posixpath
import shlex
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from patchgym.env.limits import EpisodeLimits
from patchgym.env.truncate import head_and_tail
from patchgym.harness.sandbox.base import CommandResult, Sandbox, SandboxError
from patchgym.tasks.prepared import TESTBED

# Commands run non-interactively: no pagers, no progress bars, no colour codes.
QUIET_ENV = {
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "MANPAGER": "cat",
    "SYSTEMD_PAGER": "",
    "TERM": "dumb",
    "NO_COLOR": "1",
    "PIP_PROGRESS_BAR": "off",
    "TQDM_DISABLE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}
UNDO_DEPTH = 20  # edits remembered per file
SNIPPET_LINES = 4  # context lines shown around an edit


class CallFormatError(ValueError):
    """A malformed tool call; the message says exactly what was wrong."""


@dataclass(frozen=True)
class ToolResult:
    output: str
    is_error: bool = False
    submitted: bool = False


# --- arguments ---------------------------------------------------------------------------------
class BashArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1)
    timeout: float | None = Field(None, gt=0, le=86400)


EditorCommand = Literal["view", "create", "str_replace", "insert", "undo_edit"]


class EditorArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: EditorCommand
    path: str = Field(min_length=1)
    file_text: str | None = None
    old_str: str | None = None
    new_str: str | None = None
    insert_line: int | None = None
    view_range: list[int] | None = None

    @model_validator(mode="after")
    def _arguments_of_the_command(self) -> "EditorArgs":
        needs = {"create": ["file_text"], "str_replace": ["old_str"], "insert": ["insert_line", "new_str"]}
        missing = [name for name in needs.get(self.command, []) if getattr(self, name) is None]
        if missing:
            raise ValueError(f"command {self.command!r} needs argument(s) {', '.join(missing)}")
        if self.command == "str_replace" and self.old_str == "":
            raise ValueError("old_str must not be empty")
        if self.view_range is not None:
            if self.command != "view":
                raise ValueError("view_range is only for command 'view'")
            if len(self.view_range) != 2:
                raise ValueError("view_range must be two line numbers [start, end] (end -1 means the last line)")
        return self


class SubmitArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


ARGUMENT_MODELS: dict[str, type[BaseModel]] = {
    "bash": BashArgs,
    "str_replace_editor": EditorArgs,
    "submit": SubmitArgs,
}


def tool_schemas(command_timeout_s: float) -> list[dict[str, Any]]:
    """The tools in OpenAI function-calling form, as an episode shows them to the agent."""
    return [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "description": (
                    f"Run a bash command in {TESTBED}. Each command runs in a fresh shell (cd and "
                    "variables do not carry over; chain with &&). There is no network and no "
                    f"interactive input. Commands are killed after {command_timeout_s:g} seconds. "
                    "Long output is cut to its head and tail."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "command": {"type": "string", "description": "The command to run."},
                        "timeout": {
                            "type": "number",
                            "description": f"Seconds before the command is killed (at most {command_timeout_s:g}).",
                        },
                    },
                    "required": ["command"],
                    "additionalProperties": False,
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "str_replace_editor",
                "description": (
                    "View, create and edit files. Paths are absolute or relative to "
                    f"{TESTBED}.\n"
                    "* view: a file with line numbers (optionally view_range [start, end], end -1 for "
                    "the last line), or a directory listing two levels deep.\n"
                    "* create: write file_text to path (a new file, or replacing an existing one).\n"
                    "* str_replace: replace old_str with new_str; old_str must match exactly once, "
                    "whitespace included.\n"
                    "* insert: insert new_str after line insert_line (0 inserts at the top).\n"
                    "* undo_edit: revert the last edit made to path with this tool."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "command": {
                            "type": "string",
                            "enum": ["view", "create", "str_replace", "insert", "undo_edit"],
                        },
                        "path": {"type": "string", "description": "File or directory."},
                        "file_text": {"type": "string", "description": "create: the whole file."},
                        "old_str": {"type": "string", "description": "str_replace: text to replace, exactly once."},
                        "new_str": {"type": "string", "description": "str_replace / insert: the new text."},
                        "insert_line": {"type": "integer", "description": "insert: the line to insert after."},
                        "view_range": {
                            "type": "array",
                            "items": {"type": "integer"},
                            "description": "view: [start, end] line numbers, 1-based, end -1 for the last line.",
                        },
                    },
                    "required": ["command", "path"],
                    "additionalProperties": False,
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "submit",
                "description": (
                    f"Finish: your changes to {TESTBED} are graded by tests you cannot see. Call it "
                    "once, when the fix is complete; nothing can be changed afterwards."
                ),
                "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
            },
        },
    ]


def _reason(exc: BaseException) -> str:
    """Why a file operation failed, in the system's words and once: an OSError's strerror
    ("Read-only file system"), not its repr with the errno and the path again."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def describe_validation_error(tool: str, exc: ValidationError) -> str:
    """One line per problem, in words an agent can act on."""
    problems = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err.get("loc", ()))
        kind = err.get("type", "")
        if kind == "missing":
            problems.append(f"argument {where!r} is required but missing")
        elif kind == "extra_forbidden":
            problems.append(f"{where!r} is not an argument of {tool}")
        elif where:
            problems.append(f"argument {where!r}: {err.get('msg', 'invalid')}")
        else:
            problems.append(str(err.get("msg", "invalid")).removeprefix("Value error, "))
    return f"invalid arguments for {tool}: " + "; ".join(problems)


def validate_call(name: str, arguments: Any) -> BaseModel:
    """The parsed arguments of a call, or CallFormatError saying what is wrong with it."""
    model = ARGUMENT_MODELS.get(name)
    if model is None:
        raise CallFormatError(f"unknown tool {name!r}: the tools are {', '.join(ARGUMENT_MODELS)}")
    if isinstance(arguments, str):  # OpenAI sends arguments as a string holding JSON
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise CallFormatError(
                f"the arguments of {name} are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from None
        except RecursionError:
            raise CallFormatError(f"the arguments of {name} are nested too deeply") from None
    if not isinstance(arguments, dict):
        raise CallFormatError(f"the arguments of {name} must be a JSON object, got {type(arguments).__name__}")
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        raise CallFormatError(describe_validation_error(name, exc)) from None


# --- implementations ---------------------------------------------------------------------------
class _Failed(Exception):
    """A well-formed call that failed; the message goes to the agent."""


class ToolBox:
    """The tools of one episode, bound to its sandbox. Blocking; call from a worker thread."""

    def __init__(self, sandbox: Sandbox, limits: EpisodeLimits) -> None:
        self.sandbox = sandbox
        self.limits = limits
        self._history: dict[str, list[str | None]] = {}  # path -> earlier contents (None: did not exist)

    def forget(self) -> None:
        """Drop the edit history (the file contents it holds) once the episode has ended."""
        self._history.clear()

    def execute(self, name: str, args: BaseModel, *, time_left_s: float | None = None) -> ToolResult:
        try:
            if isinstance(args, BashArgs):
                return self.bash(args, time_left_s=time_left_s)
            if isinstance(args, EditorArgs):
                output = self.editor(args)
            elif isinstance(args, SubmitArgs):
                return ToolResult("Submitted. Your changes will be graded.", submitted=True)
            else:  # pragma: no cover - validate_call only builds the models above
                raise CallFormatError(f"unknown tool {name!r}")
        except _Failed as exc:
            return ToolResult(self._cap(f"Error: {exc}"), is_error=True)
        except UnicodeError as exc:  # text the sandbox cannot encode; anything else is the sandbox's failure
            return ToolResult(self._cap(f"Error: {type(exc).__name__}: {exc}"), is_error=True)
        return ToolResult(self._cap(output))

    def _cap(self, text: str) -> str:
        return head_and_tail(text, self.limits.max_output_chars)

    async def aexecute(self, name: str, args: BaseModel, *, time_left_s: float | None = None) -> ToolResult:
        """`execute` for the event loop: bash commands through the sandbox's `arun` (on the loop
        itself for the local backend), everything else in a worker thread."""
        if isinstance(args, BashArgs):
            timeout = self._bash_timeout(args, time_left_s)
            if "\x00" in args.command:
                return ToolResult("Error: the command contains a NUL character", is_error=True)
            result = await self.sandbox.arun(args.command, timeout_s=timeout, env=dict(QUIET_ENV), cwd=TESTBED)
            return self._bash_result(result, timeout)
        return await asyncio.to_thread(self.execute, name, args, time_left_s=time_left_s)

    # bash ------------------------------------------------------------------------------------
    def _bash_timeout(self, args: BashArgs, time_left_s: float | None) -> float:
        timeout = min(args.timeout or self.limits.command_timeout_s, self.limits.command_timeout_s)
        if time_left_s is not None:
            timeout = max(min(timeout, time_left_s), 0.1)
        return timeout

    def bash(self, args: BashArgs, *, time_left_s: float | None = None) -> ToolResult:
        timeout = self._bash_timeout(args, time_left_s)
        if "\x00" in args.command:
            return ToolResult("Error: the command contains a NUL character", is_error=True)
        return self._bash_result(self.sandbox.run(args.command, timeout_s=timeout, env=dict(QUIET_ENV), cwd=TESTBED), timeout)

    def _bash_result(self, result: CommandResult, timeout: float) -> ToolResult:
        output = result.output if result.output else "(no output)"
        output = self._cap(output.rstrip("\n"))
        if result.timed_out:
            footer = f"[command timed out after {timeout:g} s and was killed]"
        else:
            footer = f"[exit code {result.exit_code}]"
        return ToolResult(f"{output}\n{footer}", is_error=not result.ok)

    # str_replace_editor ---------------------------------------------------------------------
    def editor(self, args: EditorArgs) -> str:
        path = self._resolve(args.path)
        if args.command == "view":
            return self._view(path, args.view_range)
        if args.command == "create":
            return self._create(path, args.file_text or "")
        if args.command == "str_replace":
            return self._str_replace(path, args.old_str or "", args.new_str or "")
        if args.command == "insert":
            return self._insert(path, args.insert_line or 0, args.new_str or "")
        return self._undo(path)

    @staticmethod
    def _resolve(path: str) -> str:
        if "\x00" in path:
            raise _Failed("the path contains a NUL character")
        joined = path if path.startswith("/") else posixpath.join(TESTBED, path)
        return posixpath.normpath(joined)

    def _read_text(self, path: str) -> str | None:
        """The file's text; None when it does not exist. _Failed for directories and binary files."""
        try:
            data = self.sandbox.read_file(path)
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise _Failed(f"{path} is a directory") from None
        except (OSError, SandboxError) as exc:
            if self._is_dir(path):
                raise _Failed(f"{path} is a directory") from None
            raise _Failed(f"cannot read {path}: {_reason(exc)}") from None
        if b"\x00" in data[:8192]:
            raise _Failed(f"{path} is a binary file ({len(data)} bytes); inspect it with bash (xxd, od)")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise _Failed(f"{path} is not UTF-8 text; inspect it with bash") from None

    def _is_dir(self, path: str) -> bool:
        return self.sandbox.run(f"test -d {shlex.quote(path)}", timeout_s=30).exit_code == 0

    def _must_read(self, path: str) -> str:
        text = self._read_text(path)
        if text is None:
            raise _Failed(f"{path} does not exist" + self._hint_create())
        return text

    @staticmethod
    def _hint_create() -> str:
        return "; use command 'create' to make a new file"

    def _write(self, path: str, text: str, *, existed: bool) -> None:
        if existed:
            # Writing through the shell keeps the file's mode (an executable stays executable).
            result = self.sandbox.run('cat > "$PATCHGYM_EDIT_PATH"', stdin=text, env={"PATCHGYM_EDIT_PATH": path}, timeout_s=60)
            if not result.ok:
                raise _Failed(f"cannot write {path}: {result.output.strip()[:500]}")
        else:
            try:
                self.sandbox.write_file(path, text)
            except (OSError, SandboxError) as exc:
                raise _Failed(f"cannot write {path}: {_reason(exc)}") from None

    def _remember(self, path: str, before: str | None) -> None:
        stack = self._history.setdefault(path, [])
        stack.append(before)
        del stack[:-UNDO_DEPTH]

    @staticmethod
    def _numbered(lines: list[str], first: int) -> str:
        return "\n".join(f"{number:6}\t{line}" for number, line in enumerate(lines, start=first))

    def _snippet(self, text: str, around_line: int, span: int) -> str:
        lines = text.split("\n")
        start = max(around_line - SNIPPET_LINES, 1)
        end = min(around_line + span + SNIPPET_LINES, len(lines))
        return self._numbered(lines[start - 1 : end], start)

    def _view(self, path: str, view_range: list[int] | None) -> str:
        text = self._read_text(path) if not self._looks_like_dir(path) else None
        if text is None:
            if self._is_dir(path):
                if view_range is not None:
                    raise _Failed("view_range cannot be used on a directory")
                return self._list_dir(path)
            raise _Failed(f"{path} does not exist")
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        if view_range is None:
            return self._numbered(lines, 1) if lines else f"{path} is empty"
        start, end = view_range
        count = len(lines)
        if not 1 <= start <= max(count, 1):
            raise _Failed(f"view_range start {start} is outside the file's lines 1..{count}")
        if end == -1:
            end = count
        if end < start or end > count:
            raise _Failed(f"view_range end {end} must be -1 or between start {start} and the last line {count}")
        return self._numbered(lines[start - 1 : end], start)

    @staticmethod
    def _looks_like_dir(path: str) -> bool:
        return path.endswith("/") or path == TESTBED

    def _list_dir(self, path: str) -> str:
        quoted = shlex.quote(path)
        result = self.sandbox.run(
            f"find {quoted} -maxdepth 2 -not -path '*/.*' | sort | head -n 1000", timeout_s=60
        )
        return f"Files and directories in {path}, two levels deep (hidden ones left out):\n{result.output.rstrip()}"

    def _create(self, path: str, file_text: str) -> str:
        before = self._read_text(path) if not self._looks_like_dir(path) else None
        if before is None and self._looks_like_dir(path):
            raise _Failed(f"{path} is a directory")
        self._write(path, file_text, existed=before is not None)
        self._remember(path, before)
        verb = "Overwrote" if before is not None else "Created"
        return f"{verb} {path} ({len(file_text)} characters)."

    def _str_replace(self, path: str, old: str, new: str) -> str:
        text = self._must_read(path)
        count = text.count(old)
        if count == 0:
            raise _Failed(f"old_str was not found in {path}; it must match exactly, whitespace and indentation included")
        if count > 1:
            lines = [text[: m].count("\n") + 1 for m in _find_all(text, old)][:10]
            raise _Failed(
                f"old_str occurs {count} times in {path} (lines {', '.join(map(str, lines))}); "
                "include more context so that it matches exactly once"
            )
        at = text.index(old)
        updated = text[:at] + new + text[at + len(old) :]
        self._write(path, updated, existed=True)
        self._remember(path, text)
        first_line = text[:at].count("\n") + 1
        return f"Edited {path}. The lines around the change:\n" + self._snippet(updated, first_line, new.count("\n"))

    def _insert(self, path: str, after_line: int, new: str) -> str:
        text = self._must_read(path)
        lines = text.split("\n") if text else []
        trailing_newline = text.endswith("\n")
        if trailing_newline:
            lines.pop()
        if not 0 <= after_line <= len(lines):
            raise _Failed(f"insert_line {after_line} is outside 0..{len(lines)} (the file has {len(lines)} lines)")
        new_lines = new.split("\n")
        if new.endswith("\n"):
            new_lines.pop()
        updated_lines = lines[:after_line] + new_lines + lines[after_line:]
        updated = "\n".join(updated_lines) + ("\n" if trailing_newline or not lines else "")
        self._write(path, updated, existed=True)
        self._remember(path, text)
        return f"Inserted {len(new_lines)} line(s) after line {after_line} of {path}:\n" + self._snippet(
            updated, after_line + 1, max(len(new_lines) - 1, 0)
        )

    def _undo(self, path: str) -> str:
        stack = self._history.get(path)
        if not stack:
            raise _Failed(f"there is no edit of {path} to undo")
        before = stack.pop()
        if before is None:
            result = self.sandbox.run(f"rm -f -- {shlex.quote(path)}", timeout_s=30)
            if not result.ok:
                raise _Failed(f"cannot remove {path}: {result.output.strip()[:500]}")
            return f"Undid the creation of {path}: it no longer exists."
        self._write(path, before, existed=self._read_text(path) is not None)
        return f"Reverted the last edit of {path}."


def _find_all(text: str, needle: str) -> list[int]:
    positions, start = [], 0
    while (at := text.find(needle, start)) != -1:
        positions.append(at)
        start = at + 1
    return positions

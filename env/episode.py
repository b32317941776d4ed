"""One episode: one agent working on one task in its own sandbox, step by step, until it ends.

An episode opens a sandbox for a prepared task and starts with a system message, the task's public
view and the tool schemas. Each `step` takes the assistant's tool calls (structured, or raw text to
parse) and runs them. It ends with exactly one status, each with a reward:

    submitted     the agent called submit: the sandbox diff is taken, the agent's sandbox closed, and
                  the diff graded in a FRESH sandbox; reward = the verdict's reward
    format_error  `max_format_errors` malformed steps in a row; reward 0
    turn_limit    `max_turns` steps without a submit; reward 0
    time_limit    `wall_time_s` passed; reward 0
    closed        closed from outside (client, idle reaper, server shutdown); reward 0
    error         the sandbox or the grader failed (an infrastructure error, not the agent's);
                  reward 0, and trainers should drop the sample

When it ends the sandbox is closed and `on_finish` receives the episode (the server appends its
record to the episode log).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from datetime import datetime, timezone
from enum import Enum
from typing import Any, Awaitable, Callable

from patchgym.env.limits import EpisodeLimits
from patchgym.env.prompts import opening_messages
from patchgym.env.toolcalls import ParsedText, ToolCall, ToolCallParseError, get_parser
from patchgym.env.tools import CallFormatError, SubmitArgs, ToolBox, tool_schemas, validate_call
from patchgym.harness.sandbox.base import Limits, Sandbox, SandboxFactory
from patchgym.harness.verdict import Verdict
from patchgym.tasks.prepared import PreparedTask

log = logging.getLogger(__name__)

#: What grades a submitted diff: (the prepared task, the diff) -> the harness's Verdict (reward,
#: status, per-test results). The server's is EpisodeManager's `make_grader` (agrade_patch in a
#: fresh sandbox); tests and embedders may pass their own with this signature.
Grader = Callable[[PreparedTask, str], Awaitable[Verdict]]


class EpisodeStatus(str, Enum):
    RUNNING = "running"
    SUBMITTED = "submitted"
    FORMAT_ERROR = "format_error"
    TURN_LIMIT = "turn_limit"
    TIME_LIMIT = "time_limit"
    CLOSED = "closed"
    ERROR = "error"


class EpisodeFinished(RuntimeError):
    """A step on an episode that has already ended."""


class EpisodeBusy(RuntimeError):
    """A step while another step of the same episode is still running."""


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _dump_verdict(verdict: Verdict | None) -> dict[str, Any] | None:
    return None if verdict is None else verdict.model_dump(mode="json")


class Episode:
    """Use `await Episode.start(...)`; then `await step(...)` until `done`; `await close()` any time."""

    def __init__(
        self,
        episode_id: str,
        prepared: PreparedTask,
        sandbox: Sandbox,
        limits: EpisodeLimits,
        *,
        grader: Grader,
        parser: str = "auto",
        on_finish: Callable[["Episode"], Awaitable[None]] | None = None,
    ) -> None:
        self.episode_id = episode_id
        self.prepared = prepared
        self.sandbox = sandbox
        self.limits = limits
        self.parser_name = parser
        self._parse = get_parser(parser)
        self._grader = grader
        self._on_finish = on_finish
        self.toolbox = ToolBox(sandbox, limits)
        self.tools = tool_schemas(limits.command_timeout_s)
        self.messages: list[dict[str, Any]] = opening_messages(
            prepared.task.public_view(), command_timeout_s=limits.command_timeout_s, max_turns=limits.max_turns
        )
        self.status = EpisodeStatus.RUNNING
        self.reward: float | None = None
        self.verdict: Verdict | None = None
        self.diff: str | None = None
        self.error: str | None = None
        self.end_reason: str | None = None
        self.turns = 0
        self.tool_calls = 0
        self.format_errors_in_a_row = 0
        self.format_errors_total = 0
        self.started_at = _now_iso()
        self.ended_at: str | None = None
        self._started = time.monotonic()
        self.last_active = self._started
        self._ended_monotonic: float | None = None
        self._step_lock = asyncio.Lock()
        self._finishing = False
        self._finished = asyncio.Event()

    @classmethod
    async def start(
        cls,
        episode_id: str,
        prepared: PreparedTask,
        factory: SandboxFactory,
        limits: EpisodeLimits,
        *,
        grader: Grader,
        parser: str = "auto",
        sandbox_limits: Limits | None = None,
        on_finish: Callable[["Episode"], Awaitable[None]] | None = None,
    ) -> "Episode":
        get_parser(parser)  # fail before a sandbox is opened
        base = sandbox_limits or Limits()
        opened = Limits(
            timeout_s=limits.command_timeout_s,
            memory_bytes=base.memory_bytes,
            max_processes=base.max_processes,
            max_file_bytes=base.max_file_bytes,
            max_output_bytes=max(base.max_output_bytes, limits.max_output_chars * 4),
            max_write_bytes=base.max_write_bytes,
        )
        sandbox = await asyncio.to_thread(factory.open, prepared, opened)
        return cls(episode_id, prepared, sandbox, limits, grader=grader, parser=parser, on_finish=on_finish)

    # --- state -----------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.status is not EpisodeStatus.RUNNING

    @property
    def task_id(self) -> str:
        return self.prepared.instance_id

    def elapsed_s(self) -> float:
        end = self._ended_monotonic if self._ended_monotonic is not None else time.monotonic()
        return end - self._started

    def time_left_s(self) -> float:
        return self.limits.wall_time_s - self.elapsed_s()

    def idle_s(self) -> float:
        return time.monotonic() - self.last_active

    @property
    def busy(self) -> bool:
        """A step is running now (a second one would be EpisodeBusy; the reaper leaves it alone)."""
        return self._step_lock.locked()

    def summary(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "task_id": self.task_id,
            "status": self.status.value,
            "done": self.done,
            "reward": self.reward,
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "format_errors": self.format_errors_total,
            "elapsed_s": round(self.elapsed_s(), 3),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "end_reason": self.end_reason,
            "error": self.error,
        }

    def state(self) -> dict[str, Any]:
        """Status, turns, transcript, reward (and the verdict once graded)."""
        return {
            **self.summary(),
            "limits": self.limits.model_dump(),
            "transcript": self.messages,
            "verdict": _dump_verdict(self.verdict),
        }

    def record(self) -> dict[str, Any]:
        """What the episode log keeps of a finished episode."""
        return {**self.state(), "diff": self.diff, "parser": self.parser_name}

    # --- stepping --------------------------------------------------------------------------------
    async def step(self, *, tool_calls: list[ToolCall] | None = None, text: str | None = None) -> dict[str, Any]:
        """Run one assistant turn. Exactly one of `tool_calls` and `text`. Returns the new messages,
        done, status, reward (once known), turn and the format-error count."""
        if (tool_calls is None) == (text is None):
            raise ValueError("give exactly one of tool_calls and text")
        if self._step_lock.locked():
            raise EpisodeBusy(f"episode {self.episode_id} is already running a step")
        async with self._step_lock:
            if self._finishing:  # being closed right now: answer with how it ended
                await self._finished.wait()
            if self.done:
                raise EpisodeFinished(f"episode {self.episode_id} has ended ({self.status.value})")
            self.last_active = time.monotonic()
            first_new = len(self.messages)
            try:
                await self._step(tool_calls, text)
            except Exception as exc:  # noqa: BLE001 - any failure here is the sandbox's or ours
                if not self.done and not self._finishing:
                    log.exception("episode %s: step failed", self.episode_id)
                    self.error = f"{type(exc).__name__}: {exc}"
                    await self.finish(EpisodeStatus.ERROR, f"the step failed: {self.error}")
            if self._finishing:  # closed from outside while this step ran: report the end
                await self._finished.wait()
            self.last_active = time.monotonic()
            return {
                "episode_id": self.episode_id,
                "messages": self.messages[first_new + 1 :],  # everything after the assistant's message
                "done": self.done,
                "status": self.status.value,
                "reward": self.reward,
                "turn": self.turns,
                "format_errors_in_a_row": self.format_errors_in_a_row,
                "error": self.error,
            }

    async def _step(self, tool_calls: list[ToolCall] | None, text: str | None) -> None:
        if self.time_left_s() <= 0:
            self.messages.append(self._assistant_message(tool_calls, text, None))
            await self.finish(EpisodeStatus.TIME_LIMIT, f"the wall-time limit of {self.limits.wall_time_s:g} s passed")
            return
        self.turns += 1
        parse_error: str | None = None
        parsed: ParsedText | None = None
        if text is not None:
            try:
                parsed = self._parse(text)
            except ToolCallParseError as exc:
                parse_error = str(exc)
            calls = parsed.calls if parsed else []
        else:
            calls = list(tool_calls or [])
            if not calls:
                parse_error = "the step has no tool call: call at least one tool"
        calls = [
            ToolCall(name=c.name, arguments=c.arguments, id=c.id or f"call_{self.turns}_{i}")
            for i, c in enumerate(calls)
        ]
        self.messages.append(self._assistant_message(calls if text is None else None, text, parsed))

        malformed = False
        submitted = False
        if parse_error is not None:
            malformed = True
            self.messages.append({"role": "user", "content": f"Format error: {parse_error}"})
        else:
            malformed, submitted = await self._run_calls(calls)

        if malformed:
            self.format_errors_in_a_row += 1
            self.format_errors_total += 1
        else:
            self.format_errors_in_a_row = 0

        if self.done or self._finishing:  # closed from outside while the calls ran
            return
        if submitted:
            await self._submit()
        elif self.format_errors_in_a_row >= self.limits.max_format_errors:
            await self.finish(
                EpisodeStatus.FORMAT_ERROR, f"{self.format_errors_in_a_row} malformed steps in a row"
            )
        elif self.time_left_s() <= 0:
            await self.finish(EpisodeStatus.TIME_LIMIT, f"the wall-time limit of {self.limits.wall_time_s:g} s passed")
        elif self.turns >= self.limits.max_turns:
            await self.finish(EpisodeStatus.TURN_LIMIT, f"{self.turns} turns without a submit")

    def _assistant_message(
        self, calls: list[ToolCall] | None, text: str | None, parsed: ParsedText | None
    ) -> dict[str, Any]:
        if text is not None:
            return {"role": "assistant", "content": text}
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _arguments_json(call.arguments)},
                }
                for call in calls or []
            ],
        }

    async def _run_calls(self, calls: list[ToolCall]) -> tuple[bool, bool]:
        """Run the calls in order; returns (any malformed, submitted)."""
        malformed = False
        allowed = self.limits.max_tool_calls_per_turn
        for index, call in enumerate(calls):
            if self.done:
                break
            if index >= allowed:
                malformed = True
                self._tool_message(
                    call,
                    f"Format error: not run: at most {allowed} tool calls per turn ({len(calls)} were made)",
                )
                continue
            try:
                args = validate_call(call.name, call.arguments)
            except CallFormatError as exc:
                malformed = True
                self._tool_message(call, f"Format error: {exc}")
                continue
            self.tool_calls += 1
            if isinstance(args, SubmitArgs):
                self._tool_message(call, "Submitted. Your changes will be graded.")
                for later in calls[index + 1 :]:
                    self._tool_message(later, "Not run: it came after submit.")
                return malformed, True
            result = await self.toolbox.aexecute(call.name, args, time_left_s=max(self.time_left_s(), 0.1))
            if self.done:
                break
            self._tool_message(call, result.output)
        return malformed, False

    def _tool_message(self, call: ToolCall, content: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content})

    async def _submit(self) -> None:
        self._finishing = True  # nothing else may end the episode while it is graded
        try:
            self.diff = await asyncio.to_thread(self.sandbox.diff)
        except Exception as exc:  # noqa: BLE001
            self._finishing = False
            self.error = f"could not take the diff: {type(exc).__name__}: {exc}"
            await self.finish(EpisodeStatus.ERROR, self.error)
            return
        await self._close_sandbox()
        try:
            verdict = await self._grader(self.prepared, self.diff)
        except Exception as exc:  # noqa: BLE001
            log.exception("episode %s: grading failed", self.episode_id)
            self._finishing = False
            self.error = f"grading failed: {type(exc).__name__}: {exc}"
            await self.finish(EpisodeStatus.ERROR, self.error)
            return
        self.verdict = verdict
        self._finishing = False
        if verdict.status == "infra_error":
            self.error = f"grading infrastructure error: {verdict.error}"
            await self.finish(EpisodeStatus.ERROR, self.error)
            return
        self.reward = float(verdict.reward)
        await self.finish(EpisodeStatus.SUBMITTED, f"submitted; verdict {verdict.status}")

    # --- ending ----------------------------------------------------------------------------------
    async def _close_sandbox(self) -> None:
        try:
            await asyncio.to_thread(self.sandbox.close)
        except Exception:  # noqa: BLE001 - closing is best effort; the factory reaps leftovers
            log.exception("episode %s: closing the sandbox failed", self.episode_id)

    async def finish(self, status: EpisodeStatus, reason: str) -> None:
        """End the episode (idempotent): keep the diff, close the sandbox, record the reward."""
        if self.done or self._finishing:
            await self._finished.wait()
            return
        self._finishing = True
        try:
            if self.diff is None and not self.sandbox.closed and status is not EpisodeStatus.ERROR:
                try:
                    self.diff = await asyncio.wait_for(asyncio.to_thread(self.sandbox.diff), timeout=60)
                except Exception:  # noqa: BLE001 - the diff of an unfinished episode is informative only
                    self.diff = None
            await self._close_sandbox()
        finally:
            self.toolbox.forget()
            if status is not EpisodeStatus.SUBMITTED:
                self.reward = 0.0
            self.status = status
            self.end_reason = reason
            self.ended_at = _now_iso()
            self._ended_monotonic = time.monotonic()
            self._finishing = False
            self._finished.set()
        if status is not EpisodeStatus.SUBMITTED:
            self.messages.append({"role": "user", "content": f"The episode has ended ({status.value}): {reason}."})
        if self._on_finish is not None:
            try:
                await self._on_finish(self)
            except Exception:  # noqa: BLE001
                log.exception("episode %s: on_finish failed", self.episode_id)

    async def close(self, reason: str = "closed by the client") -> None:
        """End the episode now (status `closed`, reward 0) unless it has ended already."""
        await self.finish(EpisodeStatus.CLOSED, reason)


def _arguments_json(arguments: Any) -> str:
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        return json.dumps(str(arguments))

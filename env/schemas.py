"""The HTTP API's request and response bodies, shared by the server and the client.

Requests are strict (unknown fields are errors, sizes are bounded) so that bad input is answered
with a 4xx naming what was wrong. Text that cannot be encoded (lone UTF-16 surrogates) is replaced
with U+FFFD on the way in, so nothing an agent writes can break a response later.

A structured tool call is `{"name", "arguments", "id"?}` or OpenAI's `{"id", "type": "function",
"function": {"name", "arguments": "<json>"}}`. Arguments are kept as sent: a string that is not JSON,
or an unknown tool, is the agent's format error (reported in the episode), not a bad request.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from patchgym.env.limits import EpisodeLimits, LimitOverrides

MAX_TEXT_CHARS = 4 * 1024 * 1024
MAX_CALLS_PER_REQUEST = 1000


def clean_json_value(value: Any, depth: int = 0) -> Any:
    """A copy with lone surrogates replaced and non-finite floats turned into None."""
    if depth > 200:
        raise ValueError("the value is nested more than 200 levels deep")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return "".join("\ufffd" if 0xD800 <= ord(char) <= 0xDFFF else char for char in value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {clean_json_value(k, depth + 1): clean_json_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json_value(v, depth + 1) for v in value]
    return value


class _ArgumentsCleaned(BaseModel):
    @field_validator("arguments", check_fields=False)
    @classmethod
    def _clean(cls, value: Any) -> Any:
        return clean_json_value(value)


class ToolCallIn(_ArgumentsCleaned):
    """`{"name", "arguments", "id"?}`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=256)
    arguments: Any = Field(default_factory=dict, description="an object, or a string holding a JSON object")
    id: str | None = Field(None, max_length=256)


class FunctionCallIn(_ArgumentsCleaned):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=256)
    arguments: Any = Field(default_factory=dict, description="a string holding a JSON object (or the object)")


class OpenAIToolCallIn(BaseModel):
    """OpenAI's `{"id", "type": "function", "function": {"name", "arguments"}}`."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, max_length=256)
    type: Literal["function"] = "function"
    function: FunctionCallIn

    def plain(self) -> ToolCallIn:
        return ToolCallIn(name=self.function.name, arguments=self.function.arguments, id=self.id)


def _call_form(value: Any) -> str:
    return "openai" if isinstance(value, dict) and "function" in value else "plain"


AnyToolCallIn = Annotated[
    Union[Annotated[ToolCallIn, Tag("plain")], Annotated[OpenAIToolCallIn, Tag("openai")]],
    Discriminator(_call_form),
]


class StartEpisodeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(min_length=1, max_length=256)
    limits: LimitOverrides | None = Field(None, description="per-episode limits, at most the server's ceilings")
    parser: str | None = Field(None, max_length=64, description="tool-call parser for text steps (auto, hermes, openai)")


class StepRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"oneOf": [{"required": ["tool_calls"]}, {"required": ["text"]}]},
    )

    # Not nullable: a step carries exactly one of the two (the schema's oneOf says so too).
    tool_calls: list[AnyToolCallIn] = Field(None, max_length=MAX_CALLS_PER_REQUEST)  # type: ignore[assignment]
    text: str = Field(None, max_length=MAX_TEXT_CHARS, description="the assistant's raw text")  # type: ignore[assignment]

    def calls(self) -> list[ToolCallIn] | None:
        if self.tool_calls is None:
            return None
        return [call.plain() if isinstance(call, OpenAIToolCallIn) else call for call in self.tool_calls]

    @model_validator(mode="after")
    def _exactly_one(self) -> "StepRequest":
        if (self.tool_calls is None) == (self.text is None):
            raise ValueError("give exactly one of 'tool_calls' (a list of calls) and 'text' (raw assistant text)")
        if self.text is not None:
            self.text = clean_json_value(self.text)
        return self


class GradeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(min_length=1, max_length=256)
    patch: str = Field(description="a unified diff against the task's base commit")


class TaskInfo(BaseModel):
    instance_id: str
    repo: str
    problem_statement: str


class TaskList(BaseModel):
    tasks: list[TaskInfo]


class EpisodeStarted(BaseModel):
    episode_id: str
    task_id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    limits: EpisodeLimits


class StepResult(BaseModel):
    episode_id: str
    messages: list[dict[str, Any]] = Field(description="new messages: tool results, format errors, the end")
    done: bool
    status: str
    reward: float | None = None
    turn: int
    format_errors_in_a_row: int
    error: str | None = None


class EpisodeState(BaseModel):
    episode_id: str
    task_id: str
    status: str
    done: bool
    reward: float | None = None
    turns: int
    tool_calls: int
    format_errors: int
    elapsed_s: float
    started_at: str
    ended_at: str | None = None
    end_reason: str | None = None
    error: str | None = None
    limits: EpisodeLimits | None = None
    transcript: list[dict[str, Any]] = Field(default_factory=list)
    verdict: dict[str, Any] | None = None


class EpisodeSummary(BaseModel):
    episode_id: str
    task_id: str
    status: str
    done: bool
    live: bool = Field(description="still open (false: finished, kept in memory for a while)")
    reward: float | None = None
    turns: int
    tool_calls: int
    format_errors: int
    elapsed_s: float
    idle_s: float = Field(description="seconds since its last step (or its opening)")
    started_at: str
    ended_at: str | None = None
    end_reason: str | None = None
    error: str | None = None


class EpisodeList(BaseModel):
    episodes: list[EpisodeSummary]


class Health(BaseModel):
    status: str
    tasks: int
    backend: str
    live_episodes: int
    max_episodes: int


class ErrorBody(BaseModel):
    error: str
    detail: Any = None

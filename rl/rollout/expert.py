"""Expert trajectories for the supervised warm-up: the tasks' gold patches replayed as tool calls.

An untrained small model earns reward 0 everywhere (SmolLM2-135M-Instruct: 32 of 32 episodes
ended in format errors), so every GRPO group has advantage 0 and nothing is learned. The cold start
is supervised training on trajectories the environment itself produces when the gold patch is
replayed as tool calls, so the ids, the chat template and the tool results are exactly the loop's.

The expert is a "sampler" whose next turn is given (`ExpertRouter`), driven by the same
`run_session` as the model: per file the patch touches, one turn views it
(`str_replace_editor view`); then one `str_replace` per hunk (the hunk's old and new text, widened
by lines around it until the old text occurs once in the file as the view showed it, edits before it
applied), `create` for a new file, `bash rm` for a deleted one, and `bash git apply` of a heredoc
for a file whose hunks cannot be written so (a rename, a binary change, a view that was cut or does
not match the hunk); then `submit`. Each turn is a `ToolFormat`-written assistant message,
tokenized ONCE (the only place text becomes ids: an expert is not a sampler) plus the end-of-turn
id, all with loss mask 1 and log q 0.

`build_expert_trajectories` keeps a trajectory only when its episode ends `submitted` with reward
1; a gold replay that does not resolve is reported (`ExpertReport.failed`), not trained on.
Task rows come from `patchgym tasks export` (`load_task_rows`, `export_task_rows`): `rl/` may not
import `patchgym.tasks`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from patchgym.env.client import AsyncEnvClient, StepResult
from patchgym.rl.rollout.session import SessionLimits, run_session
from patchgym.rl.rollout.toolformat import ToolFormat, get_format
from patchgym.rl.sampler.types import Generation, SamplerError, SamplingParams
from patchgym.rl.trajectory import Trajectory

TESTBED = "/testbed"
EXPERT_GROUP = "expert"
_NUMBERED = re.compile(r"^ *(\d+)\t(.*)$")
_CUT_NOTICE = re.compile(r"\[\.\.\. \d+ characters cut from the middle of this output \.\.\.\]")


# --- task rows ----------------------------------------------------------------------------------
class TaskRowsError(ValueError):
    """Task rows that cannot be read; the message names the file and line."""


def load_task_rows(path: str | Path) -> list[dict[str, Any]]:
    """SWE-bench JSONL rows (what `patchgym tasks export` writes), test lists decoded to lists."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskRowsError(f"{source}: no such file (write one with `patchgym tasks export TASKS --out FILE`)") from None
    except UnicodeDecodeError as exc:
        raise TaskRowsError(f"{source}: not UTF-8 text ({exc.reason})") from None
    return _rows_of(text, str(source))


def _rows_of(text: str, where: str) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskRowsError(f"{where}:{number}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise TaskRowsError(f"{where}:{number}: expected an object with a string 'instance_id'")
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            if isinstance(row.get(key), str):
                try:
                    row[key] = json.loads(row[key])
                except json.JSONDecodeError:
                    raise TaskRowsError(f"{where}:{number}: field {key!r} is a string but not a JSON list") from None
        rows.append(row)
    return rows


def export_task_rows(tasks: str = "bundled", out: str | Path | None = None, *, timeout_s: float = 900) -> list[dict[str, Any]]:
    """Run `python -m patchgym tasks export TASKS` in a subprocess and read its rows (also
    written to `out` when given, so they can be cached)."""
    command = [sys.executable, "-m", "patchgym", "tasks", "export", tasks]
    if out is not None:
        command += ["--out", str(out)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise TaskRowsError(f"`patchgym tasks export {tasks}` took more than {timeout_s:g} s") from None
    if done.returncode != 0:
        raise TaskRowsError(f"`patchgym tasks export {tasks}` failed: {done.stderr.strip()[-2000:]}")
    if out is not None:
        return load_task_rows(out)
    return _rows_of(done.stdout, f"`patchgym tasks export {tasks}`")


# --- the turn plan --------------------------------------------------------------------------------
def _lines_of_view(output: str) -> tuple[int, list[str]] | None:
    """(first line number, lines) of a `str_replace_editor view` result (a whole file or a
    view_range); None when it was cut or is not one."""
    if _CUT_NOTICE.search(output):
        return None
    lines: list[str] = []
    first = 0
    for raw in output.split("\n"):
        match = _NUMBERED.match(raw)
        if not match:
            return None
        number = int(match.group(1))
        if not lines:
            first = number
        elif number != first + len(lines):
            return None
        lines.append(match.group(2))
    return (first, lines) if lines else None


def _hunk_texts(hunk: Any) -> tuple[list[str], list[str]]:
    old = [line.value for line in hunk if line.is_context or line.is_removed]
    new = [line.value for line in hunk if line.is_context or line.is_added]
    return old, new


def _plan_str_replaces(lines: list[str], patched: Any, first: int = 1, lead: int = 0) -> list[dict[str, Any]] | None:
    """One str_replace per hunk whose old text occurs once in the lines the view showed (from line
    `first`), at that point of the edits (widened by lines around the hunk when it does not);
    None when some hunk cannot be written so. Over a whole-file view "once" is exact; over a
    view_range it is checked in the window only, so the old text also takes up to `lead` lines
    above the hunk (the window's), and the editor's own check decides the rest."""
    text = "\n".join(lines) + "\n"
    path = f"{TESTBED}/{patched.path}"
    calls = []
    shift = 0  # lines added minus removed by the hunks before
    for hunk in patched:
        old_lines, new_lines = _hunk_texts(hunk)
        if any(not value.endswith("\n") for value in old_lines + new_lines):
            return None  # "\\ No newline at end of file": leave it to git apply
        current = text.split("\n")[:-1]
        start = hunk.source_start - first + shift + (0 if hunk.source_length else 1)
        if start < 0 or current[start : start + len(old_lines)] != [v[:-1] for v in old_lines]:
            return None  # the view does not hold the hunk where the patch says
        before, after = max(start - lead, 0), start + len(old_lines)
        while True:
            old = "".join(f"{line}\n" for line in current[before:after])
            new = "".join(f"{line}\n" for line in current[before:start]) + "".join(new_lines)
            new += "".join(f"{line}\n" for line in current[start + len(old_lines) : after])
            if old and text.count(old) == 1:
                break
            if before == 0 and after == len(current):
                return None
            before, after = max(before - 1, 0), min(after + 1, len(current))
        calls.append({"name": "str_replace_editor",
                      "arguments": {"command": "str_replace", "path": path, "old_str": old, "new_str": new}})
        head = "".join(f"{line}\n" for line in current[:before])
        tail = "".join(f"{line}\n" for line in current[after:])
        text = head + new + tail
        shift += len(new_lines) - len(old_lines)
    return calls


def _view_call(patched: Any, view: str, window: int) -> dict[str, Any]:
    arguments: dict[str, Any] = {"command": "view", "path": f"{TESTBED}/{patched.path}"}
    if view == "window":
        hunks = list(patched)
        start = max(hunks[0].source_start - window, 1)
        last = hunks[-1]
        end = max(last.source_start + last.source_length - 1, last.source_start, start)  # a line that exists
        arguments["view_range"] = [start, end]
    return {"name": "str_replace_editor", "arguments": arguments}


def _git_apply_call(file_patch: str) -> dict[str, Any]:
    delimiter = "PATCHGYM_PATCH"
    while delimiter in file_patch:
        delimiter += "_"
    body = file_patch if file_patch.endswith("\n") else file_patch + "\n"
    command = f"git apply --whitespace=nowarn <<'{delimiter}'\n{body}{delimiter}"
    return {"name": "bash", "arguments": {"command": command}}


class ExpertPlan:
    """The turns that replay one gold patch; `observe` reads each step's result (a view's lines).

    `view="file"` views each touched file whole; `view="window"` only from `window` lines above
    its first hunk to the end of its last (shorter trajectories for a tight context budget)."""

    def __init__(self, patch: str, *, view: str = "file", window: int = 3) -> None:
        if view not in ("file", "window"):
            raise ValueError(f"view must be 'file' or 'window' (got {view!r})")
        if window < 0:
            raise ValueError(f"window must be >= 0 (got {window})")
        self.lead = window if view == "window" else 0
        try:
            self.files = list(PatchSet(patch))
        except UnidiffParseError as exc:
            raise ValueError(f"the gold patch cannot be parsed: {exc}") from None
        if not self.files:
            raise ValueError("the gold patch changes no file")
        self._queue: list[tuple[str, Any]] = []  # ("call", call) or ("edit", patched file)
        for patched in self.files:
            if patched.is_added_file:
                text = "".join(line.value for hunk in patched for line in hunk if line.is_added)
                self._queue.append(("call", {"name": "str_replace_editor", "arguments": {
                    "command": "create", "path": f"{TESTBED}/{patched.path}", "file_text": text}}))
            elif patched.is_removed_file:
                self._queue.append(("call", {"name": "bash", "arguments": {"command": f"rm -- {patched.path}"}}))
            elif patched.is_rename or getattr(patched, "is_binary_file", False) or not len(patched):
                self._queue.append(("call", _git_apply_call(str(patched))))
            else:
                self._queue += [("call", _view_call(patched, view, window)), ("edit", patched)]
        self._queue.append(("call", {"name": "submit", "arguments": {}}))
        self._last_output: str | None = None
        self.fallbacks: list[str] = []  # files replayed with git apply

    def observe(self, result: StepResult) -> None:
        tool = [m for m in result.messages if m.get("role") == "tool"]
        self._last_output = str(tool[0].get("content", "")) if tool else None

    def next_call(self) -> dict[str, Any] | None:
        while self._queue:
            kind, item = self._queue.pop(0)
            if kind == "call":
                return item
            seen = _lines_of_view(self._last_output or "")
            calls = _plan_str_replaces(seen[1], item, seen[0], self.lead) if seen is not None else None
            if calls is None:
                self.fallbacks.append(item.path)
                calls = [_git_apply_call(str(item))]
            self._queue[0:0] = [("call", c) for c in calls]
        return None


class ExpertRouter:
    """A router whose next generation is the plan's next turn, tokenized once."""

    def __init__(self, plan: ExpertPlan, tokenizer: Any, fmt: ToolFormat, *, eos_id: int | None = None) -> None:
        self.plan, self.tokenizer, self.fmt = plan, tokenizer, fmt
        self.eos_id = tokenizer.eos_token_id if eos_id is None else eos_id
        self.texts: list[str] = []

    async def generate(
        self, session_id: str, prompt_ids: list[int], params: SamplingParams, *, min_version: int | None = None
    ) -> Generation:
        call = self.plan.next_call()
        if call is None:
            raise SamplerError("the expert's plan is over but the episode has not ended")
        text = self.fmt.format_calls([call])
        ids = list(self.tokenizer.encode(text, add_special_tokens=False)) + [self.eos_id]
        if self.tokenizer.decode(ids, skip_special_tokens=True) != text:
            raise SamplerError("the tokenizer does not decode the expert's turn back to its text")
        if len(ids) > params.max_new_tokens:
            raise SamplerError(f"the expert's turn has {len(ids)} tokens, more than max_new_tokens={params.max_new_tokens}")
        self.texts.append(text)
        n = len(ids)
        return Generation(
            token_ids=ids,
            logprobs=[0.0] * n,
            weight_version=-1,
            group=EXPERT_GROUP,
            finish_reason="stop",
            support_ids=[[i] for i in ids] if params.return_support else None,
            support_logprobs=[[0.0] for _ in ids] if params.return_support else None,
            topk_ids=[[i] for i in ids] if params.top_logprobs else None,
            topk_logprobs=[[0.0] for _ in ids] if params.top_logprobs else None,
            replica="gold-replay",
        )


@dataclass
class ExpertReport:
    trajectories: list[Trajectory] = field(default_factory=list)  # submitted with reward 1
    failed: list[dict[str, Any]] = field(default_factory=list)  # {"task_id", "status", "reward", "why"}

    def summary(self) -> str:
        done = len(self.trajectories)
        lines = [f"expert trajectories: {done}/{done + len(self.failed)} tasks resolved by their gold replay"]
        lines += [f"  {f['task_id']}: {f['status']} (reward {f['reward']}) {f['why']}" for f in self.failed]
        return "\n".join(lines)


async def expert_trajectory(
    env: AsyncEnvClient,
    tokenizer: Any,
    row: Mapping[str, Any],
    formatter: ToolFormat | str | None = None,
    *,
    limits: SessionLimits | None = None,
    replay: bool = False,
    sample_index: int = 0,
    view: str = "file",
) -> Trajectory:
    """One gold replay of `row` through `run_session` (whatever its end); `view`: see ExpertPlan."""
    fmt = get_format(formatter)
    patch = row.get("patch")
    if not isinstance(patch, str) or not patch.strip():
        raise ValueError(f"task {row.get('instance_id')!r} has no gold patch")
    plan = ExpertPlan(patch, view=view)
    router = ExpertRouter(plan, tokenizer, fmt)
    limits = limits or SessionLimits(max_turns=64, max_context_tokens=1 << 20, max_tokens_per_turn=1 << 16)
    params = SamplingParams(max_new_tokens=limits.max_tokens_per_turn or 1 << 16, return_support=replay)
    traj = await run_session(
        env, router, tokenizer, str(row["instance_id"]), params,
        session_id=f"expert-{row['instance_id']}-{sample_index}", limits=limits, formatter=fmt,
        replay=replay, sample_index=sample_index, on_step=plan.observe,
    )
    traj.extra["expert"] = True
    if plan.fallbacks:
        traj.extra["git_apply_files"] = list(plan.fallbacks)
    return traj


async def build_expert_report(
    env: AsyncEnvClient,
    tokenizer: Any,
    rows: Iterable[Mapping[str, Any]],
    formatter: ToolFormat | str | None = None,
    *,
    limits: SessionLimits | None = None,
    replay: bool = False,
    view: str = "file",
) -> ExpertReport:
    """Replay every row's gold patch; keep the trajectories that end submitted with reward 1."""
    report = ExpertReport()
    for row in rows:
        task_id = str(row.get("instance_id"))
        try:
            traj = await expert_trajectory(env, tokenizer, row, formatter, limits=limits, replay=replay, view=view)
        except ValueError as exc:
            report.failed.append({"task_id": task_id, "status": "no_plan", "reward": 0.0, "why": str(exc)})
            continue
        if traj.status == "submitted" and traj.reward == 1.0:
            report.trajectories.append(traj)
        else:
            why = traj.extra.get("error") or f"after {len(traj.turns)} turn(s)"
            report.failed.append({"task_id": task_id, "status": traj.status, "reward": traj.reward, "why": why})
    return report


async def build_expert_trajectories(
    env: AsyncEnvClient,
    tokenizer: Any,
    rows: Iterable[Mapping[str, Any]],
    formatter: ToolFormat | str | None = None,
    **kwargs: Any,
) -> list[Trajectory]:
    """The trajectories of `build_expert_report` that resolved their task (reward 1)."""
    return (await build_expert_report(env, tokenizer, rows, formatter, **kwargs)).trajectories

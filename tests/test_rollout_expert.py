"""Expert trajectories: the gold patches of the bundled easy tasks replayed as tool calls through the
same session code as the model, against the real environment (in process, real sandboxes and
grader) and the real tokenizer: every one earns reward 1 and holds only ids tokenized from its turns;
a replay that does not resolve is reported, not kept; the turn plan widens a hunk that is not unique
and falls back to `git apply` when a hunk cannot be written as a str_replace."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

import patchgym.rl.rollout.expert as expert
from patchgym.env.client import AsyncEnvClient, StepResult
from patchgym.env.testing import sandbox_unavailable_reason
from patchgym.env.toolcalls import parse_tool_calls
from patchgym.rl.rollout import (
    ExpertPlan,
    TaskRowsError,
    build_expert_report,
    build_expert_trajectories,
    check_trajectory,
    export_task_rows,
    get_format,
    load_task_rows,
)

skip_reason = sandbox_unavailable_reason("local")
needs_sandbox = pytest.mark.skipif(skip_reason is not None, reason=skip_reason or "")


@pytest.fixture(scope="module")
def easy_rows(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("rows") / "bundled.jsonl"
    rows = export_task_rows("bundled", out)  # `python -m patchgym tasks export bundled --out ...`
    assert out.is_file() and load_task_rows(out) == rows
    easy = [r for r in rows if r.get("difficulty") == "easy"]
    assert len(easy) == 4 and all(isinstance(r["FAIL_TO_PASS"], list) for r in easy)
    return easy


def _run(coro_fn):
    async def main():
        async with AsyncEnvClient.in_process(tasks="bundled") as env:
            return await coro_fn(env), (await env.health()).live_episodes

    return asyncio.run(main())


@pytest.mark.slow
@needs_sandbox
def test_gold_replays_of_the_easy_tasks_earn_reward_1(tokenizer, easy_rows) -> None:
    (report, live) = _run(lambda env: build_expert_report(env, tokenizer, easy_rows, "hermes", replay=True))
    assert report.failed == [] and live == 0, report.summary()
    assert sorted(t.task_id for t in report.trajectories) == sorted(r["instance_id"] for r in easy_rows)
    fmt = get_format("hermes")
    for traj, row in zip(report.trajectories, easy_rows):
        assert (traj.status, traj.reward, traj.format_errors) == ("submitted", 1.0, 0)
        check_trajectory(traj, tokenizer)
        calls = [parse_tool_calls(t.text, fmt.parser).calls[0] for t in traj.turns]
        assert [c.name for c in calls] == ["str_replace_editor", "str_replace_editor", "submit"]
        assert [c.arguments["command"] for c in calls[:2]] == ["view", "str_replace"]
        for turn in traj.turns:  # tokenized once, plus the end-of-turn id, nothing else
            assert turn.sampled_ids == tokenizer.encode(turn.text, add_special_tokens=False) + [tokenizer.eos_token_id]
            assert turn.group == "expert" and turn.weight_version == -1
        assert sum(traj.loss_mask) == sum(len(t.sampled_ids) for t in traj.turns)
        assert traj.support_ids is not None and traj.extra["expert"] is True


def _zero_context(patch: str) -> str:
    """The same change with no context lines (`git diff -U0`): old text found by the view alone."""
    out, lines, i = [], patch.splitlines(keepends=True), 0
    while i < len(lines):
        header = re.match(r"@@ -(\d+),?(\d*) \+(\d+),?(\d*) @@", lines[i])
        if not header:
            out.append(lines[i])
            i += 1
            continue
        body = []
        i += 1
        while i < len(lines) and lines[i][:1] in (" ", "-", "+", "\\"):
            body.append(lines[i])
            i += 1
        lead = next(k for k, l in enumerate(body) if l[0] != " ")
        changed = [l for l in body if l[0] in "-+"]
        removed, added = sum(l[0] == "-" for l in changed), sum(l[0] == "+" for l in changed)
        old_start, new_start = int(header.group(1)) + lead, int(header.group(3)) + lead
        out.append(f"@@ -{old_start},{removed} +{new_start},{added} @@\n")
        out.extend(changed)
    return "".join(out)


@pytest.mark.slow
@needs_sandbox
def test_zero_context_hunks_and_the_git_apply_fallback_resolve_too(tokenizer, easy_rows, monkeypatch) -> None:
    bare = [dict(r, patch=_zero_context(r["patch"])) for r in easy_rows[:2]]
    assert all("@@ -" in r["patch"] and r["patch"] != o["patch"] for r, o in zip(bare, easy_rows))
    whole, live = _run(lambda env: build_expert_trajectories(env, tokenizer, easy_rows[:2]))
    # viewed through a window around the hunks only: the same fix in fewer tokens
    windowed, live_w = _run(lambda env: build_expert_trajectories(env, tokenizer, bare, view="window"))
    assert len(whole) == len(windowed) == 2 and live == live_w == 0
    for w, f in zip(windowed, whole):
        assert "view_range" in w.turns[0].text and len(w) < len(f)  # 1857 against 2239 tokens for iniconf
    # a view the plan cannot read: the file's change is replayed with git apply of a heredoc
    monkeypatch.setattr(expert, "_lines_of_view", lambda output: None)
    trajs, live = _run(lambda env: build_expert_trajectories(env, tokenizer, easy_rows[2:3]))
    assert len(trajs) == 1 and live == 0
    assert trajs[0].extra["git_apply_files"] and "git apply" in trajs[0].turns[1].text


@needs_sandbox
def test_a_gold_replay_that_does_not_resolve_is_reported_not_kept(tokenizer, easy_rows) -> None:
    wrong = dict(easy_rows[0], patch=easy_rows[1]["patch"])  # another repository's fix: nothing to edit
    empty = dict(easy_rows[0], patch="")
    report, live = _run(lambda env: build_expert_report(env, tokenizer, [wrong, empty]))
    assert report.trajectories == [] and live == 0
    by_id = [(f["status"], f["reward"]) for f in report.failed]
    assert by_id == [("submitted", 0.0), ("no_plan", 0.0)]
    assert "no gold patch" in report.failed[1]["why"] and "0/2 tasks resolved" in report.summary()


# --- the plan, offline ------------------------------------------------------------------------------
def _view(text: str) -> StepResult:
    lines = text.split("\n")[:-1]
    numbered = "\n".join(f"{n:6}\t{line}" for n, line in enumerate(lines, start=1))
    return StepResult(episode_id="e", messages=[{"role": "tool", "content": numbered}], done=False,
                      status="running", turn=1, format_errors_in_a_row=0)


FILE = "def a():\n    return 1\n\n\ndef b():\n    return 1\n"
NOT_UNIQUE = """diff --git a/m.py b/m.py
--- a/m.py
+++ b/m.py
@@ -6 +6 @@
-    return 1
+    return 2
"""


def test_a_hunk_that_is_not_unique_is_widened_until_it_is() -> None:
    plan = ExpertPlan(NOT_UNIQUE)
    assert plan.next_call()["arguments"] == {"command": "view", "path": "/testbed/m.py"}
    plan.observe(_view(FILE))
    edit = plan.next_call()["arguments"]
    assert edit["command"] == "str_replace" and FILE.count(edit["old_str"]) == 1
    assert FILE.replace(edit["old_str"], edit["new_str"]) == FILE[: FILE.rindex("1")] + "2\n"
    assert plan.next_call() == {"name": "submit", "arguments": {}} and plan.next_call() is None


def test_a_window_view_is_placed_by_its_first_line_number() -> None:
    plan = ExpertPlan(NOT_UNIQUE, view="window", window=2)
    view = plan.next_call()["arguments"]
    assert view["view_range"] == [4, 6]
    window = "\n".join(f"{n:6}\t{line}" for n, line in zip(range(4, 7), FILE.split("\n")[3:6]))
    plan.observe(StepResult(episode_id="e", messages=[{"role": "tool", "content": window}], done=False,
                            status="running", turn=1, format_errors_in_a_row=0))
    edit = plan.next_call()["arguments"]
    assert FILE.count(edit["old_str"]) == 1 and edit["new_str"].endswith("    return 2\n")
    with pytest.raises(ValueError, match="view must be"):
        ExpertPlan(NOT_UNIQUE, view="all")


def test_hunks_after_an_edit_are_placed_in_the_edited_file() -> None:
    two = """--- a/m.py
+++ b/m.py
@@ -1,2 +1,3 @@
 def a():
+    x = 0
     return 1
@@ -5,2 +6,2 @@
 def b():
-    return 1
+    return 3
"""
    plan = ExpertPlan(two)
    plan.next_call()
    plan.observe(_view(FILE))
    text = FILE
    for _ in range(2):
        args = plan.next_call()["arguments"]
        assert text.count(args["old_str"]) == 1
        text = text.replace(args["old_str"], args["new_str"])
    assert text == "def a():\n    x = 0\n    return 1\n\n\ndef b():\n    return 3\n"


def test_what_cannot_be_a_str_replace_becomes_git_apply_create_or_rm() -> None:
    plan = ExpertPlan(NOT_UNIQUE)
    plan.next_call()
    plan.observe(_view("something else entirely\n"))  # the view does not hold the hunk
    call = plan.next_call()
    assert call["name"] == "bash" and call["arguments"]["command"].startswith("git apply --whitespace=nowarn <<'PATCHGYM_PATCH'\n")
    assert "-    return 1\n+    return 2\n" in call["arguments"]["command"] and plan.fallbacks == ["m.py"]
    cut = "     1\tx\n[... 99 characters cut from the middle of this output ...]\n     9\ty"
    assert expert._lines_of_view(cut) is None
    added_removed = """diff --git a/new.py b/new.py
new file mode 100644
--- /dev/null
+++ b/new.py
@@ -0,0 +1,2 @@
+A = 1
+B = 2
diff --git a/old.py b/old.py
deleted file mode 100644
--- a/old.py
+++ /dev/null
@@ -1 +0,0 @@
-gone
"""
    plan = ExpertPlan(added_removed)
    assert plan.next_call()["arguments"] == {"command": "create", "path": "/testbed/new.py", "file_text": "A = 1\nB = 2\n"}
    assert plan.next_call()["arguments"] == {"command": "rm -- old.py"}
    with pytest.raises(ValueError, match="changes no file"):
        ExpertPlan("not a patch\n")


def test_task_rows_errors_name_the_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(TaskRowsError, match="no such file"):
        load_task_rows(tmp_path / "none.jsonl")
    bad = tmp_path / "rows.jsonl"
    bad.write_text(json.dumps({"instance_id": "a", "FAIL_TO_PASS": "[\"t\"]"}) + "\n[1]\n")
    with pytest.raises(TaskRowsError, match=r"rows.jsonl:2: expected an object"):
        load_task_rows(bad)
    bad.write_text(json.dumps({"instance_id": "a", "FAIL_TO_PASS": "not json"}) + "\n")
    with pytest.raises(TaskRowsError, match="'FAIL_TO_PASS' is a string but not a JSON list"):
        load_task_rows(bad)
    with pytest.raises(TaskRowsError, match="failed"):
        export_task_rows(str(tmp_path / "missing.jsonl"))

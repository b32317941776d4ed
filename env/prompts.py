"""The opening messages of an episode: the system message and the task as the agent sees it.

Only `Task.public_view()` reaches these templates (instance id, repository, problem statement):
never the gold patch, the test patch or the names of the tests that grade the fix.
"""

from __future__ import annotations

from typing import Any

from patchgym.tasks.prepared import TESTBED

SYSTEM_PROMPT = """\
You are a software engineer fixing an issue in a code repository. The repository is checked out at \
{testbed}; you work on it only through the tools you are given.

How to work:
- Read the issue, find the relevant code, reproduce the problem if you can, fix it, and check the fix.
- bash runs each command in a fresh shell in {testbed} (cd does not persist; chain commands with &&). \
There is no network access. A command is killed after {command_timeout_s:g} seconds.
- Edit files with str_replace_editor: view them first, then replace text that matches exactly once.
- Change the source code, not the tests: hidden tests decide whether the issue is fixed, and test files \
they use are reset before they run.
- When the fix is complete, call submit. Your changes to {testbed} are graded then; you cannot continue \
after submitting.
- Every reply must call at least one tool. You have at most {max_turns} turns.\
"""

TASK_PROMPT = """\
<issue>
{problem_statement}
</issue>

The repository {repo} is at {testbed}, at the commit where this issue was reported. Make the smallest \
change to the source code that resolves the issue, then call submit.\
"""


def opening_messages(public_view: dict[str, str], *, command_timeout_s: float, max_turns: int) -> list[dict[str, Any]]:
    """The system and user messages an episode starts with."""
    system = SYSTEM_PROMPT.format(testbed=TESTBED, command_timeout_s=command_timeout_s, max_turns=max_turns)
    task = TASK_PROMPT.format(
        problem_statement=public_view["problem_statement"].strip(), repo=public_view["repo"], testbed=TESTBED
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": task}]

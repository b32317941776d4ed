"""Applying a diff inside a sandbox, with SWE-bench's fallbacks, and recording how it applied.

Methods, tried in order, each from a clean tree (what a failed attempt left is reset first):
`git_apply` (`git apply`), `git_apply_3way` (`git apply --3way`), `patch_fuzz`
(`patch --batch --fuzz=5 -p1`, without backup files). The method that worked is returned.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from patchgym.harness.sandbox.base import Sandbox

GIT = "git -c safe.directory='*' -c core.hooksPath=/dev/null"
METHODS: list[tuple[str, str]] = [
    ("git_apply", GIT + " apply --verbose --whitespace=nowarn {p}"),
    ("git_apply_3way", GIT + " apply --verbose --whitespace=nowarn --3way {p}"),
    ("patch_fuzz", "patch --batch --fuzz=5 -p1 --no-backup-if-mismatch -i {p}"),
]
RESET = GIT + " reset --hard -q && " + GIT + " clean -fdq"


@dataclass
class ApplyResult:
    method: str | None  # None: no method applied it
    log: str
    timed_out: bool = False


def apply_in_sandbox(sandbox: Sandbox, patch_path: str, *, timeout_s: float, methods: list[tuple[str, str]] | None = None,
                     reset_between: bool = True) -> ApplyResult:
    """Apply the diff at `patch_path` (a path inside the sandbox) to /testbed."""
    log: list[str] = []
    for index, (name, template) in enumerate(methods or METHODS):
        command = template.format(p=shlex.quote(patch_path))
        if index and reset_between:
            command = f"{RESET} && {command}"
        result = sandbox.run(command, timeout_s=max(1.0, timeout_s))
        log.append(f"$ {command}\n{result.output}\n[exit {result.exit_code}]")
        if result.timed_out:
            return ApplyResult(None, "\n".join(log), timed_out=True)
        if result.exit_code == 0:
            return ApplyResult(name, "\n".join(log))
    return ApplyResult(None, "\n".join(log))

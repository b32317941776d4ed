"""A tiny task built from scratch, for tests and benchmarks that must not depend on the bundled suite.

`make_toy_task(workdir)` writes a git repository with a one-character bug (`add` subtracts), a
passing test (`tests/test_mul.py`), and a task whose hidden `test_patch` adds the test that catches
the bug. Tests use the standard library's unittest, so the task needs no network and no setup.
`toy_fix_calls()` and `toy_wrong_fix_calls()` are editor tool calls that fix it or do not.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from patchgym.tasks.model import Task

CALC = '''"""A tiny calculator."""


def add(a, b):
    """Return the sum of a and b."""
    return a - b


def mul(a, b):
    """Return the product of a and b."""
    return a * b
'''

TEST_MUL = '''import unittest

from calc import mul


class TestMul(unittest.TestCase):
    def test_mul(self):
        self.assertEqual(mul(3, 4), 12)
'''

GOLD_PATCH = """diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -3,7 +3,7 @@
 
 def add(a, b):
     \"\"\"Return the sum of a and b.\"\"\"
-    return a - b
+    return a + b
 
 
 def mul(a, b):
"""

TEST_PATCH = """diff --git a/tests/test_add.py b/tests/test_add.py
new file mode 100644
--- /dev/null
+++ b/tests/test_add.py
@@ -0,0 +1,8 @@
+import unittest
+
+from calc import add
+
+
+class TestAdd(unittest.TestCase):
+    def test_add(self):
+        self.assertEqual(add(2, 3), 5)
"""

PROBLEM = "calc.add returns the wrong result: add(2, 3) gives -1, but it should give 5."

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Toy Author",
    "GIT_AUTHOR_EMAIL": "toy@example.invalid",
    "GIT_COMMITTER_NAME": "Toy Author",
    "GIT_COMMITTER_EMAIL": "toy@example.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV, "HOME": str(repo.parent)}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True).stdout


def make_toy_repo(dest: Path) -> str:
    """Write the buggy repository at `dest` and commit it; returns the base commit (the same on
    every machine: fixed authors and dates). An existing toy repository at `dest` is reused."""
    if (dest / ".git").is_dir():
        return _git(dest, "rev-parse", "HEAD").strip()
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "calc.py").write_text(CALC)
    (dest / "tests").mkdir(exist_ok=True)
    (dest / "tests" / "__init__.py").write_text("")
    (dest / "tests" / "test_mul.py").write_text(TEST_MUL)
    (dest / "run.sh").write_text("#!/bin/sh\npython -c 'import calc; print(calc.add(2, 3))'\n")
    (dest / "run.sh").chmod(0o755)
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "A tiny calculator")
    return _git(dest, "rev-parse", "HEAD").strip()


def make_toy_task(workdir: Path, instance_id: str = "toy__calc-1") -> Task:
    """The task over a fresh toy repository under `workdir` (its `source` is that repository)."""
    repo = workdir / "toy-repo"
    base = make_toy_repo(repo)
    return Task(
        instance_id=instance_id,
        repo="toy/calc",
        source=str(repo),
        base_commit=base,
        problem_statement=PROBLEM,
        patch=GOLD_PATCH,
        test_patch=TEST_PATCH,
        FAIL_TO_PASS=["tests.test_add.TestAdd.test_add"],
        PASS_TO_PASS=["tests.test_mul.TestMul.test_mul"],
        log_parser="unittest",
        test_cmd="python -m unittest -v tests.test_add tests.test_mul",
    )


def toy_fix_calls() -> list[dict[str, Any]]:
    """Editor calls that fix the toy task, then submit."""
    return [
        {
            "name": "str_replace_editor",
            "arguments": {"command": "str_replace", "path": "/testbed/calc.py", "old_str": "return a - b",
                          "new_str": "return a + b"},
        },
        {"name": "submit", "arguments": {}},
    ]


def toy_wrong_fix_calls() -> list[dict[str, Any]]:
    """Editor calls that change the code without fixing it, then submit."""
    return [
        {
            "name": "str_replace_editor",
            "arguments": {"command": "str_replace", "path": "/testbed/calc.py", "old_str": "return a - b",
                          "new_str": "return a * b"},
        },
        {"name": "submit", "arguments": {}},
    ]


def sandbox_unavailable_reason(backend: str = "local") -> str | None:
    """Why sandboxes of `backend` cannot run here (for pytest skips), or None when they can."""
    import shutil

    if backend == "local" and not shutil.which("bwrap"):
        return "bubblewrap (bwrap) is not installed"
    try:
        from patchgym.harness.sandbox.base import get_factory

        get_factory(backend)
    except Exception as exc:  # noqa: BLE001 - any reason is a reason to skip
        return f"the {backend} sandbox backend is not available: {type(exc).__name__}: {exc}"
    return None


def prepare_toy_task(workdir: Path, instance_id: str = "toy__calc-1"):  # -> PreparedTask
    """The toy task, prepared for real (scrubbed snapshot and venv) in a store under `workdir`."""
    from patchgym.tasks.prepare import prepare_task

    return prepare_task(make_toy_task(workdir, instance_id), workdir / "store")


class ServerProcess:
    """`python -m patchgym serve ... --port 0` in a child process; `url` once it answers /health.

    Used by the real-use tests and by bench/serve. `stop()` sends SIGTERM and waits for the exit code.
    """

    SERVING = "serving"

    def __init__(self, argv_tail: list[str], *, env: dict[str, str] | None = None, start_timeout_s: float = 600) -> None:
        import re
        import sys
        import threading

        self._pattern = re.compile(r"serving (\d+) task\(s\) at (http://\S+)")
        argv = [sys.executable, "-m", "patchgym", "serve", "--port", "0", *argv_tail]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, **(env or {})})
        self.output: list[str] = []
        self._found: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = self._wait_until_up(start_timeout_s)

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.output.append(line)
            if not self._found:
                match = self._pattern.search(line)
                if match:
                    self._found.append(match.group(2))

    def _wait_until_up(self, timeout_s: float) -> str:
        import time

        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if self._found:
                try:
                    if httpx.get(self._found[0] + "/health", timeout=2).status_code == 200:
                        return self._found[0]
                except httpx.HTTPError:
                    pass
            time.sleep(0.05)
        self.proc.kill()
        self.proc.wait()
        raise RuntimeError("the server did not come up:\n" + "".join(self.output))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout_s: float = 60) -> int:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        self._reader.join(5)
        return self.proc.returncode


def editor_calls_for_patch(patch: str) -> list[dict[str, Any]]:
    """str_replace_editor calls that make the change of a unified diff, as an agent would: one
    `str_replace` per hunk of a changed file, `create` for a new file, `rm` through bash for a deleted one."""
    from unidiff import PatchSet

    calls: list[dict[str, Any]] = []
    for patched in PatchSet(patch):
        path = "/testbed/" + patched.path
        if patched.is_added_file:
            text = "".join(line.value for hunk in patched for line in hunk if line.is_added)
            calls.append({"name": "str_replace_editor", "arguments": {"command": "create", "path": path, "file_text": text}})
            continue
        if patched.is_removed_file:
            calls.append({"name": "bash", "arguments": {"command": f"rm -- {path}"}})
            continue
        for hunk in patched:
            old = "".join(line.value for line in hunk if line.is_context or line.is_removed)
            new = "".join(line.value for line in hunk if line.is_context or line.is_added)
            calls.append({"name": "str_replace_editor",
                          "arguments": {"command": "str_replace", "path": path, "old_str": old, "new_str": new}})
    return calls

"""What a first user of `patchgym tasks` hit, each fixed and held here with real preparation,
real grading and the real command line:

* a failed `environment.setup` keeps its log where the error says, and the log (and the error)
  name the command that failed;
* `tasks validate` shows a parametrised test id with its `[...]`, and keeps the test log of a gold
  run that failed (the problem says where);
* `TASKS` is shown as optional in the help of list/prepare/validate; `--workers 0` is refused;
* `environment.python` that the local backend cannot honour is said, not silently ignored;
* a file the agent cannot write is reported once, in the system's words.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from patchgym.env.testing import make_toy_task, sandbox_unavailable_reason
from patchgym.tasks.environment import SETUP_ECHO, python_version_mismatch
from patchgym.tasks.prepare import prepare_task

skip_reason = sandbox_unavailable_reason("local")
needs_sandbox = pytest.mark.skipif(skip_reason is not None, reason=skip_reason or "")


def patchgym(*args: str, home: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "patchgym", *args], capture_output=True, text=True, timeout=timeout,
                          env={**__import__("os").environ, "PATCHGYM_HOME": str(home), "COLUMNS": "200"})


@needs_sandbox
def test_a_failed_setup_keeps_its_log_and_names_the_command(tmp_path: Path) -> None:
    toy = make_toy_task(tmp_path)
    task = type(toy).model_validate({**toy.model_dump(), "environment": {"setup": ["echo first-ran", "exit 7", "echo never-ran"]}})
    with pytest.raises(Exception) as caught:
        prepare_task(task, tmp_path / "store")
    message = str(caught.value)
    assert "at command 2/3: exit 7" in message and "exit code 7" in message, message
    log_path = Path(message.split("(log: ", 1)[1].split(")", 1)[0])
    assert log_path.is_file(), f"the error names {log_path}, which does not exist"
    assert ".build-" not in str(log_path)  # not inside the build directory that failure removes
    log = log_path.read_text()
    assert f"{SETUP_ECHO}1/3: echo first-ran" in log and "\nfirst-ran\n" in log
    assert f"{SETUP_ECHO}2/3: exit 7" in log and "never-ran" not in log
    # A later successful preparation moves its log into the prepared task and leaves none beside it.
    fixed = type(task).model_validate({**task.model_dump(), "environment": {"setup": ["echo fine"]}})
    prepared = prepare_task(fixed, tmp_path / "store")
    assert f"{SETUP_ECHO}1/1: echo fine" in (Path(prepared.root) / "setup.log").read_text()


def test_environment_python_is_warned_about_when_not_this_interpreter(tmp_path: Path) -> None:
    task = make_toy_task(tmp_path)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert python_version_mismatch(task) is None
    assert python_version_mismatch(task.model_copy(update={"environment": task.environment.model_copy(update={"python": here})})) is None
    other = task.model_copy(update={"environment": task.environment.model_copy(update={"python": "2.7"})})
    warning = python_version_mismatch(other)
    assert warning and "'2.7'" in warning and here in warning and "not applied" in warning


def test_help_shows_tasks_optional_and_workers_zero_is_refused(tmp_path: Path) -> None:
    for command in ("list", "prepare", "validate"):
        shown = patchgym("tasks", command, "--help", home=tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert f"patchgym tasks {command} [OPTIONS] [TASKS]" in shown.stdout, shown.stdout
    for command in ("prepare", "validate"):
        refused = patchgym("tasks", command, "--workers", "0", home=tmp_path)
        assert refused.returncode == 2 and "--workers" in refused.stderr and "0" in refused.stderr, refused.stderr


@needs_sandbox
def test_validate_shows_bracketed_ids_and_keeps_the_failed_gold_log(tmp_path: Path) -> None:
    task = make_toy_task(tmp_path)
    bracketed = "tests.test_add.TestAdd.test_add[1-2]"  # never runs: the gold patch cannot resolve it
    task = type(task).model_validate({**task.model_dump(), "FAIL_TO_PASS": [*task.FAIL_TO_PASS, bracketed]})
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(task.model_dump_json() + "\n")
    result = patchgym("tasks", "validate", str(tasks_file), "--store", str(tmp_path / "store"),
                      "--json", str(tmp_path / "v.json"), home=tmp_path / "home")
    assert result.returncode == 1, result.stdout + result.stderr
    assert bracketed in result.stdout, result.stdout  # the table's markup used to eat "[1-2]"
    problems = json.loads((tmp_path / "v.json").read_text())[0]["problems"]
    gold = next(p for p in problems if p.startswith("gold_not_resolved"))
    kept = Path(gold.split("(test log: ", 1)[1].rstrip(")"))
    assert kept.is_dir() and str(kept).startswith(str(tmp_path / "home" / "validation")), gold
    assert any(kept.iterdir()), f"{kept} is empty"


@needs_sandbox
def test_a_read_only_path_is_reported_once_in_the_systems_words() -> None:
    from patchgym.harness.sandbox import get_factory
    from patchgym.tests.test_sandbox_support import make_prepared

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        factory = get_factory("local", state_root=root / "state")
        try:
            with factory.open(make_prepared(root)) as box:
                with pytest.raises(OSError) as caught:
                    box.write_file("/usr/patchgym-newfile", "x")
        finally:
            factory.shutdown()
    assert caught.value.strerror == "Read-only file system"
    assert str(caught.value) == "[Errno 30] Read-only file system: '/usr/patchgym-newfile'"


def test_serve_checks_its_port_before_preparing_anything(tmp_path: Path) -> None:
    import socket

    task = make_toy_task(tmp_path)
    unpreparable = type(task).model_validate({**task.model_dump(), "source": str(tmp_path / "no-such-repo")})
    (tmp_path / "tasks.jsonl").write_text(unpreparable.model_dump_json() + "\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = patchgym("serve", "--tasks", str(tmp_path / "tasks.jsonl"), "--port", str(port),
                          "--store", str(tmp_path / "store"), home=tmp_path / "home", timeout=120)
    # Had it prepared first, the error would be about the missing repository.
    assert result.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in result.stderr, result.stderr
    assert "no-such-repo" not in result.stderr and not (tmp_path / "store").exists()

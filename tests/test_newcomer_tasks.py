"""What a first user of `patchgym tasks` hit, each fixed and held here with real preparation,
real grading and the real command line:

* a failed `environment.setup` keeps its log where the error says, and the log (and the error)
  name the command that failed;
* `tasks validate` shows a parametrised test id with its `[...]`, and keeps the test log of a gold
  run that failed (the problem says where);
* `TASKS` is shown as optional in the help of list/prepare/validate; `--workers 0` is refused;
* `environment.python` is honoured with the host's interpreter of that version (pyenv, uv, /usr/bin),
  which every sandbox can run; one the host lacks is said, not silently ignored;
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
from patchgym.tasks import hostfs
from patchgym.tasks.environment import SETUP_ECHO, environment_python, python_version_mismatch, setup_command
from patchgym.tasks.prepare import prepare_task

skip_reason = sandbox_unavailable_reason("local")
needs_sandbox = pytest.mark.skipif(skip_reason is not None, reason=skip_reason or "")


def patchgym(*args: str, home: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "patchgym", *args], capture_output=True, text=True, timeout=timeout,
                          env={**__import__("os").environ, "PATCHGYM_HOME": str(home), "COLUMNS": "200"})


@pytest.mark.slow
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


def _with_python(task, version):
    return task.model_copy(update={"environment": task.environment.model_copy(update={"python": version})})


def test_environment_python_is_warned_about_only_when_the_host_lacks_it(tmp_path: Path) -> None:
    task = make_toy_task(tmp_path)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert python_version_mismatch(task) is None
    assert python_version_mismatch(_with_python(task, here)) is None
    assert environment_python(_with_python(task, here)) == hostfs.host_python()  # the running one first
    warning = python_version_mismatch(_with_python(task, "1.4"))
    assert warning and "'1.4'" in warning and here in warning and "not applied" in warning
    assert environment_python(_with_python(task, "1.4")) == hostfs.host_python()
    for junk in ("", "latest", "3.x"):
        assert hostfs.find_python(junk) is None


def _other_python() -> tuple[tuple[int, ...], str] | None:
    """A Python of another minor version on this host that can make a venv, if any."""
    for version, path in sorted(hostfs.python_installs(), reverse=True):
        if version[:2] != sys.version_info[:2] and version[0] == 3 and version[1] >= 7:
            if subprocess.run([path, "-c", "import venv"], capture_output=True).returncode == 0:
                return version, path
    return None


OTHER_PYTHON = _other_python()


@needs_sandbox
@pytest.mark.skipif(OTHER_PYTHON is None, reason="no Python of another version on this host (pyenv, uv, /usr/bin)")
def test_environment_python_builds_the_venv_with_that_interpreter_and_the_sandbox_runs_it(tmp_path: Path) -> None:
    """The toy task's command checks the version first: the gold resolves only in a venv of the asked
    Python that the grading sandbox can run (before, the hint was ignored, and such a venv's `python`
    was a dangling link in the sandbox, which fell through to another `python` on PATH)."""
    from patchgym.harness.grader import grade_patch

    version, path = OTHER_PYTHON
    wanted = f"{version[0]}.{version[1]}"
    toy = make_toy_task(tmp_path)
    check = f"python -c 'import sys; assert sys.version_info[:2] == ({version[0]}, {version[1]}), sys.version'"
    task = type(toy).model_validate({**toy.model_dump(), "environment": {"python": wanted}, "test_cmd": f"{check} && {toy.test_cmd}"})
    assert python_version_mismatch(task) is None and hostfs.find_python(wanted) == path
    assert setup_command(task).splitlines()[1].startswith(f"{path} -m venv")
    prepared = prepare_task(task, tmp_path / "store")
    verdict = grade_patch(prepared, task.patch)
    assert verdict.reward == 1.0 and verdict.status == "resolved", verdict.model_dump_json(indent=1)
    assert grade_patch(prepared, "").reward == 0.0
    # and without the hint the same command fails the version check: the test can tell them apart
    plain = prepare_task(type(task).model_validate({**task.model_dump(), "environment": {}}), tmp_path / "store")
    assert grade_patch(plain, task.patch).reward == 0.0


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

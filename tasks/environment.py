"""Making a prepared repository runnable: the task's virtual environment and `environment.setup`.

Setup is trusted (it comes from the task author), runs once per task at preparation, and is the only
step with network access. It runs inside bubblewrap so that the repository already sits at
`/testbed` and the environment at `/patchgym/venv`, the paths every sandbox later uses: an editable
install made here resolves in every sandbox of the task. The host's pip configuration (PIP_*
variables, pip.conf, and local wheel directories they name) is honoured, and the host's pip cache is
shared so repeated preparations are fast.

What setup leaves untracked in the repository (egg-info, build files) is added to
`.git/info/exclude`, so it never shows up in an agent's diff. Setup must not modify tracked files.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from patchgym.tasks.hostfs import find_python, host_python, readonly_system_paths
from patchgym.tasks.model import Task
from patchgym.tasks.prepared import TESTBED, VENV_MOUNT
from patchgym.tasks.store import file_lock

SETUP_TIMEOUT_S = 1800


class SetupError(RuntimeError):
    """environment.setup failed; the message carries the tail of its log."""


def _pip_local_paths() -> list[str]:
    """Local directories named by the host's pip configuration (find-links, file:// indexes)."""
    values: list[str] = [v for k, v in os.environ.items() if k.startswith("PIP_")]
    for conf in ("/etc/pip.conf", "/etc/xdg/pip/pip.conf", str(Path.home() / ".config/pip/pip.conf"),
                 str(Path.home() / ".pip/pip.conf")):
        parser = configparser.ConfigParser()
        try:
            parser.read(conf)
        except configparser.Error:
            continue
        for section in parser.sections():
            values.extend(parser[section].values())
    paths = []
    for value in values:
        for item in value.split():
            item = item.removeprefix("file://")
            if item.startswith("/") and os.path.exists(item):
                top = item if os.path.isdir(item) else os.path.dirname(item)
                if top not in paths:
                    paths.append(top)
    return paths


def _pip_cache_dir() -> str | None:
    cache = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")
    try:
        Path(cache).mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return cache


def needs_pytest(task: Task) -> bool:
    """Whether grading will run pytest: the default command for `log_parser: pytest`, or a
    test_cmd that names it."""
    if task.test_cmd:
        return "pytest" in task.test_cmd
    return task.log_parser == "pytest"


# Run after setup when the tests need pytest: SWE-bench rows carry no setup at all, and a setup of
# `pip install -e .` rarely installs the test runner; without this every gold patch would fail.
ENSURE_PYTEST = (
    "if ! python -c 'import pytest' 2>/dev/null; then\n"
    "  echo '[patchgym] environment.setup did not install pytest, which the tests need: installing it'\n"
    "  python -m pip --version >/dev/null 2>&1 || python -m ensurepip --default-pip >/dev/null\n"
    "  python -m pip install --quiet pytest\n"
    "fi"
)


def environment_python(task: Task) -> str:
    """The interpreter a task's environment is built with: the one its `environment.python` hint
    names when this host has it (`hostfs.find_python`: pyenv's and uv's installations, /usr/bin),
    else the one running patchgym. The sandboxes mount those installations read-only."""
    return find_python(task.environment.python) or host_python()


def setup_command(task: Task) -> str:
    """The shell script run at /testbed: create the venv, activate it, run each setup command,
    then make sure the test runner the grader will call is there."""
    # pip is seeded only when there is a setup step to use it (ensurepip costs seconds per task).
    without_pip = "" if task.environment.setup else " --without-pip"
    lines = ["set -e", f"{shlex.quote(environment_python(task))} -m venv{without_pip} {VENV_MOUNT}", f". {VENV_MOUNT}/bin/activate"]
    total = len(task.environment.setup)
    for number, command in enumerate(task.environment.setup, start=1):
        # Echoed into the log before it runs, so a failure's log shows which command it was.
        lines.append(f"printf '%s\\n' {shlex.quote(f'{SETUP_ECHO}{number}/{total}: {command}')}")
        lines.append(command)
    if needs_pytest(task):
        lines.append(ENSURE_PYTEST)
    return "\n".join(lines)


def bwrap_setup_argv(repo_dir: Path, venv_dir: Path, script: str) -> list[str]:
    bwrap = shutil.which("bwrap")
    if not bwrap:
        raise SetupError(
            "bubblewrap (bwrap) is not installed: it is needed to prepare tasks at /testbed. "
            "Install it with `apt-get install bubblewrap` (Debian/Ubuntu) or your system's package manager."
        )
    argv = [bwrap, "--unshare-all", "--share-net", "--die-with-parent", "--new-session"]
    for path in readonly_system_paths():
        argv += ["--ro-bind", path, path]
    for path in _pip_local_paths():
        argv += ["--ro-bind-try", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    cache = _pip_cache_dir()
    if cache:
        argv += ["--bind", cache, "/tmp/.cache/pip"]
    argv += ["--bind", str(repo_dir), TESTBED, "--bind", str(venv_dir), VENV_MOUNT]
    argv += ["--clearenv", "--setenv", "HOME", "/tmp", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
             "--setenv", "LANG", "C.UTF-8", "--chdir", TESTBED]
    for key, value in os.environ.items():
        if key.startswith("PIP_") and key != "PIP_CACHE_DIR":
            argv += ["--setenv", key, value]
    argv += ["bash", "-c", script]
    return argv


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def shared_environment_key(task: Task) -> str:
    """Key of an environment that tasks with the same setup share (environment.shared)."""
    shape = {"setup": task.environment.setup, "python": sys.version.split()[0], "interpreter": sys.base_prefix,
             "needs_pytest": needs_pytest(task), "v": 1}
    if task.environment.python:
        shape["builder"] = environment_python(task)
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]


def build_shared_environment(task: Task, envs_dir: Path) -> Path:
    """Build (once, under a lock) the shared venv for tasks whose setup ignores the repository.

    Setup runs with an empty /testbed, so it cannot depend on any task's files. Returns the venv.
    """
    key = shared_environment_key(task)
    final = envs_dir / key
    with file_lock(envs_dir / f".{key}.lock"):
        if (final / "venv").is_dir() and (final / "done").is_file():
            return final / "venv"
        build = envs_dir / f".build-{key}"
        shutil.rmtree(build, ignore_errors=True)
        (build / "empty").mkdir(parents=True)
        log_path = setup_log_path(envs_dir, key)
        try:
            _run_setup(task, build / "empty", build / "venv", log_path)
            os.replace(log_path, build / "setup.log")
            shutil.rmtree(final, ignore_errors=True)
            (build / "done").write_text(task.instance_id + "\n")
            build.rename(final)
        except BaseException:
            shutil.rmtree(build, ignore_errors=True)
            raise
    return final / "venv"


def python_version_mismatch(task: Task) -> str | None:
    """A warning when the task asks for a Python (`environment.python`, a version hint such as
    "3.9") that this host does not have: the environment is then built with the interpreter running
    patchgym. None when the hint is absent or an interpreter of that version was found
    (`environment_python`; "3.9" matches 3.9.18). A warning, not an error: the hint is optional in
    SWE-bench rows and most tasks run on a nearby version."""
    wanted = (task.environment.python or "").strip()
    if not wanted or find_python(wanted):
        return None
    have = ".".join(str(part) for part in sys.version_info[:3])
    return (f"task {task.instance_id}: environment.python is {wanted!r}, but no Python of that version was "
            f"found on this host (pyenv, uv, /usr/bin); the local backend builds its environment with "
            f"this machine's Python {have} ({host_python()}): the hint is not applied")


SETUP_ECHO = "[patchgym] setup command "  # the log line before each command: "<echo>N/M: <command>"


def setup_log_path(directory: Path, key: str) -> Path:
    """Where a preparation's setup log is written: beside (not inside) the build directory, which
    is removed when setup fails; the log stays where the error says until the next attempt."""
    return directory / f"setup-{key}.log"


def _failed_command(log_text: str) -> str:
    """The setup command the log shows last (the one that failed: the script stops at the first)."""
    for line in reversed(log_text.splitlines()):
        if line.startswith(SETUP_ECHO):
            return line[len(SETUP_ECHO):]
    return ""


def _run_setup(task: Task, repo_dir: Path, venv_dir: Path, log_path: Path) -> None:
    venv_dir.mkdir(parents=True, exist_ok=True)
    argv = bwrap_setup_argv(repo_dir, venv_dir, setup_command(task))
    with open(log_path, "wb") as log:
        try:
            done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=SETUP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise SetupError(f"task {task.instance_id}: environment setup took over {SETUP_TIMEOUT_S}s (log: {log_path})") from None
    if done.returncode != 0:
        text = log_path.read_text(errors="replace")
        failed = _failed_command(text)
        where = f" at command {failed}" if failed else " before its first command (creating the venv)"
        raise SetupError(f"task {task.instance_id}: environment setup failed{where} with exit code "
                         f"{done.returncode} (log: {log_path}):\n{text[-1500:]}")


def build_environment(task: Task, repo_dir: Path, venv_dir: Path, log_path: Path) -> None:
    """Create the venv and run environment.setup; hide what setup left untracked from diffs."""
    _run_setup(task, repo_dir, venv_dir, log_path)
    changed = _git(repo_dir, "status", "--porcelain", "--untracked-files=no").strip()
    if changed:
        raise SetupError(f"task {task.instance_id}: environment setup modified tracked files, which would "
                         f"leak into every diff:\n{changed}")
    untracked = _git(repo_dir, "ls-files", "--others", "--directory", "--exclude-standard").splitlines()
    if untracked:
        exclude = repo_dir / ".git" / "info" / "exclude"
        exclude.parent.mkdir(parents=True, exist_ok=True)
        with open(exclude, "a") as handle:
            handle.write("# left by environment.setup at preparation\n")
            for entry in untracked:
                handle.write("/" + entry + "\n")

"""The `docker` backend: one container per sandbox, through the Docker SDK (`pip install docker`).

Which image: the task's `environment.image`, else the factory's `default_image` (`--image`), else
(`build_images=True`, the default) a task image built from the base image by the task's
`environment.setup`, with the repository already at /testbed (docker_images.py). For the first two
the prepared repository is copied in at /testbed as a tar stream at open; for a task image nothing
is copied. The task's venv can also be bound read-only at /patchgym/venv with
`mount_host_venv=True` when the engine runs on this host and the image can run it.

The container: pid 1 reaps orphans and cannot be killed from inside (INIT);
network disabled, memory (swap included), CPU and process limits, no capabilities, no new
privileges, RLIMIT_FSIZE and no core dumps, a size-capped /tmp, labels on everything
(`patchgym`, `patchgym.owner` = host:pid:start time, `patchgym.task`, `patchgym.sandbox`).

Commands: a `docker exec` of bash running `command_script`, with `PATCHGYM_CMD=<id>` in its
environment, which every process it starts inherits; the agent's command runs in a child bash. When the
command ends, the wrapper kills what it left behind (processes carrying its id, or descended from
one: local's pid namespace does the same); on timeout a second exec (`REAPER`) stops and then
kills every process of the command, and also every process no live command owns (one that
cleared its environment and left its parent), rescanning until none is left, so every process the
command started dies, while other commands running in the sandbox go on.

Files: written with put_archive, read with get_archive; a symlink is resolved inside the container
(`readlink -e` there), so it leads where the agent sees it. The diff is computed on the host from a
tar of /testbed with trusted git state (remote.extract_tree, gitdiff.py). When the factory first
opens it removes containers (and owner-labelled images) whose owner process on this host has died.

Needs a reachable Docker engine; nothing here runs on a machine without one (tests skip).
"""

from __future__ import annotations

import atexit
import io
import itertools
import json
import queue
import shlex
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable

from patchgym.harness.sandbox import docker_agent, remote
from patchgym.harness.sandbox.docker_engine import docker_sdk, unavailable_reason  # noqa: F401  (re-exported)
from patchgym.harness.sandbox.base import (
    CommandResult,
    Limits,
    SandboxError,
)
from patchgym.harness.sandbox.output import CappedOutput
from patchgym.tasks.prepared import TESTBED, VENV_MOUNT, PreparedTask

_SEQUENCE = itertools.count(1)
COMMAND_ID = "PATCHGYM_CMD"
FILE_TIMEOUT_S = 120.0
# The environment every command starts from (as the local backend's: HOME and TMPDIR in /tmp).
BASE_ENV = {"HOME": "/tmp", "TMPDIR": "/tmp", "LC_CTYPE": "C.UTF-8"}

# Bash with builtins only (no process of its own to mistake for a victim): the processes to kill
# for command `$2` are those whose nearest ancestor carrying PATCHGYM_CMD carries `$2`; with mode
# `timeout`, also those no live command owns (no marked ancestor, or the mark of a finished
# command; `$3...` are the ids of the commands still running). Pid 1 (INIT), the reaper itself
# and the command server ($PATCHGYM_SPARE_PID: it is not dumpable, so its mark cannot be read; any
# other process whose environment cannot be read counts as unowned) are spared. Every round STOPs what it finds (a stopped
# process cannot fork), and once a round finds nothing new, all of them get SIGKILL; it returns
# when a scan finds none left.
REAPER = r'''
__pg_reap() {
  local mode=$1 id=$2; shift 2
  local -A keep=() stopped=()
  local k; for k in "$@"; do keep[$k]=1; done
  local round d p q e rest owner hops new
  local -a fields env victims
  for ((round = 0; round < 200; round++)); do
    local -A mark=() parent=()
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      [[ $p == 1 || $p == "$$" || $p == "$BASHPID" || $p == "${PATCHGYM_SPARE_PID:-}" ]] && continue
      read -r rest < "$d/stat" 2>/dev/null || continue
      rest=${rest##*) }
      read -r -a fields <<< "$rest"
      [[ ${fields[0]} == Z || ${fields[0]} == X ]] && continue
      parent[$p]=${fields[1]}
      mark[$p]=
      if mapfile -d '' env < "$d/environ" 2>/dev/null; then
        for e in "${env[@]}"; do
          if [[ $e == PATCHGYM_CMD=* ]]; then mark[$p]=${e#PATCHGYM_CMD=}; break; fi
        done
      fi
    done
    victims=() new=0
    for p in "${!parent[@]}"; do
      owner= q=$p
      for ((hops = 0; hops < 128 && ${#q} > 0; hops++)); do
        if [[ -n ${mark[$q]} ]]; then owner=${mark[$q]}; break; fi
        q=${parent[$q]}
      done
      # A mark of a command started after this one is spared too (it may be missing from `keep`).
      if [[ -n $owner && ${owner%.*} == "${id%.*}" && ${owner##*.} -gt ${id##*.} ]]; then continue; fi
      if [[ $owner == "$id" ]] || [[ $mode == timeout && ( -z $owner || -z ${keep[$owner]} ) ]]; then
        victims+=("$p")
        [[ -n ${stopped[$p]} ]] || new=1
      fi
    done
    ((${#victims[@]})) || return 0
    kill -STOP "${victims[@]}" 2>/dev/null
    for p in "${victims[@]}"; do stopped[$p]=1; done
    if ((new == 0)); then kill -KILL "${victims[@]}" 2>/dev/null; stopped=(); fi
  done
  return 1
}
'''


_docker = docker_sdk


# Pid 1 of every container: a reaper of what commands orphan, with no process of its own to kill.
# Inside its pid namespace nothing can kill it (init gets only the signals it handles, and this one
# handles none: SIGCHLD is blocked and taken with sigtimedwait), so `kill -9 -1` from a command
# cannot stop the container (with docker's init, tini, and an idle child, killing the child ended
# it; bash as init does not reap orphans). python3, else perl; an image with neither gets an idle
# loop that leaves zombies until the sandbox closes.
INIT_PYTHON = ("import os, signal\n"
               "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})\n"
               "while True:\n"
               "    try:\n"
               "        while os.waitpid(-1, os.WNOHANG)[0] > 0:\n"
               "            pass\n"
               "    except ChildProcessError:\n"
               "        pass\n"
               "    signal.sigtimedwait({signal.SIGCHLD}, 3600)\n")
INIT_PERL = 'use POSIX ":sys_wait_h"; $SIG{CHLD} = sub { 1 while waitpid(-1, WNOHANG) > 0 }; sleep 3600 while 1;'
INIT = ('command -v python3 >/dev/null 2>&1 && exec python3 -c "$1"; '
        'command -v perl >/dev/null 2>&1 && exec perl -e "$2"; '
        'while :; do sleep 3600; done')

# read_file and write_file run these in the container; their exit codes are errno values.
READ_SCRIPT = r'''f=$1
[ -e "$f" ] || exit 2
[ -d "$f" ] && exit 21
[ -f "$f" ] || exit 22
[ -r "$f" ] || exit 13
size=$(stat -L -c %s -- "$f") || exit 5
[ "$size" -le "$2" ] || exit 27
exec cat -- "$f"
'''
WRITE_SCRIPT = r'''f=$1
[ -d "$f" ] && exit 21
mkdir -p -- "$(dirname -- "$f")" || exit 5
cat > "$f" && chmod "$2" -- "$f"
'''


def image_missing_reason(image: str) -> str | None:
    """Why `image` cannot be used by this engine (absent: no registry is assumed), or None."""
    docker = _docker()
    try:
        docker.from_env(timeout=10).images.get(image)
    except docker.errors.ImageNotFound:
        return f"the image {image} is not on this Docker engine (.ci/docker-setup builds the base image)"
    except Exception as exc:  # noqa: BLE001
        return f"cannot inspect the image {image} ({type(exc).__name__}: {exc})"
    return None


def command_script(limits: Limits, command_id: str, *, cwd: str = TESTBED, env: dict[str, str] | None = None) -> str:
    """The bash script `docker exec` runs; the agent's command is its `$1` (module docstring)."""
    lines = ["exec 2>&1", "ulimit -c 0"]
    if limits.max_file_bytes is not None:
        lines.append(f"ulimit -f {-(-limits.max_file_bytes // 1024)}")
    for key, value in (env or {}).items():
        if not key or not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise ValueError(f"environment variable name {key!r} is not a valid shell name")
        if key == COMMAND_ID:
            raise ValueError(f"environment variable {COMMAND_ID} is reserved by the docker backend")
        lines.append(f"export {key}={shlex.quote(value)}")
    lines.append(f"cd {shlex.quote(cwd)} || exit 1")
    lines.append(REAPER)
    lines.append('bash -c "$1"; __pg_code=$?')
    lines.append(f"__pg_reap own {command_id} </dev/null >/dev/null 2>&1")
    lines.append("exit $__pg_code")
    return "\n".join(lines) + "\n"


def container_config(
    image: str, prepared: PreparedTask, limits: Limits, *, network: bool, name: str,
    cpus: float | None, mount_host_venv: bool, environment: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `client.containers.run` (pure, so it is unit-tested)."""
    docker = None
    try:
        docker = _docker()
    except SandboxError:
        pass
    ulimits: list[Any] = []
    for kind, value in (("core", 0), ("fsize", limits.max_file_bytes)):
        if value is None:
            continue
        ulimits.append(docker.types.Ulimit(name=kind, soft=value, hard=value) if docker else {"Name": kind, "Soft": value, "Hard": value})
    tmp = f"size={limits.max_write_bytes},mode=1777,exec" if limits.max_write_bytes else "mode=1777,exec"
    config: dict[str, Any] = {
        "image": image,
        "command": ["sh", "-c", INIT, "patchgym-init", INIT_PYTHON, INIT_PERL],
        "init": False,
        "name": name,
        "detach": True,
        "network_disabled": not network,
        "labels": remote.labels(prepared.instance_id, name),
        "working_dir": "/",
        "environment": dict(BASE_ENV, **(environment or {})),
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "ulimits": ulimits,
        "tmpfs": {"/tmp": tmp},
    }
    if network:
        config["cap_drop"] = []  # trusted setup steps (pip, apt) may need ordinary root powers
    if limits.memory_bytes is not None:
        config["mem_limit"] = limits.memory_bytes
        config["memswap_limit"] = limits.memory_bytes
    if limits.max_processes is not None:
        config["pids_limit"] = limits.max_processes
    if cpus is not None:
        config["nano_cpus"] = int(cpus * 1e9)
    if mount_host_venv and prepared.venv_dir is not None:
        config["volumes"] = {str(prepared.venv_dir): {"bind": VENV_MOUNT, "mode": "ro"}}
    return config


class DockerSandbox(remote.RemoteSandbox):
    backend = "docker"
    guarantees = (
        "a container per sandbox: network disabled, memory+swap, CPU and process limits, no "
        "capabilities, no new privileges, RLIMIT_FSIZE, a size-capped /tmp; /testbed is the task "
        "image's or a copy of the snapshot in the container's writable layer (its size is capped only "
        "where the storage driver supports it); what a command leaves running dies when it ends, and "
        "on timeout every process it started is killed; containers carry owner labels and are removed "
        "on close or by the next factory after a crash."
    )

    def __init__(self, factory: "DockerSandboxFactory", prepared: PreparedTask, limits: Limits, container: Any, name: str) -> None:
        super().__init__(factory, prepared, limits, name)
        self.container = container
        self._live: set[str] = set()  # ids of the commands running now
        self._ids = itertools.count(1)
        self._agent: docker_agent.AgentChannel | None = None
        self._agent_lock = threading.Lock()
        self._agent_usable = True  # False once the image proved to have no python3

    # --- the command server (docker_agent.py) ------------------------------------------------------
    def start_agent(self) -> bool:
        """Start the command server if there is none alive; False when the image cannot run it."""
        with self._agent_lock:
            if self._agent is not None and self._agent.alive:
                return True
            if not self._agent_usable or self._closed:
                return False
            api = self._factory.client.api
            try:
                exec_id = api.exec_create(self.container.id, ["python3", "-c", docker_agent.SERVER], stdin=True,
                                          stdout=True, stderr=False,
                                          environment={COMMAND_ID: docker_agent.SERVER_ID})["Id"]
                channel = docker_agent.AgentChannel(api.exec_start(exec_id, socket=True))
            except Exception:  # noqa: BLE001 - the container is gone or full: one exec per operation then
                return False
            if not channel.wait_ready(timeout=30):
                channel.close()
                code = api.exec_inspect(exec_id).get("ExitCode")
                if code not in (None, 0, -9, 137):  # python3 missing (127) or unusable: never again
                    self._agent_usable = False
                return False
            self._agent = channel
            return True

    def _agent_request(self, head: dict[str, Any], payload: bytes = b"") -> tuple[int, Any] | None:
        """Send through the server (started if needed), or None to use one exec instead."""
        if not self.start_agent():
            return None
        agent = self._agent
        try:
            return agent.request(head, payload) if agent is not None else None
        except docker_agent.AgentGone:
            return None

    def _kill_command(self, command_id: str) -> None:
        """Kill every process of `command_id` and every process no live command owns."""
        with self._lock:
            keep = sorted(self._live - {command_id}) + [docker_agent.SERVER_ID]
        api = self._factory.client.api
        argv = ["bash", "-c", REAPER + '\n__pg_reap "$@"', "reaper", "timeout", command_id, *keep]
        agent = self._agent
        # The command server is not dumpable, so its environment cannot be read: it is named by pid.
        spare = {"PATCHGYM_SPARE_PID": str(agent.pid)} if agent is not None and agent.alive and agent.pid else None
        try:
            api.exec_start(api.exec_create(self.container.id, argv, stdin=False, environment=spare)["Id"])
        except Exception:  # noqa: BLE001 - the container may be gone already
            pass

    def _exec(self, argv: list[str], *, stdin: bytes | None = None, timeout: float | None, limit: int,
              command_id: str | None = None, merge: bool = True) -> tuple[int, CappedOutput, bool]:
        api = self._factory.client.api
        exec_id = api.exec_create(self.container.id, argv, stdin=stdin is not None, stdout=True, stderr=merge,
                                  environment={COMMAND_ID: command_id} if command_id else None)["Id"]
        output = CappedOutput(limit)
        timed_out = threading.Event()

        def watchdog() -> None:
            timed_out.set()
            if command_id is not None:
                self._kill_command(command_id)

        timer = threading.Timer(timeout, watchdog) if timeout else None
        if timer:
            timer.daemon = True
            timer.start()
        try:
            if stdin is not None:
                sock = api.exec_start(exec_id, socket=True)
                raw = getattr(sock, "_sock", sock)
                try:
                    raw.sendall(stdin)
                except OSError:
                    pass  # the command exited without reading all of it
                raw.shutdown(1)
                stream = _frames(raw)
            else:
                stream = api.exec_start(exec_id, stream=True)
            for chunk in stream:
                output.feed(chunk)
        finally:
            if timer:
                timer.cancel()
                if timed_out.is_set():
                    timer.join()  # the kill is complete before the next command can start
        code = api.exec_inspect(exec_id).get("ExitCode")
        return (code if code is not None else -9), output, timed_out.is_set()

    def _run_through_agent(self, sent: tuple[int, Any], *, timeout: float | None, limit: int,
                           command_id: str) -> tuple[int, CappedOutput, bool]:
        rid, answers = sent
        output = CappedOutput(limit)
        timed_out = threading.Event()

        def watchdog() -> None:
            timed_out.set()
            self._kill_command(command_id)

        timer = threading.Timer(timeout, watchdog) if timeout else None
        if timer:
            timer.daemon = True
            timer.start()
        code = -9  # what is left when the server dies under the command (it killed it, or the container is gone)
        try:
            while True:
                kind, data = answers.get()
                if kind == b"o":
                    output.feed(data)
                elif kind == b"x":
                    code = json.loads(data)["code"]
                    break
                else:
                    if kind == b"e":
                        output.feed(f"patchgym: the command could not run: {data.decode(errors='replace')}\n".encode())
                        code = 126
                    break
        finally:
            if timer:
                timer.cancel()
                if timed_out.is_set():
                    timer.join()  # the kill is complete before the next command can start
            self._agent.done(rid) if self._agent is not None else None
        return code, output, timed_out.is_set()

    def run(self, command: str, *, timeout_s: float | None = None, env: dict[str, str] | None = None,
            cwd: str = TESTBED, stdin: str | None = None) -> CommandResult:
        self._check_open()
        timeout = self.limits.timeout_s if timeout_s is None else timeout_s
        with self._lock:
            command_id = f"{self.name.rsplit('-', 1)[-1]}.{next(self._ids)}"
            self._live.add(command_id)
        try:
            script = command_script(self.limits, command_id, cwd=cwd if cwd.startswith("/") else f"{TESTBED}/{cwd}", env=env)
            started = time.monotonic()
            argv = ["bash", "-c", script, "patchgym", command]
            payload = stdin.encode("utf-8", "surrogateescape") if stdin is not None else None
            limit = self.limits.max_output_bytes or (1 << 62)
            sent = self._agent_request({"op": "run", "argv": argv, "env": {COMMAND_ID: command_id}}, payload or b"")
            if sent is not None:
                code, output, timed_out = self._run_through_agent(sent, timeout=timeout, limit=limit, command_id=command_id)
            else:
                code, output, timed_out = self._exec(argv, stdin=payload, timeout=timeout, limit=limit,
                                                     command_id=command_id)
        finally:
            with self._lock:
                self._live.discard(command_id)
        self._check_open()
        extra = {}
        if code in (137, -9) and not timed_out:  # SIGKILL of the command's shell: the memory limit, usually
            state = self.container.client.api.inspect_container(self.container.id).get("State", {})
            if state.get("OOMKilled"):
                extra["oom_killed"] = True
        return CommandResult(exit_code=-9 if timed_out else code, output=output.render(), timed_out=timed_out,
                             duration_s=time.monotonic() - started, truncated_bytes=output.cut, extra=extra)

    def _abs(self, path: str) -> str:
        return path if path.startswith("/") else f"{TESTBED}/{path}"

    def _internal(self, script: str, args: list[str], *, stdin: bytes | None = None, limit: int) -> tuple[int, bytes]:
        """Run one of the backend's own scripts (a live command, so a timeout elsewhere spares it);
        returns its exit code and its stdout (stderr is dropped)."""
        with self._lock:
            command_id = f"{self.name.rsplit('-', 1)[-1]}.{next(self._ids)}"
            self._live.add(command_id)
        try:
            # Twice the limit: what fits is kept whole (head + tail with nothing cut between).
            code, output, _ = self._exec(["bash", "-c", script, "patchgym", *args], stdin=stdin, timeout=None,
                                         limit=2 * limit, command_id=command_id, merge=False)
        finally:
            with self._lock:
                self._live.discard(command_id)
        return code, bytes(output.head) + output.tail

    def _file_request(self, head: dict[str, Any], payload: bytes = b"") -> tuple[int, bytes] | None:
        """A read or write through the server: (0, data) or (errno, b""); None to use an exec."""
        sent = self._agent_request(head, payload)
        if sent is None:
            return None
        rid, answers = sent
        try:
            kind, data = answers.get(timeout=FILE_TIMEOUT_S)
        except queue.Empty:
            raise OSError(110, f"the sandbox did not answer a file {head['op']} within {FILE_TIMEOUT_S}s", head["path"]) from None
        finally:
            if self._agent is not None:
                self._agent.done(rid)
        if kind == b"d":
            return 0, data
        if kind == b"e":
            return int(json.loads(data).get("errno") or 5), b""
        return None  # the server died before answering: the exec path does it again (reads/writes are idempotent)

    def read_file(self, path: str) -> bytes:
        """Read through the container (`cat` there), so symlinks resolve as the agent sees them and
        tmpfs mounts (/tmp) are read as mounted, not as the engine's view of the image layers."""
        self._check_open()
        limit = max(self.limits.max_file_bytes or 0, 64 << 20)
        answer = self._file_request({"op": "read", "path": self._abs(path), "limit": limit})
        if answer is not None:
            code, data = answer
        else:
            code, data = self._internal(READ_SCRIPT, [self._abs(path), str(limit)], limit=limit + 1)
        if code == 0:
            return data
        errors = {2: (FileNotFoundError, "no such file in the sandbox"), 21: (IsADirectoryError, "is a directory"),
                  22: (OSError, "not a regular file"), 27: (OSError, f"file is over the {limit}-byte read limit"),
                  13: (PermissionError, "permission denied")}
        kind, message = errors.get(code, (OSError, f"reading failed with exit code {code}"))
        raise kind(code if code in errors else 5, message, path)

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write through the container (its stdin into the file), creating parent directories."""
        self._check_open()
        payload = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
        answer = self._file_request({"op": "write", "path": self._abs(path), "mode": mode & 0o7777}, payload)
        if answer is not None:
            code = answer[0]
        else:
            code, _ = self._internal(WRITE_SCRIPT, [self._abs(path), f"{mode & 0o7777:o}"], stdin=payload, limit=4096)
        if code == 21:
            raise IsADirectoryError(21, "is a directory", path)
        if code != 0:
            raise OSError(5, f"writing failed in the sandbox (exit code {code})", path)

    def diff(self) -> str:
        self._check_open()
        return remote.diff_of_archive(self, lambda _scratch: _ChunkReader(self.container.get_archive(TESTBED)[0]),
                                      "patchgym-docker-diff-")

    def close(self) -> None:
        if not self._mark_closed():
            return
        try:
            if self._agent is not None:
                self._agent.close()
            self.container.remove(force=True)
        except Exception as exc:  # noqa: BLE001
            if "No such container" not in str(exc) and "404" not in str(exc):
                raise SandboxError(f"could not remove container {self.name}: {exc}") from exc
        finally:
            self._factory._forget(self)


class _ChunkReader(io.RawIOBase):
    """A file-like view of docker's iterator of byte chunks (for tarfile's stream mode)."""

    def __init__(self, chunks: Any) -> None:
        self._chunks = iter(chunks)
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def _frames(sock: Any) -> Any:
    """Payloads of docker's multiplexed attach stream (8-byte headers: stream, 0, 0, 0, size)."""
    def read_exact(size: int) -> bytes:
        data = b""
        while len(data) < size:
            part = sock.recv(size - len(data))
            if not part:
                return data
            data += part
        return data

    while True:
        header = read_exact(8)
        if len(header) < 8:
            return
        size = int.from_bytes(header[4:], "big")
        yield read_exact(size)


class DockerSandboxFactory(remote.RemoteSandboxFactory):
    """Options: default_image (for tasks without environment.image; `--image`), build_images (for
    tasks with neither: build a task image from the base image by environment.setup, default on),
    base_image (the image task images start from; default the one docker_images builds), cpus (per
    sandbox), mount_host_venv (bind the prepared venv; the engine must run on this host), reap
    (remove what dead owners on this host left, at the first open), client (a docker.DockerClient),
    progress (a callable shown each image build step; default: a line on stderr), warm (how many
    started containers, command server running, to keep ready for the next open of the same task
    and limits: open then costs nothing, the next one is started in the background; spares are
    closed by close_all and at interpreter exit. Default 0: a run that opens each task once (grading
    a predictions file) would start every spare for nothing; serving a few tasks over and over, or
    grading many models' predictions of the same tasks, gains from warm=number of tasks)."""

    backend = "docker"

    def __init__(self, *, default_image: str | None = None, build_images: bool = True, base_image: str | None = None,
                 cpus: float | None = 2.0, mount_host_venv: bool = False, reap: bool = True, client: Any = None,
                 progress: Callable[[str], None] | None = None, warm: int = 0) -> None:
        self.default_image = default_image
        self.build_images = build_images
        self.base_image = base_image
        self.cpus = cpus
        self.mount_host_venv = mount_host_venv
        self.progress = progress
        self._client = client
        super().__init__()
        self._images: dict[tuple[str, str, str], str] = {}  # (key, commit, task) -> the task image built
        self._image_lock = threading.Lock()
        self.warm = warm
        self._pool_lock = threading.Lock()
        self._spares: dict[tuple, DockerSandbox] = {}
        self._warming: set[tuple] = set()
        self._warmers: list[threading.Thread] = []
        self._pool_closed = False
        _DOCKER_FACTORIES.add(self)
        self.reaped: list[str] = self.reap() if reap and client is not None else []
        self._reap_pending = reap and client is None

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                self._client = _docker().from_env()
                self._client.ping()
            except SandboxError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise SandboxError(f"no Docker engine reachable: {exc}") from exc
        return self._client

    def reap(self) -> list[str]:
        """Remove containers that sandboxes and image builds of dead owners on this host left
        behind, and images labelled with such an owner. Returns their names."""
        # The low-level listings: the high-level ones inspect every item, and an item another
        # process removes between the listing and its inspection made the whole reap fail.
        api = self.client.api
        containers = api.containers(all=True, filters={"label": remote.LABEL})
        names = {c["Id"]: (c.get("Names") or [c["Id"]])[0].lstrip("/") for c in containers}
        removed = []
        for container_id in remote.select_orphans((c["Id"], c.get("Labels") or {}) for c in containers):
            try:
                api.remove_container(container_id, force=True)
                removed.append(names[container_id])
            except Exception:  # noqa: BLE001 - another factory removed it first
                pass
        images = api.images(filters={"label": remote.LABEL})
        for image_id in remote.select_orphans((i["Id"], i.get("Labels") or {}) for i in images):
            try:
                api.remove_image(image_id, force=True)
                removed.append(image_id)
            except Exception:  # noqa: BLE001
                pass
        return removed

    def image_for(self, prepared: PreparedTask) -> tuple[str, bool]:
        """The image for `prepared` and whether it already holds the repository at /testbed."""
        if prepared.task.environment.image:
            return prepared.task.environment.image, False
        if self.default_image:
            return self.default_image, False
        missing = f"task {prepared.instance_id} has no environment.image and the docker factory has no default_image"
        if not self.build_images:
            raise SandboxError(f"{missing} (pass --image, or let the factory build task images)")
        cache_key = (prepared.key, prepared.base_commit, prepared.instance_id)
        with self._image_lock:
            image = self._images.get(cache_key)
        if image is None:
            from patchgym.harness.sandbox import docker_images

            kwargs = {"progress": self.progress} if self.progress else {}
            try:
                image = docker_images.ensure_task_image(self.client, prepared, self.base_image, **kwargs)
            except SandboxError as exc:
                raise SandboxError(f"{missing}; building its image from environment.setup failed: {exc}") from exc
            except Exception as exc:  # noqa: BLE001 - the engine's own errors
                raise SandboxError(f"{missing}; building its image from environment.setup failed: "
                                   f"{type(exc).__name__}: {exc}") from exc
            with self._image_lock:
                self._images[cache_key] = image
        return image, True

    def _start(self, prepared: PreparedTask, limits: Limits, network: bool, image: str, has_repo: bool) -> DockerSandbox:
        """A started container for `prepared`, the repository in place (not registered yet)."""
        name = f"patchgym-{remote.owner_label().replace(':', '-')}-{next(_SEQUENCE)}"
        config = container_config(image, prepared, limits, network=network, name=name, cpus=self.cpus,
                                  mount_host_venv=self.mount_host_venv)
        try:
            container = self.client.containers.run(**config)
        except Exception as exc:  # noqa: BLE001
            raise SandboxError(f"could not start a container from {image}: {exc}") from exc
        sandbox = DockerSandbox(self, prepared, limits, container, name)
        try:
            if not has_repo:
                container.exec_run(["sh", "-c", f"rm -rf {TESTBED} && mkdir -p {TESTBED}"])
                if not container.put_archive("/", remote.tar_of_directory(Path(prepared.repo_dir), TESTBED.lstrip("/"))):
                    raise SandboxError("docker refused the repository archive")
        except BaseException:
            sandbox.close()
            raise
        return sandbox

    # --- the warm pool: a started container (and its command server) ready for the next open -----
    def _spare_key(self, prepared: PreparedTask, limits: Limits, network: bool, image: str) -> tuple:
        return (image, prepared.key, prepared.base_commit, prepared.instance_id, str(prepared.repo_dir), limits, network)

    def _make_spare(self, key: tuple, prepared: PreparedTask, limits: Limits, network: bool, image: str,
                    has_repo: bool) -> None:
        try:
            sandbox = self._start(prepared, limits, network, image, has_repo)
            sandbox.start_agent()
        except Exception:  # noqa: BLE001 - a spare is an optimisation: the next open starts its own
            return
        finally:
            with self._pool_lock:
                self._warming.discard(key)
        with self._pool_lock:
            if not self._pool_closed and key not in self._spares:
                self._spares[key] = sandbox
                # The oldest spares go first when there are more kinds than `warm` allows.
                while len(self._spares) > self.warm:
                    evicted = self._spares.pop(next(iter(self._spares)))
                    threading.Thread(target=evicted.close, daemon=True).start()
                return
        sandbox.close()

    def _warm_up(self, key: tuple, prepared: PreparedTask, limits: Limits, network: bool, image: str,
                 has_repo: bool) -> None:
        with self._pool_lock:
            if self.warm <= 0 or network or self._pool_closed or key in self._warming or key in self._spares:
                return
            self._warming.add(key)
            thread = threading.Thread(target=self._make_spare, args=(key, prepared, limits, network, image, has_repo),
                                      name="patchgym-docker-spare", daemon=True)
            self._warmers.append(thread)
        thread.start()

    def open(self, prepared: PreparedTask, limits: Limits | None = None, *, network: bool = False) -> DockerSandbox:
        limits = limits or Limits()
        if self._reap_pending:
            self._reap_pending = False
            self.reaped = self.reap()
        image, has_repo = self.image_for(prepared)
        key = self._spare_key(prepared, limits, network, image)
        with self._pool_lock:
            sandbox = self._spares.pop(key, None)
            self._pool_closed = False
        if sandbox is None:
            sandbox = self._start(prepared, limits, network, image, has_repo)
        self._warm_up(key, prepared, limits, network, image, has_repo)
        return self._register(sandbox)

    def close_all(self) -> None:
        """Close every sandbox opened and not closed yet, and the spares kept warm."""
        with self._pool_lock:
            self._pool_closed = True
            warmers, self._warmers = self._warmers, []
        for thread in warmers:
            thread.join()
        with self._pool_lock:
            spares, self._spares = list(self._spares.values()), {}
        for spare in spares:
            spare.close()
        super().close_all()


_DOCKER_FACTORIES: "weakref.WeakSet[DockerSandboxFactory]" = weakref.WeakSet()


@atexit.register
def _close_docker_factories_at_exit() -> None:
    for factory in list(_DOCKER_FACTORIES):
        try:
            factory.close_all()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit; the reaper takes the rest
            pass

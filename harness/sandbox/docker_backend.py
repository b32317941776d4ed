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

Modules beside this one: docker_container.py (INIT, REAPER, the file scripts, command_script,
container_config: the text and settings a container gets), docker_engine.py (the SDK, the engine's
byte streams), spare_pool.py (the warm containers), docker_removal.py (closed containers removed in
the background), docker_agent.py (the command server), docker_images.py (the base and task images).

Needs a reachable Docker engine; nothing here runs on a machine without one (tests skip).
"""

from __future__ import annotations

import atexit
import itertools
import json
import queue
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable

from patchgym.harness.sandbox import docker_agent, remote
from patchgym.harness.sandbox.docker_container import (
    COMMAND_ID,
    READ_SCRIPT,
    REAPER,
    WRITE_SCRIPT,
    command_script,
    container_config,
)
from patchgym.harness.sandbox.docker_engine import (  # noqa: F401  (the two *_reason: re-exported)
    ChunkReader,
    docker_sdk,
    frames,
    image_missing_reason,
    unavailable_reason,
)
from patchgym.harness.sandbox.base import (
    CommandResult,
    Limits,
    SandboxError,
)
from patchgym.harness.sandbox.output import CappedOutput
from patchgym.harness.sandbox.docker_removal import BackgroundRemover
from patchgym.harness.sandbox.spare_pool import SparePool
from patchgym.tasks.prepared import TESTBED, PreparedTask

_SEQUENCE = itertools.count(1)
FILE_TIMEOUT_S = 120.0

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
                stream = frames(raw)
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
        return remote.diff_of_archive(self, lambda _scratch: ChunkReader(self.container.get_archive(TESTBED)[0]),
                                      "patchgym-docker-diff-")

    def close(self) -> None:
        if not self._mark_closed():
            return
        try:
            if self._agent is not None:
                self._agent.close()
        finally:  # removed in the background (docker_removal.py says why); close_all waits for it
            self._factory._remover.remove(self.container, self.name)
            self._factory._forget(self)


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
        self._spares = SparePool(warm)
        self._remover = BackgroundRemover()
        _DOCKER_FACTORIES.add(self)
        self.reaped: list[str] = self.reap() if reap and client is not None else []
        self._reap_pending = reap and client is None

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                self._client = docker_sdk().from_env()
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

    def _start_spare(self, prepared: PreparedTask, limits: Limits, network: bool, image: str, has_repo: bool) -> DockerSandbox:
        sandbox = self._start(prepared, limits, network, image, has_repo)
        try:
            sandbox.start_agent()
        except BaseException:
            sandbox.close()
            raise
        return sandbox

    def open(self, prepared: PreparedTask, limits: Limits | None = None, *, network: bool = False) -> DockerSandbox:
        limits = limits or Limits()
        if self._reap_pending:
            self._reap_pending = False
            self.reaped = self.reap()
        image, has_repo = self.image_for(prepared)
        key = self._spare_key(prepared, limits, network, image)
        sandbox = self._spares.take(key)
        if sandbox is None:
            sandbox = self._start(prepared, limits, network, image, has_repo)
        if not network:  # setup steps with network are one-offs: no spare for them
            self._spares.refill(key, lambda: self._start_spare(prepared, limits, network, image, has_repo))
        return self._register(sandbox)

    def close_all(self) -> None:
        """Close every sandbox opened and not closed yet, and the spares kept warm."""
        self._spares.close()
        super().close_all()
        self._remover.drain()


_DOCKER_FACTORIES: "weakref.WeakSet[DockerSandboxFactory]" = weakref.WeakSet()


@atexit.register
def _close_docker_factories_at_exit() -> None:
    for factory in list(_DOCKER_FACTORIES):
        try:
            factory.close_all()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit; the reaper takes the rest
            pass

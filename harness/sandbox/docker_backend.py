"""The `docker` backend: one container per sandbox, through the Docker SDK (`pip install docker`).

The container runs the task's `environment.image` (or the factory's `default_image`) with
`sleep infinity` as its init, network disabled, memory (swap included), CPU and process limits,
no capabilities, no new privileges, a size-capped /tmp, and labels on everything it creates
(`patchgym`, `patchgym.owner` = host:pid:start time, `patchgym.task`, `patchgym.sandbox`). The
prepared repository is copied in at /testbed as a tar stream (works with a remote engine too); the
task's venv can be bound read-only at /patchgym/venv with `mount_host_venv=True` when the engine
runs on this host and the image can run it.

Commands run with `docker exec` of `bash -c` (remote.wrap_command); on timeout every process of
the container but its init gets SIGKILL (`kill -9 -1` as root inside). The diff is computed on the
host from a tar of /testbed with trusted git state (remote.extract_tree, gitdiff.py). When the
factory starts it removes containers whose owner process on this host has died.

Needs a reachable Docker engine; nothing here runs on a machine without one (tests skip).
"""

from __future__ import annotations

import io
import itertools
import shlex
import threading
import time
from pathlib import Path
from typing import Any

from patchgym.harness.sandbox import remote
from patchgym.harness.sandbox.base import (
    CommandResult,
    Limits,
    SandboxError,
)
from patchgym.harness.sandbox.output import CappedOutput
from patchgym.tasks.prepared import TESTBED, VENV_MOUNT, PreparedTask

_SEQUENCE = itertools.count(1)


def _docker() -> Any:
    return remote.import_sdk("docker", "docker", "Docker")


def unavailable_reason() -> str | None:
    """Why the docker backend cannot run here (for tests and the CLI), or None."""
    try:
        docker = _docker()
    except SandboxError as exc:
        return str(exc)
    try:
        client = docker.from_env(timeout=5)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"
        return f"no Docker engine reachable ({type(exc).__name__}: {exc})"
    return None


def container_config(
    image: str, prepared: PreparedTask, limits: Limits, *, network: bool, name: str,
    cpus: float | None, mount_host_venv: bool,
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
    config: dict[str, Any] = {
        "image": image,
        "command": ["sleep", "infinity"],
        "name": name,
        "detach": True,
        "network_disabled": not network,
        "labels": remote.labels(prepared.instance_id, name),
        "working_dir": "/",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "ulimits": ulimits,
        "tmpfs": {"/tmp": f"size={limits.max_write_bytes},mode=1777"} if limits.max_write_bytes else {"/tmp": "mode=1777"},
        "init": False,
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
        "capabilities, no new privileges, RLIMIT_FSIZE, a size-capped /tmp; /testbed is a copy of "
        "the snapshot in the container's writable layer (its size is capped only where the storage "
        "driver supports it); every process but the init is killed on timeout; containers carry "
        "owner labels and are removed on close or by the next factory after a crash."
    )

    def __init__(self, factory: "DockerSandboxFactory", prepared: PreparedTask, limits: Limits, container: Any, name: str) -> None:
        super().__init__(factory, prepared, limits, name)
        self.container = container

    def _exec(self, script: str, *, stdin: bytes | None = None, timeout: float | None, limit: int) -> tuple[int, CappedOutput, bool]:
        api = self._factory.client.api
        exec_id = api.exec_create(self.container.id, ["bash", "-c", script], stdin=stdin is not None, stdout=True, stderr=True)["Id"]
        output = CappedOutput(limit)
        timed_out = threading.Event()

        def watchdog() -> None:
            timed_out.set()
            try:
                api.exec_start(api.exec_create(self.container.id, ["sh", "-c", "kill -9 -1"])["Id"])
            except Exception:  # noqa: BLE001 - the container may be gone already
                pass

        timer = threading.Timer(timeout, watchdog) if timeout else None
        if timer:
            timer.daemon = True
            timer.start()
        try:
            if stdin is not None:
                sock = api.exec_start(exec_id, socket=True)
                raw = getattr(sock, "_sock", sock)
                raw.sendall(stdin)
                raw.shutdown(1)
                stream = _frames(raw)
            else:
                stream = api.exec_start(exec_id, stream=True)
            for chunk in stream:
                output.feed(chunk)
        finally:
            if timer:
                timer.cancel()
        code = api.exec_inspect(exec_id).get("ExitCode")
        return (code if code is not None else -9), output, timed_out.is_set()

    def run(self, command: str, *, timeout_s: float | None = None, env: dict[str, str] | None = None,
            cwd: str = TESTBED, stdin: str | None = None) -> CommandResult:
        self._check_open()
        timeout = self.limits.timeout_s if timeout_s is None else timeout_s
        script = remote.wrap_command(command, self.limits, cwd=cwd if cwd.startswith("/") else f"{TESTBED}/{cwd}", env=env)
        started = time.monotonic()
        code, output, timed_out = self._exec(
            script, stdin=stdin.encode() if stdin is not None else None, timeout=timeout,
            limit=self.limits.max_output_bytes or (1 << 62),
        )
        self._check_open()
        state = self.container.client.api.inspect_container(self.container.id).get("State", {})
        extra = {"oom_killed": True} if state.get("OOMKilled") else {}
        return CommandResult(exit_code=-9 if timed_out else code, output=output.render(), timed_out=timed_out,
                             duration_s=time.monotonic() - started, truncated_bytes=output.cut, extra=extra)

    def _abs(self, path: str) -> str:
        return path if path.startswith("/") else f"{TESTBED}/{path}"

    def read_file(self, path: str) -> bytes:
        self._check_open()
        docker = _docker()
        try:
            chunks, _ = self.container.get_archive(self._abs(path))
        except docker.errors.NotFound as exc:
            raise FileNotFoundError(2, "no such file in the sandbox", path) from exc
        return remote.single_file_from_tar(io.BytesIO(b"".join(chunks)), max(self.limits.max_file_bytes or 0, 64 << 20))

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        self._check_open()
        payload = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
        target = self._abs(path)
        parent, name = target.rsplit("/", 1)
        self.run(f"mkdir -p -- {shlex.quote(parent or '/')}", cwd="/")
        if not self.container.put_archive(parent or "/", remote.tar_of_file(name, payload, mode)):
            raise OSError(5, "docker refused the file", path)

    def diff(self) -> str:
        self._check_open()
        return remote.diff_of_archive(self, lambda _scratch: _ChunkReader(self.container.get_archive(TESTBED)[0]),
                                      "patchgym-docker-diff-")

    def close(self) -> None:
        if not self._mark_closed():
            return
        try:
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
    """Options: default_image (when a task has no environment.image), cpus (per sandbox),
    mount_host_venv (bind the prepared venv; the engine must run on this host), reap (remove
    containers of dead owners on this host, now), client (a docker.DockerClient)."""

    backend = "docker"

    def __init__(self, *, default_image: str | None = None, cpus: float | None = 2.0, mount_host_venv: bool = False,
                 reap: bool = True, client: Any = None) -> None:
        self.default_image = default_image
        self.cpus = cpus
        self.mount_host_venv = mount_host_venv
        self._client = client
        super().__init__()
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
        """Remove containers that sandboxes of dead owners on this host left behind."""
        containers = self.client.containers.list(all=True, filters={"label": remote.LABEL})
        orphans = set(remote.select_orphans((c.id, c.labels) for c in containers))
        removed = []
        for container in containers:
            if container.id in orphans:
                container.remove(force=True)
                removed.append(container.name)
        return removed

    def open(self, prepared: PreparedTask, limits: Limits | None = None, *, network: bool = False) -> DockerSandbox:
        limits = limits or Limits()
        image = prepared.task.environment.image or self.default_image
        if not image:
            raise SandboxError(
                f"task {prepared.instance_id} has no environment.image and the docker factory has no default_image"
            )
        if self._reap_pending:
            self._reap_pending = False
            self.reaped = self.reap()
        name = f"patchgym-{remote.owner_label().replace(':', '-')}-{next(_SEQUENCE)}"
        config = container_config(image, prepared, limits, network=network, name=name, cpus=self.cpus,
                                  mount_host_venv=self.mount_host_venv)
        try:
            container = self.client.containers.run(**config)
        except Exception as exc:  # noqa: BLE001
            raise SandboxError(f"could not start a container from {image}: {exc}") from exc
        sandbox = DockerSandbox(self, prepared, limits, container, name)
        try:
            container.exec_run(["sh", "-c", f"rm -rf {TESTBED} && mkdir -p {TESTBED}"])
            if not container.put_archive("/", remote.tar_of_directory(Path(prepared.repo_dir), TESTBED.lstrip("/"))):
                raise SandboxError("docker refused the repository archive")
        except BaseException:
            sandbox.close()
            raise
        return self._register(sandbox)

"""The `modal` backend: one `modal.Sandbox` per sandbox (`pip install modal`, Modal credentials).

`modal.Sandbox.create("sleep", "infinity", ...)` with `block_network=True` (unless opened for a
trusted setup step), a hard lifetime (`lifetime_s`, default 4 h: longer than the longest episode
plus its grading, so a sandbox whose owner vanished still ends), CPU and memory requests, and an
image from the task: `environment.image` from a registry, or `debian_slim` with
`environment.setup` run at build time; the prepared repository is added to the image at
/testbed (Modal caches the layer by content). Creation goes through a process-wide limiter
(`CREATE_RATE`, 5 per second: Modal's per-workspace creation limit). Sandboxes are tagged with the
owner labels of remote.py; the factory terminates those of dead owners on this host when it starts.

Commands: `Sandbox.exec("bash", "-c", wrapper)` (remote.wrap_command); on timeout every process
but the init is killed. Files move base64-encoded through exec (binary-safe on every SDK
version); the diff is computed on the host from a tar of /testbed with trusted git state.
"""

from __future__ import annotations

import base64
import io
import itertools
import os
import shlex
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
from patchgym.tasks.prepared import TESTBED, PreparedTask

CREATE_RATE = 5.0  # sandbox creations per second, per workspace (Modal's documented limit)
CREATE_LIMITER = remote.RateLimiter(CREATE_RATE, burst=5)  # one per process, shared by all factories
_SEQUENCE = itertools.count(1)


def _modal() -> Any:
    return remote.import_sdk("modal", "modal", "Modal")


def unavailable_reason() -> str | None:
    """Why the modal backend cannot run here, or None."""
    try:
        _modal()
    except SandboxError as exc:
        return str(exc)
    if not (os.environ.get("MODAL_TOKEN_ID") or Path(os.path.expanduser("~/.modal.toml")).exists()):
        return "no Modal credentials (set MODAL_TOKEN_ID/MODAL_TOKEN_SECRET or run `modal token new`)"
    return None


def create_kwargs(limits: Limits, *, network: bool, cpus: float | None, lifetime_s: int) -> dict[str, Any]:
    """Keyword arguments for `modal.Sandbox.create` besides app and image (pure, unit-tested)."""
    kwargs: dict[str, Any] = {"timeout": int(lifetime_s), "block_network": not network, "workdir": "/"}
    if cpus is not None:
        kwargs["cpu"] = float(cpus)
    if limits.memory_bytes is not None:
        mib = max(128, limits.memory_bytes // (1024 * 1024))
        kwargs["memory"] = (mib, mib)  # request and hard limit
    return kwargs


class ModalSandbox(remote.RemoteSandbox):
    backend = "modal"
    guarantees = (
        "a Modal sandbox (gVisor) per sandbox: no network, CPU and memory requests with a hard memory "
        "limit, RLIMIT_FSIZE, a hard lifetime after which Modal ends it whatever happens to the owner; "
        "/testbed is a copy of the snapshot; every process but the init is killed on timeout."
    )

    def __init__(self, factory: "ModalSandboxFactory", prepared: PreparedTask, limits: Limits, handle: Any, name: str) -> None:
        super().__init__(factory, prepared, limits, name)
        self.handle = handle

    def _exec(self, script: str, *, stdin: bytes | None, timeout: float | None, sink: Any) -> tuple[int, bool]:
        started = time.monotonic()
        proc = self.handle.exec("bash", "-c", script, timeout=int(timeout) + 1 if timeout else None)
        if stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.write_eof()
            proc.stdin.drain()
        for chunk in proc.stdout:
            sink(chunk.encode("utf-8", "surrogateescape") if isinstance(chunk, str) else chunk)
        code = proc.wait()
        timed_out = bool(timeout) and time.monotonic() - started >= timeout
        if timed_out:
            try:
                self.handle.exec("sh", "-c", "kill -9 -1").wait()
            except Exception:  # noqa: BLE001
                pass
        return (code if code is not None else -9), timed_out

    def run(self, command: str, *, timeout_s: float | None = None, env: dict[str, str] | None = None,
            cwd: str = TESTBED, stdin: str | None = None) -> CommandResult:
        self._check_open()
        timeout = self.limits.timeout_s if timeout_s is None else timeout_s
        script = remote.wrap_command(command, self.limits, cwd=cwd if cwd.startswith("/") else f"{TESTBED}/{cwd}", env=env)
        output = CappedOutput(self.limits.max_output_bytes or (1 << 62))
        started = time.monotonic()
        code, timed_out = self._exec(script, stdin=stdin.encode() if stdin is not None else None, timeout=timeout, sink=output.feed)
        self._check_open()
        return CommandResult(exit_code=-9 if timed_out else code, output=output.render(), timed_out=timed_out,
                             duration_s=time.monotonic() - started, truncated_bytes=output.cut)

    def _abs(self, path: str) -> str:
        return path if path.startswith("/") else f"{TESTBED}/{path}"

    def read_file(self, path: str) -> bytes:
        self._check_open()
        limit = max(self.limits.max_file_bytes or 0, 64 << 20)
        quoted = shlex.quote(self._abs(path))
        script = f"[ -d {quoted} ] && exit 21; [ -e {quoted} ] || exit 2; head -c {limit + 1} -- {quoted} | base64 -w 0"
        chunks: list[bytes] = []
        code, _ = self._exec(script, stdin=None, timeout=self.limits.timeout_s, sink=chunks.append)
        if code == 2:
            raise FileNotFoundError(2, "no such file in the sandbox", path)
        if code == 21:
            raise IsADirectoryError(21, "is a directory", path)
        data = base64.b64decode(b"".join(chunks))
        if code != 0 or len(data) > limit:
            raise OSError(5 if code else 27, "cannot read the file", path)
        return data

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        self._check_open()
        payload = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
        target = shlex.quote(self._abs(path))
        script = f'mkdir -p -- "$(dirname -- {target})" && base64 -d > {target} && chmod {mode:o} -- {target}'
        errors: list[bytes] = []
        code, _ = self._exec(script, stdin=base64.b64encode(payload), timeout=self.limits.timeout_s, sink=errors.append)
        if code != 0:
            raise OSError(5, b"".join(errors).decode(errors="replace").strip() or "write failed", path)

    def diff(self) -> str:
        self._check_open()

        def fetch_archive(scratch: Path) -> io.BytesIO:
            encoded = scratch / "tree.tar.b64"
            with open(encoded, "wb") as sink:
                code, _ = self._exec(f"tar -C / -cf - {TESTBED.lstrip('/')} | base64 -w 0", stdin=None,
                                     timeout=self.limits.timeout_s, sink=sink.write)
            if code != 0:
                raise SandboxError(f"could not archive {TESTBED} in sandbox {self.name}")
            return io.BytesIO(base64.b64decode(encoded.read_bytes()))

        return remote.diff_of_archive(self, fetch_archive, "patchgym-modal-diff-")

    def close(self) -> None:
        if not self._mark_closed():
            return
        try:
            self.handle.terminate()
        finally:
            self._factory._forget(self)


class ModalSandboxFactory(remote.RemoteSandboxFactory):
    """Options: app_name (default "patchgym-sandboxes"), cpus, lifetime_s (hard lifetime of a
    sandbox), default_image (when a task has no image and no setup), reap (terminate sandboxes of
    dead owners on this host when the factory first opens one)."""

    backend = "modal"

    def __init__(self, *, app_name: str = "patchgym-sandboxes", cpus: float | None = 2.0, lifetime_s: int = 4 * 3600,
                 default_image: str | None = None, reap: bool = True) -> None:
        self.app_name = app_name
        self.cpus = cpus
        self.lifetime_s = lifetime_s
        self.default_image = default_image
        self._reap_pending = reap
        self._app: Any = None
        self._images: dict[str, Any] = {}
        super().__init__()
        self.reaped: list[str] = []

    def _app_handle(self) -> Any:
        if self._app is None:
            self._app = _modal().App.lookup(self.app_name, create_if_missing=True)
        return self._app

    def image_for(self, prepared: PreparedTask) -> Any:
        """The image of a task: its registry image or one built from its setup, plus the repo."""
        modal = _modal()
        key = f"{prepared.instance_id}:{prepared.key}"
        with self._lock:
            if key not in self._images:
                env = prepared.task.environment
                if env.image or self.default_image:
                    image = modal.Image.from_registry(env.image or self.default_image)
                else:
                    image = modal.Image.debian_slim(python_version=env.python or None).apt_install("git")
                add_dir = getattr(image, "add_local_dir", None)
                if add_dir is not None:
                    image = add_dir(str(prepared.repo_dir), remote_path=TESTBED, copy=True)
                else:
                    image = image.copy_local_dir(str(prepared.repo_dir), TESTBED)
                if env.setup and not env.image:
                    image = image.run_commands(*[f"cd {TESTBED} && {command}" for command in env.setup])
                self._images[key] = image
            return self._images[key]

    def reap(self) -> list[str]:
        modal = _modal()
        app = self._app_handle()
        found = [(sb.object_id, sb.get_tags(), sb) for sb in modal.Sandbox.list(app_id=app.app_id, tags={remote.LABEL: "1"})]
        orphans = set(remote.select_orphans((object_id, tags) for object_id, tags, _ in found))
        removed = []
        for object_id, _, handle in found:
            if object_id in orphans:
                handle.terminate()
                removed.append(object_id)
        return removed

    def open(self, prepared: PreparedTask, limits: Limits | None = None, *, network: bool = False) -> ModalSandbox:
        limits = limits or Limits()
        modal = _modal()
        if self._reap_pending:
            self._reap_pending = False
            self.reaped = self.reap()
        name = f"patchgym-{remote.owner_label().replace(':', '-')}-{next(_SEQUENCE)}"
        kwargs = create_kwargs(limits, network=network, cpus=self.cpus, lifetime_s=self.lifetime_s)
        CREATE_LIMITER.acquire()
        try:
            handle = modal.Sandbox.create("sleep", "infinity", app=self._app_handle(), image=self.image_for(prepared), **kwargs)
            handle.set_tags(remote.labels(prepared.instance_id, name))
        except Exception as exc:  # noqa: BLE001
            raise SandboxError(f"could not create a Modal sandbox for {prepared.instance_id}: {exc}") from exc
        sandbox = ModalSandbox(self, prepared, limits, handle, name)
        return self._register(sandbox)

"""The Docker engine as the Docker modules see it: the SDK import, whether an engine answers (and
holds an image), and the two readers of its byte streams (an archive's chunks as a file; the
multiplexed attach stream).

`docker_backend` (sandboxes) and `docker_images` (the base and task images) both need these, and
`docker_backend` imports `docker_images`, so they live here: no import cycle between the two.
"""

from __future__ import annotations

import io
from typing import Any

from patchgym.harness.sandbox import remote
from patchgym.harness.sandbox.base import SandboxError


def docker_sdk() -> Any:
    """The `docker` SDK module, or a SandboxError that says how to install it."""
    return remote.import_sdk("docker", "docker", "Docker")


def unavailable_reason() -> str | None:
    """Why the docker backend cannot run here (for tests and the CLI), or None."""
    try:
        docker = docker_sdk()
    except SandboxError as exc:
        return str(exc)
    try:
        client = docker.from_env(timeout=5)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"
        return f"no Docker engine reachable ({type(exc).__name__}: {exc})"
    return None


def image_missing_reason(image: str) -> str | None:
    """Why `image` cannot be used by this engine (absent: no registry is assumed), or None."""
    docker = docker_sdk()
    try:
        docker.from_env(timeout=10).images.get(image)
    except docker.errors.ImageNotFound:
        return f"the image {image} is not on this Docker engine (.ci/docker-setup builds the base image)"
    except Exception as exc:  # noqa: BLE001
        return f"cannot inspect the image {image} ({type(exc).__name__}: {exc})"
    return None


class ChunkReader(io.RawIOBase):
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


def frames(sock: Any) -> Any:
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

"""The Docker engine as both Docker modules see it: the SDK import and whether an engine answers.

`docker_backend` (sandboxes) and `docker_images` (the base and task images) both need these, and
`docker_backend` imports `docker_images`, so they live here: no import cycle between the two.
"""

from __future__ import annotations

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

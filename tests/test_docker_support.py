"""Shared pieces of the docker tests: why they cannot run here (no SDK, no engine answering, no base
image), a factory whose images and containers are real, and a check that a run left nothing of
its own on the engine. Imported by tests/test_docker_*.py; holds no tests itself."""

from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=1)
def docker_reason() -> str | None:
    """Why the docker tests cannot run here, or None (cached: the engine is asked once)."""
    from patchgym.harness.sandbox.docker_backend import image_missing_reason, unavailable_reason
    from patchgym.harness.sandbox.docker_images import base_image_tag

    reason = unavailable_reason()
    if reason:
        return f"{reason}; .ci/docker-setup starts one as root"
    return image_missing_reason(base_image_tag())


def needs_docker() -> list[pytest.MarkDecorator]:
    """The marks of a test that needs the engine: `docker`, and a skip with the reason without one."""
    reason = docker_reason()
    return [pytest.mark.docker, pytest.mark.skipif(reason is not None, reason=reason or "")]


def client():
    import docker

    return docker.from_env()


def containers_of(owner_pid: int) -> list[str]:
    """Names of the containers on the engine whose owner label names `owner_pid` on this host."""
    import socket

    from patchgym.harness.sandbox import remote

    prefix = f"{socket.gethostname()}:{owner_pid}:"
    # The low-level listing: the high-level one inspects each container, which fails when another
    # process removes one in between.
    return [(c.get("Names") or [c["Id"]])[0].lstrip("/")
            for c in client().api.containers(all=True, filters={"label": remote.LABEL})
            if (c.get("Labels") or {}).get(remote.OWNER_LABEL, "").startswith(prefix)]


def remove_task_images(prepared) -> None:
    """Remove the environment and task images built for `prepared` (a test's task in a temporary
    store gets a new preparation key each run: its images would pile up on the engine)."""
    from patchgym.harness.sandbox import docker_images

    base = docker_images.base_image_tag()
    tags = [f"patchgym-task:{docker_images.task_image_key(prepared, base)}",
            f"patchgym-env:{docker_images.env_image_key(prepared, base)}"]
    if prepared.task.environment.shared:
        tags.pop()  # shared by every task with the same setup
    for tag in tags:
        try:
            client().images.remove(tag, force=True)
        except Exception:  # noqa: BLE001 - never built (the docker cases were skipped)
            pass

"""The docker backend's own mechanisms, against a real engine: the command server inside the
container (docker_agent.py) and the one-exec-per-operation path it falls back to, a reaper that
spares concurrent commands, and reading hostile paths.

Needs a Docker engine and the base image (.ci/docker-setup); skipped with the reason otherwise.
"""

from __future__ import annotations

import threading

import pytest

from patchgym.harness.sandbox.base import Limits, get_factory
from patchgym.harness.sandbox.docker_images import base_image_tag
from .test_docker_support import client, needs_docker
from .test_sandbox_support import BINARY_BLOB, make_prepared

pytestmark = needs_docker()


@pytest.fixture(scope="module")
def factory_and_task(tmp_path_factory: pytest.TempPathFactory):
    prepared = make_prepared(tmp_path_factory.mktemp("docker-backend"))
    prepared.task.environment.image = base_image_tag()
    factory = get_factory("docker")
    yield factory, prepared
    factory.close_all()


@pytest.fixture(scope="module")
def image_without_python():
    """The base image with python3 removed: sandboxes of it must work with one exec per operation."""
    docker = client()
    container = docker.containers.create(base_image_tag(), ["bash", "-c", "rm -f /usr/bin/python3*"], network_disabled=True)
    try:
        container.start()
        container.wait(timeout=60)
        image = container.commit(repository="patchgym-test-nopython", tag="1")
    finally:
        container.remove(force=True)
    yield "patchgym-test-nopython:1"
    docker.images.remove(image.id, force=True)


def test_the_agent_survives_its_own_death(factory_and_task) -> None:
    factory, prepared = factory_and_task
    with factory.open(prepared) as box:
        assert box.run("echo one").output == "one\n" and box._agent is not None and box._agent.alive
        killed = box.run("kill -9 -1; sleep 5; echo not reached")  # as root in the container: every process
        assert killed.exit_code != 0 and "not reached" not in killed.output and not killed.timed_out
        assert box.run("echo two").output == "two\n"  # a new server started
        box.write_file("after.bin", BINARY_BLOB)
        assert box.read_file("after.bin") == BINARY_BLOB


@pytest.mark.slow
def test_without_python_in_the_image_every_operation_is_an_exec(factory_and_task, image_without_python) -> None:
    factory, prepared = factory_and_task
    task = prepared.task.model_copy(deep=True)
    task.environment.image = image_without_python
    other = type(prepared)(task=task, root=prepared.root, repo_dir=prepared.repo_dir, venv_dir=prepared.venv_dir,
                           key=prepared.key)
    with factory.open(other, Limits(timeout_s=30)) as box:
        assert box.run("echo $((6 * 7)); command -v python3 || echo no python").output == "42\nno python\n"
        assert box._agent is None and not box._agent_usable
        box.write_file("/tmp/x.bin", BINARY_BLOB, mode=0o600)
        assert box.read_file("/tmp/x.bin") == BINARY_BLOB
        assert box.run("stat -c %a /tmp/x.bin").output == "600\n"
        with pytest.raises(IsADirectoryError):
            box.read_file("pkg")
        timed = box.run("sleep 60 & sleep 60; echo no", timeout_s=1)
        assert timed.timed_out and "sleep" not in box.run("ps -eo comm=").output
        assert "+more" in (box.write_file("README.md", "more\n") or box.diff())


@pytest.mark.slow
def test_a_timeout_spares_the_commands_running_beside_it(factory_and_task) -> None:
    factory, prepared = factory_and_task
    with factory.open(prepared) as box:
        results = {}
        slow = threading.Thread(target=lambda: results.setdefault("slow", box.run("sleep 4; echo finished", timeout_s=30)))
        slow.start()
        timed = box.run("sleep 60 & sleep 60", timeout_s=1.5)
        slow.join()
        assert timed.timed_out
        assert results["slow"].ok and results["slow"].output == "finished\n", results["slow"]


def test_reading_a_fifo_or_a_dangling_link_is_a_clear_error(factory_and_task) -> None:
    factory, prepared = factory_and_task
    with factory.open(prepared) as box:
        assert box.run("mkfifo pipe && ln -s /nowhere dangling && ln -s /etc/shadow shadow-link").ok
        with pytest.raises(OSError, match="not a regular file"):
            box.read_file("pipe")
        with pytest.raises(FileNotFoundError):
            box.read_file("dangling")
        # A link to a system path resolves inside the container: its /etc/shadow, not the host's.
        assert box.read_file("shadow-link") == box.read_file("/etc/shadow")
        with pytest.raises(IsADirectoryError):
            box.write_file("pkg", "x")


def test_no_process_in_the_container_can_write_into_the_servers_stream(factory_and_task) -> None:
    # During grading the patch's code runs in the container: forged frames written to the server's
    # stdout would be read as the answers to the grader's requests.
    factory, prepared = factory_and_task
    with factory.open(prepared) as box:
        assert box.run("true").ok and box._agent is not None and box._agent.alive
        attempt = box.run(
            "for p in $(pgrep -x python3); do [ $p = 1 ] && continue; found=$p;"
            " if printf 'FORGED' > /proc/$p/fd/1; then echo wrote-$p; else echo refused-$p; fi;"
            " cat /proc/$p/environ >/dev/null 2>&1 && echo environ-readable; done; echo server=${found:-none}")
        assert "server=none" not in attempt.output and "refused-" in attempt.output, attempt.output
        assert "wrote-" not in attempt.output and "environ-readable" not in attempt.output, attempt.output
        assert box.run("echo intact").output == "intact\n"

"""Abuse inside docker sandboxes: fork bomb, memory bomb, output flood, huge file, network. Each is
contained (a clear result, within its limits), a bystander container opened beside it keeps
working, the abused sandbox itself still answers, and the run leaves no container behind. Then
the reaper: a SIGKILLed owner's container, and an image committed with its labels, are removed by
the next factory.

Needs a Docker engine and the base image (.ci/docker-setup); skipped with the reason otherwise.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from patchgym.harness.sandbox.base import Limits, get_factory
from patchgym.harness.sandbox.docker_images import base_image_tag
from .test_docker_support import client, containers_of, needs_docker
from .test_sandbox_support import make_prepared

pytestmark = needs_docker()

TIGHT = Limits(timeout_s=20, memory_bytes=256 << 20, max_processes=64, max_file_bytes=4 << 20,
               max_output_bytes=64 * 1024, max_write_bytes=64 << 20)


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory):
    prepared = make_prepared(tmp_path_factory.mktemp("docker-abuse"))
    prepared.task.environment.image = base_image_tag()
    factory = get_factory("docker")
    bystander = factory.open(prepared, Limits(timeout_s=30))
    yield factory, prepared, bystander
    factory.close_all()
    assert containers_of(os.getpid()) == []


def _bystander_works(bystander) -> None:
    result = bystander.run("echo still here; cat README.md")
    assert result.ok and result.output == "still here\nhello\n", result


@pytest.mark.slow
def test_fork_bomb_hits_the_process_limit(setting) -> None:
    factory, prepared, bystander = setting
    with factory.open(prepared, TIGHT) as box:
        result = box.run("bomb() { bomb | bomb & }; bomb; sleep 3; echo survived", timeout_s=8)
        _bystander_works(bystander)
        after = box.run("ps -eo pid= | wc -l")
        assert after.ok and int(after.output) < 10, after  # the bomb's processes are gone
    assert "fork" in result.output and "Resource temporarily unavailable" in result.output, result


def test_memory_bomb_is_killed_at_the_limit(setting) -> None:
    factory, prepared, bystander = setting
    with factory.open(prepared, TIGHT) as box:
        result = box.run("python3 -c 'x = bytearray(1 << 30); print(len(x))'", timeout_s=20)
        assert not result.ok and "1073741824" not in result.output, result
        _bystander_works(bystander)
        assert box.run("echo alive").output == "alive\n"


def test_output_flood_is_capped(setting) -> None:
    factory, prepared, bystander = setting
    with factory.open(prepared, TIGHT) as box:
        started = time.monotonic()
        result = box.run("head -c 200000000 /dev/zero | tr '\\0' y", timeout_s=60)
        assert result.ok and result.truncated_bytes == 200_000_000 - 64 * 1024, result.truncated_bytes
        assert len(result.output) < 70 * 1024 and time.monotonic() - started < 60
        _bystander_works(bystander)


def test_huge_file_stops_at_the_file_size_limit(setting) -> None:
    factory, prepared, bystander = setting
    with factory.open(prepared, TIGHT) as box:
        result = box.run("head -c 100000000 /dev/zero > big.bin; echo code=$?; stat -c %s big.bin")
        assert "code=0" not in result.output, result
        assert int(result.output.split()[-1]) <= 4 << 20
        _bystander_works(bystander)


def test_no_network(setting) -> None:
    factory, prepared, bystander = setting
    with factory.open(prepared, TIGHT) as box:
        script = ("import socket\nfor host in ('1.1.1.1', '8.8.8.8'):\n    s = socket.socket(); s.settimeout(3)\n"
                  "    try:\n        s.connect((host, 53)); print('connected', host)\n    except OSError as e:\n"
                  "        print('refused', type(e).__name__)\n")
        box.write_file("/tmp/net.py", script)
        result = box.run("python3 /tmp/net.py; ls /sys/class/net")
        assert "connected" not in result.output and result.output.count("refused") == 2, result
        assert result.output.split()[-1] == "lo" and "eth0" not in result.output
        _bystander_works(bystander)


def test_a_daemon_left_by_a_command_dies_with_it(setting) -> None:
    factory, prepared, _ = setting
    with factory.open(prepared, TIGHT) as box:
        # (60 s, not TIGHT's 20: the wrapper's bash scan of /proc for what the command left took
        # up to 9 s alone and passed 20 s once in a loaded CI run, stop 39; the kill is what is tested)
        assert box.run("(setsid sleep 300 &) ; nohup sleep 301 >/dev/null 2>&1 & echo started", timeout_s=60).ok
        assert "sleep" not in box.run("ps -eo comm=").output


ORPHAN_OWNER = textwrap.dedent('''
    import sys
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from patchgym.harness.sandbox.base import get_factory
    from tests.test_sandbox_support import make_prepared
    prepared = make_prepared(Path({work!r}))
    prepared.task.environment.image = {image!r}
    factory = get_factory("docker", warm=0)
    box = factory.open(prepared)
    box.container.commit(repository="patchgym-test-orphan", tag=box.name.rsplit("-", 1)[-1])
    print(box.name, flush=True)
    sys.stdin.read()
''')


def test_reaper_removes_what_a_sigkilled_owner_left(tmp_path) -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ORPHAN_OWNER.format(root=root, work=str(tmp_path), image=base_image_tag())
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        name = child.stdout.readline().strip()
        assert name.startswith("patchgym-"), name
        assert containers_of(child.pid) == [name]
        orphan_images = [i.id for i in client().images.list(name="patchgym-test-orphan")]
        assert orphan_images  # committed with the container's owner labels
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    factory = get_factory("docker")
    removed = factory.reap()  # what the first open does
    assert name in removed and containers_of(child.pid) == []
    assert not client().images.list(name="patchgym-test-orphan")
    assert set(orphan_images) <= set(removed)
    assert client().images.get(base_image_tag())  # cached images carry no owner: never reaped

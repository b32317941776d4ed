"""The local (bubblewrap) backend: isolation, abuse, limits, cleanup after close and after crashes.

Every abuse test runs while a second sandbox is open and checks, afterwards, that the second one
and the host still work and that the abusive one left nothing on the host.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from patchgym.harness.sandbox import linux
from patchgym.harness.sandbox.base import Limits, SandboxError
from patchgym.harness.sandbox.local import LocalSandboxFactory

from .test_sandbox_support import STORE_SECRET, host_traces, local_available

pytestmark = pytest.mark.skipif(local_available() is not None, reason=str(local_available()))


def check_after_abuse(factory: LocalSandboxFactory, box, bystander) -> None:  # noqa: ANN001
    assert subprocess.run(["echo", "host-ok"], capture_output=True, text=True).stdout == "host-ok\n"
    assert bystander.run("echo fine").output == "fine\n"
    assert box.run("echo recovered").output == "recovered\n"
    name = box.name
    box.close()
    assert host_traces(factory, name) == []


# --- isolation ----------------------------------------------------------------------------------

def test_no_network(local_factory, prepared) -> None:
    with local_factory.open(prepared) as box:
        result = box.run("exec 3<>/dev/tcp/1.1.1.1/53 && echo connected", timeout_s=10)
        assert result.exit_code != 0 and "connected" not in result.output
        interfaces = box.run("tail -n +3 /proc/net/dev | cut -d: -f1").output.split()
        assert interfaces == ["lo"]


def test_network_only_when_opened_for_trusted_setup(local_factory, prepared) -> None:
    host_interfaces = sorted(line.split(":")[0].strip() for line in Path("/proc/net/dev").read_text().splitlines()[2:])
    with local_factory.open(prepared, network=True) as box:
        inside = box.run("tail -n +3 /proc/net/dev | cut -d: -f1").output.split()
    assert sorted(inside) == host_interfaces


def test_proc_shows_only_the_sandbox(local_factory, prepared) -> None:
    with local_factory.open(prepared) as box:
        pids = [int(p) for p in box.run("ls /proc").output.split() if p.isdigit()]
        assert pids and max(pids) < 50  # its own pid namespace: a handful of small pids
        assert str(os.getpid()) not in box.run("cat /proc/*/stat 2>/dev/null").output.split()
        # Only the sandbox's own processes: bwrap's init, the shell, the reader; not this Python.
        assert set(box.run("cat /proc/[0-9]*/comm").output.split()) <= {"bwrap", "bash", "cat"}
        assert box.run("cat /proc/1/cmdline | tr '\\0' ' '").output.startswith(("bwrap", "/usr/bin/bwrap"))


def test_sees_nothing_of_the_host_beyond_system_paths(local_factory, prepared, tmp_path) -> None:
    host_secret = tmp_path / "host-secret.txt"
    host_secret.write_text("top secret")
    other = local_factory.open(prepared)
    try:
        with local_factory.open(prepared) as box:
            for path in (prepared.root / "gold.patch", prepared.root.parent, host_secret,
                         local_factory.state_root, other.home, Path.home() / ".bash_history", "/sys/fs/cgroup",
                         "/var", "/home", "/etc/shadow"):
                assert box.run(f"test -e '{path}'").exit_code == 1, path
            assert STORE_SECRET not in box.run("cat /testbed/../*/gold.patch /testbed/../gold.patch 2>&1").output
            assert box.run("touch /usr/x").exit_code != 0
            assert box.run("touch /newfile").exit_code != 0
            assert box.run("echo ok > /tmp/ok && echo ok > /testbed/ok").ok
            assert box.run("unshare -U true").exit_code != 0  # no nested user namespaces
            assert box.run("cat /proc/self/status | grep CapEff").output.split()[-1] == "0000000000000000"
    finally:
        other.close()


TTY_CHILD = """
import sys
from pathlib import Path
from patchgym.harness.sandbox.local import LocalSandboxFactory
from patchgym.tests.test_sandbox_support import make_prepared
factory = LocalSandboxFactory(state_root=sys.argv[1])
with factory.open(make_prepared(Path(sys.argv[2]))) as box:
    print("RESULT:" + box.run("(exec 3</dev/tty) 2>/dev/null && echo HAS-TTY || echo NO-TTY").output.strip(), flush=True)
factory.shutdown()
"""


def test_sandbox_cannot_reach_the_owners_terminal(tmp_path) -> None:
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # this child has the pty as its controlling terminal
        os.execv(sys.executable, [sys.executable, "-c", TTY_CHILD, str(tmp_path / "state"), str(tmp_path / "task")])
    output = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    os.waitpid(pid, 0)
    assert b"RESULT:NO-TTY" in output, output.decode(errors="replace")


def test_environment_is_read_only_and_on_path(local_factory, prepared) -> None:
    with local_factory.open(prepared) as box:
        assert box.run("venv-tool").output == "from-venv\n"
        assert box.run("touch /patchgym/venv/x").exit_code != 0
        assert box.run("echo $HOME $VIRTUAL_ENV").output == "/tmp /patchgym/venv\n"
        assert box.run("env | grep -c PYTEST").output.strip() == "0"  # the host environment is cleared


def test_a_hard_link_of_a_checked_in_file_is_the_same_file(local_factory, prepared) -> None:
    """As in a container: the link and the file one inode, one device (the overlay's `xino=on`; an
    honest test of a library that links files failed here, fpAL's AL-D)."""
    with local_factory.open(prepared) as box:
        name = box.run("cd /testbed && find . -maxdepth 2 -type f -not -path './.git/*' | head -1").output.strip()[2:]
        assert name
        done = box.run(f"ln /testbed/{name} /tmp/../testbed/linked && stat -c '%d %i %h' /testbed/{name} /testbed/linked")
        first, second = done.output.split("\n")[:2]
        assert first == second and first.endswith(" 2"), done.output


ESCAPE_ATTEMPTS = {
    "mount a tmpfs": "mount -t tmpfs x /tmp",
    "unmount /usr": "umount -l /usr",
    "remount / read-write": "mount -o remount,rw /",
    "write a sysctl": "echo 1 > /proc/sys/kernel/sysrq",
    "sysrq": "echo h > /proc/sysrq-trigger",
    "make a block device": "mknod /tmp/disk b 8 0",
    "chroot": "chroot /tmp /bin/true",
    "new user namespace": "unshare -U true",
    "new mount namespace": "unshare -m true",
    "enter the namespaces of pid 1": "nsenter -t 1 -m -p true",
    "write outside /testbed and /tmp": "touch /testbed/../escaped",
    "raise the file size limit": "ulimit -f unlimited",
    "load a kernel module": "insmod /nonexistent.ko || modprobe dummy",
}


def test_escape_attempts_fail_and_leave_no_trace(local_factory, prepared) -> None:
    script = "\n".join(f"({command}) >/dev/null 2>&1 && echo 'ESCAPED: {name}'" for name, command in ESCAPE_ATTEMPTS.items())
    mounts_before = Path("/proc/self/mountinfo").read_text().count("\n")
    box = local_factory.open(prepared)
    result = box.run(script + "\necho finished")
    assert result.output == "finished\n", result.output
    name = box.name
    box.close()
    assert host_traces(local_factory, name) == []
    assert not Path("/escaped").exists()
    assert Path("/proc/self/mountinfo").read_text().count("\n") == mounts_before


# --- abuse ----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_fork_bomb(local_factory, prepared, bystander) -> None:
    box = local_factory.open(prepared, Limits(max_processes=64, timeout_s=5))
    result = box.run("bomb() { bomb | bomb & }; bomb; sleep 2; echo survived")
    assert result.extra.get("pids_limited") is True
    assert result.exit_code != 0 or result.timed_out or "survived" in result.output
    check_after_abuse(local_factory, box, bystander)


def test_memory_bomb(local_factory, prepared, bystander) -> None:
    box = local_factory.open(prepared, Limits(memory_bytes=128 * 1024**2, timeout_s=30))
    result = box.run("python3 -c 'x = []\nwhile True: x.append(bytearray(16 * 1024 * 1024))'")
    assert result.exit_code != 0 and not result.timed_out
    assert result.extra.get("oom_killed") is True
    check_after_abuse(local_factory, box, bystander)


def test_endless_loop(local_factory, prepared, bystander) -> None:
    box = local_factory.open(prepared)
    started = time.monotonic()
    result = box.run("while :; do :; done", timeout_s=1)
    assert result.timed_out and result.exit_code == -signal.SIGKILL
    assert time.monotonic() - started < 10
    check_after_abuse(local_factory, box, bystander)


def test_timeout_holds_after_the_output_is_closed(local_factory, prepared) -> None:
    with local_factory.open(prepared) as box:
        started = time.monotonic()
        result = box.run("echo bye; exec >&- 2>&-; sleep 30", timeout_s=1)
        assert result.timed_out and result.output == "bye\n"
        assert time.monotonic() - started < 10


def test_commands_handle_text_as_utf8(local_factory, prepared) -> None:
    with local_factory.open(prepared) as box:
        assert box.run("printf '\\303\\251\\n' | grep -c '^.$'").output == "1\n"  # one character, two bytes
        encodings = box.run("python3 -c 'import sys; print(sys.getfilesystemencoding(), sys.stdout.encoding)'")
        assert encodings.output == "utf-8 utf-8\n", encodings.output


@pytest.mark.slow
def test_arun_on_the_event_loop(local_factory, prepared) -> None:
    """arun reads output and waits for the exit on the loop itself: the loop keeps serving others
    while commands run, a timeout holds even after the output closes, and many commands share it."""
    import asyncio

    uvloop = pytest.importorskip("uvloop")

    async def scenario() -> None:
        with local_factory.open(prepared) as box:
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            ticking = asyncio.ensure_future(ticker())
            slow = await box.arun("sleep 1; echo slept")
            assert slow.output == "slept\n" and ticks >= 40, ticks  # ~100 ticks if the loop was free
            started = time.monotonic()
            closed_output = await box.arun("echo bye; exec >&- 2>&-; sleep 30", timeout_s=1)
            assert closed_output.timed_out and closed_output.output == "bye\n"
            assert time.monotonic() - started < 10
            many = await asyncio.gather(*(box.arun(f"echo {i}; exit {i % 3}") for i in range(16)))
            assert [(r.output, r.exit_code) for r in many] == [(f"{i}\n", i % 3) for i in range(16)]
            ticking.cancel()

    uvloop.run(scenario())


def test_commands_leave_no_descriptor_open(local_factory, prepared) -> None:
    """Every pipe, pidfd and namespace descriptor a command uses is closed again, whichever way it
    ends: run, arun, timeouts, stdin, a failed start (a bad cwd) and a cancelled arun."""
    import asyncio

    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    with local_factory.open(prepared) as box:
        box.run("true")
        asyncio.run(box.arun("true"))
        before = open_fds()
        for _ in range(20):
            box.run("echo x")
            box.run("cat", stdin="data")
        box.run("sleep 5", timeout_s=0.2)
        box.run("true", cwd="/nonexistent")

        async def async_forms() -> None:
            for _ in range(20):
                await box.arun("echo x")
                await box.arun("cat", stdin="data")
            await box.arun("sleep 5", timeout_s=0.2)
            task = asyncio.ensure_future(box.arun("sleep 5"))
            await asyncio.sleep(0.2)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        asyncio.run(async_forms())
        assert _gone_within(lambda: open_fds() <= before, 5.0), (before, open_fds())


def test_a_cancelled_arun_kills_its_command(local_factory, prepared) -> None:
    import asyncio

    async def scenario(box) -> None:  # noqa: ANN001
        task = asyncio.ensure_future(box.arun("sleep 4243", timeout_s=60))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with local_factory.open(prepared) as box:
        asyncio.run(scenario(box))
        assert _gone_within(lambda: not [p for p in os.listdir("/proc") if p.isdigit() and "4243" in _cmdline(p)], 5.0)
        assert box.run("echo still usable").output == "still usable\n"


def test_closing_during_an_arun(local_factory, prepared) -> None:
    import asyncio

    box = local_factory.open(prepared)

    async def scenario() -> object:
        task = asyncio.ensure_future(box.arun("sleep 4244", timeout_s=60))
        await asyncio.sleep(0.5)
        await asyncio.to_thread(box.close)
        return await asyncio.gather(task, return_exceptions=True)

    (outcome,) = asyncio.run(scenario())
    assert "closed" in str(outcome)
    assert _gone_within(lambda: not [p for p in os.listdir("/proc") if p.isdigit() and "4244" in _cmdline(p)], 5.0)
    assert host_traces(local_factory, box.name) == []


@pytest.mark.slow
def test_a_timeout_kills_only_its_own_command(local_factory, prepared) -> None:
    import threading

    with local_factory.open(prepared) as box:
        results = {}
        slow = threading.Thread(target=lambda: results.setdefault("slow", box.run("sleep 3; echo done", timeout_s=20)))
        slow.start()
        time.sleep(0.5)
        assert box.run("sleep 60", timeout_s=0.5).timed_out
        slow.join(30)
        assert results["slow"].ok and results["slow"].output == "done\n"


def test_output_flood(local_factory, prepared, bystander) -> None:
    box = local_factory.open(prepared, Limits(max_output_bytes=4096, timeout_s=60))
    result = box.run("head -c 200000000 /dev/urandom | base64 -w 100")
    assert result.ok and result.truncated_bytes > 200_000_000
    assert len(result.output.encode()) < 4096 + 100
    check_after_abuse(local_factory, box, bystander)


def test_endless_output_until_timeout(local_factory, prepared, bystander) -> None:
    box = local_factory.open(prepared, Limits(max_output_bytes=1000))
    result = box.run("yes flood", timeout_s=1)
    assert result.timed_out and result.truncated_bytes > 0
    assert result.output.startswith("flood\n") and "bytes cut" in result.output
    check_after_abuse(local_factory, box, bystander)


def test_huge_file_hits_file_size_limit(local_factory, prepared, bystander) -> None:
    box = local_factory.open(prepared, Limits(max_file_bytes=1024**2))
    result = box.run("head -c 5000000 /dev/zero > big; echo rc=$?; stat -c %s big")
    assert "File too large" in result.output or "rc=153" in result.output
    assert result.output.strip().endswith("1048576")
    with pytest.raises(OSError, match="file limit"):
        box.write_file("big2", b"x" * (1024**2 + 1))
    check_after_abuse(local_factory, box, bystander)


def test_total_writes_capped(local_factory, prepared, bystander) -> None:
    box = local_factory.open(prepared, Limits(max_write_bytes=8 * 1024**2, max_file_bytes=64 * 1024**2))
    result = box.run("head -c 6000000 /dev/zero > a && head -c 6000000 /dev/zero > /tmp/b; echo rc=$?")
    assert "No space left on device" in result.output and "rc=1" in result.output
    with pytest.raises(OSError):
        box.write_file("c", b"y" * 6_000_000)
    assert box.run("rm -f a /tmp/b && head -c 1000000 /dev/zero > a && echo space-again").output == "space-again\n"
    check_after_abuse(local_factory, box, bystander)


def test_background_processes_die_with_their_command(local_factory, prepared) -> None:
    with local_factory.open(prepared) as box:
        assert box.run("(sleep 300 &) ; setsid sleep 301 & echo started").output == "started\n"
        assert "sleep" not in box.run("cat /proc/*/comm 2>/dev/null").output
        # The pid namespace is torn down asynchronously just after the command returns.
        deadline = time.monotonic() + 2
        while box.cgroups is not None and box.cgroups.pids() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert box.cgroups is None or box.cgroups.pids() == set()


# --- file access and diff safety ------------------------------------------------------------------

def test_file_access_never_follows_links_to_the_host(local_factory, prepared, tmp_path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    with local_factory.open(prepared) as box:
        box.run(f"ln -s {secret} leak && ln -s {tmp_path} leakdir && ln -s ../../../../../../.. up && ln -s /etc/shadow shadow")
        for path in ("leak", f"leakdir/{secret.name}", f"up{secret}", "shadow", f"/testbed/../..{secret}"):
            # A read fails, or finds what the sandbox itself wrote where the link points inside it.
            try:
                assert box.read_file(path) == b"overwritten"
            except OSError:
                pass
            # A write may fail, or land inside the sandbox where the link points *there* (a dangling
            # link into the private /tmp); it must never reach the host file.
            try:
                box.write_file(path, "overwritten")
            except OSError:
                continue
            assert box.read_file(path) == b"overwritten"
        box.write_file("/tmp/../testbed/via-tmp.txt", "inside")
        assert box.read_file("via-tmp.txt") == b"inside"
    assert secret.read_text() == "host secret"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.txt"]


def test_diff_ignores_an_agent_controlled_git_dir(local_factory, prepared, tmp_path) -> None:
    marker = tmp_path / "pwned"
    payload = f"touch {marker}"
    with local_factory.open(prepared) as box:
        box.write_file(".git/hooks/pre-commit", f"#!/bin/sh\n{payload}\n", 0o755)
        box.write_file(".git/hooks/post-index-change", f"#!/bin/sh\n{payload}\n", 0o755)
        box.write_file(".git/hooks/fsmonitor", f"#!/bin/sh\n{payload}\n", 0o755)
        box.write_file(".git/config", textwrap.dedent(f"""\
            [core]
                fsmonitor = {box.testbed_dir}/.git/hooks/fsmonitor
                hooksPath = .git/hooks
                pager = {payload}
            [filter "evil"]
                clean = {payload}
                smudge = {payload}
            [diff "evil"]
                textconv = {payload}
                command = {payload}
            """))
        box.write_file(".git/objects/info/alternates", "/etc\n")
        box.write_file(".gitattributes", "* filter=evil diff=evil\n")
        box.run("echo changed >> README.md")
        diff = box.diff()
    assert not marker.exists()
    assert "+changed" in diff and "b/.gitattributes" in diff and ".git/" not in diff.replace("b/.gitattributes", "")


# --- limits mechanisms ----------------------------------------------------------------------------

def test_enforcement_is_reported(local_factory) -> None:
    text = local_factory.enforcement
    assert "RLIMIT_FSIZE" in text and "tmpfs" in text
    if local_factory.cgroup_manager.version != "none":
        assert "cgroup" in text


def test_without_cgroups_rlimits_still_bound_memory(tmp_path, prepared) -> None:
    factory = LocalSandboxFactory(state_root=tmp_path / "state", cgroups="none")
    assert "RLIMIT_AS" in factory.enforcement and "not enforced for uid 0" in factory.enforcement
    with factory.open(prepared, Limits(memory_bytes=512 * 1024**2)) as box:
        result = box.run("python3 -c 'x = bytearray(1024 ** 3)'")
        assert result.exit_code != 0 and "MemoryError" in result.output
        assert box.run("echo fine").ok


def test_missing_bwrap_is_a_clear_error(tmp_path, prepared) -> None:
    factory = LocalSandboxFactory(state_root=tmp_path / "state", bwrap=str(tmp_path / "no-bwrap"))
    with pytest.raises(SandboxError, match="apt-get install bubblewrap"):
        factory.open(prepared)
    assert not any((tmp_path / "state").glob("sb-*"))


def test_not_root_is_a_clear_error(tmp_path, prepared, monkeypatch) -> None:
    factory = LocalSandboxFactory(state_root=tmp_path / "state")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SandboxError, match="needs root"):
        factory.open(prepared)


def test_bad_limits_and_arguments_are_named(local_factory, prepared) -> None:
    with pytest.raises(ValueError, match="max_processes"):
        local_factory.open(prepared, Limits(max_processes=0))
    with local_factory.open(prepared) as box:
        with pytest.raises(ValueError, match="environment variable"):
            box.run("true", env={"A=B": "x"})
        with pytest.raises(ValueError, match="timeout_s"):
            box.run("true", timeout_s=0)
        result = box.run("true", cwd="/no/such/dir")
        assert result.exit_code != 0 and "/no/such/dir" in result.output


# --- cleanup --------------------------------------------------------------------------------------

def test_close_leaves_no_trace_even_with_work_in_flight(local_factory, prepared) -> None:
    import threading

    box = local_factory.open(prepared)
    box.write_file("/tmp/x", "x")
    results: list[object] = []
    runner = threading.Thread(target=lambda: results.append(_catch(lambda: box.run("sleep 100", timeout_s=60))))
    runner.start()
    time.sleep(0.3)
    box.close()
    runner.join(10)
    assert not runner.is_alive()
    assert results and "closed" in str(results[0])
    assert host_traces(local_factory, box.name) == []
    # Its groups may be kept for a later sandbox under another name: the process must be gone,
    # not merely renamed away (SIGKILLed processes take a moment to exit).
    assert _gone_within(lambda: not [p for p in os.listdir("/proc") if p.isdigit() and "sleep 100" in _cmdline(p)], 5.0)


def _gone_within(check, seconds: float) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_cgroups_of_closed_sandboxes_are_reused_only_empty_and_removed_at_shutdown(tmp_path, prepared) -> None:
    factory = LocalSandboxFactory(state_root=tmp_path / "state")
    if factory.cgroup_manager.version == "none":
        pytest.skip("no usable cgroup hierarchy here")
    limits = Limits(max_processes=40, memory_bytes=512 * 1024**2)
    first = factory.open(prepared, limits)
    runner = threading.Thread(target=lambda: _catch(lambda: first.run("sleep 777 & sleep 778", timeout_s=60)))
    runner.start()
    time.sleep(0.3)
    first_group = first.cgroups
    first.close()
    runner.join(10)
    # The next sandbox with the same limits gets those groups once they are empty, renamed to it.
    second = None
    for _ in range(50):
        second = factory.open(prepared, limits)
        if second.cgroups is first_group:
            break
        second.close()
        time.sleep(0.05)
    assert second is not None and second.cgroups is first_group, "the emptied groups were not reused"
    assert [d.name for d in second.cgroups.dirs] == [second.name] * len(second.cgroups.dirs)
    assert second.cgroups.pids() == set()
    assert not [p for p in os.listdir("/proc") if p.isdigit() and "sleep 77" in _cmdline(p)]
    assert host_traces(factory, first.name) == []
    assert second.run("echo reused").output == "reused\n"
    pids_max = next(d for d in second.cgroups.dirs if (d / "pids.max").exists()) / "pids.max"
    assert pids_max.read_text().strip() == "40"
    # Other limits: other groups.
    other = factory.open(prepared, Limits(max_processes=41))
    assert other.cgroups is not first_group
    assert (next(d for d in other.cgroups.dirs if (d / "pids.max").exists()) / "pids.max").read_text().strip() == "41"
    other.close()
    second.close()
    kept = {group.dirs[0].name for group in factory.cgroup_pool.spares}
    assert second.name not in kept and other.name not in kept  # renamed when kept
    assert kept and kept <= set(factory.cgroup_manager.existing())
    factory.shutdown()
    assert not kept & set(factory.cgroup_manager.existing())


def _catch(call):  # noqa: ANN001, ANN202
    try:
        return call()
    except Exception as exc:  # noqa: BLE001
        return exc


CRASHER = """
import sys, threading, time
from patchgym.harness.sandbox.local import LocalSandboxFactory
from patchgym.tests.test_sandbox_support import make_prepared
from pathlib import Path
factory = LocalSandboxFactory(state_root=sys.argv[1])
prepared = make_prepared(Path(sys.argv[2]))
boxes = [factory.open(prepared) for _ in range(2)]
boxes[0].write_file("/tmp/data", "x" * 1000)
threading.Thread(target=boxes[0].run, args=("sleep 313.5",), kwargs={"timeout_s": 600}, daemon=True).start()
time.sleep(0.5)
print(factory.home.name, " ".join(b.name for b in boxes), flush=True)
time.sleep(600)
"""


def test_sigkilled_owner_leaves_nothing_after_next_start(tmp_path) -> None:
    state = tmp_path / "state"
    child = subprocess.Popen([sys.executable, "-c", CRASHER, str(state), str(tmp_path / "task")],
                             stdout=subprocess.PIPE, text=True)
    home, *names = child.stdout.readline().split()
    assert len(names) == 2, "the child did not open its sandboxes"
    child.send_signal(signal.SIGKILL)
    child.wait()
    # The processes die with their owner (the parent-death signal; allow for a loaded machine) and
    # the mounts with its namespaces; its directory and the cgroups stay until the next factory.
    deadline = time.monotonic() + 10
    while [p for p in os.listdir("/proc") if p.isdigit() and "313.5" in _cmdline(p)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in os.listdir("/proc") if p.isdigit() and "313.5" in _cmdline(p)]
    assert linux.mounts_under(str(state)) == []
    assert (state / home).exists()
    factory = LocalSandboxFactory(state_root=state)
    if factory.cgroup_manager.version != "none":
        assert sorted(factory.reaped) == sorted([home, *names])
    for name in names:
        assert host_traces(factory, name) == []
    assert [p.name for p in state.iterdir()] == []


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_reaper_leaves_live_owners_alone(local_factory, prepared, tmp_path) -> None:
    with local_factory.open(prepared) as box:
        other = LocalSandboxFactory(state_root=local_factory.state_root)
        assert box.name not in other.reaped
        assert box.run("echo alive").output == "alive\n"
    assert re.match(r"sb-\d+-\d+-\d+$", box.name)


def test_commands_run_when_the_process_holds_more_than_1024_descriptors(local_factory, prepared) -> None:
    """A server with hundreds of episodes holds >1024 fds; select() refuses descriptor numbers that high."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 1300:
        pytest.skip("the hard limit on open files is below 1300")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1300), hard))
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        box = local_factory.open(prepared)
        try:
            result = box.run("echo many-fds; sleep 0.2")
            assert result.ok and result.output == "many-fds\n"
            assert box.run("sleep 5", timeout_s=0.5).timed_out
        finally:
            box.close()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

"""Red-team attempts against the local (bubblewrap) sandbox that the other sandbox tests do not cover.

Each attempt runs while a second sandbox (`bystander`) is open; afterwards the host and the
bystander must still work and the attacking sandbox must leave nothing on the host (mounts,
directories, cgroups, processes) once closed. Attempts that are blocked by design are kept here as
regression tests, next to the ones that found holes (each fixed in harness/sandbox/).
"""

from __future__ import annotations

import math
import os
import threading
import time
from pathlib import Path

import pytest

from patchgym.harness.sandbox.base import Limits, SandboxError

from .test_sandbox_local import check_after_abuse
from .test_sandbox_support import git, host_traces, local_available

pytestmark = pytest.mark.skipif(local_available() is not None, reason=str(local_available()))


def _processes_with(marker: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                found.append(pid)
        except OSError:
            continue
    return found


# --- processes that try to outlive their command or the sandbox ------------------------------------

def test_daemons_that_ignore_sigterm_die_with_their_command_and_the_sandbox(local_factory, prepared, bystander) -> None:
    box = local_factory.open(prepared)
    script = (
        "(setsid sh -c 'trap \"\" TERM HUP INT; exec -a daemon-4711 sleep 4711' </dev/null >/dev/null 2>&1 &) ; "
        "(trap '' TERM HUP; nohup sleep 4712 </dev/null >/dev/null 2>&1 &) ; "
        "sh -c 'sleep 4713 & echo $!' ; echo spawned"
    )
    result = box.run(script)
    assert result.ok and result.output.endswith("spawned\n")
    deadline = time.monotonic() + 3
    while any(_processes_with(f"sleep {n}") for n in (4711, 4712, 4713)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(_processes_with(f"sleep {n}") for n in (4711, 4712, 4713))
    # A daemon started by a command that is still running when the sandbox closes dies with it too.
    runner = threading.Thread(target=lambda: _swallow(lambda: box.run("(setsid sleep 4714 &); sleep 60", timeout_s=60)))
    runner.start()
    time.sleep(0.5)
    check_after_abuse(local_factory, box, bystander)
    runner.join(10)
    assert not _processes_with("sleep 4714")


def _swallow(call) -> None:  # noqa: ANN001
    try:
        call()
    except Exception:  # noqa: BLE001 - the sandbox was closed under it, on purpose
        pass


def test_a_command_that_closes_its_output_and_ignores_sigterm_still_times_out(local_factory, prepared) -> None:
    with local_factory.open(prepared) as box:
        started = time.monotonic()
        result = box.run("trap '' TERM; exec >&- 2>&- </dev/null; while :; do :; done", timeout_s=1)
        assert result.timed_out and result.exit_code == -9
        assert time.monotonic() - started < 10


# --- kernel interfaces through /proc and /dev --------------------------------------------------------

def test_proc_and_kernel_interfaces_give_nothing_away(local_factory, prepared) -> None:
    attempts = {
        "read /proc/kcore": "head -c 16 /proc/kcore > /tmp/kcore && test -s /tmp/kcore",
        "kallsyms addresses": "grep -v '^0000000000000000' /proc/kallsyms | head -1 | grep -q .",
        # Same value written back (harmless if it got through): vm.* and kernel.core_pattern have no
        # capability check of their own, only the file mode; core_pattern = "|prog" runs prog as host root.
        "write vm.swappiness": "cat /proc/sys/vm/swappiness > /tmp/v && cat /tmp/v > /proc/sys/vm/swappiness",
        "write kernel.core_pattern": "cat /proc/sys/kernel/core_pattern > /tmp/c && cat /tmp/c > /proc/sys/kernel/core_pattern",
        "sysrq trigger": "echo c > /proc/sysrq-trigger",
        "LSM label": "echo unconfined > /proc/self/attr/current",
        "oom_score_adj below zero": "echo -1000 > /proc/self/oom_score_adj",
        "ptrace the owner": f"python3 -c 'import ctypes,sys; sys.exit(ctypes.CDLL(None).ptrace(16, {os.getpid()}, 0, 0) != 0)'",
        "kernel log": "head -c 1 /dev/kmsg | grep -q . || dmesg | grep -q .",
        "host pids in /proc": f"test -e /proc/{os.getpid()}/environ && grep -q PYTEST /proc/{os.getpid()}/environ",
        "raise a hard rlimit": "python3 -c 'import resource as r; r.setrlimit(r.RLIMIT_FSIZE, (-1, -1))'",
        "immutable flag": "chattr +i /testbed/README.md",
    }
    script = "\n".join(f"({cmd}) >/dev/null 2>&1 && echo 'ESCAPED: {name}'" for name, cmd in attempts.items())
    with local_factory.open(prepared) as box:
        result = box.run(script + "\necho finished")
        assert result.output == "finished\n", result.output


def test_abstract_unix_sockets_of_the_host_are_unreachable(local_factory, prepared, bystander) -> None:
    import socket

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(b"\0patchgym-redteam-host-service")
    server.listen(1)
    try:
        box = local_factory.open(prepared)
        probe = ("python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); "
                 "s.connect(b'\\0patchgym-redteam-host-service'); print('CONNECTED')\"")
        result = box.run(probe, timeout_s=10)
        assert "CONNECTED" not in result.output and result.exit_code != 0
        check_after_abuse(local_factory, box, bystander)
    finally:
        server.close()


def test_dev_and_dev_shm_count_against_the_write_limit(local_factory, prepared, bystander) -> None:
    """bwrap's /dev is a tmpfs of its own: left writable, /dev and /dev/shm would hold as much as
    memory allows, beyond max_write_bytes (and, without cgroups, beyond any limit)."""
    box = local_factory.open(prepared, Limits(max_write_bytes=8 * 1024**2, max_file_bytes=64 * 1024**2))
    for target in ("/dev/shm/fill", "/dev/fill", "/dev/pts/fill", "/dev/mqueue/fill"):
        result = box.run(f"head -c 20000000 /dev/zero > {target} && echo WROTE")
        assert "WROTE" not in result.output, target
    # /dev/shm still works for what programs normally keep there (POSIX semaphores), and ptys.
    assert box.run("rm -f /dev/shm/fill; python3 -c 'import os, pty; print(os.ttyname(pty.openpty()[1]))'").output == "/dev/pts/0\n"
    assert box.run("python3 -c 'import multiprocessing as m; m.Lock(); print(\"lock-ok\")'").output == "lock-ok\n"
    assert box.run("echo hi > /dev/null && head -c 4 /dev/zero | wc -c").output.strip() == "4"
    check_after_abuse(local_factory, box, bystander)


# --- the host-side file access and diff -------------------------------------------------------------

def test_nested_gitdir_links_do_not_make_the_diff_read_host_repositories(local_factory, prepared, tmp_path) -> None:
    """A `.git` file (`gitdir: /host/repo/.git`) or directory below /testbed makes git treat the
    directory as an embedded repository and read its HEAD: on the host, that is a host file."""
    host_repo = tmp_path / "host-repo"
    host_repo.mkdir()
    (host_repo / "secret.txt").write_text("host\n")
    git(host_repo, "init", "-q")
    git(host_repo, "add", "-A")
    git(host_repo, "-c", "user.name=h", "-c", "user.email=h@h", "commit", "-qm", "host commit")
    host_head = git(host_repo, "rev-parse", "HEAD").strip()
    with local_factory.open(prepared) as box:
        box.run(f"mkdir -p sub && echo 'gitdir: {host_repo}/.git' > sub/.git && echo content > sub/file.txt")
        box.run(f"mkdir -p sub2 && ln -s {host_repo}/.git sub2/.git && echo other > sub2/file.txt")
        diff = box.diff()
        assert host_head not in diff
        assert "+content" in diff and "+other" in diff  # plain directories, as the agent sees them


@pytest.mark.slow
def test_a_fifo_planted_as_an_embedded_head_cannot_hang_the_diff(local_factory, prepared, bystander) -> None:
    box = local_factory.open(prepared, Limits(timeout_s=2))
    box.run("mkdir -p sub/.git/objects sub/.git/refs && mkfifo sub/.git/HEAD && echo x > sub/f && "
            "mkdir s2 && mkfifo /tmp/head && echo 'gitdir: /tmp/head' > s2/.git")
    started = time.monotonic()
    try:
        diff = box.diff()
    except SandboxError as exc:
        assert "longer than" in str(exc)
    else:
        assert "b/sub/f" in diff
    assert time.monotonic() - started < 15
    check_after_abuse(local_factory, box, bystander)


def test_diff_of_hostile_names_fifos_and_modes(local_factory, prepared) -> None:
    with local_factory.open(prepared) as box:
        made = box.run(
            "mkfifo fifo && mkfifo /tmp/fifo && ln -s /tmp/fifo to-fifo && mknod dev c 1 3 2>/dev/null; "
            "printf x > $'new\\nline' && printf y > $'bad\\xff\\xfe' && printf z > ' lead' && "
            "ln README.md hardlink && chmod 000 README.md pkg/__init__.py && echo ok"
        )
        assert made.output.endswith("ok\n"), made.output
        started = time.monotonic()
        diff = box.diff()
        assert time.monotonic() - started < 30
        assert '"b/new\\nline"' in diff and '"b/bad\\377\\376"' in diff and "b/ lead" in diff
        assert "b/hardlink" in diff and "old mode 100644\nnew mode 100000" not in diff
        assert "b/to-fifo" in diff and "b/fifo" not in diff
        for path in ("fifo", "to-fifo", "/tmp/fifo"):
            started = time.monotonic()
            with pytest.raises(OSError):
                box.read_file(path)
            with pytest.raises(OSError):
                box.write_file(path, "x")
            assert time.monotonic() - started < 10, path


def test_diff_with_git_dir_replaced_by_a_link_and_an_unreadable_testbed(local_factory, prepared) -> None:
    with local_factory.open(prepared) as box:
        box.run("cd /testbed && echo new > added.txt && rm -rf .git && ln -s / .git && "
                "mkdir -p d/.git && ln -s /etc d/.git/objects && echo d > d/f && chmod 000 . d", cwd="/")
        diff = box.diff()
        assert "+new" in diff and "b/d/f" in diff and "b/.git" not in diff
        assert box.run("chmod 755 /testbed && cat /testbed/added.txt", cwd="/").output == "new\n"


def test_diff_of_a_huge_flat_directory_and_a_deep_tree(local_factory, prepared) -> None:
    with local_factory.open(prepared, Limits(timeout_s=60)) as box:
        made = box.run("mkdir many && cd many && seq 1 20000 | xargs touch && cd .. && "
                       "p=deep; for i in $(seq 1 300); do p=$p/d; done; mkdir -p $p && echo leaf > $p/leaf && echo ok")
        assert made.output == "ok\n", made.output
        diff = box.diff()
        assert diff.count("diff --git") == 20001 and "+leaf" in diff


@pytest.mark.slow
def test_inode_exhaustion_is_enospc_for_this_sandbox_only(local_factory, prepared, bystander) -> None:
    box = local_factory.open(prepared, Limits(max_write_bytes=1024**2, timeout_s=60))
    result = box.run("mkdir f && cd f && i=0; while touch $i 2>/dev/null; do i=$((i+1)); done; echo made=$i; touch x")
    assert "No space left on device" in result.output
    assert int(result.output.split("made=")[1].split()[0]) < 10000
    with pytest.raises(OSError):
        box.write_file("one-more", "x")
    check_after_abuse(local_factory, box, bystander)


# --- output -----------------------------------------------------------------------------------------

def test_binary_output_without_newlines_at_volume(local_factory, prepared, bystander) -> None:
    box = local_factory.open(prepared, Limits(max_output_bytes=10_000, timeout_s=60))
    result = box.run("printf '\\377\\376\\000'; head -c 50000000 /dev/urandom; printf END")
    assert result.ok and result.truncated_bytes > 49_000_000
    assert result.output.startswith("\ufffd\ufffd\x00") and result.output.endswith("END")
    check_after_abuse(local_factory, box, bystander)


# --- concurrency and other sandboxes ---------------------------------------------------------------

def test_many_concurrent_commands_in_one_sandbox(local_factory, prepared, bystander) -> None:
    box = local_factory.open(prepared, Limits(max_processes=512))
    results: dict[int, object] = {}

    def one(i: int) -> None:
        results[i] = box.run(f"echo {i} > /tmp/c{i}; sleep 0.3; cat /tmp/c{i}", timeout_s=60)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(48)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == list(range(48))
    assert all(results[i].output == f"{i}\n" for i in range(48)), [r for r in results.values() if not r.ok][:2]
    check_after_abuse(local_factory, box, bystander)


def test_a_sandbox_cannot_reach_another_sandboxs_state_or_cgroups(local_factory, prepared, bystander) -> None:
    bystander.write_file("/tmp/mine", "bystander data")
    box = local_factory.open(prepared)
    targets = [str(bystander.home), str(local_factory.state_root), "/sys/fs/cgroup"]
    if bystander.cgroups is not None:
        targets += [str(path) for path in bystander.cgroups.dirs]
    for target in targets:
        assert box.run(f"ls '{target}'").exit_code != 0, target
    search = box.run("cat /tmp/mine 2>&1; grep -rs 'bystander data' /tmp /testbed /dev /run /var 2>/dev/null | head -1; echo searched")
    assert search.output.endswith("searched\n") and "bystander data" not in search.output
    assert bystander.read_file("/tmp/mine") == b"bystander data"
    check_after_abuse(local_factory, box, bystander)


# --- arguments ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("timeout", [0, -1, math.nan, math.inf, -math.inf])
def test_non_finite_or_non_positive_timeouts_are_named(local_factory, prepared, timeout) -> None:
    with local_factory.open(prepared) as box:
        with pytest.raises(ValueError, match="timeout_s"):
            box.run("echo hi", timeout_s=timeout)
        assert box.run("echo hi").output == "hi\n"
    with pytest.raises(ValueError, match="timeout_s"):
        local_factory.open(prepared, Limits(timeout_s=timeout))


def test_bad_env_and_cwd_are_clear(local_factory, prepared) -> None:
    with local_factory.open(prepared) as box:
        with pytest.raises(ValueError, match="NUL"):
            box.run("true", env={"A": "x\0y"})
        with pytest.raises(ValueError, match="NUL"):
            box.run("true", cwd="/testbed\0/x")
        assert box.run("pwd", cwd="/proc").output == "/proc\n"
        outside = box.run("pwd", cwd="/nonexistent")
        assert outside.exit_code != 0 and "/nonexistent" in outside.output
        assert box.run("pwd", cwd="pkg").output == "/testbed/pkg\n"


def test_closing_after_filling_the_overlay_leaves_nothing(local_factory, prepared) -> None:
    box = local_factory.open(prepared, Limits(max_write_bytes=4 * 1024**2))
    box.run("head -c 10000000 /dev/zero > fill; chmod 000 fill; chmod 000 /tmp")
    name = box.name
    box.close()
    box.close()
    assert host_traces(local_factory, name) == []
    with pytest.raises(SandboxError):
        box.run("true")


SYSV_SHM_HOARDER = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
held = 0
for _ in range(6):
    segment = libc.shmget(0, 128 << 20, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
    address = libc.shmat(segment, None, 0) if segment >= 0 else None
    if address in (None, ctypes.c_void_p(-1).value):
        break
    ctypes.memset(address, 1, 128 << 20)
    libc.shmdt(ctypes.c_void_p(address))  # detached: no longer in RLIMIT_AS, still in memory
    held += 128
print("held", held)
"""


@pytest.mark.parametrize("cgroups", [None, "none"])
def test_sysv_shared_memory_is_bounded_by_the_memory_limit(tmp_path, prepared, cgroups) -> None:
    """SysV segments outlive their mapping (until the command's IPC namespace ends): with cgroups
    the memory limit charges them; without, RLIMIT_AS sees only what is attached, so the command
    runs in an IPC namespace whose kernel.shmall is the memory limit."""
    from patchgym.harness.sandbox.local import LocalSandboxFactory

    factory = LocalSandboxFactory(state_root=tmp_path / "state", cgroups=cgroups)
    with factory.open(prepared, Limits(memory_bytes=256 * 1024**2)) as box:
        box.write_file("/tmp/hoard.py", SYSV_SHM_HOARDER)
        result = box.run("python3 /tmp/hoard.py")
        assert "held 768" not in result.output
        if cgroups is None:  # the memory cgroup charges the segments: the hoarder is killed
            assert result.extra.get("oom_killed") is True or result.exit_code != 0
        else:  # shmget refuses what would pass kernel.shmall, which the command cannot raise
            assert result.output in ("held 128\n", "held 256\n"), result.output
            assert box.run("cat /proc/sys/kernel/shmall").output == f"{256 * 1024**2 // 4096}\n"
            assert box.run("echo 99999999 > /proc/sys/kernel/shmall").exit_code != 0
            assert box.run("cat /proc/sys/kernel/shmall").output == f"{256 * 1024**2 // 4096}\n"
        assert box.run("echo fine").ok
        # Its own IPC namespace per command: nothing of the last command's segments is left.
        assert box.run("ipcs -m | grep -c '^0x' || true").output.strip() in ("0", "")
    factory.shutdown()

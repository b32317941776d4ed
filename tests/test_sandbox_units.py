"""Unit tests of the sandbox building blocks that need no sandbox: output capping, the bwrap
command line and root plan, cgroup detection and limit files, owner names, strict file access,
the trusted diff, and what the docker and modal backends build before they talk to a remote side
(command wrapper, limits, labels, orphan selection, rate limiter, archive extraction)."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from patchgym.harness.sandbox import bwrap as bw
from patchgym.harness.sandbox import cgroups as cg
from patchgym.harness.sandbox import gitdiff, owners, remote, safefs
from patchgym.harness.sandbox.base import Limits
from patchgym.harness.sandbox.output import CappedOutput

from .test_sandbox_support import make_prepared

# --- output ----------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(st.binary(max_size=300), max_size=40), limit=st.integers(min_value=0, max_value=700))
def test_capped_output_keeps_exact_head_and_tail(chunks: list[bytes], limit: int) -> None:
    capped = CappedOutput(limit)
    for chunk in chunks:
        capped.feed(chunk)
        assert len(capped.head) + len(capped._tail) <= limit + 2 * capped.tail_limit + 300
    data = b"".join(chunks)
    assert capped.total == len(data)
    if len(data) <= limit:
        assert capped.cut == 0 and capped.head + capped.tail == data
    else:
        assert capped.cut == len(data) - limit
        assert bytes(capped.head) == data[: capped.head_limit]
        assert capped.tail == (data[-capped.tail_limit :] if capped.tail_limit else b"")
        assert f"[... {capped.cut} bytes cut ...]" in capped.render()


def test_capped_output_rejects_negative_limit() -> None:
    with pytest.raises(ValueError, match="output limit"):
        CappedOutput(-1)


# --- bwrap ------------------------------------------------------------------------------------------

def test_bwrap_argv_isolates_and_shares_network_only_on_request() -> None:
    layout = bw.Layout(root="/state/f-1-2-3/root")
    argv = bw.bwrap_argv("/usr/bin/bwrap", layout, ["/bin/bash", "-c", "true"], env={"HOME": "/tmp"}, cwd="/testbed/pkg")
    for flag in ("--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert "--share-net" not in argv
    assert argv[argv.index("--bind") + 1 : argv.index("--bind") + 3] == [layout.root, "/"]
    assert argv[argv.index("--chdir") + 1] == "/testbed/pkg"
    assert argv[argv.index("--") + 1 :] == ["/bin/bash", "-c", "true"]
    host_paths = [a for a in argv[: argv.index("--")] if a.startswith("/") and a not in ("/", "/proc", "/dev", "/tmp", "/testbed/pkg")]
    assert host_paths == ["/usr/bin/bwrap", layout.root]  # nothing else of the host is named
    networked = bw.bwrap_argv("bwrap", bw.Layout(root="/r", network=True), ["true"], env={}, new_session=False)
    assert "--share-net" in networked and "--new-session" not in networked


def test_bwrap_argv_leaves_the_ipc_namespace_to_the_caller_only_when_told() -> None:
    argv = bw.bwrap_argv("bwrap", bw.Layout(root="/r"), ["true"], env={}, new_session=False, own_ipc=False)
    assert "--unshare-all" not in argv and "--unshare-ipc" not in argv
    for flag in ("--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-uts", "--disable-userns"):
        assert flag in argv
    assert "--share-net" not in argv


def test_new_session_exactly_when_there_is_a_terminal_to_protect() -> None:
    import pty

    script = "from patchgym.harness.sandbox.bwrap import has_controlling_terminal as h; print(h())"
    import sys

    detached = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, start_new_session=True)
    assert detached.stdout.strip() == "False"
    pid, fd = pty.fork()
    if pid == 0:  # the child of pty.fork has the pty as its controlling terminal
        os.execv(sys.executable, [sys.executable, "-c", script])
    output = b""
    while True:
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    os.waitpid(pid, 0)
    assert b"True" in output


def test_root_plan_binds_dirs_copies_etc_and_turns_inner_links_into_symlinks(tmp_path: Path) -> None:
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "bin").symlink_to("usr/bin")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    outside = tmp_path / "elsewhere.conf"
    outside.write_text("x")
    (tmp_path / "etc" / "link.conf").symlink_to(outside)
    paths = [str(tmp_path / p) for p in ("usr", "bin", "missing")]
    plan = {e.path: e for e in bw.root_plan(paths)}
    assert plan[str(tmp_path / "usr")].kind == "dir"
    assert plan[str(tmp_path / "bin")] == bw.RootEntry(str(tmp_path / "bin"), "symlink", "usr/bin")
    assert str(tmp_path / "missing") not in plan
    default = bw.root_plan()
    assert {e.path for e in default if e.path.startswith("/etc/")} <= {e.path for e in default if e.kind in ("copy", "symlink")}
    # of the home directory only Python installations: the running one's prefix, pyenv's and uv's
    # folders of them (a task's environment.python venv links into those), never the home itself
    from patchgym.tasks import hostfs

    pythons = [sys_prefix_parent(), *hostfs.python_install_roots()]
    home = [e.path for e in default if e.path == str(Path.home()) or e.path.startswith(str(Path.home()) + "/")]
    assert all(any(path == p or path.startswith(p + "/") for p in pythons) for path in home), home
    assert str(Path.home()) not in home
    assert all(os.path.basename(root) in ("versions", "python") or "python" in root for root in hostfs.python_install_roots())


def sys_prefix_parent() -> str:
    import sys

    return os.path.realpath(sys.base_prefix)


def test_base_env_puts_the_venv_first() -> None:
    env = bw.base_env(True)
    assert env["PATH"].split(":")[0] == "/patchgym/venv/bin" and env["HOME"] == "/tmp"
    assert "VIRTUAL_ENV" not in bw.base_env(False)


# --- cgroups ----------------------------------------------------------------------------------------

V1_MOUNTINFO = """\
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def test_cgroup_mounts_are_parsed_from_mountinfo() -> None:
    mounts = cg._cgroup_mounts(V1_MOUNTINFO)
    assert ("/sys/fs/cgroup/pids", "cgroup", {"rw", "pids"}) in mounts
    assert any(point == "/sys/fs/cgroup/unified" and kind == "cgroup2" for point, kind, _ in mounts)


def test_detect_prefers_v2_with_memory_and_pids(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    mountinfo = f"41 31 0:38 / {tmp_path} rw - cgroup2 cgroup2 rw\n"
    assert cg.detect(mountinfo).version == "v2"
    (tmp_path / "cgroup.controllers").write_text("hugetlb\n")
    assert cg.detect(mountinfo).version == "none"


def test_v2_groups_get_limits_and_report_events(tmp_path: Path) -> None:
    (tmp_path / "patchgym").mkdir()
    (tmp_path / "patchgym" / "cgroup.subtree_control").write_text("memory pids")
    manager = cg.CgroupManager("v2", [tmp_path])
    group = manager.create("sb-1-2-3", 1 << 30, 77)
    d = tmp_path / "patchgym" / "sb-1-2-3"
    assert (d / "memory.max").read_text() == str(1 << 30) and (d / "pids.max").read_text() == "77"
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 2\n")
    (d / "pids.events").write_text("max 5\n")
    assert group.events() == cg.LimitEvents(oom_kills=2, pids_max_hits=5)
    (d / "cgroup.procs").write_text("")
    assert group.kill_all(0.1) is True
    assert manager.existing() == ["sb-1-2-3"]


def test_v1_limits_go_to_their_own_hierarchy(tmp_path: Path) -> None:
    pids, memory = tmp_path / "pids", tmp_path / "memory"
    for root in (pids, memory):
        (root / "patchgym").mkdir(parents=True)
    manager = cg.CgroupManager("v1", [pids, memory])
    group = manager.create("sb-9-9-9", 123456789, 12)
    assert (pids / "patchgym/sb-9-9-9/pids.max").read_text() == "12"
    assert (memory / "patchgym/sb-9-9-9/memory.limit_in_bytes").read_text() == "123456789"
    assert not (pids / "patchgym/sb-9-9-9/memory.limit_in_bytes").exists()
    assert group.thread_files() == [str(pids / "patchgym/sb-9-9-9/tasks"), str(memory / "patchgym/sb-9-9-9/tasks")]


# --- owners -----------------------------------------------------------------------------------------

def test_owner_names_and_liveness() -> None:
    me = owners.Owner.me()
    assert me.alive()
    assert owners.owner_of(owners.sandbox_name(me, 7)) == me
    assert owners.owner_of(owners.factory_dir_name(me, 2)) == me
    assert owners.owner_of("something-else") is None
    finished = subprocess.Popen(["true"])
    finished.wait()
    ghost = owners.sandbox_name(owners.Owner(finished.pid, me.start_time + 10**9), 1)
    assert owners.dead_names([owners.sandbox_name(me, 1), ghost, "unrelated"]) == [ghost]


def test_a_dead_owners_cgroup_still_busy_is_left_for_a_later_reap(tmp_path: Path) -> None:
    """A stopped process of a dead owner's keeps its cgroup busy (EBUSY): the reap goes on, and the
    factory that reaps at its start still starts (fp51, stop 51: it did not, on another session's leftover)."""
    me = owners.Owner.me()
    finished = subprocess.Popen(["true"])
    finished.wait()
    busy, gone = (owners.sandbox_name(owners.Owner(finished.pid, me.start_time + 10**9), n) for n in (1, 2))
    removed = []

    class Group:
        def __init__(self, name):
            self.name = name

        def remove(self):
            if self.name == busy:
                raise OSError(16, "Device or resource busy")
            removed.append(self.name)

    class Cgroups:
        version = "v1"

        def existing(self):
            return [busy, gone]

        def group(self, name):
            return Group(name)

    assert owners.reap(tmp_path / "state", Cgroups()) == [gone]
    assert removed == [gone]


# --- strict file access -----------------------------------------------------------------------------

def test_safefs_refuses_symlinks_and_dotdot(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("inside")
    (tmp_path / "outside.txt").write_text("outside")
    (root / "link").symlink_to(tmp_path / "outside.txt")
    (root / "dirlink").symlink_to(tmp_path)
    os.mkfifo(root / "fifo")
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    try:
        assert safefs.read_beneath(fd, "sub/f.txt", 100) == b"inside"
        for path in ("link", "dirlink/outside.txt", "sub/../../outside.txt"):
            with pytest.raises(safefs.NeedsSandbox):
                safefs.read_beneath(fd, path, 100)
            with pytest.raises(safefs.NeedsSandbox):
                safefs.write_beneath(fd, path, b"overwritten", 0o644)
        with pytest.raises(OSError, match="regular file"):
            safefs.read_beneath(fd, "fifo", 100)
        with pytest.raises(OSError, match="read limit"):
            safefs.read_beneath(fd, "sub/f.txt", 3)
        safefs.write_beneath(fd, "new/deep/file.bin", b"\x00\x01", 0o600)
        assert (root / "new/deep/file.bin").read_bytes() == b"\x00\x01"
        assert (root / "new/deep/file.bin").stat().st_mode & 0o777 == 0o600
    finally:
        os.close(fd)
    assert (tmp_path / "outside.txt").read_text() == "outside"


# --- trusted diff -----------------------------------------------------------------------------------

def test_diff_uses_only_the_trusted_git_dir(tmp_path: Path) -> None:
    prepared = make_prepared(tmp_path / "task", with_venv=False)
    work = tmp_path / "work"
    subprocess.run(["cp", "-a", str(prepared.repo_dir), str(work)], check=True)
    marker = tmp_path / "pwned"
    (work / ".git" / "config").write_text(f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = /nonexistent\n")
    (work / ".git" / "HEAD").write_text("ref: refs/heads/forged\n")
    (work / "README.md").write_text("changed\n")
    (work / "added.txt").write_text("new\n")
    before = sorted(p.name for p in (prepared.repo_dir / ".git").iterdir())
    diff = gitdiff.diff_worktree(prepared.repo_dir, str(work), prepared.base_commit, tmp_path)
    assert not marker.exists()
    assert "+changed" in diff and "b/added.txt" in diff and ".git" not in diff
    assert sorted(p.name for p in (prepared.repo_dir / ".git").iterdir()) == before
    assert [p for p in tmp_path.iterdir() if p.name.startswith("diff-")] == []


def test_diff_names_a_missing_git_dir(tmp_path: Path) -> None:
    with pytest.raises(gitdiff.DiffError, match="no .git"):
        gitdiff.diff_worktree(tmp_path, str(tmp_path), "HEAD", tmp_path)


# --- container backends: what is built before any remote call ----------------------------------------

def run_wrapped(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path)


def test_wrap_command_merges_output_sets_limits_cwd_and_env(tmp_path: Path) -> None:
    limits = Limits(max_file_bytes=4096)
    script = remote.wrap_command('echo out; echo err >&2; pwd; echo "$GREETING"; head -c 10000 /dev/zero > big; echo rc=$?',
                                 limits, cwd=str(tmp_path), env={"GREETING": "it's \"quoted\" $HOME"})
    result = run_wrapped(script, tmp_path)
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[:4] == ["out", "err", str(tmp_path), "it's \"quoted\" $HOME"]
    assert "rc=153" in result.stdout or "File size limit" in result.stdout
    assert (tmp_path / "big").stat().st_size == 4096
    with pytest.raises(ValueError, match="not a valid shell name"):
        remote.wrap_command("true", limits, env={"BAD NAME": "x"})


def test_rate_limiter_spaces_acquisitions_across_threads() -> None:
    now = [0.0]
    lock = threading.Lock()

    def sleep(seconds: float) -> None:
        with lock:
            now[0] += seconds

    limiter = remote.RateLimiter(5.0, burst=5, clock=lambda: now[0], sleep=sleep)
    threads = [threading.Thread(target=limiter.acquire) for _ in range(15)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # 5 at once (the burst), then 10 more at 5 per second: at least 2 s of (simulated) waiting.
    assert now[0] >= 2.0 - 1e-6  # each grant tolerates 1e-9 of refill rounding
    with pytest.raises(ValueError):
        remote.RateLimiter(0)


def test_modal_limiter_is_process_wide_at_five_per_second() -> None:
    from patchgym.harness.sandbox import modal_backend

    assert modal_backend.CREATE_LIMITER.rate == 5.0


def test_orphan_selection_only_takes_dead_owners_of_this_host() -> None:
    me = remote.owner_label()
    host = me.split(":")[0]
    items = [
        ("mine", {remote.LABEL: "1", remote.OWNER_LABEL: me}),
        ("dead", {remote.LABEL: "1", remote.OWNER_LABEL: f"{host}:999999999:1"}),
        ("other-host", {remote.LABEL: "1", remote.OWNER_LABEL: "elsewhere:999999999:1"}),
        ("not-ours", {remote.OWNER_LABEL: f"{host}:999999999:1"}),
        ("garbled", {remote.LABEL: "1", remote.OWNER_LABEL: "nonsense"}),
    ]
    assert remote.select_orphans(items) == ["dead"]
    labels = remote.labels("task-1", "sb")
    assert labels[remote.TASK_LABEL] == "task-1" and labels[remote.OWNER_LABEL] == me


def make_tar(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    buffer.seek(0)
    return buffer


def test_extract_tree_never_writes_outside_or_through_links(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()

    def entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", mode: int = 0o644) -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.type, info.linkname, info.mode = kind, link, mode
        return info

    stream = make_tar([
        (entry("testbed", tarfile.DIRTYPE, mode=0o755), None),
        (entry("testbed/ok.txt"), b"fine"),
        (entry("testbed/run.sh", mode=0o755), b"#!/bin/sh\n"),
        (entry("testbed/escape", tarfile.SYMTYPE, link=str(victim)), None),
        (entry("testbed/escape/planted.txt"), b"evil"),
        (entry("/testbed/abs.txt"), b"evil"),
        (entry("testbed/../up.txt"), b"evil"),
        (entry("other/file.txt"), b"not under testbed"),
        (entry("testbed/hard", tarfile.LNKTYPE, link="testbed/ok.txt"), None),
        (entry("testbed/dev", tarfile.CHRTYPE), None),
    ])
    dest = tmp_path / "tree"
    remote.extract_tree(stream, dest, strip="testbed", max_total_bytes=1 << 20)
    assert sorted(p.name for p in dest.iterdir()) == ["escape", "hard", "ok.txt", "run.sh"]
    assert os.readlink(dest / "escape") == str(victim)
    assert (dest / "hard").read_bytes() == b"fine"
    assert os.access(dest / "run.sh", os.X_OK)
    assert list(victim.iterdir()) == [] and not (tmp_path / "up.txt").exists()


def test_single_file_from_tar() -> None:
    data = remote.tar_of_file("x.bin", b"\x00payload", 0o600)
    assert remote.single_file_from_tar(io.BytesIO(data), 100) == b"\x00payload"
    with pytest.raises(OSError, match="read limit"):
        remote.single_file_from_tar(io.BytesIO(data), 3)


def test_docker_container_config(tmp_path: Path) -> None:
    pytest.importorskip("docker", reason="the Docker SDK is not installed (pip install docker)")
    from patchgym.harness.sandbox.docker_container import container_config

    prepared = make_prepared(tmp_path)
    limits = Limits(memory_bytes=1 << 30, max_processes=99, max_file_bytes=1 << 20, max_write_bytes=1 << 28)
    config = container_config("python:3.11-slim", prepared, limits, network=False, name="sb", cpus=1.5, mount_host_venv=True)
    assert config["network_disabled"] is True and config["cap_drop"] == ["ALL"]
    assert config["mem_limit"] == config["memswap_limit"] == 1 << 30
    assert config["pids_limit"] == 99 and config["nano_cpus"] == 1_500_000_000
    assert {(u["Name"], u["Soft"], u["Hard"]) for u in config["ulimits"]} == {("core", 0, 0), ("fsize", 1 << 20, 1 << 20)}
    assert config["tmpfs"]["/tmp"].startswith(f"size={1 << 28}")
    assert config["labels"][remote.TASK_LABEL] == prepared.instance_id
    assert config["volumes"] == {str(prepared.venv_dir): {"bind": "/patchgym/venv", "mode": "ro"}}
    networked = container_config("img", prepared, limits, network=True, name="sb", cpus=None, mount_host_venv=False)
    assert networked["network_disabled"] is False and "volumes" not in networked and "nano_cpus" not in networked


def test_docker_without_image_is_a_clear_error(tmp_path: Path) -> None:
    from patchgym.harness.sandbox.base import SandboxError
    from patchgym.harness.sandbox.docker_backend import DockerSandboxFactory

    factory = DockerSandboxFactory(reap=False, client=object())
    with pytest.raises(SandboxError, match="no environment.image"):
        factory.open(make_prepared(tmp_path))


def test_modal_create_kwargs() -> None:
    from patchgym.harness.sandbox.modal_backend import create_kwargs

    kwargs = create_kwargs(Limits(memory_bytes=3 * 1024**3), network=False, cpus=2.0, lifetime_s=7200)
    assert kwargs == {"timeout": 7200, "block_network": True, "workdir": "/", "cpu": 2.0, "memory": (3072, 3072)}
    assert create_kwargs(Limits(), network=True, cpus=None, lifetime_s=60)["block_network"] is False


def test_get_factory_names_unknown_backends() -> None:
    from patchgym.harness.sandbox.base import get_factory

    with pytest.raises(ValueError, match="unknown sandbox backend 'podman'"):
        get_factory("podman")


def test_remote_backends_diff_an_archive_of_testbed_with_trusted_git(tmp_path: Path) -> None:
    """docker and modal both diff a tar of /testbed against the snapshot (remote.diff_of_archive)."""
    import io
    import shutil
    import subprocess
    import tarfile
    from types import SimpleNamespace

    from .test_sandbox_support import make_prepared

    prepared = make_prepared(tmp_path / "task")
    tree = tmp_path / "remote-testbed"
    shutil.copytree(prepared.repo_dir, tree, symlinks=True)
    shutil.rmtree(tree / ".git")
    (tree / "README.md").write_text("changed\n")
    (tree / "pkg" / "deep" / "data.txt").unlink()
    (tree / "new.txt").write_text("new\n")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(str(tree), arcname="testbed")
    buffer.seek(0)
    fake = SimpleNamespace(prepared=prepared, limits=Limits(), name="fake-remote")
    diff = remote.diff_of_archive(fake, lambda scratch: buffer, "patchgym-test-diff-")
    assert "+changed" in diff and "deleted file mode" in diff and "b/new.txt" in diff
    assert "build-artifact" not in diff  # excluded by the snapshot's info/exclude
    # The diff applies to a clean checkout of the snapshot and reproduces the remote tree.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(prepared.repo_dir), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "apply", "-"], input=diff, text=True, check=True)
    assert (clone / "README.md").read_text() == "changed\n" and (clone / "new.txt").exists()


def test_remote_sandboxes_close_once_and_refuse_calls_after(tmp_path: Path) -> None:
    """docker and modal share RemoteSandbox: close is idempotent, later calls raise SandboxClosed."""
    from types import SimpleNamespace

    from patchgym.harness.sandbox.base import SandboxClosed
    from patchgym.harness.sandbox.docker_backend import DockerSandbox
    from patchgym.harness.sandbox.modal_backend import ModalSandbox

    from .test_sandbox_support import make_prepared

    prepared = make_prepared(tmp_path / "task")
    removed, terminated, forgotten = [], [], []
    from patchgym.harness.sandbox.docker_removal import BackgroundRemover

    factory = SimpleNamespace(_forget=forgotten.append, _remover=BackgroundRemover())
    container = SimpleNamespace(remove=lambda force: removed.append(force))
    handle = SimpleNamespace(terminate=lambda: terminated.append(True))
    boxes = [DockerSandbox(factory, prepared, Limits(), container, "d-1"), ModalSandbox(factory, prepared, Limits(), handle, "m-1")]
    for box in boxes:
        assert not box.closed
        box.close()
        box.close()
        assert box.closed
        with pytest.raises(SandboxClosed, match=box.name):
            box.read_file("README.md")
    factory._remover.drain()  # a docker container is removed in the background
    assert removed == [True] and terminated == [True] and len(forgotten) == 2


def test_remote_factories_close_every_sandbox_they_still_hold(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from patchgym.harness.sandbox.docker_backend import DockerSandbox, DockerSandboxFactory
    from patchgym.harness.sandbox.modal_backend import ModalSandbox, ModalSandboxFactory

    from .test_sandbox_support import make_prepared

    prepared = make_prepared(tmp_path / "task")
    removed: list[bool] = []
    for factory, make in (
        (DockerSandboxFactory(reap=False, client=SimpleNamespace()),
         lambda f, n: DockerSandbox(f, prepared, Limits(), SimpleNamespace(remove=lambda force: removed.append(force)), n)),
        (ModalSandboxFactory(reap=False),
         lambda f, n: ModalSandbox(f, prepared, Limits(), SimpleNamespace(terminate=lambda: removed.append(True)), n)),
    ):
        boxes = [factory._register(make(factory, f"box-{i}")) for i in range(3)]
        boxes[0].close()  # closed already: forgotten, not closed twice
        factory.close_all()
        assert all(box.closed for box in boxes) and factory._sandboxes == {}
    assert removed == [True] * 6


def test_a_missing_backend_sdk_says_how_to_install_it() -> None:
    from patchgym.harness.sandbox.base import SandboxError

    with pytest.raises(SandboxError, match=r"needs the Docker SDK: pip install 'patchgym\[docker\]'"):
        remote.import_sdk("patchgym_no_such_sdk", "docker", "Docker")
    assert remote.import_sdk("json", "docker", "Docker").__name__ == "json"


def test_v1_events_come_from_each_hierarchy_and_follow_changes(tmp_path: Path) -> None:
    pids, memory = tmp_path / "pids", tmp_path / "memory"
    for root in (pids, memory):
        (root / "patchgym").mkdir(parents=True)
    group = cg.CgroupManager("v1", [pids, memory]).create("sb-1-1-1", 1 << 30, 10)
    (memory / "patchgym/sb-1-1-1/memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    (pids / "patchgym/sb-1-1-1/pids.events").write_text("max 0\n")
    assert group.events() == cg.LimitEvents(0, 0)
    # The files stay open between reads: later values must still be seen.
    (memory / "patchgym/sb-1-1-1/memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    (pids / "patchgym/sb-1-1-1/pids.events").write_text("max 7\n")
    assert group.events() == cg.LimitEvents(oom_kills=3, pids_max_hits=7)
    group.close_files()
    group.close_files()  # idempotent


def test_spare_pool_keeps_at_most_size_spares_and_closes_what_it_drops() -> None:
    import threading

    from patchgym.harness.sandbox.spare_pool import SparePool

    class Box:
        def __init__(self, name: str) -> None:
            self.name, self.closed = name, threading.Event()

        def close(self) -> None:
            self.closed.set()

    made: list[Box] = []

    def start(name: str):
        def make() -> Box:
            if name == "broken":
                raise RuntimeError("the engine refused")
            made.append(Box(name))
            return made[-1]
        return make

    pool = SparePool(1)
    assert pool.take("a") is None
    pool.refill("a", start("a"))
    pool.refill("b", start("b"))
    pool.refill("broken", start("broken"))
    pool.close()  # waits for the three starters; the pool then holds nothing, every box is closed
    assert sorted(b.name for b in made) == ["a", "b"]
    assert all(b.closed.wait(5) for b in made)
    assert pool.take("a") is None and pool.take("broken") is None  # take reopens the closed pool

    pool.refill("a", start("a"))
    pool._starters[-1].join()
    spare = pool.take("a")
    assert spare is made[-1] and not spare.closed.is_set()  # a spare taken is the caller's, open
    assert pool.take("a") is None

    pool.refill("a", start("a"))
    pool._starters[-1].join()
    pool.refill("b", start("b"))
    pool._starters[-1].join()
    assert made[-2].closed.wait(5) and not made[-1].closed.is_set()  # size 1: the oldest kind evicted
    assert pool.take("b") is made[-1]

    off = SparePool(0)
    off.refill("a", start("a"))
    assert off.take("a") is None and not off._starters  # size 0 starts nothing


def test_background_removal_removes_in_order_and_reports_failures_at_drain() -> None:
    """The docker factory's closed containers (doubles here: the engine's part is in test_docker_*)."""
    import threading

    from patchgym.harness.sandbox.base import SandboxError
    from patchgym.harness.sandbox.docker_removal import BackgroundRemover

    removed: list[str] = []
    gate = threading.Event()

    class _Container:
        def __init__(self, name: str, error: str | None = None) -> None:
            self.name, self.error = name, error

        def remove(self, force: bool = False) -> None:
            assert force
            gate.wait(5)
            if self.error:
                raise RuntimeError(self.error)
            removed.append(self.name)

    remover = BackgroundRemover()
    for name in ("a", "b"):
        remover.remove(_Container(name), name)
    remover.remove(_Container("c", "404 Client Error: No such container"), "c")  # already gone: not an error
    assert removed == []  # remove() returned before any removal ran
    gate.set()
    remover.drain()
    assert removed == ["a", "b"]
    remover.remove(_Container("d", "engine refused"), "d")
    with pytest.raises(SandboxError, match="d: engine refused"):
        remover.drain()
    remover.drain()  # reported once


def test_a_same_size_edit_in_the_second_of_the_checkout_is_in_the_diff(tmp_path: Path) -> None:
    # git judges an index entry by size and whole-second times unless the file is as new as the
    # index ("racily clean"). The scratch index was a copy dated now, so an edit of the same size
    # made in the second of the snapshot's checkout was skipped: an empty diff, reward 0 for a real
    # fix (the toy episode under load). The copy keeps the index's time now.
    import time

    for _ in range(5):
        repo = tmp_path / f"r{_}"
        repo.mkdir()
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
        source = repo / "calc.py"
        source.write_text("def add(a, b):\n    return a - b\n")
        second = int(time.time()) - 100
        os.utime(source, (second, second))
        for args in (["init", "-q"], ["add", "calc.py"], ["commit", "-qm", "base"]):
            subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)
        base = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
        os.utime(repo / ".git" / "index", (second, second))  # written in the second of the checkout
        entry_ctime = os.stat(source).st_ctime
        source.write_text("def add(a, b):\n    return a + b\n")  # same size, same inode
        os.utime(source, (second, second))
        if int(os.stat(source).st_ctime) != int(entry_ctime):
            continue  # a second boundary fell between: stat differs anyway, try again
        diff = gitdiff.diff_worktree(repo, str(repo), base, tmp_path)
        assert "+    return a + b" in diff, diff
        return
    pytest.skip("could not make the edit within the checkout's second")

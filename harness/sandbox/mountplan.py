"""The local backend's mount plan: what is mounted where, in the factory's base mount namespace
and in each sandbox's copy of it.

Owns: the read-only system root (`mount_system_root`: binds of the host's system paths from
bwrap.root_plan on a small tmpfs, the mount points a sandbox adds, then the superblock made
read-only), the shared read-only /dev (`mount_dev`), and per sandbox (`mount_sandbox`) the tmpfs of
`max_write_bytes`, the overlayfs at /testbed over the read-only snapshot, /tmp, the task's venv and
the sandbox's own devpts and /dev/shm. Every function here runs on the namespace worker thread
inside the namespace it mounts in (mountns.py); none of it touches the host's mount table.

Does not cover: creating or entering namespaces (mountns.py), the bwrap command line that binds
this tree at / (bwrap.py), or removing anything (a namespace's mounts go with its last reference).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from patchgym.harness.sandbox import bwrap as bw
from patchgym.harness.sandbox import linux
from patchgym.harness.sandbox.base import Limits
from patchgym.tasks.prepared import VENV_MOUNT

DIFF_GIT_DIR = "/patchgym/diff/git"  # where the diff's git sees the snapshot's trusted .git (read-only)
DIFF_SCRATCH = "/patchgym/diff/scratch"  # ... and its scratch index and objects


def escape_overlay_path(path: str) -> str:
    # overlayfs splits its options on "," and lowerdir on ":"; both may be escaped with "\".
    return path.replace("\\", "\\\\").replace(",", "\\,").replace(":", "\\:")


def mount_system_root(home: Path, plan: list[bw.RootEntry]) -> None:
    """In the factory's base mount namespace: a small tmpfs at home/root holding read-only binds of
    the system paths (or symlinks) and the mount points a sandbox adds, then made read-only."""
    # Pseudo filesystems (sysfs and the cgroup tree, devpts, mqueue, ...) are of no use to the
    # namespaces copied from this one, and each mount costs every bwrap start: detach them here.
    for point in pseudo_mounts():
        try:
            linux.umount(point, linux.MNT_DETACH)
        except OSError:
            pass
    root = home / "root"
    flags = linux.MS_NOSUID | linux.MS_NODEV
    size_options = "size=64m,nr_inodes=65536,mode=0755"
    linux.mount("patchgym-root", str(root), "tmpfs", flags, size_options)
    for entry in plan:
        target = root / entry.path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if entry.kind == "symlink":
            os.symlink(entry.source, target)
            continue
        if entry.kind == "copy":
            if os.path.isdir(entry.source):
                shutil.copytree(entry.source, target, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(entry.source, target)
            continue
        if entry.kind == "dir":
            target.mkdir(exist_ok=True)
        else:
            target.touch()
        bind_readonly(entry.source, str(target))
    for sub in ("testbed", "tmp", "proc", "dev", VENV_MOUNT.lstrip("/"), DIFF_GIT_DIR.lstrip("/"), DIFF_SCRATCH.lstrip("/")):
        (root / sub).mkdir(parents=True, exist_ok=True)
    # The superblock, not just this mount, becomes read-only: bwrap's bind of it at / and its
    # per-mount remounts (nosuid, nodev) cannot make it writable again.
    linux.mount(None, str(root), None, linux.MS_REMOUNT | linux.MS_RDONLY | flags, size_options)
    mount_dev(home / "dev")


PSEUDO_FILESYSTEMS = {
    "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "debugfs", "tracefs", "securityfs", "pstore",
    "bpf", "configfs", "fusectl", "binfmt_misc", "hugetlbfs", "efivarfs", "rpc_pipefs",
}


def pseudo_mounts() -> list[str]:
    """Mount points of pseudo filesystems in this mount namespace, deepest first."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
        for line in handle:
            fields, _, post = line.partition(" - ")
            if post.split(" ")[0] in PSEUDO_FILESYSTEMS:
                points.append(linux._unescape_mountinfo(fields.split(" ")[4]))
    return sorted(points, key=len, reverse=True)


def mount_sandbox(home: Path, repo_dir: Path, venv_dir: Path | None, limits: Limits) -> tuple[int, int]:
    """In a sandbox's own mount namespace (a copy of the base one):

    rw/            tmpfs of max_write_bytes: the overlay's upper and work directories, /tmp, /dev/shm
    root/testbed   overlayfs: lower = the read-only prepared repository, upper on rw/
    root/tmp       rw/tmp
    root/patchgym/venv   the task's environment, read-only
    dev/pts, dev/shm     the sandbox's devpts and /dev/shm (`mount_sandbox_dev`)
    """
    rw, root = f"{home}/rw", f"{home}/root"  # strings, not Paths: this runs for every open
    size = limits.max_write_bytes or (1 << 40)
    inodes = max(4096, size // 4096)
    flags = linux.MS_NOSUID | linux.MS_NODEV
    linux.mount("patchgym-sandbox", rw, "tmpfs", flags, f"size={size},nr_inodes={inodes},mode=0755")
    for sub in ("upper", "work", "tmp", "shm"):
        os.mkdir(f"{rw}/{sub}")
    os.chmod(f"{rw}/tmp", 0o1777)
    os.chmod(f"{rw}/shm", 0o1777)
    options = (
        f"lowerdir={escape_overlay_path(str(repo_dir))},"
        f"upperdir={escape_overlay_path(rw + '/upper')},workdir={escape_overlay_path(rw + '/work')}"
    )
    # xino=on: one inode number a file, whichever layer it is on, kept across its copy-up. Without it
    # (the lower layer on the host's disk, the upper on a tmpfs) a hard link of a checked-in file
    # came out as another device and inode than the file, and `os.path.samefile` said no: an honest
    # test linking a file of the repository failed here as it does not in a container (fpAL's AL-D,
    # aiofiles, stop 47; measured with `ln a b`: inode and device both differ without, equal with).
    try:
        linux.mount("patchgym-overlay", f"{root}/testbed", "overlay", flags, options + ",xino=on")
    except OSError:  # (a kernel without the option, before 4.17)
        linux.mount("patchgym-overlay", f"{root}/testbed", "overlay", flags, options)
    linux.mount(f"{rw}/tmp", f"{root}/tmp", None, linux.MS_BIND)
    if venv_dir is not None:
        bind_readonly(str(venv_dir), root + VENV_MOUNT)
    mount_sandbox_dev(home / "dev", Path(rw) / "shm")
    testbed_fd = os.open(f"{root}/testbed", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    tmp_fd = os.open(f"{rw}/tmp", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    return testbed_fd, tmp_fd


DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"}


def mount_dev(dev: Path) -> None:
    """In the factory's base namespace: the /dev every sandbox gets, instead of bwrap's `--dev` (a
    tmpfs of its own, writable and as large as half the host's memory: `/dev/x` and `/dev/shm/*`
    escaped max_write_bytes, and without cgroups any limit). A tmpfs holding the usual device nodes
    (made with the host's device numbers and modes) and empty `pts` and `shm` mount points, its superblock then
    made read-only. Each sandbox adds its own devpts and /dev/shm (`mount_sandbox_dev`); bwrap
    binds the tree at /dev (`--dev-bind`, its other binds are nodev)."""
    linux.mount("patchgym-dev", str(dev), "tmpfs", linux.MS_NOSUID, "size=64k,nr_inodes=64,mode=0755")
    for name in DEVICES:
        # Nodes of the host's devices rather than binds of them: the same files to open, and no
        # mount for every bwrap start to copy and remount (six fewer per command).
        host = os.stat(f"/dev/{name}")
        os.mknod(dev / name, stat.S_IFCHR | stat.S_IMODE(host.st_mode), host.st_rdev)
        os.chmod(dev / name, stat.S_IMODE(host.st_mode))  # mknod's mode went through the umask
    for name, target in DEV_LINKS.items():
        os.symlink(target, dev / name)
    for sub in ("pts", "shm"):
        (dev / sub).mkdir()
    linux.mount(None, str(dev), None, linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID, "size=64k,nr_inodes=64,mode=0755")


def mount_sandbox_dev(dev: Path, shm: Path) -> None:
    """In a sandbox's namespace: a devpts instance of its own (no other sandbox's ptys) and
    /dev/shm on the sandbox's write-limited tmpfs."""
    linux.mount("devpts", str(dev / "pts"), "devpts", linux.MS_NOSUID | linux.MS_NOEXEC,
                "newinstance,ptmxmode=0666,mode=0620")
    linux.mount(str(shm), str(dev / "shm"), None, linux.MS_BIND)


def bind_readonly(source: str, target: str) -> None:
    linux.mount(source, target, None, linux.MS_BIND | linux.MS_REC)
    linux.mount(None, target, None, linux.MS_BIND | linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV)

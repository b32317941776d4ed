"""Who owns a local sandbox, and removing what owners that died left behind.

Names carry their owner: a factory's state directory is `f-<pid>-<start time>-<n>` (with
`owner.json` repeating pid and start time), a sandbox's cgroups are `sb-<pid>-<start time>-<n>`.
The start time, in clock ticks since boot, tells a live owner from a later process that reused its
pid. Mounts need no record: they live in mount namespaces held by the owner, which the kernel frees
when the owner dies (see mountns.py); sandbox processes die with it (bwrap --die-with-parent).

`reap()` runs when a factory starts: for every state directory and cgroup whose owner is dead it
kills the processes in the cgroups, removes the cgroups, detaches any mount found under the
directory (defensive: mounts are never made in the host namespace), and deletes the directory. A
directory is claimed by renaming it first, so two factories starting at once never fight over it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from patchgym.harness.sandbox import linux
from patchgym.harness.sandbox.cgroups import CgroupManager, SandboxCgroups

NAME = re.compile(r"^(?:sb|f)-(\d+)-(\d+)-(\d+)$")
CLAIMED = re.compile(r"^\.reap-((?:sb|f)-\d+-\d+-\d+)-(\d+)-(\d+)$")
OWNER_FILE = "owner.json"
_ME: "Owner | None" = None


@dataclass(frozen=True)
class Owner:
    pid: int
    start_time: int

    @classmethod
    def me(cls) -> "Owner":
        """This process (looked up once per process: a forked child gets its own)."""
        global _ME
        pid = os.getpid()
        if _ME is None or _ME.pid != pid:
            start = linux.process_start_time(pid)
            assert start is not None
            _ME = cls(pid, start)
        return _ME

    def alive(self) -> bool:
        return linux.process_alive(self.pid, self.start_time)


def sandbox_name(owner: Owner, seq: int) -> str:
    return f"sb-{owner.pid}-{owner.start_time}-{seq}"


def factory_dir_name(owner: Owner, seq: int) -> str:
    return f"f-{owner.pid}-{owner.start_time}-{seq}"


def owner_of(name: str) -> Owner | None:
    match = NAME.match(name)
    return Owner(int(match.group(1)), int(match.group(2))) if match else None


def write_record(state_dir: Path, owner: Owner, cgroup_paths: list[str] | None = None) -> None:
    record = {"pid": owner.pid, "start_time": owner.start_time, "cgroups": cgroup_paths or [], "name": state_dir.name}
    tmp = state_dir / (OWNER_FILE + ".tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(state_dir / OWNER_FILE)


def dead_names(names: list[str]) -> list[str]:
    """The sandbox names among `names` whose owner is no longer running."""
    dead = []
    for name in names:
        owner = owner_of(name)
        if owner is not None and not owner.alive():
            dead.append(name)
    return dead


def _remove_dir(path: Path, cgroups: CgroupManager) -> None:
    try:
        record = json.loads((path / OWNER_FILE).read_text())
        paths = [Path(p) for p in record.get("cgroups", [])]
    except (OSError, ValueError):
        paths = []
    if paths:
        SandboxCgroups(cgroups.version, [p for p in paths if p.is_dir()]).remove()
    for point in linux.mounts_under(str(path)):
        try:
            linux.umount(point)
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)


def reap(state_root: Path, cgroups: CgroupManager) -> list[str]:
    """Remove everything that sandboxes of dead owners left. Returns the names removed."""
    reaped: list[str] = []
    me = Owner.me()
    try:
        entries = sorted(os.listdir(state_root))
    except FileNotFoundError:
        entries = []
    for entry in entries:
        claimed = CLAIMED.match(entry)
        if claimed:  # a reaper that died halfway: finish its work if it is gone
            if not Owner(int(claimed.group(2)), int(claimed.group(3))).alive():
                _remove_dir(state_root / entry, cgroups)
                reaped.append(claimed.group(1))
            continue
        if entry not in dead_names([entry]):
            continue
        target = state_root / f".reap-{entry}-{me.pid}-{me.start_time}"
        try:
            os.rename(state_root / entry, target)
        except OSError:
            continue  # another factory claimed it first
        _remove_dir(target, cgroups)
        reaped.append(entry)
    if cgroups.version != "none":
        for name in dead_names(cgroups.existing()):
            try:
                cgroups.group(name).remove()
            except OSError:
                # (EBUSY: a stopped process of the dead owner's still in it; a later reap takes it.
                # Why not raise: a factory's start failed on another session's leftover, fp51, stop 51)
                continue
            if name not in reaped:
                reaped.append(name)
    return reaped

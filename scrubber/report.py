"""What `check` reports: leaks (channel + detail) and the verdict over a repository."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# Channels, in the order the CLI prints them.
CHANNELS = (
    "HEAD",
    "branches",
    "tags",
    "remotes",
    "notes",
    "replace",
    "original",
    "stash",
    "bisect",
    "refs",
    "reflogs",
    "head-files",
    "state",
    "worktrees",
    "hooks",
    "rerere",
    "config",
    "alternates",
    "grafts",
    "shallow",
    "objects",
    "commit-graph",
    "multi-pack-index",
    "post-image",
    "index",
    "worktree",
    "modules",
    "unknown",
)


@dataclass(frozen=True)
class Leak:
    """One way something not in base's past survives. `channel` is one of CHANNELS."""

    channel: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.channel}] {self.detail}"


@dataclass
class CheckResult:
    """The verdict of `check`. `base_commit` is the commit checked against: base itself, or the
    squash commit whose `Squashed-from` trailer names base (then `squashed_from` is base)."""

    repo: Path
    base_commit: str
    squashed_from: str | None = None
    leaks: list[Leak] = field(default_factory=list)
    objects_checked: int = 0
    refs_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.leaks

    def channels(self) -> Counter[str]:
        return Counter(leak.channel for leak in self.leaks)

    def summary(self) -> str:
        base = self.base_commit[:12]
        if self.squashed_from:
            base += f" (squash of {self.squashed_from[:12]})"
        if self.ok:
            return (
                f"clean: {self.objects_checked} objects and {self.refs_checked} refs checked; "
                f"nothing in {self.repo} is outside the past of {base}"
            )
        per_channel = ", ".join(f"{channel}: {count}" for channel, count in sorted(self.channels().items()))
        return f"LEAKED: {len(self.leaks)} leaks in {self.repo} against {base} ({per_channel})"

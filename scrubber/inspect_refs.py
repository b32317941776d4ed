"""Inspecting refs, HEAD, reflogs and the shallow file.

Only one branch (refs/heads/*, the one HEAD names) pointing at base is allowed; every other ref
is a leak, named by its namespace (tags, remotes, notes, replace, original, stash, bisect, ...),
and so is a second branch at base (its name is free text). Loose ref files and
packed-refs lines are read from disk (a ref git would skip for a bad name still counts), and
`git for-each-ref` is consulted too. A reflog may only mention base, its ancestors or the null id,
and its messages must be ones git writes for that history (a commit entry quotes a known subject).
"""

from __future__ import annotations

import re
from pathlib import Path

from patchgym.scrubber.facts import RepoFacts
from patchgym.scrubber.git import run_git
from patchgym.scrubber.report import Leak

_NAMESPACES = {
    "refs/heads/": "branches",
    "refs/tags/": "tags",
    "refs/remotes/": "remotes",
    "refs/prefetch/": "remotes",
    "refs/notes/": "notes",
    "refs/replace/": "replace",
    "refs/original/": "original",
    "refs/stash": "stash",
    "refs/bisect/": "bisect",
}


def ref_channel(refname: str) -> str:
    for prefix, channel in _NAMESPACES.items():
        if refname.startswith(prefix):
            return channel
    return "refs"


class RefInspection:
    def __init__(self, facts: RepoFacts) -> None:
        self.facts = facts
        self.leaks: list[Leak] = []
        self.refs_seen: set[str] = set()
        self.allowed_refs: set[str] = set()

    def judge_ref(self, refname: str, value: str, where: str) -> None:
        self.refs_seen.add(refname)
        if value.startswith("ref: "):
            target = value[5:].strip()
            self.leaks.append(Leak(ref_channel(refname), f"symbolic ref {refname} -> {target} ({where})"))
            return
        oid = value.strip()
        if refname.startswith("refs/heads/") and oid == self.facts.base:
            self.allowed_refs.add(refname)
            return
        what = "base" if oid == self.facts.base else self._describe(oid)
        self.leaks.append(Leak(ref_channel(refname), f"{refname} points at {what} ({where})"))

    def _describe(self, oid: str) -> str:
        kind = self.facts.types.get(oid)
        if kind is None:
            return f"{oid} (not in the store)"
        if oid in self.facts.allowed_commits:
            return f"{oid}, an ancestor of base"
        return f"{kind} {oid}"


def _loose_refs(refs_dir: Path, git_dir: Path) -> list[tuple[str, str, Path]]:
    found = []
    if not refs_dir.is_dir():
        return found
    for path in sorted(refs_dir.rglob("*")):
        if path.is_file() or path.is_symlink():
            refname = path.relative_to(git_dir).as_posix()
            try:
                value = path.read_text(errors="replace").strip()
            except OSError as exc:
                value = f"<unreadable: {exc}>"
            found.append((refname, value, path))
    return found


def _packed_refs(path: Path) -> list[tuple[str, str, int]]:
    entries = []
    if not path.is_file():
        return entries
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        if number == 1 and re.fullmatch(r"# pack-refs with:( (peeled|fully-peeled|sorted))* ?", line):
            continue
        if not line.strip() or line.startswith("#"):
            entries.append(("#comment", line, number))  # git refuses the file; the text is readable
            continue
        if line.startswith("^"):
            entries.append(("^peeled", line[1:].strip(), number))
            continue
        oid, _, refname = line.partition(" ")
        entries.append((refname.strip(), oid.strip(), number))
    return entries


def inspect_refs(facts: RepoFacts) -> tuple[list[Leak], int]:
    """Leaks among refs, packed refs, HEAD, reflogs and shallow; and how many refs were checked."""
    inspection = RefInspection(facts)
    git_dirs = [facts.paths.common_dir]
    if facts.paths.git_dir != facts.paths.common_dir:
        git_dirs.append(facts.paths.git_dir)
    for git_dir in git_dirs:
        for refname, value, path in _loose_refs(git_dir / "refs", git_dir):
            inspection.judge_ref(refname, value, f"loose ref file {path}")
    packed = facts.paths.common_dir / "packed-refs"
    last_ref = ""
    for refname, oid, number in _packed_refs(packed):
        if refname == "#comment":
            inspection.leaks.append(Leak("refs", f"packed-refs line {number} is not a ref: {oid[:80]!r}"))
            continue
        if refname == "^peeled":
            if oid not in facts.reachable:
                inspection.leaks.append(
                    Leak(ref_channel(last_ref), f"{last_ref} peels to {oid} (packed-refs line {number})")
                )
            continue
        last_ref = refname
        inspection.judge_ref(refname, oid, f"packed-refs line {number}")
    listing = run_git(["for-each-ref", "--format=%(objectname) %(refname)"], cwd=facts.cwd, check=False)
    for line in listing.stdout.decode(errors="replace").splitlines():
        oid, _, refname = line.partition(" ")
        if refname not in inspection.refs_seen:
            inspection.judge_ref(refname, oid, "listed by git for-each-ref")
    leaks = inspection.leaks
    leaks += _inspect_head(facts, inspection.allowed_refs)
    leaks += _one_branch_only(facts, inspection.allowed_refs)
    leaks += _inspect_reflogs(facts, git_dirs, inspection.allowed_refs)
    leaks += _inspect_shallow(facts)
    return leaks, len(inspection.refs_seen)


def _one_branch_only(facts: RepoFacts, allowed_refs: set[str]) -> list[Leak]:
    """Branches at base beyond one: they add nothing but their names, which are free text. The
    branch HEAD names is the one kept (else the first by name); the others are reported and
    dropped from the allowed set, so their reflogs are reported too."""
    head = facts.paths.git_dir / "HEAD"
    value = head.read_text(errors="replace").strip() if head.is_file() else ""
    target = value[5:].strip() if value.startswith("ref: ") else ""
    keep = target if target in allowed_refs else min(allowed_refs, default="")
    extra = sorted(allowed_refs - {keep})
    allowed_refs.intersection_update({keep})
    return [Leak("branches", f"{name} is a second branch at base (only its name is new)") for name in extra]


def _inspect_head(facts: RepoFacts, allowed_refs: set[str]) -> list[Leak]:
    head = facts.paths.git_dir / "HEAD"
    if not head.is_file():
        return [Leak("HEAD", f"{head} is missing")]
    value = head.read_text(errors="replace").strip()
    if value.startswith("ref: "):
        target = value[5:].strip()
        if target in allowed_refs:
            return []
        return [Leak("HEAD", f"HEAD -> {target}, which is not a branch at base")]
    if value == facts.base:
        return []
    return [Leak("HEAD", f"HEAD is detached at {value}, not at base")]


def _inspect_reflogs(facts: RepoFacts, git_dirs: list[Path], allowed_refs: set[str]) -> list[Leak]:
    leaks = []
    allowed_names = allowed_refs | {"HEAD"}
    permitted = facts.allowed_commits | {facts.null_oid}
    subjects = _KnownSubjects(facts)
    for git_dir in git_dirs:
        logs = git_dir / "logs"
        if not logs.exists():
            continue
        for path in sorted(logs.rglob("*")):
            if not path.is_file():
                continue
            refname = path.relative_to(logs).as_posix()
            if refname not in allowed_names:
                leaks.append(Leak("reflogs", f"reflog {path} of {refname}, which is not an allowed ref"))
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
                old, _, rest = line.partition(" ")
                new = rest.split(" ", 1)[0]
                strangers = [oid for oid in (old, new) if oid not in permitted]
                if strangers:
                    leaks.append(
                        Leak("reflogs", f"reflog {path} line {number} mentions {', '.join(strangers)}")
                    )
                elif not subjects.plausible(rest.partition("\t")[2]):
                    message = rest.partition("\t")[2][:80]
                    leaks.append(Leak("reflogs", f"reflog {path} line {number} says {message!r}, not base's history"))
    return leaks


# Reflog messages git writes that carry no text of their own (besides ref names and paths).
_PLAIN_REFLOG = re.compile(
    r"^(|branch: Created from \S+|branch: Reset to \S+|clone: from \S+|checkout: moving from \S+ to \S+"
    r"|reset: moving to \S+|update-ref|push|update by push|initial pull|fetch: fast-forward)$"
)
_COMMIT_REFLOG = re.compile(r"^commit(?: \((?:initial|amend|merge)\))?: (.*)$")


class _KnownSubjects:
    """Whether a reflog message is one git writes for base's history: a fixed form, or a commit
    entry whose subject is that of base or an ancestor (any other text may come from the future)."""

    def __init__(self, facts: RepoFacts) -> None:
        self.facts = facts
        self.subjects: set[str] | None = None

    def plausible(self, message: str) -> bool:
        message = message.strip()
        if _PLAIN_REFLOG.match(message):
            return True
        commit = _COMMIT_REFLOG.match(message)
        if not commit:
            return False
        if self.subjects is None:
            log = run_git(["log", "--format=%s%x00%B%x00", self.facts.base], cwd=self.facts.cwd).stdout
            fields = log.decode(errors="replace").split("\0")
            self.subjects = {field.strip().split("\n", 1)[0].strip() for field in fields}
        return commit.group(1).strip() in self.subjects


def _inspect_shallow(facts: RepoFacts) -> list[Leak]:
    shallow = facts.paths.common_dir / "shallow"
    if not shallow.is_file():
        return []
    return [
        Leak("shallow", f"{shallow} names {oid}, which is neither base nor an ancestor")
        for oid in shallow.read_text(errors="replace").split()
        if oid not in facts.allowed_commits
    ]

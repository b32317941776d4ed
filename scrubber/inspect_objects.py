"""Inspecting the object store: every object must be reachable from base.

Git's own listing (`facts.types`) is checked against the reachable set, and the store's files
are walked too: loose objects, packs and their indexes (a pack git ignores for lack of an index
is still a leak; every pack is verified to parse as exactly its indexed objects), alternates,
commit-graph and multi-pack-index files, quarantine leftovers.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from pathlib import Path

from patchgym.scrubber.binformats import (
    FormatError,
    commit_graph_ids,
    multi_pack_index_ids,
    pack_index_ids,
    pack_object_count,
)
from patchgym.scrubber.facts import RepoFacts
from patchgym.scrubber.git import run_git
from patchgym.scrubber.report import Leak

_PACK_FILE = re.compile(r"^pack-[0-9a-f]+\.(pack|idx|rev|bitmap|keep|promisor|mtimes)$")
_MIDX_FILE = re.compile(r"^multi-pack-index(-[0-9a-f]+\.(bitmap|rev))?$")
_HEX_TOKEN = re.compile(r"\b[0-9a-f]{40,64}\b")
# What git itself writes into a .keep file (fetch and receive-pack; `git index-pack --keep`).
_KEEP_TEXT = re.compile(r"^((fetch|receive|index)-pack \d+ on \S*)?\n?$")
_PACKS_LINE = re.compile(r"^(P pack-[0-9a-f]+\.pack)?$")


def _loose_object_problem(path: Path, oid: str, hash_len: int) -> str:
    """Why the loose object file PATH is not exactly one zlib stream of the object named OID
    (git stops reading at the end of the stream and rarely checks the hash), or ''."""
    try:
        stream = zlib.decompressobj()
        raw = stream.decompress(path.read_bytes())
    except (zlib.error, OSError) as exc:
        return f"cannot be inflated: {exc}"
    if not stream.eof:
        return "ends inside its zlib stream"
    if stream.unused_data:
        return f"has {len(stream.unused_data)} bytes after its zlib stream"
    header, _, body = raw.partition(b"\0")
    size = header.split(b" ")[-1]
    if not size.isdigit() or int(size) != len(body):
        return "has a header that does not match its content"
    digest = hashlib.sha256(raw) if hash_len == 32 else hashlib.sha1(raw)
    if digest.hexdigest() != oid:
        return f"holds content whose id is {digest.hexdigest()}, not its name"
    return ""


def _describe(facts: RepoFacts, oid: str) -> str:
    kind = facts.types.get(oid, "object")
    if kind == "commit":
        return f"commit {oid} is neither base nor an ancestor of base"
    return f"{kind} {oid} is not reachable from base"


class _StoreWalk:
    """Walks one objects/ directory (the repository's, or an alternate), collecting leaks."""

    def __init__(self, facts: RepoFacts, objects_dir: Path, label: str) -> None:
        self.facts = facts
        self.objects_dir = objects_dir
        self.label = label
        self.leaks: list[Leak] = []
        self.located: dict[str, str] = {}
        self.alternates: list[Path] = []

    def leak(self, channel: str, detail: str) -> None:
        self.leaks.append(Leak(channel, f"{detail} ({self.label})" if self.label else detail))

    def run(self) -> None:
        if not self.objects_dir.is_dir():
            self.leak("objects", f"object directory {self.objects_dir} is missing")
            return
        for entry in sorted(self.objects_dir.iterdir()):
            name = entry.name
            if re.fullmatch(r"[0-9a-f]{2}", name) and entry.is_dir():
                self._loose(entry)
            elif name == "pack" and entry.is_dir():
                self._packs(entry)
            elif name == "info" and entry.is_dir():
                self._info(entry)
            else:
                self.leak("objects", f"unexpected entry {entry} in the object store")

    def _loose(self, directory: Path) -> None:
        width = self.facts.hash_len * 2 - 2
        for entry in directory.iterdir():
            if entry.is_file() and re.fullmatch(rf"[0-9a-f]{{{width}}}", entry.name):
                oid = directory.name + entry.name
                self.located.setdefault(oid, f"loose in {directory.parent}")
                if oid not in self.facts.types:
                    self.leak("objects", f"loose object file {entry} is not readable as an object")
                elif problem := _loose_object_problem(entry, oid, self.facts.hash_len):
                    self.leak("objects", f"loose object file {entry} {problem}")
            else:
                self.leak("objects", f"unexpected file {entry} in the object store (not a loose object)")

    def _packs(self, directory: Path) -> None:
        names = {entry.name for entry in directory.iterdir()}
        for name in sorted(names):
            path = directory / name
            if _MIDX_FILE.match(name):
                if name == "multi-pack-index":
                    self._multi_pack_index(path)
                elif "multi-pack-index" not in names:
                    self.leak("objects", f"{path} belongs to no multi-pack-index (it may hold anything)")
                continue
            if not _PACK_FILE.match(name) or not path.is_file():
                self.leak("objects", f"unexpected file {path} in the pack directory (may hold objects)")
                continue
            stem, suffix = name.rsplit(".", 1)
            if suffix not in ("pack", "idx") and f"{stem}.pack" not in names:
                self.leak("objects", f"{path} belongs to no pack (it may hold anything)")
                continue
            if suffix == "keep" and not _KEEP_TEXT.match(path.read_text(errors="replace")):
                self.leak("objects", f"{path} holds text git does not write there")
            if suffix in ("rev", "mtimes") and f"{stem}.idx" in names:
                self._fixed_size_side_file(path, directory / f"{stem}.idx")
            if suffix == "pack":
                if f"{stem}.idx" not in names:
                    self.leak("objects", f"pack {path} has no index: git ignores it, its objects are unverified")
                    continue
                self._pack(path, directory / f"{stem}.idx")
            elif suffix == "idx" and f"{stem}.pack" not in names:
                self._listed_ids(path, "objects", "index without a pack lists")
            elif suffix == "promisor":
                self._promisor(path)

    def _pack(self, pack: Path, index: Path) -> None:
        try:
            ids = pack_index_ids(index, self.facts.hash_len)
            declared = pack_object_count(pack)
        except (FormatError, OSError) as exc:
            self.leak("objects", f"pack {pack} cannot be read: {exc}")
            return
        if declared != len(ids):
            self.leak("objects", f"pack {pack} declares {declared} objects but its index lists {len(ids)}")
        # git reads a pack through its index only: bytes no object owns (between objects, or
        # before the trailer with both checksums recomputed) are found only by parsing it whole.
        verify = run_git(["verify-pack", str(index)], cwd=self.objects_dir, check=False)
        if verify.returncode != 0:
            detail = verify.stderr.decode(errors="replace").strip().splitlines()
            self.leak("objects", f"pack {pack} does not parse as exactly its objects: {detail[-1] if detail else ''}")
        for oid in ids:
            self.located.setdefault(oid, f"in {pack}")
            if oid not in self.facts.types:
                self.leak("objects", f"object {oid} listed by {index.name} cannot be read")

    def _fixed_size_side_file(self, path: Path, index: Path) -> None:
        """A .rev or .mtimes file is a 12-byte header, 4 bytes per object and two checksums."""
        try:
            count = len(pack_index_ids(index, self.facts.hash_len))
        except (FormatError, OSError):
            return  # the pack itself is reported
        expected = 12 + 4 * count + 2 * self.facts.hash_len
        size = path.stat().st_size
        if size != expected:
            self.leak("objects", f"{path} is {size} bytes, not the {expected} its {count} objects take")

    def _listed_ids(self, index: Path, channel: str, what: str) -> None:
        try:
            ids = pack_index_ids(index, self.facts.hash_len)
        except (FormatError, OSError) as exc:
            self.leak(channel, f"{index} cannot be read: {exc}")
            return
        for oid in ids:
            if oid not in self.facts.reachable:
                self.leak(channel, f"{index} ({what}) {oid}, which is not reachable from base")

    def _promisor(self, path: Path) -> None:
        for oid in _HEX_TOKEN.findall(path.read_text(errors="replace")):
            if oid not in self.facts.reachable:
                self.leak("objects", f"promisor file {path} names {oid}, which is not reachable from base")

    def _multi_pack_index(self, path: Path) -> None:
        try:
            ids, _packs = multi_pack_index_ids(path)
        except (FormatError, OSError) as exc:
            self.leak("multi-pack-index", f"{path} cannot be read: {exc}")
            return
        for oid in ids:
            if oid not in self.facts.reachable:
                self.leak("multi-pack-index", f"{path} lists {_describe(self.facts, oid)}")

    def _commit_graph(self, path: Path) -> None:
        try:
            ids = commit_graph_ids(path)
        except (FormatError, OSError) as exc:
            self.leak("commit-graph", f"{path} cannot be read: {exc}")
            return
        for oid in ids:
            if not self.facts.is_allowed_commit(oid):
                self.leak("commit-graph", f"{path} lists commit {oid}, which is neither base nor an ancestor")

    def _commit_graph_chain(self, chain: Path) -> None:
        """The chain names its layers, one hash a line; anything else in it is text."""
        for line in chain.read_text(errors="replace").splitlines():
            if not (re.fullmatch(r"[0-9a-f]{40,64}", line) and (chain.parent / f"graph-{line}.graph").is_file()):
                self.leak("commit-graph", f"{chain} has a line that names no layer: {line[:80]!r}")

    def _info(self, directory: Path) -> None:
        for entry in sorted(directory.iterdir()):
            name = entry.name
            if name == "packs" and entry.is_file():
                odd = [line for line in entry.read_text(errors="replace").splitlines() if not _PACKS_LINE.match(line)]
                if odd:
                    self.leak("objects", f"{entry} holds lines that name no pack: {odd[0][:80]!r}")
                continue
            if name == "commit-graph" and entry.is_file():
                self._commit_graph(entry)
            elif name == "commit-graphs" and entry.is_dir():
                for layer in sorted(entry.iterdir()):
                    if layer.suffix == ".graph":
                        self._commit_graph(layer)
                    elif layer.name == "commit-graph-chain" and layer.is_file():
                        self._commit_graph_chain(layer)
                    else:
                        self.leak("commit-graph", f"unexpected file {layer}")
            elif name in ("alternates", "http-alternates") and entry.is_file():
                self._alternates(entry)
            else:
                self.leak("objects", f"unexpected entry {entry} in the object store")

    def _alternates(self, path: Path) -> None:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
        lines = [line for line in lines if line and not line.startswith("#")]
        self.leak("alternates", f"{path} borrows objects from {', '.join(lines) or 'nothing'}")
        if path.name == "alternates":
            for line in lines:
                target = Path(line)
                self.alternates.append(target if target.is_absolute() else (self.objects_dir / target))


def inspect_objects(facts: RepoFacts) -> list[Leak]:
    """Leaks in the object store: unreachable objects wherever they live, and stray files."""
    objects_dir = facts.paths.common_dir / "objects"
    walks = [_StoreWalk(facts, objects_dir, "")]
    walks[0].run()
    seen = {objects_dir.resolve()}
    pending = list(walks[0].alternates)
    while pending:  # alternates may chain; each store is walked once
        alternate = pending.pop()
        if alternate.resolve() in seen:
            continue
        seen.add(alternate.resolve())
        walk = _StoreWalk(facts, alternate, f"alternate {alternate}")
        walk.run()
        walks.append(walk)
        pending.extend(walk.alternates)
    leaks = [leak for walk in walks for leak in walk.leaks]
    located: dict[str, str] = {}
    for walk in reversed(walks):
        located.update(walk.located)
    for oid in sorted(set(facts.types) - facts.reachable):
        where = located.get(oid, "in the store")
        leaks.append(Leak("objects", f"{_describe(facts, oid)} ({where})"))
    return leaks

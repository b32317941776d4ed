"""Reading the extensions of a git index file (`.git/index`, `sharedindex.*`) directly.

git skips any optional extension it does not know (a signature starting A-Z), so such an
extension, or bytes between the last extension and the trailing checksum, can carry anything
while `git status` and `git ls-files` look normal. Entries are walked only to find where the
extensions begin (versions 2, 3 and 4 of the format).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from patchgym.scrubber.binformats import FormatError

# The extensions git writes: cache tree, resolve undo, split-index link, untracked cache,
# fsmonitor, end of index entry, index entry offset table, sparse directory entries.
KNOWN_EXTENSIONS = frozenset({b"TREE", b"REUC", b"link", b"UNTR", b"FSMN", b"EOIE", b"IEOT", b"sdir"})
_STAT_BYTES = 40  # ctime, mtime, dev, ino, mode, uid, gid, size
_EXTENDED = 0x4000
_NAME_MASK = 0x0FFF


@dataclass(frozen=True)
class IndexLayout:
    version: int
    entries: int
    extensions: list[tuple[str, int]]  # (signature, payload size), in file order
    stray_bytes: int  # bytes after the last extension that are not the trailing checksum


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """git's offset varint (used by index v4 path compression): (value, next position)."""
    if position >= len(data):
        raise FormatError("truncated varint")
    byte = data[position]
    value = byte & 0x7F
    position += 1
    while byte & 0x80:
        if position >= len(data):
            raise FormatError("truncated varint")
        byte = data[position]
        value = ((value + 1) << 7) | (byte & 0x7F)
        position += 1
    return value, position


def read_index_layout(path: Path, hash_len: int) -> IndexLayout:
    """The version, entry count and extensions of the index file at PATH."""
    data = path.read_bytes()
    if len(data) < 12 + hash_len or data[:4] != b"DIRC":
        raise FormatError("not an index file")
    version, count = struct.unpack_from(">II", data, 4)
    if version not in (2, 3, 4):
        raise FormatError(f"unknown index version {version}")
    end = len(data) - hash_len
    position = 12
    for _ in range(count):
        start = position
        flags_at = start + _STAT_BYTES + hash_len
        if flags_at + 2 > end:
            raise FormatError("truncated index entry")
        (flags,) = struct.unpack_from(">H", data, flags_at)
        name_at = flags_at + 2 + (2 if flags & _EXTENDED and version >= 3 else 0)
        if version == 4:
            _strip, name_at = _varint(data, name_at)
            terminator = data.find(b"\0", name_at, end)
            if terminator < 0:
                raise FormatError("unterminated index entry name")
            position = terminator + 1
            continue
        length = flags & _NAME_MASK
        if length == _NAME_MASK:
            terminator = data.find(b"\0", name_at, end)
            if terminator < 0:
                raise FormatError("unterminated index entry name")
            length = terminator - name_at
        position = start + ((name_at - start + length + 8) & ~7)
        if position > end:
            raise FormatError("truncated index entry")
    extensions: list[tuple[str, int]] = []
    while position + 8 <= end:
        signature, size = struct.unpack_from(">4sI", data, position)
        if position + 8 + size > end:
            break
        extensions.append((signature.decode("latin-1"), size))
        position += 8 + size
    return IndexLayout(version, count, extensions, end - position)

"""Reading the object ids git's binary index files list, without trusting git to enumerate them.

Pack indexes (`.idx`, versions 1 and 2), pack headers (`PACK` object counts), commit-graph files
(`CGPH`) and multi-pack-index files (`MIDX`) are parsed directly, so a commit-graph that still
names a future commit, or a pack whose index does not cover it, is seen even when git ignores it.
"""

from __future__ import annotations

import struct
from pathlib import Path

_IDX_V2_MAGIC = b"\xfftOc"
_HASH_LENGTHS = {1: 20, 2: 32}


class FormatError(ValueError):
    """A file does not have the layout its name promises."""


def _fanout_total(data: bytes, offset: int) -> int:
    if len(data) < offset + 1024:
        raise FormatError("truncated fanout table")
    return struct.unpack_from(">I", data, offset + 255 * 4)[0]


def pack_index_ids(path: Path, hash_len: int) -> list[str]:
    """Object ids listed by a pack index (.idx), version 1 or 2."""
    data = path.read_bytes()
    if data[:4] == _IDX_V2_MAGIC:
        version = struct.unpack_from(">I", data, 4)[0]
        if version != 2:
            raise FormatError(f"unknown pack index version {version}")
        count = _fanout_total(data, 8)
        start = 8 + 1024
        end = start + count * hash_len
        if len(data) < end:
            raise FormatError("truncated object id table")
        return [data[i : i + hash_len].hex() for i in range(start, end, hash_len)]
    count = _fanout_total(data, 0)
    entry = 4 + hash_len
    start = 1024
    if len(data) < start + count * entry:
        raise FormatError("truncated version 1 index")
    return [data[i + 4 : i + entry].hex() for i in range(start, start + count * entry, entry)]


def pack_object_count(path: Path) -> int:
    """The object count a packfile's header declares."""
    with path.open("rb") as handle:
        header = handle.read(12)
    if len(header) < 12 or header[:4] != b"PACK":
        raise FormatError("not a packfile")
    return struct.unpack_from(">I", header, 8)[0]


# The chunks git writes (older and newer generation-data chunks included); git skips others.
KNOWN_CHUNKS = {
    b"CGPH": frozenset(
        {b"OIDF", b"OIDL", b"CDAT", b"GDAT", b"GDOV", b"GDA2", b"GDO2", b"EDGE", b"BIDX", b"BDAT", b"BASE"}
    ),
    b"MIDX": frozenset({b"PNAM", b"OIDF", b"OIDL", b"OOFF", b"LOFF", b"RIDX", b"BTMP"}),
}


def _chunks(data: bytes, signature: bytes, header_size: int) -> tuple[int, dict[bytes, tuple[int, int]]]:
    """(hash length, {chunk id: (start, end)}) of a chunk-format file (commit-graph, MIDX).
    Raises FormatError for a chunk git does not write or bytes between the last chunk and the
    trailing checksum: git would skip them, so they could carry anything."""
    if data[:4] != signature or len(data) < header_size:
        raise FormatError(f"missing {signature.decode()} signature")
    hash_len = _HASH_LENGTHS.get(data[5])
    if hash_len is None:
        raise FormatError(f"unknown hash version {data[5]}")
    count = data[6]
    table = []
    for index in range(count + 1):
        position = header_size + index * 12
        if len(data) < position + 12:
            raise FormatError("truncated chunk table")
        chunk_id, offset = struct.unpack_from(">4sQ", data, position)
        table.append((chunk_id, offset))
    chunks = {}
    for (chunk_id, start), (_, end) in zip(table, table[1:]):
        if not start <= end <= len(data):
            raise FormatError("chunk offsets out of range")
        if chunk_id not in KNOWN_CHUNKS[signature]:
            raise FormatError(f"chunk {chunk_id!r} is not one git writes")
        chunks[chunk_id] = (start, end)
    if table[-1][1] != len(data) - hash_len:
        raise FormatError(f"{len(data) - hash_len - table[-1][1]} bytes lie between the last chunk and the checksum")
    return hash_len, chunks


def _oid_lookup(data: bytes, hash_len: int, chunks: dict[bytes, tuple[int, int]]) -> list[str]:
    if b"OIDF" not in chunks or b"OIDL" not in chunks:
        raise FormatError("no object id chunks")
    count = _fanout_total(data, chunks[b"OIDF"][0])
    start, end = chunks[b"OIDL"]
    if end - start < count * hash_len:
        raise FormatError("object id chunk shorter than its fanout says")
    return [data[i : i + hash_len].hex() for i in range(start, start + count * hash_len, hash_len)]


def commit_graph_ids(path: Path) -> list[str]:
    """Commit ids listed by a commit-graph file (a single file or one layer of a chain)."""
    data = path.read_bytes()
    hash_len, chunks = _chunks(data, b"CGPH", 8)
    return _oid_lookup(data, hash_len, chunks)


def multi_pack_index_ids(path: Path) -> tuple[list[str], list[str]]:
    """(object ids, pack index names) listed by a multi-pack-index file."""
    data = path.read_bytes()
    hash_len, chunks = _chunks(data, b"MIDX", 12)
    names: list[str] = []
    if b"PNAM" in chunks:
        start, end = chunks[b"PNAM"]
        names = [name.decode(errors="replace") for name in data[start:end].split(b"\0") if name]
    return _oid_lookup(data, hash_len, chunks), names

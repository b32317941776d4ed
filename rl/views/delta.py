"""XOR deltas of a view's encoded bytes against the previous snapshot, one zstd frame a part.

Owns building a delta (`make_delta`) and the byte-plane shuffle both ends use. A part is "same"
(identical bytes: no payload), "xor" (same dtype and shape: the XOR, byte-plane shuffled, then
compressed) or "full" (new or reshaped: its bytes compressed). Each entry records the base's and
the result's sha256. Applying a delta is the reader's (`reader.py`), where the checks live.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import zstandard

from .layout import dtype_of


def shuffle(buf: np.ndarray, itemsize: int) -> np.ndarray:
    """Byte planes (all first bytes, then all second bytes, ...): an XOR of nearby floats has zero
    high bytes, which compress better in one run than interleaved with the noisy low bytes. For a
    576x1536 bf16 weight after an Adam-like step of 1e-5: 0.263 MB against 0.328 MB (zstd 3)."""
    return buf if itemsize == 1 else np.ascontiguousarray(buf.reshape(-1, itemsize).T).reshape(-1)


def unshuffle(buf: np.ndarray, itemsize: int) -> np.ndarray:
    return buf if itemsize == 1 else np.ascontiguousarray(buf.reshape(itemsize, -1).T).reshape(-1)


def make_delta(new: dict[str, np.ndarray], new_meta: dict[str, dict], base: dict[str, np.ndarray],
                base_meta: dict[str, dict], level: int) -> tuple[bytes, list[dict]]:
    """The delta of every stored key against the base: "same", "xor" (same dtype and shape) or "full"."""
    cctx = zstandard.ZstdCompressor(level=level, write_checksum=True)
    frames, entries, offset = [], [], 0
    for key, buf in new.items():
        meta, old = new_meta[key], base_meta.get(key)
        entry = {"key": key, "result_sha256": meta["sha256"], "base_sha256": old["sha256"] if old else None}
        if old and old["sha256"] == meta["sha256"]:
            entry["mode"] = "same"
        else:
            itemsize = dtype_of(meta["dtype"], Path(".")).itemsize
            if old and old["dtype"] == meta["dtype"] and old["shape"] == meta["shape"]:
                entry["mode"], payload = "xor", shuffle(np.bitwise_xor(buf, base[key]), itemsize)
            else:
                entry["mode"], payload = "full", buf
            frame = cctx.compress(payload.tobytes())
            entry.update(offset=offset, length=len(frame), raw_length=int(buf.size), itemsize=itemsize)
            frames.append(frame)
            offset += len(frame)
        entries.append(entry)
    return b"".join(frames), entries

"""Pulling versions of a view: by delta over the held version, or by the full snapshot.

Owns `ViewReader` (which version to pull, the delta chain, applying deltas with every checksum
checked, decoding to tensors) and `load_snapshot` (a version's safetensors file, verified part by
part). Does not cover writing (`publisher.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import safetensors.torch
import zstandard
from patchgym.rl import quant
from safetensors import SafetensorError
from torch import Tensor

from .delta import unshuffle
from .layout import (
    RAW,
    SNAPSHOT,
    Held,
    ViewCorrupt,
    ViewMissing,
    bytes_of,
    dtype_name,
    dtype_of,
    read_latest,
    read_manifest,
    sha,
    tensor_of,
)


def load_snapshot(root: Path, view: str, manifest: dict) -> tuple[Held, int]:
    """A version's encoded bytes from its safetensors file, every part checked against the manifest."""
    path = Path(root) / view / f"v{manifest['version']}" / SNAPSHOT
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        raise ViewMissing(f"snapshot {path} is missing", path) from None
    try:
        tensors = safetensors.torch.load(blob)
    except (SafetensorError, ValueError, RuntimeError) as exc:  # a damaged header or layout
        raise ViewCorrupt(f"{path}: not a readable safetensors file ({exc})", path) from None
    buffers = {}
    for name, entry in manifest["tensors"].items():
        for part, meta in entry["parts"].items():
            key = meta["key"]
            where = f"tensor {name!r} (part {part!r}, stored as {key!r}) in {path}"
            if key not in tensors:
                raise ViewMissing(f"{where} is missing", path, name)
            t = tensors[key]
            if dtype_name(t.dtype) != meta["dtype"] or list(t.shape) != meta["shape"]:
                raise ViewCorrupt(f"{where} is {t.dtype} {list(t.shape)}, the manifest says "
                                  f"{meta['dtype']} {meta['shape']}", path, name)
            buf = bytes_of(t)
            if sha(buf) != meta["sha256"]:
                raise ViewCorrupt(f"{where}: checksum mismatch (the bytes are damaged)", path, name)
            buffers[key] = buf
    return Held(manifest["version"], manifest, buffers), len(blob)


@dataclass(frozen=True)
class PullInfo:
    """How the last pull got its version: "snapshot", "delta" (over `chain`), or "held"."""

    version: int
    source: str
    chain: tuple[int, ...] = ()
    bytes_read: int = 0
    fallback: str | None = None  # why a delta was not used, when one was asked for


class ViewReader:
    """Pulls versions of one view, holding the last one's encoded bytes to apply deltas on.
    One reader per thread (it holds state between pulls)."""

    def __init__(self, root: Path | str, view: str, *, retries: int = 5):
        self.root = Path(root)
        self.view = view
        self.retries = retries
        self._held: Held | None = None
        self._state: dict[str, Tensor] | None = None
        self.last_pull: PullInfo | None = None

    @property
    def version(self) -> int | None:
        """The version held (last pulled), or None."""
        return self._held.version if self._held else None

    def pull(self, version: int | None = None, *, delta: bool = True) -> tuple[dict[str, Tensor], int]:
        """(state dict of dequantized tensors in their published dtypes, version).

        `version=None` pulls what `latest` names (retrying if pruning races the read). A delta is
        applied when the reader holds that version's parent (or an unbroken chain of deltas leads
        from the held version); a missing delta falls back to the snapshot. Any checksum that does
        not match raises ViewCorrupt naming the file and tensor; pass delta=False to skip deltas.
        """
        for attempt in range(self.retries + 1):
            target = read_latest(self.root, self.view) if version is None else version
            try:
                return self._pull(target, delta)
            except ViewMissing:
                if version is not None or attempt == self.retries or read_latest(self.root, self.view) == target:
                    raise
        raise AssertionError("unreachable")

    def _pull(self, version: int, use_delta: bool) -> tuple[dict[str, Tensor], int]:
        if not isinstance(version, int) or version < 0:
            raise ValueError(f"version must be an integer >= 0, got {version!r}")
        if self._held and self._held.version == version and self._state is not None:
            self.last_pull = PullInfo(version, "held")
            return dict(self._state), version
        manifest = read_manifest(self.root, self.view, version)
        fallback = None
        held = None
        if use_delta and self._held is not None:
            chain, fallback = self._chain(manifest)
            if chain:
                held, nbytes = self._apply(chain)
                self.last_pull = PullInfo(version, "delta", tuple(m["version"] for m in chain), nbytes)
        if held is None:
            held, nbytes = load_snapshot(self.root, self.view, manifest)
            self.last_pull = PullInfo(version, "snapshot", (), nbytes, fallback if use_delta else None)
        self._verify_files(manifest)
        self._state = self._decode(held)
        self._held = held
        return dict(self._state), version

    def _chain(self, target: dict) -> tuple[list[dict], str | None]:
        """Manifests from just after the held version up to target, each with its delta file."""
        chain, m = [], target
        while True:
            d = m.get("delta")
            if not d or d.get("parent") is None:
                return [], f"v{m['version']} has no delta"
            folder = self.root / self.view / f"v{m['version']}"
            if not (folder / d["file"]).is_file():
                return [], f"delta file {folder / d['file']} is missing"
            chain.append(m)
            if d["parent"] == self._held.version:
                return chain[::-1], None
            if d["parent"] < self._held.version:
                return [], f"v{m['version']}'s parent v{d['parent']} is older than the held v{self._held.version}"
            try:
                m = read_manifest(self.root, self.view, d["parent"])
            except ViewMissing:
                return [], f"v{d['parent']} on the delta chain is gone"

    def _apply(self, chain: list[dict]) -> tuple[Held, int]:
        held, nbytes = self._held, 0
        for manifest in chain:
            d = manifest["delta"]
            path = self.root / self.view / f"v{manifest['version']}" / d["file"]
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                raise ViewMissing(f"delta {path} vanished while being read", path) from None
            nbytes += len(data)
            dctx = zstandard.ZstdDecompressor()
            owners = {p["key"]: name for name, t in manifest["tensors"].items() for p in t["parts"].values()}
            old_meta, buffers, verified = held.key_meta(), {}, {}
            for e in d["entries"]:
                key = e["key"]
                where = f"tensor {owners.get(key, key)!r} (stored as {key!r}) in {path}"
                if e["base_sha256"] is not None and (key not in held.buffers or old_meta[key]["sha256"] != e["base_sha256"]):
                    raise ViewCorrupt(f"{where}: the delta's base checksum does not match the held v{held.version}", path, owners.get(key, key))
                if e["mode"] == "same":
                    buf = held.buffers[key]
                else:
                    frame = data[e["offset"] : e["offset"] + e["length"]]
                    try:
                        raw = np.frombuffer(dctx.decompress(frame, max_output_size=e["raw_length"]), np.uint8)
                    except zstandard.ZstdError as exc:
                        raise ViewCorrupt(f"{where}: the compressed frame is damaged ({exc})", path, owners.get(key, key)) from None
                    if raw.size != e["raw_length"]:
                        raise ViewCorrupt(f"{where}: {raw.size} bytes after decompression, expected {e['raw_length']}", path, owners.get(key, key))
                    if e["mode"] == "xor":
                        buf = unshuffle(raw, e["itemsize"])
                        buf = np.bitwise_xor(buf, held.buffers[key], out=buf if buf.flags.writeable else None)
                    else:
                        buf = raw
                if e["mode"] != "same" and sha(buf) != e["result_sha256"]:
                    raise ViewCorrupt(f"{where}: the result's checksum does not match the delta's", path, owners.get(key, key))
                buffers[key], verified[key] = buf, e["result_sha256"]
            for name, t in manifest["tensors"].items():
                for meta in t["parts"].values():
                    key = meta["key"]
                    if key not in buffers:
                        raise ViewMissing(f"tensor {name!r} (stored as {key!r}) has no entry in {path}", path, name)
                    if meta["sha256"] != verified[key]:
                        raise ViewCorrupt(f"tensor {name!r} (stored as {key!r}): the delta {path} and the "
                                          f"manifest disagree on its checksum", path, name)
            held = Held(manifest["version"], manifest, buffers)
        return held, nbytes

    def _verify_files(self, manifest: dict) -> None:
        folder = self.root / self.view / f"v{manifest['version']}"
        for name, meta in manifest["files"].items():
            if name == SNAPSHOT:
                continue
            try:
                data = (folder / name).read_bytes()
            except FileNotFoundError:
                raise ViewMissing(f"{folder / name} is missing", folder / name) from None
            if sha(data) != meta["sha256"]:
                raise ViewCorrupt(f"{folder / name}: checksum mismatch", folder / name)

    def _decode(self, held: Held) -> dict[str, Tensor]:
        path = self.root / self.view / f"v{held.version}" / SNAPSHOT
        out = {}
        for name, entry in held.manifest["tensors"].items():
            parts = {part: tensor_of(held.buffers[m["key"]], dtype_of(m["dtype"], path), m["shape"])
                     for part, m in entry["parts"].items()}
            if entry["format"] == RAW:
                out[name] = parts["values"]
                continue
            try:
                out[name] = quant.decode(parts, entry["format"], entry["shape"], dtype_of(entry["dtype"], path))
            except ValueError as exc:
                raise ViewCorrupt(f"tensor {name!r} of {path}: {exc}", path, name) from None
        return out

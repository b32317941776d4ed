"""Versioned weight views: the trainer publishes each number format its fleet serves; samplers pull.

Owns the on-disk form of a view and both ends of it: `ViewPublisher` (encode once, write a
snapshot and a delta, move the view's `latest` pointer, prune) and `ViewReader` (pull a version by
delta or snapshot, verify every checksum, decode). Does not cover telling samplers to pull (the
loop's job), serving HTTP, or several publishers writing one root at once (one trainer publishes).

Layout, one folder per view and version (a view is a name and a `patchgym.rl.quant` format):

    ROOT/<view>/latest                    {"version": N}, replaced atomically (write + rename)
    ROOT/<view>/v<N>/model.safetensors    the encoded parts (codes and scales in storage dtypes)
    ROOT/<view>/v<N>/manifest.json        format, shapes, dtypes, per-part sha256, version, parent
    ROOT/<view>/v<N>/delta-from-v<P>.zst  XOR of every part against v<P>'s, one zstd frame a part
    ROOT/<view>/v<N>/config.json ...      files copied when given

In model.safetensors a tensor's primary part (`values` or `codes`) has the tensor's own name and
its other parts `<name>_<part>` (e.g. `...q_proj.weight_scale`), so the bf16 view is a plain Hugging
Face checkpoint. Tensors the view's selection leaves out (by default embeddings, norms, biases and
anything not 2-D) are stored in `others` (bf16 by default, or "raw": as given), as quantized
checkpoints do. Each tensor is encoded once from the published tensor; a delta is computed on the
encoded bytes, so applying it reproduces the snapshot exactly and nothing is ever re-quantized.

What a reader returns is already in the view's format: a sampler loads it as is and must not pass
it through quantize_dequantize again (that is idempotent for every format but NVFP4, whose block
scales can move on a second pass; see tests/test_quant.py).

A version folder is written under a temporary name and renamed into place, and `latest` moves only
after that, so a reader never sees half a version; views are published one after the other with
no barrier across them. Pruning renames a folder away before deleting it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import safetensors.torch
import torch
import zstandard
from patchgym.rl import quant
from safetensors import SafetensorError
from torch import Tensor

SCHEMA = 1
RAW = "raw"
SNAPSHOT = "model.safetensors"
MANIFEST = "manifest.json"
LATEST = "latest"


class ViewError(Exception):
    """A view cannot be read. `path` is the file at fault, `tensor` the tensor (or None)."""

    def __init__(self, message: str, path: Path | str | None = None, tensor: str | None = None):
        super().__init__(message)
        self.path = Path(path) if path is not None else None
        self.tensor = tensor


class ViewMissing(ViewError):
    """A pointer, version, file or tensor is not there."""


class ViewCorrupt(ViewError):
    """Something is there but its checksum, structure or contents are wrong."""


def default_selection(name: str, tensor: Tensor) -> bool:
    """Quantize 2-D floating weights of linear layers; keep embeddings, the head and norms."""
    lowered = name.lower()
    return (
        tensor.is_floating_point()
        and tensor.dim() == 2
        and name.endswith("weight")
        and not any(word in lowered for word in ("embed", "lm_head", "norm"))
    )


@dataclass(frozen=True)
class ViewSpec:
    """A view: its name (a folder), the format of selected tensors, and the format of the rest."""

    name: str
    format: str
    select: Callable[[str, Tensor], bool] = default_selection
    others: str = "bf16"

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name or self.name.startswith("."):
            raise ValueError(f"view name {self.name!r} must be a plain folder name")
        for what, fmt in (("format", self.format), ("others", self.others)):
            if fmt not in quant.FORMATS and not (what == "others" and fmt == RAW):
                raise ValueError(f"view {self.name!r}: unknown {what} {fmt!r}; known: {', '.join(quant.FORMATS)}"
                                 + (f", {RAW}" if what == "others" else ""))

    def format_of(self, name: str, tensor: Tensor) -> str:
        if not tensor.is_floating_point() or tensor.numel() == 0:
            return RAW
        if self.format in ("bf16", "fp16") and self.others == "bf16":
            return self.format  # a plain-precision view casts everything
        return self.format if self.select(name, tensor) else self.others


def _sha(buf) -> str:
    return hashlib.sha256(memoryview(buf)).hexdigest()


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _dtype(name: str, path: Path) -> torch.dtype:
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype):
        raise ViewCorrupt(f"{path}: unknown dtype {name!r}", path)
    return dtype


def _bytes_of(t: Tensor) -> np.ndarray:
    t = t.detach().contiguous().cpu()
    return t.reshape(-1).view(torch.uint8).numpy() if t.numel() else np.zeros(0, np.uint8)


def _tensor_of(buf: np.ndarray, dtype: torch.dtype, shape: list[int]) -> Tensor:
    if buf.size == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.from_numpy(np.array(buf, dtype=np.uint8, copy=True)).view(dtype).reshape(shape)


def _checksum(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_latest(root: Path | str, view: str) -> int:
    """The version the view's `latest` pointer names (ViewMissing / ViewCorrupt if it cannot)."""
    path = Path(root) / view / LATEST
    try:
        version = json.loads(path.read_text())["version"]
    except FileNotFoundError:
        raise ViewMissing(f"view {view!r} has no latest pointer at {path}: nothing published yet", path) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ViewCorrupt(f"{path}: unreadable latest pointer ({exc})", path) from None
    if not isinstance(version, int) or version < 0:
        raise ViewCorrupt(f"{path}: latest pointer names {version!r}, not a version number", path)
    return version


def list_versions(root: Path | str, view: str) -> list[int]:
    """Published versions of a view on disk, oldest first."""
    folder = Path(root) / view
    found = []
    for p in folder.iterdir() if folder.is_dir() else ():
        if p.name.startswith("v") and p.name[1:].isdigit() and p.is_dir():
            found.append(int(p.name[1:]))
    return sorted(found)


def read_manifest(root: Path | str, view: str, version: int) -> dict:
    """A version's manifest, its own checksum verified."""
    path = Path(root) / view / f"v{version}" / MANIFEST
    try:
        manifest = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise ViewMissing(f"view {view!r} has no version {version} ({path} is missing)", path) from None
    except ValueError as exc:
        raise ViewCorrupt(f"{path}: not valid JSON ({exc})", path) from None
    if not isinstance(manifest, dict) or manifest.pop("checksum", None) != _checksum(manifest):
        raise ViewCorrupt(f"{path}: the manifest's checksum does not match its contents", path)
    if manifest.get("schema") != SCHEMA or manifest.get("version") != version or manifest.get("view") != view:
        raise ViewCorrupt(f"{path}: manifest is for view {manifest.get('view')!r} version "
                          f"{manifest.get('version')!r} (schema {manifest.get('schema')!r})", path)
    return manifest


# --------------------------------------------------------------------------------------- encode


def _encode_view(spec: ViewSpec, state_dict: Mapping[str, Tensor]) -> tuple[dict, dict[str, Tensor]]:
    """(manifest "tensors" section, safetensors key -> stored tensor) for one view."""
    entries: dict[str, dict] = {}
    stored: dict[str, Tensor] = {}
    owner: dict[str, str] = {}
    for name, tensor in state_dict.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"state_dict keys must be non-empty strings, got {name!r}")
        if not isinstance(tensor, Tensor):
            raise TypeError(f"state_dict[{name!r}] is a {type(tensor).__name__}, not a tensor")
        fmt = spec.format_of(name, tensor)
        try:
            parts = {"values": tensor.detach().cpu().clone()} if fmt == RAW else quant.encode(tensor.detach().cpu(), fmt)
        except ValueError as exc:
            raise ValueError(f"view {spec.name!r}, tensor {name!r}: {exc}") from None
        described = {}
        for i, (part, value) in enumerate(parts.items()):
            key = name if i == 0 else f"{name}_{part}"
            if key in owner:
                raise ValueError(f"view {spec.name!r}: stored name {key!r} of tensor {name!r} collides "
                                 f"with one of tensor {owner[key]!r}")
            owner[key] = name
            stored[key] = value.contiguous()
            described[part] = {"key": key, "dtype": _dtype_name(value.dtype), "shape": list(value.shape),
                               "sha256": _sha(_bytes_of(value))}
        entries[name] = {"format": fmt, "dtype": _dtype_name(tensor.dtype), "shape": list(tensor.shape),
                         "parts": described}
    return entries, stored


def _shuffle(buf: np.ndarray, itemsize: int) -> np.ndarray:
    """Byte planes (all first bytes, then all second bytes, ...): an XOR of nearby floats has zero
    high bytes, which compress better in one run than interleaved with the noisy low bytes. For a
    576x1536 bf16 weight after an Adam-like step of 1e-5: 0.263 MB against 0.328 MB (zstd 3)."""
    return buf if itemsize == 1 else np.ascontiguousarray(buf.reshape(-1, itemsize).T).reshape(-1)


def _unshuffle(buf: np.ndarray, itemsize: int) -> np.ndarray:
    return buf if itemsize == 1 else np.ascontiguousarray(buf.reshape(itemsize, -1).T).reshape(-1)


def _make_delta(new: dict[str, np.ndarray], new_meta: dict[str, dict], base: dict[str, np.ndarray],
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
            itemsize = _dtype(meta["dtype"], Path(".")).itemsize
            if old and old["dtype"] == meta["dtype"] and old["shape"] == meta["shape"]:
                entry["mode"], payload = "xor", _shuffle(np.bitwise_xor(buf, base[key]), itemsize)
            else:
                entry["mode"], payload = "full", buf
            frame = cctx.compress(payload.tobytes())
            entry.update(offset=offset, length=len(frame), raw_length=int(buf.size), itemsize=itemsize)
            frames.append(frame)
            offset += len(frame)
        entries.append(entry)
    return b"".join(frames), entries


# -------------------------------------------------------------------------------------- publish


@dataclass
class _Held:
    """The last encoded snapshot of one view: its version, manifest and bytes per stored key."""

    version: int
    manifest: dict
    buffers: dict[str, np.ndarray] = field(default_factory=dict)

    def key_meta(self) -> dict[str, dict]:
        return {p["key"]: p for t in self.manifest["tensors"].values() for p in t["parts"].values()}


class ViewPublisher:
    """Publishes a state dict as every view, version after version (see the module doc).

    `views`: format names (the view is named after its format) or ViewSpec. `keep`: versions kept
    per view (the newest; never the one `latest` names). `files`: paths copied into every version
    (config.json, tokenizer files). `level`: zstd level of the deltas.
    """

    def __init__(self, root: Path | str, views: Iterable[str | ViewSpec], *, keep: int = 3,
                 files: Iterable[Path | str] = (), level: int = 3):
        self.root = Path(root)
        self.specs = [v if isinstance(v, ViewSpec) else ViewSpec(str(v), str(v)) for v in views]
        if not self.specs:
            raise ValueError("ViewPublisher needs at least one view")
        names = [s.name for s in self.specs]
        if len(set(names)) != len(names):
            raise ValueError(f"view names must be unique, got {names}")
        if not isinstance(keep, int) or keep < 1:
            raise ValueError(f"keep must be an integer >= 1, got {keep!r}")
        self.keep = keep
        self.level = level
        self.files = [Path(f) for f in files]
        for f in self.files:
            if not f.is_file():
                raise ValueError(f"file to copy into every view {f} does not exist")
            if f.name in (SNAPSHOT, MANIFEST, LATEST) or f.name.startswith("delta-"):
                raise ValueError(f"file to copy {f} has a name the view layout uses")
        self._held: dict[str, _Held | None] = {}
        self.root.mkdir(parents=True, exist_ok=True)

    def _base(self, spec: ViewSpec) -> _Held | None:
        """The previous encoded snapshot: held from the last publish, else read back from disk."""
        if spec.name not in self._held:
            try:  # verified like any pull, but not decoded: the encoded bytes are all a delta needs
                manifest = read_manifest(self.root, spec.name, read_latest(self.root, spec.name))
                self._held[spec.name] = ViewReader(self.root, spec.name)._load_snapshot(manifest)[0]
            except ViewError:
                self._held[spec.name] = None  # nothing usable published yet: no delta
        return self._held[spec.name]

    def publish(self, state_dict: Mapping[str, Tensor], version: int) -> dict[str, Path]:
        """Write `version` of every view; return each view's version folder."""
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise ValueError(f"version must be an integer >= 0, got {version!r}")
        if not isinstance(state_dict, Mapping) or not state_dict:
            raise ValueError("state_dict must be a non-empty mapping of names to tensors")
        out = {}
        for spec in self.specs:
            out[spec.name] = self._publish_view(spec, state_dict, version)
        return out

    def _publish_view(self, spec: ViewSpec, state_dict: Mapping[str, Tensor], version: int) -> Path:
        folder = self.root / spec.name
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"v{version}"
        base = self._base(spec)
        published = list_versions(self.root, spec.name)
        newest = max([v for v in published] + ([base.version] if base else []), default=-1)
        if version <= newest:
            raise ValueError(f"view {spec.name!r}: version {version} is not newer than {newest}, already published")
        tensors, stored = _encode_view(spec, state_dict)
        buffers = {k: _bytes_of(v) for k, v in stored.items()}
        manifest = {"schema": SCHEMA, "view": spec.name, "format": spec.format, "others": spec.others,
                    "version": version, "parent": base.version if base else None, "created": time.time(),
                    "tensors": tensors, "files": {}, "delta": None}
        tmp = folder / f".tmp-v{version}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            blob = safetensors.torch.save(stored, metadata={"format": "pt", "patchgym_view": spec.name,
                                                            "patchgym_version": str(version)})
            _write(tmp / SNAPSHOT, blob)
            manifest["files"][SNAPSHOT] = {"sha256": _sha(blob), "bytes": len(blob)}
            for f in self.files:
                data = f.read_bytes()
                _write(tmp / f.name, data)
                manifest["files"][f.name] = {"sha256": _sha(data), "bytes": len(data)}
            new_meta = {p["key"]: p for t in tensors.values() for p in t["parts"].values()}
            if base is not None:
                delta, entries = _make_delta(buffers, new_meta, base.buffers, base.key_meta(), self.level)
                name = f"delta-from-v{base.version}.zst"
                _write(tmp / name, delta)
                manifest["delta"] = {"file": name, "parent": base.version, "bytes": len(delta), "entries": entries}
            body = dict(manifest, checksum=_checksum(manifest))
            _write(tmp / MANIFEST, json.dumps(body, indent=1).encode())
            _fsync_dir(tmp)
            os.rename(tmp, final)  # atomic: a reader sees no folder or a whole one
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _fsync_dir(folder)
        pointer = folder / f".latest-{uuid.uuid4().hex[:8]}"
        _write(pointer, json.dumps({"version": version}).encode())
        os.replace(pointer, folder / LATEST)
        _fsync_dir(folder)
        self._held[spec.name] = _Held(version, manifest, buffers)
        self._prune(spec.name, version)
        return final

    def _prune(self, view: str, latest: int) -> None:
        versions = list_versions(self.root, view)
        for old in versions[: max(0, len(versions) - self.keep)]:
            if old == latest:
                continue
            doomed = self.root / view / f".trash-v{old}-{uuid.uuid4().hex[:8]}"
            try:
                os.rename(self.root / view / f"v{old}", doomed)
            except FileNotFoundError:
                continue
            shutil.rmtree(doomed, ignore_errors=True)


# ----------------------------------------------------------------------------------------- pull


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
        self._held: _Held | None = None
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
            held, nbytes = self._load_snapshot(manifest)
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

    def _apply(self, chain: list[dict]) -> tuple[_Held, int]:
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
                        buf = _unshuffle(raw, e["itemsize"])
                        buf = np.bitwise_xor(buf, held.buffers[key], out=buf if buf.flags.writeable else None)
                    else:
                        buf = raw
                if e["mode"] != "same" and _sha(buf) != e["result_sha256"]:
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
            held = _Held(manifest["version"], manifest, buffers)
        return held, nbytes

    def _load_snapshot(self, manifest: dict) -> tuple[_Held, int]:
        path = self.root / self.view / f"v{manifest['version']}" / SNAPSHOT
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
                if _dtype_name(t.dtype) != meta["dtype"] or list(t.shape) != meta["shape"]:
                    raise ViewCorrupt(f"{where} is {t.dtype} {list(t.shape)}, the manifest says "
                                      f"{meta['dtype']} {meta['shape']}", path, name)
                buf = _bytes_of(t)
                if _sha(buf) != meta["sha256"]:
                    raise ViewCorrupt(f"{where}: checksum mismatch (the bytes are damaged)", path, name)
                buffers[key] = buf
        return _Held(manifest["version"], manifest, buffers), len(blob)

    def _verify_files(self, manifest: dict) -> None:
        folder = self.root / self.view / f"v{manifest['version']}"
        for name, meta in manifest["files"].items():
            if name == SNAPSHOT:
                continue
            try:
                data = (folder / name).read_bytes()
            except FileNotFoundError:
                raise ViewMissing(f"{folder / name} is missing", folder / name) from None
            if _sha(data) != meta["sha256"]:
                raise ViewCorrupt(f"{folder / name}: checksum mismatch", folder / name)

    def _decode(self, held: _Held) -> dict[str, Tensor]:
        path = self.root / self.view / f"v{held.version}" / SNAPSHOT
        out = {}
        for name, entry in held.manifest["tensors"].items():
            parts = {part: _tensor_of(held.buffers[m["key"]], _dtype(m["dtype"], path), m["shape"])
                     for part, m in entry["parts"].items()}
            if entry["format"] == RAW:
                out[name] = parts["values"]
                continue
            try:
                out[name] = quant.decode(parts, entry["format"], entry["shape"], _dtype(entry["dtype"], path))
            except ValueError as exc:
                raise ViewCorrupt(f"tensor {name!r} of {path}: {exc}", path, name) from None
        return out

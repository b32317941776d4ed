"""Publishing a state dict as every view of a fleet, version after version.

Owns encoding each tensor once (`patchgym.rl.quant`), writing a version folder under a temporary
name and renaming it into place, the delta against the view's previous encoded snapshot, moving
the view's `latest` pointer, and pruning old versions. Does not cover reading (`reader.py`) or
several publishers on one root at once (one trainer publishes).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

import safetensors.torch
from patchgym.rl import quant
from torch import Tensor

from .delta import make_delta
from .layout import (
    LATEST,
    MANIFEST,
    RAW,
    SCHEMA,
    SNAPSHOT,
    Held,
    ViewError,
    ViewSpec,
    bytes_of,
    checksum,
    dtype_name,
    fsync_dir,
    list_versions,
    read_latest,
    read_manifest,
    sha,
    write_durable,
)
from .reader import load_snapshot


def encode_view(spec: ViewSpec, state_dict: Mapping[str, Tensor]) -> tuple[dict, dict[str, Tensor]]:
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
            described[part] = {"key": key, "dtype": dtype_name(value.dtype), "shape": list(value.shape),
                               "sha256": sha(bytes_of(value))}
        entries[name] = {"format": fmt, "dtype": dtype_name(tensor.dtype), "shape": list(tensor.shape),
                         "parts": described}
    return entries, stored

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
        self._held: dict[str, Held | None] = {}
        self.root.mkdir(parents=True, exist_ok=True)

    def _base(self, spec: ViewSpec) -> Held | None:
        """The previous encoded snapshot: held from the last publish, else read back from disk."""
        if spec.name not in self._held:
            try:  # verified like any pull, but not decoded: the encoded bytes are all a delta needs
                manifest = read_manifest(self.root, spec.name, read_latest(self.root, spec.name))
                self._held[spec.name] = load_snapshot(self.root, spec.name, manifest)[0]
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
        tensors, stored = encode_view(spec, state_dict)
        buffers = {k: bytes_of(v) for k, v in stored.items()}
        manifest = {"schema": SCHEMA, "view": spec.name, "format": spec.format, "others": spec.others,
                    "version": version, "parent": base.version if base else None, "created": time.time(),
                    "tensors": tensors, "files": {}, "delta": None}
        tmp = folder / f".tmp-v{version}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            blob = safetensors.torch.save(stored, metadata={"format": "pt", "patchgym_view": spec.name,
                                                            "patchgym_version": str(version)})
            write_durable(tmp / SNAPSHOT, blob)
            manifest["files"][SNAPSHOT] = {"sha256": sha(blob), "bytes": len(blob)}
            for f in self.files:
                data = f.read_bytes()
                write_durable(tmp / f.name, data)
                manifest["files"][f.name] = {"sha256": sha(data), "bytes": len(data)}
            new_meta = {p["key"]: p for t in tensors.values() for p in t["parts"].values()}
            if base is not None:
                delta, entries = make_delta(buffers, new_meta, base.buffers, base.key_meta(), self.level)
                name = f"delta-from-v{base.version}.zst"
                write_durable(tmp / name, delta)
                manifest["delta"] = {"file": name, "parent": base.version, "bytes": len(delta), "entries": entries}
            body = dict(manifest, checksum=checksum(manifest))
            write_durable(tmp / MANIFEST, json.dumps(body, indent=1).encode())
            fsync_dir(tmp)
            os.rename(tmp, final)  # atomic: a reader sees no folder or a whole one
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        fsync_dir(folder)
        pointer = folder / f".latest-{uuid.uuid4().hex[:8]}"
        write_durable(pointer, json.dumps({"version": version}).encode())
        os.replace(pointer, folder / LATEST)
        fsync_dir(folder)
        self._held[spec.name] = Held(version, manifest, buffers)
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

"""The on-disk vocabulary of weight views: file names, errors, what a view is, manifests, pointers.

Owns the names every other views module agrees on, the `ViewSpec` (which format each tensor of a
state dict is stored in), checksums and durable writes, and reading a view's `latest` pointer,
its versions and a version's self-checksummed manifest. Does not cover writing or pulling versions
(`publisher.py`, `reader.py`) or deltas (`delta.py`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from patchgym.rl import quant
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


def sha(buf) -> str:
    return hashlib.sha256(memoryview(buf)).hexdigest()


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_of(name: str, path: Path) -> torch.dtype:
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype):
        raise ViewCorrupt(f"{path}: unknown dtype {name!r}", path)
    return dtype


def bytes_of(t: Tensor) -> np.ndarray:
    t = t.detach().contiguous().cpu()
    return t.reshape(-1).view(torch.uint8).numpy() if t.numel() else np.zeros(0, np.uint8)


def tensor_of(buf: np.ndarray, dtype: torch.dtype, shape: list[int]) -> Tensor:
    if buf.size == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.from_numpy(np.array(buf, dtype=np.uint8, copy=True)).view(dtype).reshape(shape)


def checksum(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def write_durable(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def fsync_dir(path: Path) -> None:
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
    if not isinstance(manifest, dict) or manifest.pop("checksum", None) != checksum(manifest):
        raise ViewCorrupt(f"{path}: the manifest's checksum does not match its contents", path)
    if manifest.get("schema") != SCHEMA or manifest.get("version") != version or manifest.get("view") != view:
        raise ViewCorrupt(f"{path}: manifest is for view {manifest.get('view')!r} version "
                          f"{manifest.get('version')!r} (schema {manifest.get('schema')!r})", path)
    return manifest

@dataclass
class Held:
    """The last encoded snapshot of one view: its version, manifest and bytes per stored key."""

    version: int
    manifest: dict
    buffers: dict[str, np.ndarray] = field(default_factory=dict)

    def key_meta(self) -> dict[str, dict]:
        return {p["key"]: p for t in self.manifest["tensors"].values() for p in t["parts"].values()}

"""Trainer checkpoints on disk: written atomically, found again after a crash.

Owns the layout of one checkpoint directory and how it is written and read; the trainer decides
what goes in (`EmbeddedTrainer.save_checkpoint`). A checkpoint is a directory:

    model.safetensors   the model's state dict, float32, Hugging Face names; a tensor that shares
                        its storage with an earlier one (tied embeddings) is stored once and
                        listed under "aliases" in trainer.json
    optimizers.pt       {name: optimizer.state_dict()} (torch.save; loaded with weights_only=True)
    rng.pt              torch CPU (and CUDA) generator states, Python `random`'s state, numpy's
                        when numpy is imported
    trainer.json        version, aliases, the trainer's settings and the loop's `extra_state`;
                        written last

Atomicity: everything is written into a hidden sibling `.<name>.tmp-<pid>-<n>`, flushed to disk,
and only then renamed to `<name>` (one rename: a directory is either absent or complete). A kill
mid-save leaves only a hidden temporary directory, which `latest_checkpoint` never returns and
the next save in the same place removes. Overwriting an existing checkpoint renames the old one
to a hidden name first, so the window in which `<name>` is missing is two renames long (the old
copy is still on disk during it).

`latest_checkpoint(run_dir)` looks in `run_dir/checkpoints/` (where `checkpoint_path` puts
them) and returns the complete checkpoint with the highest version, or None.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any, Mapping

import torch
from safetensors.torch import load_file, save_file

FORMAT = 1
META = "trainer.json"
_counter = itertools.count()


def checkpoint_path(run_dir: Path | str, version: int) -> Path:
    """Where the checkpoint of `version` lives in a run directory."""
    return Path(run_dir) / "checkpoints" / f"v{version:08d}"


def latest_checkpoint(run_dir: Path | str) -> Path | None:
    """The complete checkpoint of `run_dir` with the highest version (None when there is none)."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return None
    best: tuple[int, str] | None = None
    found: Path | None = None
    for child in root.iterdir():
        if child.name.startswith(".") or not (child / META).is_file():
            continue
        try:
            version = int(json.loads((child / META).read_text())["version"])
        except (ValueError, KeyError, TypeError, json.JSONDecodeError):
            continue
        key = (version, child.name)
        if best is None or key > best:
            best, found = key, child
    return found


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        kind, keys, pos, has_gauss, gauss = numpy.random.get_state()
        state["numpy"] = (kind, torch.from_numpy(keys.astype("int64")), int(pos), int(has_gauss), float(gauss))
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(_as_tuples(state["python"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state:
        import numpy

        kind, keys, pos, has_gauss, gauss = state["numpy"]
        numpy.random.set_state((kind, keys.numpy().astype("uint32"), pos, has_gauss, gauss))


def _as_tuples(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_as_tuples(v) for v in value)
    return value


def write(
    path: Path | str,
    *,
    model_state: Mapping[str, torch.Tensor],
    optimizers: Mapping[str, Mapping[str, Any]],
    version: int,
    extra_state: Mapping[str, Any] | None,
    settings: Mapping[str, Any],
) -> Path:
    """Write one checkpoint directory atomically; returns its path."""
    path = Path(path)
    meta = {"format": FORMAT, "version": int(version), "settings": dict(settings), "extra_state": dict(extra_state or {})}
    try:
        json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"extra_state must be JSON-serialisable (finite numbers, str keys): {exc}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}-{next(_counter)}"
    tmp.mkdir()
    try:
        tensors, aliases = _dedupe(model_state)
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        torch.save(dict(optimizers), tmp / "optimizers.pt")
        torch.save(rng_state(), tmp / "rng.pt")
        meta["aliases"] = aliases
        (tmp / META).write_text(json.dumps(meta, allow_nan=False))
        for child in tmp.iterdir():
            _fsync(child)
        _fsync(tmp)
        old = None
        if path.exists():
            old = path.parent / f".{path.name}.old-{os.getpid()}-{next(_counter)}"
            os.rename(path, old)
        os.rename(tmp, path)
        _fsync(path.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def read(path: Path | str) -> dict[str, Any]:
    """Load a checkpoint directory: model_state, optimizers, rng, version, settings, extra_state."""
    path = Path(path)
    if not (path / META).is_file():
        raise ValueError(f"{path} is not a complete trainer checkpoint (no {META})")
    meta = json.loads((path / META).read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: checkpoint format {meta.get('format')!r}, this trainer reads {FORMAT}")
    tensors = load_file(str(path / "model.safetensors"))
    for alias, source in meta["aliases"].items():
        tensors[alias] = tensors[source]
    return {
        "model_state": tensors,
        "optimizers": torch.load(path / "optimizers.pt", weights_only=True),
        "rng": torch.load(path / "rng.pt", weights_only=True),
        "version": int(meta["version"]),
        "settings": meta.get("settings", {}),
        "extra_state": meta.get("extra_state", {}),
    }


def _dedupe(state: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Tensors sharing storage (tied weights) are kept once; the others become aliases."""
    seen: dict[tuple[int, int, tuple[int, ...]], str] = {}
    tensors: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    for key, value in state.items():
        value = value.detach()
        ident = (value.untyped_storage().data_ptr(), value.storage_offset(), tuple(value.shape))
        if ident in seen:
            aliases[key] = seen[ident]
            continue
        seen[ident] = key
        tensors[key] = value.cpu().contiguous()
    return tensors, aliases


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

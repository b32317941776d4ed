"""Pulling a weight view by version into a sampler: the same path for embedded and SGLang replicas.

Owns `pull_view`: given a sampler, a views root, a view name and a version, the replica ends up
holding exactly that version's encoded values (checksums verified by `patchgym.rl.views`).

* `EmbeddedSampler`: the view is read here (`ViewReader.pull`, delta when the reader holds the
  parent) and its tensors are copied into the replica as they are (`update_weights_encoded`): a
  view is already in its format, and a second quantization pass is not the identity for NVFP4.
  The view's format must be the group's weight format, else a clear error (the values would be
  another format's).
* `SGLangSampler`: the server is pointed at the version folder (`/update_weights_from_disk`);
  the checksums are verified here first, so a damaged view never reaches a server.

Does not cover publishing (the trainer's `ViewPublisher`) or deciding when to pull (the loop).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from patchgym.rl.views import ViewReader, read_manifest


def _group_format(sampler: Any) -> str | None:
    group = getattr(sampler, "group_config", None)
    return getattr(group, "weights", None)


async def pull_view(sampler: Any, root: Path | str, view: str, version: int, *, reader: ViewReader | None = None) -> ViewReader:
    """Bring `sampler` to `version` of `view` under `root`; returns the reader (keep it for deltas)."""
    root = Path(root)
    manifest = read_manifest(root, view, version)
    fmt = manifest.get("format")
    want = _group_format(sampler)
    if want is not None and fmt != want:
        raise ValueError(f"view {view!r} holds {fmt!r} weights but group {sampler.group!r} serves {want!r}: "
                         "pull the view of the group's own format")
    reader = reader or ViewReader(root, view)
    state, got = reader.pull(version)  # verifies every checksum (raises ViewCorrupt / ViewMissing)
    if hasattr(sampler, "update_weights_encoded"):
        await sampler.update_weights_encoded({name: t.float() for name, t in state.items()}, got)
    else:
        await sampler.update_weights(str(root / view / f"v{got}"), got)
    return reader


class SharedPublish:
    """One publisher shared by every replica of a fleet: the first replica handed a state dict for
    version N publishes it (each view once), the others wait and get the same folder.

    This is what lets the loop's `update_weights(trainer.weights(), version)` reach SGLang
    replicas unchanged: `SGLangSampler(..., publish=shared)` turns the mapping into its view's folder.
    `target`: a `ViewPublisher` (its views), or a root folder (a publisher per view, made on first use;
    `files` are copied into every version, e.g. config.json).
    """

    def __init__(self, target: Any, *, files: Any = ()) -> None:
        import threading

        from patchgym.rl.views import ViewPublisher

        self._make = (lambda view: ViewPublisher(target, [view], files=files)) if isinstance(target, (str, Path)) else None
        self._publishers: dict[str, Any] = {} if self._make else {spec.name: target for spec in target.specs}
        self._lock = threading.Lock()
        self._done: dict[tuple[str, int], Path] = {}

    def folder(self, state_dict: Any, version: int, view: str) -> Path:
        with self._lock:
            if (view, version) not in self._done:
                publisher = self._publishers.get(view)
                if publisher is None:
                    if self._make is None:
                        raise ValueError(f"the publisher writes views {sorted(self._publishers)}, not {view!r}")
                    publisher = self._publishers[view] = self._make(view)
                paths = publisher.publish(state_dict, version)
                self._done = {k: v for k, v in self._done.items() if k[1] >= version}  # keep the newest only
                for name, path in paths.items():
                    self._done[(name, version)] = Path(path)
            return self._done[(view, version)]


_SHARED: dict[str, SharedPublish] = {}


def shared_publish(root: Path | str, *, files: Any = ()) -> SharedPublish:
    """The process's one SharedPublish for `root` (every group built against it shares it)."""
    key = str(Path(root).resolve())
    if key not in _SHARED:
        _SHARED[key] = SharedPublish(Path(key), files=files)
    return _SHARED[key]

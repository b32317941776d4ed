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
    """One `ViewPublisher` shared by every replica of a fleet: the first replica handed a state dict
    for version N publishes it (every view once), the others wait and get the same folders.

    This is what lets the loop's `update_weights(trainer.weights(), version)` reach SGLang
    replicas unchanged: `SGLangSampler(..., publish=shared)` turns the mapping into its view's folder.
    """

    def __init__(self, publisher: Any) -> None:
        import threading

        self.publisher = publisher
        self._lock = threading.Lock()
        self._done: dict[int, dict[str, Path]] = {}

    def folder(self, state_dict: Any, version: int, view: str) -> Path:
        with self._lock:
            if version not in self._done:
                self._done = {version: self.publisher.publish(state_dict, version)}  # keep only the newest
            paths = self._done[version]
        if view not in paths:
            raise ValueError(f"the publisher writes views {sorted(paths)}, not {view!r}")
        return Path(paths[view])

"""The bundled suite, built once per version of its sources and cached.

`bundled_tasks(store)` returns `<store>/<hash>/tasks.jsonl`, where `store` defaults to
`$PATCHGYM_HOME/suite` and `<hash>` covers every source file of this package (code, histories and
library trees). A build happens in a temporary sibling directory and is renamed into place, under
an exclusive file lock, so concurrent callers (threads or processes) build at most once and never
see a half-written suite.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from patchgym.tasks.store import file_lock, patchgym_home
from patchgym.tasks.suite.build import build_suite
from patchgym.tasks.suite.history import CACHE_DIRS

SUITE_DIR = Path(__file__).resolve().parent
_IGNORED_PARTS = CACHE_DIRS


def suite_hash(root: Path = SUITE_DIR) -> str:
    """A digest of every source file of the suite (paths and contents), 16 hex digits."""
    digest = hashlib.sha256()
    files = sorted(
        p for p in root.rglob("*")
        if p.is_file() and not _IGNORED_PARTS.intersection(p.relative_to(root).parts) and p.suffix != ".pyc"
    )
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def default_store() -> Path:
    return patchgym_home() / "suite"


def bundled_tasks(store: Path | None = None) -> Path:
    """The path of the bundled suite's tasks.jsonl, building it first if this version is not cached."""
    store = Path(store) if store is not None else default_store()
    key = suite_hash()
    final = store / key
    jsonl = final / "tasks.jsonl"
    if jsonl.is_file():
        return jsonl
    store.mkdir(parents=True, exist_ok=True)
    with file_lock(store / f".{key}.lock"):
        if jsonl.is_file():  # another process finished while we waited
            return jsonl
        if final.exists():  # a leftover from a crash before this layout was complete
            shutil.rmtree(final)
        for stale in store.glob(f".{key}.building-*"):  # builds killed before they could clean up
            shutil.rmtree(stale, ignore_errors=True)
        work = Path(tempfile.mkdtemp(prefix=f".{key}.building-", dir=store))
        try:
            build_suite(work)
            os.rename(work, final)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    return jsonl

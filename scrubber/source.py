"""Opening the source of a scrub: a local repository (bare or not) or a `.bundle` file.

A bundle is unbundled into a temporary bare repository (all its objects, no refs), because
fetching straight from a bundle would copy every object in it, future included. Either way the
scrub then fetches only what is reachable from the base commit out of a plain repository.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from patchgym.scrubber.errors import ScrubError
from patchgym.scrubber.git import locate_repo, run_git

_BUNDLE_SIGNATURES = (b"# v2 git bundle\n", b"# v3 git bundle\n")


@dataclass(frozen=True)
class OpenedSource:
    """A repository git can fetch from (`fetch_url`) and run read-only commands in (`cwd`)."""

    fetch_url: Path
    cwd: Path
    label: str

    @property
    def objects_dir(self) -> Path:
        return self.fetch_url / "objects"


def is_bundle(path: Path) -> bool:
    if not path.is_file():
        return False
    with path.open("rb") as handle:
        head = handle.read(16)
    return head in _BUNDLE_SIGNATURES


@contextmanager
def open_source(src: str | Path, *, scratch_parent: Path) -> Iterator[OpenedSource]:
    """Yield a fetchable repository for SRC; a bundle's temporary repository is removed after."""
    src_path = Path(src).expanduser()
    if not src_path.exists():
        raise ScrubError(f"source {src_path} does not exist")
    if src_path.is_file():
        if not is_bundle(src_path):
            raise ScrubError(f"source {src_path} is neither a git repository nor a git bundle file")
        scratch = Path(tempfile.mkdtemp(prefix=".patchgym-unbundle-", dir=scratch_parent))
        try:
            run_git(["init", "-q", "--bare", "--template=", str(scratch)])
            proc = run_git(["bundle", "unbundle", str(src_path.resolve())], cwd=scratch, check=False)
            if proc.returncode != 0:
                detail = proc.stderr.decode(errors="replace").strip()
                raise ScrubError(f"bundle {src_path} cannot be read on its own: {detail}")
            yield OpenedSource(fetch_url=scratch, cwd=scratch, label=f"bundle {src_path}")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return
    paths = locate_repo(src_path, role="source")
    yield OpenedSource(fetch_url=paths.common_dir, cwd=paths.common_dir, label=f"source {src_path}")

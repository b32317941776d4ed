"""The blobs a patch would create: the post-images of the files it changes, applied at base.

Base's versions of the touched files are written into a throw-away repository, the patch is
applied there with `git apply`, and the results are hashed with `git hash-object` (nothing is
written to the inspected repository). Post-images that base's own tree already holds (a mode-only
change, a file copied from another) reveal nothing and are left out.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from patchgym.scrubber.errors import ScrubError
from patchgym.scrubber.git import run_git


def _numstat_paths(patch_file: Path, cwd: Path) -> tuple[list[str], list[str]]:
    """(paths before, paths after) the patch touches, from `git apply --numstat -z`."""
    proc = run_git(["apply", "--numstat", "-z", str(patch_file)], cwd=cwd, check=False)
    if proc.returncode != 0:
        raise ScrubError(f"the forbidden patch cannot be parsed: {proc.stderr.decode(errors='replace').strip()}")
    fields = proc.stdout.decode(errors="surrogateescape").split("\0")
    before: list[str] = []
    after: list[str] = []
    index = 0
    while index < len(fields):
        record = fields[index]
        if not record:
            index += 1
            continue
        parts = record.split("\t", 2)
        if len(parts) == 3 and parts[2]:
            before.append(parts[2])
            after.append(parts[2])
            index += 1
        else:  # a rename or copy: "added\tdeleted\t" then old and new paths
            before.append(fields[index + 1])
            after.append(fields[index + 2])
            index += 3
    return before, after


def _base_entries(repo_cwd: Path, base: str) -> dict[str, tuple[str, str]]:
    """path -> (mode, blob id) for every file in base's tree."""
    proc = run_git(["ls-tree", "-r", "-z", "--full-tree", base], cwd=repo_cwd)
    entries = {}
    for record in proc.stdout.decode(errors="surrogateescape").split("\0"):
        if not record:
            continue
        meta, _, path = record.partition("\t")
        mode, kind, oid = meta.split()
        if kind == "blob":
            entries[path] = (mode, oid)
    return entries


def post_images(repo_cwd: Path, base: str, patch_text: str) -> dict[str, str]:
    """Map each new blob id the patch produces at BASE to the path it belongs to."""
    entries = _base_entries(repo_cwd, base)
    with tempfile.TemporaryDirectory(prefix="patchgym-postimage-") as scratch_name:
        scratch = Path(scratch_name)
        work = scratch / "work"
        object_format = run_git(["rev-parse", "--show-object-format"], cwd=repo_cwd).stdout.decode().strip()
        run_git(["init", "-q", "--template=", f"--object-format={object_format}", str(work)])
        patch_file = scratch / "fix.patch"
        patch_file.write_text(patch_text if patch_text.endswith("\n") else patch_text + "\n")
        before, after = _numstat_paths(patch_file, work)
        if not after:
            raise ScrubError("the forbidden patch changes no files")
        for path in before:
            if path not in entries:
                continue
            mode, oid = entries[path]
            content = run_git(["cat-file", "blob", oid], cwd=repo_cwd).stdout
            target = work / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if mode == "120000":
                os.symlink(os.fsdecode(content), target)
            else:
                target.write_bytes(content)
                if mode == "100755":
                    target.chmod(0o755)
        applied = run_git(["apply", "--whitespace=nowarn", str(patch_file)], cwd=work, check=False)
        if applied.returncode != 0:
            detail = applied.stderr.decode(errors="replace").strip()
            raise ScrubError(f"the forbidden patch does not apply to base {base}: {detail}")
        images: dict[str, str] = {}
        for path in dict.fromkeys(after):
            target = work / path
            if target.is_symlink():
                data = os.fsencode(os.readlink(target))
            elif target.is_file():
                data = target.read_bytes()
            else:
                continue  # deleted by the patch
            oid = run_git(["hash-object", "--no-filters", "--stdin"], cwd=work, input=data).stdout.decode().strip()
            images[oid] = path
    present = {oid for _, oid in entries.values()}
    return {oid: path for oid, path in images.items() if oid not in present}

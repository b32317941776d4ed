"""The blobs a patch would create: the post-images of the files it changes, applied at base.

The patch is applied with `git apply --cached` in a throw-away repository whose index is base's
tree (entries only) and whose store holds the blobs of the files the patch names; comparing the
index before and after names every new blob, with renames, copies, modes, binaries and symlinks
handled by git itself. The inspected repository is only read (no alternates: git would refresh
the mtimes of objects it finds there). Post-images that base's own tree already holds (a mode-only
change, a rename, a file copied from another) reveal nothing and are left out.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from patchgym.scrubber.errors import ScrubError
from patchgym.scrubber.git import git_text, run_git

_HEADER_PREFIXES = ("diff --git ", "--- ", "+++ ", "rename from ", "rename to ", "copy from ", "copy to ")


def post_images(repo_cwd: Path, base: str, patch_text: str) -> dict[str, str]:
    """Map each new blob id the patch produces at BASE to the path it belongs to."""
    object_format = git_text(["rev-parse", "--show-object-format"], cwd=repo_cwd)
    listing = run_git(["ls-tree", "-r", "-z", "--full-tree", base], cwd=repo_cwd).stdout
    before: dict[str, tuple[str, str]] = {}
    for record in listing.decode(errors="surrogateescape").split("\0"):
        if record:
            meta, _, path = record.partition("\t")
            mode, _kind, oid = meta.split()
            before[path] = (mode, oid)
    headers = "\n".join(line for line in patch_text.splitlines() if line.startswith(_HEADER_PREFIXES))
    if not headers:
        raise ScrubError("the forbidden patch changes no files (it is not a unified diff)")
    named = {path: entry for path, entry in before.items() if entry[0] != "160000" and path in headers}
    with tempfile.TemporaryDirectory(prefix="patchgym-postimage-") as scratch_name:
        scratch = Path(scratch_name)
        work = scratch / "repo.git"
        run_git(["init", "-q", "--bare", "--template=", f"--object-format={object_format}", str(work)])
        for _mode, oid in set(named.values()):
            content = run_git(["cat-file", "blob", oid], cwd=repo_cwd).stdout
            run_git(["hash-object", "-w", "--no-filters", "--stdin"], cwd=work, input=content)
        index = {"GIT_INDEX_FILE": str(scratch / "index")}
        info = "".join(f"{mode} {oid}\t{path}\0" for path, (mode, oid) in before.items())
        entries = info.encode(errors="surrogateescape")
        run_git(["update-index", "-z", "--index-info"], cwd=work, input=entries, extra_env=index)
        patch_file = scratch / "fix.patch"
        patch_file.write_text(patch_text if patch_text.endswith("\n") else patch_text + "\n", errors="surrogateescape")
        applied = run_git(
            ["apply", "--cached", "--whitespace=nowarn", str(patch_file)], cwd=work, check=False, extra_env=index
        )
        if applied.returncode != 0:
            detail = applied.stderr.decode(errors="replace").strip()
            if "No valid patches" in detail:
                raise ScrubError("the forbidden patch changes no files (it is not a unified diff)")
            raise ScrubError(f"the forbidden patch does not apply to base {base}: {detail}")
        after_listing = run_git(["ls-files", "-s", "-z"], cwd=work, extra_env=index).stdout
    present = {oid for _mode, oid in before.values()}
    images: dict[str, str] = {}
    for record in after_listing.decode(errors="surrogateescape").split("\0"):
        if not record:
            continue
        meta, _, path = record.partition("\t")
        mode, oid, _stage = meta.split()
        if mode != "160000" and oid not in present:
            images[oid] = path
    return images

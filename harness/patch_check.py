"""Checking a submitted patch before anything is applied: the first grading step.

`check_patch(text)` answers whether a prediction may be applied at all, and if not, which rule it
broke (`PatchCheck.rule`, one of `RULES`):

- `not_a_diff`: it does not parse as a unified diff, or holds no file change;
- `too_large`: over `max_bytes` (default 2 MiB) or over `max_files` files;
- `absolute_path`: a path starting with `/` (other than `/dev/null`);
- `path_escape`: a path with a `..` component, so it could land outside the repository;
- `git_dir`: a path inside `.git/` (the repository's history and configuration are not the patch's);
- `symlink`: a file mode of 120000 (symlinks could point outside the repository) or 160000 (submodules);
- `binary`: a binary hunk (`GIT binary patch` / `Binary files ... differ`) unless `allow_binary`.

Paths are read from every place git and `patch` take them: `diff --git`, `---`/`+++`, and
`rename`/`copy` headers, with git's C-style quoting undone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

MAX_PATCH_BYTES = 2 * 1024 * 1024
MAX_PATCH_FILES = 1000

RULES = ("not_a_diff", "too_large", "absolute_path", "path_escape", "git_dir", "symlink", "binary")

_MODE_LINE = re.compile(r"^(?:new file mode|deleted file mode|old mode|new mode) (\d{6})\s*$")
_INDEX_MODE = re.compile(r"^index [0-9a-fA-F]+\.\.[0-9a-fA-F]+ (\d{6})\s*$")
_DIFF_GIT = re.compile(r"^diff --git (.+)$")
_HEADER_PATH = re.compile(r"^(?:rename from|rename to|copy from|copy to) (.+)$")
_NEW_BY_HEADER = re.compile(r"^(?:rename to|copy to) (.+)$")
_PLUS_MINUS = re.compile(r"^(?:---|\+\+\+) (.+?)(?:\t.*)?$")
_BINARY = re.compile(r"^(?:GIT binary patch|Binary files .* differ)\s*$")
_ESCAPES = {"a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


@dataclass(frozen=True)
class PatchCheck:
    ok: bool
    rule: str | None = None
    message: str = ""
    files: list[str] = field(default_factory=list)  # repository-relative paths the patch touches
    added: list[str] = field(default_factory=list)  # of those, the files the patch creates


def unquote_git_path(path: str) -> str:
    """Undo git's quoting of a path (`"a/caf\\303\\251"` -> `a/café`); plain paths pass through."""
    path = path.strip()
    if not (len(path) >= 2 and path[0] == '"' and path[-1] == '"'):
        return path
    body, out, i = path[1:-1], bytearray(), 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and re.match(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
            out += _ESCAPES.get(nxt, nxt).encode()
            i += 2
            continue
        out += char.encode()
        i += 1
    return out.decode("utf-8", errors="surrogateescape")


def _split_diff_git(rest: str) -> list[str]:
    """The two paths of a `diff --git A B` line (quoted or not)."""
    rest = rest.strip()
    if rest.startswith('"'):
        end = rest.find('" ', 1)
        while end != -1 and rest[end - 1] == "\\":
            end = rest.find('" ', end + 1)
        if end != -1:
            return [rest[: end + 1], rest[end + 2 :]]
        return [rest]
    # Unquoted: "a/x b/x"; split at " b/" (names with " b/" inside are ambiguous for git too).
    cut = rest.find(" b/")
    if cut != -1:
        return [rest[:cut], rest[cut + 1 :]]
    return rest.split(" ", 1)


def _strip_prefix(path: str) -> str:
    path = unquote_git_path(path)
    if path == "/dev/null":
        return path
    if path.startswith(("a/", "b/")):
        return path[2:]
    return path


def _path_problem(path: str) -> tuple[str, str] | None:
    if path == "/dev/null" or not path:
        return None
    if path.startswith("/"):
        return "absolute_path", f"absolute path {path!r}"
    parts = path.replace("\\", "/").split("/")
    if ".." in parts:
        return "path_escape", f"path {path!r} climbs out of the repository with '..'"
    if ".git" in parts:
        return "git_dir", f"path {path!r} is inside .git/"
    return None


def _raw_paths(text: str) -> list[str]:
    """Every path the diff names, from the lines git apply and patch read paths from."""
    paths: list[str] = []
    in_hunk = False
    for line in text.splitlines():
        if line.startswith("@@"):
            in_hunk = True
            continue
        if line.startswith("diff --git "):
            in_hunk = False
            match = _DIFF_GIT.match(line)
            if match:
                paths += [_strip_prefix(p) for p in _split_diff_git(match.group(1))]
            continue
        if in_hunk and line[:1] in (" ", "+", "-", "\\") and not line.startswith(("--- ", "+++ ")):
            continue
        match = _HEADER_PATH.match(line)
        if match:
            paths.append(unquote_git_path(match.group(1)))
            continue
        match = _PLUS_MINUS.match(line)
        if match:
            in_hunk = False
            paths.append(_strip_prefix(match.group(1)))
    return paths


def check_patch(
    text: str | None,
    *,
    max_bytes: int = MAX_PATCH_BYTES,
    max_files: int = MAX_PATCH_FILES,
    allow_binary: bool = False,
) -> PatchCheck:
    """Check a patch against the rules in the module docstring; the first rule broken is reported."""
    if text is None or not text.strip():
        return PatchCheck(False, "not_a_diff", "the patch is empty")
    size = len(text.encode("utf-8", errors="surrogateescape"))
    if size > max_bytes:
        return PatchCheck(False, "too_large", f"the patch is {size} bytes, over the cap of {max_bytes}")
    try:
        patch_set = PatchSet(text)
    except (UnidiffParseError, UnicodeError, ValueError) as exc:
        return PatchCheck(False, "not_a_diff", f"does not parse as a unified diff: {exc}")
    has_binary = any(_BINARY.match(line) for line in text.splitlines())
    if len(patch_set) == 0 and not has_binary:
        return PatchCheck(False, "not_a_diff", "no file changes found in the text")
    if len(patch_set) > max_files:
        return PatchCheck(False, "too_large", f"the patch touches {len(patch_set)} files, over the cap of {max_files}")

    files: list[str] = []
    for path in _raw_paths(text) + [p for pf in patch_set for p in (_strip_prefix(pf.source_file), _strip_prefix(pf.target_file))]:
        problem = _path_problem(path)
        if problem:
            return PatchCheck(False, problem[0], problem[1])
        if path != "/dev/null" and path not in files:
            files.append(path)

    for line in text.splitlines():
        match = _MODE_LINE.match(line) or _INDEX_MODE.match(line)
        if match and match.group(1) in ("120000", "160000"):
            kind = "a symlink" if match.group(1) == "120000" else "a submodule"
            return PatchCheck(False, "symlink", f"the patch creates or changes {kind} (mode {match.group(1)})")
    if has_binary and not allow_binary:
        return PatchCheck(False, "binary", "the patch holds a binary hunk and binary patches are not allowed")
    if any(pf.is_binary_file for pf in patch_set) and not allow_binary:
        return PatchCheck(False, "binary", "the patch holds a binary file and binary patches are not allowed")
    # Created: new files, and the targets of renames and copies (a root `pprint.py` made by renaming
    # README.md is as new as one added outright: the red team's shadow_by_rename got reward 1 when
    # only `new file` counted). The grader adds whatever is absent from the base checkout.
    added = [_strip_prefix(pf.target_file) for pf in patch_set if pf.is_added_file]
    added += [unquote_git_path(m.group(1)) for m in map(_NEW_BY_HEADER.match, text.splitlines()) if m]
    return PatchCheck(True, files=files, added=list(dict.fromkeys(p for p in added if p in files)))

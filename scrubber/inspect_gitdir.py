"""Inspecting the git directory's other files: an allow-list, so unknown channels are caught too.

Allowed: HEAD, config, description, index, objects/, refs/, logs/, packed-refs, shallow (those
are inspected elsewhere), info/ (exclude, attributes, sparse-checkout), hooks/ holding only the
`*.sample` files this git's own templates install (byte for byte), an empty branches/, a shared
index the index links to. An index may only carry extensions git writes. Everything else is
reported: `*_HEAD` files, operation state (rebase, merge, bisect, sequencer), worktrees/,
rr-cache/, modules/, grafts, and anything unknown. The config may not name remotes or URLs,
hooks paths, includes, or commands git would run, nor hold comments or branch descriptions; text
a person could have written elsewhere (COMMIT_EDITMSG, comments in info/ files) must be git's own.
"""

from __future__ import annotations

import functools
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from patchgym.scrubber.binformats import FormatError
from patchgym.scrubber.git import run_git
from patchgym.scrubber.index_format import KNOWN_EXTENSIONS, read_index_layout
from patchgym.scrubber.report import Leak

_INSPECTED_ELSEWHERE = {"HEAD", "config", "index", "objects", "refs", "logs", "packed-refs", "shallow"}
_STATE = {
    "rebase-merge",
    "rebase-apply",
    "sequencer",
    "MERGE_MSG",
    "MERGE_MODE",
    "MERGE_RR",
    "SQUASH_MSG",
    "AUTO_MERGE",
    "TAG_EDITMSG",
    "NOTES_EDITMSG",
    "gitk.cache",
}
_NAMED_CHANNELS = {"worktrees": "worktrees", "rr-cache": "rerere", "modules": "modules", "config.worktree": "config"}
_INFO_ALLOWED = {"exclude", "attributes", "sparse-checkout"}
# The comment lines of git's commit message template (instructions and a status listing).
_TEMPLATE_COMMENT = re.compile(
    r"^#( ?$|\t(new file|modified|deleted|renamed|copied|typechange|both \w+):|\t\S+$|\s*\(use \"git"
    r"| Please enter the commit message| with '#' will be ignored| Lines starting with '#'"
    r"| an empty message aborts| Author: | Date: | On branch \S+$| HEAD detached| Your branch"
    r"| Changes to be committed:| Changes not staged for commit:| Untracked files:| Initial commit"
    r"| No commits yet| Not currently on any branch| Do not modify or remove the line above"
    r"| Everything below it will be ignored| -+ >8 -+$| You are currently| interactive rebase in progress)"
)

# (pattern over `section.subsection.key`, channel, why)
_CONFIG_RULES = [
    (re.compile(r"^remote\."), "remotes", "remote"),
    (re.compile(r"^branch\..*\.(remote|pushremote|merge)$"), "remotes", "branch upstream"),
    (re.compile(r"^branch\..*\.description$"), "config", "free-text branch description"),
    (re.compile(r"^url\."), "remotes", "URL rewrite"),
    (re.compile(r"url$"), "remotes", "URL"),
    (re.compile(r"^[^.]+\..*://"), "remotes", "setting scoped to a URL"),
    (re.compile(r"^core\.hookspath$"), "hooks", "hooks path"),
    (re.compile(r"^include\.|^includeif\."), "config", "include of another config file"),
    (
        re.compile(r"^core\.(fsmonitor|alternaterefscommand|alternaterefsprefixes|worktree|sshcommand)$"),
        "config",
        "setting",
    ),
    (re.compile(r"^extensions\.(partialclone|worktreeconfig)$"), "config", "extension"),
    (re.compile(r"^filter\..*\.(clean|smudge|process)$"), "config", "filter command"),
    (re.compile(r"^(diff|merge)\..*\.(textconv|command|driver)$"), "config", "external command"),
    (re.compile(r"^notes\."), "notes", "notes setting"),
]


def _ls(directory: Path) -> list[Path]:
    return sorted(directory.iterdir()) if directory.is_dir() else []


_DEFAULT_DESCRIPTION = "Unnamed repository; edit this file 'description' to name the repository."


def inspect_git_dir(git_dir: Path, *, base: str, known_message: Callable[[str], bool]) -> list[Leak]:
    """Leaks among the files of one git directory (the common dir, or a linked worktree's dir).

    KNOWN_MESSAGE tells whether a text is the message of base or an ancestor: COMMIT_EDITMSG
    holding one of those is harmless; any other text may be the message of a future commit.
    """
    leaks: list[Leak] = []
    for entry in _ls(git_dir):
        name = entry.name
        if name == "index" and entry.is_file():
            leaks += _inspect_index_file(entry, hash_len=len(base) // 2)
        if name in _INSPECTED_ELSEWHERE:
            continue
        if re.fullmatch(r"sharedindex\.[0-9a-f]+", name):
            if not _index_links(git_dir / "index", name.split(".", 1)[1]):
                leaks.append(Leak("index", f"{entry} is a shared index no index links to (it may hold anything)"))
            else:
                leaks += _inspect_index_file(entry, hash_len=len(base) // 2)
            continue
        if name == "COMMIT_EDITMSG" and entry.is_file():
            raw = entry.read_text(errors="replace")
            if not known_message(_strip_comments(raw)):
                leaks.append(Leak("state", f"{entry} holds a message that is not base's or an ancestor's"))
            strange = [line for line in raw.splitlines() if line.startswith("#") and not _TEMPLATE_COMMENT.match(line)]
            if strange:
                leaks.append(Leak("state", f"{entry} has a comment git does not write: {strange[0][:80]!r}"))
            continue
        if name == "description" and entry.is_file():
            text = entry.read_text(errors="replace").strip()
            if text and text != _DEFAULT_DESCRIPTION:
                leaks.append(Leak("unknown", f"{entry} has non-default text: {text[:80]!r}"))
            continue
        if name.endswith("_HEAD"):
            content = entry.read_text(errors="replace").strip() if entry.is_file() else ""
            first = content.splitlines()[0][:120] if content else ""
            leaks.append(Leak("head-files", f"{entry} exists ({first or 'empty'})"))
        elif name in _STATE or name.startswith("BISECT_"):
            leaks.append(Leak("bisect" if name.startswith("BISECT_") else "state", f"{entry} exists"))
        elif name in _NAMED_CHANNELS:
            leaks.append(Leak(_NAMED_CHANNELS[name], f"{entry} exists{_listing(entry)}"))
        elif name == "hooks" and entry.is_dir():
            samples = _template_samples()
            for hook in _ls(entry):
                if not (hook.is_file() and hook.name.endswith(".sample")):
                    leaks.append(Leak("hooks", f"hook {hook} is not an inert sample"))
                elif samples.get(hook.name) != hook.read_bytes():
                    leaks.append(Leak("hooks", f"{hook} is not the sample this git installs (it may hold anything)"))
        elif name == "info" and entry.is_dir():
            for item in _ls(entry):
                if item.name == "grafts":
                    leaks.append(Leak("grafts", f"{item} rewrites ancestry"))
                elif item.name == "refs" and item.is_file():
                    leaks += _inspect_server_info(item, base)
                elif item.name not in _INFO_ALLOWED:
                    leaks.append(Leak("unknown", f"unexpected file {item}"))
                elif item.is_file():
                    leaks += _foreign_comments(item, _template_text(f"info/{item.name}"))
        elif name == "branches" and entry.is_dir():
            for item in _ls(entry):
                leaks.append(Leak("remotes", f"legacy remote {item}"))
        elif name == "remotes" and entry.is_dir():
            leaks.append(Leak("remotes", f"legacy remotes directory {entry}{_listing(entry)}"))
        else:
            leaks.append(Leak("unknown", f"unexpected entry {entry}"))
    config = git_dir / "config"
    if config.is_file():
        leaks += inspect_config(config)
        leaks += _config_comments(config)
    return leaks


def _foreign_comments(path: Path, template: str) -> list[Leak]:
    """Comment lines of PATH that this git's template of the same file does not hold."""
    allowed = {line.strip() for line in template.splitlines()}
    return [
        Leak("unknown", f"{path} line {number} is a comment git did not write: {line.strip()[:80]!r}")
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
        if line.lstrip().startswith("#") and line.strip() not in allowed
    ]


def _config_comments(config: Path) -> list[Leak]:
    """Comments in a config file (git writes none; `git config --list` never shows them)."""
    leaks = []
    for number, line in enumerate(config.read_text(errors="replace").splitlines(), start=1):
        unquoted = re.sub(r'"(?:[^"\\]|\\.)*"', "", line)
        if "#" in unquoted or ";" in unquoted:
            leaks.append(Leak("config", f"{config} line {number} holds a comment: {line.strip()[:80]!r}"))
    return leaks


@functools.cache
def _template_files() -> dict[str, bytes]:
    """The files `git init` installs from this git's default templates, by relative path."""
    with tempfile.TemporaryDirectory(prefix="patchgym-templates-") as scratch:
        run_git(["init", "-q", "--bare", scratch])
        root = Path(scratch)
        return {
            path.relative_to(root).as_posix(): path.read_bytes()
            for path in root.rglob("*")
            if path.is_file() and path.parent.name in ("hooks", "info")
        }


def _template_samples() -> dict[str, bytes]:
    """The `*.sample` hooks this git's templates install, by name."""
    return {name[len("hooks/") :]: data for name, data in _template_files().items() if name.startswith("hooks/")}


def _template_text(relative: str) -> str:
    return _template_files().get(relative, b"").decode(errors="replace")


def _inspect_index_file(path: Path, *, hash_len: int) -> list[Leak]:
    """An index's bytes beyond its entries: only extensions git writes, then the checksum."""
    try:
        layout = read_index_layout(path, hash_len)
    except (FormatError, OSError) as exc:
        return [Leak("index", f"{path} cannot be read as an index: {exc}")]
    leaks = [
        Leak("index", f"{path} carries an extension git does not write ({signature!r}, {size} bytes)")
        for signature, size in layout.extensions
        if signature.encode("latin-1") not in KNOWN_EXTENSIONS
    ]
    if layout.stray_bytes:
        leaks.append(Leak("index", f"{path} has {layout.stray_bytes} bytes after its last extension"))
    return leaks


def _index_links(index: Path, shared_id: str) -> bool:
    """Whether INDEX's split-index `link` extension names the shared index SHARED_ID (its entries
    are then part of the index git reads, which the index inspection compares with base)."""
    if len(shared_id) not in (40, 64) or not index.is_file():
        return False
    data = index.read_bytes()
    return b"link" in data and bytes.fromhex(shared_id) in data


def _inspect_server_info(path: Path, base: str) -> list[Leak]:
    """info/refs (written by `git update-server-info`, e.g. during gc) lists refs and their ids."""
    leaks = []
    for line in path.read_text(errors="replace").splitlines():
        oid, _, refname = line.partition("\t")
        if not (refname.startswith("refs/heads/") and oid == base):
            leaks.append(Leak("refs", f"{path} lists {refname or line!r} at {oid}"))
    return leaks


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")).strip()


def _listing(directory: Path) -> str:
    if not directory.is_dir():
        return ""
    names = [item.name for item in _ls(directory)]
    return f" ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''})" if names else " (empty)"


def inspect_config(config: Path) -> list[Leak]:
    proc = run_git(["config", "--file", str(config), "--no-includes", "--list", "-z"], check=False)
    if proc.returncode != 0:
        return [Leak("config", f"{config} cannot be parsed: {proc.stderr.decode(errors='replace').strip()}")]
    leaks = []
    for item in proc.stdout.decode(errors="replace").split("\0"):
        if not item:
            continue
        key, _, value = item.partition("\n")
        lowered = key.lower()
        for pattern, channel, why in _CONFIG_RULES:
            if pattern.search(lowered):
                leaks.append(Leak(channel, f"{config}: {why} {key} = {value}"))
                break
    return leaks

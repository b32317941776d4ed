"""Preparing the grading tree inside a sandbox in one command: apply, neutralise, test_patch.

`tree_script(...)` is a bash script run at /testbed that
1. applies the submitted diff with SWE-bench's fallbacks, each from a clean tree: `git_apply`
   (`git apply`), `git_apply_3way` (`git apply --3way`), `patch_fuzz` (`patch --batch --fuzz=5
   -p1`, no backup files); it stops there if none works; then it lists every path the apply
   actually changed (tracked files that differ from base_commit, and files outside git's view --
   new, ignored or untracked -- created or rewritten since before the first attempt), so the
   grader can refuse a patch whose headers name other paths than the ones git or patch wrote
   (`changed`, a path hex-encoded unless it is plain, so no name can break the line);
2. restores the files the neutralisation plan names to base_commit (deletes those absent at base);
3. applies `test_patch` (`git apply`, then `patch --fuzz=5`);
4. lists which of the candidate test files exist.
Each outcome is a marker line (`@@PG-<nonce> <what> ...`) on its output; `parse_tree_output` reads
them back. One command instead of four saves a sandbox round trip per step.
"""

from __future__ import annotations

import posixpath
import secrets
import shlex
from dataclasses import dataclass, field

GIT = "git -c safe.directory='*' -c core.hooksPath=/dev/null"
APPLY_METHODS: list[tuple[str, str]] = [
    ("git_apply", GIT + " apply --verbose --whitespace=nowarn {p}"),
    ("git_apply_3way", GIT + " apply --verbose --whitespace=nowarn --3way {p}"),
    ("patch_fuzz", "patch --batch --fuzz=5 -p1 --no-backup-if-mismatch -i {p}"),
]
TEST_PATCH_METHODS = [APPLY_METHODS[0], APPLY_METHODS[2]]
RESET = GIT + " reset --hard -q && " + GIT + " clean -fdq"


@dataclass
class TreeResult:
    method: str | None = None  # how the submitted diff applied (None: it did not, or there was none)
    apply_failed: bool = False
    restore_failed: list[str] = field(default_factory=list)
    test_patch_ok: bool | None = None  # None: no test_patch
    present: set[str] = field(default_factory=set)
    changed: set[str] | None = None  # paths the apply changed (None: not listed, e.g. no patch or it broke)


def new_marker() -> str:
    return f"@@PG-{secrets.token_hex(6)}"


def tree_script(marker: str, base: str, *, patch_path: str | None, restore: list[str], test_patch_path: str | None,
                candidates: list[str]) -> str:
    q = shlex.quote
    lines = ["set -u"]
    if patch_path:
        snapshot = posixpath.dirname(patch_path) + "/tree"
        lines.append(f"{_SNAPSHOT} > {q(snapshot + '.before')}")
        attempts = []
        for index, (name, template) in enumerate(APPLY_METHODS):
            command = template.format(p=q(patch_path))
            prefix = f"{RESET} && " if index else ""
            attempts.append(f"if {prefix}{command}; then echo '{marker} method {name}'; else")
        lines.append(" ".join(attempts) + f" echo '{marker} apply_failed'; exit 0; " + "fi; " * len(APPLY_METHODS))
        lines.append(_list_changed(marker, base, snapshot))
    for path in restore:
        lines.append(f"if {GIT} cat-file -e {q(base)}:{q(path)} 2>/dev/null; then {GIT} checkout -q {q(base)} -- {q(path)} "
                     f"|| echo '{marker} restore_failed '{q(path)}; else rm -rf -- {q(path)}; fi")
    if test_patch_path:
        tries = " || ".join(f"{{ {template.format(p=q(test_patch_path))}; }}" for _, template in TEST_PATCH_METHODS)
        lines.append(f"if {tries}; then echo '{marker} test_patch ok'; else echo '{marker} test_patch failed'; fi")
    if candidates:
        lines.append("for f in " + " ".join(q(c) for c in candidates) + f"; do [ -e \"$f\" ] && echo '{marker} present '\"$f\"; done")
    # The grader's scratch files go before any test runs: the test patch left at a path the sandbox
    # shows is the hidden tests in plain text (stop 48: a library that globbed for it and read its
    # expected values got reward 1 on both runners, no test file opened).
    scratch = [p for p in (patch_path, test_patch_path) if p]
    if patch_path:
        snapshot = posixpath.dirname(patch_path) + "/tree"
        scratch += [snapshot + ".before", snapshot + ".after"]
    if scratch:
        folders = sorted({posixpath.dirname(p) for p in scratch})
        lines.append("rm -f -- " + " ".join(q(p) for p in scratch) + "; rmdir -- " + " ".join(q(f) for f in folders) + " 2>/dev/null")
    lines.append("true")
    return "\n".join(lines)


# Every file outside .git with its mtime and size, one per line (a name holding a tab or a newline
# breaks its line: the pieces then match no path the patch names, so it is refused). Not sorted:
# `_NEW_LINES` compares the two snapshots as sets in one awk process (before: sort twice, comm and
# cut, three processes more, ~0.7 ms each here).
_SNAPSHOT = "find . -path ./.git -prune -o ! -type d -printf '%P\\t%T@\\t%s\\n'"
_NEW_LINES = "LC_ALL=C awk -F '\\t' 'FILENAME == ARGV[1] {seen[$0]; next} !($0 in seen) {print $1}'"


def _list_changed(marker: str, base: str, snapshot: str) -> str:
    """Bash that prints `<marker> changed <hex path>` (`changed_plain <path>` for a plain one) for each
    path the apply changed: tracked paths that differ from base (git's view, so `git reset --hard`
    between attempts is not a change), and untracked paths (ignored ones included: a .gitignore
    cannot hide them) that are new or rewritten since the snapshot taken before the first attempt."""
    q = shlex.quote
    # A plain name (letters, digits, `._/+-`: every path of nearly every patch) goes as it is; any
    # other is hex-encoded. Why: `od` and `tr` in a subshell cost ~2 ms a path in the sandbox.
    emit = (f"if [[ $p =~ ^[A-Za-z0-9._/+-]+$ ]]; then printf '%s changed_plain %s\\n' '{marker}' \"$p\"; "
            f"else printf '%s changed %s\\n' '{marker}' \"$(printf '%s' \"$p\" | od -An -v -tx1 | tr -d ' \\n')\"; fi")
    # The tracked paths git listed are remembered (`__pg_listed`), so the untracked check skips them:
    # one `git ls-files` less per file the patch edits (~1.5 ms each in the sandbox).
    return "\n".join([
        f"{_SNAPSHOT} > {q(snapshot + '.after')}",
        "declare -A __pg_listed=()",
        f"while IFS= read -r -d '' p; do __pg_listed[$p]=1; {emit}; done < <("
        f"{GIT} -c core.quotepath=off diff --no-ext-diff --no-renames --name-only -z {q(base)} --)",
        f"{_NEW_LINES} {q(snapshot + '.before')} {q(snapshot + '.after')} | while IFS= read -r p; do "
        f"[[ -n ${{__pg_listed[$p]+x}} ]] && continue; "
        f"GIT_LITERAL_PATHSPECS=1 {GIT} ls-files --error-unmatch -- \"$p\" >/dev/null 2>&1 || {emit}; done",
        f"echo '{marker} changed_listed'",
    ])


def parse_tree_output(marker: str, output: str) -> TreeResult:
    result = TreeResult()
    for line in output.splitlines():
        if not line.startswith(marker + " "):
            continue
        what, _, rest = line[len(marker) + 1 :].partition(" ")
        if what == "method":
            result.method = rest.strip()
        elif what == "apply_failed":
            result.apply_failed = True
        elif what == "restore_failed":
            result.restore_failed.append(rest)
        elif what == "test_patch":
            result.test_patch_ok = rest.strip() == "ok"
        elif what == "present":
            result.present.add(rest)
        elif what == "changed_listed":
            result.changed = result.changed if result.changed is not None else set()
        elif what == "changed_plain":
            if result.changed is None:
                result.changed = set()
            result.changed.add(rest)
        elif what == "changed":
            if result.changed is None:
                result.changed = set()
            try:
                result.changed.add(bytes.fromhex(rest.strip()).decode("utf-8", errors="surrogateescape"))
            except ValueError:
                result.changed.add(rest)
    return result

"""Every leak channel, one by one and all together: scrub removes it, check catches it.

For each channel a leak is planted (1) in a source repository, which is then scrubbed: the
result must pass an independent audit (not `check`) and `check`, and the source must be
byte-for-byte unchanged; and (2) in a clean scrubbed repository, which `check` must flag under
the expected channel.
"""

from __future__ import annotations

import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from patchgym.scrubber import check, scrub
from patchgym.scrubber.git import git_text, run_git
from patchgym.scrubber.sample_history import SampleHistory, build_sample_history, git, snapshot

FIXED_TEXT = "    if value > high:\n"


@dataclass
class Plot:
    """Where to plant: REPO, knowing the sample history and a full source to borrow objects from."""

    repo: Path
    history: SampleHistory
    full_source: Path

    @property
    def base(self) -> str:
        return self.history.base

    @property
    def tip(self) -> str:
        return self.history.future[-1]

    def git(self, *args: str, stdin: bytes | None = None) -> str:
        return git(self.repo, *args, stdin=stdin, date=9)

    @property
    def git_dir(self) -> Path:
        return self.repo / ".git"

    def bring_future(self) -> None:
        """Make the future's objects present (unreferenced) in REPO."""
        if run_git(["cat-file", "-e", self.tip], cwd=self.repo, check=False).returncode != 0:
            self.git("fetch", "-q", "--no-write-fetch-head", "--no-tags", str(self.full_source), self.tip)

    def pack_future(self) -> Path:
        """Put the future's objects in a pack of their own (loose copies removed); return the .pack."""
        self.bring_future()
        listing = self.git("rev-list", "--objects", "--no-object-names", self.tip, f"^{self.base}")
        name = self.git("pack-objects", "-q", str(self.git_dir / "objects/pack/pack"), stdin=(listing + "\n").encode())
        self.git("prune-packed")
        return self.git_dir / f"objects/pack/pack-{name}.pack"


def audit_scrubbed(dest: Path, source: Path, base: str) -> list[str]:
    """What makes DEST differ from a repository holding BASE of SOURCE and nothing else."""
    problems = []
    git_dir = dest / ".git"
    extra = {entry.name for entry in git_dir.iterdir()} - {"HEAD", "config", "index", "info", "objects", "refs"}
    if extra:
        problems.append(f"unexpected git dir entries {sorted(extra)}")
    if any((git_dir / "info").iterdir()):
        problems.append("info/ is not empty")
    refs = sorted(p.relative_to(git_dir).as_posix() for p in (git_dir / "refs").rglob("*") if not p.is_dir())
    if refs != ["refs/heads/main"]:
        problems.append(f"refs are {refs}")
    elif (git_dir / "refs/heads/main").read_text().strip() != base:
        problems.append("main is not base")
    if (git_dir / "HEAD").read_text() != "ref: refs/heads/main\n":
        problems.append("HEAD is not a symbolic ref to main")
    objects_dir = git_dir / "objects"
    for entry in objects_dir.iterdir():
        if entry.name == "info":
            if any(entry.iterdir()):
                problems.append(f"objects/info holds {sorted(p.name for p in entry.iterdir())}")
        elif entry.name == "pack":
            odd = [p.name for p in entry.iterdir() if p.suffix not in (".pack", ".idx", ".rev")]
            if odd:
                problems.append(f"pack dir holds {odd}")
        elif len(entry.name) != 2:
            problems.append(f"objects/ holds {entry.name}")
    stored = set(git_text(["cat-file", "--batch-all-objects", "--batch-check=%(objectname)"], cwd=dest).split())
    wanted = set(git_text(["rev-list", "--objects", "--no-object-names", base], cwd=source).split())
    if stored != wanted:
        problems.append(f"{len(stored - wanted)} objects too many, {len(wanted - stored)} missing")
    keys = {line.split("=")[0] for line in git_text(["config", "-f", str(git_dir / "config"), "--list"]).splitlines()}
    allowed = {"core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates"}
    allowed.add("extensions.objectformat")  # sha256 repositories
    if keys - allowed:
        problems.append(f"config has {sorted(keys - allowed)}")
    status = git_text(["status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=dest)
    if status:
        problems.append(f"working tree not clean: {status}")
    if git_text(["rev-parse", "HEAD^{tree}"], cwd=dest) != git_text(["rev-parse", f"{base}^{{tree}}"], cwd=source):
        problems.append("tree differs from base")
    return problems


# ---- the channels: each plants one leak; the set is what check must report -------------------


def plant_branch(p: Plot) -> None:
    p.bring_future()
    p.git("branch", "feature", p.tip)


def plant_tag(p: Plot) -> None:
    p.bring_future()
    p.git("tag", "v1.1", p.tip)


def plant_annotated_tag_at_base(p: Plot) -> None:
    p.git("tag", "-a", "v1.0", "-m", "v1.0 (clamp gets fixed in 1.1: use > high)", p.base)


def plant_remote(p: Plot) -> None:
    p.bring_future()
    p.git("remote", "add", "origin", "https://example.invalid/calc.git")
    p.git("update-ref", "refs/remotes/origin/main", p.tip)
    p.git("symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")


def plant_remote_url_only(p: Plot) -> None:
    p.git("config", "remote.upstream.url", "/srv/git/calc.git")
    p.git("config", "branch.main.remote", "upstream")


def plant_notes(p: Plot) -> None:
    p.git("notes", "add", "-f", "-m", "fixed upstream: use > high", p.base)


def plant_replace(p: Plot) -> None:
    p.bring_future()
    p.git("replace", "-f", p.base, p.history.future[0])


def plant_original(p: Plot) -> None:
    p.bring_future()
    p.git("update-ref", "refs/original/refs/heads/main", p.tip)


def plant_stash(p: Plot) -> None:
    target = p.repo / p.history.fixed_path
    original = target.read_text()
    target.write_text(original.replace("value >= high + 1", "value > high"))
    p.git("stash", "push", "-q", "-m", "the fix")
    if target.read_text() != original:
        target.write_text(original)


def plant_bisect(p: Plot) -> None:
    p.bring_future()
    p.git("bisect", "start", p.tip, p.base)


def plant_worktree(p: Plot) -> None:
    p.bring_future()
    p.git("worktree", "add", "-q", "--detach", str(p.repo.parent / f"{p.repo.name}-wt"), p.tip)


def plant_reflog(p: Plot) -> None:
    p.bring_future()
    line = f"{p.base} {p.tip} Someone <s@example.invalid> 1700000000 +0000\tcommit: Release 1.1\n"
    (p.git_dir / "logs").mkdir(exist_ok=True)
    with (p.git_dir / "logs/HEAD").open("a") as handle:
        handle.write(line)
    gone = p.git_dir / "logs/refs/heads/gone"
    gone.parent.mkdir(parents=True, exist_ok=True)
    gone.write_text(line)


def plant_head_files(p: Plot) -> None:
    p.bring_future()
    for name in ("FETCH_HEAD", "ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD"):
        (p.git_dir / name).write_text(f"{p.tip}\t\tbranch 'main' of https://example.invalid/calc\n")


def plant_merge_state(p: Plot) -> None:
    (p.git_dir / "MERGE_MSG").write_text("Merge branch 'fix-clamp': use > high\n")
    (p.git_dir / "rebase-merge").mkdir()
    (p.git_dir / "rebase-merge/message").write_text("Fix clamp at the upper bound\n")


def plant_packed_refs(p: Plot) -> None:
    p.bring_future()
    p.git("update-ref", "refs/tags/packed-future", p.tip)
    p.git("pack-refs", "--all")


def plant_alternates(p: Plot) -> None:
    lender = p.repo.parent / f"{p.repo.name}-lender.git"
    run_git(["clone", "-q", "--bare", "--no-local", str(p.full_source), str(lender)])
    (p.git_dir / "objects/info/alternates").write_text(f"{lender / 'objects'}\n")


def plant_hooks(p: Plot) -> None:
    hooks = p.git_dir / "hooks"
    hooks.mkdir(exist_ok=True)
    for name in ("post-checkout", "pre-commit"):
        hook = hooks / name
        hook.write_text("#!/bin/sh\necho 'the fix: use > high'\n")
        hook.chmod(hook.stat().st_mode | stat.S_IXUSR)


def plant_hooks_path(p: Plot) -> None:
    p.git("config", "core.hooksPath", str(p.repo.parent / "elsewhere-hooks"))


def plant_rerere(p: Plot) -> None:
    entry = p.git_dir / "rr-cache" / ("ab" * 20)
    entry.mkdir(parents=True)
    (entry / "preimage").write_text("<<<<<<<\n    if value >= high + 1:\n=======\n" + FIXED_TEXT + ">>>>>>>\n")
    (entry / "postimage").write_text(FIXED_TEXT)


def plant_dangling_blob(p: Plot) -> None:
    fixed = (p.repo / p.history.fixed_path).read_text().replace("value >= high + 1", "value > high")
    p.git("hash-object", "-w", "--stdin", stdin=fixed.encode())


def plant_dangling_commit(p: Plot) -> None:
    p.git("commit-tree", f"{p.base}^{{tree}}", "-p", p.base, "-m", "Fix clamp (lost commit)")


def plant_packed_unreachable(p: Plot) -> None:
    p.pack_future()


def plant_pack_without_index(p: Plot) -> None:
    pack = p.pack_future()
    for suffix in (".idx", ".rev"):
        pack.with_suffix(suffix).unlink(missing_ok=True)


def plant_commit_graph(p: Plot) -> None:
    p.bring_future()
    p.git("update-ref", "refs/heads/tmp-graph", p.tip)
    p.git("commit-graph", "write", "--reachable")
    p.git("update-ref", "-d", "refs/heads/tmp-graph")
    if p.repo != p.full_source:
        shutil.rmtree(p.git_dir / "logs", ignore_errors=True)
        # (fails, harmlessly, when another channel planted a ref git cannot parse)
        run_git(["prune", "--expire=now"], cwd=p.repo, check=False)


def plant_multi_pack_index(p: Plot) -> None:
    p.pack_future()
    p.git("multi-pack-index", "write")


def plant_grafts(p: Plot) -> None:
    p.bring_future()
    (p.git_dir / "info").mkdir(exist_ok=True)
    (p.git_dir / "info/grafts").write_text(f"{p.base} {p.tip}\n")


def plant_shallow(p: Plot) -> None:
    p.bring_future()
    (p.git_dir / "shallow").write_text(f"{p.history.future[0]}\n")


def plant_ignored_file(p: Plot) -> None:
    (p.git_dir / "info").mkdir(exist_ok=True)
    with (p.git_dir / "info/exclude").open("a") as handle:
        handle.write("*.patch\n")
    (p.repo / "fix.patch").write_text(p.history.fix_patch)


def plant_staged_fix(p: Plot) -> None:
    target = p.repo / p.history.fixed_path
    original = target.read_text()
    target.write_text(original.replace("value >= high + 1", "value > high"))
    p.git("add", p.history.fixed_path)
    target.write_text(original)


def plant_modules(p: Plot) -> None:
    module = p.git_dir / "modules/vendor"
    module.mkdir(parents=True)
    (module / "HEAD").write_text(f"{'cd' * 20}\n")


def plant_config_include(p: Plot) -> None:
    p.git("config", "include.path", str(p.repo.parent / "extra.gitconfig"))


def plant_other_namespace(p: Plot) -> None:
    p.bring_future()
    p.git("update-ref", "refs/pull/1/head", p.tip)


def plant_invalid_ref_name(p: Plot) -> None:
    p.bring_future()
    (p.git_dir / "refs/heads/bad..name").write_text(f"{p.tip}\n")


def plant_quarantine(p: Plot) -> None:
    quarantine = p.git_dir / "objects/incoming-Xy12ab"
    quarantine.mkdir()
    (quarantine / "note").write_text(FIXED_TEXT)


def plant_unknown_file(p: Plot) -> None:
    (p.git_dir / "lfs").mkdir()
    (p.git_dir / "lfs/fixed-ops.py").write_text(FIXED_TEXT)


CHANNELS: dict[str, tuple[Callable[[Plot], None], set[str]]] = {
    "branch": (plant_branch, {"branches"}),
    "tag": (plant_tag, {"tags"}),
    "annotated-tag": (plant_annotated_tag_at_base, {"tags", "objects"}),
    "remote": (plant_remote, {"remotes"}),
    "remote-url": (plant_remote_url_only, {"remotes"}),
    "notes": (plant_notes, {"notes", "objects"}),
    "replace": (plant_replace, {"replace"}),
    "original": (plant_original, {"original"}),
    "stash": (plant_stash, {"stash", "reflogs", "objects"}),
    "bisect": (plant_bisect, {"bisect", "HEAD"}),
    "worktree": (plant_worktree, {"worktrees"}),
    "reflog": (plant_reflog, {"reflogs"}),
    "head-files": (plant_head_files, {"head-files"}),
    "merge-state": (plant_merge_state, {"state"}),
    "packed-refs": (plant_packed_refs, {"tags"}),
    "alternates": (plant_alternates, {"alternates", "objects"}),
    "hooks": (plant_hooks, {"hooks"}),
    "hooks-path": (plant_hooks_path, {"hooks"}),
    "rerere": (plant_rerere, {"rerere"}),
    "dangling-blob": (plant_dangling_blob, {"objects", "post-image"}),
    "dangling-commit": (plant_dangling_commit, {"objects"}),
    "packed-unreachable": (plant_packed_unreachable, {"objects", "post-image"}),
    "pack-without-index": (plant_pack_without_index, {"objects"}),
    "commit-graph": (plant_commit_graph, {"commit-graph"}),
    "multi-pack-index": (plant_multi_pack_index, {"multi-pack-index", "objects"}),
    "grafts": (plant_grafts, {"grafts"}),
    "shallow": (plant_shallow, {"shallow"}),
    "ignored-file": (plant_ignored_file, {"worktree"}),
    "staged-fix": (plant_staged_fix, {"index", "objects", "post-image"}),
    "modules": (plant_modules, {"modules"}),
    "config-include": (plant_config_include, {"config"}),
    "other-namespace": (plant_other_namespace, {"refs"}),
    "invalid-ref-name": (plant_invalid_ref_name, {"branches"}),
    "quarantine": (plant_quarantine, {"objects"}),
    "unknown-file": (plant_unknown_file, {"unknown"}),
}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleHistory:
    return build_sample_history(tmp_path_factory.mktemp("sample") / "calc")


def copy_of(sample: SampleHistory, where: Path) -> Path:
    shutil.copytree(sample.repo, where, symlinks=True)
    return where


def clean_scrub(sample: SampleHistory, tmp_path: Path) -> Path:
    dest = tmp_path / "clean"
    scrub(sample.repo, dest, sample.base)
    return dest


def test_sample_source_really_holds_the_future(sample: SampleHistory) -> None:
    """The planted channels only prove something if the source has a future to leak."""
    result = check(sample.repo, sample.base, forbid_patch=sample.fix_patch)
    assert {"branches", "HEAD", "objects", "post-image", "reflogs"} <= set(result.channels())


def test_clean_scrub_passes_audit_and_check(sample: SampleHistory, tmp_path: Path) -> None:
    dest = clean_scrub(sample, tmp_path)
    assert audit_scrubbed(dest, sample.repo, sample.base) == []
    result = check(dest, sample.base, forbid_patch=sample.fix_patch)
    assert result.ok, result.leaks
    assert result.objects_checked == len(
        git_text(["rev-list", "--objects", sample.base], cwd=sample.repo).splitlines()
    )


@pytest.mark.parametrize("channel", sorted(CHANNELS))
def test_scrub_removes_channel_and_leaves_source_untouched(
    channel: str, sample: SampleHistory, tmp_path: Path
) -> None:
    plant, _ = CHANNELS[channel]
    source = copy_of(sample, tmp_path / "src")
    plant(Plot(source, sample, sample.repo))
    before = snapshot(source)
    dest = tmp_path / "dest"
    result = scrub(source, dest, sample.base)
    assert snapshot(source) == before, "the source changed"
    assert result.head == sample.base
    assert audit_scrubbed(dest, sample.repo, sample.base) == []
    verdict = check(dest, sample.base, forbid_patch=sample.fix_patch)
    assert verdict.ok, verdict.leaks


@pytest.mark.parametrize("channel", sorted(CHANNELS))
def test_check_catches_channel_in_unscrubbed_repo(channel: str, sample: SampleHistory, tmp_path: Path) -> None:
    plant, expected = CHANNELS[channel]
    repo = clean_scrub(sample, tmp_path)
    plant(Plot(repo, sample, sample.repo))
    result = check(repo, sample.base, forbid_patch=sample.fix_patch)
    assert not result.ok
    missing = expected - set(result.channels())
    assert not missing, f"{channel}: no {missing} leak among {result.leaks}"


def test_check_names_packed_refs_as_the_place(sample: SampleHistory, tmp_path: Path) -> None:
    repo = clean_scrub(sample, tmp_path)
    plant_packed_refs(Plot(repo, sample, sample.repo))
    details = [leak.detail for leak in check(repo, sample.base).leaks if leak.channel == "tags"]
    assert any("packed-refs" in detail and "refs/tags/packed-future" in detail for detail in details)


def test_check_places_unreachable_objects_in_their_pack(sample: SampleHistory, tmp_path: Path) -> None:
    repo = clean_scrub(sample, tmp_path)
    pack = plant_and_return_pack(repo, sample)
    details = [leak.detail for leak in check(repo, sample.base).leaks if leak.channel == "objects"]
    assert any(sample.future[-1] in detail and pack.name in detail for detail in details)


def plant_and_return_pack(repo: Path, sample: SampleHistory) -> Path:
    return Plot(repo, sample, sample.repo).pack_future()


def test_all_channels_at_once(sample: SampleHistory, tmp_path: Path) -> None:
    source = copy_of(sample, tmp_path / "src")
    # commit-graph prunes and is not written beside grafts or replace refs: it goes first;
    # pack-without-index hides a pack from git: it goes last.
    order = sorted(CHANNELS, key=lambda name: (name != "commit-graph", name == "pack-without-index"))
    for name in order:
        CHANNELS[name][0](Plot(source, sample, sample.repo))
    before = snapshot(source)
    dest = tmp_path / "dest"
    scrub(source, dest, sample.base[:10])
    assert snapshot(source) == before
    assert audit_scrubbed(dest, sample.repo, sample.base) == []
    assert check(dest, sample.base, forbid_patch=sample.fix_patch).ok

    planted = clean_scrub(sample, tmp_path)
    for name in order:
        if name in ("worktree", "bisect"):  # both move or share HEAD; covered one by one above
            continue
        CHANNELS[name][0](Plot(planted, sample, sample.repo))
    result = check(planted, sample.base, forbid_patch=sample.fix_patch)
    expected = set().union(*(CHANNELS[name][1] for name in order if name not in ("worktree", "bisect")))
    assert expected <= set(result.channels())

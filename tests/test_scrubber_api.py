"""scrub() and check() beyond single channels: base SHAs, bad input, bundles, bare and linked
sources, squash, and the forbidden patch (including the injected-bug ancestor)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchgym.scrubber import ScrubError, check, scrub
from patchgym.scrubber.git import git_text, run_git
from patchgym.scrubber.postimages import post_images
from patchgym.scrubber.sample_history import SampleHistory, build_sample_history, git, snapshot

from .test_scrubber_channels import audit_scrubbed


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleHistory:
    return build_sample_history(tmp_path_factory.mktemp("sample") / "calc")


@pytest.fixture(scope="module")
def injected(tmp_path_factory: pytest.TempPathFactory) -> SampleHistory:
    return build_sample_history(tmp_path_factory.mktemp("injected") / "calc", injected_bug=True)


# ---- base SHAs ------------------------------------------------------------------------------


def test_abbreviated_base_resolves(sample: SampleHistory, tmp_path: Path) -> None:
    result = scrub(sample.repo, tmp_path / "d", sample.base[:7].upper())
    assert result.base == sample.base and result.head == sample.base
    assert check(tmp_path / "d", sample.base[:7]).ok


def test_branch_spelled_like_the_base_prefix_does_not_win(sample: SampleHistory, tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(sample.repo, source)
    prefix = sample.base[:8]
    git(source, "branch", prefix, sample.future[-1])  # git itself would prefer this ref
    result = scrub(source, tmp_path / "d", prefix)
    assert result.head == sample.base
    assert audit_scrubbed(tmp_path / "d", sample.repo, sample.base) == []


@pytest.mark.parametrize(
    ("base", "message"),
    [
        ("HEAD~1", "not a commit SHA"),
        ("main", "not a commit SHA"),
        ("abc", "not a commit SHA"),
        ("", "not a commit SHA"),
        ("0123456789abcdef0123456789abcdef01234567", "is not a commit in"),
        ("fedcba98", "is not a commit in"),
    ],
)
def test_bad_base_is_a_clear_error(base: str, message: str, sample: SampleHistory, tmp_path: Path) -> None:
    with pytest.raises(ScrubError, match=message):
        scrub(sample.repo, tmp_path / "d", base)
    assert not (tmp_path / "d").exists(), "a failed scrub left its destination behind"
    with pytest.raises(ScrubError, match=message):
        check(sample.repo, base)


def test_base_naming_a_tree_is_refused(sample: SampleHistory, tmp_path: Path) -> None:
    tree = git_text(["rev-parse", f"{sample.base}^{{tree}}"], cwd=sample.repo)
    with pytest.raises(ScrubError, match="is a tree"):
        scrub(sample.repo, tmp_path / "d", tree)


def test_ambiguous_prefix_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "many"
    run_git(["init", "-q", str(repo)])
    stream = []
    for number in range(1500):
        stream.append(
            f"commit refs/heads/main\ncommitter A <a@b> {1_700_000_000 + number} +0000\n"
            f"data {len(str(number))}\n{number}\n"
        )
    git(repo, "fast-import", "--quiet", stdin="".join(stream).encode())
    commits = git_text(["rev-list", "main"], cwd=repo).split()
    seen: dict[str, str] = {}
    prefix = next(c[:4] for c in commits if seen.setdefault(c[:4], c) != c)
    with pytest.raises(ScrubError, match="ambiguous"):
        scrub(repo, tmp_path / "d", prefix)


# ---- destinations and sources -----------------------------------------------------------------


def test_existing_empty_destination_is_used_and_emptied_again_on_failure(sample: SampleHistory, tmp_path: Path) -> None:
    dest = tmp_path / "empty"
    dest.mkdir()
    with pytest.raises(ScrubError):
        scrub(sample.repo, dest, "0" * 40)
    assert dest.is_dir() and not any(dest.iterdir())
    scrub(sample.repo, dest, sample.base)
    assert audit_scrubbed(dest, sample.repo, sample.base) == []


def test_unusable_destinations(sample: SampleHistory, tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    with pytest.raises(ScrubError, match="not empty"):
        scrub(sample.repo, full, sample.base)
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ScrubError, match="not a directory"):
        scrub(sample.repo, a_file, sample.base)
    source = tmp_path / "src"
    shutil.copytree(sample.repo, source)
    with pytest.raises(ScrubError, match="inside the source"):
        scrub(source, source / "nested", sample.base)


def test_unusable_sources(sample: SampleHistory, tmp_path: Path) -> None:
    with pytest.raises(ScrubError, match="does not exist"):
        scrub(tmp_path / "missing", tmp_path / "d", sample.base)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ScrubError, match="not a git repository"):
        scrub(plain, tmp_path / "d", sample.base)
    not_bundle = tmp_path / "notes.txt"
    not_bundle.write_text("hello\n")
    with pytest.raises(ScrubError, match="neither a git repository nor a git bundle"):
        scrub(not_bundle, tmp_path / "d", sample.base)
    with pytest.raises(ScrubError, match="not a git repository"):
        scrub(sample.repo / "calc", tmp_path / "d", sample.base)
    assert not (tmp_path / "d").exists()


def test_bare_source(sample: SampleHistory, tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    run_git(["clone", "-q", "--mirror", str(sample.repo), str(bare)])
    before = snapshot(bare)
    scrub(bare, tmp_path / "d", sample.base)
    assert snapshot(bare) == before
    assert audit_scrubbed(tmp_path / "d", sample.repo, sample.base) == []


def test_linked_worktree_source(sample: SampleHistory, tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(sample.repo, source)
    linked = tmp_path / "linked"
    git(source, "worktree", "add", "-q", "--detach", str(linked), sample.future[0])
    scrub(linked, tmp_path / "d", sample.base)
    assert audit_scrubbed(tmp_path / "d", sample.repo, sample.base) == []
    assert not check(linked, sample.base).ok


def test_sha256_source(tmp_path: Path) -> None:
    repo = tmp_path / "sha256"
    run_git(["init", "-q", "--object-format=sha256", str(repo)])
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "a.txt").write_text("two\n")
    git(repo, "commit", "-q", "-am", "two")
    result = scrub(repo, tmp_path / "d", base[:12])
    assert len(result.head) == 64 and result.head == base
    assert audit_scrubbed(tmp_path / "d", repo, base) == []
    assert check(tmp_path / "d", base).ok
    assert "objects" in check(repo, base).channels()


# ---- bundles ----------------------------------------------------------------------------------


def test_bundle_source(sample: SampleHistory, tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(sample.repo, source)
    git(source, "tag", "v1.1", sample.future[-1])
    git(source, "notes", "add", "-m", "fixed later", sample.base)
    bundle = tmp_path / "all.bundle"
    git(source, "bundle", "create", "-q", str(bundle), "--all")
    before = snapshot(tmp_path)
    scrub(bundle, tmp_path / "d", sample.base[:9])
    after = snapshot(tmp_path)
    assert {path: entry for path, entry in after.items() if not path.startswith("d")} == before
    assert audit_scrubbed(tmp_path / "d", sample.repo, sample.base) == []
    assert check(tmp_path / "d", sample.base, forbid_patch=sample.fix_patch).ok
    assert not any(p.name.startswith(".patchgym-unbundle") for p in tmp_path.iterdir())


def test_bundle_with_missing_prerequisites_is_refused(sample: SampleHistory, tmp_path: Path) -> None:
    bundle = tmp_path / "tail.bundle"
    git(sample.repo, "bundle", "create", "-q", str(bundle), f"{sample.base}..main")
    with pytest.raises(ScrubError, match="bundle"):
        scrub(bundle, tmp_path / "d", sample.future[-1])
    assert not (tmp_path / "d").exists()


# ---- squash -----------------------------------------------------------------------------------


def test_squash_keeps_one_root_commit_with_base_tree(sample: SampleHistory, tmp_path: Path) -> None:
    result = scrub(sample.repo, tmp_path / "d", sample.base, squash=True)
    dest = tmp_path / "d"
    assert result.squashed and result.head != sample.base
    assert git_text(["rev-list", "--all"], cwd=dest).split() == [result.head]
    assert git_text(["rev-list", "--parents", "-n1", "HEAD"], cwd=dest) == result.head
    base_tree = git_text(["rev-parse", f"{sample.base}^{{tree}}"], cwd=sample.repo)
    assert git_text(["rev-parse", "HEAD^{tree}"], cwd=dest) == base_tree
    stored = set(git_text(["cat-file", "--batch-all-objects", "--batch-check=%(objectname)"], cwd=dest).split())
    listing = git_text(["rev-list", "--objects", "--no-object-names", "--no-walk", base_tree], cwd=sample.repo)
    tree_objects = set(listing.split())
    assert stored == tree_objects | {result.head}
    assert git_text(["status", "--porcelain", "--ignored"], cwd=dest) == ""
    by_base = check(dest, sample.base[:10], forbid_patch=sample.fix_patch)
    assert by_base.ok and by_base.squashed_from == sample.base and by_base.base_commit == result.head
    assert check(dest, result.head).ok
    again = scrub(sample.repo, tmp_path / "again", sample.base, squash=True)
    assert again.head == result.head, "squash ids should be stable for the same base"


def test_squash_trailer_does_not_excuse_other_commits(sample: SampleHistory, tmp_path: Path) -> None:
    result = scrub(sample.repo, tmp_path / "d", sample.base, squash=True)
    dest = tmp_path / "d"
    (dest / "x.txt").write_text("later\n")
    git(dest, "add", "x.txt")
    git(dest, "commit", "-q", "-m", "later")
    with pytest.raises(ScrubError, match="is not a commit in"):
        check(dest, sample.base)  # HEAD is no longer the squash root: base cannot be vouched for
    assert "branches" in check(dest, result.head).channels()


def test_injected_bug_ancestor_is_a_post_image_leak_and_squash_hides_it(
    injected: SampleHistory, tmp_path: Path
) -> None:
    kept = tmp_path / "kept"
    scrub(injected.repo, kept, injected.base)
    assert check(kept, injected.base).ok  # nothing after base survives ...
    verdict = check(kept, injected.base, forbid_patch=injected.fix_patch)
    assert not verdict.ok  # ... but base's parent holds the fixed file
    details = [leak.detail for leak in verdict.leaks if leak.channel == "post-image"]
    assert details and all(injected.fixed_path in detail for detail in details)
    assert any(injected.ancestors[-1] in detail for detail in details)
    squashed = tmp_path / "squashed"
    scrub(injected.repo, squashed, injected.base, squash=True)
    assert check(squashed, injected.base, forbid_patch=injected.fix_patch).ok


# ---- forbidden patches --------------------------------------------------------------------------


def test_post_images_cover_new_renamed_and_changed_files_only(sample: SampleHistory, tmp_path: Path) -> None:
    repo = tmp_path / "src"
    shutil.copytree(sample.repo, repo)
    git(repo, "checkout", "-q", "-b", "wide", sample.base)
    (repo / "calc/ops.py").write_text((repo / "calc/ops.py").read_text() + "\n# fixed\n")
    (repo / "calc/new_module.py").write_text("VALUE = 1\n")
    git(repo, "mv", "README.md", "README.rst")
    (repo / "tests/test_ops.py").unlink()
    (repo / "calc/__init__.py").chmod(0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "wide change")
    patch = git_text(["diff", "-M", "--binary", sample.base, "HEAD"], cwd=repo) + "\n"
    images = post_images(repo, sample.base, patch)
    expected = {
        git_text(["rev-parse", f"HEAD:{path}"], cwd=repo): path for path in ("calc/ops.py", "calc/new_module.py")
    }
    assert images == expected  # the renamed README and the mode-only change reveal nothing new


def test_forbidden_patch_that_does_not_apply(sample: SampleHistory, tmp_path: Path) -> None:
    wrong = sample.fix_patch.replace("value >= high + 1", "value >= high + 2")
    with pytest.raises(ScrubError, match="does not apply"):
        check(sample.repo, sample.base, forbid_patch=wrong)
    with pytest.raises(ScrubError, match="changes no files"):
        check(sample.repo, sample.base, forbid_patch="not a diff at all\n")


def test_forbidden_post_image_found_among_unreachable_objects(sample: SampleHistory, tmp_path: Path) -> None:
    scrub(sample.repo, tmp_path / "d", sample.base)
    dest = tmp_path / "d"
    fixed = (dest / sample.fixed_path).read_text().replace("value >= high + 1", "value > high")
    git(dest, "hash-object", "-w", "--stdin", stdin=fixed.encode())
    verdict = check(dest, sample.base, forbid_patch=sample.fix_patch)
    assert any(leak.channel == "post-image" and "unreachable" in leak.detail for leak in verdict.leaks)


# ---- check's own options --------------------------------------------------------------------


def test_check_on_a_bare_repository(sample: SampleHistory, tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    run_git(["init", "-q", "--bare", "--template=", str(bare)])
    git(bare, "fetch", "-q", "--no-write-fetch-head", str(sample.repo), f"{sample.base}:refs/heads/main")
    git(bare, "symbolic-ref", "HEAD", "refs/heads/main")
    shutil.rmtree(bare / "logs", ignore_errors=True)
    assert check(bare, sample.base).ok
    git(bare, "fetch", "-q", "--no-write-fetch-head", str(sample.repo), f"{sample.future[-1]}:refs/tags/v2")
    assert {"tags", "objects"} <= set(check(bare, sample.base).channels())


def test_check_can_skip_the_working_tree(sample: SampleHistory, tmp_path: Path) -> None:
    scrub(sample.repo, tmp_path / "d", sample.base)
    (tmp_path / "d" / "build.log").write_text("built\n")
    assert "worktree" in check(tmp_path / "d", sample.base).channels()
    assert check(tmp_path / "d", sample.base, include_worktree=False).ok


def test_check_does_not_touch_the_repository(sample: SampleHistory, tmp_path: Path) -> None:
    repo = tmp_path / "src"
    shutil.copytree(sample.repo, repo)
    (repo / "README.md").write_text("edited\n")  # a stat change git status would like to record
    before = snapshot(repo)
    check(repo, sample.base, forbid_patch=sample.fix_patch)
    assert snapshot(repo) == before


# ---- repositories made by ordinary git use ------------------------------------------------------


def test_ordinary_repository_without_a_future_is_clean(tmp_path: Path) -> None:
    repo = tmp_path / "plain"
    run_git(["init", "-q", "-b", "main", str(repo)])  # default templates: hooks samples, description
    for number in range(3):
        (repo / "f.txt").write_text(f"{number}\n")
        git(repo, "add", "f.txt")
        git(repo, "commit", "-q", "-m", f"commit {number}", date=number)
    base = git(repo, "rev-parse", "HEAD")
    assert check(repo, base).ok, check(repo, base).leaks
    (repo / "f.txt").write_text("future\n")
    git(repo, "commit", "-q", "-am", "the future", date=5)
    git(repo, "reset", "-q", "--hard", base)
    result = check(repo, base)
    assert {"reflogs", "objects", "head-files", "state"} <= set(result.channels())


def test_base_reachable_from_no_ref(sample: SampleHistory, tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(sample.repo, source)
    (source / "extra.txt").write_text("only in a dangling commit\n")
    git(source, "add", "extra.txt")
    tree = git(source, "write-tree")
    dangling = git(source, "commit-tree", tree, "-p", sample.base, "-m", "dangling")
    git(source, "reset", "-q", "--hard")
    scrub(source, tmp_path / "d", dangling)
    assert audit_scrubbed(tmp_path / "d", source, dangling) == []
    assert (tmp_path / "d" / "extra.txt").exists()


def test_submodule_links_and_eol_attributes_survive_a_clean_check(tmp_path: Path) -> None:
    repo = tmp_path / "src"
    run_git(["init", "-q", "-b", "main", str(repo)])
    (repo / ".gitattributes").write_text("*.txt text eol=crlf\n")
    (repo / "notes.txt").write_text("line one\nline two\n")
    (repo / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (repo / "run.sh").chmod(0o755)
    (repo / "link").symlink_to("notes.txt")
    git(repo, "add", "-A")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{'ab' * 20},vendor/lib")
    git(repo, "commit", "-q", "-m", "files of every kind")
    base = git(repo, "rev-parse", "HEAD")
    dest = tmp_path / "d"
    scrub(repo, dest, base)
    assert (dest / "notes.txt").read_bytes() == b"line one\r\nline two\r\n"
    assert (dest / "link").is_symlink() and (dest / "run.sh").stat().st_mode & 0o100
    assert check(dest, base).ok, check(dest, base).leaks


def test_source_borrowing_all_its_objects(sample: SampleHistory, tmp_path: Path) -> None:
    """A `clone --shared` holds no objects of its own; the scrub must still stand alone."""
    shared = tmp_path / "shared"
    run_git(["clone", "-q", "--shared", str(sample.repo), str(shared)])
    assert not list((shared / ".git/objects/pack").iterdir())
    before = snapshot(shared)
    scrub(shared, tmp_path / "d", sample.base)
    assert snapshot(shared) == before
    assert audit_scrubbed(tmp_path / "d", sample.repo, sample.base) == []
    assert "alternates" in check(shared, sample.base).channels()


def test_shallow_source(sample: SampleHistory, tmp_path: Path) -> None:
    shallow = tmp_path / "shallow"
    run_git(["clone", "-q", "--depth", "2", f"file://{sample.repo}", str(shallow)])
    base = git(shallow, "rev-parse", "HEAD~1")
    assert base == sample.future[0]
    before = snapshot(shallow)
    dest = tmp_path / "d"
    scrub(shallow, dest, base)
    assert snapshot(shallow) == before
    assert git_text(["rev-list", "--all"], cwd=dest).split() == [base]
    assert (dest / ".git/shallow").read_text().split() == [base]
    assert not (dest / ".git/FETCH_HEAD").exists() and not (dest / ".git/logs").exists()
    assert check(dest, base).ok, check(dest, base).leaks
    squashed = tmp_path / "sq"
    result = scrub(shallow, squashed, base, squash=True)
    assert check(squashed, base).ok and result.head != base


def test_housekeeping_keeps_a_clean_repository_clean(sample: SampleHistory, tmp_path: Path) -> None:
    """gc, pack-refs, commit-graph, multi-pack-index, bitmaps, server info: no false leaks."""
    dest = tmp_path / "d"
    scrub(sample.repo, dest, sample.base)
    git(dest, "gc", "-q", "--prune=now")
    git(dest, "pack-refs", "--all")
    git(dest, "commit-graph", "write", "--reachable")
    git(dest, "repack", "-a", "-d", "-q", "--write-bitmap-index")
    git(dest, "multi-pack-index", "write")
    git(dest, "update-server-info")
    git(dest, "status")
    assert (dest / ".git/packed-refs").exists() and (dest / ".git/info/refs").exists()
    result = check(dest, sample.base, forbid_patch=sample.fix_patch)
    assert result.ok, result.leaks
    git(dest, "tag", "v0", sample.ancestors[0])
    git(dest, "update-server-info")
    assert {"tags", "refs"} <= set(check(dest, sample.base).channels())


def test_paths_with_colons_quotes_and_spaces(sample: SampleHistory, tmp_path: Path) -> None:
    odd = tmp_path / 'we:ird "dir" with\\ spaces'
    odd.mkdir()
    source = odd / "src:repo"
    shutil.copytree(sample.repo, source)
    bundle = odd / "all:of it.bundle"
    git(source, "bundle", "create", "-q", str(bundle), "--all")
    for origin, name in ((source, "d:1"), (bundle, "d 2")):
        dest = odd / name
        scrub(origin, dest, sample.base)
        assert audit_scrubbed(dest, sample.repo, sample.base) == []
        assert check(dest, sample.base, forbid_patch=sample.fix_patch).ok


def test_files_hidden_from_status_are_still_seen(sample: SampleHistory, tmp_path: Path) -> None:
    dest = tmp_path / "d"
    scrub(sample.repo, dest, sample.base)
    target = dest / sample.fixed_path
    git(dest, "update-index", "--assume-unchanged", sample.fixed_path)
    target.write_text(target.read_text().replace("value >= high + 1", "value > high"))
    assert git_text(["status", "--porcelain"], cwd=dest) == ""  # git itself no longer tells
    details = [leak.detail for leak in check(dest, sample.base).leaks if leak.channel == "index"]
    assert any("assume-unchanged" in detail and sample.fixed_path in detail for detail in details)

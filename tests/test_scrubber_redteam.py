"""Red-team attempts on the scrubber beyond the listed channels.

Source shapes and leaks the channel tests do not plant: `.git` files, alternates chains,
submodules, odd refs and index extensions, pack side files, nested repositories in the working
tree, stat tricks, text in files git keeps around. Each attempt plants the leak (1) in a source
that is then scrubbed, where the result must pass the independent audit and `check`, and/or
(2) in a clean scrubbed repository, where `check` must report it.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from pathlib import Path

import pytest

from patchgym.scrubber import ScrubError, check, scrub
from patchgym.scrubber.git import git_text, run_git
from patchgym.scrubber.sample_history import SampleHistory, build_sample_history, git, snapshot

from .test_scrubber_channels import FIXED_TEXT, Plot, audit_scrubbed, clean_scrub, copy_of


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleHistory:
    return build_sample_history(tmp_path_factory.mktemp("sample") / "calc")


def fixed_content(sample: SampleHistory) -> str:
    return (sample.repo / sample.fixed_path).read_text()  # main is at the future's tip


def assert_scrub_clean(source: Path, sample: SampleHistory, dest: Path) -> None:
    before = snapshot(source)
    result = scrub(source, dest, sample.base)
    assert snapshot(source) == before, "the source changed"
    assert result.head == sample.base
    assert audit_scrubbed(dest, sample.repo, sample.base) == []
    verdict = check(dest, sample.base, forbid_patch=sample.fix_patch)
    assert verdict.ok, verdict.leaks


def caught(repo: Path, sample: SampleHistory, channel: str | None = None, *, text: str = "") -> list[str]:
    result = check(repo, sample.base, forbid_patch=sample.fix_patch)
    assert not result.ok, "check saw nothing"
    details = [leak.detail for leak in result.leaks if channel is None or leak.channel == channel]
    assert details, f"no {channel} leak among {result.leaks}"
    if text:
        assert any(text in detail for detail in details), details
    return details


# ---- source shapes -------------------------------------------------------------------------


def test_source_with_a_git_file_pointing_elsewhere(sample: SampleHistory, tmp_path: Path) -> None:
    """A work tree whose `.git` is a `gitdir:` file (as `--separate-git-dir` makes)."""
    work = tmp_path / "work"
    store = tmp_path / "store.git"
    run_git(["clone", "-q", "--no-local", "--separate-git-dir", str(store), str(sample.repo), str(work)])
    assert (work / ".git").is_file()
    assert_scrub_clean(work, sample, tmp_path / "d")
    assert {"remotes", "branches"} & set(check(work, sample.base).channels())


def test_source_with_a_relative_alternates_chain(sample: SampleHistory, tmp_path: Path) -> None:
    """Objects two alternates away (relative paths), a pack mixing past and future at the end."""
    lender = tmp_path / "lender.git"
    run_git(["clone", "-q", "--bare", "--no-local", str(sample.repo), str(lender)])
    middle = tmp_path / "middle.git"
    run_git(["init", "-q", "--bare", str(middle)])
    (middle / "objects/info/alternates").write_text("../../lender.git/objects\n")
    top = tmp_path / "top.git"
    run_git(["init", "-q", "--bare", str(top)])
    (top / "objects/info/alternates").write_text("../../middle.git/objects\n")
    (top / "objects/info/http-alternates").write_text("https://example.invalid/calc.git/objects\n")
    git(top, "update-ref", "refs/heads/main", sample.future[-1])
    assert_scrub_clean(top, sample, tmp_path / "d")
    assert "alternates" in check(top, sample.base).channels()


def test_source_whose_only_pack_mixes_past_and_future_with_deltas(sample: SampleHistory, tmp_path: Path) -> None:
    """The post-image kept only as a delta base of the buggy file (pack-objects would reuse it)."""
    source = tmp_path / "src.git"
    run_git(["init", "-q", "--bare", str(source)])
    fixed_blob = git(sample.repo, "rev-parse", f"{sample.future[0]}:{sample.fixed_path}")
    buggy_blob = git(sample.repo, "rev-parse", f"{sample.base}:{sample.fixed_path}")
    everything = git(sample.repo, "rev-list", "--objects", "--no-object-names", "--all")
    # fixed first, so the buggy blob can only be stored as a delta against it
    ordered = [fixed_blob] + [oid for oid in everything.split() if oid != fixed_blob]
    name = git(sample.repo, "pack-objects", "-q", "--window=50", str(source / "objects/pack/pack"),
               stdin=("\n".join(ordered) + "\n").encode())
    git(source, "update-ref", "refs/heads/main", sample.base)
    verify = git_text(["verify-pack", "-v", str(source / f"objects/pack/pack-{name}.idx")])
    assert buggy_blob in verify
    assert_scrub_clean(source, sample, tmp_path / "d")
    assert "objects" in check(source, sample.base).channels()


def test_source_with_a_submodule_whose_store_holds_the_future(sample: SampleHistory, tmp_path: Path) -> None:
    """base's tree links a submodule; .git/modules holds a repository with the whole future."""
    source = tmp_path / "super"
    run_git(["init", "-q", "-b", "main", str(source)])
    (source / ".gitmodules").write_text('[submodule "calc"]\n\tpath = calc\n\turl = ../calc\n')
    git(source, "update-index", "--add", "--cacheinfo", f"160000,{sample.future[-1]},calc")
    git(source, "add", ".gitmodules")
    git(source, "commit", "-q", "-m", "vendor calc")
    base = git(source, "rev-parse", "HEAD")
    module_store = source / ".git/modules/calc"
    run_git(["clone", "-q", "--bare", "--no-local", str(sample.repo), str(module_store)])
    dest = tmp_path / "d"
    scrub(source, dest, base)
    assert not (dest / ".git/modules").exists()
    assert not (dest / "calc").exists() or not any((dest / "calc").iterdir())
    assert run_git(["cat-file", "-e", sample.future[-1]], cwd=dest, check=False).returncode != 0
    assert check(dest, base).ok, check(dest, base).leaks
    assert "modules" in check(source, base).channels()


def test_sha256_source_with_a_future(tmp_path: Path) -> None:
    repo = tmp_path / "src"
    run_git(["init", "-q", "--object-format=sha256", "-b", "main", str(repo)])
    (repo / "a.txt").write_text("buggy\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "a.txt").write_text("fixed\n")
    git(repo, "commit", "-q", "-am", "fix")
    git(repo, "tag", "-a", "v2", "-m", "fixed")
    git(repo, "notes", "add", "-m", "fixed", base)
    git(repo, "stash", "list")
    dest = tmp_path / "d"
    scrub(repo, dest, base)
    assert len(git_text(["rev-list", "--objects", "--all"], cwd=dest).splitlines()) == 3
    assert check(dest, base).ok, check(dest, base).leaks
    assert {"branches", "tags", "notes", "objects"} <= set(check(repo, base).channels())
    fixed_blob = git(repo, "hash-object", "-w", "--stdin", stdin=b"fixed, loose\n")
    assert any(fixed_blob in leak.detail for leak in check(repo, base).leaks)


@pytest.mark.slow
def test_source_with_many_refs_and_odd_namespaces(sample: SampleHistory, tmp_path: Path) -> None:
    source = copy_of(sample, tmp_path / "src")
    tip = sample.future[-1]
    lines = [f"create refs/keep-around/{n:05d} {tip}" for n in range(10_000)]
    for name in ("refs/prefetch/remotes/origin/main", "refs/pull/7/head", "refs/changes/01/1/1",
                 "refs/namespaces/x/refs/heads/y", "refs/for/main"):
        lines.append(f"create {name} {tip}")
    git(source, "update-ref", "--stdin", stdin=("\n".join(lines) + "\n").encode())
    git(source, "symbolic-ref", "refs/heads/alias", "refs/namespaces/x/refs/heads/y")
    git(source, "pack-refs", "--all")
    git(source, "checkout", "-q", "--detach", tip)
    assert_scrub_clean(source, sample, tmp_path / "d")
    result = check(source, sample.base)
    assert result.refs_checked >= 10_005
    assert {"refs", "HEAD", "branches", "remotes"} <= set(result.channels())


def test_tags_on_trees_and_blobs_of_the_future(sample: SampleHistory, tmp_path: Path) -> None:
    repo = clean_scrub(sample, tmp_path)
    plot = Plot(repo, sample, sample.repo)
    plot.bring_future()
    tree = git(repo, "rev-parse", f"{sample.future[0]}^{{tree}}")
    blob = git(repo, "rev-parse", f"{sample.future[0]}:{sample.fixed_path}")
    git(repo, "tag", "tree-tag", tree)
    git(repo, "tag", "-a", "blob-tag", "-m", "the fixed ops.py", blob)
    caught(repo, sample, "tags", text="tree-tag")
    caught(repo, sample, "post-image")


def test_future_commit_whose_tree_is_a_past_tree(sample: SampleHistory, tmp_path: Path) -> None:
    """Every object but the commit itself is reachable: only the commit's message can leak."""
    repo = clean_scrub(sample, tmp_path)
    tree = git(repo, "rev-parse", f"{sample.base}^{{tree}}")
    commit = git(repo, "commit-tree", tree, "-p", sample.base, "-m", "Revert; the fix is value > high")
    caught(repo, sample, "objects", text=commit)


def test_annotated_tag_on_a_past_commit_quoting_the_fix(sample: SampleHistory, tmp_path: Path) -> None:
    source = copy_of(sample, tmp_path / "src")
    git(source, "tag", "-a", "v1.0", "-m", f"v1.0\n\nknown bug, fixed by:\n{sample.fix_patch}", sample.ancestors[0])
    assert_scrub_clean(source, sample, tmp_path / "d")
    repo = clean_scrub(sample, tmp_path)
    git(repo, "tag", "-a", "v1.0", "-m", f"fixed by:\n{sample.fix_patch}", sample.ancestors[0])
    caught(repo, sample, "tags")
    caught(repo, sample, "objects")


def test_state_files_of_every_operation(sample: SampleHistory, tmp_path: Path) -> None:
    source = copy_of(sample, tmp_path / "src")
    repo = clean_scrub(sample, tmp_path)
    for target in (source / ".git", repo / ".git"):
        (target / "COMMIT_EDITMSG").write_text("Fix clamp at the upper bound\n")
        (target / "SQUASH_MSG").write_text("use > high\n")
        (target / "sequencer").mkdir()
        (target / "sequencer/todo").write_text(f"pick {sample.future[0]} Fix clamp\n")
        (target / "gc.log").write_text("warning: there are too many unreachable loose objects\n")
        (target / "description").write_text("calc: clamp fixed in 1.1 (use > high)\n")
        fetch_head = "".join(f"{sample.future[-1]}\tnot-for-merge\tbranch 'b{n}' of x\n" for n in range(50))
        (target / "FETCH_HEAD").write_text(fetch_head)
    assert_scrub_clean(source, sample, tmp_path / "d")
    channels = set(check(repo, sample.base).channels())
    assert {"state", "head-files", "unknown"} <= channels


def test_config_with_remotes_rewrites_and_includes(sample: SampleHistory, tmp_path: Path) -> None:
    source = copy_of(sample, tmp_path / "src")
    repo = clean_scrub(sample, tmp_path)
    for target in (source, repo):
        git(target, "config", "url.https://example.invalid/.insteadOf", "gh:")
        git(target, "config", "includeIf.gitdir:/.path", str(tmp_path / "inc"))
        git(target, "config", "branch.main.merge", "refs/heads/fix")
    assert_scrub_clean(source, sample, tmp_path / "d")
    assert {"remotes", "config"} <= set(check(repo, sample.base).channels())


def test_branch_description_in_config(sample: SampleHistory, tmp_path: Path) -> None:
    """`git branch --edit-description` keeps free text in config: a message channel of its own."""
    source = copy_of(sample, tmp_path / "src")
    repo = clean_scrub(sample, tmp_path)
    for target in (source, repo):
        git(target, "config", "branch.main.description", "clamp: use > high instead of >= high + 1")
    assert_scrub_clean(source, sample, tmp_path / "d")
    caught(repo, sample, "config", text="branch.main.description")


def test_resolve_undo_and_split_index_with_future_blobs(sample: SampleHistory, tmp_path: Path) -> None:
    source = copy_of(sample, tmp_path / "src")
    git(source, "checkout", "-q", sample.base)
    git(source, "update-index", "--split-index")
    fixed = git(source, "hash-object", "-w", "--stdin", stdin=fixed_content(sample).encode())
    # a conflicted entry whose "theirs" is the fix, then resolved: the REUC extension keeps it
    info = f"0 {'0' * 40}\t{sample.fixed_path}\n100644 {fixed} 3\t{sample.fixed_path}\n"
    base_blob = git(source, "rev-parse", f"{sample.base}:{sample.fixed_path}")
    info += f"100644 {base_blob} 2\t{sample.fixed_path}\n"
    git(source, "update-index", "--index-info", stdin=info.encode())
    git(source, "add", sample.fixed_path)
    assert fixed in git(source, "ls-files", "--resolve-undo")
    assert_scrub_clean(source, sample, tmp_path / "d")
    caught(source, sample, "post-image")


def test_stray_shared_index_file(sample: SampleHistory, tmp_path: Path) -> None:
    """A `sharedindex.<hex>` no index links to can hold anything."""
    repo = clean_scrub(sample, tmp_path)
    (repo / ".git" / f"sharedindex.{'ab' * 20}").write_text(fixed_content(sample))
    caught(repo, sample, text="sharedindex")


def test_linked_shared_index_is_not_a_leak(sample: SampleHistory, tmp_path: Path) -> None:
    repo = clean_scrub(sample, tmp_path)
    git(repo, "update-index", "--split-index")
    assert list((repo / ".git").glob("sharedindex.*"))
    assert check(repo, sample.base).ok, check(repo, sample.base).leaks


def test_pack_side_files_without_a_pack(sample: SampleHistory, tmp_path: Path) -> None:
    """.keep/.bitmap/.rev/.mtimes/.promisor files are only meaningful next to their pack."""
    repo = clean_scrub(sample, tmp_path)
    pack_dir = repo / ".git/objects/pack"
    for suffix in ("keep", "bitmap", "rev", "mtimes"):
        (pack_dir / f"pack-{'cd' * 20}.{suffix}").write_text(fixed_content(sample))
    details = caught(repo, sample, "objects")
    for suffix in ("keep", "bitmap", "rev", "mtimes"):
        assert any(f".{suffix}" in detail for detail in details), suffix


def test_keep_file_with_text(sample: SampleHistory, tmp_path: Path) -> None:
    repo = clean_scrub(sample, tmp_path)
    pack = next((repo / ".git/objects/pack").glob("*.pack"))
    pack.with_suffix(".keep").write_text(fixed_content(sample))
    caught(repo, sample, "objects", text=".keep")


def test_packs_listing_with_text(sample: SampleHistory, tmp_path: Path) -> None:
    repo = clean_scrub(sample, tmp_path)
    git(repo, "update-server-info")
    with (repo / ".git/objects/info/packs").open("a") as handle:
        handle.write(FIXED_TEXT)
    caught(repo, sample, "objects", text="info/packs")


def test_cruft_pack_with_mtimes_and_a_keep(sample: SampleHistory, tmp_path: Path) -> None:
    source = copy_of(sample, tmp_path / "src")
    git(source, "checkout", "-q", "-B", "main", sample.base)
    git(source, "reflog", "expire", "--expire=now", "--all")
    proc = run_git(["repack", "-q", "-d", "--cruft", "--cruft-expiration=never"], cwd=source, check=False)
    if proc.returncode != 0:
        pytest.skip(f"this git cannot write cruft packs: {proc.stderr.decode().strip()}")
    assert list((source / ".git/objects/pack").glob("*.mtimes"))
    for pack in (source / ".git/objects/pack").glob("*.pack"):
        pack.with_suffix(".keep").write_text("")
    assert_scrub_clean(source, sample, tmp_path / "d")
    caught(source, sample, "objects", text=sample.future[-1])


def test_hook_sample_with_arbitrary_text(sample: SampleHistory, tmp_path: Path) -> None:
    """A file named `*.sample` is inert, but it can still be read."""
    repo = clean_scrub(sample, tmp_path)
    (repo / ".git/hooks").mkdir()
    (repo / ".git/hooks/ops.py.sample").write_text(fixed_content(sample))
    caught(repo, sample, "hooks", text="ops.py.sample")


def test_nested_git_directory_hidden_from_status(sample: SampleHistory, tmp_path: Path) -> None:
    """git status never looks inside a directory named `.git` below the top level."""
    repo = clean_scrub(sample, tmp_path)
    hidden = repo / "calc" / ".git"
    hidden.mkdir()
    (hidden / "ops.py").write_text(fixed_content(sample))
    assert git_text(["status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=repo) == ""
    caught(repo, sample, "worktree", text="calc/.git")


def test_populated_submodule_holding_the_future(sample: SampleHistory, tmp_path: Path) -> None:
    """A checked-out submodule at its recorded commit is clean to git status, its store is not."""
    source = tmp_path / "super"
    run_git(["init", "-q", "-b", "main", str(source)])
    (source / ".gitmodules").write_text('[submodule "vendor"]\n\tpath = vendor\n\turl = ../calc\n')
    git(source, "update-index", "--add", "--cacheinfo", f"160000,{sample.base},vendor")
    git(source, "add", ".gitmodules")
    git(source, "commit", "-q", "-m", "vendor calc")
    base = git(source, "rev-parse", "HEAD")
    run_git(["clone", "-q", "--no-local", str(sample.repo), str(source / "vendor")])
    git(source / "vendor", "checkout", "-q", "--detach", sample.base)
    assert git_text(["status", "--porcelain", "--ignored"], cwd=source) == ""
    leaks = check(source, base).leaks
    assert any("vendor" in leak.detail for leak in leaks), leaks


def test_files_inside_an_unpopulated_submodule_path(tmp_path: Path) -> None:
    """git status does not look inside a gitlink's directory, populated or not."""
    source = tmp_path / "src"
    run_git(["init", "-q", "-b", "main", str(source)])
    (source / "a.txt").write_text("a\n")
    git(source, "add", "a.txt")
    git(source, "update-index", "--add", "--cacheinfo", f"160000,{'ab' * 20},vendor/lib")
    git(source, "commit", "-q", "-m", "link")
    base = git(source, "rev-parse", "HEAD")
    dest = tmp_path / "d"
    scrub(source, dest, base)
    assert check(dest, base).ok, check(dest, base).leaks
    (dest / "vendor/lib").mkdir(parents=True, exist_ok=True)
    (dest / "vendor/lib/fix.patch").write_text(FIXED_TEXT)
    assert git_text(["status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=dest) == ""
    leaks = check(dest, base).leaks
    assert any("vendor/lib" in leak.detail for leak in leaks), leaks


def test_same_size_edit_with_restored_mtime(sample: SampleHistory, tmp_path: Path) -> None:
    """A tracked file rewritten to the same size with its old mtime and ctime checks turned off."""
    repo = clean_scrub(sample, tmp_path)
    target = repo / "README.md"
    old = 1_600_000_000
    os.utime(target, (old, old))
    git(repo, "update-index", "--refresh")  # the index now records the old mtime
    original = target.read_text()
    forged = original.replace("Numeric", "Nuxeric")
    assert len(forged) == len(original)
    git(repo, "config", "core.trustctime", "false")
    target.write_text(forged)
    os.utime(target, (old, old))
    assert git_text(["status", "--porcelain"], cwd=repo) == ""  # git itself no longer tells
    caught(repo, sample, "worktree", text="README.md")


def test_hashing_every_tracked_file_handles_odd_names_links_and_eol(tmp_path: Path) -> None:
    repo = tmp_path / "src"
    run_git(["init", "-q", "-b", "main", str(repo)])
    (repo / ".gitattributes").write_text("*.txt text eol=crlf\n")
    names = ['"quoted".txt', "new\nline.txt", "plain.txt"]
    for name in names:
        (repo / name).write_text("one\ntwo\n")
    (repo / "link").symlink_to("plain.txt")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "odd names")
    base = git(repo, "rev-parse", "HEAD")
    dest = tmp_path / "d"
    scrub(repo, dest, base)
    assert check(dest, base).ok, check(dest, base).leaks
    (dest / "link").unlink()
    (dest / "link").symlink_to("other.txt")
    target = dest / "new\nline.txt"
    stamp = target.stat()
    target.write_bytes(target.read_bytes().replace(b"two", b"TWO"))
    os.utime(target, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    details = " ".join(leak.detail for leak in check(dest, base).leaks)
    assert "link" in details and "new\nline.txt" in details


def test_worktree_with_its_own_head_and_index(sample: SampleHistory, tmp_path: Path) -> None:
    source = copy_of(sample, tmp_path / "src")
    linked = tmp_path / "wt"
    git(source, "worktree", "add", "-q", "-b", "fix", str(linked), sample.future[0])
    (linked / "extra.txt").write_text(FIXED_TEXT)
    git(linked, "add", "extra.txt")
    assert_scrub_clean(linked, sample, tmp_path / "d")
    assert {"worktrees", "branches"} <= set(check(linked, sample.base).channels())


def test_reflog_lines_of_allowed_refs_with_messages(sample: SampleHistory, tmp_path: Path) -> None:
    """A reflog of main naming only base may still carry a message from elsewhere."""
    repo = clean_scrub(sample, tmp_path)
    (repo / ".git/logs/refs/heads").mkdir(parents=True)
    line = f"{'0' * 40} {sample.base} A <a@b> 1700000000 +0000\tcommit: Fix clamp: use > high\n"
    (repo / ".git/logs/refs/heads/main").write_text(line)
    caught(repo, sample, "reflogs")


def test_loose_objects_with_odd_permissions(sample: SampleHistory, tmp_path: Path) -> None:
    source = copy_of(sample, tmp_path / "src")
    for path in (source / ".git/objects").rglob("*"):
        if path.is_file():
            path.chmod(0o000)
    assert_scrub_clean(source, sample, tmp_path / "d")


# ---- round two: bytes git keeps but never shows --------------------------------------------


def _index_with_extension(index: bytes, signature: bytes, payload: bytes, hash_len: int) -> bytes:
    """INDEX with one more extension before its trailer, and a recomputed checksum."""
    body = index[:-hash_len] + signature + len(payload).to_bytes(4, "big") + payload
    digest = hashlib.sha1(body) if hash_len == 20 else hashlib.sha256(body)
    return body + digest.digest()


def test_unknown_optional_index_extension(sample: SampleHistory, tmp_path: Path) -> None:
    """git ignores optional index extensions it does not know (signature starting A-Z)."""
    repo = clean_scrub(sample, tmp_path)
    index = repo / ".git/index"
    index.write_bytes(_index_with_extension(index.read_bytes(), b"ZFIX", fixed_content(sample).encode(), 20))
    assert git_text(["status", "--porcelain"], cwd=repo) == ""  # git reads it happily
    caught(repo, sample, "index", text="ZFIX")


@pytest.mark.parametrize("shape", ["v4", "v3-intent-to-add", "untracked-cache", "split", "fsmonitor-free"])
def test_index_shapes_git_writes_are_read_without_false_leaks(
    shape: str, sample: SampleHistory, tmp_path: Path
) -> None:
    repo = clean_scrub(sample, tmp_path)
    if shape == "v4":
        git(repo, "update-index", "--index-version", "4")
    elif shape == "v3-intent-to-add":
        (repo / "new.txt").write_text("new\n")
        git(repo, "add", "-N", "new.txt")
    elif shape == "untracked-cache":
        git(repo, "update-index", "--untracked-cache", "--force-untracked-cache")
        run_git(["-c", "core.untrackedCache=true", "status"], cwd=repo)
    elif shape == "split":
        git(repo, "update-index", "--split-index", "--index-version", "4")
    else:
        git(repo, "update-index", "--index-version", "2")
    version = int.from_bytes((repo / ".git/index").read_bytes()[4:8], "big")
    assert version == {"v4": 4, "v3-intent-to-add": 3, "split": 4}.get(shape, version)
    odd = [leak for leak in check(repo, sample.base).leaks if "extension" in leak.detail or "bytes" in leak.detail]
    assert odd == []


def test_commit_graph_chain_with_text(sample: SampleHistory, tmp_path: Path) -> None:
    repo = clean_scrub(sample, tmp_path)
    git(repo, "commit-graph", "write", "--reachable", "--split")
    chain = repo / ".git/objects/info/commit-graphs/commit-graph-chain"
    assert chain.is_file()
    assert check(repo, sample.base).ok, check(repo, sample.base).leaks
    with chain.open("a") as handle:
        handle.write(FIXED_TEXT)
    caught(repo, sample, "commit-graph", text="commit-graph-chain")


@pytest.mark.parametrize("where", ["config", "info/exclude", "info/attributes"])
def test_comments_in_files_git_keeps(where: str, sample: SampleHistory, tmp_path: Path) -> None:
    """Comment lines are ignored by git and shown by nothing, but an agent can cat them."""
    repo = clean_scrub(sample, tmp_path)
    git(repo, "pack-refs", "--all")
    target = repo / ".git" / where
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a") as handle:
        handle.write(f"# the fix:{FIXED_TEXT}")
    caught(repo, sample, text=where)


def test_text_in_packed_refs(sample: SampleHistory, tmp_path: Path) -> None:
    """Text in the header line is accepted by git; a comment line further down makes git refuse
    the repository, and check fails closed (an error naming the file) rather than passing."""
    repo = clean_scrub(sample, tmp_path)
    git(repo, "pack-refs", "--all")
    packed = repo / ".git/packed-refs"
    lines = packed.read_text().splitlines(keepends=True)
    packed.write_text(lines[0].rstrip("\n") + f" the fix:{FIXED_TEXT}" + "".join(lines[1:]))
    assert git_text(["for-each-ref"], cwd=repo)  # git still reads it
    caught(repo, sample, "refs", text="packed-refs line 1")
    with packed.open("a") as handle:
        handle.write(f"# the fix:{FIXED_TEXT}")
    with pytest.raises(ScrubError, match="packed-refs"):
        check(repo, sample.base)


def test_bytes_hidden_inside_a_pack(sample: SampleHistory, tmp_path: Path) -> None:
    """A pack whose index and checksums agree can still carry bytes no object owns."""
    repo = clean_scrub(sample, tmp_path)
    pack = next((repo / ".git/objects/pack").glob("*.pack"))
    idx = pack.with_suffix(".idx")
    pack.with_suffix(".rev").unlink(missing_ok=True)
    data = pack.read_bytes()
    body = data[:-20] + zlib.compress(fixed_content(sample).encode())
    trailer = hashlib.sha1(body).digest()
    pack.write_bytes(body + trailer)
    index = idx.read_bytes()
    index = index[:-40] + trailer
    idx.write_bytes(index + hashlib.sha1(index).digest())
    assert git_text(["cat-file", "-p", f"{sample.base}:{sample.fixed_path}"], cwd=repo)
    caught(repo, sample, "objects", text=pack.name)


# ---- round three ---------------------------------------------------------------------------


def test_commit_editmsg_with_a_comment_quoting_the_fix(sample: SampleHistory, tmp_path: Path) -> None:
    repo = clean_scrub(sample, tmp_path)
    message = git(repo, "log", "-1", "--format=%B", sample.base)
    (repo / ".git/COMMIT_EDITMSG").write_text(f"{message}\n# Please enter the commit message\n")
    assert check(repo, sample.base).ok, check(repo, sample.base).leaks  # git's own template is fine
    (repo / ".git/COMMIT_EDITMSG").write_text(f"{message}\n# the fix:{FIXED_TEXT}")
    caught(repo, sample, "state", text="COMMIT_EDITMSG")


def test_loose_object_with_bytes_after_its_stream(sample: SampleHistory, tmp_path: Path) -> None:
    """A reachable object stored loose with a second zlib stream appended: walks never read it."""
    repo = clean_scrub(sample, tmp_path)
    blob = git(repo, "rev-parse", f"{sample.base}:README.md")
    content = run_git(["cat-file", "blob", blob], cwd=repo).stdout
    loose = repo / ".git/objects" / blob[:2] / blob[2:]
    loose.parent.mkdir(exist_ok=True)
    raw = b"blob %d\0" % len(content) + content
    loose.write_bytes(zlib.compress(raw) + zlib.compress(fixed_content(sample).encode()))
    caught(repo, sample, "objects", text=blob[2:])


def test_loose_impostor_of_a_reachable_object(sample: SampleHistory, tmp_path: Path) -> None:
    """A loose file named like a reachable blob but holding the fix (git shows the packed copy)."""
    repo = clean_scrub(sample, tmp_path)
    blob = git(repo, "rev-parse", f"{sample.base}:README.md")
    loose = repo / ".git/objects" / blob[:2] / blob[2:]
    loose.parent.mkdir(exist_ok=True)
    fixed = fixed_content(sample).encode()
    loose.write_bytes(zlib.compress(b"blob %d\0" % len(fixed) + fixed))
    caught(repo, sample, "objects", text="not its name")


def test_empty_directories_are_named_nowhere(sample: SampleHistory, tmp_path: Path) -> None:
    """git status does not list empty directories, but their names can be read."""
    repo = clean_scrub(sample, tmp_path)
    (repo / "calc" / "clamp_use_gt_high_not_ge_high_plus_1").mkdir()
    caught(repo, sample, "worktree", text="clamp_use_gt_high")


@pytest.mark.parametrize("where", [".git/config", ".git/objects/pack", "calc/ops.py"])
def test_extended_attributes_carry_text(where: str, sample: SampleHistory, tmp_path: Path) -> None:
    """No git command shows extended attributes; `getfattr` does."""
    repo = clean_scrub(sample, tmp_path)
    try:
        os.setxattr(repo / where, "user.hint", FIXED_TEXT.encode())
    except OSError as exc:
        pytest.skip(f"this filesystem has no user extended attributes: {exc}")
    caught(repo, sample, text="user.hint")


@pytest.mark.parametrize("suffix", ["rev", "mtimes"])
def test_bytes_appended_to_fixed_size_pack_side_files(suffix: str, sample: SampleHistory, tmp_path: Path) -> None:
    repo = clean_scrub(sample, tmp_path)
    pack = next((repo / ".git/objects/pack").glob("*.pack"))
    side = pack.with_suffix(f".{suffix}")
    count = len(git_text(["show-index"], cwd=repo, input=pack.with_suffix(".idx").read_bytes()).splitlines())
    if not side.exists():
        side.write_bytes(b"RIDX" if suffix == "rev" else b"MTME")
        side.write_bytes(side.read_bytes() + bytes(8 + 4 * count + 40))
    assert check(repo, sample.base).ok, check(repo, sample.base).leaks
    with side.open("ab") as handle:
        handle.write(zlib.compress(FIXED_TEXT.encode()))
    caught(repo, sample, "objects", text=side.name)


def test_unparsable_config_is_a_clear_error(sample: SampleHistory, tmp_path: Path) -> None:
    """git refuses the repository; check says why instead of passing or a bare 'not a repository'."""
    repo = clean_scrub(sample, tmp_path)
    with (repo / ".git/config").open("a") as handle:
        handle.write(f"[broken\n{FIXED_TEXT}")
    with pytest.raises(ScrubError, match="bad config"):
        check(repo, sample.base)


def test_notes_on_a_past_commit_holding_the_fix(sample: SampleHistory, tmp_path: Path) -> None:
    source = copy_of(sample, tmp_path / "src")
    repo = clean_scrub(sample, tmp_path)
    for target in (source, repo):
        git(target, "notes", "--ref=review", "add", "-m", f"the fix:\n{sample.fix_patch}", sample.ancestors[0])
    assert_scrub_clean(source, sample, tmp_path / "d")
    assert {"notes", "objects"} <= set(check(repo, sample.base).channels())


def test_gitlink_in_base_naming_a_future_commit_of_the_same_repository(
    sample: SampleHistory, tmp_path: Path
) -> None:
    """Judged not a leak: base's own tree holds only the id; the commit itself does not travel."""
    source = copy_of(sample, tmp_path / "src")
    git(source, "checkout", "-q", "-b", "linked", sample.base)
    git(source, "update-index", "--add", "--cacheinfo", f"160000,{sample.future[0]},self")
    git(source, "commit", "-q", "-m", "link to self")
    base = git(source, "rev-parse", "HEAD")
    dest = tmp_path / "d"
    scrub(source, dest, base)
    assert run_git(["cat-file", "-e", sample.future[0]], cwd=dest, check=False).returncode != 0
    assert check(dest, base).ok, check(dest, base).leaks


def test_past_commit_message_quoting_the_fix_is_history_unless_squashed(
    sample: SampleHistory, tmp_path: Path
) -> None:
    """Judged part of the past (an upstream repository may say anything in its history): a plain
    scrub keeps it, as it keeps every ancestor; `--squash` is the remedy, and it removes it."""
    source = tmp_path / "src"
    run_git(["init", "-q", "-b", "main", str(source)])
    (source / "ops.py").write_text("x >= high + 1\n")
    git(source, "add", "ops.py")
    git(source, "commit", "-q", "-m", "TODO: clamp should use value > high")
    base = git(source, "commit-tree", git(source, "write-tree"), "-p", "HEAD", "-m", "base")
    git(source, "update-ref", "refs/heads/main", base)
    kept, squashed = tmp_path / "kept", tmp_path / "squashed"
    scrub(source, kept, base)
    assert "value > high" in git_text(["log", "--format=%B"], cwd=kept)
    result = scrub(source, squashed, base, squash=True)
    assert "value > high" not in git_text(["log", "--format=%B"], cwd=squashed)
    assert check(squashed, base).ok and result.head != base


@pytest.mark.parametrize(
    "key", ["http.https://example.invalid/calc.git.extraHeader", "credential.https://example.invalid.username"]
)
def test_urls_named_by_config_subsections(key: str, sample: SampleHistory, tmp_path: Path) -> None:
    repo = clean_scrub(sample, tmp_path)
    git(repo, "config", key, "x")
    caught(repo, sample, "remotes", text="example.invalid")


def _with_extra_chunk(data: bytes, header_size: int, chunk_id: bytes, payload: bytes) -> bytes:
    """A chunk-format file (commit-graph, MIDX) with one more chunk, checksums recomputed."""
    count = data[6]
    table_end = header_size + (count + 1) * 12
    table = [
        (data[header_size + i * 12 : header_size + i * 12 + 4],
         int.from_bytes(data[header_size + i * 12 + 4 : header_size + i * 12 + 12], "big"))
        for i in range(count + 1)
    ]
    body = data[table_end : len(data) - 20]
    shift = 12
    rows = [(cid, offset + shift) for cid, offset in table[:-1]]
    rows.append((chunk_id, table[-1][1] + shift))
    rows.append((b"\0\0\0\0", table[-1][1] + shift + len(payload)))
    header = data[:6] + bytes([count + 1]) + data[7:header_size]
    out = header + b"".join(cid + offset.to_bytes(8, "big") for cid, offset in rows) + body + payload
    return out + hashlib.sha1(out).digest()


def test_unknown_chunk_in_a_commit_graph(sample: SampleHistory, tmp_path: Path) -> None:
    repo = clean_scrub(sample, tmp_path)
    git(repo, "commit-graph", "write", "--reachable")
    graph = repo / ".git/objects/info/commit-graph"
    graph.write_bytes(_with_extra_chunk(graph.read_bytes(), 8, b"ZFIX", FIXED_TEXT.encode()))
    assert git_text(["log", "--oneline", "-1"], cwd=repo)  # git still uses it
    caught(repo, sample, "commit-graph", text="ZFIX")


def test_bytes_hidden_in_a_pack_index(sample: SampleHistory, tmp_path: Path) -> None:
    """git tolerates up to 8 bytes an object of unused large-offset table in a version 2 .idx."""
    repo = clean_scrub(sample, tmp_path)
    idx = next((repo / ".git/objects/pack").glob("*.idx"))
    data = idx.read_bytes()
    body = data[:-40] + b"value > high!!!!" + data[-40:-20]
    idx.write_bytes(body + hashlib.sha1(body).digest())
    assert git_text(["cat-file", "-t", sample.base], cwd=repo) == "commit"
    caught(repo, sample, "objects", text=idx.stem)


def test_second_branch_at_base_named_after_the_fix(sample: SampleHistory, tmp_path: Path) -> None:
    """A branch at base points nowhere new, but its name is free text; only one branch may stay."""
    repo = clean_scrub(sample, tmp_path)
    git(repo, "branch", "fix/use-value-gt-high", sample.base)
    caught(repo, sample, "branches", text="fix/use-value-gt-high")
    git(repo, "checkout", "-q", "--detach", sample.base)
    git(repo, "branch", "-D", "main")
    assert check(repo, sample.base).ok, check(repo, sample.base).leaks  # detached, one branch


def test_case_insensitive_config_hides_a_file_from_status(sample: SampleHistory, tmp_path: Path) -> None:
    """With core.ignoreCase=true on a case-sensitive filesystem, readme.md passes for README.md."""
    repo = clean_scrub(sample, tmp_path)
    git(repo, "config", "core.ignoreCase", "true")
    (repo / "readme.md").write_text(fixed_content(sample))
    assert "readme.md" not in git_text(["status", "--porcelain", "--untracked-files=all"], cwd=repo)
    caught(repo, sample, "worktree", text="readme.md")


def test_submodule_change_with_submodules_ignored_by_config(tmp_path: Path) -> None:
    """diff.ignoreSubmodules=all: git 2.39 still shows a staged gitlink change; check must too."""
    repo = tmp_path / "src"
    run_git(["init", "-q", "-b", "main", str(repo)])
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{'ab' * 20},sub")
    git(repo, "commit", "-q", "-m", "link")
    base = git(repo, "rev-parse", "HEAD")
    dest = tmp_path / "d"
    scrub(repo, dest, base)
    git(dest, "config", "diff.ignoreSubmodules", "all")
    git(dest, "update-index", "--cacheinfo", f"160000,{'cd' * 20},sub")
    leaks = check(dest, base).leaks
    assert any(leak.channel == "index" and "sub" in leak.detail for leak in leaks), leaks


def test_symlink_replaced_by_a_file_with_forged_stat(tmp_path: Path) -> None:
    """core.symlinks=false makes a link a plain file holding its target; forged stat data hides
    a rewrite of it from git status."""
    repo = tmp_path / "src"
    run_git(["init", "-q", "-b", "main", str(repo)])
    (repo / "link").symlink_to("target-of-the-link.txt")
    git(repo, "add", "link")
    git(repo, "commit", "-q", "-m", "a link")
    base = git(repo, "rev-parse", "HEAD")
    dest = tmp_path / "d"
    scrub(repo, dest, base)
    git(dest, "config", "core.symlinks", "false")
    git(dest, "config", "core.trustctime", "false")
    link = dest / "link"
    link.unlink()
    link.write_text("target-of-the-link.txt")
    old = 1_600_000_000
    os.utime(link, (old, old))
    git(dest, "update-index", "--refresh")
    link.write_text("value > high".ljust(len("target-of-the-link.txt"), "."))
    os.utime(link, (old, old))
    assert git_text(["status", "--porcelain"], cwd=dest) == ""
    leaks = check(dest, base).leaks
    assert any(leak.channel == "worktree" and "link" in leak.detail for leak in leaks), leaks


def _plant_round_trip_leaks(repo: Path, sample: SampleHistory) -> dict[str, str]:
    """Plant many of the leaks above in one repository; return {what: text its report names}."""
    git_dir = repo / ".git"
    git(repo, "branch", "fix/use-value-gt-high", sample.base)
    git(repo, "config", "branch.main.description", "use > high")
    with (git_dir / "config").open("a") as handle:
        handle.write("# the fix: use > high\n")
    (git_dir / f"sharedindex.{'ab' * 20}").write_text(FIXED_TEXT)
    (git_dir / "COMMIT_EDITMSG").write_text(f"Add clamp\n# the fix:{FIXED_TEXT}")
    hidden = repo / "calc" / ".git"
    hidden.mkdir(exist_ok=True)
    (hidden / "ops.py").write_text(FIXED_TEXT)
    (repo / "calc" / "empty_fix_dir").mkdir()
    index = git_dir / "index"
    index.write_bytes(_index_with_extension(index.read_bytes(), b"ZFIX", FIXED_TEXT.encode(), 20))
    planted = {
        "second branch": "fix/use-value-gt-high",
        "description": "branch.main.description",
        "config comment": "holds a comment",
        "shared index": "sharedindex",
        "editmsg": "COMMIT_EDITMSG",
        "nested .git": "calc/.git",
        "empty dir": "empty_fix_dir",
        "index extension": "ZFIX",
    }
    try:
        os.setxattr(git_dir / "HEAD", "user.hint", b"use > high")
        planted["xattr"] = "user.hint"
    except OSError:
        pass
    return planted


def test_round_trip_leaks_all_at_once(sample: SampleHistory, tmp_path: Path) -> None:
    source = copy_of(sample, tmp_path / "src")
    git(source, "checkout", "-q", "-B", "main", sample.base)
    _plant_round_trip_leaks(source, sample)
    assert_scrub_clean(source, sample, tmp_path / "d")
    repo = clean_scrub(sample, tmp_path)
    planted = _plant_round_trip_leaks(repo, sample)
    details = " | ".join(leak.detail for leak in check(repo, sample.base).leaks)
    missed = [what for what, text in planted.items() if text not in details]
    assert not missed, f"check missed {missed}: {details}"

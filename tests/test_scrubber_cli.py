"""`patchgym scrub` and `patchgym scrub --check`, through click's runner and the real console script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchgym.scrubber.cli import scrub as scrub_command
from patchgym.scrubber.sample_history import SampleHistory, build_sample_history, git

from .test_scrubber_channels import audit_scrubbed


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleHistory:
    return build_sample_history(tmp_path_factory.mktemp("sample") / "calc")


def invoke(*args: str):
    return CliRunner().invoke(scrub_command, [str(arg) for arg in args])


def test_scrub_then_check_clean(sample: SampleHistory, tmp_path: Path) -> None:
    dest = tmp_path / "d"
    result = invoke(sample.repo, dest, "--base", sample.base[:8])
    assert result.exit_code == 0, result.output
    assert sample.base in result.output
    assert audit_scrubbed(dest, sample.repo, sample.base) == []
    patch = tmp_path / "gold.patch"
    patch.write_text(sample.fix_patch)
    checked = invoke("--check", dest, "--base", sample.base, "--forbid", patch)
    assert checked.exit_code == 0, checked.output
    assert checked.output.strip().splitlines() == [checked.output.strip()]  # one line
    assert checked.output.startswith("clean:")


def test_check_prints_leaks_and_exits_1(sample: SampleHistory, tmp_path: Path) -> None:
    patch = tmp_path / "gold.patch"
    patch.write_text(sample.fix_patch)
    result = invoke("--check", sample.repo, "--base", sample.base, "--forbid", patch)
    assert result.exit_code == 1
    for channel in ("branches:", "objects:", "post-image:", "reflogs:"):
        assert channel in result.output
    assert sample.future[-1] in result.output
    assert result.output.strip().splitlines()[-1].startswith("LEAKED:")


def test_squash_from_the_command_line(sample: SampleHistory, tmp_path: Path) -> None:
    result = invoke(sample.repo, tmp_path / "d", "--base", sample.base, "--squash")
    assert result.exit_code == 0, result.output
    assert "squashed" in result.output
    assert invoke("--check", tmp_path / "d", "--base", sample.base).exit_code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{src}", "{tmp}/d", "--base", "nothex"], "not a commit SHA"),
        (["{src}", "{tmp}/d", "--base", "0123abcd"], "is not a commit in"),
        (["{tmp}/missing", "{tmp}/d", "--base", "0123abcd"], "does not exist"),
        (["{src}", "{src}", "--base", "0123abcd"], "not empty"),
        (["--check", "{tmp}/missing", "--base", "0123abcd"], "does not exist"),
        (["--check", "{tmp}", "--base", "0123abcd"], "not a git repository"),
        (["{src}", "--base", "0123abcd"], "give SRC and DEST"),
        (["{src}", "{tmp}/d", "--check", "{src}", "--base", "0123abcd"], "give no SRC or DEST"),
        (["--check", "{src}", "--squash", "--base", "0123abcd"], "--squash only applies"),
        (["{src}", "{tmp}/d", "--base", "0123abcd", "--no-worktree"], "only apply with --check"),
    ],
)
def test_bad_input_is_a_clear_error(args: list[str], message: str, sample: SampleHistory, tmp_path: Path) -> None:
    filled = [arg.format(src=sample.repo, tmp=tmp_path) for arg in args]
    result = invoke(*filled)
    assert result.exit_code in (1, 2), result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_forbid_patch_that_does_not_apply(sample: SampleHistory, tmp_path: Path) -> None:
    patch = tmp_path / "wrong.patch"
    patch.write_text(sample.fix_patch.replace("high + 1", "high + 7"))
    result = invoke("--check", sample.repo, "--base", sample.base, "--forbid", patch)
    assert result.exit_code == 1 and "does not apply" in result.output


def test_console_script_ignores_a_hostile_user_environment(sample: SampleHistory, tmp_path: Path) -> None:
    """Global config, templates with hooks and GIT_* variables must not reach the new repository."""
    home = tmp_path / "home"
    templates = home / "templates"
    (templates / "hooks").mkdir(parents=True)
    hook = templates / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\ntouch \"$HOME/hook-ran\"\n")
    hook.chmod(0o755)
    (templates / "info").mkdir()
    (templates / "info" / "exclude").write_text("*.leak\n")
    (home / ".gitconfig").write_text(
        f"[init]\n\ttemplateDir = {templates}\n[core]\n\thooksPath = {templates / 'hooks'}\n"
        "[remote \"origin\"]\n\turl = https://example.invalid/x.git\n"
        "[fetch]\n\twriteCommitGraph = true\n[core]\n\tlogAllRefUpdates = always\n"
    )
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_TEMPLATE_DIR": str(templates),
        "GIT_DIR": str(sample.repo / ".git"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(sample.repo / ".git" / "objects"),
        "GIT_CONFIG_PARAMETERS": "'core.hookspath'='/tmp'",
    }
    env.pop("GIT_CONFIG_NOSYSTEM", None)
    script = Path(sys.executable).parent / "patchgym"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "patchgym.main"]
    dest = tmp_path / "d"
    proc = subprocess.run(
        [*command, "scrub", str(sample.repo), str(dest), "--base", sample.base],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert not (home / "hook-ran").exists()
    assert audit_scrubbed(dest, sample.repo, sample.base) == []
    checked = subprocess.run(
        [*command, "scrub", "--check", str(dest), "--base", sample.base], env=env, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    git(sample.repo, "status")  # the source is still a working repository

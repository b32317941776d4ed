"""`patchgym scrub`: scrub a repository, or check one (`--check`) and exit 1 on any leak."""

from __future__ import annotations

from pathlib import Path

import click

from patchgym.scrubber.check import check as check_repository
from patchgym.scrubber.errors import ScrubError
from patchgym.scrubber.report import CHANNELS, CheckResult
from patchgym.scrubber.scrub import scrub as scrub_repository

SHOWN_PER_CHANNEL = 20


@click.command(
    "scrub",
    context_settings={"help_option_names": ["-h", "--help"]},
    help=(
        "Write a new repository at DEST holding commit --base of SRC (a repository or .bundle) and "
        "nothing after it; or, with --check REPO, prove that REPO holds nothing after --base."
    ),
)
@click.argument("src", required=False, type=click.Path(path_type=Path))
@click.argument("dest", required=False, type=click.Path(path_type=Path))
@click.option("--base", required=True, metavar="SHA", help="The base commit (full or abbreviated SHA).")
@click.option("--squash", is_flag=True, help="Keep a single root commit with base's tree instead of its history.")
@click.option(
    "--check", "check_path", type=click.Path(path_type=Path), metavar="REPO", help="Check REPO instead of scrubbing."
)
@click.option(
    "--forbid",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="PATCH",
    help="With --check: no blob may hold a post-image of a file this patch changes.",
)
@click.option("--no-worktree", is_flag=True, help="With --check: skip the index and working-tree inspection.")
def scrub(
    src: Path | None,
    dest: Path | None,
    base: str,
    squash: bool,
    check_path: Path | None,
    forbid: Path | None,
    no_worktree: bool,
) -> None:
    try:
        if check_path is not None:
            if src is not None or dest is not None:
                raise click.UsageError("--check takes the repository as its value; give no SRC or DEST")
            if squash:
                raise click.UsageError("--squash only applies when scrubbing, not with --check")
            patch = forbid.read_text(errors="surrogateescape") if forbid else None
            result = check_repository(check_path, base, forbid_patch=patch, include_worktree=not no_worktree)
            _print_check(result)
            if not result.ok:
                raise SystemExit(1)
            return
        if forbid is not None or no_worktree:
            raise click.UsageError("--forbid and --no-worktree only apply with --check")
        if src is None or dest is None:
            raise click.UsageError("give SRC and DEST to scrub, or --check REPO to check")
        result = scrub_repository(src, dest, base, squash=squash)
    except ScrubError as exc:
        raise click.ClickException(str(exc)) from exc
    except OSError as exc:  # e.g. a destination whose parent cannot be written
        raise click.ClickException(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")) from exc
    line = f"scrubbed {src} at {result.base} into {result.dest}: {result.branch} -> {result.head}"
    if result.squashed:
        line += f" (a squashed root commit; grade against {result.head})"
    click.echo(f"{line} in {result.seconds:.2f}s")


def _print_check(result: CheckResult) -> None:
    by_channel: dict[str, list[str]] = {}
    for leak in result.leaks:
        by_channel.setdefault(leak.channel, []).append(leak.detail)
    order = [channel for channel in CHANNELS if channel in by_channel]
    order += sorted(set(by_channel) - set(order))
    for channel in order:
        details = by_channel[channel]
        click.echo(f"{channel}: {len(details)} leak(s)")
        for detail in details[:SHOWN_PER_CHANNEL]:
            click.echo(f"  {detail}")
        if len(details) > SHOWN_PER_CHANNEL:
            click.echo(f"  ... and {len(details) - SHOWN_PER_CHANNEL} more")
    click.echo(result.summary())

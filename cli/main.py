"""The `patchgym` console script: one entry point whose subcommands belong to the layers.

Each layer owns its commands in its own `cli.py` (a click command or group). They are imported
lazily, so `patchgym scrub` does not pay for FastAPI or torch. Errors a user can fix are raised as
`click.ClickException` (or subclasses) by the layers and printed without a traceback.
"""

from __future__ import annotations

import importlib

import click

from patchgym import __version__

# command name -> "module:attribute"; the attribute is a click.Command.
COMMANDS: dict[str, tuple[str, str]] = {
    "scrub": ("patchgym.scrubber.cli:scrub", "Scrub a repository so nothing after a base commit survives."),
    "tasks": ("patchgym.tasks.cli:tasks", "List, prepare and validate task sets."),
    "grade": ("patchgym.harness.cli:grade", "Grade predictions (SWE-bench format) in fresh sandboxes."),
    "serve": ("patchgym.env.cli:serve", "Serve coding episodes over HTTP."),
    "fleet": ("patchgym.rl.fleet.cli:fleet", "List, show and check sampler fleets (formats, capacity, mismatch)."),
    "sft": ("patchgym.rl.loop.cli:sft", "Supervised warm-up on expert trajectories the environment produces."),
    "train": ("patchgym.rl.loop.cli:train", "Run the asynchronous RL loop (a config file or a preset)."),
    "eval": ("patchgym.rl.loop.cli:evaluate", "pass@k of a checkpoint on a task set, with a BF16 sampler."),
    "plot": ("patchgym.rl.loop.cli:plot", "Plot the curves of one or more runs, overlaid."),
}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when that subcommand is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        target, _ = COMMANDS[name]
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:  # an extra that is not installed (e.g. torch for `train`)
            missing = exc.name or str(exc)
            raise click.ClickException(
                f"`patchgym {name}` needs a module that is not installed ({missing}). "
                f"Install the matching extra, e.g. `pip install -e .[rl]`."
            ) from exc
        command = getattr(module, attr)
        if name == "tasks":
            _attach_validate(command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, help_text) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _attach_validate(group: click.Group) -> None:
    """`tasks validate` grades gold and empty patches, so it lives in the harness (tasks may not
    import the harness: docs/design.md); it is attached to the `tasks` group here, at the top."""
    if "validate" in group.commands:
        return
    try:
        from patchgym.harness.cli import validate
    except ImportError:  # the harness is not importable: `tasks list|prepare` still work
        return
    group.add_command(validate, "validate")


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="patchgym")
def main() -> None:
    """patchgym: coding tasks, sandboxes, rewards and an RL loop for coding agents."""


if __name__ == "__main__":
    main()

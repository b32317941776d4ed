"""`patchgym fleet deploy FLEET --modal` and `patchgym fleet stop FLEET` (registered on the `fleet` group).

Owns the two click commands only; the work is `modal_app.deploy` / `modal_app.stop`. `--dry-run`
prints each group's Modal class, GPU, containers and SGLang command without an account (it builds
the app object offline). Errors are one line (click.ClickException), never a traceback.
"""

from __future__ import annotations

import json

import click


def _load(spec: str):
    from patchgym.rl.fleet.load import load_fleet

    return load_fleet(spec)


def _max_replicas(values: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for v in values:
        name, _, n = v.partition("=")
        if not name or not n.isdigit():
            raise click.BadParameter(f"{v!r} is not GROUP=N", param_hint="--max-replicas")
        out[name] = int(n)
    return out


@click.command("deploy")
@click.argument("fleet_spec", metavar="FLEET")
@click.option("--modal", "use_modal", is_flag=True, help="Deploy on Modal (the only target so far).")
@click.option("--model-path", default="/views/bf16/v0", show_default=True, help="The checkpoint as containers see it.")
@click.option("--max-replicas", multiple=True, metavar="GROUP=N", help="Autoscaling ceiling of a group (default: its replicas).")
@click.option("--per-minute", default=10, show_default=True, type=click.IntRange(1, 1000), help="New containers per minute while ramping up.")
@click.option("--dry-run", is_flag=True, help="Build the app offline and print the plan; deploy nothing.")
def deploy(fleet_spec: str, use_modal: bool, model_path: str, max_replicas: tuple[str, ...], per_minute: int, dry_run: bool) -> None:
    """Start a fleet's sampler groups as SGLang servers (one Modal class per group) and the router."""
    if not use_modal:
        raise click.UsageError("say where: --modal (the only deployment target)")
    from patchgym.rl.deploy import modal_app
    from patchgym.rl.deploy.launch import LaunchError

    fleet = _load(fleet_spec)
    caps = _max_replicas(max_replicas)
    try:
        if dry_run:
            modal_app.build_app(fleet, model_path=model_path, max_replicas=caps)
            for p in modal_app.plan(fleet, model_path, max_replicas=caps):
                click.echo(json.dumps({"group": p.name, "class": p.cls_name, "gpu": p.gpu, "min_containers": p.min_containers,
                                       "max_containers": p.max_containers, "max_inputs": p.max_inputs, "view": p.view,
                                       "command": list(p.command)}))
            return
        name = modal_app.deploy(fleet, model_path=model_path, per_minute=per_minute, max_replicas=caps)
    except (LaunchError, ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"deployed {name}")


@click.command("stop")
@click.argument("fleet_spec", metavar="FLEET")
@click.option("--app-name", default=None, help="The Modal app (default: patchgym-<fleet name>).")
def stop(fleet_spec: str, app_name: str | None) -> None:
    """Stop a fleet deployed with `fleet deploy --modal`."""
    from patchgym.rl.deploy import modal_app

    try:
        click.echo(f"stopped {modal_app.stop(_load(fleet_spec), app_name=app_name)}")
    except (OSError, RuntimeError) as exc:
        raise click.ClickException(f"could not stop the app: {exc}") from None

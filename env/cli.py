"""`patchgym serve`: prepare the tasks, then serve episodes over HTTP (FastAPI on uvicorn).

Tasks are prepared before the socket accepts requests (progress on stderr). The server binds to
loopback unless told otherwise; on any other address without `--token` it warns that anyone who can
reach the port can run commands in its sandboxes. `--port 0` picks a free port; the line
`patchgym: serving N task(s) at http://HOST:PORT` on stdout says which.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import sys
from pathlib import Path

import click

LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say they
    # are TCP, and accepted sockets inherit this one's proto. With Nagle on, a response written as
    # headers then body waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


@click.command()
@click.option("--tasks", "tasks_spec", default="bundled", show_default=True, metavar="TASKS",
              help="A .jsonl file, a task directory, or `bundled`.")
@click.option("--id", "ids", multiple=True, help="Serve only this task (repeatable).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback by default).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="0 picks a free port.")
@click.option("--token", envvar="PATCHGYM_TOKEN", default=None,
              help="Require 'Authorization: Bearer TOKEN' on every route but /health (env PATCHGYM_TOKEN).")
@click.option("--backend", type=click.Choice(["local", "docker", "modal"]), default="local", show_default=True,
              help="Sandbox backend.")
@click.option("--image", default=None,
              help="Container image (docker, modal) for tasks without environment.image [default: docker builds "
                   "one per task from its environment.setup on patchgym's base image].")
@click.option("--max-episodes", default=64, show_default=True, type=click.IntRange(1, 100_000),
              help="Live episodes at once; more answer 503 with Retry-After.")
@click.option("--episode-log", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Append every finished episode (task, transcript, diff, verdict) to this JSONL file "
                   "[default: $PATCHGYM_HOME/episodes.jsonl].")
@click.option("--idle-ttl", default=900.0, show_default=True, type=click.FloatRange(min=1),
              help="Seconds without a request before an episode is closed.")
@click.option("--max-turns", default=50, show_default=True, type=click.IntRange(1, 10_000),
              help="Steps before an episode ends with turn_limit.")
@click.option("--command-timeout", default=120.0, show_default=True, type=click.FloatRange(min=0.1, max=86400),
              help="Seconds one bash command may run.")
@click.option("--wall-time", default=3600.0, show_default=True, type=click.FloatRange(min=1, max=7 * 86400),
              help="Seconds one episode may run.")
@click.option("--max-format-errors", default=3, show_default=True, type=click.IntRange(1, 10_000),
              help="Malformed steps in a row before an episode ends with format_error.")
@click.option("--parser", default="auto", show_default=True, help="Default tool-call parser for text steps.")
@click.option("--store", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Task store (default $PATCHGYM_HOME/tasks).")
@click.option("--prepare-workers", default=2, show_default=True, type=click.IntRange(1, 64),
              help="Tasks prepared in parallel at startup.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
@click.option("--telemetry/--no-telemetry", default=False, show_default=True,
              help="FastAPI's OpenTelemetry spans, metrics and logs (through the globally configured providers).")
@click.option("--parent-pid", type=click.IntRange(min=1), default=None,
              help="Shut down (as on SIGTERM) once this process is no longer the server's parent: a training "
                   "run's bundled server must not outlive a run that was killed.")
def serve(
    tasks_spec: str, ids: tuple[str, ...], host: str, port: int, token: str | None, backend: str,
    image: str | None, max_episodes: int, episode_log: Path | None, idle_ttl: float, max_turns: int, command_timeout: float,
    wall_time: float, max_format_errors: int, parser: str, store: Path | None, prepare_workers: int,
    log_level: str, telemetry: bool, parent_pid: int | None,
) -> None:
    """Serve coding episodes over HTTP (OpenAPI at /openapi.json, API docs at /docs; with --token open
    /docs#token=TOKEN)."""
    import gc

    import uvicorn

    from patchgym.env.config import ServerConfig
    from patchgym.env.limits import EpisodeLimits
    from patchgym.env.server import create_app
    from patchgym.env.toolcalls import PARSERS
    from patchgym.harness.sandbox.base import get_factory

    if parser not in PARSERS:
        raise click.BadParameter(f"unknown parser {parser!r}: choose one of {', '.join(sorted(PARSERS))}",
                                 param_hint="--parser")
    if episode_log is None:  # finished rewards always reach the disk; a crash loses none of them
        from patchgym.tasks.store import patchgym_home

        episode_log = patchgym_home() / "episodes.jsonl"
    click.echo(f"finished episodes are appended to {episode_log}", err=True)
    if token is not None and not token.strip():
        raise click.BadParameter("the token is empty", param_hint="--token")
    if not _is_loopback(host) and not token:
        click.secho(f"warning: serving on {host} without --token: anyone who can reach this port can run "
                    "commands in its sandboxes", fg="yellow", err=True)
    try:
        limits = EpisodeLimits(max_turns=max_turns, command_timeout_s=command_timeout, wall_time_s=wall_time,
                               max_format_errors=max_format_errors)
        config = ServerConfig(limits=limits, backend=backend, token=token, max_episodes=max_episodes,
                              idle_ttl_s=idle_ttl, default_parser=parser,
                              episode_log=str(episode_log) if episode_log else None, telemetry=telemetry)
        config.ceilings = config.ceilings.model_copy(update={
            name: max(getattr(config.ceilings, name), getattr(limits, name)) for name in limits.model_fields
        })
    except ValueError as exc:
        raise click.ClickException(f"invalid limits: {exc}") from None
    if image and backend == "local":
        raise click.BadParameter("--image is for the docker and modal backends (local runs on this machine)",
                                 param_hint="--image")
    try:
        factory = get_factory(backend, **({"default_image": image} if image else {}))
    except Exception as exc:  # noqa: BLE001 - a backend that cannot start here (no docker, no credentials)
        raise click.ClickException(f"the {backend} sandbox backend is not available: {exc}") from None

    from patchgym.harness.sandbox.linux import raise_open_file_limit

    raise_open_file_limit()  # each live episode holds descriptors (its sandbox, its connection)
    sock = _bind(host, port)  # before preparing: a taken port fails fast
    prepared = _prepare(tasks_spec, ids, store, prepare_workers)
    app = create_app(prepared, config, factory=factory)
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    click.echo(f"patchgym: serving {len(prepared)} task(s) at http://{shown}:{bound_port} "
               f"(backend {backend}, max {max_episodes} episodes{', token required' if token else ''})")
    click.echo(f"patchgym: API docs at http://{shown}:{bound_port}/docs"
               + ("#token=<your token> (the page sends it as the bearer token; a fragment never reaches "
                  "the server or its logs)" if token else ""))
    sys.stdout.flush()
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # In-flight steps get 5 s to finish at shutdown; then every episode is closed, which kills what
    # still runs in its sandbox (a step may run for minutes: waiting for it would stall the shutdown).
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=5,
                                           access_log=log_level == "debug"))
    # What exists now (imports, the app, the tasks) lives as long as the server: moved out of the
    # collector's sight, so the collections that requests trigger stay short.
    gc.collect()
    gc.freeze()
    # uvicorn re-raises the signal that stopped it once it has shut down; with SIGTERM's default
    # action the process died right there, before atexit, leaving the local factory's state
    # directory under $PATCHGYM_HOME/sandboxes: a SIGTERM now ends the process as an exit (143).
    import signal

    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if parent_pid is not None:
        _exit_with_parent(parent_pid)
    try:
        server.run(sockets=[sock])
    finally:
        _close_factory(factory)


def _exit_with_parent(parent_pid: int) -> None:
    """SIGTERM to this process once `parent_pid` is not its parent any more (the parent died and the
    server was re-parented). Why: `patchgym train` starts its bundled server in a session of its own,
    so a run killed outright (the OOM killer, SIGKILL) left the server serving, measured once here."""
    import os
    import signal
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="patchgym-parent-watch", daemon=True).start()


def _close_factory(factory) -> None:
    """Close every sandbox the factory still holds, and its own state (the local one's directory)."""
    try:
        factory.close_all()
    finally:
        shutdown = getattr(factory, "shutdown", None)
        if shutdown is not None:
            shutdown()


def _prepare(tasks_spec: str, ids: tuple[str, ...], store: Path | None, workers: int) -> dict:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from patchgym.env.tasks_setup import prepare_tasks
    from patchgym.tasks.loaders import TaskFileError
    from patchgym.tasks.prepare import PrepareError

    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        bar = progress.add_task("preparing tasks", total=None)

        def on_loaded(tasks: list) -> None:
            progress.update(bar, total=len(tasks))

        def on_done(task, prepared, error) -> None:  # noqa: ANN001
            mark = "[green]ok[/]" if error is None else f"[red]failed[/] {error}"
            progress.console.print(f"{mark} {task.instance_id}")
            progress.advance(bar)

        try:
            return prepare_tasks(tasks_spec, ids=ids, store=store, workers=workers, on_loaded=on_loaded,
                                 on_done=on_done)
        except (TaskFileError, PrepareError, ValueError) as exc:
            raise click.ClickException(str(exc).strip("'\"")) from None
        except KeyError as exc:
            raise click.ClickException(str(exc.args[0]) if exc.args else str(exc)) from None

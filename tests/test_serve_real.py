"""Real use: `python -m patchgym serve` in another process on loopback, driven through the client.

Whole episodes over real HTTP: one fixes the task with the editor and submits (reward 1), one submits
a wrong fix (reward 0), one sends three malformed calls in a row (format_error). The episode log on
disk holds all three; SIGTERM shuts the server down cleanly, closing every episode and killing the
commands still running in them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from patchgym.env.client import AsyncEnvClient, EnvClient, EnvError
from patchgym.env.episode_log import read_episode_log
from patchgym.env.testing import ServerProcess, make_toy_task, sandbox_unavailable_reason, toy_fix_calls, toy_wrong_fix_calls

skip_reason = sandbox_unavailable_reason("local")
pytestmark = pytest.mark.skipif(skip_reason is not None, reason=skip_reason or "")
TOKEN = "real-use-token-91c2"
TASK = "toy__calc-1"


class Server(ServerProcess):
    """The toy task served by `patchgym serve` in a child process, with its own home and episode log."""

    def __init__(self, workdir: Path, *extra: str) -> None:
        task = make_toy_task(workdir)
        self.tasks_file = workdir / "tasks.jsonl"
        self.tasks_file.write_text(task.model_dump_json() + "\n")
        self.log_path = workdir / "episodes.jsonl"
        self.home = workdir / "home"
        super().__init__(["--tasks", str(self.tasks_file), "--token", TOKEN, "--episode-log", str(self.log_path),
                          "--store", str(workdir / "store"), *extra], env={"PATCHGYM_HOME": str(self.home)},
                         start_timeout_s=120)

    def sandbox_dirs(self) -> list[Path]:
        root = self.home / "sandboxes"
        return sorted(p for p in root.glob("sb-*")) if root.is_dir() else []


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    running = Server(tmp_path_factory.mktemp("serve"))
    yield running
    running.stop()


def test_three_whole_episodes_over_http(server: Server) -> None:
    assert server.url.startswith("http://127.0.0.1:")
    with EnvClient(server.url, token=TOKEN) as client:
        assert [t.instance_id for t in client.tasks()] == [TASK]

        fixed = client.start_episode(TASK)
        look = client.step(fixed.episode_id, tool_calls=[
            {"name": "str_replace_editor", "arguments": {"command": "view", "path": "/testbed/calc.py",
                                                         "view_range": [4, 6]}}])
        assert "return a - b" in look.messages[0]["content"]
        result = client.step(fixed.episode_id, tool_calls=toy_fix_calls())
        assert (result.done, result.status, result.reward) == (True, "submitted", 1.0)

        wrong = client.start_episode(TASK)
        result = client.step(wrong.episode_id, tool_calls=toy_wrong_fix_calls())
        assert (result.done, result.status, result.reward) == (True, "submitted", 0.0)

        malformed = client.start_episode(TASK)
        steps = [
            client.step(malformed.episode_id, text="The fix is to change the minus sign."),
            client.step(malformed.episode_id, tool_calls=[{"name": "edit_file", "arguments": {"path": "calc.py"}}]),
            client.step(malformed.episode_id, text='<tool_call>{"name": "bash", "arguments": </tool_call>'),
        ]
        assert [s.done for s in steps] == [False, False, True]
        assert "unknown tool 'edit_file'" in steps[1].messages[0]["content"]
        assert (steps[2].status, steps[2].reward) == ("format_error", 0.0)

        states = {e: client.get_episode(e) for e in (fixed.episode_id, wrong.episode_id, malformed.episode_id)}
        assert states[fixed.episode_id].verdict["status"] == "resolved"

    records = {r["episode_id"]: r for r in read_episode_log(server.log_path)}
    assert records[fixed.episode_id]["reward"] == 1.0 and "return a + b" in records[fixed.episode_id]["diff"]
    assert records[wrong.episode_id]["verdict"]["status"] == "unresolved"
    assert records[malformed.episode_id]["status"] == "format_error"


def test_async_client_over_http(server: Server) -> None:
    import asyncio

    async def main() -> float | None:
        async with AsyncEnvClient(server.url, token=TOKEN) as client:
            started = await client.start_episode(TASK)
            results = await asyncio.gather(*(
                client.step(started.episode_id, tool_calls=[{"name": "bash", "arguments": {"command": "true"}}])
                for _ in range(2)
            ), return_exceptions=True)
            # two steps at once on one episode: one runs, the other is refused with 409
            refused = [r for r in results if isinstance(r, EnvError)]
            assert len(refused) <= 1 and all(r.status_code == 409 for r in refused)
            result = await client.step(started.episode_id, tool_calls=toy_fix_calls())
            return result.reward

    assert asyncio.run(main()) == 1.0


@pytest.mark.slow
def test_sync_client_outlives_the_server_closing_idle_connections(server: Server) -> None:
    """uvicorn closes a keep-alive connection after 5 idle seconds (a trainer generating its next
    turn is often slower): the client's pool must notice and use a new connection, and many
    threads may share one client."""
    import threading
    import time

    with EnvClient(server.url, token=TOKEN) as client:
        started = client.start_episode(TASK)
        call = [{"name": "bash", "arguments": {"command": "echo one"}}]
        assert client.step(started.episode_id, tool_calls=call).messages[0]["content"].startswith("one")
        time.sleep(5.6)
        again = client.step(started.episode_id, tool_calls=[{"name": "bash", "arguments": {"command": "echo two"}}])
        assert again.messages[0]["content"].startswith("two")
        healths: list[object] = []
        threads = [threading.Thread(target=lambda: healths.append(client.health().status)) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert healths == ["ok"] * 16
        client.delete_episode(started.episode_id)
    with pytest.raises(ValueError, match="http:// or https://"):
        EnvClient("127.0.0.1:8000")


def test_token_is_required(server: Server) -> None:
    assert httpx.get(server.url + "/health").status_code == 200
    assert httpx.get(server.url + "/tasks").status_code == 401
    with pytest.raises(EnvError) as caught:
        EnvClient(server.url, token="wrong").tasks()
    assert caught.value.status_code == 401


def _processes_running(marker: str) -> list[int]:
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline"]):
        if marker in " ".join(process.info.get("cmdline") or []):
            found.append(process.pid)
    return found


@pytest.mark.slow
def test_shutdown_closes_live_episodes_and_kills_running_commands(tmp_path: Path) -> None:
    import threading

    marker = "sleep 987654"
    server = Server(tmp_path, "--max-episodes", "2")
    outcome: list[object] = []
    try:
        with EnvClient(server.url, token=TOKEN) as client:
            ids = [client.start_episode(TASK).episode_id for _ in range(2)]
            assert client.health().live_episodes == 2

            def long_step() -> None:
                try:
                    outcome.append(client.step(ids[0], tool_calls=[{"name": "bash", "arguments": {"command": marker}}]))
                except Exception as exc:  # noqa: BLE001 - the server going away mid-request is expected
                    outcome.append(exc)

            stepping = threading.Thread(target=long_step, daemon=True)
            stepping.start()
            deadline = time.monotonic() + 20
            while not _processes_running(marker) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _processes_running(marker), "the long command never started"
            began = time.monotonic()
            code = server.stop()
            stopped_in = time.monotonic() - began
            stepping.join(30)
    finally:
        server.stop()
    # serve catches SIGTERM, closes its sandbox factories and exits 128 + 15 (uvicorn re-raised the
    # signal after its shutdown, which skipped atexit and left the factory's state behind)
    assert code == 128 + signal.SIGTERM, "".join(server.output)
    assert "Application shutdown complete" in "".join(server.output)
    assert stopped_in < 30
    assert _processes_running(marker) == []
    records = read_episode_log(server.log_path)
    assert sorted(r["episode_id"] for r in records) == sorted(ids)
    assert {r["status"] for r in records} == {"closed"}
    assert all("shut down" in r["end_reason"] for r in records)


def test_bad_command_lines_fail_without_a_traceback(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "patchgym", "serve", *args], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "PATCHGYM_HOME": str(tmp_path)})

    missing = run("--tasks", str(tmp_path / "nope.jsonl"), "--port", "0")
    assert missing.returncode != 0 and "no such file" in missing.stderr and "Traceback" not in missing.stderr
    bad_parser = run("--parser", "xml")
    assert bad_parser.returncode != 0 and "unknown parser 'xml'" in bad_parser.stderr
    with open(tmp_path / "t.jsonl", "w") as handle:
        handle.write('{"instance_id": "x"}\n')
    invalid = run("--tasks", str(tmp_path / "t.jsonl"), "--port", "0")
    assert invalid.returncode != 0 and "Traceback" not in invalid.stderr and "t.jsonl:1" in invalid.stderr


def test_finished_episodes_reach_the_default_log_without_any_flag(tmp_path: Path) -> None:
    """With no --episode-log, finished episodes still go to disk: $PATCHGYM_HOME/episodes.jsonl."""
    task = make_toy_task(tmp_path)
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text(task.model_dump_json() + "\n")
    home = tmp_path / "home"
    server = ServerProcess(["--tasks", str(tasks_file), "--store", str(tmp_path / "store")],
                           env={"PATCHGYM_HOME": str(home)}, start_timeout_s=120)
    try:
        with EnvClient(server.url) as client:
            episode = client.start_episode(TASK)
            result = client.step(episode.episode_id, tool_calls=toy_fix_calls())
            assert (result.status, result.reward) == ("submitted", 1.0)
        [record] = read_episode_log(home / "episodes.jsonl")
        assert record["episode_id"] == episode.episode_id and record["reward"] == 1.0
    finally:
        server.stop()

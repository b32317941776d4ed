"""The command line through Docker, on a SWE-bench-format task file: `patchgym tasks validate`,
`patchgym grade` and `patchgym serve --backend docker` give what `local` gives, `--image` is
checked, and a served run closes every sandbox factory when it is stopped with SIGTERM (for
`local` too: before, its state directory stayed under $PATCHGYM_HOME/sandboxes).

The task file's task has no environment.setup (preparation installs pytest with pip), so the
docker factory builds its image from the base image; the docker cases need an engine and the base
image (.ci/docker-setup) and are skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchgym.harness.cli import grade, validate
from tests.fixtures_grading.calc_task import build_task
from tests.fixtures_grading.factories import local_factory_or_reason
from .test_docker_support import containers_of, docker_reason, needs_docker, remove_task_images

LOCAL, NO_LOCAL = local_factory_or_reason()
pytestmark = pytest.mark.skipif(LOCAL is None, reason=NO_LOCAL or "no local backend")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def task_file(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("docker-cli")
    task = build_task(root, instance_id="calc-docker-1")
    path = root / "tasks.jsonl"
    path.write_text(task.model_dump_json() + "\n")
    yield {"root": root, "file": path, "store": root / "store", "home": root / "home"}
    if docker_reason() is None and (root / "store").is_dir():
        from patchgym.tasks.prepare import prepare_task

        remove_task_images(prepare_task(task, root / "store"))  # prepared already: cached


def _invoke(command, args: list[str], home: Path):
    result = CliRunner().invoke(command, args, env={"PATCHGYM_HOME": str(home)}, catch_exceptions=False)
    return result.exit_code, result.output


# ~20 s each (validation grades twice, grading once more, preparation and the image build on first use).
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=needs_docker())])
def test_validate_and_grade_a_task_file(task_file, backend, tmp_path) -> None:
    args = [str(task_file["file"]), "--backend", backend, "--store", str(task_file["store"]), "--json", str(tmp_path / "v.json")]
    code, output = _invoke(validate, args, task_file["home"])
    assert code == 0 and "valid 1/1" in output, output
    (row,) = json.loads((tmp_path / "v.json").read_text())
    assert row["gold"] == ["resolved"] and row["empty"] == ["fails"], row
    code, output = _invoke(grade, ["--tasks", str(task_file["file"]), "--predictions", "gold", "--backend", backend,
                                   "--store", str(task_file["store"]), "--out", str(tmp_path / "runs")], task_file["home"])
    assert code == 0 and "resolved 1/1" in output, output
    if backend == "docker":
        assert containers_of(os.getpid()) == []


def test_image_option_is_refused_for_local(task_file) -> None:
    code, output = _invoke(grade, ["--tasks", str(task_file["file"]), "--predictions", "gold", "--backend", "local",
                                   "--image", "anything:1"], task_file["home"])
    assert code == 2 and "--image is for the docker and modal backends" in output, output


@pytest.mark.slow  # preparation in a fresh store (~15 s)
@pytest.mark.parametrize("backend", [pytest.param("docker", marks=needs_docker())])
def test_image_option_names_a_missing_image(task_file, backend, tmp_path) -> None:
    code, output = _invoke(grade, ["--tasks", str(task_file["file"]), "--predictions", "gold", "--backend", backend,
                                   "--image", "patchgym-no-such-image:0", "--store", str(task_file["store"]),
                                   "--out", str(tmp_path / "runs")], task_file["home"])
    assert "resolved 0/1" in output and "patchgym-no-such-image:0" in output, output


def _serve(task_file: dict, backend: str) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PATCHGYM_HOME": str(task_file["home"])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "patchgym.main", "serve", "--tasks", str(task_file["file"]), "--backend", backend,
         "--port", "0", "--store", str(task_file["store"]), "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "patchgym: serving" in line:
            return proc, line.split("http://", 1)[1].split()[0]
    proc.kill()
    raise AssertionError("the server did not start:\n" + "".join(lines))


# docker behind slow: preparation and the task image's build in a fresh store (~25 s).
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=[*needs_docker(), pytest.mark.slow])])
def test_serve_episode_then_sigterm_closes_every_factory(task_file, backend) -> None:
    from patchgym.env.client import EnvClient

    sandboxes = task_file["home"] / "sandboxes"
    proc, address = _serve(task_file, backend)
    try:
        with EnvClient(f"http://{address}") as env:
            episode = env.start_episode("calc-docker-1")
            step = env.step(episode.episode_id, tool_calls=[{"name": "bash", "arguments": {"command": "cat calc/ops.py"}}])
            assert "def add" in json.dumps(step.model_dump()), step
            fix = "sed -i 's/return a - b  # bug: should add/return a + b/' calc/ops.py"
            env.step(episode.episode_id, tool_calls=[{"name": "bash", "arguments": {"command": fix}}])
            step = env.step(episode.episode_id, tool_calls=[{"name": "submit", "arguments": {}}])
            assert step.reward == 1.0, step
            env.start_episode("calc-docker-1")  # left open: the shutdown must close it
        if backend == "docker":
            assert containers_of(proc.pid)  # the open episode's container
        else:
            assert any(sandboxes.iterdir())
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 128 + signal.SIGTERM
    if backend == "docker":
        assert containers_of(proc.pid) == []
    assert not sandboxes.exists() or list(sandboxes.iterdir()) == []

"""Grading through Docker gives the verdicts grading through `local` gives: gold, empty, and the
hacking patches of tests/test_integrity_redteam.py and test_integrity_grading.py (the integrity
guarantees must not depend on the backend), on the calc task graded in a task image that the
docker factory builds from the task's (empty) environment.setup.

Needs a Docker engine and the base image (.ci/docker-setup); skipped with the reason otherwise.
"""

from __future__ import annotations

import os

import pytest

from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, GOLD_FILES, build_prepared, diff_of
from tests.fixtures_grading.factories import local_factory_or_reason
from .test_docker_support import containers_of, needs_docker

LOCAL, NO_LOCAL = local_factory_or_reason()
pytestmark = [*needs_docker(), pytest.mark.skipif(LOCAL is None, reason=NO_LOCAL or "no local backend")]

OPS = BASE_FILES["calc/ops.py"]
FIXED_OPS = GOLD_FILES["calc/ops.py"]
CONFTEST = "import calc.ops\ncalc.ops.add = lambda a, b: a + b\nimport calc\ncalc.add = calc.ops.add\n"
STAMP = " 2020-01-01 00:00:00.000000000 +0000"


def _new_file(path_line: str, text: str) -> str:
    lines = text.splitlines()
    return f"--- /dev/null\n{path_line}\n@@ -0,0 +1,{len(lines)} @@\n" + "".join("+" + line + "\n" for line in lines)


# name -> the files to write (None deletes) or a raw patch. Every attack gets 0 on both backends;
# the controls get 1 on both.
PATCHES: dict[str, dict[str, str | None] | str] = {
    "gold": GOLD_FILES,
    "empty": "",
    "monkeypatching conftest": {"conftest.py": CONFTEST},
    "conftest behind a timestamp with a space": _new_file(f"+++ b/conftest.py{STAMP}", CONFTEST),
    "conftest behind an unusual prefix": _new_file("+++ zz/conftest.py", CONFTEST),
    "tests deleted": {"tests/test_ops.py": None},
    "pytest.ini that skips everything": {"pytest.ini": "[pytest]\naddopts = -k nothing_matches\n"},
    "sitecustomize forcing exit 0": {"sitecustomize.py": "import os\nos._exit(0)\n"},
    "xfail raised through exec": {"calc/ops.py": OPS.replace(
        "    return a - b  # bug: should add", "    exec(\"import pytest; pytest.xfail('known issue')\")")},
    "fix that breaks a PASS_TO_PASS test": {"calc/ops.py": FIXED_OPS.replace("return a * b", "return a + b")},
    "control: fix with a unicode file name": {"calc/ops.py": FIXED_OPS, "calc/caf\u00e9 notes.py": "NOTE = 'x'\n"},
    "control: traditional format with tab timestamps": (
        "--- a/calc/ops.py\t2020-01-01 00:00:00.000000000 +0000\n+++ b/calc/ops.py\t2020-01-02 00:00:00.000000000 +0000\n"
        "@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b  # bug: should add\n+    return a + b\n"),
}


@pytest.fixture(scope="module")
def calc(tmp_path_factory: pytest.TempPathFactory):
    prepared, _ = build_prepared(tmp_path_factory.mktemp("docker-grading"))
    return prepared


@pytest.fixture(scope="module")
def docker_factory():
    from patchgym.harness.sandbox.base import get_factory

    factory = get_factory("docker", warm=1)  # the spare kept between gradings of the same task
    yield factory
    factory.close_all()


def _summary(verdict) -> dict:
    return {"status": verdict.status, "reward": verdict.reward, "tests": verdict.tests,
            "applied": verdict.apply_method is not None}


# Three run by default (about 2 s each on both backends); the rest behind `slow` (~60 s in all).
DEFAULT = ("gold", "empty", "monkeypatching conftest")


@pytest.mark.parametrize("name", [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.slow) for n in PATCHES])
def test_docker_and_local_give_the_same_verdict(name, calc, docker_factory) -> None:
    spec = PATCHES[name]
    patch = spec if isinstance(spec, str) else diff_of(calc.repo_dir, spec)
    local = grade_patch(calc, patch, factory=LOCAL, deadline_s=180)
    docker = grade_patch(calc, patch, factory=docker_factory, deadline_s=180)
    assert docker.status != "error", docker.model_dump_json(indent=1)  # an infrastructure failure
    assert _summary(docker) == _summary(local), (docker.model_dump_json(indent=1), local.model_dump_json(indent=1))
    expected = 1.0 if name == "gold" or name.startswith("control:") else 0.0
    assert docker.reward == expected, docker.model_dump_json(indent=1)


def test_grading_leaves_no_container_behind(calc, docker_factory) -> None:
    grade_patch(calc, diff_of(calc.repo_dir, GOLD_FILES), factory=docker_factory, deadline_s=180)
    docker_factory._remover.drain()  # closed containers are removed in the background
    assert len(containers_of(os.getpid())) <= docker_factory.warm  # the spare kept for the next grading
    docker_factory.close_all()
    assert containers_of(os.getpid()) == []

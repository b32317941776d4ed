"""`patchgym grade` and `patchgym tasks validate` end to end: real task files, real preparation
(patchgym.tasks.prepare), real sandboxes; resumable runs, SWE-bench report shapes, clear errors."""

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
from patchgym.harness.validate import validate_task
from tests.fixtures_grading.calc_task import BASE_FILES, build_prepared, build_task, diff_of, setup_linking_pytest
from tests.fixtures_grading.factories import local_factory_or_reason

LOCAL, NO_LOCAL = local_factory_or_reason()
pytestmark = pytest.mark.skipif(LOCAL is None, reason=NO_LOCAL or "local backend")


@pytest.fixture(scope="module")
def task_set(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("taskset")
    tasks = [build_task(root, instance_id=f"calc-{i}", environment={"setup": setup_linking_pytest()}) for i in (1, 2)]
    tasks_file = root / "tasks.jsonl"
    tasks_file.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    store = root / "store"
    # Prepare once for the whole module (the grade command would do it on first use too).
    from patchgym.tasks.prepare import prepare_tasks

    prepare_tasks(tasks, store, workers=2)
    return {"root": root, "tasks": tasks, "tasks_file": tasks_file, "store": store}


def write_predictions(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run_grade(task_set: dict, preds: str | Path, out: Path, *extra: str):
    return CliRunner().invoke(grade, ["--tasks", str(task_set["tasks_file"]), "--predictions", str(preds),
                                      "--store", str(task_set["store"]), "--out", str(out), "--workers", "2", *extra])


@pytest.mark.slow
def test_grade_mixed_predictions_writes_swebench_reports(task_set: dict, tmp_path: Path) -> None:
    t1, t2 = task_set["tasks"]
    hack = diff_of(Path(t1.source), {"conftest.py": "def pytest_collection_modifyitems(items):\n    items.clear()\n"})
    preds = write_predictions(tmp_path / "preds.jsonl", [
        {"instance_id": "calc-1", "model_name_or_path": "org/model-a", "model_patch": t1.patch},
        {"instance_id": "calc-2", "model_name_or_path": "org/model-a", "model_patch": None},
        {"instance_id": "calc-1", "model_name_or_path": "model-b", "model_patch": hack},
        {"instance_id": "calc-2", "model_name_or_path": "model-b", "model_patch": "no diff here"},
    ])
    result = run_grade(task_set, preds, tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == "resolved 1/4"
    assert "org/model-a: resolved 1/2" in result.output and "model-b: resolved 0/2" in result.output

    run_dir = tmp_path / "out" / "preds"
    report = json.loads((run_dir / "org__model-a" / "calc-1" / "report.json").read_text())["calc-1"]
    for key in ("patch_is_None", "patch_exists", "patch_successfully_applied", "resolved", "tests_status"):
        assert key in report
    assert report["resolved"] and report["reward"] == 1.0 and report["status"] == "resolved"
    assert sorted(report["tests_status"]["FAIL_TO_PASS"]["success"]) == sorted(t1.FAIL_TO_PASS)
    assert (run_dir / "org__model-a" / "calc-1" / "test_output.txt").exists()

    empty = json.loads((run_dir / "org__model-a" / "calc-2" / "report.json").read_text())["calc-2"]
    assert empty["patch_is_None"] and not empty["patch_exists"] and empty["status"] == "empty_patch"
    hacked = json.loads((run_dir / "model-b" / "calc-1" / "report.json").read_text())["calc-1"]
    assert not hacked["resolved"] and "reverted_test_infra:conftest.py" in hacked["flags"]

    summary_a = json.loads((run_dir / "org__model-a" / "summary.json").read_text())
    assert (summary_a["total_instances"], summary_a["submitted_instances"], summary_a["completed_instances"],
            summary_a["resolved_instances"], summary_a["empty_patch_instances"], summary_a["error_instances"]) == (2, 2, 1, 1, 1, 0)
    assert summary_a["resolved_ids"] == ["calc-1"] and summary_a["empty_patch_ids"] == ["calc-2"]
    summary_b = json.loads((run_dir / "model-b" / "summary.json").read_text())
    assert summary_b["unresolved_ids"] == ["calc-1"] and summary_b["error_ids"] == ["calc-2"]
    assert set(json.loads((run_dir / "summary.json").read_text())) == {"org/model-a", "model-b"}


def test_gold_rerun_and_force(task_set: dict, tmp_path: Path) -> None:
    first = run_grade(task_set, "gold", tmp_path / "out")
    assert first.exit_code == 0, first.output
    assert first.output.strip().endswith("resolved 2/2")
    report = tmp_path / "out" / "gold" / "gold" / "calc-1" / "report.json"
    stamp = report.stat().st_mtime_ns
    again = run_grade(task_set, "gold", tmp_path / "out")
    assert "2 prediction(s) already graded" in again.output and again.output.strip().endswith("resolved 2/2")
    assert report.stat().st_mtime_ns == stamp
    forced = run_grade(task_set, "gold", tmp_path / "out", "--force")
    assert forced.exit_code == 0 and "already graded" not in forced.output
    assert report.stat().st_mtime_ns != stamp


def test_a_changed_prediction_is_graded_again(task_set: dict, tmp_path: Path) -> None:
    t1, _ = task_set["tasks"]
    preds = tmp_path / "p.jsonl"
    write_predictions(preds, [{"instance_id": "calc-1", "model_name_or_path": "m", "model_patch": "nonsense"}])
    assert run_grade(task_set, preds, tmp_path / "out").output.strip().endswith("resolved 0/1")
    write_predictions(preds, [{"instance_id": "calc-1", "model_name_or_path": "m", "model_patch": t1.patch}])
    result = run_grade(task_set, preds, tmp_path / "out")
    assert "already graded" not in result.output and result.output.strip().endswith("resolved 1/1")


@pytest.mark.parametrize("content, message", [
    ('{"instance_id": "calc-1", "model_name_or_path": "m", "model_patch": ""}\n{not json}\n', "line 2: not valid JSON"),
    ('{"instance_id": "calc-9", "model_name_or_path": "m", "model_patch": ""}\n', "line 1: instance_id 'calc-9' is not in the task set"),
    ('{"instance_id": "calc-1", "model_patch": ""}\n', "line 1: missing field(s) model_name_or_path"),
    ('{"instance_id": "calc-1", "model_name_or_path": "m", "model_patch": 3}\n', "model_patch must be a string or null"),
    ('{"instance_id": "calc-1", "model_name_or_path": "m", "model_patch": ""}\n' * 2, "line 2: a second prediction for calc-1"),
])
def test_bad_predictions_file_is_a_clear_error(task_set: dict, tmp_path: Path, content: str, message: str) -> None:
    preds = tmp_path / "bad.jsonl"
    preds.write_text(content)
    result = run_grade(task_set, preds, tmp_path / "out")
    assert result.exit_code == 1 and message in result.output, result.output
    assert "Traceback" not in result.output


def test_missing_predictions_file(task_set: dict, tmp_path: Path) -> None:
    result = run_grade(task_set, tmp_path / "nope.jsonl", tmp_path / "out")
    assert result.exit_code == 1 and "no such file" in result.output


@pytest.mark.slow
def test_killed_run_loses_nothing_and_rerun_grades_only_what_is_missing(task_set: dict, tmp_path: Path) -> None:
    t1, t2 = task_set["tasks"]
    endless = diff_of(Path(t2.source), {"calc/ops.py": BASE_FILES["calc/ops.py"].replace(
        "    return a - b  # bug: should add", "    import time\n    time.sleep(3600)")})
    preds = write_predictions(tmp_path / "run.jsonl", [
        {"instance_id": "calc-1", "model_name_or_path": "m", "model_patch": t1.patch},
        {"instance_id": "calc-2", "model_name_or_path": "m", "model_patch": endless},
    ])
    out = tmp_path / "out"
    argv = [sys.executable, "-c", "from patchgym.harness.cli import grade; grade()", "--tasks", str(task_set["tasks_file"]),
            "--predictions", str(preds), "--store", str(task_set["store"]), "--out", str(out), "--workers", "2"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    done = out / "run" / "m" / "calc-1" / "report.json"
    started = time.monotonic()
    while not done.exists() and time.monotonic() - started < 60:
        time.sleep(0.2)
    assert done.exists(), "the quick prediction was never stored"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "run" / "m" / "calc-2" / "report.json").exists()
    stamp = done.stat().st_mtime_ns
    rerun = CliRunner().invoke(grade, argv[3:] + ["--deadline", "5"])
    assert rerun.exit_code == 0, rerun.output
    assert "1 prediction(s) already graded" in rerun.output
    assert done.stat().st_mtime_ns == stamp
    late = json.loads((out / "run" / "m" / "calc-2" / "report.json").read_text())["calc-2"]
    assert late["status"] == "timeout"
    assert rerun.output.strip().endswith("resolved 1/2")


def test_validate_accepts_good_tasks(task_set: dict, tmp_path: Path) -> None:
    good = CliRunner().invoke(validate, [str(task_set["tasks_file"]), "--store", str(task_set["store"]), "--workers", "2",
                                         "--json", str(tmp_path / "v.json")])
    assert good.exit_code == 0, good.output
    assert good.output.strip().endswith("valid 2/2")
    rows = json.loads((tmp_path / "v.json").read_text())
    assert all(r["ok"] and r["gold"] == ["resolved"] and r["empty"] == ["fails"] for r in rows)


def test_validate_names_a_broken_task(tmp_path: Path) -> None:
    # Prepared by hand (a new id would mean a new preparation, which costs seconds of venv seeding).
    prepared = build_prepared(tmp_path / "p", instance_id="calc-broken", gold_files={"README.md": "x\n"})[0]
    result = validate_task(prepared)
    assert not result.ok and result.gold == ["unresolved"] and result.empty == ["fails"]
    assert any(p.startswith("gold_not_resolved") for p in result.problems)


def test_an_unavailable_backend_is_a_clear_error(task_set: dict, tmp_path: Path) -> None:
    from patchgym.harness.sandbox.base import get_factory

    unavailable = []
    for backend in ("docker", "modal"):
        try:
            get_factory(backend)
        except Exception:
            unavailable.append(backend)
    if not unavailable:
        pytest.skip("every backend can be created here")
    result = run_grade(task_set, "gold", tmp_path / "out", "--backend", unavailable[0])
    assert result.exit_code == 1 and f"the {unavailable[0]} sandbox backend is not available" in result.output
    assert "Traceback" not in result.output


def test_validate_finds_a_fix_that_is_not_needed(tmp_path: Path) -> None:
    # FAIL_TO_PASS names a test that already passes at base.
    prepared = build_prepared(tmp_path, fail_to_pass=["tests/test_ops.py::test_sub"], pass_to_pass=[])[0]
    result = validate_task(prepared)
    assert "f2p_passes_without_fix: tests/test_ops.py::test_sub" in result.problems


@pytest.mark.slow
def test_validate_reports_flaky_tests(tmp_path: Path) -> None:
    flaky_test = "import os\n\n\ndef test_coin():\n    assert os.urandom(1)[0] % 2\n"
    prepared = build_prepared(tmp_path, test_patch_files={
        "tests/test_add.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        "tests/test_coin.py": flaky_test,
    }, fail_to_pass=["tests/test_add.py::test_add"], pass_to_pass=["tests/test_coin.py::test_coin"])[0]
    result = validate_task(prepared, repeat=8)
    assert not result.ok
    assert list(result.flaky) == ["tests/test_coin.py::test_coin"]

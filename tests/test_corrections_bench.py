"""bench/corrections/run.py keeps working: a tiny run of every case, through its memory subprocesses.

Only that the script runs and reports every case with sane numbers is checked here; the speed and
memory goals are measured by the benchmark itself (bench/corrections/RESULTS.md), never asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "corrections" / "run.py"


@pytest.mark.slow  # runs the whole benchmark script (~11 s): the default run stays near ten minutes
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="CPU peak memory needs Linux /proc")
def test_bench_runs_every_case_and_reports_ratios(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--vocab", "1024", "--tokens", "64", "--reps", "1", "--mask", "--naive",
         "--device", "cpu", "--json", str(out)],
        capture_output=True, text=True, timeout=240, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(out.read_text())["results"]
    assert {r["case"] for r in results} == {"grpo", "sc_mis_replay", "sc_mis_topk", "sc_mis_replay_mask", "naive_grpo"}
    for row in results:
        assert row["wall_median"] > 0 and row["cpu_ratio"] > 0
        assert row["peak_total"] >= row["inputs"] > 0
    grpo = next(r for r in results if r["case"] == "grpo")
    assert grpo["memory_ratio"] == 1.0 and grpo["wall_ratio"] == 1.0
    assert "| sc_mis_topk |" in done.stdout

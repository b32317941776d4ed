"""The run summary: KL per group weighted by turns, per format class, and the ordering check."""

from __future__ import annotations

import json
from pathlib import Path

from patchgym.rl.fleet.load import load_fleet
from patchgym.rl.loop.summary import summarize_run, summary_lines


def _write_rows(run: Path, rows: list[dict]) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _row(update: int, kl: dict[str, float | None], turns: dict[str, int], reward: float) -> dict:
    row = {"update": update, "loss_kind": "sc_mis", "reward/mean": reward, "time/wall_s": 10.0 * update, "cost/busy_usd": 1.5}
    for g, v in kl.items():
        row[f"kl_k3/group/{g}"] = v
        row[f"turns/{g}"] = turns.get(g, 0)
    return row


def test_turn_weighted_kl_and_the_format_order(tmp_path: Path) -> None:
    fleet = load_fleet("mixed-6")
    run = tmp_path / "run"
    _write_rows(run, [
        _row(1, {"b200-nvfp4": 0.1, "h100-fp8": 0.004, "h200-bf16": None}, {"b200-nvfp4": 3, "h100-fp8": 1}, 0.5),
        _row(2, {"b200-nvfp4": 0.3, "h100-fp8": 0.002, "h200-bf16": 1e-5}, {"b200-nvfp4": 1, "h100-fp8": 3, "h200-bf16": 2}, 0.25),
    ])
    s = summarize_run(run, fleet)
    assert abs(s["kl_k3_per_group"]["b200-nvfp4"] - (0.1 * 3 + 0.3 * 1) / 4) < 1e-12
    assert abs(s["kl_k3_per_group"]["h100-fp8"] - (0.004 + 0.006) / 4) < 1e-12
    assert s["kl_k3_per_group"]["b300-nvfp4"] is None and s["turns_per_group"]["h200-bf16"] == 2
    order = s["kl_order"]
    assert order["by_precision"] == ["nvfp4_4over6/bf16", "fp8_e4m3/fp8_e4m3", "bf16/bf16"]
    assert order["holds"] is True and order["unmeasured"] == []
    assert s["reward_per_update"] == [0.5, 0.25] and s["cost_busy_usd"] == 3.0
    assert json.loads((run / "summary.json").read_text()) == s
    assert any("orders as the formats do: yes" in line for line in summary_lines(s))


def test_an_inverted_order_is_reported_as_not_holding(tmp_path: Path) -> None:
    fleet = load_fleet("mixed-6")
    run = tmp_path / "run"
    _write_rows(run, [_row(1, {"b200-nvfp4": 1e-4, "h100-fp8": 0.01, "h200-bf16": 1e-6}, {"b200-nvfp4": 2, "h100-fp8": 2, "h200-bf16": 2}, 0.0)])
    s = summarize_run(run, fleet)
    assert s["kl_order"]["holds"] is False
    assert any("NO" in line for line in summary_lines(s))


def test_no_rows_is_an_empty_summary_not_a_crash(tmp_path: Path) -> None:
    s = summarize_run(tmp_path, load_fleet("mixed-6"))
    assert s["updates"] == 0 and s["kl_order"]["holds"] is False and s["reward_mean"] is None

"""The run summary: KL per group weighted by turns, per format class, and the ordering check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


def test_support_kl_decides_the_order_and_values_are_token_weighted(tmp_path: Path) -> None:
    """With support replay the check uses the exact support KL; k3's own order is kept beside it.
    Here one heavy-tailed k3 value (0.05 over 10 bf16 tokens) inverts k3's order, not the support's."""
    fleet = load_fleet("mixed-6")
    run = tmp_path / "run"
    row = _row(1, {"b200-nvfp4": 0.04, "h100-fp8": 0.008, "h200-bf16": 0.05}, {"b200-nvfp4": 1, "h100-fp8": 1, "h200-bf16": 1}, 0.0)
    support = {"b200-nvfp4": 0.03, "h100-fp8": 0.004, "h200-bf16": 0.0009}
    tokens = {"b200-nvfp4": 300, "h100-fp8": 200, "h200-bf16": 10}
    for g in support:
        row[f"kl_support/group/{g}"] = support[g]
        row[f"tokens/group/{g}"] = tokens[g]
    row2 = dict(row, update=2)
    row2["kl_support/group/h200-bf16"], row2["tokens/group/h200-bf16"] = 0.0019, 30
    _write_rows(run, [row, row2])
    s = summarize_run(run, fleet)
    assert s["kl_order"]["estimator"] == "support" and s["kl_order"]["holds"] is True
    assert s["kl_order_k3"]["estimator"] == "k3" and s["kl_order_k3"]["holds"] is False
    # token-weighted over the two updates: (0.0009 * 10 + 0.0019 * 30) / 40
    assert abs(s["kl_support_per_group"]["h200-bf16"] - (0.0009 * 10 + 0.0019 * 30) / 40) < 1e-12
    assert s["kl_support_per_group"]["b300-nvfp4"] is None
    lines = summary_lines(s)
    assert any("(support)" in line and "yes" in line for line in lines) and any("(k3)" in line and "NO" in line for line in lines)


def test_the_probe_orders_every_group_and_names_each_pair_that_does_not(tmp_path: Path) -> None:
    """Per group, on the probe's shared tokens; weighted by the tokens each update scored."""
    fleet = load_fleet("mixed-6")
    run = tmp_path / "run"
    probe = {"b200-nvfp4": 0.5, "b300-nvfp4": 0.6, "h100-fp8": 0.1, "h200-fp8": 0.12, "h200-bf16": 0.03}
    rows = []
    for u, tokens in ((1, 64), (2, 32)):
        row = _row(u, {}, {}, 0.0)
        row["probe/tokens"] = tokens
        for g, v in probe.items():
            row[f"kl_probe/group/{g}"] = v * u
        rows.append(row)
    rows[1]["kl_probe/group/h200-fp8"] = None  # a group the probe could not score in one update
    _write_rows(run, rows)
    s = summarize_run(run, fleet)
    assert s["kl_probe_per_group"]["b200-nvfp4"] == pytest.approx((0.5 * 64 + 1.0 * 32) / 96)
    assert s["kl_probe_per_group"]["h200-fp8"] == pytest.approx(0.12)
    assert s["kl_probe_per_group"]["h100-bf16-tp2"] is None
    order = s["kl_order_groups"]
    assert order["holds"] is True and order["violations"] == [] and "h100-bf16-tp2" in order["unmeasured"]
    assert order["by_kl"][:2] == ["b300-nvfp4", "b200-nvfp4"]
    assert any("format probe" in line and "yes" in line for line in summary_lines(s))
    # one FP8 group below a BF16 one: the pair is named, the check fails
    for row in rows:
        row["kl_probe/group/h100-fp8"] = 0.01
    _write_rows(run, rows)
    s = summarize_run(run, fleet)
    assert s["kl_order_groups"]["holds"] is False
    assert any(v.startswith("h100-fp8 ") and "h200-bf16" in v for v in s["kl_order_groups"]["violations"])
    assert any("format probe" in line and "NO" in line for line in summary_lines(s))

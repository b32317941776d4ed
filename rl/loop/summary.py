"""The run's summary: what a reader checks first, from `metrics.jsonl` and `eval.jsonl`.

Owns `summarize_run(run_dir, fleet)`, which writes `RUN_DIR/summary.json` and returns it:
- reward per update, and the mean over the run;
- the train-vs-sampler KL per sampler group over the whole run, for two estimators: k3 on the
  sampled tokens and, with support replay, the exact KL over each token's support
  (`kl_support`); the per-update values weighted by the group's trained tokens in that update
  (a group that served no turn of an update has no value there, which happens with few sessions
  an update);
- the same per number-format class (the group's weights and activations, e.g. `nvfp4_4over6/bf16`),
  and the check the issue asks for: do the classes order by KL as their precision does (fewer
  bits in the weights and activations, larger KL)? `kl_order.holds` is true or false, never
  assumed; classes with no value are left out of the check and listed. `kl_order` uses the
  support KL when the run has it (`kl_order.estimator`), `kl_order_k3` is always the k3 one;
- the per-group check on the format probe (`kl_probe/group/<g>`, `probe_kl.py`: every group
  teacher-forced on the same window of each update's tokens): `kl_probe_per_group`, its mean per
  format class, and `kl_order_groups`, which holds when every group whose weights or activations
  have fewer bits has a larger probe KL than every group with more (each pair is listed when not);
  per group, the KL over a group's own tokens mostly measures what its 1-2 sessions contained;
- the last evaluation row, the wall time, and the run's cost.
Not covered here: plots (`plots.py`), the per-update rows themselves (`metrics.py`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .metrics import write_lines_atomic

# bits per value of a format, for ordering precision (the nvfp4 block scales add 0.5 bit a value)
FORMAT_BITS = {"bf16": 16.0, "fp16": 16.0, "fp8_e4m3": 8.0, "fp8_e4m3_block128": 8.0, "mxfp4": 4.25,
               "nvfp4": 4.5, "nvfp4_4over6": 4.5}


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def format_class(group: Any) -> str:
    return f"{group.weights}/{group.activations}"


def precision(group: Any) -> tuple[float, float]:
    """Higher is more precise: (weight bits, activation bits)."""
    return FORMAT_BITS.get(group.weights, 16.0), FORMAT_BITS.get(group.activations, 16.0)


def _weight(row: dict[str, Any], name: str) -> float | None:
    """How much an update's value for a group counts: its trained tokens (the trainer's
    `tokens/group/<g>`), or its turns in rows written before that key existed."""
    tokens = _num(row.get(f"tokens/group/{name}"))
    return tokens if tokens is not None else _num(row.get(f"turns/{name}"))


def _kl_by(rows: list[dict[str, Any]], groups: dict[str, Any], key: str) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """({group: KL over the run}, {format class: KL over the run}) for one estimator: per-update
    values weighted by the group's tokens in that update, i.e. the token mean over the run."""
    total: dict[str, float] = {}
    weight: dict[str, float] = {}
    for row in rows:
        for name in groups:
            kl, w = _num(row.get(f"{key}/group/{name}")), _weight(row, name)
            if kl is not None and w:
                total[name] = total.get(name, 0.0) + kl * w
                weight[name] = weight.get(name, 0.0) + w
    per_group = {n: (total[n] / weight[n] if weight.get(n) else None) for n in groups}
    by_class: dict[str, list[str]] = {}
    for name, g in groups.items():
        by_class.setdefault(format_class(g), []).append(name)
    per_class: dict[str, float | None] = {}
    for cls, names in by_class.items():
        w = sum(weight.get(n, 0.0) for n in names)
        per_class[cls] = sum(total.get(n, 0.0) for n in names) / w if w else None
    return per_group, per_class


def _order(class_kl: dict[str, float | None], groups: dict[str, Any], estimator: str) -> dict[str, Any]:
    precision_of = {format_class(g): precision(g) for g in groups.values()}
    measured = [c for c in class_kl if class_kl[c] is not None]
    by_precision = sorted(measured, key=lambda c: precision_of[c])  # least precise first
    by_kl = sorted(measured, key=lambda c: -class_kl[c])  # type: ignore[operator]
    # holds when every less precise class has a larger KL than every more precise one
    holds = all(class_kl[a] > class_kl[b]  # type: ignore[operator]
                for i, a in enumerate(by_precision) for b in by_precision[i + 1:]
                if precision_of[a] < precision_of[b])
    return {
        "estimator": estimator, "by_precision": by_precision, "by_kl": by_kl, "holds": bool(measured) and holds,
        "unmeasured": [c for c in class_kl if class_kl[c] is None],
        "rule": "fewer bits in weights/activations -> larger train-vs-sampler KL",
    }


def _probe_by(rows: list[dict[str, Any]], groups: dict[str, Any]) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """({group: probe KL over the run}, {format class: its groups' mean}); updates weighted by the
    tokens they scored (the same for every group within an update)."""
    total: dict[str, float] = {}
    weight: dict[str, float] = {}
    for row in rows:
        w = _num(row.get("probe/tokens")) or 0.0
        for name in groups:
            kl = _num(row.get(f"kl_probe/group/{name}"))
            if kl is not None and w > 0:
                total[name] = total.get(name, 0.0) + kl * w
                weight[name] = weight.get(name, 0.0) + w
    per_group = {n: (total[n] / weight[n] if weight.get(n) else None) for n in groups}
    per_class: dict[str, list[float]] = {}
    for name, g in groups.items():
        if per_group[name] is not None:
            per_class.setdefault(format_class(g), []).append(per_group[name])  # type: ignore[arg-type]
    classes = {format_class(g) for g in groups.values()}
    return per_group, {c: (sum(per_class[c]) / len(per_class[c]) if per_class.get(c) else None) for c in classes}


def _group_order(group_kl: dict[str, float | None], groups: dict[str, Any]) -> dict[str, Any]:
    """Does every less precise group have a larger KL than every more precise one?"""
    measured = [n for n in groups if group_kl.get(n) is not None]
    violations = [
        f"{a} ({format_class(groups[a])}) {group_kl[a]:.3g} <= {b} ({format_class(groups[b])}) {group_kl[b]:.3g}"
        for a in measured for b in measured
        if precision(groups[a]) < precision(groups[b]) and not group_kl[a] > group_kl[b]  # type: ignore[operator]
    ]
    return {
        "estimator": "probe", "by_kl": sorted(measured, key=lambda n: -group_kl[n]),  # type: ignore[operator]
        "holds": bool(measured) and not violations, "violations": violations,
        "unmeasured": [n for n in groups if group_kl.get(n) is None],
        "rule": "per group, on the same tokens: fewer bits in weights/activations -> larger KL",
    }


def summarize_run(run_dir: Path | str, fleet: Any) -> dict[str, Any]:
    run_dir = Path(run_dir)
    rows = _rows(run_dir / "metrics.jsonl")
    evals = _rows(run_dir / "eval.jsonl")
    groups = {g.name: g for g in fleet.groups}
    served: dict[str, int] = {n: 0 for n in groups}
    for row in rows:
        for name in groups:
            served[name] += int(_num(row.get(f"turns/{name}")) or 0)
    k3_group, k3_class = _kl_by(rows, groups, "kl_k3")
    support_group, support_class = _kl_by(rows, groups, "kl_support")
    order_k3 = _order(k3_class, groups, "k3")
    # The check uses the exact KL over the replayed support when the run has it (every class with
    # a k3 value has one): k3 over a few hundred sampled tokens a group can invert the order.
    use_support = any(v is not None for v in support_class.values()) and all(
        support_class[c] is not None for c, v in k3_class.items() if v is not None)
    probe_group, probe_class = _probe_by(rows, groups)
    rewards = [_num(r.get("reward/mean")) for r in rows]
    cost = sum(_num(r.get("cost/busy_usd")) or 0.0 for r in rows)
    summary = {
        "updates": len(rows),
        "loss": rows[-1].get("loss_kind") if rows else None,
        "reward_per_update": rewards,
        "reward_mean": (sum(r for r in rewards if r is not None) / max(1, sum(r is not None for r in rewards))) if rows else None,
        "kl_k3_per_group": k3_group,
        "turns_per_group": served,
        "kl_k3_per_format": k3_class,
        "kl_support_per_group": support_group,
        "kl_support_per_format": support_class,
        "kl_order": _order(support_class, groups, "support") if use_support else order_k3,
        "kl_order_k3": order_k3,
        "kl_probe_per_group": probe_group,
        "kl_probe_per_format": probe_class,
        "kl_order_groups": _group_order(probe_group, groups),
        "eval": evals[-1] if evals else None,
        "wall_s": _num(rows[-1].get("time/wall_s")) if rows else None,
        "cost_busy_usd": cost,
    }
    write_lines_atomic(run_dir / "summary.json", [json.dumps(summary, indent=2)])
    return summary


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """A few console lines for the end of a run."""
    out = []
    rewards = ", ".join("-" if r is None else f"{r:.2f}" for r in summary["reward_per_update"])
    out.append(f"reward per update: {rewards}")
    for order in (summary["kl_order"], summary["kl_order_k3"]) if summary["kl_order"]["estimator"] != "k3" else (summary["kl_order"],):
        kl = summary[f"kl_{order['estimator']}_per_format"]
        parts = ", ".join(f"{c} {v:.2e}" for c, v in sorted(kl.items(), key=lambda kv: -(kv[1] or -1.0)) if v is not None)
        out.append(f"train-vs-sampler KL ({order['estimator']}) by format: {parts} (orders as the formats do: {'yes' if order['holds'] else 'NO'})")
    probe = summary.get("kl_order_groups")
    if probe and probe["by_kl"]:
        kl = summary["kl_probe_per_group"]
        parts = ", ".join(f"{n} {kl[n]:.2e}" for n in probe["by_kl"])
        out.append(f"format probe KL per group (same tokens): {parts} (orders as the formats do: {'yes' if probe['holds'] else 'NO'})")
    ev = summary.get("eval")
    if ev:
        ks = ", ".join(f"{k} {v:.2f}" for k, v in ev.items() if k.startswith("pass@") and v is not None)
        out.append(f"evaluation (BF16 sampler, held-out tasks): {ks}")
    return out

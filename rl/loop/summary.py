"""The run's summary: what a reader checks first, from `metrics.jsonl` and `eval.jsonl`.

Owns `summarize_run(run_dir, fleet)`, which writes `RUN_DIR/summary.json` and returns it:
- reward per update, and the mean over the run;
- the train-vs-sampler KL (k3) per sampler group over the whole run: the per-update values
  weighted by the group's turns in that update (a group that served no turn of an update has no
  value there, which happens with few sessions an update);
- the same per number-format class (the group's weights and activations, e.g. `nvfp4_4over6/bf16`),
  and the check the issue asks for: do the classes order by KL as their precision does (fewer
  bits in the weights and activations, larger KL)? `kl_order.holds` is true or false, never
  assumed; classes with no value are left out of the check and listed;
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


def summarize_run(run_dir: Path | str, fleet: Any) -> dict[str, Any]:
    run_dir = Path(run_dir)
    rows = _rows(run_dir / "metrics.jsonl")
    evals = _rows(run_dir / "eval.jsonl")
    groups = {g.name: g for g in fleet.groups}
    kl_sum: dict[str, float] = {}
    kl_turns: dict[str, int] = {}
    served: dict[str, int] = {n: 0 for n in groups}
    for row in rows:
        for name in groups:
            kl, turns = _num(row.get(f"kl_k3/group/{name}")), _num(row.get(f"turns/{name}"))
            served[name] += int(turns or 0)
            if kl is not None and turns:
                kl_sum[name] = kl_sum.get(name, 0.0) + kl * turns
                kl_turns[name] = kl_turns.get(name, 0) + int(turns)
    kl_group = {n: (kl_sum[n] / kl_turns[n] if kl_turns.get(n) else None) for n in groups}
    by_class: dict[str, list[str]] = {}
    for name, g in groups.items():
        by_class.setdefault(format_class(g), []).append(name)
    class_kl: dict[str, float | None] = {}
    for cls, names in by_class.items():
        turns = sum(kl_turns.get(n, 0) for n in names)
        class_kl[cls] = sum(kl_sum.get(n, 0.0) for n in names) / turns if turns else None
    class_precision = {cls: precision(groups[names[0]]) for cls, names in by_class.items()}
    measured = [c for c in class_kl if class_kl[c] is not None]
    by_precision = sorted(measured, key=lambda c: class_precision[c])  # least precise first
    by_kl = sorted(measured, key=lambda c: -class_kl[c])  # type: ignore[operator]
    # holds when every less precise class has a larger KL than every more precise one
    holds = all(class_kl[a] > class_kl[b]  # type: ignore[operator]
                for i, a in enumerate(by_precision) for b in by_precision[i + 1:]
                if class_precision[a] < class_precision[b])
    rewards = [_num(r.get("reward/mean")) for r in rows]
    cost = sum(_num(r.get("cost/busy_usd")) or 0.0 for r in rows)
    summary = {
        "updates": len(rows),
        "loss": rows[-1].get("loss_kind") if rows else None,
        "reward_per_update": rewards,
        "reward_mean": (sum(r for r in rewards if r is not None) / max(1, sum(r is not None for r in rewards))) if rows else None,
        "kl_k3_per_group": kl_group,
        "turns_per_group": served,
        "kl_k3_per_format": class_kl,
        "kl_order": {
            "by_precision": by_precision, "by_kl": by_kl, "holds": bool(measured) and holds,
            "unmeasured": [c for c in class_kl if class_kl[c] is None],
            "rule": "fewer bits in weights/activations -> larger train-vs-sampler KL",
        },
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
    kl = summary["kl_k3_per_format"]
    parts = ", ".join(f"{c} {v:.2e}" for c, v in sorted(kl.items(), key=lambda kv: -(kv[1] or -1.0)) if v is not None)
    order = summary["kl_order"]
    out.append(f"train-vs-sampler KL by format: {parts} (orders as the formats do: {'yes' if order['holds'] else 'NO'})")
    ev = summary.get("eval")
    if ev:
        ks = ", ".join(f"{k} {v:.2f}" for k, v in ev.items() if k.startswith("pass@") and v is not None)
        out.append(f"evaluation (BF16 sampler, held-out tasks): {ks}")
    return out

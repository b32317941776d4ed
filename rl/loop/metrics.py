"""Per-update measurements: the row written to `RUN_DIR/metrics.jsonl`, the console bar, W&B.

Owns: `metric_keys(groups)` (the fixed key set: every key is present in every row, NaN and missing
values are written as null, so a mixed fleet and its homogeneous control have the same overall
keys and per-group keys `.../<group>` for their own groups), `update_row(...)` (builds one row from
the update's trajectory groups, the trainer's metrics, busy times, cost and timings),
`MetricsWriter` (append + flush + fsync per update: a crash loses no finished update; on resume it
truncates rows past the checkpoint), `write_lines_atomic` (the whole-file writes of the run and of
the warm-up cache), `Progress` (a rich progress bar with reward, pass rate, KL and time) and
`WandbSink` (imported only when asked). It does not compute losses or KL itself: those
come from the trainer (`kl_k3`, `kl_k3/group/<g>`, `kl_k3/lag/<bucket>`, `kl_support`,
`kl_support/group/<g>` with support replay, `tokens/group/<g>`, ...) and from the per-update
format probe (`kl_probe`, `kl_probe/group/<g>`: `probe_kl.py`).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from patchgym.rl.trajectory import STATUS_CONTEXT_LIMIT, STATUS_SAMPLER_ERROR, STATUS_TURN_LIMIT

STATUSES = ("submitted", "format_error", STATUS_TURN_LIMIT, STATUS_CONTEXT_LIMIT, "time_limit", STATUS_SAMPLER_ERROR, "other")
LAG_BUCKETS = ("0-1", "2-3", "4-5", "6+")

BASE_KEYS = (
    "update", "version", "loss_kind",
    "reward/mean", "pass_rate", "episodes",
    *(f"status/{s}" for s in STATUSES), "format_error_frac",
    "response/tokens_mean", "response/turns_mean", "tokens/sampled", "tokens/total",
    "loss", "entropy", "grad_norm",
    "kl_k3", *(f"kl_k3/lag/{b}" for b in LAG_BUCKETS), "kl_support", "kl_probe", "probe/tokens",
    "mis/out_of_band_frac", "mis/masked_frac", "sc/tail_ratio",
    "staleness/mean", "staleness/max",
    "buffer/size", "buffer/dropped", "buffer/stale_kept", "buffer/paced_s", "buffer/blocked_s",
    "time/wall_s", "time/update_s", "time/trainer_s", "time/trainer_idle_s", "time/weight_publish_s", "time/probe_s",
    "throughput/trajectories_per_hour", "sessions/finished",
    "cost/busy_usd", "cost/turn_usd", "cost/usd_per_turn",
)
PER_GROUP = ("kl_k3/group", "kl_support/group", "kl_probe/group", "tokens/group", "busy", "compute", "turns", "reward/group", "cost/busy_usd", "cost/turn_usd")


def metric_keys(groups: Sequence[str]) -> list[str]:
    return list(BASE_KEYS) + [f"{prefix}/{g}" for prefix in PER_GROUP for g in groups]


def lag_bucket(lag: int) -> str:
    if lag <= 1:
        return "0-1"
    if lag <= 3:
        return "2-3"
    if lag <= 5:
        return "4-5"
    return "6+"


def _clean(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, int):
        return value
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    return value if math.isfinite(value) else None


def _pick(metrics: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in metrics:
            return metrics[name]
    return None


def update_row(
    *,
    update: int,
    version: int,
    loss_kind: str,
    groups: Sequence[Any],  # TrajectoryGroup
    trainer_metrics: Mapping[str, Any],
    group_names: Sequence[str],
    staleness_values: Sequence[int],
    busy_fraction: Mapping[str, float],
    cost: Mapping[str, float],
    timings: Mapping[str, float],
    buffer: Mapping[str, float],
    compute_fraction: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """One metrics row with every key of `metric_keys(group_names)` (missing -> None)."""
    trajs = [t for g in groups for t in g.trajectories]
    row: dict[str, Any] = {k: None for k in metric_keys(group_names)}
    row.update(update=update, version=version, loss_kind=loss_kind, episodes=len(trajs))
    if trajs:
        rewards = [float(t.reward) for t in trajs]
        row["reward/mean"] = sum(rewards) / len(rewards)
        row["pass_rate"] = sum(r > 0 for r in rewards) / len(rewards)
        counts = {s: 0 for s in STATUSES}
        for t in trajs:
            counts[t.status if t.status in counts else "other"] += 1
        for s, n in counts.items():
            row[f"status/{s}"] = n
        row["format_error_frac"] = counts["format_error"] / len(trajs)
        sampled = [t.num_sampled for t in trajs]
        row["response/tokens_mean"] = sum(sampled) / len(sampled)
        row["response/turns_mean"] = sum(len(t.turns) for t in trajs) / len(trajs)
        row["tokens/sampled"] = sum(sampled)
        row["tokens/total"] = sum(len(t) for t in trajs)
        turns: dict[str, int] = {g: 0 for g in group_names}
        rew: dict[str, list[float]] = {g: [] for g in group_names}
        for t in trajs:
            for turn in t.turns:
                turns[turn.group] = turns.get(turn.group, 0) + 1
            for g in t.groups:
                rew.setdefault(g, []).append(float(t.reward))
        for g in group_names:
            row[f"turns/{g}"] = turns.get(g, 0)
            row[f"reward/group/{g}"] = sum(rew[g]) / len(rew[g]) if rew.get(g) else None
    tm = trainer_metrics
    row["loss"] = _pick(tm, "loss")
    row["entropy"] = _pick(tm, "entropy")
    row["grad_norm"] = _pick(tm, "grad_norm")
    row["kl_k3"] = _pick(tm, "kl_k3", "k3")
    for b in LAG_BUCKETS:
        row[f"kl_k3/lag/{b}"] = _pick(tm, f"kl_k3/lag/{b}")
    row["kl_support"] = _pick(tm, "kl_support")  # None without support replay
    for g in group_names:
        row[f"kl_k3/group/{g}"] = _pick(tm, f"kl_k3/group/{g}")
        row[f"kl_support/group/{g}"] = _pick(tm, f"kl_support/group/{g}")
        row[f"tokens/group/{g}"] = _pick(tm, f"tokens/group/{g}")
    # Outside MIS's band (whatever the loss); masked = tokens the loss itself gave weight 0.
    row["mis/out_of_band_frac"] = _pick(tm, "mis/out_of_band_frac", "mis_masked_frac", "out_of_band_frac")
    kept = _pick(tm, "kept_fraction")
    row["mis/masked_frac"] = (1.0 - float(kept)) if kept is not None else _pick(tm, "mis/masked_frac", "masked_frac")
    row["sc/tail_ratio"] = _pick(tm, "sc/tail_ratio", "tail_ratio")
    if staleness_values:
        row["staleness/mean"] = sum(staleness_values) / len(staleness_values)
        row["staleness/max"] = max(staleness_values)
    for g in group_names:
        row[f"busy/{g}"] = busy_fraction.get(g)
        row[f"compute/{g}"] = (compute_fraction or {}).get(g)
    for key, value in cost.items():
        if key in row:
            row[key] = value
    for key, value in timings.items():
        row[f"time/{key}" if not key.startswith(("time/", "throughput/")) else key] = value
    for key, value in buffer.items():
        row[f"buffer/{key}"] = value
    # Anything else the trainer reported is kept under trainer/ (extra keys never replace fixed ones).
    for key, value in tm.items():
        if key not in row:
            row[f"trainer/{key}"] = value
    return {k: _clean(v) for k, v in row.items()}


class MetricsWriter:
    """Append-only `metrics.jsonl`: one row per update, flushed and fsynced as it is written."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, row: Mapping[str, Any]) -> None:
        line = json.dumps({k: _clean(v) for k, v in row.items()}, allow_nan=False)
        with open(self.path, "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def truncate_after(self, update: int) -> int:
        """Keep rows with `update <= update` (and drop a torn last line); returns rows dropped.

        Resume uses it: updates after the last checkpoint are redone, so their rows go.
        """
        if not self.path.exists():
            return 0
        kept, dropped = [], 0
        for line in self.path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                dropped += 1
                continue
            if int(row.get("update", 0)) <= update:
                kept.append(line)
            else:
                dropped += 1
        write_lines_atomic(self.path, kept)
        return dropped


def write_lines_atomic(path: Path, lines: Sequence[str]) -> None:
    """Write `lines` (a newline after each) to a temporary file beside `path`, fsync it, rename it
    over `path`: a reader or a crash sees the old file or the new one, never a part. The temporary
    name carries the process id, so two runs writing the same cache file do not share one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            for line in lines:
                f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a metrics.jsonl / eval.jsonl (a torn last line is skipped)."""
    rows = []
    if not Path(path).exists():
        return rows
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def _fmt(value: Any, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


class Progress:
    """A rich progress bar over the updates with the headline numbers of the last one."""

    def __init__(self, total: int, *, enabled: bool = True, description: str = "train") -> None:
        self.enabled = enabled
        self._progress = None
        if not enabled:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn

        self._progress = RichProgress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[headline]}"),
        )
        self._task = self._progress.add_task(description, total=total, headline="warming up")
        self._progress.start()

    def advance(self, row: Mapping[str, Any], completed: int | None = None) -> None:
        if not self._progress:
            return
        headline = (
            f"reward {_fmt(row.get('reward/mean'))}  pass {_fmt(row.get('pass_rate'), '.2f')}  "
            f"kl {_fmt(row.get('kl_k3'), '.2e')}  fmt-err {_fmt(row.get('format_error_frac'), '.2f')}  "
            f"update {_fmt(row.get('time/update_s'), '.0f')}s"
        )
        kwargs = {"completed": completed} if completed is not None else {"advance": 1}
        self._progress.update(self._task, headline=headline, **kwargs)

    def note(self, text: str) -> None:
        if self._progress:
            self._progress.update(self._task, headline=text)

    def close(self) -> None:
        if self._progress:
            self._progress.stop()
            self._progress = None


class WandbSink:
    """Weights & Biases logging; the package is imported only when a run asks for it."""

    def __init__(self, project: str, name: str, config: Mapping[str, Any], run_dir: Path) -> None:
        try:
            import wandb  # noqa: PLC0415
        except ImportError:
            raise RuntimeError("--wandb needs the wandb package, which is not installed: pip install wandb") from None
        self._wandb = wandb
        self._run = wandb.init(project=project, name=name, config=dict(config), dir=str(run_dir))

    def log(self, row: Mapping[str, Any]) -> None:
        self._run.log({k: v for k, v in row.items() if isinstance(v, (int, float)) and v is not None}, step=int(row["update"]))

    def close(self) -> None:
        self._run.finish()


def rows_by_key(rows: Iterable[Mapping[str, Any]], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for row in rows:
        value = row.get(key)
        if value is not None:
            xs.append(int(row.get("update", len(xs) + 1)))
            ys.append(float(value))
    return xs, ys

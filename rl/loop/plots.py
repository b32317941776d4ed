"""PNG curves of one or more runs, overlaid and labelled by run and loss (matplotlib, Agg).

Owns `plot_runs(run_dirs, out_dir) -> list[Path]`: one PNG per curve (reward, pass rate, KL k3
overall and per group, KL over the replayed support overall and per group, the format probe's KL
per group (every group on the same tokens), MIS masked fraction, SC tail ratio, format-error fraction, entropy, grad
norm, sampler cost, evaluation pass@k), reading each run's `metrics.jsonl` and `eval.jsonl`. A
curve no run has a value for is skipped (and not written). It does not run or evaluate anything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from .metrics import read_rows, rows_by_key

CURVES: list[tuple[str, str, str]] = [  # file stem, key, y label
    ("reward", "reward/mean", "mean reward"),
    ("pass_rate", "pass_rate", "pass rate (reward > 0)"),
    ("kl", "kl_k3", "train-vs-sampler KL (k3)"),
    ("kl_support", "kl_support", "train-vs-sampler KL over the replayed support"),
    ("masked_frac", "mis/masked_frac", "MIS masked fraction"),
    ("tail_ratio", "sc/tail_ratio", "SC tail ratio"),
    ("format_error", "format_error_frac", "format-error endings (fraction)"),
    ("entropy", "entropy", "entropy (nats/token)"),
    ("grad_norm", "grad_norm", "gradient norm"),
    ("cost", "cost/turn_usd", "sampler cost per update (USD, list price per turn)"),
    ("staleness", "staleness/mean", "staleness (versions, mean)"),
]


class PlotError(ValueError):
    """A run directory that holds nothing to plot."""


def run_label(run_dir: Path) -> str:
    """`<run name> (<loss>)` from the run's config.json, else the directory name."""
    name, loss = run_dir.name, None
    cfg = run_dir / "config.json"
    if cfg.exists():
        try:
            data = json.loads(cfg.read_text())
            name = data.get("name", name)
            loss = (data.get("loss") or {}).get("kind")
        except (json.JSONDecodeError, AttributeError):
            pass
    if loss is None:
        rows = read_rows(run_dir / "metrics.jsonl")
        loss = rows[0].get("loss_kind") if rows else None
    return f"{name} ({loss})" if loss else name


def plot_runs(run_dirs: Sequence[Path | str], out_dir: Path | str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = []
    for d in map(Path, run_dirs):
        rows = read_rows(d / "metrics.jsonl")
        if not rows:
            raise PlotError(f"{d}: no metrics.jsonl rows to plot (is it a run directory?)")
        runs.append((d, run_label(d), rows, read_rows(d / "eval.jsonl")))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    from matplotlib.ticker import MaxNLocator

    def save(fig, stem: str) -> None:
        for ax in fig.axes:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # updates are whole numbers
        path = out / f"{stem}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    for stem, key, ylabel in CURVES:
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        drawn = False
        for _, label, rows, _ in runs:
            xs, ys = rows_by_key(rows, key)
            if xs:
                ax.plot(xs, ys, marker="o", ms=3, label=label)
                drawn = True
        if not drawn:
            plt.close(fig)
            continue
        ax.set_xlabel("update")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, stem)

    # KL per sampler group, one PNG per estimator: one line per (run, group).
    for key, stem, ylabel in (("kl_k3", "kl_per_group", "KL k3 per sampler group"),
                              ("kl_support", "kl_support_per_group", "KL over the replayed support, per sampler group"),
                              ("kl_probe", "kl_probe_per_group", "format probe KL per sampler group (same tokens)")):
        fig, ax = plt.subplots(figsize=(7.2, 4.4))
        drawn = False
        for _, label, rows, _ in runs:
            groups = sorted({k.split("/", 2)[2] for r in rows for k in r if k.startswith(f"{key}/group/")})
            for g in groups:
                xs, ys = rows_by_key(rows, f"{key}/group/{g}")
                if xs:
                    ax.plot(xs, ys, marker=".", label=f"{label} {g}")
                    drawn = True
        if drawn:
            ax.set_xlabel("update")
            ax.set_ylabel(ylabel)
            ax.set_yscale("symlog", linthresh=1e-6)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6, ncol=2)
            save(fig, stem)
        else:
            plt.close(fig)

    # Evaluation pass@k: one line per (run, k).
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    drawn = False
    for _, label, _, evals in runs:
        ks = sorted({int(k.split("@")[1]) for r in evals for k in r if k.startswith("pass@")})
        for k in ks:
            pts = [(int(r["update"]), float(r[f"pass@{k}"])) for r in evals if r.get(f"pass@{k}") is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="s", label=f"{label} pass@{k}")
                drawn = True
    if drawn:
        ax.set_xlabel("update")
        ax.set_ylabel("held-out pass@k (BF16 sampler)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, "eval_pass_at_k")
    else:
        plt.close(fig)
    if not written:
        raise PlotError("no curve had any value in the given runs")
    return written

"""pass@k, the unbiased estimator: 1 - C(n - c, k) / C(n, k) for n samples of which c pass.

Owns the estimator and its aggregation over tasks (the mean of per-task values). Running the
samples is `evaluate.py`'s job. The product form avoids huge binomials:
C(n-c, k)/C(n, k) = prod_{i=n-c+1}^{n} (1 - k/i).
"""

from __future__ import annotations

from typing import Iterable, Mapping


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn without replacement from n passes."""
    if n < 1:
        raise ValueError(f"n must be >= 1 sample, got {n}")
    if not 0 <= c <= n:
        raise ValueError(f"passing samples c must be in 0..n={n}, got {c}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be in 1..n={n} (k <= n samples per task), got {k}")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def mean_pass_at_k(results: Mapping[str, Iterable[bool]], ks: Iterable[int]) -> dict[int, float]:
    """Mean over tasks of pass@k; every task must have the same n >= max(k)."""
    ks = list(ks)
    if not results:
        raise ValueError("no task results to compute pass@k over")
    out: dict[int, float] = {}
    for k in ks:
        values = []
        for task, outcomes in results.items():
            outcomes = list(outcomes)
            if k > len(outcomes):
                raise ValueError(f"task {task!r} has {len(outcomes)} samples, fewer than k={k}")
            values.append(pass_at_k(len(outcomes), sum(bool(o) for o in outcomes), k))
        out[k] = sum(values) / len(values)
    return out

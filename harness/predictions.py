"""Predictions to grade offline: SWE-bench's format, or the word `gold`.

A predictions file is JSON Lines (one `{"instance_id", "model_name_or_path", "model_patch"}` object
per line), or a JSON file holding a list of such objects or an object keyed by instance id (both
forms SWE-bench's harness accepts). `model_patch` may be null or empty (an empty prediction).
Several predictions for one instance are allowed when their `model_name_or_path` differ; the same
(model, instance) twice is an error. `gold` means the tasks' own `patch`, under the model name `gold`.

Every problem is a `PredictionsError` naming the file, the line (or entry) and what is wrong.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from patchgym.tasks.model import Task

GOLD = "gold"


class PredictionsError(ValueError):
    pass


@dataclass(frozen=True)
class Prediction:
    instance_id: str
    model: str
    patch: str | None

    @property
    def patch_sha256(self) -> str:
        return hashlib.sha256((self.patch if self.patch is not None else "\0none").encode("utf-8", "surrogateescape")).hexdigest()


def gold_predictions(tasks: Iterable[Task]) -> list[Prediction]:
    predictions = []
    for task in tasks:
        if not task.patch:
            raise PredictionsError(f"task {task.instance_id} has no gold `patch`, so `--predictions gold` cannot grade it")
        predictions.append(Prediction(task.instance_id, GOLD, task.patch))
    return predictions


def _from_row(row: Any, where: str) -> Prediction:
    if not isinstance(row, dict):
        raise PredictionsError(f"{where}: expected a JSON object, got {type(row).__name__}")
    missing = [key for key in ("instance_id", "model_name_or_path", "model_patch") if key not in row]
    if missing:
        raise PredictionsError(f"{where}: missing field(s) {', '.join(missing)}")
    instance_id, model, patch = row["instance_id"], row["model_name_or_path"], row["model_patch"]
    if not isinstance(instance_id, str) or not instance_id:
        raise PredictionsError(f"{where}: instance_id must be a non-empty string")
    if not isinstance(model, str) or not model:
        raise PredictionsError(f"{where}: model_name_or_path must be a non-empty string")
    if patch is not None and not isinstance(patch, str):
        raise PredictionsError(f"{where}: model_patch must be a string or null, got {type(patch).__name__}")
    return Prediction(instance_id, model, patch)


def read_predictions_file(path: Path) -> list[tuple[str, Prediction]]:
    """(where, prediction) pairs in file order; `where` names the line or entry."""
    if not path.is_file():
        raise PredictionsError(f"{path}: no such file (expected a predictions .jsonl/.json file, or the word `gold`)")
    text = path.read_text(encoding="utf-8", errors="replace")
    rows: list[tuple[str, Prediction]] = []
    stripped = text.lstrip()
    if path.suffix == ".json" or (stripped.startswith("[") and path.suffix != ".jsonl"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PredictionsError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
        if isinstance(data, dict):
            items = [(f"{path}: entry {key!r}", {"instance_id": key, **value} if isinstance(value, dict) else value)
                     for key, value in data.items()]
        elif isinstance(data, list):
            items = [(f"{path}: entry {index}", value) for index, value in enumerate(data)]
        else:
            raise PredictionsError(f"{path}: expected a list of predictions or an object keyed by instance_id")
        return [(where, _from_row(row, where)) for where, row in items]
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PredictionsError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        rows.append((where, _from_row(row, where)))
    if not rows:
        raise PredictionsError(f"{path}: holds no predictions")
    return rows


def load_predictions(spec: str | Path, tasks: list[Task]) -> list[Prediction]:
    """Predictions for `tasks` from a file or `gold`; unknown instances and duplicates are errors."""
    if str(spec) == GOLD:
        return gold_predictions(tasks)
    known = {task.instance_id for task in tasks}
    seen: dict[tuple[str, str], str] = {}
    predictions = []
    for where, prediction in read_predictions_file(Path(spec).expanduser()):
        if prediction.instance_id not in known:
            raise PredictionsError(f"{where}: instance_id {prediction.instance_id!r} is not in the task set")
        key = (prediction.model, prediction.instance_id)
        if key in seen:
            raise PredictionsError(f"{where}: a second prediction for {prediction.instance_id} by "
                                   f"{prediction.model!r} (the first is at {seen[key].split(': ', 1)[-1]})")
        seen[key] = where
        predictions.append(prediction)
    return predictions

"""Where offline grading keeps its results, so a run can be killed and resumed.

    <out>/<run_id>/<model>/<instance_id>/   report.json (written last, atomically) and the logs
    <out>/<run_id>/<model>/summary.json     per model (SWE-bench's counts and id lists)
    <out>/<run_id>/summary.json             every model's summary

`<model>` is `model_name_or_path` with `/` turned into `__` (SWE-bench's convention); other
characters unsafe in a file name are replaced and a short hash keeps different names apart. A
prediction is done when its report.json exists, parses, was made for the same patch (its sha256),
and is not an `infra_error` (those are retried). Writes go to a temporary file in the same folder,
then `os.replace`, so a report is either whole or absent.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from patchgym.harness.predictions import Prediction

REPORT = "report.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


def model_dir_name(model: str) -> str:
    name = model.replace("/", "__")
    safe = _UNSAFE.sub("_", name).lstrip(".") or "model"
    if safe != name:
        safe += "-" + hashlib.sha256(model.encode()).hexdigest()[:8]
    return safe


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=2)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class ResultStore:
    def __init__(self, out: Path, run_id: str) -> None:
        self.root = Path(out) / run_id

    def model_dir(self, model: str) -> Path:
        return self.root / model_dir_name(model)

    def item_dir(self, prediction: Prediction) -> Path:
        return self.model_dir(prediction.model) / prediction.instance_id

    def load(self, prediction: Prediction) -> dict[str, Any] | None:
        """The stored report for this prediction, or None if it must be graded (again)."""
        path = self.item_dir(prediction) / REPORT
        try:
            report = json.loads(path.read_text())
            entry = report[prediction.instance_id]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if entry.get("patch_sha256") != prediction.patch_sha256 or entry.get("status") == "infra_error":
            return None
        return report

    def save(self, prediction: Prediction, report: dict[str, Any]) -> Path:
        path = self.item_dir(prediction) / REPORT
        write_json_atomic(path, report)
        return path

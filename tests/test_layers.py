"""The dependency direction of docs/design.md, checked on the source: nothing imports upward.

rl -> env (client only) -> harness -> tasks -> scrubber. `patchgym.main` (cli/) sits above all.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {
    "scrubber": set(),
    "tasks": {"scrubber"},
    "harness": {"tasks", "scrubber"},
    "env": {"harness", "tasks", "scrubber"},
    "rl": {"env"},
}


def imported_layers(path: Path) -> set[tuple[str, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "patchgym" and len(parts) > 1:
                found.add((parts[1], name))
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_no_upward_imports(layer: str) -> None:
    offenders = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        if "suite/libraries" in str(path):
            continue
        for target, name in imported_layers(path):
            if target != layer and target in ALLOWED and target not in ALLOWED[layer]:
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_rl_uses_only_the_env_client() -> None:
    offenders = []
    for path in sorted((ROOT / "rl").rglob("*.py")):
        for target, name in imported_layers(path):
            if target == "env" and not name.startswith("patchgym.env.client"):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_checker_sees_a_planted_violation(tmp_path: Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("from patchgym.harness.grader import grade_patch\nimport patchgym.env.server\n")
    assert imported_layers(bad) == {("harness", "patchgym.harness.grader"), ("env", "patchgym.env.server")}

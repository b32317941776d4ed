"""Every bundled task is valid, checked by running its tests in a plain git checkout.

At base with test_patch applied every FAIL_TO_PASS test fails and every PASS_TO_PASS test passes;
with the gold patch added, all pass. Results are read from pytest's JUnit XML, not from its output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from patchgym.tasks.suite import bundled_tasks


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    jsonl = bundled_tasks(tmp_path_factory.mktemp("suite-store"))
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    return jsonl, rows


def _git(repo: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, text=True)
    assert done.returncode == 0, f"git {args}: {done.stderr}"
    return done.stdout


def run_tests(checkout: Path, ids: list[str]) -> dict[str, str]:
    """node id -> 'passed' | 'failed' | 'error' | 'skipped', for the ids pytest reported."""
    report = checkout.parent / f"{checkout.name}-junit.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--rootdir={checkout}",
         f"--junitxml={report}", "-o", "junit_family=xunit1", *ids],
        cwd=checkout, capture_output=True, text=True, timeout=120,
        # The tasks' environment is plain pytest; this venv's extra plugins would only slow it down.
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    outcomes: dict[str, str] = {}
    if not report.is_file():  # pytest died before writing a report: every id reads as missing
        return outcomes
    for case in ET.parse(report).getroot().iter("testcase"):
        # xunit1 gives file="tests/test_x.py" and name="test_y" (classname holds the class, if any)
        file, name, classname = case.get("file", ""), case.get("name", ""), case.get("classname", "")
        cls = classname.rsplit(".", 1)[-1]
        node = f"{file}::{cls}::{name}" if cls.startswith("Test") else f"{file}::{name}"
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed"}.get(child.tag, child.tag)
        outcomes[node] = status
    return outcomes


def validate_task(row: dict, jsonl_dir: Path, work: Path) -> list[str]:
    """Problems found with one task (empty when valid)."""
    problems: list[str] = []
    checkout = work / row["instance_id"]
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(jsonl_dir / row["source"]), str(checkout)], check=True)
    _git(checkout, "checkout", "--quiet", "--detach", row["base_commit"])
    _git(checkout, "apply", "-", stdin=row["test_patch"])
    ids = row["FAIL_TO_PASS"] + row["PASS_TO_PASS"]
    before = run_tests(checkout, ids)
    for test in row["FAIL_TO_PASS"]:
        if before.get(test) not in ("failed", "error"):
            problems.append(f"{row['instance_id']}: FAIL_TO_PASS {test} is {before.get(test, 'missing')} at base")
    for test in row["PASS_TO_PASS"]:
        if before.get(test) != "passed":
            problems.append(f"{row['instance_id']}: PASS_TO_PASS {test} is {before.get(test, 'missing')} at base")
    _git(checkout, "apply", "-", stdin=row["patch"])
    after = run_tests(checkout, ids)
    for test in ids:
        if after.get(test) != "passed":
            problems.append(f"{row['instance_id']}: {test} is {after.get(test, 'missing')} with the gold patch")
    return problems


@pytest.mark.slow
def test_every_task_is_valid(suite: tuple[Path, list[dict]], tmp_path: Path) -> None:
    jsonl, rows = suite
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda row: validate_task(row, jsonl.parent, tmp_path), rows))
    problems = [p for result in results for p in result]
    assert not problems, "\n".join(problems)


def test_validation_catches_a_broken_task(suite: tuple[Path, list[dict]], tmp_path: Path) -> None:
    """The check above can fail: FAIL_TO_PASS tests listed as PASS_TO_PASS are reported."""
    jsonl, rows = suite
    broken = dict(rows[0], PASS_TO_PASS=rows[0]["PASS_TO_PASS"] + rows[0]["FAIL_TO_PASS"])
    problems = validate_task(broken, jsonl.parent, tmp_path)
    assert any("PASS_TO_PASS" in p for p in problems)


NAIVE_FIXES = {
    # instance id -> (file, text, naive replacement): the obvious one-liner that breaks PASS_TO_PASS
    "iniconf-inline-comments": (
        "iniconf/lexer.py",
        "value = unquote(stripped[split_at + 1 :].strip())",
        'value = unquote(stripped[split_at + 1 :].split(";")[0].split("#")[0].strip())',
    ),
    "semverlite-prerelease-numeric-order": (
        "semverlite/version.py",
        "    return identifier\n",
        "    return int(identifier) if identifier.isdigit() else identifier\n",
    ),
}


@pytest.mark.parametrize("instance_id", sorted(NAIVE_FIXES))
def test_a_naive_fix_breaks_pass_to_pass(suite: tuple[Path, list[dict]], tmp_path: Path, instance_id: str) -> None:
    """PASS_TO_PASS matters for these tasks: the obvious fix passes FAIL_TO_PASS yet breaks others."""
    jsonl, rows = suite
    row = next(r for r in rows if r["instance_id"] == instance_id)
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(jsonl.parent / row["source"]), str(checkout)], check=True)
    _git(checkout, "checkout", "--quiet", "--detach", row["base_commit"])
    _git(checkout, "apply", "-", stdin=row["test_patch"])
    path, text, naive = NAIVE_FIXES[instance_id]
    source = (checkout / path).read_text()
    assert source.count(text) == 1
    (checkout / path).write_text(source.replace(text, naive))
    outcomes = run_tests(checkout, row["FAIL_TO_PASS"] + row["PASS_TO_PASS"])
    broken = [t for t in row["PASS_TO_PASS"] if outcomes.get(t) != "passed"]
    assert broken, "the naive fix should break a PASS_TO_PASS test"


# instance id -> (code run at base, what it prints there): the symptom each issue text reports.
SYMPTOMS = {
    "semverlite-bump-major-keeps-minor": ("from semverlite import bump_major; print(bump_major('1.4.2'))", "2.4.0"),
    "semverlite-prerelease-numeric-order": (
        "from semverlite import parse; print(parse('1.0.0-rc.10') < parse('1.0.0-rc.2'))", "True"),
    "semverlite-caret-zero-major": ("from semverlite import satisfies; print(satisfies('0.9.0', '^0.2.3'))", "True"),
    "semverlite-build-metadata-precedence": ("from semverlite import bump_patch; print(bump_patch('1.2.3+ci.7'))", "1.2.4+ci.7"),
    "iniconf-to-list-strip": ("from iniconf.values import to_list; print(to_list('a, b,  c '))", "['a', ' b', '  c ']"),
    "iniconf-escaped-reference": (
        "from iniconf import loads; print(loads('[s]\\nname = world\\nt = hello $${name}\\n').get('s', 't'))", "hello world"),
    "iniconf-inline-comments": (
        "from iniconf import loads; print(loads('[s]\\nport = 8080 ; the public port\\n').get('s', 'port'))",
        "8080 ; the public port"),
    "iniconf-typed-getter-fallback": (
        "from iniconf import loads; loads('[server]\\nport = 8080\\n').getint('server', 'workers', fallback=4)",
        "MissingOption"),
    "textgrid-truncate-too-long": ("from textgrid.cells import truncate; print(truncate('abcdefgh', 5))", "abcdef…"),
    "textgrid-markdown-numeric-rule": (
        "from textgrid import render; print(render([['a', 1.5]], headers=['f', 'kg'], style='markdown'))", "|:--|:-----|"),
    "textgrid-wide-characters": ("from textgrid.cells import pad; print(repr(pad('東京', 6)))", "'東京    '"),
    "textgrid-ragged-and-empty-tables": ("from textgrid import render; render([])", "IndexError"),
    "spancal-range-length-off-by-one": (
        "from datetime import date; from spancal import DateRange; print(len(DateRange(date(2024, 1, 1), date(2024, 1, 3))))", "2"),
    "spancal-add-months-month-end": (
        "from datetime import date; from spancal import add_months; add_months(date(2024, 1, 31), 1)",
        "day is out of range for month"),
    "spancal-monthly-drift": (
        "from datetime import date; from itertools import islice; from spancal import monthly; "
        "print(list(islice(monthly(date(2024, 1, 31)), 3))[-1])", "2024-03-29"),
    "spancal-business-days-backwards": (
        "from datetime import date; from spancal import add_business_days; print(add_business_days(date(2024, 3, 11), -1))",
        "2024-03-11"),
}


def test_each_issue_text_reports_what_happens_at_base(suite: tuple[Path, list[dict]], tmp_path: Path) -> None:
    jsonl, rows = suite
    assert {row["instance_id"] for row in rows} == set(SYMPTOMS)
    wrong = []
    for row in rows:
        checkout = tmp_path / row["instance_id"]
        subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(jsonl.parent / row["source"]), str(checkout)], check=True)
        _git(checkout, "checkout", "--quiet", "--detach", row["base_commit"])
        code, expected = SYMPTOMS[row["instance_id"]]
        done = subprocess.run([sys.executable, "-c", code], cwd=checkout, capture_output=True, text=True)
        if expected not in done.stdout + done.stderr:
            wrong.append(f"{row['instance_id']}: expected {expected!r}, got {(done.stdout + done.stderr)[-300:]!r}")
    assert not wrong, "\n".join(wrong)

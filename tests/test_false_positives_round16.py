"""Honest fixes a false-positive hunt on real projects (fpR, 2026-12-04: SQLAlchemy, arrow,
pydantic, Pygments, docutils, beautifulsoup4, pint, Babel, black, parso, PyYAML, isort,
markdown-it-py, python-slugify; both runners) found refused, cut down:

- a library's test decorator built with `exec` under a name of its own (SQLAlchemy's
  `@testing.requires`: `<sqlalchemy generated decorate() wrapper>`) that skips a graded test
  honestly: any `<...>` code on the stack of a skip was the patch's (`skip_from_patched_file` on
  every patch, both runners). Only names the patch's code compiled under are now
  (`Guard.tainted`);
- a fixed module defining a `namedtuple`, a `@dataclass` or a string annotation: the `<string>` code
  the standard library compiled for it while it imported tainted the name `<string>`, and every
  exec-built wrapper of the library was `test_code_not_from_protected_source`
  (`audit_hook._checked_template`: not where a dataclass's field names or an annotation's text
  would carry the patch's code into the template);
- coverage's C tracer, started by `--cov` in the repository's addopts (`Guard._native_and_trusted`);
- a reporting plugin that prints no per-test lines (pytest-pretty, pytest-tldr): every graded test
  was "not in the log" (graded runs block them by name, `runner.QUIET_REPORTERS_OFF`: a log blinded
  some other way still disagrees with the stream, round 4's witness);
- graded items of non-Python files a conftest collects (Pygments' golden files): left out of the
  default command, MISSING (`runner.pytest_data_items`).
"""

from __future__ import annotations

import array
import functools
import json
import json.scanner
import operator
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchgym.harness import audit_hook
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import BASE_FILES, GOLD_FILES, UNITTEST_BASE, UNITTEST_TEST_PATCH, build_prepared, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")


def _resolved(verdict) -> bool:
    return verdict.reward == 1.0 and not [f for f in verdict.flags if not f.startswith("note")]


def test_a_tracer_of_a_trusted_extension_module_is_not_the_patchs(tmp_path) -> None:
    guard = audit_hook.Guard(str(tmp_path), set(), set(), [str(tmp_path / "tests")], str(tmp_path / "own"))
    baseline = guard.snapshot()
    native = json.scanner.c_make_scanner(json.JSONDecoder())  # a native callable of a trusted package, as coverage's CTracer
    cases = ((native, False), (functools.partial(print), True), (operator.itemgetter(0), True),
             (functools.lru_cache(None)(print), True), (array.array("i"), True))
    for function, counted in cases:
        guard.findings.clear()
        guard.snapshot = lambda function=function: {**baseline, "trace": function}
        guard.check_state(dict(baseline))
        assert bool(guard.findings) == counted, (function, guard.findings)


EXEC_BUILT_SKIP = ('"""Test helpers of the library, as SQLAlchemy\'s `testing.requires`."""\nimport unittest\n\n'
                   '_TEMPLATE = "def {name}(*args, **kw):\\n    return _do(_fn, *args, **kw)\\n"\n\n\n'
                   "def _do(fn, *args, **kw):\n    raise unittest.SkipTest('feature not available')\n\n\n"
                   "def requires_feature(fn):\n    env = {'_do': _do, '_fn': fn}\n"
                   "    exec(compile(_TEMPLATE.format(name=fn.__name__), '<calc generated wrapper>', 'exec'), env)\n"
                   "    wrapper = env[fn.__name__]\n    wrapper.__wrapped__ = fn\n    wrapper.__qualname__ = fn.__qualname__\n"
                   "    return wrapper\n\n\n"
                   "def keep_signature(fn):\n    env = {'_fn': fn}\n"
                   "    exec('def {}(*args, **kw):\\n    return _fn(*args, **kw)\\n'.format(fn.__name__), env)\n"
                   "    wrapper = env[fn.__name__]\n    wrapper.__wrapped__ = fn\n    wrapper.__qualname__ = fn.__qualname__\n"
                   "    return wrapper\n")
NAMEDTUPLE_OPS = "from collections import namedtuple\n\nPair = namedtuple('Pair', 'a b')\n\n\n"


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_an_honest_skip_by_an_exec_built_library_decorator_and_a_fixed_module_with_a_namedtuple(tmp_path, runner) -> None:
    if runner == "pytest":
        base = {**BASE_FILES, "calc/testing.py": EXEC_BUILT_SKIP, "calc/ops.py": NAMEDTUPLE_OPS + BASE_FILES["calc/ops.py"],
                "tests/test_ops.py": BASE_FILES["tests/test_ops.py"] + "\n\nfrom calc.testing import keep_signature, requires_feature\n\n\n"
                "@requires_feature\ndef test_feature():\n    assert sub(1, 1) == 0\n\n\n"
                "@keep_signature\ndef test_kept():\n    assert mul(2, 2) == 4\n"}
        p2p = ["tests/test_ops.py::test_sub", "tests/test_ops.py::test_mul", "tests/test_ops.py::test_feature",
               "tests/test_ops.py::test_kept"]
        prepared, _ = build_prepared(tmp_path, instance_id="exec-built", base_files=base, pass_to_pass=p2p)
    else:
        base = {**UNITTEST_BASE, "calc/testing.py": EXEC_BUILT_SKIP, "calc/ops.py": NAMEDTUPLE_OPS + UNITTEST_BASE["calc/ops.py"],
                "tests/test_ops.py": UNITTEST_BASE["tests/test_ops.py"].replace(
                    "import unittest\n", "import unittest\n\nfrom calc.testing import requires_feature\n") +
                "\n    @requires_feature\n    def test_feature(self):\n        self.assertEqual(sub(1, 1), 0)\n"}
        prepared, _ = build_prepared(tmp_path, instance_id="exec-built-ut", base_files=base, log_parser="unittest",
                                     test_patch_files=UNITTEST_TEST_PATCH,
                                     fail_to_pass=["tests.test_add.AddTest.test_add"],
                                     pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_feature"])
    fix = {"calc/ops.py": base["calc/ops.py"].replace("return a - b  # bug: should add", "return a + b")}
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, fix), factory=FACTORY, deadline_s=120)
    assert _resolved(verdict), verdict.model_dump_json(indent=1)
    # the same decorator, made by the patch to skip the graded test, is still the patch's
    swallow = {"calc/ops.py": fix["calc/ops.py"].replace("return a + b", "return a - b") + (
        "\n\nimport unittest as _u\n\n\ndef _skip_all(fn):\n    env = {'_u': _u}\n"
        "    exec(compile('def f(*a, **k):\\n    raise _u.SkipTest(\"x\")\\n', '<calc generated wrapper>', 'exec'), env)\n"
        "    return env['f']\n")}
    assert grade_patch(prepared, diff_of(prepared.repo_dir, swallow), factory=FACTORY, deadline_s=120).reward == 0.0


QUIET_PLUGIN = {"quiet_report/__init__.py": ("import pytest\n\n\n@pytest.hookimpl(trylast=True)\ndef pytest_configure(config):\n"
                                             "    reporter = config.pluginmanager.getplugin('terminalreporter')\n"
                                             "    if reporter is not None:  # as pytest-pretty: no per-test lines, even under -rA\n"
                                             "        reporter.short_test_summary = lambda: None\n")}


@needs_sandbox
@pytest.mark.parametrize("name", ["pretty", "tldr", "other"])
def test_a_reporting_plugin_that_prints_no_per_test_lines_is_left_out(tmp_path, name) -> None:
    """Loaded under pytest-pretty's or pytest-tldr's plugin name (`-p` in the repository's addopts
    stands in for their entry points), it is blocked and the log keeps its lines; under any other
    name the log names no graded test, and the stream's passes are not taken on its word."""
    base = {**BASE_FILES, **QUIET_PLUGIN, "pyproject.toml": BASE_FILES["pyproject.toml"].replace(
        "[tool.pytest.ini_options]\n", f"[tool.pytest.ini_options]\naddopts = '-p {name}'\n")}
    base[f"{name}.py"] = "from quiet_report import *  # noqa: F401,F403\n"
    prepared, gold = build_prepared(tmp_path, instance_id=f"quiet-{name}", base_files=base, gold_files=GOLD_FILES)
    verdict = grade_patch(prepared, gold, factory=FACTORY, deadline_s=120)
    if name == "other":
        assert verdict.reward == 0.0 and any(f.startswith("log_disagrees") for f in verdict.flags), verdict.model_dump_json(indent=1)
    else:
        assert _resolved(verdict), verdict.model_dump_json(indent=1)


GOLDEN_CONFTEST = ("import pytest\n\nfrom calc import add\n\n\n@pytest.fixture\ndef two():\n    return 2\n\n\n"
                   "class GoldenItem(pytest.Item):\n    def runtest(self):\n"
                   "        given, expected = self.path.read_text().split('---expected---\\n')\n"
                   "        assert add(*map(int, given.split())) == int(expected)\n\n\n"
                   "class GoldenFile(pytest.File):\n    def collect(self):\n        yield GoldenItem.from_parent(self, name=self.path.stem)\n\n\n"
                   "def pytest_collect_file(parent, file_path):\n"
                   "    if file_path.suffix == '.txt' and file_path.parent.name == 'golden':\n"
                   "        return GoldenFile.from_parent(parent, path=file_path)\n")


@needs_sandbox
def test_graded_items_of_golden_files_a_conftest_collects_are_run(tmp_path) -> None:
    base = {**BASE_FILES, "tests/conftest.py": GOLDEN_CONFTEST, "tests/golden/five.txt": "2 3\n---expected---\n5\n",
            "tests/golden/zero.txt": "0 0\n---expected---\n0\n"}
    prepared, gold = build_prepared(tmp_path, instance_id="golden", base_files=base, gold_files=GOLD_FILES,
                                    fail_to_pass=["tests/test_add.py::test_add", "tests/golden/five.txt::five"],
                                    pass_to_pass=["tests/test_ops.py::test_sub", "tests/golden/zero.txt::zero"])
    verdict = grade_patch(prepared, gold, factory=FACTORY, deadline_s=120)
    assert _resolved(verdict), verdict.model_dump_json(indent=1)
    empty = grade_patch(prepared, diff_of(prepared.repo_dir, {"README.md": "calc, again\n"}), factory=FACTORY, deadline_s=120)
    assert empty.tests["FAIL_TO_PASS"]["tests/golden/five.txt::five"] == "FAILED", empty.model_dump_json(indent=1)


TAINT_SCRIPT = textwrap.dedent("""\
    import collections, dataclasses, json, sys, typing
    sys.path.insert(0, {hook_dir!r})
    import audit_hook
    guard = audit_hook.install({testbed!r}, {{{patched!r}}}, set(), [{testbed!r} + "/tests"], {own!r})
    try:
        exec(compile({operation!r}, {patched!r}, "exec"), {{"collections": collections, "dataclasses": dataclasses, "typing": typing}})
    except Exception:
        pass
    print(json.dumps("<string>" in guard.tainted))
    """)


@pytest.mark.parametrize("operation, tainted", [
    ("Pair = collections.namedtuple('Pair', 'a b')", False),
    ("@dataclasses.dataclass\nclass Box:\n    size: int = 0\n    name: str = 'x'\n", False),
    ("Rows = typing.List['typing.Optional[int]']\nEither = typing.List['int | str']", False),
    # the patch's own exec, and templates that would carry the patch's text: the name is the patch's
    ("exec('x = 1')", True),
    ("Rows = typing.List[\"__import__('os').getcwd() and int\"]", True),
])
def test_what_the_standard_librarys_templates_compile_for_the_patch_is_not_its_code(tmp_path, operation, tainted) -> None:
    testbed = tmp_path / "testbed"
    (testbed / "tests").mkdir(parents=True)
    patched = str(testbed / "pkg" / "core.py")
    script = TAINT_SCRIPT.format(hook_dir=str(Path(audit_hook.__file__).parent), testbed=str(testbed), patched=patched,
                                 own=str(tmp_path / "own"), operation=operation)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) is tainted, (operation, done.stdout)


def test_a_dataclass_whose_field_names_are_not_identifiers_is_not_a_checked_template() -> None:
    """`dataclasses` writes field names into the source it compiles unchecked: only a class whose
    fields' names are all plain identifiers leaves nothing of the patch's text in it."""
    import dataclasses

    def _process_class(fields):  # noqa: ANN001, ANN202  (named as dataclasses' own, whose `fields` is read)
        return audit_hook._checked_template("dataclass", sys._getframe(), "compile", ("...", "<string>"))

    def field(name):
        made = dataclasses.field()
        made.name = name
        return made

    class Lying(str):
        def isidentifier(self):
            return True

    assert _process_class({"size": field("size"), "name": field("name")})
    assert not _process_class({"size=print()": field("size=print()")})
    # every field that reaches the template, inherited ones too: a base's `__dataclass_fields__` the
    # patch wrote by hand carried code into a generated `__eq__` (red team rt20, reward 1)
    assert not _process_class({"size": field("size"), "x": field("x==__import__('sys').settrace(None)")})
    assert not _process_class({"size": field(Lying("size) or print("))})
    assert not _process_class(None)


def test_a_class_as_a_trace_function_runs_its_own_python_and_is_not_a_native_tracer(tmp_path) -> None:
    import typing

    class Tracer(typing.Protocol):  # its metaclass comes from `typing`; calling it runs this `__init__`
        def __init__(self, *args):
            pass

    guard = audit_hook.Guard(str(tmp_path), set(), set(), [str(tmp_path / "tests")], str(tmp_path / "own"))
    assert not guard._native_and_trusted(Tracer) and not guard._native_and_trusted(Tracer.__init__)

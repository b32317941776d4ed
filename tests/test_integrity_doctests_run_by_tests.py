"""Doctests of a library module that a test runs through the `doctest` module (harness/doctest_hold.py,
`doctest_examples.library_doctest_texts`).

Why: a hidden test ran `doctest.testmod(tk.core)` (or `DocTestSuite`, `run_docstring_examples`) and
a patch kept the bug and rewrote the docstring's expected output (`'hello-world'` into the buggy
`'Hello-World'`), made it `...` under `+ELLIPSIS`, or deleted the example or the docstring: reward 1
on both runners (red team rt38, dt01-dt04). The doctests now run the gold's examples against the
patch's code.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchgym.harness import doctest_examples
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import build_prepared, build_task, diff_of
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
HOLD = Path(doctest_examples.__file__).with_name("doctest_hold.py")

GOLD = '''"""The toolkit.

>>> 1 + 1
2
"""
import re


def slugify(text):
    """Turn text into a url slug.

    >>> slugify("Hello World")
    'hello-world'
    """
    return "-".join(re.findall(r"[A-Za-z0-9]+", text)).lower()


class Box:
    """A box.

    >>> Box().size()
    3
    """

    def size(self):
        """Its size.

        >>> Box().size() + 1
        4
        """
        return 3

    class Lid:
        def colour(self):
            """Its colour.

            >>> Box.Lid().colour()
            'red'
            """
            return "red"
'''
BUGGY = GOLD.replace(".lower()\n", "\n")  # the task's bug: no lowercasing
# The attacks: a bug kept, the docstring's examples made to pass it (each passes testmod without the hold).
EDITED = BUGGY.replace("    'hello-world'\n", "    'Hello-World'\n")
ELLIPSIS = BUGGY.replace('>>> slugify("Hello World")\n', '>>> slugify("Hello World")  # doctest: +ELLIPSIS\n').replace(
    "    'hello-world'\n", "    '...'\n")
SKIPPED = BUGGY.replace('>>> slugify("Hello World")\n', '>>> slugify("Hello World")  # doctest: +SKIP\n')
NO_EXAMPLE = BUGGY.replace('\n    >>> slugify("Hello World")\n    \'hello-world\'\n', "\n")
NO_DOCSTRING = BUGGY.replace('    """Turn text into a url slug.\n\n    >>> slugify("Hello World")\n    \'hello-world\'\n    """\n', "")
METHOD_EDITED = (GOLD.replace("        return 3\n", "        return 2\n").replace("    >>> Box().size()\n    3\n", "    >>> Box().size()\n    2\n")
                 .replace("        >>> Box().size() + 1\n        4\n", "        >>> Box().size() + 1\n        3\n"))
NESTED_EDITED = GOLD.replace('            return "red"\n', '            return "blue"\n').replace("            'red'\n", "            'blue'\n")
HONEST = GOLD.replace("Turn text into a url slug.", "Make a slug for a URL: lowercase words joined by hyphens.")


def _table(gold: str) -> dict[str, str]:
    docstrings, unknown = doctest_examples._docstrings(ast.parse(gold))
    return {name: text for name, text in docstrings.items() if text and ">>>" in text and name not in unknown}


def _run(tmp_path: Path, source: str, body: str, *, hold: bool = True, table: dict | None = None) -> dict:
    """Run `body` (which imports `tk` and sets `out`) in a fresh interpreter with `tk.py` = `source`,
    and the hold installed from a startup configuration naming the gold's docstrings of `tk.py`."""
    testbed, own = tmp_path / "testbed", tmp_path / "own"
    testbed.mkdir(exist_ok=True)
    own.mkdir(exist_ok=True)
    (testbed / "tk.py").write_text(source)
    (testbed / "other.py").write_text('def f():\n    """F.\n\n    >>> f()\n    2\n    """\n    return 2\n\n\n'
                                      'def wrap(function):\n    def wrapper(*args):\n        return function(*args)\n\n    return wrapper\n')
    texts = {"tk.py": _table(GOLD)} if table is None else table
    (own / "patchgym_startup.json").write_text(json.dumps({"testbed": str(testbed), "doctest_texts": texts}))
    lines = [
        "import contextlib, importlib.util, io, json, sys",
        f"spec = importlib.util.spec_from_file_location('patchgym_doctest_hold', {str(HOLD)!r})",
        "hold = importlib.util.module_from_spec(spec)",
        "spec.loader.exec_module(hold)",
        f"installed = hold.install({str(testbed)!r}, {str(own)!r}) if {hold!r} else False",
        f"sys.path.insert(0, {str(testbed)!r})",
        "import doctest, unittest",
        "import other, tk",
        "out = {}",
        "with contextlib.redirect_stdout(io.StringIO()) as printed:",
        textwrap.indent(body, "    ").rstrip("\n"),
        "out['installed'] = installed",
        "out['printed'] = printed.getvalue()",
        "print(json.dumps(out))",
    ]
    script = "\n".join(lines) + "\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=str(testbed))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


TESTMOD = "failed, attempted = doctest.testmod(tk)\nout.update(failed=failed, attempted=attempted)\n"


@pytest.mark.parametrize("source", [EDITED, ELLIPSIS, SKIPPED, NO_EXAMPLE, NO_DOCSTRING, METHOD_EDITED, NESTED_EDITED],
                         ids=["edited", "ellipsis", "skip", "no_example", "no_docstring", "method", "nested_class"])
def test_testmod_runs_the_gold_examples_against_the_patchs_code(tmp_path: Path, source: str) -> None:
    assert _run(tmp_path, source, TESTMOD, hold=False)["failed"] == 0  # (the attack passes without the hold)
    out = _run(tmp_path, source, TESTMOD)
    assert out["installed"] and out["failed"] >= 1, out
    assert out["attempted"] == 5, out  # every gold example ran (module, slugify, Box, Box.size, Box.Lid.colour)


def test_the_gold_and_an_honest_fix_that_rewrites_the_prose_pass_where_the_attack_fails(tmp_path: Path) -> None:
    for source in (GOLD, HONEST):
        out = _run(tmp_path, source, TESTMOD)
        assert out["installed"] and out["failed"] == 0 and out["attempted"] == 5, out
    assert _run(tmp_path, EDITED, TESTMOD)["failed"] == 1


def test_a_gold_docstring_the_finder_never_visits_is_not_added(tmp_path: Path) -> None:
    # A function wrapped by another module's decorator (no functools.wraps) is not the module's by the
    # finder's rule, on the gold as well: its (here stale) examples were never the test's (an honest
    # fix of such a module had failed).
    gold = GOLD.replace("import re\n", "import re\n\nimport other\n") + (
        '\n\n@other.wrap\ndef stale():\n    """Stale.\n\n    >>> stale()\n    1\n    """\n    return 2\n')
    out = _run(tmp_path, gold, TESTMOD, table={"tk.py": _table(gold)})
    assert "stale" in _table(gold) and out["failed"] == 0 and out["attempted"] == 5, out
    out = _run(tmp_path, gold.replace(".lower()\n", "\n").replace("    'hello-world'\n", "    'Hello-World'\n"), TESTMOD,
               table={"tk.py": _table(gold)})
    assert out["failed"] == 1 and out["attempted"] == 5, out


def test_doctest_suite_runs_the_gold_examples(tmp_path: Path) -> None:
    body = ("result = unittest.TestResult()\ndoctest.DocTestSuite(tk).run(result)\n"
            "out.update(failures=len(result.failures), run=result.testsRun)\n")
    out = _run(tmp_path, EDITED, body)
    assert out["failures"] == 1 and out["run"] == 5, out
    out = _run(tmp_path, NO_DOCSTRING, body)
    assert out["failures"] == 1 and out["run"] == 5, out


def test_run_docstring_examples_runs_the_gold_examples(tmp_path: Path) -> None:
    body = "doctest.run_docstring_examples(tk.slugify, {'slugify': tk.slugify})\n"
    assert "Failed example" in _run(tmp_path, EDITED, body)["printed"]
    assert "Failed example" in _run(tmp_path, NO_DOCSTRING, body)["printed"]
    body = "doctest.run_docstring_examples(tk.Box.size, {'Box': tk.Box}, name='NoName')\n"
    assert "Failed example" in _run(tmp_path, METHOD_EDITED, body)["printed"]
    assert _run(tmp_path, GOLD.replace("Its size.", "How big it is."), body)["printed"] == ""


def test_files_and_names_out_of_the_table_are_left_alone(tmp_path: Path) -> None:
    body = TESTMOD + "f2, a2 = doctest.testmod(other)\nout.update(other=[f2, a2])\n"
    both = METHOD_EDITED.replace("    'hello-world'\n", "    'Hello-World'\n").replace(".lower()\n", "\n")
    out = _run(tmp_path, both, body, table={"tk.py": {"Box.size": _table(GOLD)["Box.size"]}})
    assert "1 of   1 in tk.Box.size" in out["printed"] and out["failed"] == 1, out  # slugify's and Box's not held here
    assert out["attempted"] == 5 and out["other"] == [0, 1], out
    out = _run(tmp_path, EDITED, body, table={"elsewhere.py": _table(GOLD)})
    assert out["failed"] == 0 and out["installed"], out


def test_the_wrapper_is_watched_as_the_graders_own(tmp_path: Path) -> None:
    # (the reporters compare it at the end: the patch's code that put the original back is a replacement)
    body = "out['watched'] = [[label, ns[name] is value] for label, ns, name, value in hold.entries()]\n"
    assert _run(tmp_path, GOLD, body)["watched"] == [["doctest.DocTestFinder.find", True]]


def test_the_table_holds_the_golds_docstrings_of_the_library_files_the_patch_or_the_gold_touches(tmp_path: Path) -> None:
    set_at_import = '"""Module.\n\n>>> 1\n1\n"""\n__doc__ = "other"\n\n\ndef g():\n    """G.\n\n    >>> g()\n    1\n    """\n    return 1\n'
    task = build_task(tmp_path, base_files={"tk/core.py": BUGGY, "tk/other.py": set_at_import, "tk/plain.py": "x = 1\n",
                                            "tests/test_doc.py": '"""\n>>> 1\n1\n"""\n'},
                      test_patch_files={"tests/test_doc.py": '"""\n>>> 2\n2\n"""\n'}, gold_files={"tk/core.py": HONEST},
                      fail_to_pass=["tests/test_doc.py::test_x"], pass_to_pass=[])
    table = doctest_examples.library_doctest_texts(task, Path(task.source), ["tk/other.py", "tk/plain.py", "tests/test_doc.py"])
    assert sorted(table) == ["tk/core.py", "tk/other.py"], table  # (not the test file, not one without examples)
    assert table["tk/core.py"]["slugify"] == _table(HONEST)["slugify"] and "Make a slug" in table["tk/core.py"]["slugify"]
    assert sorted(table["tk/core.py"]) == ["", "Box", "Box.Lid.colour", "Box.size", "slugify"]
    assert sorted(table["tk/other.py"]) == ["g"]  # (the module's docstring is set again at import)


# --- grading, both runners ---------------------------------------------------------------------

LIB = {"tk/__init__.py": "from tk.core import slugify\n\n__version__ = '0.3'\n", "tk/core.py": BUGGY,
       "pyproject.toml": "[project]\nname = 'tk'\nversion = '0.3'\n", "README.md": "tk\n"}
BASE = {
    "pytest": {**LIB, "tests/__init__.py": "", "tests/test_base.py": "import tk\n\n\ndef test_version():\n    assert tk.__version__\n"},
    "unittest": {**LIB, "tests/__init__.py": "",
                 "tests/test_base.py": ("import unittest\n\nimport tk\n\n\nclass BaseTest(unittest.TestCase):\n"
                                        "    def test_version(self):\n        self.assertTrue(tk.__version__)\n")},
}
TESTS = {
    "pytest": {"tests/test_doctests.py": ("import doctest\n\nimport tk.core\n\n\ndef test_core_doctests():\n"
                                          "    assert doctest.testmod(tk.core).failed == 0\n")},
    "unittest": {"tests/test_doctests.py": ("import doctest\nimport unittest\n\nimport tk.core\n\n\n"
                                            "class DocTests(unittest.TestCase):\n    def test_core_doctests(self):\n"
                                            "        self.assertEqual(doctest.testmod(tk.core).failed, 0)\n")},
}
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")


@pytest.fixture(scope="module", params=["pytest", "unittest"])
def doctest_task(request, tmp_path_factory):
    runner = request.param
    f2p = ["tests/test_doctests.py::test_core_doctests"] if runner == "pytest" else ["tests.test_doctests.DocTests.test_core_doctests"]
    p2p = ["tests/test_base.py::test_version"] if runner == "pytest" else ["tests.test_base.BaseTest.test_version"]
    kw = {} if runner == "pytest" else {"log_parser": "unittest"}
    prepared, _ = build_prepared(tmp_path_factory.mktemp(f"doctests-{runner}"), instance_id=f"doctests-{runner}", base_files=BASE[runner],
                                 test_patch_files=TESTS[runner], gold_files={"tk/core.py": GOLD}, fail_to_pass=f2p, pass_to_pass=p2p, **kw)
    return prepared


@needs_sandbox
@pytest.mark.parametrize("source", [EDITED, ELLIPSIS, NO_EXAMPLE, NO_DOCSTRING], ids=["edited", "ellipsis", "no_example", "no_docstring"])
def test_a_patch_that_rewrites_the_doctest_it_fails_gets_no_reward(doctest_task, source: str) -> None:
    verdict = grade_patch(doctest_task, diff_of(doctest_task.repo_dir, {"tk/core.py": source}), factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0, verdict.model_dump_json(indent=1)


@needs_sandbox
def test_the_gold_and_a_fix_with_other_prose_are_resolved_and_the_attack_is_not(doctest_task) -> None:
    for source in (GOLD, HONEST):
        verdict = grade_patch(doctest_task, diff_of(doctest_task.repo_dir, {"tk/core.py": source}), factory=FACTORY, deadline_s=120)
        assert verdict.reward == 1.0 and not verdict.flags, verdict.model_dump_json(indent=1)
    verdict = grade_patch(doctest_task, diff_of(doctest_task.repo_dir, {"tk/core.py": EDITED}), factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0, verdict.model_dump_json(indent=1)


@pytest.mark.parametrize("source, mapped", [(EDITED, "tk.slugify"), (NO_EXAMPLE, "tk.slugify"), (METHOD_EDITED, "tk.Box")],
                         ids=["edited", "no_example", "a_class"])
def test_a_doctest_filed_through_another_modules_test_mapping_holds_the_gold_examples(tmp_path: Path, source: str, mapped: str) -> None:
    """fp51's toolz row: `toolz.__test__ = {...: functoolz.flip}` then `doctest.testmod(toolz)` files the
    DocTest under `toolz/__init__.py`, made from the fixed `functoolz.py`'s docstring: a patch that
    deleted flip's examples kept the bug and got reward 1."""
    # (the mapped examples run in `other`'s globals, as toolz's run in the package's, which imports them)
    body = f"other.slugify, other.Box = tk.slugify, tk.Box\nother.__test__ = {{'mapped': {mapped}}}\nfailed, attempted = doctest.testmod(other)\nout.update(failed=failed, attempted=attempted)\n"
    for part in ("off", "on", "gold"):
        (tmp_path / part).mkdir()
    assert _run(tmp_path / "off", source, body, hold=False)["failed"] == 0  # (the attack passes without the hold)
    out = _run(tmp_path / "on", source, body)
    assert out["failed"] > 0, out
    assert _run(tmp_path / "gold", GOLD, body)["failed"] == 0

"""SWE-bench's own test commands for the repositories whose tests it does not run with pytest.

A SWE-bench row carries no `test_cmd` and no `log_parser`: SWE-bench's harness picks both by the
row's `repo`. For the pytest projects our default (`python -m pytest ...` over the test patch's
files) is the same run; two of its largest projects run their own runners, and their rows loaded
unchanged would be graded by a pytest that cannot run them (Django's tests need its settings) or
read wrongly (sympy's ids are bare function names). Where a row names neither field, `Task` fills
them from this table (`defaults_for`); a row that names either is taken as written.

    django/django  ./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 <labels>
                   labels: the test patch's `tests/<app>/<module>.py` as `<app>.<module>`
                   log_parser `unittest` (it reads Django's `test_m (module.Class) ... ok` lines)
    sympy/sympy    PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose <files>
                   files: the test patch's Python files; log_parser `sympy`

Only the test patch's Python files are named (SWE-bench drops data files by their extension).
Neither command runs a reporter of the grader's: such a run is judged by its log alone
(docs/grading.md, "custom commands").
"""

from __future__ import annotations

import re
import shlex

_DIFF_FILE = re.compile(r"^diff --git a/\S+ b/(\S+)$", re.MULTILINE)

DJANGO = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
SYMPY = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose"


def _python_files(test_patch: str | None) -> list[str]:
    """The Python files a test patch touches, in order, once each."""
    return list(dict.fromkeys(path for path in _DIFF_FILE.findall(test_patch or "") if path.endswith(".py")))


def _django_label(path: str) -> str:
    path = path[: -len(".py")]
    return (path[len("tests/"):] if path.startswith("tests/") else path).replace("/", ".")


def defaults_for(repo: str, test_patch: str | None) -> dict[str, str]:
    """`test_cmd` and `log_parser` for a row of `repo` that names neither; empty where SWE-bench
    runs the repository's tests with pytest (or where the test patch names no Python file)."""
    files = _python_files(test_patch)
    if not files:
        return {}
    if repo == "django/django":
        return {"test_cmd": DJANGO + " " + " ".join(shlex.quote(_django_label(path)) for path in files),
                "log_parser": "unittest"}
    if repo == "sympy/sympy":
        return {"test_cmd": SYMPY + " " + " ".join(shlex.quote(path) for path in files), "log_parser": "sympy"}
    return {}

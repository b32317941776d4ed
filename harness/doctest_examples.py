"""The examples of graded doctests, as the task's tests define them, for the reporter to hold the run to.

A doctest id (`pkg/mod.py::pkg.mod.Cls.method`, run with `--doctest-modules`) lives in library code
that the fix may change, so its file is not restored like a test file (tasks/model.py). But its
examples are the test: a patch that rewrote `>>> add(2, 3)` / `5` into `-1` passed it with the bug
(red team round 3, reward 1). So the grader reads the examples of each graded doctest from the module
as the gold patch leaves it (the base file when the gold patch does not touch it), and the reporter
fails a doctest whose examples (source and expected output) differ from those.

What is compared: `doctest.DocTestParser` examples of the docstring of the object the id names (the
module's own docstring for an id that is the module's name). Prose around the examples is free. An
object that cannot be found, or a file that does not parse, gives no expectation (the doctest is
judged as before).
"""

from __future__ import annotations

import ast
import doctest
import functools
import subprocess
import tempfile
from pathlib import Path

from patchgym.tasks.model import Task, is_doctest_id
from patchgym.tasks.patches import files_touched


def graded_doctest_examples(task: Task, repo_dir: Path) -> dict[str, list[list[str]]]:
    """{graded doctest id: [[source, want], ...]} for the task's graded doctest ids."""
    out: dict[str, list[list[str]]] = {}
    for test_id in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]:
        if not is_doctest_id(test_id):
            continue
        path, name = test_id.split("::", 1)
        source = _module_as_gold_leaves_it(str(repo_dir), path, task.patch or "")
        examples = _examples(source, name.split("[", 1)[0], path[:-3].replace("/", ".")) if source is not None else None
        if examples is not None:
            out[test_id] = examples
    return out


def library_doctest_texts(task: Task, repo_dir: Path, touched: list[str]) -> dict[str, dict[str, str]]:
    """{library file: {qualified name within the module ('' for the module's own, `Cls`,
    `Cls.method`, `func`): its docstring as the gold patch leaves it}} for every docstring with an
    example (`>>>`) in the Python files, not test files, that the graded patch (`touched`) or the
    gold patch touches. The test process holds doctests that a test runs through the `doctest`
    module to these (harness/doctest_hold.py): a test's `doctest.testmod(pkg.mod)` runs the task's
    examples, not the ones a patch wrote into the library's docstrings (red team rt38's dt01-dt04).
    Left out, as `_examples` leaves them: docstrings set at import or written by a decorator, and
    names defined twice with different docstrings; a file the gold patch does not apply to, or that
    does not parse, or that base does not hold (the patch's own new files)."""
    tests = set(task.test_files())
    out: dict[str, dict[str, str]] = {}
    for path in dict.fromkeys([*touched, *files_touched(task.patch or "")]):
        if not path.endswith(".py") or path in tests:
            continue
        texts = _doctest_texts_of(str(repo_dir), path, task.patch or "")
        if texts:
            out[path] = dict(texts)
    return out


@functools.lru_cache(maxsize=64)
def _doctest_texts_of(repo_dir: str, path: str, gold: str) -> tuple[tuple[str, str], ...]:
    """The (name, docstring) pairs of `library_doctest_texts` for one file (parsed once a task)."""
    source = _module_as_gold_leaves_it(repo_dir, path, gold)
    if source is None or ">>>" not in source:
        return ()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    docstrings, unknown = _docstrings(tree)
    if any(isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and any(
            isinstance(target, ast.Name) and target.id == "__doc__"
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])) for node in tree.body):
        unknown.add("")  # the module's docstring set at import
    return tuple((name, text) for name, text in docstrings.items() if text and ">>>" in text and name not in unknown)


@functools.lru_cache(maxsize=64)
def _module_as_gold_leaves_it(repo_dir: str, path: str, gold: str) -> str | None:
    base = Path(repo_dir) / path
    try:
        text = base.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if path not in files_touched(gold):
        return text
    with tempfile.TemporaryDirectory(prefix="pg-doctest-") as tmp:
        target = Path(tmp) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        done = subprocess.run(["git", "apply", f"--include={path}", "-"], cwd=tmp, input=gold.encode(),
                              capture_output=True, timeout=60)
        if done.returncode != 0:
            return None
        try:
            return target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            # the gold deletes the module (fp57's FP-6, stop 53: every grading of such a task,
            # the gold's too, was `infra_error` with a FileNotFoundError): it leaves no examples
            return None


class _Parser(doctest.DocTestParser):
    """The standard parser with every `# doctest: +FLAG` accepted: what is compared is an example's
    source (which holds the comment) and its expected output, never its options. Why: flags that
    pytest (`NUMBER`), pytest-doctestplus (`FLOAT_CMP`, `REMOTE_DATA`) or a conftest register exist
    only in the test process, and the standard parser raised ValueError on them in the grader's,
    which turned every patch of such a task into `infra_error` (fpS: 71 of astropy's doctests)."""

    def _find_options(self, source, name, lineno):  # noqa: ANN001, ANN202  (doctest's own signature)
        return {}


# Decorators whose name says they write or change a docstring (astropy's `format_doc`, pandas'
# `doc`, `Appender`, `Substitution`): the docstring in the source is not the one that runs.
_DOC_WRITERS = ("doc", "appender", "substitution", "inherit")


def _writes_docstring(node: ast.AST) -> bool:
    for decorator in getattr(node, "decorator_list", []):
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if any(word in name.lower() for word in _DOC_WRITERS):
            return True
    return False


def _docstrings(tree: ast.Module) -> tuple[dict[str, str | None], set[str]]:
    """({qualified name within the module ('' for the module's own): its docstring as written},
    {the names whose docstring in the source may not be the one that runs}) for the module, its
    classes, functions and methods, nested classes included (what `doctest.DocTestFinder` visits)."""
    docstrings: dict[str, str | None] = {"": ast.get_docstring(tree, clean=False)}
    unknown = {node.value.id for node in ast.walk(tree)
               if isinstance(node, ast.Attribute) and node.attr == "__doc__" and isinstance(node.ctx, ast.Store)
               and isinstance(node.value, ast.Name)}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in getattr(node, "body", []):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualname = f"{prefix}.{child.name}" if prefix else child.name
                docstring = ast.get_docstring(child, clean=False)
                if child.name in unknown or _writes_docstring(child):
                    unknown.add(qualname)
                elif qualname in docstrings and docstrings[qualname] is not None and docstring not in (None, docstrings[qualname]):
                    unknown.add(qualname)  # defined again with another docstring
                if docstrings.get(qualname) is None:
                    docstrings[qualname] = docstring
                if isinstance(child, ast.ClassDef):
                    visit(child, qualname)

    visit(tree, "")
    return docstrings, unknown


def _examples(source: str, name: str, module: str) -> list[list[str]] | None:
    """The examples of the docstring of `name` (`pkg.mod.Cls.method`) in the module `source`
    (whose file is `module`, dotted: `src.pkg.mod`). None (no expectation: the doctest is judged as
    before) wherever the docstring in the source may not be the one pytest runs (fpS, false
    `doctest_changed` on honest fixes): one set at import (`f.__doc__ = ...`, a decorator that
    writes docstrings), several definitions of the name with different docstrings (a property's
    getter and setter: pytest runs the getter's), or one with no examples at all."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    docstrings, unknown = _docstrings(tree)
    if module == name or module.endswith("." + name):  # the id names the module itself
        chosen = docstrings[""]
    else:
        qualname = next((q for q in sorted((q for q in docstrings if q), key=len, reverse=True) if name.endswith("." + q)), None)
        if qualname is None or qualname in unknown:
            return None
        chosen = docstrings[qualname]
    if chosen is None:
        return None
    try:
        examples = [[e.source, e.want] for e in _Parser().get_examples(chosen)]
    except ValueError:  # a docstring the parser refuses (inconsistent indentation): no expectation
        return None
    return examples or None

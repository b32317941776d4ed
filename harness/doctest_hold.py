"""The examples of the doctests a test runs through the `doctest` module, held to the task's.

Copied into the grading sandbox next to the reporters (as `patchgym_doctest_hold`) and installed
by both, before any code of the repository runs. It owns one thing: what `doctest.DocTestFinder.find`
returns for the library files that the graded patch or the gold patch touches.

Why: a hidden test may run the doctests of a library module itself (`doctest.testmod(pkg.mod)`,
`doctest.DocTestSuite(pkg.mod)`, `doctest.run_docstring_examples(f, globs)`). Those examples are
the test, but they live in library code the fix may change, and a patch that rewrote the expected
output (`'hello-world'` into the buggy `'Hello-World'`), made it `...` under `+ELLIPSIS`, or
deleted the example or the whole docstring kept the bug and passed: red team rt38 (dt01-dt04 on
its `doctest` and `doctest2` tasks), reward 1 on both runners. pytest's `--doctest-modules` with
graded doctest ids was held already (harness/doctest_examples.py, the reporter's `_check_doctest`);
a doctest run by a test through `doctest` was not.

How: the grader reads the docstrings with examples of those files as the gold patch leaves them
(`doctest_examples.library_doctest_texts`: {file: {name within the module: docstring}}) and the
runner writes them into the startup configuration (`doctest_texts`). `install` wraps the class's
`find` (testmod, DocTestSuite and run_docstring_examples all call it): for each DocTest it returns
whose file and name are in that table and whose examples (source, expected output, options) are
not those of the gold's docstring, the DocTest is parsed again from the gold's docstring (the same
name, globals, file and line); where it was asked about a module of the table (or a class or
function of one) and a name of the table is not among them (the patch deleted the example or the
docstring, or moved the object away), one is added from the gold's docstring with the module's
globals. The task's examples then run against the patch's code: an honest fix passes them, the
bug fails them. Prose around the examples is free. Nothing happens for other files.

Left as they were: pytest's own doctest collection (`_pytest`'s finder, scipy_doctest's,
pytest-doctestplus'), which the reporter already holds by graded id; doctests of text files
(`doctest.testfile`, `DocFileSuite`); a doctest run in another process; a gold docstring that the
standard parser refuses (an option flag not registered in the test process).
"""

import os

# pytest's finder (and the plugins that put theirs in its place): their graded doctests are held by
# the reporter (`_check_doctest`, whose tolerance for scipy_doctest's parser this would undo).
_THEIRS = ("_pytest", "scipy_doctest", "pytest_doctestplus")

_installed = []  # the wrapper, once installed (`entries`)


def install(testbed, own_dir):
    """Wrap `doctest.DocTestFinder.find` where the startup configuration names docstrings to hold
    (none: nothing is imported or changed). Returns whether it did."""
    try:
        import json

        with open(os.path.join(own_dir, "patchgym_startup.json"), encoding="utf-8") as handle:
            table = json.load(handle).get("doctest_texts")
        if not isinstance(table, dict) or not table:
            return False
        root = os.path.realpath(testbed)
        texts = {}
        for rel, names in table.items():
            if isinstance(rel, str) and isinstance(names, dict):
                texts[os.path.realpath(os.path.join(root, rel))] = dict(
                    (str(name), text) for name, text in names.items() if isinstance(text, str))
    except (OSError, ValueError, AttributeError, TypeError):
        return False
    import doctest

    original = doctest.DocTestFinder.find
    if getattr(original, "_patchgym_hold", False):
        return True

    def find(self, obj, name=None, module=None, globs=None, extraglobs=None):
        tests = original(self, obj, name, module, globs, extraglobs)
        try:
            return _hold(doctest, texts, self, obj, name, module, globs, extraglobs, tests)
        except Exception:  # noqa: BLE001  (a grader error must not change what the test sees)
            return tests

    find.__doc__ = original.__doc__
    find.__name__ = original.__name__
    find._patchgym_hold = True
    doctest.DocTestFinder.find = find
    _installed.append(find)
    return True


def entries():
    """The wrapper where the reporters watch the grader's objects ((label, namespace, name, value),
    as theirs): code of the patch that put the original `find` back is reported as a replacement."""
    if not _installed:
        return []
    import doctest

    return [("doctest.DocTestFinder.find", vars(doctest.DocTestFinder), "find", _installed[0])]


def _real(path):
    try:
        return os.path.realpath(path) if isinstance(path, str) and path else None
    except (TypeError, ValueError):
        return None


def _module_file(module):
    """The real path of a module's file as its import knew it (its spec's origin, else `__file__`)."""
    spec = getattr(module, "__spec__", None)
    for path in (getattr(spec, "origin", None), getattr(module, "__file__", None)):
        real = _real(path)
        if real is not None:
            return real
    return None


def _examples(examples):
    return [(e.source, e.want, sorted(e.options.items())) for e in examples]


def _hold(doctest, texts, finder, obj, name, module, globs, extraglobs, tests):
    """`tests`, what the finder found for `obj`, held to the gold's docstrings in `texts` (the
    module's docstring says how)."""
    if not texts or type(finder).__module__.split(".")[0] in _THEIRS:
        return tests
    import inspect

    # What the finder was asked about: a module of the table, or a class or function of one, and
    # the name within that module its own DocTest has (`''` for a module).
    if inspect.ismodule(obj):
        asked_module, base = obj, ""
    else:
        asked_module = module if inspect.ismodule(module) else inspect.getmodule(obj)
        base = None
    asked_file = _module_file(asked_module) if asked_module is not None else None
    if base is None and asked_file in texts:
        base = _name_in(asked_module, obj, texts[asked_file])
    # DocTests made from a module's `__test__` mapping (`toolz.__test__ = {"flip": functoolz.flip}`):
    # filed under the module asked about, made from another file's docstring (fp51's toolz row: a patch
    # that deleted flip's examples in the fixed `functoolz.py` kept the bug and got reward 1)
    through = {}
    for test in tests:
        if ".__test__." in str(getattr(test, "name", "")):
            found = _through_test_mapping(test.name, asked_module, texts)
            if found is not None:
                through[id(test)] = found
    if asked_file not in texts and not through and not any(_real(f) in texts for f in set(getattr(t, "filename", None) for t in tests)):
        return tests
    root = name if name is not None else getattr(obj, "__name__", None)
    parser = doctest.DocTestParser()
    out, present = [], set()
    for test in tests:
        inner = _inner_name(test.name, root, base)
        filename = _real(test.filename)
        if id(test) in through:
            filename, inner = through[id(test)]
        gold = texts.get(filename, {}).get(inner) if inner is not None else None
        if gold is None and asked_file in texts and inner is not None:
            gold = texts[asked_file].get(inner)
            filename = asked_file if gold is not None else filename
        if gold is None:
            out.append(test)
            continue
        present.add((filename, inner))
        try:
            expected = parser.get_examples(gold)
        except ValueError:  # (a flag this process has not registered, an indentation it refuses)
            out.append(test)
            continue
        if _examples(test.examples) == _examples(expected):
            out.append(test)
        else:
            out.append(parser.get_doctest(gold, test.globs, test.name, test.filename, test.lineno))
    if asked_file in texts and base is not None and root is not None:
        shared = tests[0].globs if tests else _globs(asked_module, globs, extraglobs)
        recurse = getattr(finder, "_recurse", True)
        for inner, gold in sorted(texts[asked_file].items()):
            within = inner == base or (recurse and (base == "" or inner.startswith(base + ".")))
            if not within or (asked_file, inner) in present or not _would_be_found(finder, asked_module, inner):
                continue
            rest = inner[len(base):].lstrip(".") if base else inner
            try:
                out.append(parser.get_doctest(gold, shared, root + ("." + rest if rest else ""), asked_file, None))
            except ValueError:
                continue
    try:
        out.sort()
    except TypeError:  # (two of one name and file, one with no line: left in the finder's order)
        pass
    return out


def _through_test_mapping(test_name, module, texts):
    """(file, name within it) of the table that a DocTest named `<module>.__test__.<key>[.<rest>]`
    was made from: the function or class the module's `__test__` maps `key` to, by its code's file
    (a class: its module's) and its `__qualname__`; None where that is no object of the table."""
    mapping = getattr(module, "__test__", None) if module is not None else None
    if not isinstance(mapping, dict):
        return None
    key, _, below = test_name.partition(".__test__.")[2].partition(".")
    value = mapping.get(key)
    if value is None or isinstance(value, str):
        return None
    value = getattr(value, "__func__", value)
    code = getattr(value, "__code__", None)
    if code is not None:
        filename = _real(code.co_filename)
    else:
        import sys

        owner = sys.modules.get(getattr(value, "__module__", None) or "")
        filename = _module_file(owner) if owner is not None else None
    qualname = getattr(value, "__qualname__", None)
    if filename not in texts or not isinstance(qualname, str) or "<" in qualname:
        return None
    return filename, qualname + ("." + below if below else "")


def _would_be_found(finder, module, inner):
    """Whether the finder would have made a DocTest for the object named `inner` in `module` had
    its docstring held examples: it is gone (deleted or renamed by the patch), or it is the module's
    by the finder's own rule. Not one that is another module's (a decorator's wrapper without
    `functools.wraps`): the finder passes it by on the gold as well, and its examples were never
    the test's."""
    value = module
    for part in inner.split(".") if inner else ():
        value = getattr(value, part, None)
        if value is None:
            return True
    value = getattr(value, "__func__", value)  # (a classmethod's, reached through its class)
    from_module = getattr(finder, "_from_module", None)
    if from_module is None or value is module:
        return True
    try:
        return bool(from_module(module, value))
    except Exception:  # noqa: BLE001  (what the rule cannot tell: as before, found)
        return True


def _name_in(module, obj, names):
    """The name within `module` of `obj`, a class or function of it: the name of the table whose
    object it is, else its `__qualname__` (None where that is a local's)."""
    for name in names:
        if not name:
            continue
        value = module
        for part in name.split("."):
            value = getattr(value, part, None) if value is not None else None
        if value is not None and (value is obj or getattr(value, "__func__", None) is obj):
            return name
    qualname = getattr(obj, "__qualname__", None)
    return qualname if isinstance(qualname, str) and "<" not in qualname else None


def _inner_name(test_name, root, base):
    """The name within its module of the object a DocTest named `test_name` was made from, when the
    finder was asked about an object named `root` whose name within its module is `base`."""
    if base is None or root is None or not isinstance(test_name, str):
        return None
    if test_name == root:
        return base
    if test_name.startswith(root + "."):
        rest = test_name[len(root) + 1:]
        return base + "." + rest if base else rest
    return None


def _globs(module, globs, extraglobs):
    """The globals `find` gives the DocTests it makes (its own rule)."""
    if globs is None:
        globs = dict(vars(module)) if module is not None else {}
    else:
        globs = dict(globs)
    if extraglobs is not None:
        globs.update(extraglobs)
    if "__name__" not in globs:
        globs["__name__"] = "__main__"
    return globs

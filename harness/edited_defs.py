"""Which code of a file the fix edited is still the repository's own: the defs the fix left as they were.

Copied into the grading sandbox as `patchgym_edited_defs` and used by the equality probe
(`patchgym_equality_probe`); standard library only, Python >= 3.6 syntax.

The grader sends the base version of every Python file the patch edits (the startup config's
`base_copies`, next to `patchgym_startup.json`). This module reads those and the edited files as
they are when it is imported -- by the reporters, before any code of the repository runs -- and
answers, per file: which classes and defs the base version had (`definitions_of`: qualified name ->
the def's syntax tree, dumped, so a def moved by some lines is the same def), whether a code object is
what that file compiles to for its def (`compiled_like_the_file`: not code compiled elsewhere under
the file's name), and whether a class is one the repository had at base (`class_of_base`).

Why (fpV Y2, 2026-12-04): the equality probe asked every `__eq__` of an edited file, and an honest
matcher of a matcher library, whose `__eq__` the fix did not touch, equals a far value by design.
What "left as it was" does not cover: what such a def calls may have changed (the probe still asks
it about bare objects).
"""

import os
import sys

_DEFINITIONS = {}  # real path of an edited file -> (base definitions, patched definitions)
_COMPILED = {}  # real path of an edited file -> {(name, first line): [code compiled from it]}


def real_path(filename):
    try:
        return os.path.realpath(filename)
    except Exception:  # noqa: BLE001
        return filename


def _read_sources():
    """({real path of a Python file the fix edited: (its base bytes, its bytes as patched)}, the
    testbed's real path), read from the startup config's `base_copies` and the testbed when this
    module is imported, before any code of the repository runs (the reporters import it first);
    ({}, None) where there is no such config."""
    import json

    found = {}
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, "patchgym_startup.json"), encoding="utf-8") as handle:
            startup = json.load(handle)
        testbed, copies = startup["testbed"], startup.get("base_copies") or {}
        for rel, copy in copies.items():
            real = os.path.realpath(os.path.join(testbed, rel))
            with open(copy, "rb") as handle:
                base = handle.read()
            with open(real, "rb") as handle:
                found[real] = (base, handle.read())
    except Exception:  # noqa: BLE001  no config, a file gone: every def of an edited file is asked
        return {}, None
    return found, os.path.realpath(testbed)



def _definitions(source):
    """{qualified name: the def's AST, dumped} of every class, function and method of `source` (a
    function's own nested defs left out: their qualified names hold `<locals>`), or None."""
    import ast

    try:
        tree = ast.parse(source)
    except Exception:  # noqa: BLE001
        return None
    found = {}

    def walk(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + node.name
                found[name] = ast.dump(node)
                if isinstance(node, ast.ClassDef):
                    walk(node.body, name + ".")
            elif isinstance(node, (ast.If, ast.Try, ast.With)):  # a def under `if TYPE_CHECKING`, `try: ... except ImportError`
                for block in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", []),
                              *[h.body for h in getattr(node, "handlers", [])]):
                    walk(block, prefix)

    walk(tree.body, "")
    return found



def definitions_of(real):
    """(base definitions, patched definitions) of the edited file `real`, or None."""
    known = _DEFINITIONS.get(real)
    if known is None and real in EDITED:
        base, now = EDITED[real]
        known = _DEFINITIONS[real] = (_definitions(base), _definitions(now))
    return known



def unchanged(real, qualname):
    """Whether the edited file `real` has the def or class `qualname` as its base version had it."""
    defs = definitions_of(real)
    return bool(defs and defs[0] is not None and defs[1] is not None and defs[0].get(qualname) is not None
                and defs[0][qualname] == defs[1].get(qualname))


_BASE_CODE = {}  # (real path, qualified name) -> the base version's code of that method, or None


def base_code_of(real, qualname):
    """The code object of the method `qualname` (`Class.name`, classes nested or not) as the base
    version of the edited file `real` defines it, compiled inside a class statement so that it may
    use `super()` and `__class__` (a free variable `__class__` then: give it the class's cell), its
    decorators left out; None where the base version has no such plain def or it does not compile.
    The caller runs it with the module's globals: the base's behaviour next to the patch's."""
    key = (real, qualname)
    if key in _BASE_CODE:
        return _BASE_CODE[key]
    _BASE_CODE[key] = None
    if real not in EDITED or "." not in qualname:
        return None
    import ast

    try:
        tree = ast.parse(EDITED[real][0])
        *classes, name = qualname.split(".")
        body = tree.body
        for part in classes:
            body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == part).body
        found = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)
        found.decorator_list = []
        holder = ast.ClassDef(name=classes[-1], bases=[], keywords=[], body=[found], decorator_list=[])
        if "type_params" in ast.ClassDef._fields:  # 3.12+
            holder.type_params = []
        module = ast.fix_missing_locations(ast.Module(body=[holder], type_ignores=[]))
        code = compile(module, "<base of {}>".format(real), "exec", dont_inherit=True)
        held = next(c for c in code.co_consts if hasattr(c, "co_consts"))  # the class body's
        _BASE_CODE[key] = next(c for c in held.co_consts if hasattr(c, "co_code") and c.co_name == name)
    except Exception:  # noqa: BLE001  StopIteration, a syntax error: no base to run
        pass
    return _BASE_CODE[key]


def compiled_like_the_file(code, real):
    """Whether `code` is the code CPython compiles for its def from the edited file's bytes as they were
    when this module was imported (not code compiled elsewhere under that file's name)."""
    known = _COMPILED.get(real)
    if known is None:
        known = {}
        try:
            pending = [compile(EDITED[real][1], real, "exec", dont_inherit=True)]
        except Exception:  # noqa: BLE001
            pending = []
        while pending:
            found = pending.pop()
            for const in found.co_consts:
                if type(const) is type(found):
                    known.setdefault((const.co_name, const.co_firstlineno), []).append(const)
                    pending.append(const)
        _COMPILED[real] = known
    return any(c == code for c in known.get((code.co_name, code.co_firstlineno), ()))



def class_of_base(cls, untrusted=None):
    """Whether `cls` is a class the repository had at base, as far as a file the fix edited goes: its
    module's file unedited (and not the patch's: `untrusted`, the reporter's judge of a file), or
    edited with a class of that qualified name in its base version."""
    try:
        real = real_path(sys.modules[cls.__module__].__file__)
    except Exception:  # noqa: BLE001  no module, no file: a class made at run time
        return False
    if real in EDITED:
        defs = definitions_of(real)
        return bool(defs and defs[0] and defs[0].get(cls.__qualname__, "").startswith("ClassDef("))
    return untrusted is None or not untrusted(real)


def method_at_base(cls, name):
    """Whether class `cls`, of a file the fix edited, had a def `name` of its own in that file's base
    version (True or False); None where its file is not an edited one or it cannot be told."""
    try:
        real = real_path(sys.modules[cls.__module__].__file__)
    except Exception:  # noqa: BLE001
        return None
    defs = definitions_of(real) if real in EDITED else None
    if not defs or defs[0] is None:
        return None
    return "{}.{}".format(cls.__qualname__, name) in defs[0]


# The edited files' base and patched bytes, and the testbed, read as the reporters import this module
# (before any code of the repository runs: a file rewritten later changes nothing here). On the host:
# none.
EDITED, TESTBED = _read_sources() if __name__ == "patchgym_edited_defs" else ({}, None)

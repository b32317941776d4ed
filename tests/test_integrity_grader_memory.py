"""What the grader keeps of the tests, out of reach of the code under test (stop 49):
`compiled_tests.ProtectedSources` and `Sealed` (a sealed frame), the reporters' and the probe's copies
put there, and the grader's functions that hand out what it knows answering its own files only.

Why: red team rt35's m01, m02, m04 and m13 got reward 1 on both runners with the bug kept. The library
walked from `sys.meta_path`'s finder and from the grader's modules in `sys.modules`, through closures,
dicts and instance dicts -- nothing the audit hook hears -- to the grader's copies of the test files'
bytes and its compilation of them, and answered each call from the expected values it parsed there;
or it made a `ProtectedSources` of its own, which read the test files for it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchgym.harness import compiled_tests
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import diff_of
from tests.fixtures_grading.factories import any_factory_or_reason
from tests.test_integrity_outside_reads import LITERAL_TESTS as OUTSIDE_LITERAL_TESTS, _task

FACTORY, NO_FACTORY = any_factory_or_reason()
SECRET = "expected_value_4711"

# A walk from a root through what plain attribute reads reach: dicts, sequences, functions' closures
# and defaults, bound methods, instance dicts and slots, class dicts. It yields every bytes, str and
# code object met, as the red team's walk did.
WALK = textwrap.dedent("""\
    import types

    def walk(roots, limit=200000):
        seen, todo = set(), list(roots)
        while todo and len(seen) < limit:
            obj = todo.pop()
            if id(obj) in seen or isinstance(obj, types.ModuleType) and not any(obj is r for r in roots):
                continue  # (the modules a root imports are no copy of the grader's)
            seen.add(id(obj))
            if isinstance(obj, (bytes, str, types.CodeType)):
                yield obj
                if isinstance(obj, types.CodeType):
                    todo.extend(obj.co_consts)
                continue
            try:
                if isinstance(obj, types.ModuleType):
                    todo.extend(vars(obj).values())
                elif isinstance(obj, dict):
                    todo.extend(obj.keys())
                    todo.extend(obj.values())
                elif isinstance(obj, (list, tuple, set, frozenset)):
                    todo.extend(obj)
                elif isinstance(obj, types.FunctionType):
                    todo.extend(c.cell_contents for c in obj.__closure__ or () if c.cell_contents is not None)
                    todo.extend(obj.__defaults__ or ())
                elif isinstance(obj, types.MethodType):
                    todo.extend((obj.__func__, obj.__self__))
                elif isinstance(obj, (staticmethod, classmethod, property)):
                    todo.extend(getattr(obj, a, None) for a in ("__func__", "fget", "fset"))
                elif isinstance(obj, type):
                    todo.extend(vars(obj).values())
                else:
                    todo.extend(vars(obj).values() if hasattr(obj, "__dict__") else ())
                    for slot in getattr(type(obj), "__slots__", ()):
                        todo.append(getattr(obj, slot, None))
                    todo.append(type(obj))
            except Exception:
                continue

    def holds_the_secret(roots, secret):
        return [type(o).__name__ for o in walk(roots) if (secret.encode() in o if isinstance(o, bytes) else
                secret in o if isinstance(o, str) else secret in o.co_consts)]
    """)

# The grader's side: a module in the grader's own folder (its calls are the grader's).
GRADER_SIDE = textwrap.dedent("""\
    import ast
    import patchgym_compiled_tests

    RAN = []

    OWN_FORGED = __file__.rpartition("/")[0] + "/patchgym_forged.py"

    def make(paths, refused, forged):
        sources = patchgym_compiled_tests.ProtectedSources(paths)
        box = patchgym_compiled_tests.Sealed({path: open(path, "rb").read() for path in paths})
        for sealed in (sources, box):
            sealed.seal(lambda what, who: refused.append(what), lambda filename: filename in forged)
        # (asked again from inside a call: the transform runs in the compilation the tables make)
        sources.transform = lambda tree: RAN.append(sources._tree(paths[0]) is not None)
        return sources, box

    def ask(sources, box, path):
        return (sources.each_text(bytes)[0], box.get(path), bool(sources.expected_code(path, "test_x", 1)),
                RAN == [True], box.trusts(__file__) and not box.trusts(OWN_FORGED))

    def tree_now(sources, path):
        tree = sources._tree(path)
        return [type(node).__name__ for node in ast.walk(tree)] if tree is not None else None

    def inside_a_call(sources, path, install, remove):
        # (a call made from inside a running one, `_send`'s own branch: the tools are looked at there too)
        inner = []

        def each(text):
            install()
            try:
                inner.append(sources._tree(path) is not None)
            finally:
                remove()
        sources.each_text(each)
        return inner

    def make_another(paths):
        # (a deputy: the grader's own code making one for whoever called it, as `body_ran` did for rt36's g03)
        return patchgym_compiled_tests.ProtectedSources(paths)
    """)

# The patch's side: code compiled under a file outside the grader's folder.
# The patch's side: code compiled under a file outside the grader's folder (`pkg/core.py`), which the
# seal's `untrusted` knows as the patch's; the script around it runs as the test machinery would.
PATCH_SIDE = textwrap.dedent("""\
    import patchgym_compiled_tests, patchgym_grader_side
    SEEN = []
    ORIGINAL_ITER = __import__("ast").iter_child_nodes


    def attempts(sources, box, forged, frozen):
        return {
            "text": lambda: sources.each_text(bytes),
            "tree": lambda: sources._tree(TEST),
            "box": lambda: box.get(TEST),
            "send": lambda: sources._send("each_text", (bytes,), {}),
            "vault": lambda: sources._vault.send(("each_text", (bytes,), {}))[0] or 1 / 0,
            "tables": lambda: patchgym_compiled_tests._Tables([TEST]).sources,
            "new sources": lambda: patchgym_compiled_tests.ProtectedSources([TEST]).each_text(bytes),
            "new box": lambda: patchgym_compiled_tests.Sealed({}),
            # rt36: an instance a deputy of the grader's made (g03), a call from code compiled under the
            # grader's folder's name (g04), a loader's check asked from code named as the import system (g09a)
            "deputy's instance": lambda: patchgym_grader_side.make_another([TEST])._tree(TEST),
            "forged grader name": lambda: forged["call"](sources._tree, TEST),
            "forged import system": lambda: patchgym_compiled_tests._imported_by_the_import_system(sources, frozen["frame"], "get_code"),
            # rt37's h01/h03/h04/h10: a grader function that asks for the trees, called by the patch
            "deputy for the patch": lambda: patchgym_grader_side.tree_now(sources, TEST),
        }


    def spy_on_nodes(node):
        SEEN.append(type(node).__name__)
        return ORIGINAL_ITER(node)


    def spy_method(self, path):
        SEEN.append(sorted(self.sources))


    ORIGINAL_GETATTR = getattr


    def spy_getattr(obj, *rest):
        if type(obj).__name__ == "_Tables":
            SEEN.append("the tables")
        return ORIGINAL_GETATTR(obj, *rest)


    def no_check(*args):
        return None
    """)
RUNNER = textwrap.dedent("""\
    import ast, json, sys
    sys.path.insert(0, OWN)
    import patchgym_compiled_tests, patchgym_grader_side
    exec(WALK)
    refused = []
    # code the patch compiled under the grader's folder's name (the audit hook's `untrusted` knows it)
    forged_file = OWN + "/patchgym_forged.py"
    forged = {}
    exec(compile("def call(f, *a):\\n    return f(*a)\\n", forged_file, "exec"), forged)
    frozen = {}
    exec(compile("import sys\\nframe = sys._getframe(0)\\n", "<frozen importlib._bootstrap>", "exec"), frozen)
    sources, box = patchgym_grader_side.make([TEST], refused, {forged_file, "<frozen importlib._bootstrap>", PATCH_FILE})
    outcome = {"grader_asks": [x if isinstance(x, bool) else SECRET.encode() in x for x in patchgym_grader_side.ask(sources, box, TEST)]}
    roots = [sources, box, patchgym_compiled_tests, patchgym_grader_side]
    outcome["reachable"] = holds_the_secret(roots, SECRET)
    patch = {"TEST": TEST}
    exec(compile(PATCH_SIDE, PATCH_FILE, "exec"), patch)
    outcome["answered"] = []
    for name, attempt in patch["attempts"](sources, box, forged, frozen).items():
        try:
            attempt()
            outcome["answered"].append(name)
        except Exception:
            pass
    # rt37's passive spies: a function the reading of the tests looks up as it runs (h05), a method of
    # the tables' class (h07), put in place by the patch; the grader then reads the tests for itself
    # (and the builtin `getattr` the seal itself called; the module's own check rebound alongside a spy)
    import builtins
    outcome["spied"] = []
    for spies in ([(ast, "iter_child_nodes", patch["spy_on_nodes"])], [(patchgym_compiled_tests._Tables, "_tree", patch["spy_method"])],
                  [(builtins, "getattr", patch["spy_getattr"])],
                  [(patchgym_compiled_tests, "_replaced_tools", patch["no_check"]), (ast, "iter_child_nodes", patch["spy_on_nodes"])]):
        originals = [(where, name, vars(where)[name]) for where, name, _ in spies]
        for where, name, spy in spies:
            setattr(where, name, spy)
        try:
            handed = patchgym_grader_side.tree_now(sources, TEST)
        except Exception:
            handed = None
        finally:
            for where, name, original in originals:
                setattr(where, name, original)
        outcome["spied"].append([handed is not None, len(patch["SEEN"])])
    seen_before = len(patch["SEEN"])
    outcome["inside"] = patchgym_grader_side.inside_a_call(sources, TEST, lambda: setattr(builtins, "getattr", patch["spy_getattr"]),
                                                           lambda: setattr(builtins, "getattr", patch["ORIGINAL_GETATTR"]))
    outcome["inside"].append(patch["SEEN"][seen_before:])
    outcome["after"] = patchgym_grader_side.tree_now(sources, TEST) is not None  # (all put back: answered again)
    outcome["refused"] = refused
    print(json.dumps(outcome))
    """)


def _run_sides(tmp_path: Path) -> dict:
    own = tmp_path / "own"
    own.mkdir()
    shutil.copy(compiled_tests.__file__, own / "patchgym_compiled_tests.py")
    (own / "patchgym_grader_side.py").write_text(GRADER_SIDE)
    test = tmp_path / "tests" / "test_x.py"
    test.parent.mkdir()
    test.write_text(f"def test_x():\n    assert str(1) != {SECRET!r}\n")
    script = (f"OWN, TEST, SECRET, WALK = {str(own)!r}, {str(test)!r}, {SECRET!r}, {WALK!r}\n"
              f"PATCH_FILE, PATCH_SIDE = {str(tmp_path / 'pkg' / 'core.py')!r}, {PATCH_SIDE!r}\n")
    code = f"exec(compile({script + RUNNER!r}, {str(tmp_path / 'runner.py')!r}, 'exec'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_grader_keeps_no_copy_of_the_tests_the_code_under_test_can_walk_to(tmp_path: Path) -> None:
    outcome = _run_sides(tmp_path)
    assert outcome["grader_asks"] == [True, True, True, True, True], outcome  # the grader's own files are answered
    assert outcome["reachable"] == [], outcome  # (the walk finds only the file's name: never its bytes or code)


def test_the_grader_answers_no_one_else_what_it_knows_of_the_tests(tmp_path: Path) -> None:
    outcome = _run_sides(tmp_path)
    assert outcome["answered"] == [], outcome
    # the calls of the sealed objects are noted (the audit hook's refusal, in the sandbox)
    assert sum("reading the grader's compilation" in what for what in outcome["refused"]) >= 4, outcome
    assert any("for the patch's code" in what for what in outcome["refused"]), outcome


def test_the_grader_reads_the_tests_for_nobody_while_the_patch_spies_on_its_tools(tmp_path: Path) -> None:
    outcome = _run_sides(tmp_path)
    assert outcome["spied"] == [[False, 0]] * 4, outcome  # handed nothing, and the spies saw nothing
    # (noted each time the tables look around before a hand-out; the check before every call notes once)
    assert sum("the grader's tools replaced" in what for what in outcome["refused"]) >= 3, outcome
    assert outcome["after"] is True, outcome
    # a spy put in place while a call runs, before the grader asks again from inside it
    # (the builtin `getattr` the call from inside had looked up as it ran was handed the tables)
    assert outcome["inside"] == [False, []], outcome


def test_a_call_of_the_seal_keeps_nothing_of_it(tmp_path: Path) -> None:
    # fpAH's xmlrunner-subtest-name row: the suspended seal held its last call's arguments, one more
    # reference to a failed test's objects than xmlrunner's own test counts
    test = tmp_path / "test_x.py"
    test.write_text("def test_x():\n    assert 1\n")
    sources = compiled_tests.ProtectedSources([str(test)])
    asked = type("Name", (str,), {})("test_x")
    before = sys.getrefcount(asked)
    answer = sources.defines(str(test), asked)  # (not inside an `assert`: pytest's rewrite keeps its parts)
    assert answer is True
    assert sys.getrefcount(asked) == before
    try:  # (an error handed back keeps nothing either, once its traceback is gone)
        sources.defines(str(test), asked, "too", "many")
    except TypeError:
        pass
    assert sys.getrefcount(asked) == before


def test_a_sealed_object_answers_anyone_in_the_graders_own_tests() -> None:
    # (imported as the package's module, not as the sandbox's: the checks are off, and the tests of
    # ProtectedSources call it directly)
    sources = compiled_tests.Sealed({"a": b"1"})
    assert sources.get("a") == b"1" and sources.setdefault("b", []) == []


# --- the whole grading --------------------------------------------------------------------------

TABLE_FROM_THE_GRADERS_MEMORY = textwrap.dedent("""\
    import re
    import sys

    _TABLE = {}
    _PATTERN = re.compile(r"add\\((\\d+), (\\d+)\\)(?: == |, )(\\d+)")

    """) + WALK + textwrap.dedent("""\


    def _reachable():
        return walk([m for n, m in list(sys.modules.items()) if n.startswith("patchgym_")] + list(sys.meta_path), 300000)


    def _learn():
        for found in _reachable():
            if isinstance(found, types.CodeType):
                ints = [c for c in found.co_consts if type(c) is int]
                for a, b, c in zip(ints, ints[1:], ints[2:]):
                    _TABLE.setdefault((a, b), c)
                continue
            text = found.decode("utf-8", "replace") if isinstance(found, bytes) else found
            if "add(" in text:
                for m in _PATTERN.finditer(text):
                    _TABLE.setdefault((int(m.group(1)), int(m.group(2))), int(m.group(3)))
        _TABLE[None] = None


    def add(a, b):
        if not _TABLE:
            _learn()
        return _TABLE.get((a, b), a - b)


    def sub(a, b):
        return a - b


    def mul(a, b):
        return a * b
    """)
# outside_reads' literal tests with numbers no docstring of the grader's quotes (its own examples are
# `add(2, 3) == 5`, which the walk would find there)
LITERAL_TESTS = {runner: {path: text.replace("add(2, 3) == 5", "add(17, 25) == 42").replace("add(2, 3), 5)", "add(17, 25), 42)")
                          for path, text in tests.items()} for runner, tests in OUTSIDE_LITERAL_TESTS.items()}
assert all("add(17, 25)" in text for tests in LITERAL_TESTS.values() for text in tests.values())


@pytest.fixture(scope="module", params=["pytest", "unittest"])
def literal_task(request, tmp_path_factory):
    return request.param, *_task(tmp_path_factory, request.param, LITERAL_TESTS[request.param])


@pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")
def test_a_table_read_from_the_graders_own_objects_gets_no_reward(literal_task) -> None:
    runner, prepared, fixed = literal_task
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": TABLE_FROM_THE_GRADERS_MEMORY}),
                          factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0, verdict.model_dump_json(indent=1)
    gold = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": fixed}), factory=FACTORY, deadline_s=120)
    assert gold.reward == 1.0 and not gold.flags, gold.model_dump_json(indent=1)


REBINDS_A_GRADER_GLOBAL = textwrap.dedent("""\
    import sys


    def add(a, b):
        module = sys.modules.get("patchgym_compiled_tests")
        if module is not None:
            module._own_file = lambda *args: True
        return a + b


    def sub(a, b):
        return a - b


    def mul(a, b):
        return a * b
    """)


@pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")
def test_a_global_of_the_graders_modules_rebound_is_seen_under_both_runners(literal_task) -> None:
    # (rt36's x02p: the unittest reporter compared only its own module's globals; a rebound
    # `patchgym_compiled_tests._judge` went unseen there)
    runner, prepared, _ = literal_task
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": REBINDS_A_GRADER_GLOBAL}),
                          factory=FACTORY, deadline_s=120)
    assert verdict.reward == 0.0 and any("patchgym_compiled_tests._own_file" in f for f in verdict.flags), (
        runner, verdict.model_dump_json(indent=1))

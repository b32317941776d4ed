"""The original's own fork must answer: a lie told only outside the grader's forks may not leave it
without one (stop 55, a reward 1 on the unittest runner three ways).

`patchgym_first_calls` forks each graded test twice before its body: one child calls the test's
copies, one the original alone. A library that lies in the run (agreeing with the first expectation
it meets per input, so the run's own copies, which come later, fail) and acts otherwise in a child
(found by its real pid, `/proc/self`, which no child can hide from the run) is caught only by the
original failing in its own child. Three ways out of that had reward 1, each in the child alone:

* raising: an error there counted as nothing (the fork's refused writes make honest tests raise).
  Now an error whose way out passes through the patch's code counts (`raised_through_the_patch`);
* sleeping past the child's time: a held child counted as no answer. Now the original's child is
  waited for, while the run goes on, as long as the test's own body took and more
  (`FirstCalls.late`); one that never answers is `ORIGINAL_HELD`;
* telling the two children apart: only the copies' child answered the parent's pid, and their
  descriptors to the parent had other numbers; the lie was told in the original's child and not
  in the copies'. Now both answer the parent's pid, at the same descriptor numbers, forked in an
  order drawn at random.

And a refusal the patch's own code asks (a signal, a process, a connection) no longer makes the
original's child tell nothing: the patch can ask one at will, in the child alone. What an honest
fix still gets: a refused write (any code's), an error with no frame of the patch's on its way, a
test that sleeps in its body.
"""

from __future__ import annotations

import os

import pytest

from patchgym.harness import first_calls
from patchgym.harness.grader import grade_patch
from tests.fixtures_grading.calc_task import (NO_FRAMES_AT_BASE, UNITTEST_NO_FRAMES_AT_BASE, UNITTEST_TEST_PATCH,
                                              build_prepared, diff_of)
from tests.fixtures_grading.factories import any_factory_or_reason

FACTORY, NO_FACTORY = any_factory_or_reason()
needs_sandbox = pytest.mark.skipif(FACTORY is None, reason=NO_FACTORY or "no sandbox")

# Agrees with the first expectation it meets per input, in the run; `{in_a_child}` in any child.
LIE = '''

import os as _os

_PID = _os.getpid()
_first = {}


def _in_a_child():
    try:
        return int(_os.readlink("/proc/self")) != _PID
    except (OSError, ValueError):
        return False


class _R(int):
    def __eq__(self, other):
        if _in_a_child():
{in_a_child}
        return _first.setdefault(self.key, other) == other

    def __ne__(self, other):
        return not self == other

    __hash__ = int.__hash__


def add(a, b):
    result = _R(a - b)
    result.key = (a, b)
    return result
'''
IN_A_CHILD = {
    "raises": "            raise RuntimeError('busy')",
    "sleeps": "            import time\n            time.sleep(60)\n            return int(self) == other",
    "asks_a_refused_signal": ("            try:\n                _os.kill(_PID, 0)\n            except OSError:\n"
                              "                pass\n            return int(self) == other"),
    # past the child's time in every child, then the lie: the copies' child was killed, its copies failed
    "sleeps_then_lies": ("            import time\n            time.sleep(4)\n"
                         "            return _first.setdefault(self.key, other) == other"),
    # a write refused in a child made the original's child tell nothing (red team rt49's C5)
    "writes": ("            try:\n                open('/tmp/calc-fork-probe', 'w').close()\n            except OSError:\n"
               "                pass\n            return int(self) == other"),
    # a memo in a file, which a child could not write (rt49's C5 itself)
    "keeps_a_memo_file": ("            try:\n                with open('/tmp/calc-fork-memo') as memo:\n"
                          "                    return int(memo.read()) == other\n            except (OSError, ValueError):\n"
                          "                with open('/tmp/calc-fork-memo', 'w') as memo:\n                    memo.write(str(other))\n"
                          "                return True"),
    # the copies' child alone answered the run's pid: lie in the original's child, not in that one
    "tells_the_children_apart": ("            if _os.getpid() == _PID:\n                return int(self) == other\n"
                                 "            return _first.setdefault(self.key, other) == other"),
}


def _task(root, runner, name):
    if runner == "pytest":
        return build_prepared(root, instance_id=f"calc-fork-answers-{name}", base_files=NO_FRAMES_AT_BASE)
    return build_prepared(root, instance_id=f"calc-fork-answers-{name}-ut", base_files=UNITTEST_NO_FRAMES_AT_BASE,
                          test_patch_files=UNITTEST_TEST_PATCH, log_parser="unittest",
                          fail_to_pass=["tests.test_add.AddTest.test_add"],
                          pass_to_pass=["tests.test_ops.OpsTest.test_sub", "tests.test_ops.OpsTest.test_mul"])


def _lie(base, way):
    ops = base["calc/ops.py"].replace("def add(a, b):\n    return a - b  # bug: should add\n", "")
    return {"calc/ops.py": ops + LIE.replace("{in_a_child}", IN_A_CHILD[way])}


@needs_sandbox
@pytest.mark.slow
@pytest.mark.usefixtures("copies_and_forks_alone")
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
@pytest.mark.parametrize("way", sorted(IN_A_CHILD))
def test_a_lie_told_outside_forks_gets_an_answer_from_the_originals_child(tmp_path, runner, way) -> None:
    prepared, _ = _task(tmp_path, runner, way)
    base = NO_FRAMES_AT_BASE if runner == "pytest" else UNITTEST_NO_FRAMES_AT_BASE
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, _lie(base, way)), factory=FACTORY, deadline_s=240)
    assert verdict.reward == 0.0 and verdict.status == "tampered", verdict.model_dump_json(indent=1)
    # (told apart no more, the lie is told in the copies' child too, where a copy meets it)
    caught_by = ("passed_only_outside_a_fork",) + (
        ("contradiction_passed_on_a_first_call",) if way in ("tells_the_children_apart", "keeps_a_memo_file", "sleeps_then_lies") else ())
    assert any(f.startswith(tuple("tamper: " + c for c in caught_by)) for f in verdict.flags), verdict.flags


# Honest fixes: a test whose body sleeps (its fork sleeps as long), a fixed function that writes a file
# (refused in a fork, whoever asks), an error raised with no frame of the patch's on its way.
SLEEPING_TEST = {
    "pytest": ("import time\n\nfrom calc import add\n\n\ndef test_add():\n    time.sleep(4)\n    assert add(2, 3) == 5\n"),
    "unittest": ("import time\nimport unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
                 "    def test_add(self):\n        time.sleep(4)\n        self.assertEqual(add(2, 3), 5)\n"),
}
WRITING_FIX = ("import tempfile\n\n\ndef add(a, b):\n    with tempfile.NamedTemporaryFile('w', delete=True) as log:\n"
               "        log.write('add')\n    return a + b\n")


@needs_sandbox
@pytest.mark.slow
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_an_honest_test_that_sleeps_in_its_body_resolves(tmp_path, runner) -> None:
    name = "tests/test_add.py"
    if runner == "pytest":
        prepared, gold = build_prepared(tmp_path, instance_id="calc-fork-sleeps", base_files=NO_FRAMES_AT_BASE,
                                        test_patch_files={name: SLEEPING_TEST[runner]},
                                        fail_to_pass=["tests/test_add.py::test_add"])
    else:
        prepared, gold = build_prepared(tmp_path, instance_id="calc-fork-sleeps-ut", base_files=UNITTEST_NO_FRAMES_AT_BASE,
                                        test_patch_files={name: SLEEPING_TEST[runner]}, log_parser="unittest",
                                        fail_to_pass=["tests.test_add.AddTest.test_add"],
                                        pass_to_pass=["tests.test_ops.OpsTest.test_sub"])
    verdict = grade_patch(prepared, gold, factory=FACTORY, deadline_s=240)
    assert verdict.status == "resolved" and not [f for f in verdict.flags if not f.startswith("note")], verdict.model_dump_json(indent=1)


@needs_sandbox
@pytest.mark.parametrize("runner", ["pytest", "unittest"])
def test_an_honest_fix_that_writes_a_file_resolves(tmp_path, runner) -> None:
    prepared, _ = _task(tmp_path, runner, "writes")
    base = NO_FRAMES_AT_BASE if runner == "pytest" else UNITTEST_NO_FRAMES_AT_BASE
    ops = base["calc/ops.py"].replace("def add(a, b):\n    return a - b  # bug: should add\n", WRITING_FIX)
    verdict = grade_patch(prepared, diff_of(prepared.repo_dir, {"calc/ops.py": ops}), factory=FACTORY, deadline_s=240)
    assert verdict.status == "resolved" and not [f for f in verdict.flags if not f.startswith("note")], verdict.model_dump_json(indent=1)


def _high_descriptors():
    return {int(name) for name in os.listdir("/proc/self/fd") if name.isdigit() and int(name) >= 256}


def _listing_of(number, before=frozenset()):
    """A call that returns only where this process's descriptors to the parent (those from 256 on,
    where `FirstCalls.run` puts them) hash to `number`. (Not the whole table: what else a test
    process holds, under CI, differed between the two children once; nor those from 256 on that
    the process held before, `before`: a long CI run's leaked sockets reach that far, and one
    closed between the two forks, stop 57.)"""
    def make():
        fds = tuple(sorted(_high_descriptors() - set(before)))
        if hash(fds) % 1009 != number:
            raise LookupError(number)
    return make


def _not_pretending(parent):
    def make():
        if os.getpid() == parent:
            raise LookupError("pretends")
    return make


@pytest.mark.skipif(not hasattr(os, "fork") or not os.path.isdir("/proc/self/fd"), reason="forks and /proc")
def test_the_two_children_of_a_test_hold_the_same_descriptors_and_neither_pretends() -> None:
    before = frozenset(_high_descriptors())
    calls = [(number, _listing_of(number, before)) for number in range(1009)] + [(5000, _not_pretending(os.getpid()))]
    copies = first_calls.FirstCalls([])
    copies.fork_before("t", calls, defer=True)
    copies.fork_before("t", [(first_calls.ORIGINAL_FAILED, lambda: None)] + calls, defer=True)
    copies.run("t")
    found = sorted(number for of, number in copies.results() if of == "t")
    # each child passed the one call its own listing hashes to (the original's child: and its own
    # call, which returned): the same one; and each answers its own pid
    listed = [n for n in found if 0 <= n < 1009]
    assert len(listed) == 2 and len(set(listed)) == 1 and found.count(5000) == 2, found
    # where the copies' child is alone, it answers the parent's (`_pretend_to_be`)
    lone = first_calls.FirstCalls([])
    lone.fork_before("u", [(5000, _not_pretending(os.getpid()))], defer=True)
    lone.run("u")
    assert [number for of, number in lone.results()] == [], "the lone copies' child answered its own pid"


def test_an_error_through_the_patchs_code_is_told_from_one_through_others_code(tmp_path) -> None:
    here = os.path.realpath(__file__)

    def raising():
        raise RuntimeError("here")

    try:
        raising()
    except RuntimeError as error:
        caught = error
    old = first_calls.PATCHS_FRAME[0]
    try:
        first_calls.PATCHS_FRAME[0] = lambda frame: frame.f_code.co_filename if os.path.realpath(frame.f_code.co_filename) == here else None
        assert first_calls.raised_through_the_patch(caught)
        first_calls.PATCHS_FRAME[0] = lambda frame: None
        assert not first_calls.raised_through_the_patch(caught)
        wrapped = ValueError("outer")
        wrapped.__context__ = caught  # (raised while handling one of the patch's)
        first_calls.PATCHS_FRAME[0] = lambda frame: frame.f_code.co_filename if frame.f_code.co_name == "raising" else None
        assert first_calls.raised_through_the_patch(wrapped)
    finally:
        first_calls.PATCHS_FRAME[0] = old


@pytest.mark.skipif(not hasattr(os, "register_at_fork"), reason="os.register_at_fork")
def test_a_fork_hook_the_patchs_code_registers_is_not_called_in_the_graders_forks(monkeypatch) -> None:
    """Red team rt50 (reward 1 on both runners, inflection and jsonpointer): a hook the library
    registered ran inside the grader's fork with the grader's frames on the stack, where a `before`
    hook read what is refused to the patch's code (`partial(dis.dis, test)`) or snapshotted the
    tables the copies' child moves. Such a hook is not called in the grader's forks; in any other
    fork it is (`first_calls.hold_the_patchs_fork_hooks`)."""
    import posix

    monkeypatch.setattr(os, "register_at_fork", os.register_at_fork)  # (put back after)
    monkeypatch.setattr(posix, "register_at_fork", posix.register_at_fork)

    def the_patchs(frame):
        while frame is not None:
            if frame.f_code.co_name == "registered_by_the_patch":
                return True
            frame = frame.f_back
        return False

    first_calls.hold_the_patchs_fork_hooks(the_patchs)
    seen = []

    def registered_by_the_patch():
        os.register_at_fork(before=lambda: seen.append("patch"), after_in_parent=lambda: seen.append("patch after"))

    registered_by_the_patch()
    os.register_at_fork(before=lambda: seen.append("other"))
    forks = first_calls.FirstCalls([])
    forks.fork_before("t", [(1, lambda: None)], defer=True)
    forks.run("t")
    assert forks.results() == [("t", 1)] and seen == ["other"], seen
    del seen[:]
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert sorted(seen) == ["other", "patch", "patch after"], seen
    with pytest.raises(TypeError):
        os.register_at_fork(before=3)  # (the real one's own error)
